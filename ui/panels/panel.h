// The base of every panel: it owns Begin/End and the visibility flag (bool* p_open, as in
// imgui_demo); a panel implements draw_content() only. Panels read the Trace as const&
// and keep selection in AppState; what a panel keeps itself (textures, its own widgets'
// values) lives in its members, never in function-static variables.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/engine/head_scores.h"
#include "core/model/model.h"
#include "core/engine/trace.h"
#include "ui/state/app_state.h"
#include "ui/state/worker.h"

namespace attnviz::ui {

struct Fonts;

// score_heads of the shown trace, computed once per result: the head grid and the head
// statistics both show them (about a millisecond at T = 2000 on the 0.5B shape).
class HeadScoreCache {
 public:
  const std::vector<HeadScore>& get(const Trace& t, uint64_t serial);
  int computed() const { return computed_; }  // how many times it computed (tests)

 private:
  std::vector<HeadScore> scores_;
  uint64_t serial_ = 0;
  const Trace* trace_ = nullptr;
  int computed_ = 0;
};

// What a frame gives every panel.
struct FrameContext {
  const Snapshot& snap;  // the worker's newest answer
  const Trace& trace;    // snap.trace, or an empty Trace (T = 0) before the first result
  const Model* model;    // null before a model loaded
  AppState& state;       // selection, written by panels
  const Fonts& fonts;
  float scale = 1.f;     // DPI × presentation scale, for sizes in pixels
  // Seconds the newest request has been computing (−1 when the shown result is current):
  // past kStaleAfterS the panels grey what they show and the status bar says so.
  double busy_s = -1.0;
  static constexpr double kStaleAfterS = 0.3;
  std::string notice;  // one line for the status bar ("" for none)
  double frame_ms = 0.0;  // the previous frame's build + draw time (the window sleeps between frames when idle)
  int layers_done = 0, layers_total = 0;  // the running forward's progress (Worker::progress); total 0: none
  bool stale() const { return busy_s >= kStaleAfterS; }
  bool has_trace() const { return trace.T() > 0 && model != nullptr; }
  HeadScoreCache* head_score_cache = nullptr;  // the App's (null: each call computes)
  const ChatView* chat = nullptr;  // chat mode: the rendered turns and the tokens' marks (null otherwise)
  // score_heads(trace), through the cache.
  const std::vector<HeadScore>& head_scores() const;
  mutable HeadScoreCache own_scores{};  // used when head_score_cache is null
};

class Panel {
 public:
  explicit Panel(std::string title, bool open = true) : title_(std::move(title)), open_(open) {}
  virtual ~Panel() = default;
  Panel(const Panel&) = delete;
  Panel& operator=(const Panel&) = delete;

  // Begin, draw_content, End; nothing when hidden (a floating window: the model browser).
  void draw(FrameContext& ctx);
  // The content in a child window of `size` at the cursor (a tile of the tiled layout,
  // ui/layout.h, which draws the title as a tab); window_rect() is the child's.
  void draw_in_tile(FrameContext& ctx, ImVec2 size);

  const std::string& title() const { return title_; }
  bool* p_open() { return &open_; }
  // Where the window was drawn last (x, y, w, h in screen coordinates); zero when not drawn.
  ImVec4 window_rect() const { return window_rect_; }
  bool open() const { return open_; }

  // A floating window's place next frame. `force` moves it even when the user has moved
  // it; otherwise only the first time (imgui.ini wins).
  void place(ImVec2 pos, ImVec2 size, bool force);
  // Not drawn this frame (a tab behind another, or a panel the layout leaves out).
  void mark_hidden() { window_rect_ = ImVec4(0, 0, 0, 0), cut_.clear(); }
  // Drawn in a tile last frame: "x", "y" or "xy" where its content ran past the tile with no
  // scrollbar to reach it (cut off); "" when it fits or scrolls.
  const std::string& cut() const { return cut_; }
  // Whether the window fills its background (off: what lies under it shows, which the App
  // allows only where the frame was cleared with the background colour and no other panel
  // lies under it).
  void set_background(bool on) { background_ = on; }

 protected:
  virtual void draw_content(FrameContext& ctx) = 0;
  virtual ImGuiWindowFlags window_flags() const { return 0; }
  // A line shown instead of the content while there is no trace.
  virtual bool needs_trace() const { return true; }

 private:
  void draw_body(FrameContext& ctx);
  std::string title_;
  bool open_ = true;
  bool has_place_ = false;
  bool force_place_ = false;
  bool background_ = true;
  ImVec2 pos_{0, 0}, size_{0, 0};
  ImVec4 window_rect_{0, 0, 0, 0};
  std::string cut_;
};

// A panel whose content a background job computes (ui/lens_job.h: LensJob, AttributionJob)
// and draws as a grid of cells.
template <class Job>
class JobGridPanel : public Panel {
 public:
  using Panel::Panel;
  bool idle() const { return job_.idle(); }
  ImVec4 grid_rect() const { return grid_rect_; }  // (x, y, w, h) of the cells drawn last frame

 protected:
  Job job_;
  ImVec4 grid_rect_{0, 0, 0, 0};
};

// A panel with no state of its own: a title and the function that draws its content.
class FunctionPanel final : public Panel {
 public:
  using DrawFn = void (*)(FrameContext& ctx);
  FunctionPanel(std::string title, DrawFn draw, bool needs_trace)
      : Panel(std::move(title)), draw_(draw), needs_trace_(needs_trace) {}

 protected:
  void draw_content(FrameContext& ctx) override { draw_(ctx); }
  bool needs_trace() const override { return needs_trace_; }

 private:
  DrawFn draw_;
  bool needs_trace_;
};

}  // namespace attnviz::ui
