// Head scan: what each head does over a whole corpus (core/engine/head_scan.h), run on a
// thread with progress and Cancel (ScanJob). A scatter plot puts every head by two chosen
// metrics, coloured by layer; clicking a head selects it and lists its strongest examples;
// clicking an example loads that window's text, selects the head and the query. Finished
// scans are kept beside the settings and reopen at once.
#pragma once
#include <string>
#include <vector>

#include "ui/jobs/analysis_jobs.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class HeadScanPanel : public Panel {
 public:
  // `cache_dir`: where finished scans are kept ("" keeps none: screenshots and tests).
  explicit HeadScanPanel(std::string cache_dir) : Panel("Head scan", /*open=*/false), job_(std::move(cache_dir)) {}
  bool idle() const { return job_.idle(); }
  ScanJob::Status status() const { return job_.status(); }
  ImVec4 plot_rect() const { return plot_rect_; }
  // Starts a scan of `corpus` ("" the shipped corpus) when the model is there (--scan).
  void start_at_first_model(const std::string& corpus) { pending_start_ = true, start_corpus_ = corpus; }
  const std::string& example_error() const { return example_error_; }

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }

 private:
  void start(FrameContext& ctx);
  void draw_plot(FrameContext& ctx, const ScanResult& r);
  void draw_examples(FrameContext& ctx, const ScanResult& r);

  ScanJob job_;
  char corpus_[1024] = "";
  int window_ = 0;  // 0: min(256, block size)
  int x_metric_ = 0, y_metric_ = 1;  // previous_token, induction
  bool pending_start_ = false;
  std::string start_corpus_, example_error_;
  ImVec4 plot_rect_{0, 0, 0, 0};
  const Model* scanned_model_ = nullptr;
  // The selected head's examples as text ("…before[key]between[query]"), read from the corpus
  // once per head (and result).
  std::vector<std::string> snippets_;
  const void* snippets_for_ = nullptr;
  int snippets_layer_ = -1, snippets_head_ = -1;
};

// The corpus that ships with attnviz (assets/corpus/en-prose.txt in the first data
// directory that has it), or "".
std::string shipped_corpus();

}  // namespace attnviz::ui
