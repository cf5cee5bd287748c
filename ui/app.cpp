#include "ui/app.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_reader.h"
#include "core/model/paths.h"
#include "ui/panels/gqa_panel.h"
#include "ui/panels/head_grid_panel.h"
#include "ui/panels/head_stats_panel.h"
#include "ui/panels/heatmap_panel.h"
#include "ui/panels/attribution_panel.h"
#include "ui/panels/caption_panel.h"
#include "ui/panels/circuits_panel.h"
#include "ui/panels/experts_panel.h"
#include "ui/panels/head_scan_panel.h"
#include "ui/panels/why_score_panel.h"
#include "ui/panels/compare_panel.h"
#include "ui/panels/importance_panel.h"
#include "ui/panels/lens_panel.h"
#include "ui/panels/lesson_panel.h"
#include "ui/panels/model_browser_panel.h"
#include "ui/panels/model_panel.h"
#include "ui/jobs/store_listing.h"
#include "ui/panels/next_token_panel.h"
#include "ui/panels/patching_panel.h"
#include "ui/panels/status_bar.h"
#include "ui/panels/text_panel.h"
#include "ui/panels/text_view_panel.h"
#include "ui/draw/theme.h"
#include "ui/panels/token_strip_panel.h"
#include "ui/panels/training_panel.h"

namespace attnviz::ui {

namespace fs = std::filesystem;

namespace {
std::string default_text(const std::string& model_spec) {
  std::string text;
  try {
    text = sample_text(resolve_model_dir(model_spec));  // every built-in model brings one
  } catch (const std::exception&) {
  }
  return text.empty() ? "The cat sat on the mat. The cat ate the fish." : text;
}
}  // namespace

App::App(const AppOptions& opt) : opt_(opt) {
  PanelVisibility vis;
  if (!opt.screenshot) {
    std::string settings_error;
    if (!load_settings(state_, vis, &settings_error) && !settings_error.empty()) {
      std::fprintf(stderr, "attnviz: settings not read, using the defaults: %s\n", settings_error.c_str());
      notice_ = "Settings not read (" + excerpt(settings_error, 160) + "); using the defaults.";
    }
    std::error_code ec;
    fs::create_directories(config_dir(), ec);
    ini_path_ = (fs::path(config_dir()) / "imgui.ini").string();
  }
  // The generated random model, offered in the model list when it exists.
  const fs::path rnd = fs::path(cache_dir()) / "random-tiny";
  if (!opt.model.empty()) {
    state_.model_spec = opt.model;
  } else if (!state_.model_spec.empty() && !opt.screenshot) {
    model_from_settings_ = true;
  } else {
    try {
      state_.model_spec = default_model_spec(nullptr);
    } catch (const std::exception& e) {
      state_.model_spec = "builtin:fortunes-en";  // the worker will show why it cannot load
    }
  }
  if (fs::exists(rnd / "config.json")) random_dir_ = rnd.string();

  if (!opt.chat.empty()) state_.chat = true, state_.chat_turns = opt.chat;
  if (opt.text_given) state_.text = opt.text;
  else if (state_.text.empty() || opt.screenshot) state_.text = default_text(state_.model_spec);
  if (!opt.other.empty()) state_.other_text = opt.other;
  if (opt.layer >= 0) state_.layer = opt.layer;
  if (opt.head >= 0) state_.head = opt.head;
  stage_from_name(opt.stage, &state_.stage);  // "" or an unknown name keeps the saved tab
  if (!opt.backend.empty()) state_.backend = opt.backend;
  if (!opt.arith.empty()) state_.arith = opt.arith;
  if (state_.arith != "f32" && state_.arith != "int8") state_.arith = "f32";
  if (opt.block_size > 0) state_.block_size = opt.block_size;
  if (opt.presentation) state_.presentation = true;
  if (!opt.ablation.empty()) state_.ablation = opt.ablation;
  if (state_.backend != "cpu" && state_.backend != "gpu") state_.backend = "cpu";

  text_ = std::make_unique<TextPanel>(random_dir_);
  tokens_ = std::make_unique<TokenStripPanel>();
  heatmap_ = std::make_unique<HeatmapPanel>();
  caption_ = std::make_unique<CaptionPanel>(*heatmap_);
  grid_ = std::make_unique<HeadGridPanel>();
  gqa_ = std::make_unique<GqaPanel>();
  next_ = std::make_unique<NextTokenPanel>();
  model_ = std::make_unique<FunctionPanel>("Model", draw_model_panel, /*needs_trace*/ false);
  training_ = std::make_unique<TrainingPanel>();
  importance_ = std::make_unique<ImportancePanel>();
  stats_ = std::make_unique<HeadStatsPanel>();
  lesson_ = std::make_unique<LessonPanel>();
  text_view_ = std::make_unique<TextViewPanel>();
  lens_ = std::make_unique<LensPanel>();
  attribution_ = std::make_unique<AttributionPanel>();
  compare_ = std::make_unique<ComparePanel>();
  patching_ = std::make_unique<PatchingPanel>();
  why_ = std::make_unique<WhyScorePanel>();
  circuits_ = std::make_unique<CircuitsPanel>();
  experts_ = std::make_unique<ExpertsPanel>();
  scan_ = std::make_unique<HeadScanPanel>(opt.screenshot ? std::string() : config_dir());  // screenshots keep no scans
  browser_ = std::make_unique<ModelBrowserPanel>(loader_);
  // In each region's order: the caption above the text box, the text above the tokens, …
  panels_ = {caption_.get(), heatmap_.get(), text_.get(), tokens_.get(), training_.get(), lesson_.get(), next_.get(),
             model_.get(), stats_.get(), grid_.get(), importance_.get(), gqa_.get(), experts_.get(), why_.get(),
             circuits_.get(), scan_.get(), text_view_.get(), lens_.get(), attribution_.get(), compare_.get(),
             patching_.get(), browser_.get()};
  layout_.set_panels(std::vector<Panel*>(panels_.begin(), panels_.end() - 1));  // the browser is a dialog
  for (Panel* p : panels_)
    if (auto it = vis.find(p->title()); it != vis.end()) *p->p_open() = it->second;
  *browser_->p_open() = false;  // a dialog: open only when asked for
  // The layout: the saved one, else a preset (--layout, or --presentation's Classroom); a
  // screenshot starts from Explore's places with the panels as the flags below open them.
  layout_.state() = opt.screenshot ? preset_layout(LayoutPreset::Explore) : state_.layout;
  LayoutPreset preset = LayoutPreset::Explore;
  if (preset_from_name(opt.layout, &preset)) apply_preset(preset);
  else if (opt.presentation) apply_preset(LayoutPreset::Classroom);
  if (opt.browser) browser_->open_now();
  if (opt.text_view || opt.text_view_attribution) *text_view_->p_open() = true;
  text_view_->set_attribution(opt.text_view_attribution);
  if (opt.lens) *lens_->p_open() = true;
  if (opt.attribution) *attribution_->p_open() = true;
  if (opt.compare) *compare_->p_open() = true;
  if (opt.patching) *patching_->p_open() = true, patching_->compute_at_start();
  if (opt.patch_resid) patching_->set_kind(PatchKind::Resid);
  if (opt.query >= 0) state_.query = opt.query;  // clamped to the window when drawn
  if (opt.key >= 0) state_.key = opt.key;
  if (opt.why) *why_->p_open() = true;
  if (opt.circuits) *circuits_->p_open() = true;
  if (opt.experts) *experts_->p_open() = true;
  if (opt.scan) *scan_->p_open() = true, scan_->start_at_first_model(opt.scan_corpus);
  if (opt.heatmap_zoom > 0.f) state_.cell_px = opt.heatmap_zoom;
  if (opt.heatmap_center >= 0) heatmap_->go_to(opt.heatmap_center);

  if (opt.train_steps > 0) training_->start(state_, opt.train_steps);
  if (const char* step = std::getenv("ATTNVIZ_LESSON_STEP"); step && *step) lesson_->open_at(std::atoi(step) - 1);
  if (const char* lang = std::getenv("ATTNVIZ_LESSON_LANG"); lang && *lang) lesson_->choose_language(lang);
  snap_ = worker_.latest();
  post_if_changed();
  first_serial_ = 1;  // the first post() gets serial 1
  if (!opt.type.empty()) typing_ = std::make_unique<TypingProbe>(opt.type);
}

App::~App() {
  if (opt_.screenshot) return;
  // A model that failed to load is never saved: the next start opens the last one that worked.
  if (!good_model_.empty()) state_.model_spec = good_model_;
  else if (model_failed_) state_.model_spec.clear();  // the next start opens the default model
  state_.layout = layout_.state();
  save_settings(state_, visibility());
}

void App::fall_back_from_saved_model(const Snapshot& snap) {
  if (!model_from_settings_ || snap.request_serial < first_serial_) return;
  model_from_settings_ = false;  // decided once, on the first answer
  if (snap.model || snap.error.empty()) return;
  std::string fallback;
  try {
    fallback = default_model_spec(nullptr);
  } catch (const std::exception&) {
    return;  // nothing to fall back to: the error stays in view
  }
  if (fallback == state_.model_spec) return;
  notice_ = "the saved model '" + state_.model_spec + "' did not load (see Text & model); opened " + fallback + " instead";
  state_.model_spec = fallback;
}

void App::apply_preset(LayoutPreset p) {
  layout_.apply_preset(p, browser_.get());
  state_.presentation = p == LayoutPreset::Classroom;  // large type for a room, the usual size otherwise
}

PanelVisibility App::visibility() const {
  PanelVisibility v;
  for (Panel* p : panels_) v[p->title()] = p->open();
  return v;
}

bool App::first_answer() const { return worker_.latest()->request_serial >= first_serial_; }
bool App::wait_first_answer(int timeout_ms) const { return worker_.wait_for(first_serial_, timeout_ms); }
bool App::settled() const {
  return !worker_.busy() && worker_.latest()->trace_serial == shown_serial_ && (!typing_ || typing_->finished()) &&
         (opt_.train_steps <= 0 || (training_->settled() && posted_.model == training_->shown_model())) &&
         (!importance_->open() || importance_->idle()) && (!lens_->open() || lens_->idle()) &&
         (!attribution_->open() || attribution_->idle()) && !other_worker_.busy() &&
         (!patching_->open() || patching_->idle()) && (!text_view_->open() || text_view_->settled()) &&
         (!why_->open() || why_->idle()) && (!circuits_->open() || circuits_->idle()) && (!scan_->open() || scan_->idle()) &&
         !loader_.busy() && state_.open_request.empty() && (!browser_->open() || browser_->idle());
}

void App::after_present(double ui_ms, double draw_ms) {
  last_frame_ms_ = ui_ms + draw_ms;
  if (opt_.screenshot && frame_ui_ms_.size() < 100000) {  // for the sidecar's "frames"
    frame_ui_ms_.push_back(ui_ms);
    frame_draw_ms_.push_back(draw_ms);
  }
  if (typing_) typing_->presented(shown_request_, snap_->forward_ms, ui_ms, draw_ms, TypingProbe::Clock::now());
}

bool App::animating() const {
  return !first_answer() || worker_.busy() || typing_ || (training_->open() && !training_->settled()) ||
         (importance_->open() && !importance_->idle()) || (lens_->open() && !lens_->idle()) ||
         (attribution_->open() && !attribution_->idle()) || heatmap_->refining() || other_worker_.busy() ||
         (text_view_->open() && !text_view_->settled()) ||
         (patching_->open() && !patching_->idle()) || (why_->open() && !why_->idle()) ||
         (circuits_->open() && !circuits_->idle()) || (scan_->open() && !scan_->idle()) ||
         (browser_->open() && !browser_->idle());
  // The model loader wakes the loop itself (its progress, a few times a second, and its end).
}

int App::fresh_result_wait_ms(int min_ms, int max_ms) const {
  const double want = 1.5 * (snap_ ? snap_->forward_ms : 0.0);
  // Only an edit of the text waits longer (a dragged slider keeps its frame rate), and only
  // when its result is expected in time (a slow model echoes the key at once instead).
  if (!text_posted_this_frame_ || want > max_ms) return min_ms;
  return std::clamp(static_cast<int>(std::lround(want)), min_ms, max_ms);
}

bool App::typing_waits() const { return typing_ && !typing_->finished() && worker_.busy(); }

void App::post_if_changed() {
  Request r;
  r.model_spec = state_.model_spec;
  r.backend = state_.backend;
  r.f32_weights = opt_.f32_weights;
  r.arith = state_.arith;
  r.text = state_.text;
  r.block_size = state_.block_size;
  r.add_special = !state_.chat;  // a chat template writes its special tokens itself
  // The model the loader opened, handed over loaded; dropped once another is chosen.
  if (opened_model_ && state_.model_spec != opened_spec_) opened_model_.reset(), opened_spec_.clear();
  if (opened_model_) r.model = opened_model_;
  if (auto trained = training_->shown_model()) r.model = trained, r.model_spec = trained->name;  // the weights as they learn
  r.ablation = state_.ablation;
  if (r != posted_) {
    posted_this_frame_ = true;
    text_posted_this_frame_ = text_posted_this_frame_ || r.text != posted_.text;
    posted_ = r;
    posted_serial_ = worker_.post(r);
  }
  // Prompt B: the model A's answer runs (no second load), on the CPU, in the same window.
  if (state_.other_text.empty() || !snap_ || !snap_->model) return;
  Request b = r;
  b.model = snap_->model;
  b.model_spec = snap_->model->name;
  b.backend = "cpu";
  b.text = state_.other_text;
  if (b != posted_other_) {
    posted_other_ = b;
    other_worker_.post(b);
  }
}

void App::before_frame(float content_scale) {
  const float scale = std::max(0.5f, content_scale);
  // Presentation: large type that still fits the window (about 19 px at 720 px high, 28 at 1080).
  const float win_h = ImGui::GetIO().DisplaySize.y;
  const float present_px = win_h > 0.f ? std::clamp(std::round(win_h / (38.f * scale)), 18.f, 30.f) : 26.f;
  const float size = std::round((state_.presentation ? present_px : 16.f) * scale);
  // Characters of the model's vocabulary and of the text join the font atlas.
  const Snapshot& snap = *worker_.latest();
  if (snap.model.get() != seen_model_ && snap.model && snap.model->tokenizer) {
    std::string chars;
    for (int i = 0; i < snap.model->tokenizer->vocab_size() && chars.size() < (1u << 20); ++i)
      chars += snap.model->tokenizer->piece(i);
    fonts_.request(size, chars);
  }
  if (!lesson_chars_requested_) {  // the lesson's words in every language (CJK included)
    fonts_.request(size, lesson_->text_for_fonts());
    lesson_chars_requested_ = true;
  }
  if (state_.text != scanned_text_) {
    fonts_.request(size, state_.text);
    scanned_text_ = state_.text;
  }
  fonts_.request(size, "");
  if (fonts_.needs_rebuild()) {
    fonts_.rebuild();
  }
  if (scale != scale_ || state_.presentation != theme_presentation_) {
    apply_theme(state_.presentation, scale);
    scale_ = scale;
    theme_presentation_ = state_.presentation;
  }
}

void App::menu_bar() {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open model…", "Ctrl+O")) browser_->open_now();
    recent_menu();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (Panel* p : panels_)
      if (p != browser_.get()) ImGui::MenuItem(p->title().c_str(), nullptr, p->p_open());
    ImGui::Separator();
    const LayoutPreset now = layout_.state().preset;
    if (ImGui::MenuItem("Explore layout", "F6", now == LayoutPreset::Explore)) apply_preset(LayoutPreset::Explore);
    if (ImGui::MenuItem("Research layout", "F7", now == LayoutPreset::Research)) apply_preset(LayoutPreset::Research);
    if (ImGui::MenuItem("Classroom layout", "F8", now == LayoutPreset::Classroom)) apply_preset(LayoutPreset::Classroom);
    if (ImGui::MenuItem("Reset layout", "F5")) layout_.reset();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the splitters and the panels' places as the %s layout has them", preset_name(now));
    ImGui::Separator();
    ImGui::MenuItem("Presentation type (large)", "F2", &state_.presentation);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Compute")) {
    ImGui::TextDisabled("backend");
    if (ImGui::MenuItem("CPU", nullptr, state_.backend == "cpu")) state_.backend = "cpu";
    if (ImGui::MenuItem("GPU (OpenGL compute)", nullptr, state_.backend == "gpu")) state_.backend = "gpu";
    ImGui::Separator();
    ImGui::TextDisabled("products with quantized weights (CPU)");
    if (ImGui::MenuItem("float32: exact", nullptr, state_.arith == "f32")) state_.arith = "f32";
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Each weight decoded to float32 and multiplied by the float32 activations: what the\n"
                        "model's definition computes (and PyTorch), up to the order of additions.");
    if (ImGui::MenuItem("int8: llama.cpp's arithmetic", nullptr, state_.arith == "int8")) state_.arith = "int8";
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("The activations rounded to 8 bits per block of 32 or 256 values, then integer dot\n"
                        "products with the weights' integers, as llama.cpp and Ollama compute: faster typing\n"
                        "into quantized files; every recorded matrix shows what this arithmetic computed.\n"
                        "Float32, F16 and BF16 weights are unaffected.");
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    ImGui::MenuItem("Keyboard shortcuts", "F1", &show_help_);
    if (ImGui::MenuItem("Guided lesson", "F3", lesson_->open())) *lesson_->p_open() = !lesson_->open();
    ImGui::EndMenu();
  }
  // Where we are, on the right of the menu bar.
  const Snapshot& snap = *snap_;
  char where[160];
  const std::string title = snap.model ? shown_title(snap.model->config, state_.layer, state_.head, state_.stage, heatmap_->showing_rollout())
                                       : std::string();
  std::snprintf(where, sizeof where, "%s", title.c_str());
  ImGui::SameLine(ImGui::GetWindowWidth() - ImGui::CalcTextSize(where).x - ImGui::GetFontSize() * (snap.random_weights ? 9.f : 1.f));
  ImGui::TextUnformatted(where);
  if (snap.random_weights) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), " random weights");
  }
  ImGui::EndMainMenuBar();
}

void App::help_window() {
  if (!show_help_) return;
  // Wide enough for the keys, the descriptions wrap (never clipped); height follows the rows.
  ImGui::SetNextWindowSize(ImVec2(std::min(ImGui::GetFontSize() * 36.f, ImGui::GetIO().DisplaySize.x * 0.9f), 0),
                           ImGuiCond_Always);
  if (ImGui::Begin("Keyboard shortcuts", &show_help_, ImGuiWindowFlags_NoSavedSettings)) {
    const char* rows[][2] = {
        {"Alt+\xE2\x86\x91 / Alt+\xE2\x86\x93", "previous / next layer"},
        {"Alt+\xE2\x86\x90 / Alt+\xE2\x86\x92", "previous / next head"},
        {"Alt+PgUp / Alt+PgDn", "previous / next stage (heatmap tab)"},
        {"1 \xE2\x80\xA6 8", "pick a stage (when the text box is not focused)"},
        {"arrows, PgUp/PgDn", "as above without Alt, when the text box is not focused"},
        {"Alt+N", "generate one token"},
        {"X (Alt+X)", "ablate / restore the selected head (right-click in the head grid does the same)"},
        {"wheel, drag, Home", "over the heatmap: zoom about the pointer, pan, show it whole (a click selects a cell)"},
        {"arrows, Home/End", "in the focused Text view: move its query by a token (\xE2\x86\x90/\xE2\x86\x92) or a line (\xE2\x86\x91/\xE2\x86\x93)"},
        {"F2", "presentation type (large fonts, high contrast)"},
        {"F3", "the guided lesson: q\xC2\xB7k, \xC3\xB7\xE2\x88\x9A" "d, the mask, softmax, \xCE\xA3 p\xC2\xB7v, GQA, block_size, the KV cache, step by step on your text"},
        {"F5", "reset the layout (the splitters and the panels' places of the current layout)"},
        {"F6 / F7 / F8", "the Explore / Research / Classroom layout (right-click a tab to move its panel)"},
        {"Esc", "leave the text box"},
        {"Ctrl+Q", "quit"},
    };
    if (ImGui::BeginTable("keys", 2, ImGuiTableFlags_SizingFixedFit)) {
      ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthFixed);
      ImGui::TableSetupColumn("what", ImGuiTableColumnFlags_WidthStretch);
      for (auto& r : rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r[0]);
        ImGui::TableNextColumn();
        ImGui::TextWrapped("%s", r[1]);
      }
      ImGui::EndTable();
    }
  }
  ImGui::End();
}

void App::shortcuts() {
  ImGuiIO& io = ImGui::GetIO();
  const bool typing = io.WantTextInput;
  const bool nav = io.KeyAlt || !typing;
  auto pressed = [](int glfw_key) { return ImGui::IsKeyPressed(glfw_key); };
  if (pressed(GLFW_KEY_F1)) show_help_ = !show_help_;
  if (pressed(GLFW_KEY_F2)) state_.presentation = !state_.presentation;
  if (pressed(GLFW_KEY_F5)) layout_.reset();
  if (pressed(GLFW_KEY_F6)) apply_preset(LayoutPreset::Explore);
  if (pressed(GLFW_KEY_F7)) apply_preset(LayoutPreset::Research);
  if (pressed(GLFW_KEY_F8)) apply_preset(LayoutPreset::Classroom);
  if (pressed(GLFW_KEY_F3)) *lesson_->p_open() = !lesson_->open();
  if (io.KeyCtrl && pressed(GLFW_KEY_Q)) quit_ = true;
  if (io.KeyCtrl && pressed(GLFW_KEY_O)) browser_->open_now();
  if (!snap_->model) return;
  const ModelDims dims = ModelDims::of(snap_->model->config);
  // The capped tab exists only on a layer that soft-caps its scores.
  auto capped = [&] { return state_.layer < dims.n_layer && snap_->model->config.layer(state_.layer).softcap > 0; };
  // The tabs of a hybrid's linear layer (implicit, Q, K, V, out) or of a convolution layer (none).
  auto mixer = [&] { return state_.layer < dims.n_layer ? snap_->model->config.layer(state_.layer).mixer : Mixer::Softmax; };
  // The focused text view takes the plain arrows for its query; Alt+arrows still step.
  if (nav && (io.KeyAlt || !text_view_->focused())) {
    if (pressed(GLFW_KEY_UP)) step_layer(state_, dims, -1);
    if (pressed(GLFW_KEY_DOWN)) step_layer(state_, dims, +1);
    if (pressed(GLFW_KEY_LEFT)) step_head(state_, dims, -1);
    if (pressed(GLFW_KEY_RIGHT)) step_head(state_, dims, +1);
  }
  if (nav) {
    if (pressed(GLFW_KEY_PAGE_UP)) step_stage(state_, -1, capped(), mixer());
    if (pressed(GLFW_KEY_PAGE_DOWN)) step_stage(state_, +1, capped(), mixer());
  }
  if (nav && pressed(GLFW_KEY_X)) state_.ablation.toggle(state_.layer, state_.head);
  const std::vector<Stage> tabs = stage_tabs(capped(), mixer());
  if (!typing && !io.KeyCtrl)
    for (int k = 0; k < 9 && k < static_cast<int>(tabs.size()); ++k)
      if (pressed(GLFW_KEY_1 + k)) state_.stage = tabs[static_cast<size_t>(k)];
  fit_stage(state_, capped(), mixer());
}

void App::frame() {
  // A simulated key (--type), once the first result is on screen (drawn by the last frame)
  // and nothing else computes, as a person would type: typed as the text box would.
  key_this_frame_ = false;
  posted_this_frame_ = text_posted_this_frame_ = false;
  if (typing_ && first_answer() && !worker_.busy() && worker_.latest()->trace_serial == shown_serial_) {
    const std::string key = typing_->press(TypingProbe::Clock::now());
    if (!key.empty()) {
      state_.text += key;
      key_this_frame_ = true;
      post_if_changed();  // the worker starts on it while this frame is built
    }
  }
  snap_ = worker_.latest();
  const Snapshot& snap = *snap_;
  fall_back_from_saved_model(snap);
  // Loaded from its spec or by the loader, not in training.
  if (snap.model && (!snap.request.model || snap.request.model == opened_model_)) good_model_ = snap.model->name;
  model_failed_ = !snap.model && !snap.error.empty();
  if (snap.model) {
    clamp_selection(state_, ModelDims::of(snap.model->config));
    clamp_ablation(state_, ModelDims::of(snap.model->config));
    if (state_.head != last_head_ || snap.model.get() != seen_model_)
      state_.kv_group = snap.model->config.kv_head_of(state_.head);
    last_head_ = state_.head;
    seen_model_ = snap.model.get();
  }
  const Trace& trace = snap.trace && snap.model && snap.trace->layers.size() == static_cast<size_t>(snap.model->config.n_layer)
                           ? *snap.trace
                           : empty_trace_;
  update_chat(snap);
  FrameContext ctx{snap, trace, snap.model.get(), state_, fonts_.fonts(), scale_, -1.0, notice_};
  ctx.head_score_cache = &head_scores_;
  if (state_.chat && chat_rendered_) ctx.chat = &chat_view_;
  ctx.frame_ms = last_frame_ms_;
  const auto now = std::chrono::steady_clock::now();
  if (!worker_.busy()) busy_since_.reset();
  else if (!busy_since_) busy_since_ = now;
  if (busy_since_) ctx.busy_s = std::chrono::duration<double>(now - *busy_since_).count();
  std::tie(ctx.layers_done, ctx.layers_total) = worker_.progress();

  shortcuts();
  menu_bar();
  open_requested_model();
  if (ctx.has_trace() && ImGui::GetIO().KeyAlt && ImGui::IsKeyPressed(GLFW_KEY_N)) next_->step(ctx, false);
  // Prompt B's newest answer, once there is a prompt B.
  std::shared_ptr<const Snapshot> other = state_.other_text.empty() ? nullptr : other_worker_.latest();
  compare_->set_other(other);
  patching_->set_other(other);
  next_->set_other(other);
  // The status bar along the bottom; presenting in the Classroom layout, under the left
  // column only (the heatmap takes the window's height).
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float top = ImGui::GetFrameHeight();  // the menu bar
  const float status_h = ImGui::GetFrameHeight() + ImGui::GetStyle().WindowPadding.y * 2.f;
  const bool status_left = layout_.state().preset == LayoutPreset::Classroom;
  Layout::Metrics m;
  m.top = top;
  m.bottom = status_left ? d.y : d.y - status_h;
  m.left_bottom = status_left ? d.y - status_h : 0.f;
  m.min_tile_h = std::round(ImGui::GetFontSize() * 8.f);
  m.min_tile_w = std::round(ImGui::GetFontSize() * 24.f);
  m.min_left = training_->open() ? ImGui::GetFontSize() * 28.f : 0.f;  // the Training form's width
  m.after_panel = [this](const Panel* p) {  // a keystroke: the worker starts while the other panels are built
    if (p == text_.get()) post_if_changed();
  };
  heatmap_->set_caption_elsewhere(caption_->open());
  layout_.draw(ctx, m);
  const LayoutRect left = layout_.geometry().region[static_cast<int>(Region::Left)];
  status_pos_ = ImVec2(0, d.y - status_h);
  status_size_ = ImVec2(status_left && !left.empty() ? left.w : d.x, status_h);
  // The model browser: a dialog in the middle, over the panels, placed when it opens.
  if (browser_->open() && !browser_was_open_)
    browser_->place(ImVec2(std::round(d.x * 0.16f), std::round(d.y * 0.08f)), ImVec2(std::round(d.x * 0.68f), std::round(d.y * 0.8f)), true);
  browser_was_open_ = browser_->open();
  browser_->draw(ctx);
  if (state_.why_requested) {  // a heatmap cell was clicked: explain its score
    state_.why_requested = false;
    *why_->p_open() = true;
  }
  draw_status_bar(ctx, status_pos_, status_size_);
  if (!lesson_->open()) state_.lesson.active = false;  // no outline once the lesson is closed
  help_window();
  shown_serial_ = snap.trace_serial;
  shown_request_ = snap.request_serial;

  state_.end_frame();
  open_requested_model();  // one a panel asked for this frame starts now, not a frame later
  post_if_changed();
  if (key_this_frame_) typing_->posted(posted_serial_);
}

void App::open_requested_model() {
  if (!state_.open_request.empty()) {
    const std::string spec = std::move(state_.open_request);
    state_.open_request.clear();
    loader_.start(spec, opt_.f32_weights ? WeightsMode::F32 : WeightsMode::Stored);
    notice_ = "loading " + spec + "…";
  }
  std::optional<ModelLoader::Result> r = loader_.take();
  if (!r) return;
  if (!r->model) {
    notice_ = "could not open " + r->spec + " (see File \xE2\x86\x92 Open model)";
    browser_->set_error(r->spec, r->error);
    *browser_->p_open() = true;
    return;
  }
  state_.model_spec = opened_spec_ = r->spec;
  opened_model_ = std::move(r->model);
  remember_model(state_.recent_models, r->spec);
  browser_->set_error("", "");
  *browser_->p_open() = false;  // opened: the dialog closes
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.0f", r->ms);
  notice_ = "opened " + r->spec + " (loaded in " + ms + " ms)";
}

void App::update_chat(const Snapshot& snap) {
  if (!state_.chat) {
    chat_rendered_ = false;
    return;
  }
  const Model* m = snap.model.get();
  if (!m) return;
  bool changed = !chat_rendered_ || state_.chat_turns != chat_rendered_turns_ || state_.chat_generation_prompt != chat_rendered_prompt_;
  if (m != chat_model_) {
    chat_model_ = m;
    chat_source_ = ModelChat();
    chat_source_error_.clear();
    try {
      chat_source_ = read_model_chat(m->dir);
    } catch (const std::exception& e) {
      chat_source_error_ = e.what();
    }
    changed = true;
  }
  if (changed) {
    if (chat_source_error_.empty()) {
      chat_view_.rendering = render_chat(chat_source_, m->name, state_.chat_turns, state_.chat_generation_prompt);
    } else {
      chat_view_.rendering = ChatRendering();
      chat_view_.rendering.error = chat_source_error_;
    }
    chat_rendered_turns_ = state_.chat_turns;
    chat_rendered_prompt_ = state_.chat_generation_prompt;
    chat_rendered_ = true;
    if (chat_view_.rendering.error.empty()) state_.text = chat_view_.rendering.text;
    chat_marked_serial_ = 0;
  }
  // The marks of the tokens shown, when they come from the current rendering.
  if (snap.trace_serial != chat_marked_serial_) {
    chat_marked_serial_ = snap.trace_serial;
    const ChatRendering& r = chat_view_.rendering;
    const bool of_this = r.error.empty() && snap.trace_text.compare(0, r.text.size(), r.text) == 0;
    chat_view_.marks = of_this ? chat_marks(chat_spans(snap.labels, r, state_.chat_turns.size()), state_.chat_turns) : ChatMarks();
  }
}

void App::drop(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  std::string why;
  if (openable_path(paths[0], &why)) state_.open_request = paths[0];
  else notice_ = "dropped " + why;
}

void App::recent_menu() {
  if (!ImGui::BeginMenu("Recent models", !state_.recent_models.empty())) return;
  for (const std::string& spec : state_.recent_models)
    if (ImGui::MenuItem(spec.c_str(), nullptr, spec == state_.model_spec)) state_.open_request = spec;
  ImGui::Separator();
  if (ImGui::MenuItem("Clear the list")) state_.recent_models.clear();
  ImGui::EndMenu();
}

std::string App::sidecar_json(float sx, float sy) const {
  auto rect = [&](ImVec4 r) { return nlohmann::json::array({std::lround(r.x * sx), std::lround(r.y * sy), std::lround(r.z * sx), std::lround(r.w * sy)}); };
  const Snapshot& snap = *worker_.latest();
  nlohmann::json j;
  j["rects"]["heatmap"] = rect(heatmap_->image_rect());
  j["layout"] = parse_json(layout_.sidecar_json(sx, sy), "layout");
  j["rects"]["heatmap_sink"] = rect(heatmap_->sink_rect());
  j["rects"]["token_strip"] = rect(tokens_->strip_rect());
  j["rects"]["head_grid"] = rect(grid_->grid_rect());
  j["rects"]["importance_grid"] = rect(importance_->grid_rect());
  j["rects"]["heatmap_window"] = rect(heatmap_->window_rect());
  j["rects"]["text_view"] = rect(text_view_->open() ? text_view_->text_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["lens_grid"] = rect(lens_->open() ? lens_->grid_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["attribution_grid"] = rect(attribution_->open() ? attribution_->grid_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["compare_matrix"] = rect(compare_->open() ? compare_->matrix_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["patching_grid"] = rect(patching_->open() ? patching_->grid_rect() : ImVec4(0, 0, 0, 0));
  j["query"] = state_.query;
  {
    const HeatmapPanel::NavState n = heatmap_->nav_state();
    j["heatmap_nav"] = {{"zoom", n.zoom}, {"fit", n.fit}, {"x0", n.x0}, {"y0", n.y0}, {"tex", {n.tex_w, n.tex_h}},
                        {"tex_cells", {n.tex_cells.r0, n.tex_cells.r1, n.tex_cells.c0, n.tex_cells.c1}},
                        {"rebuilds", n.rebuilds}, {"rows_computed", n.rows_computed}, {"rows_pooled", n.rows_pooled}, {"minimap", n.minimap}, {"strip_row", n.strip_row},
                        {"goto_error", n.goto_error}};
  }
  for (const Panel* p : panels_)  // every window drawn last frame, by title
    if (p->window_rect().z > 0) j["windows"][p->title()] = rect(p->window_rect());
  j["windows"]["status bar"] = rect(ImVec4(status_pos_.x, status_pos_.y, status_size_.x, status_size_.y));
  if (lens_->open()) j["lens"] = {{"rows", lens_->rows_shown()}, {"error", lens_->error()}};
  j["recent_models"] = state_.recent_models;
  j["notice"] = notice_;
  if (state_.chat && chat_rendered_) {  // chat mode: the rendering, and each span's first token in the window
    const ChatView& c = chat_view_;
    nlohmann::json spans = nlohmann::json::array();
    const size_t all = snap.all_ids.size(), T = snap.trace ? static_cast<size_t>(snap.trace->T()) : 0;
    for (size_t k = 0; k < c.marks.span.size(); ++k)
      if (c.marks.begins(k))
        spans.push_back({{"role", c.marks.role_of(k)}, {"token", static_cast<int64_t>(k) - static_cast<int64_t>(all - T)},
                         {"label", k < snap.labels.size() ? snap.labels[k].text : std::string()}});
    j["chat"] = {{"text", c.rendering.text}, {"error", c.rendering.error}, {"spans", spans}};
  }
  if (browser_->open()) {
    nlohmann::json models = nlohmann::json::array();
    if (auto list = browser_->models())
      for (const StoredModel& m : *list)
        models.push_back({{"source", m.source}, {"name", m.name}, {"opens", m.opens}, {"reason", m.reason}});
    j["browser"] = {{"models", models}};
  }
  if (text_view_->open()) j["text_view"] = text_view_->sidecar();
  if (attribution_->open()) {
    const AttributionJob::Status st = attribution_->status();
    j["attribution"] = {{"error", st.error}};
    if (st.result)
      j["attribution"].update({{"position", st.result->position}, {"target_ids", st.result->target_ids},
                               {"logit", st.result->logit}, {"sum", st.result->sum}});
  }
  if (compare_->open()) {
    const ComparePanel::Shown& c = compare_->shown();
    j["compare"] = {{"Ta", c.ta}, {"Tb", c.tb}, {"n", c.n}, {"view", compare_view_label(c.view)},
                    {"max_abs_diff", c.max_abs_diff}, {"message", c.message}};
  }
  if (patching_->open()) {
    const PatchJob::Status st = patching_->status();
    j["patching"] = {{"kind", patching_->kind() == PatchKind::Heads ? "heads" : "resid"}, {"message", patching_->message()},
                     {"error", st.error}, {"current", st.current}, {"ms", st.ms},
                     {"frames_while_running", patching_->frames_while_running()}};
    if (st.result)
      j["patching"].update({{"metric", st.result->metric}, {"position", st.result->position},
                            {"target_ids", st.result->target_ids}, {"clean", st.result->clean},
                            {"other", st.result->other}, {"grid", st.result->grid}, {"passes", st.result->passes}});
  }
  j["rects"]["why_bars"] = rect(why_->open() ? why_->bars_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["circuits_graph"] = rect(circuits_->open() ? circuits_->graph_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["experts_grid"] = rect(experts_->open() ? experts_->grid_rect() : ImVec4(0, 0, 0, 0));
  j["rects"]["scan_plot"] = rect(scan_->open() ? scan_->plot_rect() : ImVec4(0, 0, 0, 0));
  j["key"] = state_.key;
  if (why_->open()) {
    const ScoreJob::Status st = why_->status();
    j["why"] = {{"error", st.error}};
    if (st.result) {
      std::vector<std::string> names;
      for (const StreamPart& p : st.result->parts) names.push_back(part_name(p));
      j["why"].update({{"layer", st.result->layer}, {"head", st.result->head}, {"query", st.result->query},
                       {"key", st.result->key}, {"score", st.result->score}, {"sum", st.result->sum},
                       {"parts", names}, {"key_side", st.result->key_side}, {"query_side", st.result->query_side}});
    }
  }
  if (circuits_->open()) {
    const CompositionJob::Status st = circuits_->status();
    j["circuits"] = {{"error", st.error}, {"ready", st.result != nullptr}, {"edges", circuits_->edges_shown()}};
  }
  if (scan_->open()) {
    const ScanJob::Status st = scan_->status();
    j["scan"] = {{"error", st.error}, {"running", st.running}, {"corpus", st.corpus}, {"from_cache", st.from_cache},
                 {"progress_windows", st.progress.windows}};
    if (st.result) j["scan"].update({{"windows", st.result->windows}, {"tokens", st.result->tokens}, {"heads", st.result->heads.size()}});
  }
  j["presentation"] = state_.presentation;
  j["lesson"] = {{"open", lesson_->open()}, {"row", state_.lesson.row}, {"col", state_.lesson.col}};
  j["window"] = {std::lround(ImGui::GetIO().DisplaySize.x * sx), std::lround(ImGui::GetIO().DisplaySize.y * sy)};
  j["ablate"] = state_.ablation.to_string();
  j["model"] = snap.model ? snap.model->name : state_.model_spec;
  j["random_weights"] = snap.random_weights;
  j["forward_ms"] = snap.forward_ms;
  j["frame_ms"] = ImGui::GetIO().Framerate > 0.f ? 1000.0 / ImGui::GetIO().Framerate : 0.0;  // ImGui's running average
  j["error"] = snap.error;
  j["backend"] = snap.backend_name;
  j["arith"] = snap.trace ? snap.trace->arith : std::string();
  j["layer"] = state_.layer;
  j["head"] = state_.head;
  j["stage"] = stage_name(state_.stage);
  j["T"] = snap.trace ? snap.trace->T() : 0;
  j["dropped"] = snap.trace ? snap.trace->dropped : 0;
  j["text"] = snap.trace_text;
  j["skipped"] = snap.skipped;
  j["showing_sample"] = snap.showing_sample;
  j["fonts"] = fonts_.fonts().note;
  if (typing_) j["typing"] = parse_json(typing_->report_json(), "typing report");
  if (!frame_ui_ms_.empty()) {
    j["frames"] = {{"count", frame_ui_ms_.size()}, {"ui_ms_median", quantile(frame_ui_ms_, 0.5)},
                   {"draw_ms_median", quantile(frame_draw_ms_, 0.5)}};
  }
  if (training_->open()) {
    const auto st = training_->status();
    j["training"] = {{"state", session_state_name(st->state)}, {"step", st->step}, {"steps", st->steps},
                     {"induction_step", st->induction_step}, {"induction_seconds", st->induction_seconds},
                     {"elapsed_s", st->elapsed_s}, {"snapshots", st->snapshot_steps.size()},
                     {"train_loss", st->train_loss.empty() ? -1.f : st->train_loss.back()}};
  }
  return j.dump(2);
}

}  // namespace attnviz::ui
