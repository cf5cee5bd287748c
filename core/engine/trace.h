// What one forward pass records: every matrix of attention, per layer and head, as plain
// data. The engine writes it; panels, exporters and the CLI read it as const&.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/engine/ablation.h"
#include "core/engine/mask.h"
#include "core/model/config.h"

namespace attnviz {

// A float32 array, row-major, with its shape. A 3-D (heads, rows, cols) tensor may be
// stored with room to grow: row i of head h starts at data[h * head_stride() + i * ld()],
// with ld() ≥ cols and head_stride() ≥ rows · ld(). Appending a token then writes the new
// row and column in place instead of moving every kept value (see resize_keep). A tensor
// built from {shape, data} is dense (ld() = cols); dense() says whether it still is.
// `data` starts on a 64-byte boundary (core/aligned.h): the same input gives the same bits
// in any process, whatever its heap.
struct Tensor {
  std::vector<int64_t> shape;
  FloatBuf data;
  int64_t row_pitch = 0;   // 3-D: floats from one row to the next; 0 = dim(2)
  int64_t head_pitch = 0;  // 3-D: floats from one head to the next; 0 = dim(1) · ld()

  int64_t dim(int i) const { return shape[static_cast<size_t>(i)]; }
  int64_t numel() const;
  int64_t ld() const { return row_pitch ? row_pitch : shape.back(); }
  int64_t head_stride() const { return head_pitch ? head_pitch : dim(1) * ld(); }
  bool dense() const { return shape.size() != 3 || (ld() == dim(2) && head_stride() == dim(1) * dim(2)); }
  // For (A, B, C): the (B, C) slice of head h, rows ld() apart.
  float* head(int64_t h) { return data.data() + h * head_stride(); }
  const float* head(int64_t h) const { return data.data() + h * head_stride(); }
  // 3-D element (a, i, j)
  float at(int64_t a, int64_t i, int64_t j) const { return data[static_cast<size_t>(a * head_stride() + i * ld() + j)]; }
  float& at(int64_t a, int64_t i, int64_t j) { return data[static_cast<size_t>(a * head_stride() + i * ld() + j)]; }
  // Head h as a dense row-major (B, C) array: in place when its rows are contiguous, else
  // copied into `scratch`.
  const float* head_dense(int64_t h, std::vector<float>& scratch) const;
  Tensor dense_copy() const;  // the same values, dense

  // Reshapes a 2-D (rows, cols) or 3-D (heads, rows, cols) tensor to new rows/cols, keeping
  // the values of the block [0, keep_rows) x [0, keep_cols) of every head. The rest of the
  // new shape is 0 (an unchanged shape keeps every value: callers overwrite). A 3-D tensor that still fits its storage is not moved at all; one that
  // grows past it moves once into storage with about a quarter more room in the dimensions
  // that grew.
  void resize_keep(std::vector<int64_t> new_shape, int64_t keep_rows, int64_t keep_cols);
  // Rows (axis 1 of a 3-D tensor, axis 0 of a 2-D one) the storage holds without moving.
  int64_t row_capacity() const;
  // Room for `rows` rows without moving: a 3-D tensor with less moves once into storage with
  // that many rows per head (its values and shape stay); a 2-D one reserves the capacity.
  // Nothing for other ranks.
  void reserve_rows(int64_t rows);
};

// Stages of attention, in the order they happen. Capped exists only in layers that
// soft-cap their scores (LayerTrace::has). Implicit is a gated-delta-rule layer's (T, T)
// matrix A (o_t = Σ_s A[t,s]·v_s), the one matrix such a layer has in place of scores and
// probs; it comes last so that the stages before keep their numbers.
enum class Stage { Q, K, V, Scores, Scaled, Capped, Masked, Probs, Out, Implicit };
constexpr int kStageCount = 10;
const char* stage_name(Stage s);  // "q", "k", ... as in the dump tensor names
const char* stage_label(Stage s);  // what people read: "scores q·kᵀ", "scaled /√d", "masked", "softmax", "Q", …, "head output"
bool stage_from_name(const std::string& name, Stage* out);  // the stage whose stage_name is `name`; false when none



// Stored stages: q, k, v, scores, probs, out. `scaled` and `masked` are derived when asked
// for (scaled = scores · scale, masked = scaled with −inf where j > i), never stored: that
// halves what a trace holds (GPT-2 small at T=1024: 2.4 GB of (T, T) matrices → 1.2 GB) and
// what every forward pass writes.
//
// A compact layer (compact = true) stores no (T, T) matrix at all: scores and probs are
// empty and head_values / row_values / materialize recompute a head's from q and k through
// the same kernel the CPU backend ran (attention_block in ops.h), so they are the same
// numbers. The layer then holds O(T) per head; the per-head summaries (row_stats, thumbs)
// stand in for the matrices where every head is shown at once.
struct LayerTrace {
  Tensor q;       // (H, T, d)  queries as used in the dot product (after RoPE)
  Tensor k;       // (KV, T, d) keys as used (after RoPE)
  Tensor v;       // (KV, T, d) values
  Tensor scores;  // (H, T, T)  q·kᵀ, unscaled, full matrix; empty when compact
  Tensor probs;   // (H, T, T)  softmax of masked; rows sum to 1, 0 where j > i; empty when compact
  Tensor out;     // (H, T, d)  probs · v, before the output projection
  Tensor resid;   // (T, C)     the residual stream entering the layer (both backends; the CPU
                  //            backend recomputes from it when an ablation changes); dumped only
                  //            when asked (`dump --stages resid`), not one of the Stage tensors
  Tensor row_stats;  // (H, T, kRowStats) per-row terms of the head scores (head_summary.h);
                     //   empty when the backend does not compute them (score_heads then reads probs)
  Tensor thumbs;     // (H, n, n) probs (a linear layer: |A|) max-pooled over thumb_bucket² cells; empty: none
  int thumb_bucket = 0;
  // What mixes this layer's tokens (Mixer::Softmax unless the model says otherwise). A
  // gated-delta-rule layer (Qwen3.5's linear layers) holds q, k (Hv, T, dk) as they enter
  // the recurrence (after the convolution, L2 norm, and for q × dk^−½), v (Hv, T, dv), out
  // (Hv, T, dv) = o before the gated norm, beta and decay, `implicit` and thumbnails of |A|;
  // no scores, no probs and no row_stats.
  Mixer mixer = Mixer::Softmax;
  Tensor gate;      // (H, T, d)  σ(gate) of a gated softmax layer (Qwen3.5's full layers); empty otherwise
  Tensor beta;      // (Hv, T)    a linear layer's β_t: how strongly token t writes to memory
  Tensor decay;     // (Hv, T)    a linear layer's log-decay g_t ≤ 0: memory × e^g at token t
  Tensor implicit;  // (Hv, T, T) a linear layer's A: o_t = Σ_s A[t,s]·v_s (0 above the diagonal);
                    //   empty when compact (Stage::Implicit's rows are then swept from q, k, β, g)
  // A linear layer's memory S of every value head, (Hv, dk, dv) each: after the first
  // (i + 1)·kStateEvery rows for i < T / kStateEvery (snapshots: an edit replays from the
  // nearest one before it), and after the first state_rows rows (an append continues it).
  std::vector<float> state_snaps, state_final;
  int64_t state_rows = 0;
  // GPT-OSS. A layer with sinks: each query head's sink logit (H), and `sink` (H, T), the
  // probability row i gives the sink (probs' rows then sum to 1 − sink). A layer with
  // experts: the router's logits (T, E), and the K experts each token chose, by descending
  // weight, with their weights (T, K) (expert indices held as floats: exact below 2^24).
  std::vector<float> sinks;
  Tensor sink;
  Tensor router, experts, expert_weights;
  float scale = 1.f;    // as the backend applied it: 1/√d unless the model says otherwise
  float softcap = 0.f;  // > 0: this layer soft-caps its scaled scores (the capped stage)
  int window = 0;       // > 0: a local layer; query i sees keys [i − window + 1, i]
  bool compact = false;

  static bool derived(Stage s) { return s == Stage::Scaled || s == Stage::Capped || s == Stage::Masked; }
  // capped only where soft-capped; in a linear layer q, k, v, out and implicit (no softmax
  // stage), in a softmax layer everything but implicit, no stage at all in a convolution layer
  bool has(Stage s) const {
    if (mixer == Mixer::GatedDeltaNet) return s == Stage::Implicit || !matrix(s);
    return mixer == Mixer::Softmax && s != Stage::Implicit && (s != Stage::Capped || softcap > 0);
  }
  bool masked_at(int64_t i, int64_t j) const { return attention_masked(i, j, window); }
  static bool matrix(Stage s) {  // (T, T) per head
    return s == Stage::Scores || s == Stage::Probs || s == Stage::Implicit || derived(s);
  }
  const Tensor* stored(Stage s) const;  // null for a derived stage, and for a matrix when compact
  Tensor* stored(Stage s);
  // Query heads and tokens, from q (or from probs in a trace built by hand without q).
  int64_t heads() const { return !q.shape.empty() ? q.dim(0) : probs.shape.empty() ? 0 : probs.dim(0); }
  int64_t T() const { return !q.shape.empty() ? q.dim(1) : probs.shape.empty() ? 0 : probs.dim(1); }
  // (H or KV, rows, cols) of stage s.
  std::vector<int64_t> shape(Stage s) const;
  // Head h of stage s as a row-major (rows, cols) array: inside the trace for a stored
  // stage, else computed into `scratch`.
  const float* head_values(Stage s, int64_t h, std::vector<float>& scratch) const;
  // `values` holds head h of stage s (Probs, Masked or Implicit), its rows *ld floats apart (*ld ≥
  // old_T), for a trace of old_T tokens whose rows [0, kept) are this trace's: makes it this
  // trace's (T, T) head, computing only rows [kept, T) (after a keystroke, one row instead
  // of T). The kept rows' new columns are the future: 0 (probs, implicit) or −inf (masked). While T
  // stays within *ld nothing moves; past it the rows move once, to a pitch with room (*ld is
  // updated). Otherwise (another stage, nothing kept, values not of that size) the whole head
  // as head_values gives it, with *ld = T. Returns the matrix's first element; `computed`
  // (if given) gets the number of rows it computed.
  const float* update_head_values(Stage s, int64_t h, int64_t old_T, int64_t kept, std::vector<float>& values,
                                  int64_t* ld, int64_t* computed = nullptr) const;
  // Row i of head h of stage s (cols values), the same numbers as head_values'.
  const float* row_values(Stage s, int64_t h, int64_t i, std::vector<float>& scratch) const;
  float value(Stage s, int64_t h, int64_t i, int64_t j) const;  // one element (a row's work when compact)
  // The whole stage as a new tensor; empty for a stage another kind of layer has (implicit
  // in a softmax layer, softmax stages in a linear layer, anything in a convolution layer).
  Tensor materialize(Stage s) const;
  // Rows [r0, r0 + rb) of head h's scores S and probs P, each (rb, T) row-major, through
  // the backend's kernel; S or P may be null.
  void attention_rows(int64_t h, int64_t r0, int64_t rb, float* S, float* P) const;
  // The sink logit of head h, or null in a layer without sinks (AttnRule::sink).
  const float* sink_logit(int64_t h) const { return sinks.empty() ? nullptr : &sinks[static_cast<size_t>(h)]; }
};

struct Trace {
  std::string model;    // the model's name as given (directory or builtin:NAME)
  std::string backend;  // "cpu" or "gpu"
  std::string arith = "f32";  // the quantized products' arithmetic (int8_product.h): "f32" or "int8"
  int block_size = 0;   // context window used
  int dropped = 0;      // tokens that fell out of the window (before tokens[0])
  std::vector<int> tokens;  // (T) the ids in the window
  std::vector<LayerTrace> layers;  // (L)
  Tensor logits;  // (T − logits_from, V) next-token logits of rows [logits_from, T)
  // 0: every row (what dump and eval ask for); T − 1: only the last (Engine::set_all_logits).
  int logits_from = 0;
  // (T − 1) when logits_from > 0: next_token_loss of row i for tokens[i + 1], computed while
  // the row's logits were at hand (mean_next_token_loss reads them). Empty otherwise.
  std::vector<float> row_loss;
  Tensor final_hidden;  // (T, C) the normed last hidden state: any row's logits = row · Uᵀ (CPU backend)
  Tensor final_resid;   // (T, C) the residual stream after the last layer, before the final norm
                        // (CPU backend; empty when a backend does not keep it): the logit lens
                        // and the attribution read it
  // Asked of the backend by the engine: logits for every row (false: the last row and
  // row_loss). Backends that cannot (the GPU's) write every row whatever this says.
  bool all_logits = true;
  // Asked of the CPU backend by activation patching (patch.h): the pass ends at final_hidden,
  // computing no logits and no row_loss (logits is left empty; row_logits computes a row).
  bool hidden_only = false;
  Ablation ablation;  // heads whose output this pass replaced (empty: none)
  // Asked of the backend by the engine: compact layers (no (T, T) matrices, see LayerTrace).
  // Both backends honour it (the GPU's reads back no (T, T) matrix then: its summaries come
  // from the weights while they are mapped).
  bool compact = false;
  // Asked of the backend by the engine: the per-head summaries (LayerTrace::row_stats and
  // thumbs), which the GUI's head grid and score_heads read. false (eval, head importance:
  // commands that read only logits or losses): both are left empty and not computed.
  bool summaries = true;

  int T() const { return static_cast<int>(tokens.size()); }
  // Row i of the logits (V values), or null when the trace does not hold it.
  const float* logits_row(int i) const {
    return i >= logits_from && i < T() ? logits.data.data() + static_cast<size_t>(i - logits_from) * logits.dim(1) : nullptr;
  }
  size_t bytes() const;  // memory held by all tensors
  // Bytes a trace of T tokens holds for config-like sizes: L layers of H query and KV key/
  // value heads of size d, C wide, V logits per row; `compact` leaves out the (T, T) matrices.
  static double estimate_bytes(int64_t L, int64_t H, int64_t KV, int64_t d, int64_t C, int64_t V, int64_t T,
                               bool compact, bool all_logits = true);
};

// Every tensor of a compact trace that grows by rows (q, k, v, out, row_stats, resid and the
// final rows) that has room for fewer than `need` tokens gets room for `grant` (≥ need; see
// Tensor::reserve_rows), so that the next tokens typed write in place. A trace with (T, T)
// matrices is left as it is.
void reserve_trace_rows(Trace& t, int64_t need, int64_t grant);

// Makes `dst` equal to `src` (every field and value), given that `dst` equals what `src`
// held before runs that rewrote rows [from_row, T) of every layer, and every row of layers
// ≥ from_layer (and so all of the final rows): only those rows are copied, and for a
// (H, T, T) matrix also the columns [from_row, T) of the rows before. A tensor whose layout
// `dst` does not share (other heads or width, another rank) is copied whole. Engine::share
// keeps a second trace up to date with it.
void copy_changed(Trace& dst, const Trace& src, int64_t from_row, int from_layer);

// Lays out the trace's tensors for T tokens of model c, keeping rows [0, p): every layer's
// by its kind (softmax: q, k, v, out, scores, probs, row_stats, gate; gated delta rule: q, k,
// v, out, β, g, A, the memory's snapshots; short convolution: only what enters it), in
// parallel over the tensors (each moves in place inside its own buffer, see
// Tensor::resize_keep) on up to max_threads threads when there is enough to move to pay for
// waking them. A compact trace frees its (T, T) matrices. Both backends call it first.
void layout_trace(const ModelConfig& c, int T, int p, int max_threads, Trace& tr);

}  // namespace attnviz
