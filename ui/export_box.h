// A one-line export widget for the panels: a path field (the extension picks PNG, SVG, CSV
// or NPY), a button, and a message saying where the file went or what went wrong. The
// writing itself is core/export (the same code as `attnviz-cli export`).
#pragma once
#include <string>

#include "core/export/export.h"
#include "ui/panel.h"

namespace attnviz::ui {

class ExportBox {
 public:
  explicit ExportBox(std::string default_path);
  // Draws the row; exports `what` of the current trace when the button is pressed.
  void draw(const FrameContext& ctx, const ExportOptions& what);
  const std::string& message() const { return message_; }

 private:
  char path_[1024] = {};
  std::string message_;
  bool failed_ = false;
};

}  // namespace attnviz::ui
