// The CPU backend: Eigen matrix products (multi-threaded through OpenMP), one head per
// thread in attention. Computes only the new rows [from, T) and reuses cached K/V.
#include <omp.h>

#include <algorithm>
#include <numeric>
#include <cmath>
#include <utility>

#include "core/engine/backend.h"
#include "core/error.h"
#include "core/engine/delta_rule.h"
#include "core/engine/delta_trace.h"
#include "core/engine/head_summary.h"
#include "core/engine/importance.h"
#include "core/engine/experts.h"
#include "core/engine/ops.h"
#include "core/engine/per_layer_input.h"
#include "core/engine/stored_product.h"

namespace attnviz {

namespace {

using MapMat = Eigen::Map<Mat>;
using MapConstMat = Eigen::Map<const Mat>;
// Head h of a trace tensor: (rows, cols) with rows t.ld() apart (room to grow, see Tensor).
using Stride = Eigen::OuterStride<>;
Eigen::Map<Mat, 0, Stride> head_map(Tensor& t, int h) {
  return {t.head(h), t.dim(1), t.dim(2), Stride(t.ld())};
}
Eigen::Map<const Mat, 0, Stride> head_map(const Tensor& t, int h) {
  return {t.head(h), t.dim(1), t.dim(2), Stride(t.ld())};
}

// Copies rows of a (n, heads·d) projection into the (heads, T, d) tensor at rows from..from+n.
void scatter_heads(const Mat& src, int heads, int d, int from, Tensor& dst) {
  for (int h = 0; h < heads; ++h) head_map(dst, h).middleRows(from, src.rows()) = src.middleCols(h * d, d);
}

// Attention for query head h over all T keys, for new rows [p, T) and for the new columns
// of the old rows (q·k of old queries against new keys, which the causal mask hides).
// Per block of new rows: S and P through attention_block (S = Q·Kᵀ over all T keys, the
// recorded scores; P its masked softmax), the row's summaries (row_stats, thumbnail) while
// it is in cache, then O = P·V over the first r1 keys only (P is 0 past the diagonal). A
// compact layer keeps the block's S and P in per-thread scratch instead of the trace.
// An ablated head's output rows are replaced (see ablate_head_output; by `source`'s (T, d)
// rows when patching) before they enter `att`, the input of the output projection.
void attend_head(int h, int p, const std::vector<Mat>& kt, const std::vector<std::vector<int>>& targets,
                 const Tensor& old_thumbs, int old_bucket, int old_T, LayerTrace& lt, const AblationMode* ablate,
                 const float* source, Mat& att) {
  const int T = static_cast<int>(lt.q.dim(1)), d = static_cast<int>(lt.q.dim(2)), n = T - p;
  const int g = static_cast<int>(h / (lt.q.dim(0) / lt.k.dim(0)));  // query head h reads KV head g
  const auto Q = head_map(std::as_const(lt.q), h), V = head_map(std::as_const(lt.v), g);  // (T, d)
  const Mat& Kt = kt[static_cast<size_t>(g)];                                             // (d, T + padding)
  auto O = head_map(lt.out, h);                                                          // (T, d)
  // The summaries (Trace::summaries): row_stats and thumbs both present, or both empty.
  const bool summaries = !lt.row_stats.shape.empty();
  float* stats = summaries ? lt.row_stats.head(h) : nullptr;  // (T, kRowStats), rows ld() apart
  const int64_t stats_ld = summaries ? lt.row_stats.ld() : 0;
  const int tb = lt.thumb_bucket, tn = summaries ? static_cast<int>(lt.thumbs.dim(1)) : 0;
  float* thumb = summaries ? lt.thumbs.head(h) : nullptr;  // (tn, tn)
  const int old_n = old_thumbs.shape.empty() ? 0 : static_cast<int>(old_thumbs.dim(1));
  const int B = attention_row_block(T);
  thread_local Mat s_block, p_block;  // (B, T) a compact layer's S and P rows
  if (lt.compact) {
    s_block.resize(B, T);
    p_block.resize(B, T);
  }
  // Thumbnail rows a kept bucket row lacks: [redo, p), recomputed block by block.
  for (int r0 = summaries ? thumb_keep(old_n ? old_thumbs.head(h) : nullptr, old_bucket, old_n, old_T, p, tb, tn, thumb) : p;
       r0 < p;) {
    const int rb = std::min(B, p - r0);
    Mat rows(rb, T);
    lt.attention_rows(h, r0, rb, nullptr, rows.data());
    for (int r = 0; r < rb; ++r) thumb_add_row(&rows(r, 0), r0 + r, tb, tn, thumb);
    r0 += rb;
  }
  if (p > 0 && !lt.compact) {  // old query i < p ≤ j: a future key
    auto S = head_map(lt.scores, h);
    scores_rows(Q.data(), Q.outerStride(), Kt.data() + p, Kt.outerStride(), p, d, n, &S(0, p), S.outerStride());  // (p, n)
    head_map(lt.probs, h).topRightCorner(p, n).setZero();
  }
  for (int r0 = p; r0 < T; r0 += B) {
    const int rb = std::min(B, T - r0), r1 = r0 + rb;
    RowsRef S = lt.compact ? RowsRef(s_block.topRows(rb)) : RowsRef(head_map(lt.scores, h).middleRows(r0, rb));
    RowsRef P = lt.compact ? RowsRef(p_block.topRows(rb)) : RowsRef(head_map(lt.probs, h).middleRows(r0, rb));
    attention_block(Q, Kt, AttnRule{lt.scale, lt.softcap, lt.window, lt.sink_logit(h)}, r0, S, P,
                    lt.sink.shape.empty() ? nullptr : lt.sink.data.data() + static_cast<int64_t>(h) * T + r0);  // (rb, T) each
    for (int r = 0; summaries && r < rb; ++r) {
      const int i = r0 + r;
      row_stats(&P(r, 0), i, targets[static_cast<size_t>(i - p)], stats + i * stats_ld);
      thumb_add_row(&P(r, 0), i, tb, tn, thumb);
    }
    // P is 0 before the window of the block's first row and after its last row's diagonal.
    const int k0 = window_first(r0, lt.window);
    O.middleRows(r0, rb).noalias() = P.middleCols(k0, r1 - k0) * V.middleRows(k0, r1 - k0);  // (rb, d)
  }
  if (ablate) ablate_head_output(*ablate, O.data(), T, d, static_cast<int>(lt.out.ld()), p, source);
  att.middleCols(h * d, d) = O.bottomRows(n);
}

// Small passes run on one thread: waking the other threads for every matrix product costs
// more than it saves, and far more when the cores are busy (a software-rendered GUI on the
// same cores made a 45-token pass of the tiny model take 300 ms instead of 1.5 ms).
constexpr double kParallelFlops = 64e6;

double pass_flops(const ModelConfig& c, int n, int T) {
  const double C = c.n_embd, Hd = c.n_head * c.head_size, KVd = c.n_kv_head * c.head_size;
  const double mlp = c.experts.count ? c.experts.top_k * 3.0 * C * c.n_inner + C * c.experts.count
                                     : C * c.n_inner * (c.arch == Arch::Gpt2 ? 2 : 3);
  const double per_token = C * (2 * Hd + 2 * KVd) + mlp;
  const double attention = 4.0 * c.n_head * c.head_size * T;
  return 2.0 * n * (c.n_layer * (per_token + attention) + C * c.vocab_size);
}

// Sets the calling thread's OpenMP team size for its lifetime.
class ThreadScope {
 public:
  explicit ThreadScope(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadScope() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// QK-norm of the new rows' q (n, H·d) and k (n, KV·d), per head or over the whole row; k
// empty in a layer that reads another layer's keys (Gemma 4's KV sharing).
void qk_norm(const ModelConfig& c, const LayerWeights& lw, int d, int KV, Mat& q, Mat& k) {
  if (c.qk_norm == QkNorm::None) return;
  const bool whole = c.qk_norm == QkNorm::Whole;
  rms_norm_heads(q, whole ? 1 : c.n_head, whole ? c.n_head * d : d, lw.q_norm, c.norm_eps);
  if (k.size()) rms_norm_heads(k, whole ? 1 : KV, whole ? KV * d : d, lw.k_norm, c.norm_eps);
}

// x (n, C) += RMSNorm(W_out·(gelu_tanh(x·W_gate) ⊙ ple)): Gemma 4's per-layer input, ple (n, P).
void add_per_layer_input(const ModelConfig& c, const LayerWeights& lw, const Mat& ple, Mat& x) {
  Mat g, y, h;
  linear(x, lw.ple_gate, Vec(), g);  // (n, P)
  mlp_activation(c, g, ple);         // GeGLU: gelu_tanh(g) ⊙ ple
  linear(g, lw.ple_proj, Vec(), y);  // (n, C)
  rms_norm(y, lw.ple_post_norm, c.norm_eps, h);
  x += h;
}

// x += branch (n, C), the branch first normed when the block norms its outputs (Gemma's
// post-attention / post-feedforward norms, OLMo 2's) and scaled by Granite's
// residual_multiplier; tmp is scratch.
void add_branch(const ModelConfig& c, const Vec& post_norm, Mat& branch, Mat& tmp, Mat& x) {
  const Mat* b = &branch;
  if (post_norm.size()) {
    rms_norm(branch, post_norm, c.norm_eps, tmp);
    b = &tmp;
  }
  if (c.residual_scale != 1.f) x += *b * c.residual_scale;
  else x += *b;
}

// x (n, C) += the MLP branch (or GPT-OSS's experts: experts_branch, recording into lt), a
// block of rows at a time: a long pass's (rows, I) activations are its largest transient
// arrays (117 MB each for 2048 tokens of an 8B model); blocks of about 32 MB keep them small
// while each product still has hundreds of rows. x holds rows [p, p + n).
void add_mlp(const ModelConfig& c, const LayerWeights& lw, Mat& x, int p, LayerTrace* lt) {
  const Eigen::Index n = x.rows(), B = std::max<Eigen::Index>(64, (Eigen::Index{8} << 20) / std::max(c.n_inner, 1));
  Mat xb, h, y, up, out;
  for (Eigen::Index r0 = 0; r0 < n; r0 += B) {
    const Eigen::Index rb = std::min(B, n - r0);
    if (rb < n) xb = x.middleRows(r0, rb);
    Mat& xr = rb < n ? xb : x;  // (rb, C)
    const Mat& hm = lw.norm2_w.size() ? (norm(c, xr, lw.norm2_w, lw.norm2_b, h), h) : xr;
    if (c.experts.count && !c.experts.gemma) {
      experts_branch(c, lw, hm, p + static_cast<int>(r0), lt, out);  // (rb, C)
    } else {
      linear(hm, lw.w_fc, lw.b_fc, y);  // (rb, I)
      if (!lw.w_up.empty()) linear(hm, lw.w_up, Vec(), up);  // (rb, I)
      mlp_activation(c, y, up);
      linear(y, lw.w_down, lw.b_down, out);  // (rb, C)
    }
    if (c.experts.gemma) {  // Gemma 4: RMSNorm(dense) + RMSNorm(experts), then the block's post norm
      Mat dense, ex, ex_normed;
      rms_norm(out, lw.post_mlp_norm_dense, c.norm_eps, dense);
      gemma4_experts_branch(c, lw, xr, p + static_cast<int>(r0), lt, ex);
      rms_norm(ex, lw.post_mlp_norm_experts, c.norm_eps, ex_normed);
      out = dense + ex_normed;
    }
    add_branch(c, lw.post_mlp_norm, out, h, xr);
    if (rb < n) x.middleRows(r0, rb) = xb;
  }
}

// A gated-delta-rule layer (Mixer::GatedDeltaNet) for rows [p, T), hin (T − p, C) their
// normed input and lt.resid holding rows [0, T) of what enters the layer: records q, k, v,
// β, g, o and rows [p, T) of A in `lt`, and writes the mixer's output (T − p, C) into y. The
// convolution reads its K − 1 rows before p from lt.resid again; the memory continues from
// the last pass's end when p is where it stopped (an append), else from the snapshot at or
// before p, replaying the rows between (an edit).
//
// With `summaries`, the thumbnails (Hv, n, n) hold |A| max-pooled as a softmax layer's
// hold probs: rows the last pass's thumbnails (of old_T rows) lack are swept again.
void gated_delta_layer(const ModelConfig& c, const LayerWeights& lw, const Mat& hin, int p, int T, int old_T,
                       bool summaries, LayerTrace& lt, Mat& y) {
  const LinearAttnDims& ld = c.linear;
  const int n = T - p, Ch = ld.conv_channels(), Hv = ld.v_heads, dk = ld.k_dim, dv = ld.v_dim, K = ld.conv_kernel;
  const int p0 = std::max(0, p - (K - 1));  // the convolution reads rows [p0, T)
  Mat mixed(T - p0, Ch), fresh, conv(n, Ch), z, b, a;
  if (p > p0) {  // rows [p0, p): their input again, from the residual stream the trace keeps
    Mat h0, r0 = Eigen::Map<const Mat>(lt.resid.data.data(), T, c.n_embd).middleRows(p0, p - p0);
    norm(c, r0, lw.norm1_w, lw.norm1_b, h0);
    linear(h0, lw.lin_qkv, Vec(), fresh);
    mixed.topRows(p - p0) = fresh;
  }
  linear(hin, lw.lin_qkv, Vec(), fresh);  // (n, Ch) q | k | v before the convolution
  mixed.bottomRows(n) = fresh;
  causal_conv(mixed.data(), mixed.outerStride(), T - p0, Ch, lw.lin_conv.data(), K, p - p0, conv.data(),
              conv.outerStride(), nullptr, /*silu=*/true);
  linear(hin, lw.lin_z, Vec(), z);  // (n, Hv·dv)
  linear(hin, lw.lin_b, Vec(), b);  // (n, Hv)
  linear(hin, lw.lin_a, Vec(), a);  // (n, Hv)
  const float q_scale = 1.f / std::sqrt(static_cast<float>(dk));
  const int64_t per_state = static_cast<int64_t>(dk) * dv, snaps = T / kStateEvery;
  std::vector<float> final_state(static_cast<size_t>(Hv * per_state));
  Mat att(n, Hv * dv);  // (n, Hv·dv) the gated norm's output
  const DeltaThumbs old_thumbs = delta_thumbs_begin(lt, Hv, T, old_T, summaries);
#pragma omp parallel for schedule(static)
  for (int j = 0; j < Hv; ++j) {
    const int kh = ld.key_head(j);  // value head j reads key head kh
    float *qj = lt.q.head(j), *kj = lt.k.head(j), *vj = lt.v.head(j), *oj = lt.out.head(j);
    const int64_t ldk = lt.q.ld(), ldv = lt.v.ld();
    float* beta = lt.beta.data.data() + static_cast<int64_t>(j) * T;
    float* g = lt.decay.data.data() + static_cast<int64_t>(j) * T;
    const float neg_a = lw.lin_decay_rate[j];  // −exp(A_log) < 0
    for (int t = p; t < T; ++t) {
      const float* row = &conv(t - p, 0);
      std::copy(row + kh * dk, row + (kh + 1) * dk, qj + t * ldk);
      std::copy(row + ld.key_width() + kh * dk, row + ld.key_width() + (kh + 1) * dk, kj + t * lt.k.ld());
      std::copy(row + 2 * ld.key_width() + j * dv, row + 2 * ld.key_width() + (j + 1) * dv, vj + t * ldv);
      l2_normalize(qj + t * ldk, dk, q_scale);
      l2_normalize(kj + t * lt.k.ld(), dk);
      beta[t] = 1.f / (1.f + std::exp(-b(t - p, j)));
      g[t] = neg_a * softplus(a(t - p, j) + lw.lin_dt_bias[j]);
    }
    float* S = final_state.data() + static_cast<int64_t>(j) * per_state;
    delta_state_before(ld, lt, j, p, S);
    for (int t = p; t < T;) {  // rows [p, T), a snapshot at each multiple of kStateEvery
      const int end = std::min<int>(T, (t / kStateEvery + 1) * kStateEvery);
      delta_rule_head(qj, kj, ldk, vj, ldv, beta, g, t, end, dk, dv, S, oj, lt.out.ld());
      if (end % kStateEvery == 0 && end / kStateEvery <= snaps)
        std::copy_n(S, per_state, lt.state_snaps.data() + ((end / kStateEvery - 1) * Hv + j) * per_state);
      t = end;
    }
    delta_head_rows(j, p, T, summaries, old_thumbs, lt);
    for (int t = p; t < T; ++t) {  // RMSNorm(o)·w ⊙ silu(z), the norm's weight as stored
      const float* o = oj + t * lt.out.ld();
      double ss = 0;
      for (int e = 0; e < dv; ++e) ss += static_cast<double>(o[e]) * o[e];
      const float r = static_cast<float>(1.0 / std::sqrt(ss / dv + c.norm_eps));
      for (int e = 0; e < dv; ++e) {
        const float zz = z(t - p, j * dv + e);
        att(t - p, j * dv + e) = o[e] * r * lw.lin_norm[e] * (zz / (1.f + std::exp(-zz)));
      }
    }
  }
  lt.state_final = std::move(final_state);
  lt.state_rows = T;
  linear(att, lw.lin_out, Vec(), y);  // (n, C)
}

// An LFM2 short-convolution layer (Mixer::ShortConv) for rows [p, T), hin (T − p, C) their
// normed input: B | C | x = in_proj(h); u = B ⊙ x through the causal depthwise convolution
// (its K − 1 rows before p from lt.resid again); y = C ⊙ conv(u); out_proj(y) into y_out
// (T − p, C). Records nothing: there is no attention to record.
void short_conv_layer(const ModelConfig& c, const LayerWeights& lw, const Mat& hin, int p, int T, const LayerTrace& lt,
                      Mat& y_out) {
  const int n = T - p, C = c.n_embd, K = c.short_conv_kernel, p0 = std::max(0, p - (K - 1));
  auto gated_input = [&](const Mat& h, Mat& bcx, Mat& u) {  // (rows, 3C) → u = B ⊙ x (rows, C)
    linear(h, lw.sc_in, lw.sc_in_b, bcx);
    u = bcx.leftCols(C).cwiseProduct(bcx.rightCols(C));
  };
  Mat u(T - p0, C), bcx, part;
  if (p > p0) {  // rows [p0, p): their input again, from the residual stream the trace keeps
    Mat h0, r0 = Eigen::Map<const Mat>(lt.resid.data.data(), T, C).middleRows(p0, p - p0);
    norm(c, r0, lw.norm1_w, lw.norm1_b, h0);
    gated_input(h0, bcx, part);
    u.topRows(p - p0) = part;
  }
  gated_input(hin, bcx, part);  // bcx: the new rows' B | C | x
  u.bottomRows(n) = part;
  Mat conv(n, C);
  causal_conv(u.data(), u.outerStride(), T - p0, C, lw.sc_taps.data(), K, p - p0, conv.data(), conv.outerStride(),
              lw.sc_taps_b.size() ? lw.sc_taps_b.data() : nullptr, /*silu=*/false);
  const Mat y = bcx.middleCols(C, C).cwiseProduct(conv);  // (n, C) C ⊙ conv(B ⊙ x)
  linear(y, lw.sc_out, lw.sc_out_b, y_out);
}

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool can_compact() const override { return true; }
  bool uses_stored_products() const override { return true; }
  bool can_last_logits() const override { return true; }

  void forward(const Model& m, const std::vector<int>& window, int from, Trace& tr) override {
    m.check_files();  // weights read in place: their file must still be whole
    const ModelConfig& c = m.config;
    const ModelWeights& w = m.weights;
    const int T = static_cast<int>(window.size());
    const int old_T = tr.layers.empty() ? 0 : static_cast<int>(tr.layers[0].T());  // rows the summaries hold
    // Every row again when a mean ablation needs it, or when longrope's factors change with T.
    if (c.any_linear() && !ablation_.empty())
      throw Error("head ablation does not cover layers other than softmax attention yet; this " + c.model_type +
                      " model has some\n  HINT: run it without --ablate.",
                  ErrorKind::Usage);
    const int p = ablation_.needs_full_recompute() || rope_changes(c, old_T, T) ? 0 : from, n = T - p;
    const int C = c.n_embd;
    tr.tokens = window;
    tr.ablation = ablation_;
    tr.layers.resize(c.n_layer);
    layout_trace(c, T, p, omp_get_max_threads(), tr);

    Mat x(n, C);  // (n, C) residual stream of the new rows
    for (int r = 0; r < n; ++r) {
      w.tok_emb.table_row(window[p + r], &x(r, 0));
      if (c.emb_scale != 1.f) x.row(r) *= c.emb_scale;  // Gemma √C, Granite's embedding_multiplier
      if (c.arch == Arch::Gpt2) x.row(r) += w.pos_emb.row(p + r);
    }
    run_layers(m, T, p, 0, old_T, x, tr);
  }

  bool forward_from_layer(const Model& m, const std::vector<int>& window, int layer, Trace& tr, int from_row) override {
    m.check_files();
    const ModelConfig& c = m.config;
    const int T = static_cast<int>(window.size());
    if (tr.tokens != window || static_cast<int>(tr.layers.size()) != c.n_layer || layer < 0 || layer >= c.n_layer ||
        tr.layers[layer].resid.shape != std::vector<int64_t>{T, c.n_embd} || from_row < 0 || from_row >= T)
      return false;
    // A mean ablation's rows depend on every row; a source's rows are the source's own.
    if (from_row > 0 && ablation_.needs_full_recompute() && !ablation_.source) return false;
    tr.ablation = ablation_;
    Mat x = Eigen::Map<const Mat>(tr.layers[layer].resid.data.data(), T, c.n_embd).bottomRows(T - from_row);  // (n, C)
    run_layers(m, T, from_row, layer, T, x, tr);
    return true;
  }

 private:
  // Layers [l0, L) and the logits for rows [p, T), x (T − p, C) entering layer l0; the
  // trace is laid out for T already and holds rows [0, p); its summaries held old_T rows.
  void run_layers(const Model& m, int T, int p, int l0, int old_T, Mat& x, Trace& tr) {
    const ModelConfig& c = m.config;
    const ModelWeights& w = m.weights;
    const int n = T - p;
    const int H = c.n_head, V = c.vocab_size;
    const ThreadScope threads(pass_flops(c, n, T) < kParallelFlops ? 1 : omp_get_max_threads());
    check_ablation_source(ablation_, T, c);
    const std::vector<std::vector<int>> targets =
        tr.summaries ? induction_targets(tr.tokens, p) : std::vector<std::vector<int>>{};  // (T − p) lists, for row_stats
    Mat h, q, k, v, y, att;
    const Mat ple = c.ple_dim ? per_layer_embeddings(m, tr.tokens, p) : Mat();  // (n, L·P) Gemma 4
    std::vector<std::vector<double>> inv_freqs;  // (L) (rot/2) each, or empty for a layer without RoPE
    for (int l = 0; l < c.n_layer; ++l) inv_freqs.push_back(rope_inv_freq(c, l, T));
    std::vector<Mat> kt;  // the keys of the layer in hand, transposed (storage reused layer to layer)
    for (int l = l0; l < c.n_layer; ++l) {
      const LayerWeights& lw = w.layers[l];
      const LayerSpec spec = c.layer(l);
      LayerTrace& lt = tr.layers[l];
      MapMat(lt.resid.data.data(), T, c.n_embd).bottomRows(n) = x;  // (n, C) what enters the layer
      lt.scale = spec.scale;
      lt.softcap = spec.softcap;
      lt.window = spec.window;
      lt.sinks.assign(lw.sinks.data(), lw.sinks.data() + lw.sinks.size());  // (H) GPT-OSS; empty elsewhere
      const Mat& hin = lw.norm1_w.size() ? (norm(c, x, lw.norm1_w, lw.norm1_b, h), h) : x;  // OLMo 2: no norm before
      // Every kind of mixer has its case (no default: -Wswitch names a kind left out).
      bool attention = false;
      switch (spec.mixer) {
        case Mixer::Softmax: attention = true; break;  // below, over the KV cache
        case Mixer::GatedDeltaNet: gated_delta_layer(c, lw, hin, p, T, old_T, tr.summaries, lt, y); break;
        case Mixer::ShortConv: short_conv_layer(c, lw, hin, p, T, lt, y); break;
      }
      if (!attention) {
        add_branch(c, lw.post_attn_norm, y, h, x);
        add_mlp(c, lw, x, p, &lt);
        if (control_) {
          ++control_->layers_done;
          if (control_->cancel && l + 1 < c.n_layer) throw Cancelled();
        }
        continue;
      }
      const int d = c.head_size_at(l), KV = c.kv_heads_at(l);  // Gemma 4's differ by layer
      const bool own_kv = spec.kv_source < 0;  // else layer kv_source's K and V (Gemma 4's sharing)
      att.resize(n, H * d);
      linear(hin, lw.wq, lw.bq, q);  // (n, H·d)
      if (own_kv) {
        linear(hin, lw.wk, lw.bk, k);                   // (n, KV·d)
        if (spec.v_from_k) v = k;                       // Gemma 4's V = K: the raw projection
        else linear(hin, lw.wv, lw.bv, v);              // (n, KV·d)
        if (c.v_norm) rms_norm_heads(v, KV, d, Vec(), c.norm_eps);  // without a weight
      } else {
        k.resize(0, 0);
      }
      qk_norm(c, lw, d, KV, q, k);
      if (spec.rope) {
        rope_inplace(q, H, d, p, inv_freqs[static_cast<size_t>(l)], spec.rope_scaling.mscale);
        if (own_kv) rope_inplace(k, KV, d, p, inv_freqs[static_cast<size_t>(l)], spec.rope_scaling.mscale);
      }
      if (c.attn_temp_beta != 0.f)  // Ministral 3's query temperature, row by row (1 before its length)
        for (int r = 0; r < n; ++r)
          if (const float tq = c.query_temperature(p + r); tq != 1.f) q.row(r) *= tq;
      scatter_heads(q, H, d, p, lt.q);
      if (own_kv) {
        scatter_heads(k, KV, d, p, lt.k);
        scatter_heads(v, KV, d, p, lt.v);
      } else {  // the new rows of the source layer's K and V, computed earlier in this pass
        const LayerTrace& src = tr.layers[static_cast<size_t>(spec.kv_source)];
        for (int g = 0; g < KV; ++g) {
          head_map(lt.k, g).middleRows(p, n) = head_map(src.k, g).middleRows(p, n);
          head_map(lt.v, g).middleRows(p, n) = head_map(src.v, g).middleRows(p, n);
        }
      }
      kt.resize(static_cast<size_t>(KV));  // (d, T) each: the keys transposed, for scores_rows
#pragma omp parallel for schedule(static) if (KV > 1 && static_cast<int64_t>(T) * d >= (int64_t{1} << 16))
      for (int g = 0; g < KV; ++g) keys_transposed(head_map(std::as_const(lt.k), g), kt[static_cast<size_t>(g)]);
      const Tensor old_thumbs = std::move(lt.thumbs);
      const int old_bucket = lt.thumb_bucket;
      lt.thumb_bucket = tr.summaries ? thumb_bucket(T) : 0;
      const int64_t tn = tr.summaries ? thumb_cells(T, lt.thumb_bucket) : 0;
      lt.thumbs = tr.summaries ? Tensor{{H, tn, tn}, FloatBuf(static_cast<size_t>(H * tn * tn))} : Tensor{};
#pragma omp parallel for schedule(static)
      for (int hh = 0; hh < H; ++hh)
        attend_head(hh, p, kt, targets, old_thumbs, old_bucket, old_T, lt, ablation_.has(l, hh) ? &ablation_.mode : nullptr,
                    ablation_.source && ablation_.has(l, hh) ? ablation_.source->head(l, hh) : nullptr, att);
      if (!lw.w_gate.empty()) {  // Qwen3.5: out ⊙ σ(gate), per head; the trace keeps σ(gate)
        Mat gt;
        linear(hin, lw.w_gate, Vec(), gt);  // (n, H·d)
        gt = gt.unaryExpr([](float v) { return 1.f / (1.f + std::exp(-v)); });
        scatter_heads(gt, H, d, p, lt.gate);
        att.array() *= gt.array();
      }
      linear(att, lw.wo, lw.bo, y);  // (n, C)
      add_branch(c, lw.post_attn_norm, y, h, x);
      add_mlp(c, lw, x, p, &lt);
      if (c.ple_dim) add_per_layer_input(c, lw, ple.middleCols(static_cast<Eigen::Index>(l) * c.ple_dim, c.ple_dim), x);
      if (lw.layer_scalar != 1.f) x *= lw.layer_scalar;  // Gemma 4: the whole stream
      if (control_) {
        ++control_->layers_done;
        if (control_->cancel && l + 1 < c.n_layer) throw Cancelled();
      }
    }
    MapMat(tr.final_resid.data.data(), T, c.n_embd).bottomRows(n) = x;  // (n, C) before the final norm
    norm(c, x, w.normf_w, w.normf_b, h);
    if (c.logit_scale != 1.f) h *= c.logit_scale;  // Granite's 1 / logits_scaling, folded in
    MapMat(tr.final_hidden.data.data(), T, c.n_embd).bottomRows(n) = h;  // (n, C)
    if (tr.hidden_only) {  // patching reads its logits from final_hidden itself
      tr.logits = Tensor{};
      tr.logits_from = T;
      tr.row_loss.clear();
    } else if (tr.all_logits) {
      tr.logits_from = 0;
      tr.row_loss.clear();
      MapMat logits(tr.logits.data.data(), T, V);
      linear_bt(h, w.unembedding(), logits.bottomRows(n));  // (n, V)
      finish_logits(c, &logits(p, 0), static_cast<int64_t>(n) * V);
    } else {
      last_logits_and_losses(m, T, p, tr);
    }
  }

  // Only the last row's logits kept, and every row's loss. After an append the old last
  // row's logits are still held: its loss for the new token comes from them. Otherwise row
  // p − 1 (whose next token an edit at p changed) is recomputed from the final hidden state
  // with rows [p, T). The unembedding runs over blocks of the vocabulary, each block of
  // weights read once for all rows, and each row's log-sum-exp is carried across blocks
  // (max and scaled sum), so no (rows, V) array is ever held.
  static void last_logits_and_losses(const Model& m, int T, int p, Trace& tr) {
    const int V = m.config.vocab_size, C = m.config.n_embd;
    const int old_from = tr.logits_from;  // the held row: the old last one
    tr.row_loss.resize(static_cast<size_t>(std::max(T - 1, 0)));
    int r_begin = std::max(p - 1, 0);
    if (p >= 1 && old_from == p - 1 && !tr.logits.data.empty() && tr.logits.numel() == V) {
      tr.row_loss[static_cast<size_t>(p - 1)] = static_cast<float>(next_token_loss(tr.logits.data.data(), V, tr.tokens[p]));
      r_begin = p;
    }
    tr.logits = Tensor{{1, V}, FloatBuf(static_cast<size_t>(V))};
    tr.logits_from = T - 1;
    const int nr = T - r_begin;
    const Mat rows = MapConstMat(tr.final_hidden.data.data(), T, C).middleRows(r_begin, nr);  // (nr, C)
    const Weight& U = m.weights.unembedding();                                               // (V, C)
    std::vector<float> mx(static_cast<size_t>(nr), -INFINITY), target(static_cast<size_t>(nr), 0.f);
    std::vector<double> sum(static_cast<size_t>(nr), 0.0);
    const int VB = std::max(256, static_cast<int>(8'000'000 / nr));  // a block of at most ~32 MB
    Mat block;
    for (int v0 = 0; v0 < V; v0 += VB) {
      const int vb = std::min(VB, V - v0);
      block.resize(nr, vb);
      linear_bt(rows, U, block, v0, vb);  // (nr, vb)
      finish_logits(m.config, block.data(), block.size());
#pragma omp parallel for schedule(static) if (static_cast<double>(nr) * vb > 1e6)
      for (int r = 0; r < nr; ++r) {
        const Eigen::Map<const Eigen::ArrayXf> x(&block(r, 0), vb);
        const float m_new = std::max(mx[static_cast<size_t>(r)], x.maxCoeff());
        sum[static_cast<size_t>(r)] = sum[static_cast<size_t>(r)] * std::exp(static_cast<double>(mx[static_cast<size_t>(r)] - m_new)) +
                                      static_cast<double>((x - m_new).exp().sum());
        mx[static_cast<size_t>(r)] = m_new;
        const int i = r_begin + r;
        if (i + 1 < T && tr.tokens[i + 1] >= v0 && tr.tokens[i + 1] < v0 + vb) target[static_cast<size_t>(r)] = x[tr.tokens[i + 1] - v0];
      }
      std::copy_n(&block(nr - 1, 0), vb, tr.logits.data.begin() + v0);  // the last row
    }
    for (int r = 0; r + r_begin + 1 < T; ++r)
      tr.row_loss[static_cast<size_t>(r_begin + r)] =
          static_cast<float>(mx[static_cast<size_t>(r)] + std::log(sum[static_cast<size_t>(r)]) - target[static_cast<size_t>(r)]);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace attnviz
