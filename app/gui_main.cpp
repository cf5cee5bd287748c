// attnviz: the desktop application. GLFW window + OpenGL 3.3 core context + Dear ImGui;
// everything else lives in ui/ (panels, AppState, the inference worker) and core/.
//
//   attnviz [--model M] [--text S] [--layer L] [--head H] [--stage probs] [--backend cpu|gpu]
//           [--block-size N] [--presentation] [--layout explore|research|classroom]
//           [--screenshot F.png [--frames N]] [--type TEXT]
//           [--train-steps N] [--text-view] [--text-view-attribution] [--lens] [--attribution] [--query I] [--size WxH]
//           [--heatmap-zoom Z] [--heatmap-center I]
//           [--other TEXT] [--compare] [--patching [--patch-grid heads|resid]] [--headless]
//
// --screenshot renders N frames at the normal window size once the first result is in,
// saves the window as F.png (and F.png.json with the on-screen rectangles of the heatmap,
// the token strip and the head grid, for tests), and exits 0. --type appends TEXT one
// character at a time once the first result is in, and records each keystroke-to-frame
// time (key pressed → the frame showing its result presented) in the sidecar's "typing".
// --headless draws into an offscreen framebuffer of an EGL context instead of a window
// (app/offscreen.h): screenshots and --type timings where there is no display server.
// --train-steps N opens the Training panel and trains the classroom preset for N steps; a
// screenshot then waits for the run to end (its state is the sidecar's "training").
// --layout picks the panels' arrangement (ui/layout.h; --presentation alone is Classroom's);
// --text-view opens the Text view panel, with query I (default: the last); --lens and
// --attribution open the Logit lens and Direct logit attribution panels (each in its region).
// --heatmap-zoom Z starts the heatmap zoomed to Z pixels per cell (clamped to fit … 64);
// --heatmap-center I centres it on token I's row and column, selects that cell and makes I
// the query (at least 16 px per cell; out of range: the go-to field's message, nothing moves).
// --other sets prompt B (the other prompt, under the text); --compare opens the Compare prompts
// panel (A's and B's attention for the selected head, or A − B) and --patching the Activation
// patching panel (B's head outputs or residual stream put into A's run; --patch-grid picks the
// grid), which then computes its first grid whatever its size; both go in the bottom region.
#include <CLI/CLI.hpp>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "attnviz_version.h"
#ifdef ATTNVIZ_HAS_GPU
#include "app/offscreen.h"
#endif
#include "core/engine/threads.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/chat_source.h"
#include "ui/app.h"
#include "ui/jobs/wake.h"
#include "ui/state/input_queue.h"

namespace {

constexpr int kWidth = 1600, kHeight = 1000;  // the normal window size (screen coordinates)
// After an edit, how long to wait for its result before presenting a frame that still
// shows the old one (App::fresh_result_wait_ms): 25 ms, or after a keystroke 1.5 × the last
// forward pass when that is at most 150 ms (about where a delay starts to be seen). When the
// result comes within it, the frame that shows the edit is the first one presented: one
// render per keystroke instead of two, and the forward pass has the cores to itself (on a
// software renderer the second render would take them).
constexpr int kFreshResultWaitMinMs = 25, kFreshResultWaitMaxMs = 150;

// After the loop wakes for an event, how many frames to draw before it may sleep again:
// ImGui settles hover, focus and window moves over a frame or two.
constexpr int kFramesAfterWake = 3;

void glfw_error(int code, const char* msg) { std::fprintf(stderr, "attnviz: GLFW error %d: %s\n", code, msg); }

// Keys and characters go through an InputQueue (ui/input_queue.h), so a press shorter than
// a frame is not lost; the mouse, scroll, focus and monitor events go straight to ImGui's
// GLFW backend, which handles quick clicks itself.
attnviz::ui::InputQueue g_input;
// Paths dropped on the window (and --drop's), handed to the App at the next frame.
std::vector<std::string> g_dropped;
void install_input_callbacks(GLFWwindow* win) {
  glfwSetDropCallback(win, [](GLFWwindow*, int count, const char** paths) {
    for (int i = 0; i < count; ++i) g_dropped.emplace_back(paths[i]);
  });
  glfwSetKeyCallback(win, [](GLFWwindow*, int key, int scancode, int action, int mods) {
    attnviz::ui::InputEvent e;
    e.key = key, e.scancode = scancode, e.action = action, e.mods = mods;
    g_input.push(e);
  });
  glfwSetCharCallback(win, [](GLFWwindow*, unsigned int c) {
    attnviz::ui::InputEvent e;
    e.kind = attnviz::ui::InputEvent::Char;
    e.codepoint = c;
    g_input.push(e);
  });
  glfwSetWindowFocusCallback(win, ImGui_ImplGlfw_WindowFocusCallback);
  glfwSetCursorEnterCallback(win, ImGui_ImplGlfw_CursorEnterCallback);
  glfwSetMouseButtonCallback(win, ImGui_ImplGlfw_MouseButtonCallback);
  glfwSetScrollCallback(win, ImGui_ImplGlfw_ScrollCallback);
  glfwSetMonitorCallback(ImGui_ImplGlfw_MonitorCallback);
}
// This frame's share of the queued keys and characters, handed to ImGui's backend.
void feed_input(GLFWwindow* win) {
  for (const attnviz::ui::InputEvent& e : g_input.take_frame()) {
    if (e.kind == attnviz::ui::InputEvent::Char) ImGui_ImplGlfw_CharCallback(win, e.codepoint);
    else ImGui_ImplGlfw_KeyCallback(win, e.key, e.scancode, e.action, e.mods);
  }
}

// Reads the back buffer (after rendering, before the swap; headless: the offscreen
// framebuffer's colour buffer, its default read buffer) and writes it as PNG, top row first.
bool save_png(const std::string& path, int w, int h, bool headless) {
  std::vector<unsigned char> px(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  if (!headless) glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGB, GL_UNSIGNED_BYTE, px.data());
  std::vector<unsigned char> flipped(px.size());
  const size_t row = static_cast<size_t>(w) * 3;
  for (int y = 0; y < h; ++y)
    std::copy_n(px.data() + static_cast<size_t>(h - 1 - y) * row, row, flipped.data() + static_cast<size_t>(y) * row);
  return stbi_write_png(path.c_str(), w, h, 3, flipped.data(), static_cast<int>(row)) != 0;
}

// What the command line asks for beyond the App's own options.
struct ShotOptions {
  std::string path;  // --screenshot: empty for a normal session
  std::string ablate, ablate_mode = "zero";  // --ablate L:H,... and --ablate-mode, as attnviz-cli takes them
  int frames = 5;    // frames to render before it
  int wait_s = 300;  // seconds to wait for the first result
  std::string size;  // --size WxH: the window size (default kWidth x kHeight)
  bool headless = false;  // --headless: no window; an offscreen framebuffer through EGL
  std::string drop;       // --drop PATH: dropped on the window at the first frame
  std::string chat;       // --chat FILE.json: the chat mode's turns
};

void add_options(CLI::App& cli, attnviz::ui::AppOptions& opt, ShotOptions& shot) {
  cli.add_option("--model", opt.model, "model directory, FILE.gguf, builtin:NAME, ollama:NAME[:TAG] or hf:ORG/NAME[@REV] (default: builtin:fortunes-en, else a generated random model)");
  cli.add_option("--text", opt.text, "text to start with");
  cli.add_option("--layer", opt.layer, "layer to show (0-based)")->check(CLI::NonNegativeNumber);
  cli.add_option("--head", opt.head, "query head to show (0-based)")->check(CLI::NonNegativeNumber);
  cli.add_option("--stage", opt.stage,
                 "heatmap tab (capped: only where the layer soft-caps, else masked; implicit: a linear-attention "
                 "layer's matrix A, which is what a softmax stage becomes on such a layer)")
      ->check(CLI::IsMember({"q", "k", "v", "scores", "scaled", "capped", "masked", "probs", "out", "implicit"}));
  cli.add_option("--backend", opt.backend, "cpu or gpu (falls back to cpu, and says why)")->check(CLI::IsMember({"cpu", "gpu"}));
  cli.add_option("--arith", opt.arith,
                 "products with quantized weights: f32 (each weight decoded to float32, exact) or int8 (the activations "
                 "quantized to int8 per block, integer dot products, as llama.cpp); also in the Compute menu")
      ->check(CLI::IsMember({"f32", "int8"}));
  cli.add_option("--block-size", opt.block_size, "context window (1 … model context)")->check(CLI::PositiveNumber);
  cli.add_option_function<std::string>(
         "--weights", [&opt](const std::string& w) { opt.f32_weights = w == "f32"; },
         "stored (default: matrices used where the file stores them) or f32 (converted to float32 on load)")
      ->check(CLI::IsMember({"stored", "f32"}));
  cli.add_flag("--presentation", opt.presentation, "large fonts, high-contrast theme; with no --layout, the Classroom layout");
  cli.add_option("--layout", opt.layout,
                 "the panels' arrangement at the start: explore (the default), research (the logit lens, attribution, "
                 "compare and text view as tabs beside the heatmap) or classroom (the heatmap, its caption and the lesson, "
                 "in large type); F6/F7/F8 switch")
      ->check(CLI::IsMember({"explore", "research", "classroom"}, CLI::ignore_case));
  cli.add_option("--ablate", shot.ablate, "heads to start with switched off, layer:head pairs, e.g. 1:4,1:7");
  cli.add_option("--ablate-mode", shot.ablate_mode, "zero (default) or mean");
  cli.add_option("--screenshot", shot.path, "render, save the window as this PNG and exit");
  cli.add_option("--frames", shot.frames, "frames to render before the screenshot (default 5)")->check(CLI::PositiveNumber);
  cli.add_option("--type", opt.type, "type these characters one by one after the first result, timing each keystroke to its frame (recorded in the screenshot's .json)");
  cli.add_option("--train-steps", opt.train_steps, "open the Training panel and train the classroom preset (induction head) this many steps; a screenshot waits for the run to end")->check(CLI::PositiveNumber);
  cli.add_flag("--text-view", opt.text_view, "open the Text view panel (the text shaded by the weights the query gives it; also in the View menu)");
  cli.add_flag("--text-view-attribution", opt.text_view_attribution, "open the Text view shaded by logit attribution (each token's share of the logit the query predicts, carried by the heads' attention)");
  cli.add_flag("--lens", opt.lens, "open the Logit lens panel (what each layer would predict at each position; also in the View menu)");
  cli.add_flag("--attribution", opt.attribution, "open the Direct logit attribution panel (each head's and MLP's share of a logit at the query; also in the View menu)");
  cli.add_option("--other", opt.other, "prompt B, the other prompt: compared with the text and patched into its run (also typed under the text)");
  cli.add_flag("--compare", opt.compare, "open the Compare prompts panel (the selected head's attention on the text, on --other, or the difference; also in the View menu)");
  cli.add_flag("--why", opt.why, "open \"Why this score\": the selected head's score from --query to --key split into what wrote each side (also opened by a click on a heatmap cell)");
  cli.add_option("--key", opt.key, "with --why: the key (window position; default: the query row's strongest key)");
  cli.add_flag("--circuits", opt.circuits, "open the Circuits panel (composition between heads, from the weights; also in the View menu)");
  cli.add_flag("--experts", opt.experts, "open the Experts panel (a model with experts, GPT-OSS: each token's experts in the selected layer and each expert's load; also in the View menu)");
  cli.add_option("--scan", opt.scan_corpus, "open the Head scan panel and scan this corpus (\"\" or \"shipped\": the corpus that ships with attnviz)")
      ->expected(0, 1);
  cli.add_flag("--patching", opt.patching, "open the Activation patching panel and compute its grid (--other's activations put into the text's run; also in the View menu)");
  cli.add_option_function<std::string>(
         "--patch-grid", [&opt](const std::string& g) { opt.patch_resid = g == "resid"; },
         "the patching grid: heads (layers x heads, default) or resid (layers x positions)")
      ->check(CLI::IsMember({"heads", "resid"}));
  cli.add_option("--query", opt.query, "the text view's query: a position in the window (default: the last token; past the end: the last)")->check(CLI::NonNegativeNumber);
  cli.add_option("--heatmap-zoom", opt.heatmap_zoom, "the heatmap's zoom at the start, pixels per cell (clamped from fit-to-panel to 64)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--heatmap-center", opt.heatmap_center, "centre the heatmap on token I's row and column at the start (and select that cell)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--size", shot.size, "window size in screen coordinates, WxH (default 1600x1000), e.g. 1280x720 for a projector")
      ->check([](const std::string& v) {
        int w = 0, h = 0;
        char x = 0;
        return std::sscanf(v.c_str(), "%d%c%d", &w, &x, &h) == 3 && x == 'x' && w >= 640 && h >= 400 && w <= 16384 && h <= 16384
                   ? std::string()
                   : std::string("expected WxH with W >= 640 and H >= 400, e.g. 1280x720");
      });
  cli.add_flag("--headless", shot.headless,
               "no window and no display server: draw offscreen through EGL (a GPU's driver, or Mesa's llvmpipe); "
               "needs --screenshot")
      ->needs(cli.get_option("--screenshot"));
  cli.add_option("--chat", shot.chat,
                 "start in chat mode with these turns: FILE.json, a list of {\"role\", \"content\"} messages rendered "
                 "with the model's chat template (as attnviz-cli's --chat)")
      ->type_name("FILE.json")
      ->excludes(cli.get_option("--text"));
  cli.add_flag("--browser", opt.browser,
               "open File > Open model... (the model browser: the models in the Ollama, Hugging Face, LM Studio and "
               "llama.cpp stores; also Ctrl+O)");
  cli.add_option("--drop", shot.drop,
                 "open PATH as if it were dropped on the window (a .gguf file or a model folder): loaded off the UI thread "
                 "while the model given by --model stays on screen")
      ->type_name("PATH");
  cli.add_option("--wait", shot.wait_s, "seconds to wait for the first result before a screenshot (default 300)")->check(CLI::PositiveNumber);
}

// A width × height window with an OpenGL 3.3 core context, current; nullptr (and the
// reason on stderr) when there is none.
GLFWwindow* open_window(bool screenshot, int width, int height) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr, "attnviz: cannot open a window (no display?)\n  HINT: run it in a desktop session, or under xvfb-run for screenshots.\n");
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  GLFWwindow* win = glfwCreateWindow(width, height, "attnviz", nullptr, nullptr);
  if (!win) {
    std::fprintf(stderr, "attnviz: cannot create an OpenGL 3.3 core window\n  HINT: check the graphics driver (glxinfo | grep 'core profile').\n");
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(win);
  glfwSwapInterval(screenshot ? 0 : 1);
  return win;
}

// The font atlas sampled GL_NEAREST (ImGui's backend creates it GL_LINEAR): its glyphs are
// drawn texel for texel (ui/fonts.cpp), and nearest sampling is cheaper on a software
// renderer. Checked every frame: a rebuilt atlas is a new texture (which may reuse the name).
void sample_font_atlas_nearest(ImGuiIO& io) {
  if (!io.Fonts->TexID) return;
  GLint bound = 0, filter = 0;
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &bound);
  glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(reinterpret_cast<intptr_t>(io.Fonts->TexID)));
  glGetTexParameteriv(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, &filter);
  if (filter != GL_NEAREST) {
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  }
  glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(bound));
}

// Saves the back buffer as shot.path and the sidecar JSON beside it; 0, or 1 on failure.
int write_screenshot(const attnviz::ui::App& app, const ShotOptions& shot, int fw, int fh) {
  errno = 0;
  if (!save_png(shot.path, fw, fh, shot.headless)) {
    const int err = errno;
    std::remove(shot.path.c_str());  // a part written before a full disk or a size limit
    std::fprintf(stderr, "attnviz: cannot write '%s': %s (nothing was written)\n", shot.path.c_str(),
                 err ? std::strerror(err) : "write failed");
    return 1;
  }
  const ImVec2 s = ImGui::GetIO().DisplayFramebufferScale;
  const std::string sidecar = shot.path + ".json";
  std::ofstream side(sidecar);
  side << app.sidecar_json(s.x, s.y) << "\n";
  side.close();
  if (!side) {
    const int err = errno;
    std::remove(sidecar.c_str());
    std::remove(shot.path.c_str());
    std::fprintf(stderr, "attnviz: cannot write '%s': %s (nothing was written)\n", sidecar.c_str(),
                 err ? std::strerror(err) : "write failed");
    return 1;
  }
  std::printf("attnviz: wrote %s (%dx%d) and %s.json\n", shot.path.c_str(), fw, fh, shot.path.c_str());
  return 0;
}

// The event loop: one ImGui frame per wake-up until the window closes, the user quits or
// the screenshot is written. Returns the exit code. `win` is null with --headless: frames
// go to the offscreen framebuffer that is bound (width × height), nothing is presented, and
// a frame that waits for a typed key's result waits on the worker instead of on events.
int run_loop(GLFWwindow* win, attnviz::ui::App& app, const attnviz::ui::AppOptions& opt, const ShotOptions& shot,
             int width, int height) {
  const bool screenshot = !shot.path.empty();
  ImGuiIO& io = ImGui::GetIO();
  int shot_frames = 0;
  int frames_left = kFramesAfterWake;
  auto last = std::chrono::steady_clock::now();
  // ATTNVIZ_FRAME_LOG=FILE: a line per presented frame, milliseconds since the start and the
  // status bar's news (tests see which frames came, with no input, after a job ended).
  std::FILE* frame_log = nullptr;
  if (const char* path = std::getenv("ATTNVIZ_FRAME_LOG"); path && *path) frame_log = std::fopen(path, "w");
  const auto t_start = last;
  while (!(win && glfwWindowShouldClose(win)) && !app.quit_requested()) {
    // Idle politely. Screenshots run flat out, except while a typed key waits for its
    // result, as a real session would. Otherwise: draw while queued input or the last
    // wake-up needs frames; while work runs (a result, training, head importance) wake at
    // least 4 times a second for the progress; else sleep until an event (input, a resize,
    // or the worker's glfwPostEmptyEvent when it publishes). Headless: no events; ImGui's
    // size and clock are set here instead of by its GLFW backend.
    if (!win) {
      if (app.typing_waits()) app.wait_result(50);
      const auto now = std::chrono::steady_clock::now();
      io.DisplaySize = ImVec2(static_cast<float>(width), static_cast<float>(height));
      io.DisplayFramebufferScale = ImVec2(1.f, 1.f);
      io.DeltaTime = std::max(1e-4f, std::chrono::duration<float>(now - last).count());
      last = now;
    } else if (screenshot && !app.typing_waits()) {
      glfwPollEvents();
    } else if (!opt.type.empty()) {
      glfwWaitEventsTimeout(0.05);
    } else if (!g_input.empty() || frames_left > 0) {
      glfwPollEvents();
      --frames_left;
    } else {
      if (app.animating()) glfwWaitEventsTimeout(0.25);
      else glfwWaitEvents();
      frames_left = kFramesAfterWake;
    }
    if (win) feed_input(win);
    const auto t_frame = std::chrono::steady_clock::now();
    float sx = 1.f, sy = 1.f;
    if (win) glfwGetWindowContentScale(win, &sx, &sy);
    app.before_frame(sx);
    ImGui_ImplOpenGL3_NewFrame();
    sample_font_atlas_nearest(io);
    if (win) ImGui_ImplGlfw_NewFrame();
    if (screenshot) io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no stray hover from where Xvfb put the pointer
    ImGui::NewFrame();
    if (!g_dropped.empty()) {
      app.drop(g_dropped);
      g_dropped.clear();
    }
    app.frame();
    ImGui::Render();
    if (app.posted_this_frame() && app.wait_result(app.fresh_result_wait_ms(kFreshResultWaitMinMs, kFreshResultWaitMaxMs)))
      continue;  // draw the fresh result instead
    const auto t_ui = std::chrono::steady_clock::now();
    int fw = width, fh = height;
    if (win) glfwGetFramebufferSize(win, &fw, &fh);
    glViewport(0, 0, fw, fh);
    // The panels' background colour: panels that nothing overlaps leave theirs to the clear
    // (App::set_panel_backgrounds).
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1.f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (screenshot && app.settled() && ++shot_frames >= shot.frames) return write_screenshot(app, shot, fw, fh);
    if (win) glfwSwapBuffers(win);
    if (!opt.type.empty() || !win) glFinish();  // timing keystrokes: presented, not just queued
    const auto t_done = std::chrono::steady_clock::now();
    using ms = std::chrono::duration<double, std::milli>;
    app.after_present(ms(t_ui - t_frame).count(), ms(t_done - t_ui).count());
    if (frame_log) {
      std::fprintf(frame_log, "%.1f %s\n", ms(t_done - t_start).count(), app.notice().c_str());
      std::fflush(frame_log);
    }
  }
  if (frame_log) std::fclose(frame_log);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  attnviz::reexec_with_passive_wait(argv);  // idle OpenMP threads sleep instead of spinning
  // Past the file-size limit (ulimit -f) a write fails with EFBIG and the error path runs
  // (the temporary file goes, the message names the file) instead of SIGXFSZ killing us.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App cli{"attnviz: watch causal self-attention work, live, as you type"};
  attnviz::ui::AppOptions opt;
  ShotOptions shot;
  add_options(cli, opt, shot);
  cli.set_version_flag("--version", "attnviz " ATTNVIZ_VERSION);
  CLI11_PARSE(cli, argc, argv);
  opt.text_given = cli.count("--text") > 0;
  if (!shot.chat.empty()) {
    try {
      opt.chat = attnviz::ui::chat_turns_of(attnviz::read_chat_messages(shot.chat),
                                            attnviz::excerpt(shot.chat, attnviz::kPathExcerptBytes));
    } catch (const std::exception& e) {
      std::fputs(attnviz::format_message("error", e.what()).c_str(), stderr);
      return 2;
    }
  }
  opt.scan = cli.count("--scan") > 0;
  if (opt.scan_corpus == "shipped") opt.scan_corpus.clear();
  try {  // checked for form here; heads the model does not have are dropped once it is loaded
    attnviz::ModelConfig any;
    any.n_layer = any.n_head = 1 << 20;
    opt.ablation = attnviz::parse_ablation(shot.ablate, shot.ablate_mode, any);
  } catch (const std::exception& e) {
    std::fputs(attnviz::format_message("error", e.what()).c_str(), stderr);
    return 2;
  }
  opt.screenshot = !shot.path.empty();
  if (!shot.drop.empty()) g_dropped.push_back(shot.drop);

  int width = kWidth, height = kHeight;
  if (!shot.size.empty()) std::sscanf(shot.size.c_str(), "%dx%d", &width, &height);
  GLFWwindow* win = nullptr;
#ifdef ATTNVIZ_HAS_GPU
  std::unique_ptr<attnviz::Offscreen> offscreen;
#endif
  if (shot.headless) {
#ifdef ATTNVIZ_HAS_GPU
    try {
      offscreen = std::make_unique<attnviz::Offscreen>(width, height);
    } catch (const std::exception& e) {
      std::fputs(attnviz::format_message("error", std::string("--headless: ") + e.what()).c_str(), stderr);
      return 1;
    }
    std::printf("attnviz: headless, drawing offscreen on %s\n", offscreen->renderer().c_str());
#else
    std::fprintf(stderr, "attnviz: --headless needs the EGL context of the GPU backend, and this build has none\n"
                         "  HINT: build with -DATTNVIZ_GPU=ON (libepoxy-dev), or use xvfb-run for screenshots.\n");
    return 1;
#endif
  } else {
    win = open_window(opt.screenshot, width, height);
    if (!win) return 1;
  }
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  int rc = 0;
  std::string ini_path;  // outlives the App: ImGui writes imgui.ini in DestroyContext
  {
    attnviz::ui::App app(opt);
    ini_path = app.imgui_ini_path();
    ImGui::GetIO().IniFilename = ini_path.empty() ? nullptr : ini_path.c_str();
    if (win) {
      ImGui_ImplGlfw_InitForOpenGL(win, false);  // our callbacks: install_input_callbacks
      install_input_callbacks(win);
    }
    ImGui::GetIO().ConfigInputTextCursorBlink = false;  // a blinking caret would need frames while idle
    ImGui_ImplOpenGL3_Init("#version 330 core");
    if (opt.screenshot && !app.wait_first_answer(shot.wait_s * 1000))
      std::fprintf(stderr, "attnviz: no result after %d s; taking the screenshot anyway\n", shot.wait_s);
    if (win) app.set_on_result([] { glfwPostEmptyEvent(); });  // draw a result as soon as it is published
    if (win) attnviz::ui::set_wake_ui(+[] { glfwPostEmptyEvent(); });  // and whatever a background job finished
    rc = run_loop(win, app, opt, shot, width, height);
    ImGui_ImplOpenGL3_Shutdown();
    if (win) ImGui_ImplGlfw_Shutdown();
  }  // the App (and its worker thread) ends here, while the GL context is still current
  attnviz::ui::set_wake_ui(nullptr);
  ImGui::DestroyContext();
  if (win) {
    glfwDestroyWindow(win);
    glfwTerminate();
  }
  return rc;
}
