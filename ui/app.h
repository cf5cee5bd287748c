// The application: owns the inference worker, the AppState, the fonts and every panel;
// builds one frame of the UI (menu, shortcuts, the tiled layout of the panels) and posts the latest
// request to the worker when the text or settings change. GLFW and the GL context stay in
// app/gui_main.cpp.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ui/state/app_state.h"
#include "ui/draw/fonts.h"
#include "ui/jobs/model_loader.h"
#include "ui/layout.h"
#include "ui/panels/panel.h"
#include "ui/state/settings.h"
#include "ui/state/typing_probe.h"
#include "ui/state/worker.h"

namespace attnviz::ui {

class Panel;
class TextPanel;
class TokenStripPanel;
class HeatmapPanel;
class HeadGridPanel;
class GqaPanel;
class NextTokenPanel;
class TrainingPanel;
class ImportancePanel;
class HeadStatsPanel;
class LessonPanel;
class TextViewPanel;
class LensPanel;
class AttributionPanel;
class ComparePanel;
class PatchingPanel;
class WhyScorePanel;
class CircuitsPanel;
class ExpertsPanel;
class HeadScanPanel;
class ModelBrowserPanel;
class CaptionPanel;

struct AppOptions {
  std::string model;         // directory or builtin:NAME; "" = last used, else the default
  std::string text;          // used when text_given
  bool text_given = false;
  int layer = -1, head = -1;  // -1: keep the saved selection
  std::string stage;         // "probs", "scores", ...; "" keeps
  std::string backend;       // "" keeps
  std::string arith;         // "f32" or "int8"; "" keeps
  bool f32_weights = false;  // --weights f32: convert every matrix to float32 on load
  int block_size = 0;        // 0 keeps
  bool presentation = false;  // large type; with no --layout, the Classroom layout
  std::string layout;         // "explore", "research" or "classroom" ("" keeps the saved one)
  bool screenshot = false;   // deterministic: no settings read or written, no imgui.ini
  std::string type;          // characters to type one by one, timing each (see TypingProbe)
  int train_steps = 0;       // > 0: open the Training panel and train the classroom preset this many steps
  bool text_view = false;    // open the Text view panel
  bool text_view_attribution = false;  // open it shaded by logit attribution
  bool lens = false;         // open the Logit lens panel
  bool attribution = false;  // open the Direct logit attribution panel
  int query = -1;            // the text view's query (window position); −1 keeps the last token
  float heatmap_zoom = 0.f;  // > 0: the heatmap's zoom at the start, pixels per cell (clamped)
  int heatmap_center = -1;   // ≥ 0: the heatmap centred on this token's row and column at the start
  std::string other;         // prompt B (the other prompt) at the start
  bool compare = false;      // open the Compare prompts panel
  bool patching = false;     // open the Activation patching panel (and compute its first grid)
  bool patch_resid = false;  // its grid: the residual stream (layers × positions) instead of the heads
  bool why = false;          // open "Why this score" (the selected head at --query and --key)
  int key = -1;              // its key (window position); −1: the query row's strongest key
  bool circuits = false;     // open the Circuits panel (composition between heads)
  bool experts = false;      // open the Experts panel (a model with experts: GPT-OSS)
  bool scan = false;         // open the Head scan panel and scan `scan_corpus`
  std::string scan_corpus;   // "" the shipped corpus
  bool browser = false;      // open File → Open model… (the model browser)
  std::vector<ChatTurn> chat;  // --chat FILE.json: chat mode with these turns (empty: as saved)
  Ablation ablation;         // heads switched off at the start
};

class App {
 public:
  explicit App(const AppOptions& opt);
  ~App();  // saves the settings (not in screenshot mode)
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Between frames (before ImGui::NewFrame): rebuilds fonts and theme when the DPI scale,
  // presentation mode or the characters to show changed.
  void before_frame(float content_scale);
  // The UI of one frame (between ImGui::NewFrame and ImGui::Render).
  void frame();
  // Files or folders dropped on the window (GLFW's drop callback, or --drop): the first is
  // opened off the UI thread when it is a .gguf file or a model folder; otherwise the status
  // bar says what it is.
  void drop(const std::vector<std::string>& paths);

  // True once the worker has answered the first request (a trace or an error).
  bool first_answer() const;
  bool wait_first_answer(int timeout_ms) const;
  // True when the worker has answered everything posted and the panels showed it (and
  // every --type key was typed and shown).
  bool settled() const;
  // Called on the worker thread after each result: wakes the event loop.
  void set_on_result(std::function<void()> f) {
    other_worker_.set_on_publish(f);
    worker_.set_on_publish(std::move(f));
  }
  // After the frame was presented (swap + finish): the typing probe's clock stops here.
  // ui_ms / draw_ms: how long the frame took to build (CPU) and to draw and present (GL).
  void after_present(double ui_ms, double draw_ms);
  // True while something changes on its own and needs frames to show it: a request being
  // computed, a training run, the head-importance job, the typing probe. When false the
  // event loop sleeps until an event.
  bool animating() const;
  // True while a typed key waits for its result: the loop may sleep until woken.
  bool typing_waits() const;
  // True when this frame posted a new request (the text or a setting changed): the frame
  // shows the previous result. wait_result() waits up to `ms` for the new one.
  bool posted_this_frame() const { return posted_this_frame_; }
  bool wait_result(int ms) const { return worker_.wait_for(posted_serial_, ms); }
  // How long a frame that posted waits for its result before it presents the old one. After
  // an edit of the text, 1.5 × the last forward pass when that is at most max_ms (a frame
  // presented meanwhile would only show the typed character, and drawing it takes the cores
  // from the forward pass); otherwise min_ms.
  int fresh_result_wait_ms(int min_ms, int max_ms) const;
  bool quit_requested() const { return quit_; }
  // The status bar's line of news ("opened …", "loading …"): the frame log's (app/gui_main.cpp).
  const std::string& notice() const { return notice_; }

  // JSON for the screenshot sidecar: on-screen rectangles (framebuffer pixels, origin top
  // left) of the heatmap, the token strip and the head grid, and what is shown.
  std::string sidecar_json(float fb_scale_x, float fb_scale_y) const;
  const std::string& imgui_ini_path() const { return ini_path_; }

 private:
  void menu_bar();
  void shortcuts();
  void help_window();
  void post_if_changed();
  // Starts loading state_.open_request (if any) on the loader, and takes the loader's result:
  // the model it loaded becomes the one shown (the worker gets it, loaded), or its error is
  // shown in the model browser.
  void open_requested_model();
  void recent_menu();
  // Chat mode: renders the turns through the model's template when they, the switch or the
  // model change (the text becomes the rendering; a reply generated for the old turns is
  // dropped), and marks the shown tokens' turns when the trace changes.
  void update_chat(const Snapshot& snap);
  // At the start: when the saved model no longer loads, opens the default one instead.
  void fall_back_from_saved_model(const Snapshot& snap);
  PanelVisibility visibility() const;
  // A preset's arrangement (the Classroom one presents: large type); the dialog stays.
  void apply_preset(LayoutPreset p);

  AppOptions opt_;
  AppState state_;
  Worker worker_;
  Worker other_worker_;  // prompt B through the same model (the Compare and Patching panels)
  Request posted_other_;
  FontManager fonts_;
  Trace empty_trace_;  // shown while no result exists
  std::shared_ptr<const Snapshot> snap_;
  const Model* seen_model_ = nullptr;  // the model the selection was last clamped for
  uint64_t shown_serial_ = 0;          // trace serial drawn last frame
  Request posted_;
  uint64_t posted_serial_ = 0;         // worker serial of posted_
  uint64_t shown_request_ = 0;         // request serial of the result drawn last frame
  std::unique_ptr<TypingProbe> typing_;  // with --type
  bool key_this_frame_ = false;
  bool posted_this_frame_ = false;
  bool text_posted_this_frame_ = false;  // and the text was what changed
  HeadScoreCache head_scores_;  // shared by the panels that show the head scores
  uint64_t first_serial_ = 0;
  std::string random_dir_;             // the generated random model ("" if not generated)
  std::string ini_path_;
  std::string scanned_text_;           // text whose characters were handed to the fonts
  float scale_ = 0.f;                  // content scale the theme was built for
  bool theme_presentation_ = false;
  // Every presented frame's build and draw times, with --screenshot (the sidecar's "frames":
  // `--frames 300` measures the drawing of a scene).
  std::vector<double> frame_ui_ms_, frame_draw_ms_;
  double last_frame_ms_ = 0.0;  // the last frame's build + draw time (not the idle wait before it)  // font size the panels were last laid out for
  std::optional<std::chrono::steady_clock::time_point> busy_since_;  // when the worker last became busy
  // The last model that loaded (what the settings save: a path that fails is never saved).
  std::string good_model_;
  bool model_failed_ = false;         // the newest answer: the model did not load and none is kept
  bool model_from_settings_ = false;  // the start opened the saved model (may fall back once)
  std::string notice_;                // one line for the status bar (e.g. the start's fallback)
  bool show_help_ = false;
  bool lesson_chars_requested_ = false;  // the lesson files' characters handed to the fonts
  bool quit_ = false;
  ImVec2 status_pos_{0, 0}, status_size_{0, 0};  // the status bar, placed each frame
  Layout layout_;  // where every panel but the model browser (a dialog) is drawn
  bool browser_was_open_ = false;  // the dialog is placed in the middle when it opens
  int last_head_ = -1;  // the KV group follows the selected head when it changes

  std::unique_ptr<TextPanel> text_;
  std::unique_ptr<TokenStripPanel> tokens_;
  std::unique_ptr<HeatmapPanel> heatmap_;
  std::unique_ptr<CaptionPanel> caption_;  // the heatmap's caption beside it (Classroom)
  std::unique_ptr<HeadGridPanel> grid_;
  std::unique_ptr<GqaPanel> gqa_;
  std::unique_ptr<NextTokenPanel> next_;
  std::unique_ptr<Panel> model_;  // FunctionPanel of draw_model_panel
  std::unique_ptr<TrainingPanel> training_;
  std::unique_ptr<ImportancePanel> importance_;
  std::unique_ptr<HeadStatsPanel> stats_;
  std::unique_ptr<LessonPanel> lesson_;
  std::unique_ptr<TextViewPanel> text_view_;
  std::unique_ptr<LensPanel> lens_;
  std::unique_ptr<AttributionPanel> attribution_;
  std::unique_ptr<ComparePanel> compare_;
  std::unique_ptr<PatchingPanel> patching_;
  std::unique_ptr<WhyScorePanel> why_;
  std::unique_ptr<CircuitsPanel> circuits_;
  std::unique_ptr<ExpertsPanel> experts_;
  std::unique_ptr<HeadScanPanel> scan_;
  ModelLoader loader_;  // before the browser, which refers to it
  std::unique_ptr<ModelBrowserPanel> browser_;
  // The last model the loader gave: handed to the worker (Request::model) while state_.model_spec names it.
  std::shared_ptr<const Model> opened_model_;
  std::string opened_spec_;
  // Chat mode (update_chat): the model's template (read once per model) and the last rendering.
  const Model* chat_model_ = nullptr;
  ModelChat chat_source_;
  std::string chat_source_error_;
  std::vector<ChatTurn> chat_rendered_turns_;
  bool chat_rendered_prompt_ = false, chat_rendered_ = false;
  ChatView chat_view_;
  uint64_t chat_marked_serial_ = 0;  // the trace the marks are of
  std::vector<Panel*> panels_;  // all of the above, in drawing order
};

}  // namespace attnviz::ui
