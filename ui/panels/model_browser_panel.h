// File → Open model… (Ctrl+O): the models already on the disk (Ollama, the Hugging Face
// cache, LM Studio, llama.cpp's cache; core/model/stores.h) with what they are, the ones
// that cannot open greyed with their reason, a filter, the details of the selected one
// (what the GQA panel would say), a file browser for any other path, and the load in
// progress with Cancel. Opening sets AppState::open_request; the App's ModelLoader loads
// it off the UI thread while the model in use stays on screen.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ui/jobs/model_loader.h"
#include "ui/panels/panel.h"
#include "ui/jobs/store_listing.h"

namespace attnviz::ui {

class ModelBrowserPanel final : public Panel {
 public:
  // `loader` (the App's) says what is loading and is cancelled from here.
  explicit ModelBrowserPanel(ModelLoader& loader);
  // Opens the window and lists the stores again.
  void open_now();
  // The last open that failed (the App's loader result): shown in red until the next open.
  void set_error(const std::string& spec, const std::string& error);
  // Nothing left to wait for: no listing running (the screenshot waits for it).
  bool idle() const { return !listing_.running(); }
  // The entries of the last listing (for the screenshot's sidecar).
  std::shared_ptr<const std::vector<StoredModel>> models() const { return listing_.models(); }

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }

 private:
  void draw_table(FrameContext& ctx, const std::vector<StoredModel>& models);
  void draw_selected(FrameContext& ctx);
  void draw_files(FrameContext& ctx);
  void draw_loading();  // the load in progress (with Cancel) and the last open that failed
  void select(const StoredModel& m);
  void request_open(FrameContext& ctx, const std::string& spec);

  ModelLoader& loader_;
  StoreListing listing_;
  std::string filter_;
  // The selected entry (by path, which a new listing keeps) and its details.
  std::string selected_path_, selected_spec_, selected_name_;
  bool selected_opens_ = false;
  std::string selected_reason_;
  ModelDetails details_;
  std::string error_spec_, error_;
  // The file browser: the folder shown and its entries (read when it changes).
  std::string cwd_, listed_cwd_;
  std::vector<FolderEntry> files_;
  std::string files_error_;
  bool cwd_is_model_ = false;
  std::string path_;  // the path typed
};

}  // namespace attnviz::ui
