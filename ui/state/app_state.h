// What the user has selected and the pure logic around it: clamping when the model
// changes, the block_size window over the typed tokens, query-head → KV-head grouping,
// KV-cache arithmetic, parameter counts, next-token top-k and sampling. No ImGui, no GL,
// no tensors (panels read those from the Trace): unit-tested in tests/test_ui_state.cpp.
//
// Dimension letters as in core/model/config.h: L layers, H query heads, KV key/value heads,
// d head size, T tokens in the window, V vocab.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/export/colormap.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "core/engine/trace.h"
#include "core/tokenize/labels.h"
#include "ui/state/chat.h"
#include "ui/state/layout_state.h"

namespace attnviz::ui {

// The model's dimensions as far as selection cares (all 0 while no model is loaded).
struct ModelDims {
  int n_layer = 0;    // L
  int n_head = 0;     // H
  int n_kv_head = 0;  // KV
  int head_size = 0;  // d
  int n_ctx = 0;      // longest context; the block_size slider's maximum
  // (L) heads each layer's trace holds (ModelConfig::heads_at): H, a hybrid's linear layers
  // Hv, its convolution layers 0. Empty: H everywhere.
  std::vector<int> layer_heads;
  int heads_at(int l) const {
    return l >= 0 && static_cast<size_t>(l) < layer_heads.size() ? layer_heads[static_cast<size_t>(l)] : n_head;
  }
  static ModelDims of(const ModelConfig& c);
};

struct AppState {
  // --- what runs
  std::string model_spec;       // directory or builtin:NAME
  std::string backend = "cpu";  // "cpu" or "gpu"
  std::string arith = "f32";    // products with quantized weights: "f32" or "int8" (int8_product.h)
  std::string text;             // everything typed
  std::string other_text;       // prompt B, the other prompt (Compare and Patching panels); "" = none
  int block_size = 0;           // 1 … n_ctx; 0 = the model's context
  Ablation ablation;            // heads switched off (head grid: right-click or X), and zero | mean

  // --- selection
  int layer = 0;                 // 0 … L-1
  int head = 0;                  // query head, 0 … H-1
  Stage stage = Stage::Probs;    // heatmap tab
  int kv_group = 0;              // KV head chosen in the GQA panel, 0 … KV-1
  int query = -1;                // the text view's query: a window position, −1 = the last token
  int key = -1;                  // the key of the cell clicked in the heatmap ("Why this score"); −1 = the row's strongest
  bool why_requested = false;    // a heatmap cell was clicked: the App opens "Why this score" (and clears this)

  // Hovered token (position in the window, −1 for none), one frame delayed so that every
  // panel sees the same value whichever is drawn first: panels read `hovered_token` and
  // call hover(); end_frame() publishes what was hovered this frame.
  int hovered_token = -1;
  int hover_next = -1;
  void hover(int t) { hover_next = t; }
  void end_frame() { hovered_token = hover_next; hover_next = -1; }

  // --- next token
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 10;
  uint64_t seed = 1;

  // --- view
  float cell_px = 0.f;  // heatmap zoom: pixels per cell; 0 = fit the panel
  Colormap probs_colormap = Colormap::Viridis;
  bool presentation = false;  // large fonts, high-contrast theme
  LayoutState layout;         // the tiled layout's preset, splitters and moved panels (kept in the settings)

  // --- chat mode (the text panel's Chat tab, ui/chat.h): `text` is then the turns rendered
  // through the model's chat template, followed by the reply generated so far
  bool chat = false;
  std::vector<ChatTurn> chat_turns;
  bool chat_generation_prompt = true;  // end with the template's generation prompt (the assistant's turn)

  // --- models
  std::vector<std::string> recent_models;  // File → Recent models: newest first (remember_model)
  // A model to open off the UI thread (the App's ModelLoader), set by the model browser,
  // the text panel, a dropped file or a recent model; the App clears it. "" for none.
  std::string open_request;

  // The guided lesson's row i and key j, outlined in the heatmap while the lesson is open.
  struct LessonFocus {
    bool active = false;
    int row = -1, col = -1;
  } lesson;
};

// Clamps layer, head, kv_group and block_size into the model's ranges (after a model
// change, or when loading settings). block_size 0 or out of range becomes n_ctx. The head
// is clamped to the selected layer's heads (a layer without any keeps it).
void clamp_selection(AppState& s, const ModelDims& m);

// Puts `spec` first in the recent models (once), keeping at most kMaxRecentModels.
constexpr size_t kMaxRecentModels = 10;
void remember_model(std::vector<std::string>& recent, const std::string& spec);

// Keyboard navigation; wraps around.
void step_layer(AppState& s, const ModelDims& m, int delta);
void step_head(AppState& s, const ModelDims& m, int delta);
// Steps through the tabs the layer shows: `capped` says whether it soft-caps (the capped tab
// exists only then, LayerTrace::has), `mixer` what kind of layer it is.
void step_stage(AppState& s, int delta, bool capped = false, Mixer mixer = Mixer::Softmax);
// A stage the layer does not have becomes the nearest it has: capped (after moving to a
// layer that does not soft-cap) the masked stage; a softmax stage on a linear layer its
// implicit matrix, and back.
void fit_stage(AppState& s, bool capped, Mixer mixer = Mixer::Softmax);

// Stages in the order the heatmap tabs show them (scores … probs, implicit, then Q, K, V,
// out), and those one layer shows (without capped unless it soft-caps; a linear layer's
// implicit, Q, K, V, out; none in a convolution layer).
const std::vector<Stage>& stage_tab_order();
std::vector<Stage> stage_tabs(bool capped, Mixer mixer = Mixer::Softmax);
bool stage_is_square(Stage s);         // (T, T) per head: scores, scaled, masked, probs, implicit
bool stage_is_signed(Stage s);         // everything but probs
bool stage_is_kv(Stage s);             // K and V live on KV heads

// ---------- the block_size window over the typed tokens
struct WindowInfo {
  int total = 0;       // tokens typed
  int block_size = 0;  // window size in use
  int dropped = 0;     // tokens before the window (greyed in the token strip)
  int T = 0;           // tokens in the window = total − dropped
};
WindowInfo window_info(int total_tokens, int block_size);

// The text of token `id` from the model's tokenizer ("<id>" when it has none).
std::string token_text(const Model* m, int id);
// Readable labels of a token sequence (token_labels; "<id>" when the model has no tokenizer).
std::vector<TokenLabel> label_tokens(const Model& m, const std::vector<int>& ids);
// The chip label of token k of a sequence: labels[k] when there, else token_text of `id`.
std::string chip_label_at(const std::vector<TokenLabel>& labels, size_t k, const Model* m, int id);
// The chip label of window position `pos` of `tr`, when `labels` covers every token of the
// text the trace was run on (dropped + window).
std::string chip_label_in_window(const std::vector<TokenLabel>& labels, const Trace& tr, int pos, const Model* m);

// A token's text made visible on a chip: space → "␣", newline → "↵", tab → "⇥", other
// control characters → "\xNN"; empty → "∅".
std::string chip_label(const std::string& piece);

// ---------- a layer's attention window (apart from block_size)
// Query i of a layer sees keys [first, i]: first = 0 on a global layer, i − W + 1 (at
// least 0) on a local one of window W.
struct SeenKeys {
  int first = 0, last = 0;  // keys first … last (= i)
  int count() const { return last - first + 1; }
  bool local = false;       // the layer has a window
  int window = 0;           // W (0: global)
};
SeenKeys seen_keys(int i, int window);
// Key j of row i hidden by the window alone (j ≤ i but before the window's first key).
inline bool outside_window(int64_t i, int64_t j, int window) { return j <= i && j < window_first(i, window); }
// Whether layer l scales its scores by 1/√d (most models); Gemma 2/3's query_pre_attn_scalar,
// Granite's attention_multiplier and Gemma 4's 1 (QK-norm sets the scores' size) do not.
bool scale_is_inv_sqrt_d(const ModelConfig& c, int l);
// A stage's name on layer l: stage_label, but "scaled ×0.0625" where the scale is not 1/√d.
std::string stage_title(Stage st, const ModelConfig& c, int l);
// "local W=512" or "global", plus " no RoPE" for a layer without positional encoding and
// ", K and V of layer 13" for one that reads another layer's (Gemma 4's KV sharing);
// "linear attention" or "short convolution" for a hybrid's other layers.
std::string layer_kind(const LayerSpec& spec);
// What the heatmap shows, in words: "layer 1 · head 4 · softmax" on an attention layer,
// the layer's kind where it is not softmax attention ("layer 2 · head 0 · linear attention ·
// Q", "layer 3 · short convolution: no heads"); `rollout` names the rollout tab instead.
std::string shown_title(const ModelConfig& c, int layer, int head, Stage st, bool rollout);
// Entries of one layer's KV cache over T tokens: T on a global layer, min(T, W) on a local
// one (its keys before i − W + 1 are never read again).
int64_t kv_entries(int64_t T, int window);
// The whole KV cache in bytes, layer by layer (local layers keep min(T, W) entries; a
// hybrid's linear and convolution layers keep none; nor does a layer that reads another
// layer's K and V, Gemma 4's shared layers, unless `shared_keep_own`). `kv_heads` heads of
// each layer's head size on every layer; −1: each layer's own (ModelConfig::kv_heads_at).
int64_t kv_cache_bytes_layers(const ModelConfig& c, int64_t T, int64_t kv_heads, int64_t bytes_per_value = 4,
                              bool shared_keep_own = false);
// What a hybrid's other layers keep instead, the same for any T: per gated-delta-rule layer
// Hv memories of dk × dv plus the convolution's last K − 1 inputs (K − 1) × (2·Hk·dk + Hv·dv);
// per short-convolution layer its last K − 1 inputs, (K − 1) × C. 0 for a transformer.
int64_t recurrent_state_bytes(const ModelConfig& c, int64_t bytes_per_value = 4);
// The values that state holds for layer l alone (0 for a softmax layer).
int64_t layer_state_values(const ModelConfig& c, int l);

// The numbers of one cell (i, j) of a layer's attention, as the heatmap's tooltip shows
// them, from row i of its raw scores q·kᵀ (srow, T values): scaled, soft-capped, the mask
// (causal and window) and the softmax terms over the keys row i sees.
struct CellNumbers {
  float score = 0, scaled = 0, capped = 0;
  bool masked = false;        // causal or outside the window
  bool future = false;        // j > i
  bool outside = false;       // j ≤ i but before the window
  int first = 0;              // the first key row i sees
  double row_max = 0, row_sum = 0, exp = 0;  // over keys first … i, of the capped scores
};
CellNumbers cell_numbers(const LayerTrace& lt, const float* srow, int i, int j);

// ---------- grouped-query attention
int group_size(int n_head, int n_kv_head);                 // H / KV
int kv_head_of(int h, int n_head, int n_kv_head);          // h / (H / KV)
std::vector<int> query_heads_of(int kv, int n_head, int n_kv_head);  // the heads sharing KV head kv

// Bytes of ONE cached tensor (K or V) of one layer: seq × kv_heads × d × bytes_per_value.
// For example 1000 tokens × 32 heads × d 128 × 4 B = 16.4 MB.
int64_t kv_tensor_bytes(int64_t seq, int64_t kv_heads, int64_t head_size, int64_t bytes_per_value = 4);
// The whole KV cache: K and V, every layer: 2 × L × seq × kv_heads × d × bytes_per_value.
int64_t kv_cache_bytes(int64_t seq, int64_t kv_heads, int64_t head_size, int64_t n_layer, int64_t bytes_per_value = 4);
// Decimal units, as the GQA panel shows them: "512 B", "3.2 kB", "16.4 MB", "1.20 GB".
std::string format_bytes(int64_t bytes);


// ---------- next token
struct TokenProb {
  int id = 0;
  float p = 0.f;  // probability after temperature
};
// softmax(logits / temperature) (temperature ≤ 0: all mass on the argmax), the k most
// likely, most likely first.
std::vector<TokenProb> top_k_probs(const float* logits, int V, float temperature, int k);
// Samples from softmax(logits / temperature) with u uniform in [0, 1); temperature ≤ 0 is
// the argmax.
int sample_token(const float* logits, int V, float temperature, double u);

// The effect of an ablation on the next token: the k most likely tokens of the ablated
// distribution, with their probability with and without the ablation (both after
// temperature), most likely first.
struct TokenShift {
  int id = 0;
  float p = 0.f;        // with the ablation
  float p_clean = 0.f;  // without
};
std::vector<TokenShift> compare_top_k(const float* ablated, const float* clean, int V, float temperature, int k);

// Clears the ablation when it names heads outside the model (after a model change), and
// always for a hybrid (layer_heads set), whose linear layers the engine cannot ablate yet.
void clamp_ablation(AppState& s, const ModelDims& m);

// ---------- two prompts (the Compare panel)
// Prompt A (the text) and prompt B (the other prompt) are aligned by window position from
// the start: with Ta and Tb tokens, positions 0 … n−1, n = min(Ta, Tb), are compared.
enum class CompareView { A, B, Difference };
const char* compare_view_label(CompareView v);  // "A", "B", "A − B"
// One head's attention weights of A (ta, ta) and of B (tb, tb), both row-major, as the view
// shows them: the top-left (n, n) block of A's, of B's, or A's minus B's, n = min(ta, tb).
std::vector<float> aligned_attention(CompareView v, const float* a, int ta, const float* b, int tb);
// The first position where two token sequences differ (min(size) when one is a prefix of
// the other; the size when they are equal).
int first_difference(const std::vector<int>& a, const std::vector<int>& b);
// "" when ta == tb, else the sentence the Compare panel shows: the counts and that the
// first min(ta, tb) positions are compared, aligned from the start.
std::string alignment_note(int ta, int tb);

}  // namespace attnviz::ui
