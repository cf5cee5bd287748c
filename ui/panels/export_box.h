// A one-line export widget for the panels: a path field (the extension picks the format), a
// button, and a message saying where the file went or what went wrong. The writing itself
// is core/export (the same code as `attnviz-cli export`) or the panel's own writer.
#pragma once
#include <functional>
#include <string>

#include "core/export/export.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class ExportBox {
 public:
  // `hint`: the path field's tooltip; `message_below`: the message on its own wrapped line
  // under the row instead of beside it.
  explicit ExportBox(std::string default_path,
                     std::string hint = "the extension picks the format: .png .svg .csv (one matrix) .npy",
                     bool message_below = false);
  // Draws the row; exports `what` of the current trace when the button is pressed.
  void draw(const FrameContext& ctx, const ExportOptions& what);
  // The same row for any writer: when the button is pressed, write(path) writes the file and
  // returns a note ("" for none), or throws (attnviz::Error says what went wrong).
  void draw(const std::function<std::string(const std::string& path)>& write);
  const std::string& message() const { return message_; }

 private:
  char path_[1024] = {};
  std::string hint_;
  bool message_below_ = false;
  std::string message_;
  bool failed_ = false;
};

}  // namespace attnviz::ui
