// The GPU side of the forward pass: device buffers and one function per compute kernel
// (shaders/*.comp), on matrices that live in GL storage buffers. Every function needs the
// context current (GlContext::Current). The GL backend composes them; GlHostOps wraps
// each one for host matrices so the tests can check it against core/engine/ops.h one by one.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/gpu/gl_context.h"
#include "core/gpu/gl_shaders.h"
#include "core/model/model.h"
#include "core/engine/ops.h"
#include "core/engine/trace.h"

namespace attnviz {

// A GL shader storage buffer. Grows on demand, by at least half its size each time
// (contents are lost when it grows).
class GlBuffer {
 public:
  GlBuffer() = default;
  ~GlBuffer();
  GlBuffer(GlBuffer&& o) noexcept : id_(o.id_), bytes_(o.bytes_) { o.id_ = 0, o.bytes_ = 0; }
  GlBuffer& operator=(GlBuffer&& o) noexcept;
  GlBuffer(const GlBuffer&) = delete;
  GlBuffer& operator=(const GlBuffer&) = delete;

  // Makes room for `bytes`; `limit` is the device's largest storage block, `what` names
  // the buffer in the error when it does not fit.
  void ensure(size_t bytes, long long limit, const char* what);
  void upload(const void* data, size_t bytes, size_t offset = 0);
  void read(void* dst, size_t bytes, size_t offset = 0) const;  // waits for the GPU
  // Maps [offset, offset + bytes) for reading (waits for the GPU); unmap() when done.
  const float* map(size_t bytes, size_t offset = 0) const;
  void unmap() const;

  unsigned id() const { return id_; }
  size_t bytes() const { return bytes_; }

 private:
  unsigned id_ = 0;
  size_t bytes_ = 0;
};

// How a weight matrix lies on the device (shaders/weights.glsl). F32: float32, the layout
// the float kernels read; the others: the file's rows (N rows of K values) in a compact
// form decoded in the shader, each value exactly the float dequantize() gives.
enum class GlWType { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, Q5_K };
const char* gl_wtype_name(GlWType t);
// The device type for a matrix the file stores as `t`: itself for F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K; F32 (decoded to float32 on the host, 4 bytes a
// value) for F32 and for the types without a decoding shader yet (Q2_K, Q3_K).
GlWType gl_device_type(GgmlType t);

// A weight matrix on the device for products with it as the right-hand side. F32: `buf`
// holds W (K, N) row-major (a linear layer's (in, out)), or with rows_are_outputs the
// (N, K) rows (a table, read transposed). Compact: N rows of K values laid out as
// shaders/weights.glsl says (row_u32 uints per row, nb blocks per row, the fp16 scales
// region from uint sc_u32).
struct GlWeight {
  GlWType type = GlWType::F32;
  bool rows_are_outputs = false;
  int N = 0, K = 0;
  int row_u32 = 0, nb = 0, sc_u32 = 0;
  GlBuffer buf;
  size_t bytes() const { return buf.bytes(); }
};

// Rows [r0, r0 + n) of a stored matrix, in the order `order` gives (order[i] is the stored
// row of output i, as Weight::row_of_col; null: the stored order), for gl_upload_rows.
struct GlRowSource {
  const StoredRows* rows = nullptr;
  const int32_t* order = nullptr;
  int64_t r0 = 0, n = 0;
};
// Uploads the rows of `src` one after another (all of one type and width) as one compact
// matrix of device type `t` (gl_device_type of their type, not F32).
void gl_upload_rows(GlWeight& out, GlWType t, const std::vector<GlRowSource>& src, long long limit, const char* what);
// Uploads a float32 matrix: W (K, N), or with rows_are_outputs (N, K).
void gl_upload_f32(GlWeight& out, const Mat& m, bool rows_are_outputs, long long limit, const char* what);

// A strided matrix view into a buffer for gemm(): element (i, k) of batch z is at
// off + z·zstride + i·ld + k.
struct GlView {
  const GlBuffer* buf = nullptr;
  int off = 0, ld = 0, zstride = 0;
};

// C = A · op(B) (+ bias) (+ C): see shaders/gemm.comp.
struct GemmArgs {
  int M = 0, N = 0, K = 0, batch = 1;
  GlView a, b, c, bias;  // bias.buf == nullptr: none
  bool b_trans = false;  // B stored (N, K)
  int b_zdiv = 1, b_z0 = 0;  // B batch index = (z + b_z0) / b_zdiv
  bool accumulate = false;
  // A weight as B instead of b (then batch 1, b_trans and b's view come from it): F32 as
  // its layout says; compact ones decoded in the shader, the product × alpha before the bias.
  const GlWeight* w = nullptr;
  float alpha = 1.f;  // compact weights only (float32 ones have it folded in)
};

class GlKernels {
 public:
  // Compiles every shader; throws an Error (with numbered source) when one does not.
  GlKernels(const GlContext& ctx, const ShaderSources& src);

  const GlContext& context() const { return ctx_; }
  long long limit() const { return ctx_.max_ssbo_bytes(); }

  // x (n, C) ← tok rows ids · scale (+ pos[pos0 + r]); `tok` holds rows [v0, v0 + vn) of the
  // table; scale is the model's emb_scale (Gemma √C, Granite's embedding_multiplier).
  void embed(const GlBuffer& ids, int n, int C, const GlBuffer& tok, int v0, int vn, const GlBuffer* pos, int pos0,
             GlBuffer& x, float scale = 1.f);
  // The same from a table held as a GlWeight (rows [v0, v0 + vn) of (V, C)), any type.
  void embed(const GlBuffer& ids, int n, int C, const GlWeight& tok, int v0, int vn, const GlBuffer* pos, int pos0,
             GlBuffer& x, float scale = 1.f);
  // y (n, C) ← LayerNorm (b != nullptr) or RMSNorm (b == nullptr) of x; with accumulate,
  // y += that (a post-attention / post-MLP norm into the residual stream).
  void norm(const GlBuffer& x, int n, int C, const GlBuffer& w, const GlBuffer* b, float eps, GlBuffer& y,
            bool accumulate = false);
  // QK-norm in place: RMSNorm of `heads` slices of d values from column col0 of rows
  // row0…row0+n-1 (stride ld), each with the weights w (d). Per head: heads = H, d = head
  // size; whole projection: heads = 1, d = H·d.
  void qk_norm(GlBuffer& x, int row0, int n, int ld, int col0, int heads, int d, const GlBuffer& w, float eps);
  void gemm(const GemmArgs& g);
  // RoPE in place on `heads` heads of d columns from col0, rows row0…row0+n-1 (stride ld),
  // row r at position pos0 + r; only the first 2·half_rot columns of each head turn (pairs
  // (i, i + half_rot)); `table` is rope_table() of half_rot frequencies.
  void rope(GlBuffer& x, int row0, int n, int ld, int col0, int heads, int d, int half_rot, int pos0,
            const GlBuffer& table);
  // probs = softmax(masked) of `heads` heads of (T, T) scores, as attention_block does:
  // scaled by rule.scale, soft-capped when rule.softcap > 0, keys outside
  // [window_first(i, rule.window), i] masked. Rows ≥ p in full, rows < p only the columns ≥ p.
  // With sinks ((H) logits, GPT-OSS), head head0 + h's sink joins each new row's softmax and
  // is dropped; its probability goes to sink_p (H, T).
  void attn_softmax(const GlBuffer& scores, int heads, int T, int p, const AttnRule& rule, GlBuffer& probs,
                    const GlBuffer* sinks = nullptr, int head0 = 0, GlBuffer* sink_p = nullptr);
  // x ← cap·tanh(x / cap) in place on (rows, cols), row stride ld (final logit soft-cap).
  void softcap(GlBuffer& x, int rows, int cols, int ld, float cap);
  void gelu(GlBuffer& x, int rows, int cols, int ld);
  // One head's output columns [col0, col0 + d) of x (rows, ld) set to 0, or (mean) to each
  // column's mean over the rows.
  void ablate_head(GlBuffer& x, int rows, int d, int ld, int col0, bool mean);
  // y (rows, I) ← silu(gate) ⊙ up (SwiGLU), or with geglu gelu_tanh(gate) ⊙ up (GeGLU),
  // gu (rows, 2·I) = gate | up.
  void swiglu(const GlBuffer& gu, int rows, int I, GlBuffer& y, bool geglu = false);

  // The hybrids' layers (Qwen3.5's gated delta rule, LFM2's short convolution), each as its
  // core/engine counterpart computes it.
  // out (n, Ch) = act(causal depthwise convolution) of the n new rows, x holding `hist` rows
  // before them (columns [col0, col0 + Ch), rows ldx apart): delta_rule.h's causal_conv with
  // taps w (Ch, K), bias (Ch) or none, SiLU or nothing.
  void causal_conv(const GlBuffer& x, int ldx, int col0, int hist, int n, int Ch, const GlBuffer& w, int K,
                   const GlBuffer* bias, bool silu, GlBuffer& out);
  // In place: `heads` slices of d values from column col0 of rows [0, n) (ld apart), each
  // × scale / sqrt(Σx² + 1e-6) (l2_normalize).
  void l2_heads(GlBuffer& x, int n, int ld, int col0, int heads, int d, float scale);
  // In place on bg (n, 2·Hv): rows b | a become β = σ(b) | g = neg_a·softplus(a + dt_bias).
  void delta_gates(GlBuffer& bg, int n, int Hv, const GlBuffer& neg_a, const GlBuffer& dt_bias);
  // The recurrence over the n new rows (positions pos0 …), q | k | v read from the
  // convolution's output conv (n, conv_channels) as l2_heads left them, β | g from bg: o
  // (n, Hv·dv) gets o_t, `state` (Hv, dk, dv) holds the memory before the rows and after
  // them, and snaps gets the memory after each position + 1 that is a multiple of
  // snap_every (slot (position + 1) / snap_every − pos0 / snap_every − 1).
  void delta_rule(const GlBuffer& conv, const LinearAttnDims& ld, const GlBuffer& bg, int n, int pos0, GlBuffer& state,
                  GlBuffer& o, GlBuffer& snaps, int snap_every);
  // y (n, heads·d) = RMSNorm per head of o (weight w (d) as stored) ⊙ silu(z).
  void gated_rms(const GlBuffer& o, const GlBuffer& z, int n, int heads, int d, const GlBuffer& w, float eps,
                 GlBuffer& y);
  // gate ← σ(gate), y = att ⊙ gate, all (n, cols).
  void gate_mul(GlBuffer& gate, int n, int cols, const GlBuffer& att, GlBuffer& y);
  // out (rows, cols) = a's columns [ca, ca + cols) ⊙ b's [cb, cb + cols), rows lda / ldb apart.
  void mul(const GlBuffer& a, int lda, int ca, const GlBuffer& b, int ldb, int cb, int rows, int cols, GlBuffer& out);

  // dst's columns [dst_off + r·ldd, + cols) = src's [src_off + r·lds, + cols), rows r < rows.
  void copy_cols(const GlBuffer& src, int src_off, int lds, GlBuffer& dst, int dst_off, int ldd, int rows, int cols);
  // x ← x · s on (rows, cols), rows ld apart.
  void scale(GlBuffer& x, int rows, int cols, int ld, float s);
  // y ← y + x on (rows, cols), both rows ld apart.
  void add(const GlBuffer& x, GlBuffer& y, int rows, int cols, int ld);

  // GPU timestamps around stretches of dispatches: begin/end may be called many times;
  // take_ms() sums what was measured since the last take (waits for the results) and
  // returns −1 when the device has no timer.
  void timer_begin();
  void timer_end();
  double timer_take_ms();
  void timer_discard();  // forgets what was measured (after an error half-way)

  // With env ATTNVIZ_GL_PROFILE=1 every dispatch waits for the GPU and is timed per
  // kernel (a development aid: it serialises the GPU). Returns the table and resets it.
  bool profiling() const { return profile_; }
  std::string profile_take();

 private:
  void dispatch(const GlProgram& prog, unsigned gx, unsigned gy, unsigned gz);
  // The program of `file` for a compact weight type with `defines`, compiled on first use.
  GlProgram& wprog(const char* file, GlWType t, const std::string& defines);
  // The program of `file` with `defines`, compiled on first use (kernels few models need).
  GlProgram& prog(const char* file, const std::string& defines = "");
  const GlContext& ctx_;
  ShaderSources src_;
  std::map<std::string, GlProgram> wprogs_;  // "gemv.comp Q4_K #define MR 1" → program (and prog()'s)
  bool software_;  // tuned for a software rasterizer (llvmpipe): see software_tuning()
  GlProgram embed_, norm_, gemm_big_, gemm_huge_, gemm_small_, gemv1_, gemv4_, rope_, softmax_, gelu_, swiglu_, ablate_,
      qk_norm_, softcap_;
  GlBuffer dummy_;  // bound where a kernel's optional input is absent
  std::vector<unsigned> queries_;
  size_t queries_used_ = 0;
  bool timing_ = false;
  bool profile_ = false;
  std::map<std::string, std::pair<double, int>> profile_ms_;  // kernel → (ms, dispatches)
};

// Scratch for attention's (heads, T, T) stages, reused across layers.
struct GlAttentionScratch {
  GlBuffer scores, probs, sink_p;  // sink_p: (H, T) the sinks' probabilities (GPT-OSS)
  std::vector<float> rows;  // a compact layer's probs rows read back for its summaries
};

// The per-head summaries (Trace::summaries) that gl_attention computes from the probs
// while they are mapped: lt.row_stats (H, T, kRowStats) and lt.thumbs (H, n, n) are sized
// by the caller (thumbs zeroed, lt.thumb_bucket set). Null targets: no summaries.
struct GlSummaryArgs {
  const std::vector<std::vector<int>>* targets = nullptr;  // (T − p) induction targets of the new rows
  Tensor old_thumbs;  // the last pass's thumbnails (rows [0, old_T) pooled by old_bucket)
  int old_bucket = 0, old_T = 0;
};

// Attention of one layer on device. `qkv` holds rows 0…T-1 of q | k | v, each row
// (H + 2·KV)·d wide: H query heads, then KV key heads, then KV value heads (keys and
// values of rows < p are the KV cache). For the new rows [p, T) and the new columns of
// rows [0, p) it computes scores and probs under the layer's rule (scale, soft-cap, window)
// and writes probs · v of the new rows into att (n, H·d). It sets lt.scale, lt.softcap and
// lt.window, from which the trace derives scaled, capped and masked. Unless lt.compact,
// scores and probs are read back into `lt` (already sized (H, T, T)); a compact layer
// reads back only what the summaries need (the new rows of probs, never stored). Heads go
// in groups small enough for the storage-block limit.
// With sinks ((H) logits on the device, GPT-OSS), each new row's softmax includes its head's
// sink, and lt.sink (H, T, laid out by the caller) gets the new rows' p_sink.
void gl_attention(GlKernels& k, int H, int KV, int d, const GlBuffer& qkv, int T, int p, const AttnRule& rule,
                  GlAttentionScratch& s, GlBuffer& att, LayerTrace& lt, const GlSummaryArgs& sum = {},
                  const GlBuffer* sinks = nullptr);

// cos/sin table for RoPE, (positions, rot/2, 2) with rot/2 = inv_freq.size(), computed
// exactly as rope_inplace does (inverse frequencies in float, angles and cos/sin in double,
// then each rounded to float and × mscale in float). With `query_temperature`, position
// pos's entries also × its query_temperature(pos) (Ministral 3: the table of the queries).
std::vector<float> rope_table(int positions, const std::vector<double>& inv_freq, float mscale = 1.f,
                              const ModelConfig* query_temperature = nullptr);

// Every kernel on host matrices, through its own GL context: for the tests, which check
// each against core/engine/ops.h. Throws an Error when no GL context can be made.
class GlHostOps {
 public:
  explicit GlHostOps(const ShaderSources& src = {});
  ~GlHostOps();
  const GlContext& context() const { return *ctx_; }

  Mat embed(const Mat& tok, const Mat& pos, const std::vector<int>& ids, int pos0, float scale = 1.f);  // pos empty: none
  Mat layer_norm(const Mat& x, const Vec& w, const Vec& b, float eps);
  Mat rms_norm(const Mat& x, const Vec& w, float eps);
  Mat rms_norm_add(const Mat& x, const Vec& w, float eps, const Mat& y);  // y + rms_norm(x) (accumulate)
  Mat rms_norm_heads(const Mat& x, int heads, int d, const Vec& w, float eps);  // x (n, heads·d), w (d): QK-norm
  Mat softcap(const Mat& x, float cap);
  Mat linear(const Mat& x, const Mat& w, const Vec& b);  // x · W (+ b)
  Mat linear_bt(const Mat& x, const Mat& wt);           // x · Wtᵀ
  // x · Wᵀ · alpha (+ b) with W the stored rows (N, K) on the device in their compact form
  // (gl_device_type; F32 ones decoded on the host first), as a linear layer's product runs.
  Mat linear_stored(const Mat& x, const StoredRows& w, const Vec& b = Vec(), float alpha = 1.f);
  // The rows `ids` of a stored table (V, C) through the embedding kernel, decoded on the device.
  Mat embed_stored(const StoredRows& table, const std::vector<int>& ids);
  Mat gelu(const Mat& x);
  Mat swiglu(const Mat& gate, const Mat& up, bool geglu = false);
  // rot = 2·inv_freq.size() ≤ d rotated dims per head, cos and sin × mscale (rope_inplace).
  Mat rope(const Mat& x, int heads, int d, int pos0, const std::vector<double>& inv_freq, float mscale = 1.f);
  // Attention of one layer from q (H, T, d), k and v (KV, T, d): fills scores, probs
  // (H, T, T), scale/softcap/window and out (H, T, d) of `lt` for rows [p, T) and the new
  // columns of rows [0, p) — the rest of those tensors is left as it was. Without a rule:
  // scale 1/√d, global, no soft-cap.
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, int p, LayerTrace& lt);
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, int p, const AttnRule& rule, LayerTrace& lt);

 private:
  std::unique_ptr<GlContext> ctx_;
  std::unique_ptr<GlKernels> k_;
};

}  // namespace attnviz
