#include "core/gpu/gl_backend.h"

#include <epoxy/gl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/engine/delta_rule.h"
#include "core/engine/delta_trace.h"
#include "core/engine/experts.h"
#include "core/engine/head_summary.h"
#include "core/engine/per_layer_input.h"
#include "core/engine/importance.h"
#include "core/error.h"
#include "core/gpu/gl_context.h"
#include "core/gpu/gl_ops.h"

namespace attnviz {

namespace {

// FNV-1a over the 32-bit words of a row: cheap, and enough to tell whether a cached row
// on the device still equals the row the trace holds.
uint64_t hash_row(const float* r, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, r + i, sizeof u);
    h = (h ^ u) * 1099511628211ull;
  }
  return h;
}

// A linear layer's weight on the device as parts side by side: part i gives the output
// columns [col0, col0 + w.N). Consecutive matrices of one device type share a part (float32
// ones concatenated as W (in, out), compact ones as their rows one after another); a fused
// q|k|v whose v is stored in another type than q and k (Q4_K_M files) has two.
struct DevPart {
  GlWeight w;
  int col0 = 0;
  float alpha = 1.f;  // compact parts: the residual multiplier (float32 ones have it folded in)
};
using DevLinear = std::vector<DevPart>;

// Weights of one layer on the device, fused where that saves a pass: q|k|v side by side
// (C, (H+2·KV)·d), and for a gated MLP gate|up (C, 2·I). Granite's residual_multiplier is
// folded into the last weights of each branch: the post-norm's weights when the block has
// one (Gemma, OLMo 2), else W_o, b_o and W_down, b_down (compact ones: the product's alpha).
struct DevLayer {
  DevLinear wqkv, wo, w_in, w_down;
  DevLinear w_gate;  // Qwen3.5's full layers: the output gate's projection (C, H·d), else empty
  // A gated-delta-rule layer (Mixer::GatedDeltaNet): in_proj_qkv (C, Ch), in_proj_z (C, Hv·dv),
  // in_proj_b | in_proj_a (C, 2·Hv), out_proj (Hv·dv, C); the convolution's taps (Ch, K),
  // −exp(A_log) and dt_bias (Hv), the gated norm's weight (dv).
  DevLinear lin_qkv, lin_z, lin_ba, lin_out;
  GlBuffer lin_conv, lin_neg_a, lin_dt_bias, lin_norm;
  // A short-convolution layer (Mixer::ShortConv): in_proj (C, 3C) B | C | x, out_proj (C, C),
  // the taps (C, K), each with its bias where the file has one.
  DevLinear sc_in, sc_out;
  GlBuffer sc_in_b, sc_taps, sc_taps_b, sc_out_b;
  GlBuffer norm1_w, norm1_b, bqkv, bo, norm2_w, norm2_b, b_in, b_down;
  GlBuffer q_norm, k_norm;          // (d) per head or (H·d), (KV·d) whole; QK-norm
  GlBuffer post_attn, post_mlp;     // (C) norms of the branch outputs before their adds
  bool has_bqkv = false, has_bo = false, has_b_in = false, has_b_down = false;
  bool has_norm1 = true, has_norm2 = true;  // false: no norm before attention / MLP (OLMo 2)
  bool has_post_attn = false, has_post_mlp = false;
  // Gemma 4: the layer's own head size d, KV heads, MLP width and cache row width; V = K (the
  // raw key projection copied into the v columns); K and V read from another layer; the per-layer
  // input's gate (C, P), projection (P, C) and norm; the weightless V-norm's ones (d); the
  // stream's scalar.
  int d = 0, kv = 0, inner = 0, ld = 0, kv_source = -1;
  bool v_from_k = false;
  DevLinear ple_gate, ple_proj;
  GlBuffer ple_post_norm, v_norm_ones;
  float layer_scalar = 1.f;
  GlBuffer sinks;  // (H) GPT-OSS's sink logits, or none
  GlBuffer post_mlp_dense, post_mlp_experts;  // (C) Gemma 4's norms of its two feed-forward branches
};

// Whether the MLP is gated (gate | up, SwiGLU or GeGLU) or one projection and GELU (gpt2).
bool gated_mlp(const ModelConfig& c) { return c.arch != Arch::Gpt2 && c.mlp != MlpKind::Gelu; }

// Width of a softmax layer's cache rows: q | k | v, (H + 2·KV)·d with layer l's own KV and d
// (Gemma 4's global layers differ from its local ones).
int cache_ld(const ModelConfig& c, int l) { return (c.n_head + 2 * c.kv_heads_at(l)) * c.head_size_at(l); }

// A RoPE cos/sin table on the device for one set of frequencies (a layer kind: Gemma 3's
// local and global layers differ; longrope's factors change with T), rows for `positions`.
struct DevRope {
  std::vector<double> inv_freq;  // (rot/2)
  float mscale = 1.f;
  bool query_temperature = false;  // the queries' table of a model with a query temperature (Ministral 3)
  int positions = 0;
  GlBuffer table;                // (positions, rot/2, 2)
};

// Identifies the model whose weights are on the device.
uint64_t fingerprint(const Model& m) {
  uint64_t h = reinterpret_cast<uintptr_t>(&m) * 0x9E3779B97F4A7C15ull;
  auto mix = [&h](const Weight& w) {
    if (w.is_stored())  // a mapped file's bytes: where they lie identifies them
      h ^= (reinterpret_cast<uintptr_t>(w.stored.data) ^ static_cast<uint64_t>(w.stored.bytes())) + (h << 6);
    else
      h ^= hash_row(w.f32.data(), static_cast<int>(std::min<Eigen::Index>(w.f32.size(), 64))) + (h << 6);
  };
  const ModelWeights& w = m.weights;
  mix(w.tok_emb);
  for (const auto& l : w.layers) mix(l.wq), mix(l.w_down);
  mix(w.unembedding());
  const ModelConfig& c = m.config;
  for (int v : {c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.head_size, c.n_inner, c.n_ctx})
    h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return h;
}

class GlBackend : public Backend {
 public:
  explicit GlBackend(const GlBackendOptions& o) : ctx_(std::make_unique<GlContext>()) {
    GlContext::Current cur(*ctx_);
    k_ = std::make_unique<GlKernels>(*ctx_, o.shaders);
    if (const char* v = std::getenv("ATTNVIZ_GL_VERBOSE")) verbose_ = *v && *v != '0';
    if (verbose_) std::fprintf(stderr, "gpu: %s, OpenGL %s\n", ctx_->renderer().c_str(), ctx_->version().c_str());
  }

  ~GlBackend() override {
    try {
      release();
    } catch (const std::exception& e) {  // the context could not be made current: the GL
      std::fprintf(stderr, "attnviz: GPU backend shutdown: %s\n", e.what());  // objects go with it
    }
  }

  void release() {
    GlContext::Current cur(*ctx_);
    layers_.clear();
    caches_.clear();
    tok_.clear();
    unemb_.clear();
    pos_ = GlBuffer(), normf_w_ = GlBuffer(), normf_b_ = GlBuffer();
    ropes_.clear();
    x_ = GlBuffer(), h_ = GlBuffer(), att_ = GlBuffer(), mlp_ = GlBuffer(), act_ = GlBuffer(), ids_ = GlBuffer();
    logits_ = GlBuffer();
    scratch_ = GlAttentionScratch();
    k_.reset();
  }

  const char* name() const override { return "gpu"; }
  std::string renderer() const { return ctx_->renderer() + " (" + ctx_->version() + ")"; }
  std::map<std::string, long long> device_weight_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dev_bytes_;
  }
  double last_device_ms() const override { return last_device_ms_; }
  bool can_compact() const override { return true; }
  bool can_last_logits() const override { return true; }

  // One step per layer, as CpuBackend::forward reads: embed the new rows, then per layer
  // attention and MLP on the device followed by the read-back of q, k, v, the head outputs
  // and the residual stream into the trace, then the final norm and the logits.
  void forward(const Model& m, const std::vector<int>& window, int from, Trace& tr) override {
    std::lock_guard<std::mutex> lock(mu_);
    m.check_files();  // weights read in place (uploaded from there): their file must still be whole
    const auto t0 = std::chrono::steady_clock::now();
    const ModelConfig& c = m.config;
    const int T = static_cast<int>(window.size());
    const int old_T = tr.layers.empty() ? 0 : static_cast<int>(tr.layers[0].T());
    // Every row again when a mean ablation needs it, or when longrope's factors change with
    // T (then no cached key is turned right), as the CPU backend does.
    int p = ablation_.needs_full_recompute() || rope_changes(c, old_T, T) ? 0 : from;
    // With the last row's logits only, row p − 1's loss needs that row's logits: held after
    // an append, else the row is computed again.
    if (!tr.all_logits && p > 0 && !holds_row(tr, p - 1, c.vocab_size)) --p;
    const int n = T - p;
    check_request(c, T, p, tr);
    if (c.any_linear() && !ablation_.empty())
      throw Error("head ablation does not cover layers other than softmax attention yet; this " + c.model_type +
                      " model has some\n  HINT: run it without --ablate.",
                  ErrorKind::Usage);
    if (ablation_.source && !ablation_.empty())
      throw Error("activation patching (head outputs from another run) runs on the CPU backend only\n"
                  "  HINT: run with --backend cpu.");

    GlContext::Current cur(*ctx_);
    k_->timer_discard();  // in case an earlier forward stopped half-way
    prepare(m, window, p, tr);
    const auto t_prepared = std::chrono::steady_clock::now();
    double read_ms = 0;  // the read-backs' wall time (each waits for the kernels before it)
    tr.tokens = window;
    tr.ablation = ablation_;
    tr.layers.resize(c.n_layer);
    layout_trace(c, T, p, 1, tr);

    k_->timer_begin();
    embed(c, n, p);
    k_->timer_end();
    read_resid(c, T, p, tr.layers[0].resid);
    // (T − p) lists: the induction targets of the new rows, for the summaries' row_stats
    const std::vector<std::vector<int>> targets = tr.summaries ? induction_targets(window, p) : std::vector<std::vector<int>>{};
    k_->timer_begin();
    for (int l = 0; l < c.n_layer; ++l) {
      LayerTrace& lt = tr.layers[l];
      layer_step(c, m.weights.layers[static_cast<size_t>(l)], l, T, p, tr.compact, tr.summaries ? &targets : nullptr,
                 old_T, lt);
      k_->timer_end();
      const auto t_read = std::chrono::steady_clock::now();
      read_back_layer(c, l, T, p, tr.summaries, old_T, lt);
      read_resid(c, T, p, l + 1 < c.n_layer ? tr.layers[l + 1].resid : tr.final_resid);  // what leaves layer l
      read_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_read).count();
      k_->timer_begin();
    }
    logits(c, T, p, tr);
    last_device_ms_ = k_->timer_take_ms();
    if (const GLenum e = glGetError(); e != GL_NO_ERROR)
      throw Error("GPU backend: OpenGL error 0x" + std::to_string(e) + " during the forward pass");
    if (verbose_) {  // where the wall time went: preparing (weights, cache sync), read-backs, the rest
      const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
      const auto now = std::chrono::steady_clock::now();
      std::fprintf(stderr, "gpu: rows %d…%d of %d, device %.3f ms, wall %.3f ms (prepare %.3f, read-backs %.3f)\n", p,
                   T - 1, T, last_device_ms_, ms(t0, now), ms(t0, t_prepared), read_ms);
    }
    if (k_->profiling()) std::fprintf(stderr, "gpu: kernels of rows %d…%d of %d\n%s", p, T - 1, T, k_->profile_take().c_str());
  }

 private:
  // Whether the trace holds exactly row i's logits and no other (Trace::all_logits false).
  static bool holds_row(const Trace& tr, int i, int V) {
    return !tr.all_logits && tr.logits_from == i && tr.logits.numel() == V && static_cast<int>(tr.row_loss.size()) >= i;
  }

  static void check_request(const ModelConfig& c, int T, int p, const Trace& tr) {
    if (T < 1 || p < 0 || p >= T)
      throw Error("GPU backend: nothing to compute (T=" + std::to_string(T) + ", from=" + std::to_string(p) + ")");
    if (c.arch == Arch::Gpt2 && T > c.n_ctx)
      throw Error("GPU backend: " + std::to_string(T) + " tokens exceed the model's " + std::to_string(c.n_ctx) +
                  " learned positions");
    if (p > 0) check_prefix(c, p, tr);
  }

  // The weights, the KV cache rows [0, p) and the activation buffers of the n = T − p new
  // rows on the device; the new ids uploaded. (RoPE tables: rope_for, per layer.)
  void prepare(const Model& m, const std::vector<int>& window, int p, const Trace& tr) {
    const ModelConfig& c = m.config;
    const int T = static_cast<int>(window.size()), n = T - p, C = c.n_embd;
    ensure_model(m);
    ensure_capacity(c, T);
    for (int l = 0; l < c.n_layer && p > 0; ++l)
      if (c.layer(l).mixer == Mixer::Softmax) sync_cache(l, c, p, tr.layers[l]);

    const long long lim = k_->limit();
    x_.ensure(sizeof(float) * n * C, lim, "the residual stream");
    h_.ensure(sizeof(float) * n * C, lim, "normalised activations");
    const LinearAttnDims& la = c.linear;
    int d_max = 0, I = 0;  // the widest layer's head size and MLP
    for (int l = 0; l < c.n_layer; ++l) d_max = std::max(d_max, c.head_size_at(l)), I = std::max(I, c.inner_at(l));
    att_.ensure(sizeof(float) * n * std::max({c.n_head * d_max, la.value_width(), C}), lim, "attention outputs");
    if (c.ple_dim) {  // Gemma 4's per-layer embeddings of the new rows, computed on the host
      const Mat ple = per_layer_embeddings(m, window, p);  // (n, L·P)
      ple_.ensure(sizeof(float) * ple.size(), lim, "the per-layer embeddings");
      ple_.upload(ple.data(), sizeof(float) * ple.size());
      ple_gu_.ensure(sizeof(float) * n * 2 * c.ple_dim, lim, "the per-layer inputs");
      ple_act_.ensure(sizeof(float) * n * c.ple_dim, lim, "the per-layer inputs");
    }
    if (c.attn_gate) {
      gate_.ensure(sizeof(float) * n * c.n_head * c.head_size, lim, "the output gates");
      gated_.ensure(sizeof(float) * n * c.n_head * c.head_size, lim, "the gated attention outputs");
    }
    if (c.any_linear()) {  // the convolutions' rows (K − 1 before the new ones), the recurrence's inputs and outputs
      const int K = std::max(la.conv_kernel, c.short_conv_kernel), hist = std::min(p, K - 1);
      const int Ch = std::max(la.conv_channels(), 3 * C);
      hist_.ensure(sizeof(float) * std::max(hist, 1) * C, lim, "the convolution's earlier rows");
      hist_norm_.ensure(sizeof(float) * std::max(hist, 1) * C, lim, "the convolution's earlier rows");
      mix_.ensure(sizeof(float) * (hist + n) * Ch, lim, "the convolution's input");
      conv_.ensure(sizeof(float) * (hist + n) * std::max(la.conv_channels(), C), lim, "the convolution's output");
      if (la.v_heads) {
        z_.ensure(sizeof(float) * n * la.value_width(), lim, "the gated norm's gates");
        bg_.ensure(sizeof(float) * n * 2 * la.v_heads, lim, "the write strengths and decays");
        o_.ensure(sizeof(float) * n * la.value_width(), lim, "the linear layers' outputs");
        state_.ensure(sizeof(float) * la.v_heads * la.k_dim * la.v_dim, lim, "the linear layers' memory");
      }
    }
    mlp_.ensure(sizeof(float) * n * std::max(gated_mlp(c) ? 2 * I : I, C), lim, "MLP activations");
    if (gated_mlp(c)) act_.ensure(sizeof(float) * n * I, lim, "MLP activations");
    ids_.ensure(sizeof(int) * n, lim, "token ids");
    ids_.upload(window.data() + p, sizeof(int) * n);
  }

  // x (n, C) = token embeddings × emb_scale (+ learned positions for gpt2) of the new rows.
  void embed(const ModelConfig& c, int n, int p) {
    for (size_t ch = 0; ch < tok_.size(); ++ch) {
      const int v0 = static_cast<int>(ch) * tok_chunk_, vn = std::min(tok_chunk_, c.vocab_size - v0);
      k_->embed(ids_, n, c.n_embd, tok_[ch], v0, vn, c.arch == Arch::Gpt2 ? &pos_ : nullptr, p, x_, c.emb_scale);
    }
  }

  // The cos/sin table of these frequencies (× mscale) with at least T positions, made or
  // grown on first use. Tables stay until the model changes (a handful: one per layer
  // kind, two more per longrope model).
  // With `temp` (a model with a query temperature), the queries' table: each position's
  // entries also × its temperature.
  const GlBuffer& rope_for(const std::vector<double>& inv_freq, float mscale, int T, const ModelConfig* temp = nullptr) {
    DevRope* r = nullptr;
    for (DevRope& e : ropes_)
      if (e.inv_freq == inv_freq && e.mscale == mscale && e.query_temperature == (temp != nullptr)) r = &e;
    if (!r) {
      ropes_.push_back(DevRope{inv_freq, mscale, temp != nullptr, 0, GlBuffer()});
      r = &ropes_.back();
    }
    if (T > r->positions) {
      r->positions = std::max(T, std::max(64, 2 * r->positions));
      const std::vector<float> t = rope_table(r->positions, inv_freq, mscale, temp);  // (positions, rot/2, 2)
      r->table.ensure(sizeof(float) * t.size(), k_->limit(), "the RoPE table");
      r->table.upload(t.data(), sizeof(float) * t.size());
    }
    return r->table;
  }

  // Layer l on the device for the new rows [p, T), as CpuBackend::run_layers does: the
  // layer's mixer (softmax attention, the gated delta rule or the short convolution) and
  // x += its branch, then x += MLP(norm2(x)) (post-normed for Gemma / OLMo 2).
  void layer_step(const ModelConfig& c, const LayerWeights& lw, int l, int T, int p, bool compact,
                  const std::vector<std::vector<int>>* targets, int old_T, LayerTrace& lt) {
    const int n = T - p, C = c.n_embd;
    const LayerSpec spec = c.layer(l);
    DevLayer& w = layers_[l];
    lt.scale = spec.scale, lt.softcap = spec.softcap, lt.window = spec.window;
    if (w.has_norm1) k_->norm(x_, n, C, w.norm1_w, c.arch == Arch::Gpt2 ? &w.norm1_b : nullptr, c.norm_eps, h_);
    const GlBuffer& hin = w.has_norm1 ? h_ : x_;  // (n, C) what the mixer reads
    switch (spec.mixer) {  // every kind has its case (no default: -Wswitch names a kind left out)
      case Mixer::Softmax: attention_step(c, lw, l, spec, w, hin, T, p, compact, targets, old_T, lt); break;
      case Mixer::GatedDeltaNet: delta_step(c, w, hin, T, p, lt); break;
      case Mixer::ShortConv: short_conv_step(c, w, hin, T, p, lt); break;
    }
    if (c.experts.count && !c.experts.gemma) experts_step(c, lw, w, T, p, lt);
    else mlp_step(c, lw, w, T, p, lt);
    if (c.ple_dim) per_layer_input(c, l, w, n);
    if (w.layer_scalar != 1.f) k_->scale(x_, n, C, C, w.layer_scalar);  // Gemma 4: the whole stream
  }

  // x += RMSNorm(gelu_tanh(x · W_gate) ⊙ ple_l) · W_proj: Gemma 4's per-layer input, ple_l
  // layer l's columns of the per-layer embeddings (prepare uploaded them).
  void per_layer_input(const ModelConfig& c, int l, DevLayer& w, int n) {
    const int C = c.n_embd, P = c.ple_dim;
    GemmArgs g;  // gate | ple side by side, for the GeGLU kernel
    g.M = n, g.K = C;
    g.a = {&x_, 0, C, 0}, g.c = {&ple_gu_, 0, 2 * P, 0};
    linear(g, w.ple_gate);
    k_->copy_cols(ple_, l * P, c.n_layer * P, ple_gu_, P, 2 * P, n, P);
    k_->swiglu(ple_gu_, n, P, ple_act_, /*geglu=*/true);
    GemmArgs o;
    o.M = n, o.K = P;
    o.a = {&ple_act_, 0, P, 0}, o.c = {&h_, 0, C, 0};
    linear(o, w.ple_proj);
    k_->norm(h_, n, C, w.ple_post_norm, nullptr, c.norm_eps, x_, /*accumulate=*/true);
  }

  // Softmax attention for the new rows: q|k|v of hin into the cache, QK-norm, RoPE of the
  // layer's kind, attention under the layer's rule into the trace's scores and probs, the
  // output gate (Qwen3.5), x += attention · Wo.
  void attention_step(const ModelConfig& c, const LayerWeights& lw, int l, const LayerSpec& spec, DevLayer& w,
                      const GlBuffer& hin, int T, int p, bool compact, const std::vector<std::vector<int>>* targets,
                      int old_T, LayerTrace& lt) {
    const int H = c.n_head, KV = w.kv, d = w.d, C = c.n_embd, n = T - p, ld = w.ld;
    const bool own_kv = w.kv_source < 0;  // else layer kv_source's K and V (Gemma 4's sharing)
    GlBuffer& qkv = caches_[l];
    GemmArgs g;  // q|k|v of the new rows (q alone when shared), straight into the cache rows [p, T)
    g.M = n, g.K = C;
    g.a = {&hin, 0, C, 0}, g.c = {&qkv, p * ld, ld, 0};
    if (w.has_bqkv) g.bias = {&w.bqkv, 0, 0, 0};
    linear(g, w.wqkv);
    if (!own_kv)  // the source's new keys and values, computed earlier in this pass (same d, KV)
      k_->copy_cols(caches_[static_cast<size_t>(w.kv_source)], p * ld + H * d, ld, qkv, p * ld + H * d, ld, n, 2 * KV * d);
    else if (w.v_from_k)  // V = K: the raw key projection into the v columns
      k_->copy_cols(qkv, p * ld + H * d, ld, qkv, p * ld + (H + KV) * d, ld, n, KV * d);
    if (c.qk_norm == QkNorm::PerHead) {  // q heads at columns [0, H·d), k heads at [H·d, (H+KV)·d)
      k_->qk_norm(qkv, p, n, ld, 0, H, d, w.q_norm, c.norm_eps);
      if (own_kv) k_->qk_norm(qkv, p, n, ld, H * d, KV, d, w.k_norm, c.norm_eps);
    } else if (c.qk_norm == QkNorm::Whole) {
      k_->qk_norm(qkv, p, n, ld, 0, 1, H * d, w.q_norm, c.norm_eps);
      k_->qk_norm(qkv, p, n, ld, H * d, 1, KV * d, w.k_norm, c.norm_eps);
    }
    if (c.v_norm && own_kv)  // Gemma 4: RMSNorm of each value head without a weight (ones)
      k_->qk_norm(qkv, p, n, ld, (H + KV) * d, KV, d, w.v_norm_ones, c.norm_eps);
    if (spec.rope) {
      const std::vector<double> inv_freq = rope_inv_freq(c, l, T);  // (rot/2)
      const float mscale = spec.rope_scaling.mscale;
      const int half = static_cast<int>(inv_freq.size());
      if (c.attn_temp_beta != 0.f) {  // the queries turned and × their temperature, the keys turned
        k_->rope(qkv, p, n, ld, 0, H, d, half, p, rope_for(inv_freq, mscale, T, &c));
        k_->rope(qkv, p, n, ld, H * d, KV, d, half, p, rope_for(inv_freq, mscale, T));
      } else {
        k_->rope(qkv, p, n, ld, 0, own_kv ? H + KV : H, d, half, p, rope_for(inv_freq, mscale, T));
      }
    }

    lt.compact = compact;  // q, k, v, out, scores and probs laid out by layout_trace
    GlSummaryArgs sum;  // row_stats and thumbnails, as the CPU backend keeps them
    sum.old_thumbs = std::move(lt.thumbs);
    sum.old_bucket = lt.thumb_bucket, sum.old_T = old_T;
    if (targets) {
      sum.targets = targets;
      lt.thumb_bucket = thumb_bucket(T);
      const int tn = thumb_cells(T, lt.thumb_bucket);
      lt.thumbs = Tensor{{H, tn, tn}, FloatBuf(static_cast<size_t>(H) * tn * tn, 0.f)};
    } else {
      lt.thumbs = Tensor{};
      lt.thumb_bucket = 0;
    }
    lt.sinks.assign(lw.sinks.data(), lw.sinks.data() + lw.sinks.size());  // (H) GPT-OSS; empty elsewhere
    gl_attention(*k_, H, KV, d, qkv, T, p, AttnRule{spec.scale, spec.softcap, spec.window}, scratch_, att_, lt, sum,
                 w.sinks.id() ? &w.sinks : nullptr);
    for (const auto& [al, ah] : ablation_.heads)  // att_ (n, H·d): the ablated heads' columns replaced
      if (al == l && ah < H) k_->ablate_head(att_, n, d, H * d, ah * d, ablation_.mode == AblationMode::Mean);
    if (!w.w_gate.empty()) {  // Qwen3.5: att ⊙ σ(hin · W_gate), att and σ(gate) kept for the trace
      GemmArgs gg;
      gg.M = n, gg.K = C;
      gg.a = {&hin, 0, C, 0}, gg.c = {&gate_, 0, H * d, 0};
      linear(gg, w.w_gate);
      k_->gate_mul(gate_, n, H * d, att_, gated_);
    }
    branch_out(c, w, w.wo, w.w_gate.empty() ? att_ : gated_, H * d, w.has_bo ? &w.bo : nullptr, n);
  }

  // x += the branch's output in · W (+ b), or with a post-norm x += post_attn_norm(in · W + b)
  // (Gemma, OLMo 2): in (n, K).
  void branch_out(const ModelConfig& c, DevLayer& w, const DevLinear& W, const GlBuffer& in, int K, const GlBuffer* b,
                  int n) {
    const int C = c.n_embd;
    GemmArgs o;
    o.M = n, o.K = K;
    o.a = {&in, 0, K, 0}, o.c = {w.has_post_attn ? &h_ : &x_, 0, C, 0};
    if (b) o.bias = {b, 0, 0, 0};
    o.accumulate = !w.has_post_attn;
    linear(o, W);
    if (w.has_post_attn) k_->norm(h_, n, C, w.post_attn, nullptr, c.norm_eps, x_, true);
  }

  // x += GPT-OSS's experts on norm2(x), run on the host as the CPU backend runs them
  // (experts_branch, which records the router's logits and each row's choice in lt): the
  // experts' matrices stay where the file has them (MXFP4 in place) instead of taking the
  // device's memory, as llama.cpp's --cpu-moe keeps them. Each pass reads the normed rows
  // (n, C) back and sends the branch (n, C) up.
  void experts_step(const ModelConfig& c, const LayerWeights& lw, DevLayer& w, int T, int p, LayerTrace& lt) {
    const int n = T - p, C = c.n_embd;
    if (w.has_norm2) k_->norm(x_, n, C, w.norm2_w, nullptr, c.norm_eps, h_);
    Mat hm(n, C), out;
    k_->timer_end();
    (w.has_norm2 ? h_ : x_).read(hm.data(), sizeof(float) * hm.size());
    experts_branch(c, lw, hm, p, &lt, out);  // (n, C)
    h_.upload(out.data(), sizeof(float) * out.size());
    k_->timer_begin();
    if (w.has_post_mlp) k_->norm(h_, n, C, w.post_mlp, nullptr, c.norm_eps, x_, true);
    else k_->add(h_, x_, n, C, C);
  }

  // x += MLP(norm2(x)): fc and GELU (gpt2) or gate|up and SwiGLU / GeGLU, then down.
  // Gemma 4's 26B-A4B adds its experts beside the dense MLP: they run on the host on the
  // stream entering the block (gemma4_experts_branch, recording into lt), and the block's
  // output is post_mlp(post_mlp_dense(dense) + post_mlp_experts(experts)).
  void mlp_step(const ModelConfig& c, const LayerWeights& lw, DevLayer& w, int T, int p, LayerTrace& lt) {
    const int C = c.n_embd, I = w.inner, mlp_w = gated_mlp(c) ? 2 * I : I, n = T - p;
    Mat experts_in;  // (n, C) Gemma 4: the stream entering the block, for its experts
    if (c.experts.gemma) {
      experts_in.resize(n, C);
      k_->timer_end();
      x_.read(experts_in.data(), sizeof(float) * experts_in.size());
      k_->timer_begin();
    }
    const GlBuffer* hm = &x_;  // (n, C) what the MLP reads
    if (w.has_norm2) {
      k_->norm(x_, n, C, w.norm2_w, c.arch == Arch::Gpt2 ? &w.norm2_b : nullptr, c.norm_eps, h_);
      hm = &h_;
    }
    GemmArgs f;  // fc (gpt2) or gate|up (gated)
    f.M = n, f.K = C;
    f.a = {hm, 0, C, 0}, f.c = {&mlp_, 0, mlp_w, 0};
    if (w.has_b_in) f.bias = {&w.b_in, 0, 0, 0};
    linear(f, w.w_in);
    if (!gated_mlp(c)) k_->gelu(mlp_, n, I, I);
    else k_->swiglu(mlp_, n, I, act_, c.mlp == MlpKind::GeGLU);
    GemmArgs dn;  // x += act · W_down (+ b), or into h_ (n, C) and x += post_mlp_norm(h_)
    dn.M = n, dn.K = I;
    dn.a = {gated_mlp(c) ? &act_ : &mlp_, 0, I, 0};
    dn.c = {w.has_post_mlp ? &h_ : &x_, 0, C, 0};
    if (w.has_b_down) dn.bias = {&w.b_down, 0, 0, 0};
    dn.accumulate = !w.has_post_mlp;
    linear(dn, w.w_down);
    if (c.experts.gemma) {  // h_ (n, C) the dense branch; both branches normed into mlp_
      Mat ex;
      k_->timer_end();
      gemma4_experts_branch(c, lw, experts_in, p, &lt, ex);  // (n, C)
      k_->norm(h_, n, C, w.post_mlp_dense, nullptr, c.norm_eps, mlp_);
      h_.upload(ex.data(), sizeof(float) * ex.size());
      k_->timer_begin();
      k_->norm(h_, n, C, w.post_mlp_experts, nullptr, c.norm_eps, mlp_, /*accumulate=*/true);
      k_->norm(mlp_, n, C, w.post_mlp, nullptr, c.norm_eps, x_, true);
      return;
    }
    if (w.has_post_mlp) k_->norm(h_, n, C, w.post_mlp, nullptr, c.norm_eps, x_, true);
  }

  // mix_ rows [0, hist + n) = (norm1 of the layer's input) · W for the hist = min(p, K − 1)
  // rows before p (their input read back from the trace's resid, as the CPU backend does)
  // and the new rows (hin): what a causal convolution of K taps reads. Width N.
  int conv_input(const ModelConfig& c, DevLayer& w, const DevLinear& W, const GlBuffer* b, int N, int K,
                 const GlBuffer& hin, int T, int p, const LayerTrace& lt) {
    const int C = c.n_embd, n = T - p, hist = std::min(p, K - 1);
    GemmArgs g;
    g.K = C;
    if (b) g.bias = {b, 0, 0, 0};
    if (hist > 0) {
      hist_.upload(lt.resid.data.data() + static_cast<size_t>(p - hist) * C, sizeof(float) * hist * C);
      if (w.has_norm1)  // normed into hist_norm_
        k_->norm(hist_, hist, C, w.norm1_w, c.arch == Arch::Gpt2 ? &w.norm1_b : nullptr, c.norm_eps, hist_norm_);
      g.M = hist;
      g.a = {w.has_norm1 ? &hist_norm_ : &hist_, 0, C, 0}, g.c = {&mix_, 0, N, 0};
      linear(g, W);
    }
    g.M = n;
    g.a = {&hin, 0, C, 0}, g.c = {&mix_, hist * N, N, 0};
    linear(g, W);
    return hist;
  }

  // A gated-delta-rule layer for the new rows, as gated_delta_layer (cpu_backend.cpp): q|k|v
  // through the convolution and SiLU, q and k L2-normalised, β and g, the recurrence from the
  // memory before p (delta_state_before, uploaded), x += out_proj(RMSNorm(o) ⊙ silu(z)).
  // q, k, v, β, g, o, the memory and its snapshots are read back in read_back_delta.
  void delta_step(const ModelConfig& c, DevLayer& w, const GlBuffer& hin, int T, int p, LayerTrace& lt) {
    const LinearAttnDims& ld = c.linear;
    const int n = T - p, C = c.n_embd, Ch = ld.conv_channels(), Hv = ld.v_heads, dk = ld.k_dim, dv = ld.v_dim;
    const int hist = conv_input(c, w, w.lin_qkv, nullptr, Ch, ld.conv_kernel, hin, T, p, lt);
    k_->causal_conv(mix_, Ch, 0, hist, n, Ch, w.lin_conv, ld.conv_kernel, nullptr, /*silu=*/true, conv_);
    k_->l2_heads(conv_, n, Ch, 0, ld.k_heads, dk, 1.f / std::sqrt(static_cast<float>(dk)));  // q
    k_->l2_heads(conv_, n, Ch, ld.key_width(), ld.k_heads, dk, 1.f);                         // k
    GemmArgs g;
    g.M = n, g.K = C;
    g.a = {&hin, 0, C, 0}, g.c = {&bg_, 0, 2 * Hv, 0};
    linear(g, w.lin_ba);  // b | a
    k_->delta_gates(bg_, n, Hv, w.lin_neg_a, w.lin_dt_bias);
    g.c = {&z_, 0, ld.value_width(), 0};
    linear(g, w.lin_z);
    // the memory before row p, per value head (an append: the last pass's end)
    const size_t per_state = static_cast<size_t>(dk) * dv;
    std::vector<float>& S = gather_;
    S.resize(per_state * Hv);
#pragma omp parallel for schedule(static) if (!delta_continues(ld, lt, p))
    for (int j = 0; j < Hv; ++j) delta_state_before(ld, lt, j, p, S.data() + j * per_state);
    state_.upload(S.data(), sizeof(float) * S.size());
    const int slots = T / kStateEvery - p / kStateEvery;
    if (slots > 0) snaps_.ensure(sizeof(float) * slots * per_state * Hv, k_->limit(), "the memory's snapshots");
    k_->delta_rule(conv_, ld, bg_, n, p, state_, o_, snaps_, kStateEvery);
    k_->gated_rms(o_, z_, n, Hv, dv, w.lin_norm, c.norm_eps, att_);
    branch_out(c, w, w.lin_out, att_, ld.value_width(), nullptr, n);
  }

  // An LFM2 short-convolution layer for the new rows, as short_conv_layer (cpu_backend.cpp):
  // B | C | x = in_proj(h) (its K − 1 rows before p again), u = B ⊙ x, y = C ⊙ conv(u),
  // x += out_proj(y). Records nothing.
  void short_conv_step(const ModelConfig& c, DevLayer& w, const GlBuffer& hin, int T, int p, const LayerTrace& lt) {
    const int n = T - p, C = c.n_embd, K = c.short_conv_kernel;
    const int hist = conv_input(c, w, w.sc_in, w.sc_in_b.id() ? &w.sc_in_b : nullptr, 3 * C, K, hin, T, p, lt);
    k_->mul(mix_, 3 * C, 0, mix_, 3 * C, 2 * C, hist + n, C, conv_);  // u = B ⊙ x (hist + n, C)
    k_->causal_conv(conv_, C, 0, hist, n, C, w.sc_taps, K, w.sc_taps_b.id() ? &w.sc_taps_b : nullptr, false, att_);
    k_->mul(mix_, 3 * C, hist * 3 * C + C, att_, C, 0, n, C, conv_);  // y = C ⊙ conv(u) (n, C)
    branch_out(c, w, w.sc_out, conv_, C, w.sc_out_b.id() ? &w.sc_out_b : nullptr, n);
  }

  // C = A · W (+ bias) (+ C) with W a DevLinear: one product per part, into its columns.
  void linear(const GemmArgs& base, const DevLinear& parts) {
    for (const DevPart& part : parts) {
      GemmArgs g = base;
      g.N = part.w.N;
      g.c.off += part.col0;
      if (g.bias.buf) g.bias.off += part.col0;
      g.w = &part.w, g.alpha = part.alpha;
      k_->gemm(g);
    }
  }

  // Reads what layer l recorded for the new rows back into the trace: a softmax layer's q,
  // k, v (from the cache rows [p, T)), head outputs and gates, recording the rows' hashes; a
  // gated-delta-rule layer's (read_back_delta); nothing for a short convolution.
  void read_back_layer(const ModelConfig& c, int l, int T, int p, bool summaries, int old_T, LayerTrace& lt) {
    switch (c.layer(l).mixer) {
      case Mixer::GatedDeltaNet: return read_back_delta(c, T, p, summaries, old_T, lt);
      case Mixer::ShortConv: return;
      case Mixer::Softmax: break;  // below
    }
    const int H = c.n_head, KV = c.kv_heads_at(l), d = c.head_size_at(l), n = T - p, ld = cache_ld(c, l);
    std::vector<float>& rows = gather_;
    rows.resize(static_cast<size_t>(n) * std::max(ld, H * d));
    caches_[l].read(rows.data(), sizeof(float) * n * ld, sizeof(float) * p * ld);
    std::vector<uint64_t>& hashes = hashes_[l];
    for (int r = 0; r < n; ++r) {
      const float* row = rows.data() + static_cast<size_t>(r) * ld;
      hashes[p + r] = hash_row(row, ld);
      for (int hh = 0; hh < H + 2 * KV; ++hh) {
        Tensor& dst = hh < H ? lt.q : hh < H + KV ? lt.k : lt.v;
        const int head = hh < H ? hh : hh < H + KV ? hh - H : hh - H - KV;
        std::memcpy(dst.head(head) + static_cast<size_t>(p + r) * dst.ld(), row + hh * d, sizeof(float) * d);
      }
    }
    valid_rows_[l] = T;
    att_.read(rows.data(), sizeof(float) * n * H * d);
    scatter_rows(rows.data(), n, H * d, 0, H, d, p, lt.out);
    if (c.attn_gate) {  // (n, H·d) σ(gate)
      gate_.read(rows.data(), sizeof(float) * n * H * d);
      scatter_rows(rows.data(), n, H * d, 0, H, d, p, lt.gate);
    }
  }

  // Rows (n, width) of heads × d values from column col0 into the rows [p, p + n) of t's
  // heads head0, head0 + 1, ….
  static void scatter_rows(const float* rows, int n, int width, int col0, int heads, int d, int p, Tensor& t,
                           int head0 = 0) {
    for (int r = 0; r < n; ++r)
      for (int hh = 0; hh < heads; ++hh)
        std::memcpy(t.head(head0 + hh) + static_cast<size_t>(p + r) * t.ld(), rows + static_cast<size_t>(r) * width + col0 + hh * d,
                    sizeof(float) * d);
  }

  // A gated-delta-rule layer's new rows back into the trace: q and k (as each value head
  // reads its key head), v, β, g and o; the memory after row T − 1 and the snapshots
  // taken in [p, T); then, on the host as the CPU backend does, A's new rows and the
  // thumbnails (delta_head_rows).
  void read_back_delta(const ModelConfig& c, int T, int p, bool summaries, int old_T, LayerTrace& lt) {
    const LinearAttnDims& ld = c.linear;
    const int n = T - p, Ch = ld.conv_channels(), Hv = ld.v_heads, dk = ld.k_dim, dv = ld.v_dim;
    std::vector<float>& rows = gather_;
    rows.resize(static_cast<size_t>(n) * std::max(Ch, 2 * Hv));
    conv_.read(rows.data(), sizeof(float) * n * Ch);  // q | k | v, q and k normalised
    for (int j = 0; j < Hv; ++j) {
      const int kh = ld.key_head(j);
      scatter_rows(rows.data(), n, Ch, kh * dk, 1, dk, p, lt.q, j);
      scatter_rows(rows.data(), n, Ch, ld.key_width() + kh * dk, 1, dk, p, lt.k, j);
      scatter_rows(rows.data(), n, Ch, 2 * ld.key_width() + j * dv, 1, dv, p, lt.v, j);
    }
    bg_.read(rows.data(), sizeof(float) * n * 2 * Hv);  // β | g
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < Hv; ++j) {
        lt.beta.data[static_cast<size_t>(j) * T + p + r] = rows[static_cast<size_t>(r) * 2 * Hv + j];
        lt.decay.data[static_cast<size_t>(j) * T + p + r] = rows[static_cast<size_t>(r) * 2 * Hv + Hv + j];
      }
    rows.resize(static_cast<size_t>(n) * ld.value_width());
    o_.read(rows.data(), sizeof(float) * rows.size());
    scatter_rows(rows.data(), n, ld.value_width(), 0, Hv, dv, p, lt.out);
    const size_t per_layer = static_cast<size_t>(Hv) * dk * dv;
    lt.state_final.resize(per_layer);
    state_.read(lt.state_final.data(), sizeof(float) * per_layer);
    lt.state_rows = T;
    if (const int slots = T / kStateEvery - p / kStateEvery; slots > 0)
      snaps_.read(lt.state_snaps.data() + static_cast<size_t>(p / kStateEvery) * per_layer, sizeof(float) * slots * per_layer);
    const DeltaThumbs old = delta_thumbs_begin(lt, Hv, T, old_T, summaries);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < Hv; ++j) delta_head_rows(j, p, T, summaries, old, lt);
  }

  // The residual stream of the new rows (x_, (n, C)) into `t` (T, C) rows [p, T); rows
  // [0, p) kept from the last forward, like the KV cache.
  void read_resid(const ModelConfig& c, int T, int p, Tensor& t) {
    const int C = c.n_embd;
    t.resize_keep({T, C}, p, C);
    x_.read(t.data.data() + static_cast<size_t>(p) * C, sizeof(float) * static_cast<size_t>(T - p) * C);
  }

  // logits (T, V) rows [p, T) = norm_f(x) · Uᵀ (normf_w_ holds the weights × logit_scale),
  // soft-capped when the model says so, in row blocks that fit one storage buffer.
  void logits(const ModelConfig& c, int T, int p, Trace& tr) {
    const int n = T - p, C = c.n_embd, V = c.vocab_size;
    const long long lim = k_->limit();
    k_->norm(x_, n, C, normf_w_, c.arch == Arch::Gpt2 ? &normf_b_ : nullptr, c.norm_eps, h_);
    k_->timer_end();  // the final hidden state (n, C), as the CPU backend records it (layout_trace sized it)
    h_.read(tr.final_hidden.data.data() + static_cast<size_t>(p) * C, sizeof(float) * static_cast<size_t>(n) * C);
    k_->timer_begin();
    // Every row's logits into the trace (tr.all_logits), or only the last row's and every
    // row's loss (a row's block read back, its losses taken, and dropped): see
    // Trace::all_logits. forward() made sure row p − 1's loss can be had (held, or p = 0).
    const bool all = tr.all_logits;
    if (all) {
      tr.logits.resize_keep({T, V}, p, V);
      tr.logits_from = 0;
      tr.row_loss.clear();
    } else {
      const bool held = p >= 1 && holds_row(tr, p - 1, V);  // the old last row, whose next token is new
      const float loss = held ? static_cast<float>(next_token_loss(tr.logits.data.data(), V, tr.tokens[static_cast<size_t>(p)])) : 0.f;
      tr.row_loss.resize(static_cast<size_t>(std::max(T - 1, 0)));  // rows [0, p − 1) kept
      if (held) tr.row_loss[static_cast<size_t>(p - 1)] = loss;
      tr.logits = Tensor{{1, V}, FloatBuf(static_cast<size_t>(V))};
      tr.logits_from = T - 1;
    }
    const std::vector<GlWeight>& U = unemb_.empty() ? tok_ : unemb_;
    const int chunk = unemb_.empty() ? tok_chunk_ : unemb_chunk_;
    const int rb = static_cast<int>(std::max<long long>(1, std::min<long long>(n, lim / (sizeof(float) * V))));
    logits_.ensure(sizeof(float) * rb * V, lim, "logits");
    for (int r0 = 0; r0 < n; r0 += rb) {
      const int rn = std::min(rb, n - r0);
      for (size_t ch = 0; ch < U.size(); ++ch) {
        const int v0 = static_cast<int>(ch) * chunk, vn = std::min(chunk, V - v0);
        GemmArgs g;  // logits = h · Uᵀ, U (V, C) as stored
        g.M = rn, g.N = vn, g.K = C;
        g.a = {&h_, r0 * C, C, 0}, g.c = {&logits_, v0, V, 0};
        g.w = &U[ch];
        k_->gemm(g);
      }
      if (c.final_softcap > 0) k_->softcap(logits_, rn, V, V, c.final_softcap);  // (rn, V)
      k_->timer_end();
      if (all) {
        logits_.read(tr.logits.data.data() + static_cast<size_t>(p + r0) * V, sizeof(float) * rn * V);
      } else {
        std::vector<float>& rows = logit_rows_;  // (rn, V)
        rows.resize(static_cast<size_t>(rn) * V);
        logits_.read(rows.data(), sizeof(float) * rows.size());
        for (int r = 0; r < rn; ++r) {
          const int i = p + r0 + r;
          const float* row = rows.data() + static_cast<size_t>(r) * V;
          if (i + 1 < T) tr.row_loss[static_cast<size_t>(i)] = static_cast<float>(next_token_loss(row, V, tr.tokens[static_cast<size_t>(i + 1)]));
          else std::copy(row, row + V, tr.logits.data.begin());
        }
      }
      k_->timer_begin();
    }
  }

  // The trace must hold rows [0, p) of every layer (the contract of Backend::forward).
  static void check_prefix(const ModelConfig& c, int p, const Trace& tr) {
    auto ok = [&](const Tensor& t, int heads, int d) {
      return t.shape.size() == 3 && t.dim(0) == heads && t.dim(1) >= p && t.dim(2) == d;
    };
    bool good = static_cast<int>(tr.layers.size()) == c.n_layer && static_cast<int>(tr.tokens.size()) >= p;
    for (int l = 0; l < c.n_layer && good; ++l) {
      const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
      const Mixer mixer = c.layer(l).mixer;
      const int d = c.head_size_at(l), KV = c.kv_heads_at(l);
      if (mixer == Mixer::Softmax) good = ok(lt.q, c.n_head, d) && ok(lt.k, KV, d) && ok(lt.v, KV, d);
      else good = lt.resid.shape.size() == 2 && lt.resid.dim(0) >= p;  // what a convolution reads again
      if (mixer == Mixer::GatedDeltaNet)  // what a replay from a snapshot reads
        good = good && lt.q.shape.size() == 3 && lt.q.dim(0) == c.linear.v_heads && lt.q.dim(1) >= p &&
               lt.beta.shape.size() == 2 && lt.beta.dim(1) >= p;
    }
    if (!good)
      throw Error("GPU backend: asked to reuse " + std::to_string(p) +
                  " cached rows, but the trace does not hold them for this model (internal error)");
  }

  template <class M>
  void put(GlBuffer& b, const M& m, const char* what) {
    b.ensure(sizeof(float) * static_cast<size_t>(m.size()), k_->limit(), what);
    b.upload(m.data(), sizeof(float) * static_cast<size_t>(m.size()));
  }

  // How `w` is held on the device: its compact type when stored in one (gl_device_type),
  // else float32.
  static GlWType device_type(const Weight& w) { return w.is_stored() ? gl_device_type(w.stored.type) : GlWType::F32; }

  // A (V, C) table in chunks of `chunk` rows, each within one storage block: compact where
  // it is stored in a type with a decoding shader, else float32.
  void put_rows(std::vector<GlWeight>& out, int& chunk, const Weight& w, const char* what) {
    out.clear();
    const long long lim = k_->limit();
    const GlWType t = device_type(w);
    if (t != GlWType::F32) {
      if (w.row_of_col) throw std::logic_error("GPU backend: a table with reordered rows");
      const StoredRows& s = w.stored;
      // a packed row takes its file bytes, plus < 32 bytes of padding (F16, BF16)
      chunk = static_cast<int>(std::max<long long>(1, std::min<long long>(s.rows, (lim - 64) / (s.row_bytes + 32))));
      for (int64_t r0 = 0; r0 < s.rows; r0 += chunk) {
        out.emplace_back();
        gl_upload_rows(out.back(), t, {GlRowSource{&s, nullptr, r0, std::min<int64_t>(chunk, s.rows - r0)}}, lim, what);
      }
      return;
    }
    Mat tmp;
    const Mat& m = w.is_stored() ? (tmp = w.table_f32()) : w.f32;
    chunk = static_cast<int>(std::max<long long>(1, std::min<long long>(m.rows(), lim / (sizeof(float) * m.cols()))));
    for (Eigen::Index r0 = 0; r0 < m.rows(); r0 += chunk) {
      const Eigen::Index rn = std::min<Eigen::Index>(chunk, m.rows() - r0);
      out.emplace_back();
      GlWeight& g = out.back();
      g.type = GlWType::F32, g.rows_are_outputs = true;
      g.N = static_cast<int>(rn), g.K = static_cast<int>(m.cols());
      g.buf.ensure(sizeof(float) * static_cast<size_t>(rn * m.cols()), lim, what);
      g.buf.upload(m.data() + r0 * m.cols(), sizeof(float) * static_cast<size_t>(rn * m.cols()));
    }
  }

  // Linear weights (in, out) side by side (q | k | v, gate | up) as one DevLinear, × scale
  // (the residual multiplier). Float32 ones (and stored types without a decoding shader,
  // decoded here) concatenated as before; compact ones uploaded as their rows.
  DevLinear put_linear(const std::vector<const Weight*>& ws, float scale, const char* what) {
    DevLinear out;
    int col = 0;
    for (size_t i = 0; i < ws.size();) {
      const GlWType t = device_type(*ws[i]);
      size_t j = i;
      int n = 0;
      while (j < ws.size() && device_type(*ws[j]) == t &&
             (t == GlWType::F32 || ws[j]->stored.cols == ws[i]->stored.cols)) {
        n += static_cast<int>(ws[j]->is_stored() ? ws[j]->stored.rows : ws[j]->f32.cols());
        ++j;
      }
      DevPart part;
      part.col0 = col;
      if (t == GlWType::F32) {
        const Weight& first = *ws[i];
        Mat m(first.is_stored() ? first.stored.cols : first.f32.rows(), n);
        int c0 = 0;
        for (size_t k = i; k < j; ++k) {
          Mat tmp;
          const Mat& wk = ws[k]->is_stored() ? (tmp = ws[k]->linear_f32()) : ws[k]->f32;
          m.middleCols(c0, wk.cols()) = wk;
          c0 += static_cast<int>(wk.cols());
        }
        if (scale != 1.f) m *= scale;
        gl_upload_f32(part.w, m, false, k_->limit(), what);
      } else {
        std::vector<GlRowSource> src;
        for (size_t k = i; k < j; ++k)
          src.push_back(GlRowSource{&ws[k]->stored, ws[k]->row_of_col ? ws[k]->row_of_col->data() : nullptr, 0,
                                    ws[k]->stored.rows});
        gl_upload_rows(part.w, t, src, k_->limit(), what);
        part.alpha = scale;
      }
      out.push_back(std::move(part));
      col += n;
      i = j;
    }
    return out;
  }

  static int out_cols(const Weight& w) { return static_cast<int>(w.is_stored() ? w.stored.rows : w.f32.cols()); }

  // dev_bytes_: every weight buffer's bytes by device type; vectors (norms, biases) and
  // the position table count as F32.
  void count_device_bytes() {
    dev_bytes_.clear();
    auto add = [this](const GlWeight& w) { dev_bytes_[gl_wtype_name(w.type)] += static_cast<long long>(w.bytes()); };
    auto addb = [this](const GlBuffer& b) {
      if (b.id()) dev_bytes_["F32"] += static_cast<long long>(b.bytes());
    };
    for (const auto& t : {&tok_, &unemb_})
      for (const GlWeight& w : *t) add(w);
    for (const GlBuffer* b : {&pos_, &normf_w_, &normf_b_}) addb(*b);
    for (const DevLayer& l : layers_) {
      for (const DevLinear* lin :
           {&l.wqkv, &l.wo, &l.w_in, &l.w_down, &l.w_gate, &l.lin_qkv, &l.lin_z, &l.lin_ba, &l.lin_out, &l.sc_in, &l.sc_out,
            &l.ple_gate, &l.ple_proj})
        for (const DevPart& part : *lin) add(part.w);
      for (const GlBuffer* b : {&l.norm1_w, &l.norm1_b, &l.bqkv, &l.bo, &l.norm2_w, &l.norm2_b, &l.b_in, &l.b_down,
                                &l.q_norm, &l.k_norm, &l.post_attn, &l.post_mlp, &l.lin_conv, &l.lin_neg_a,
                                &l.lin_dt_bias, &l.lin_norm, &l.sc_in_b, &l.sc_taps, &l.sc_taps_b, &l.sc_out_b,
                                &l.ple_post_norm, &l.v_norm_ones, &l.sinks, &l.post_mlp_dense, &l.post_mlp_experts})
        addb(*b);
    }
  }

  // A softmax layer's projections: q|k|v (+ bias), the output projection (× the residual
  // multiplier rs_attn) and Qwen3.5's output gate.
  // Gemma 4: a layer with V = K gets q|k only (attention_step copies the raw k into the v
  // columns, before the norms and RoPE); a KV-sharing layer only its queries.
  void put_attention(const LayerWeights& lw, const LayerSpec& spec, float rs_attn, DevLayer& dl) {
    const bool own_kv = spec.kv_source < 0, own_v = own_kv && !spec.v_from_k;
    dl.wqkv = own_v    ? put_linear({&lw.wq, &lw.wk, &lw.wv}, 1.f, "the q|k|v projection")
              : own_kv ? put_linear({&lw.wq, &lw.wk}, 1.f, "the q|k projection")
                       : put_linear({&lw.wq}, 1.f, "the q projection");
    const int nq = out_cols(lw.wq), nk = own_kv ? out_cols(lw.wk) : 0, nv = own_v ? out_cols(lw.wv) : 0;
    dl.has_bqkv = lw.bq.size() || (own_kv && lw.bk.size()) || (own_v && lw.bv.size());
    if (dl.has_bqkv) {
      Vec b = Vec::Zero(nq + nk + nv);
      if (lw.bq.size()) b.segment(0, lw.bq.size()) = lw.bq;
      if (own_kv && lw.bk.size()) b.segment(nq, lw.bk.size()) = lw.bk;
      if (own_v && lw.bv.size()) b.segment(nq + nk, lw.bv.size()) = lw.bv;
      put(dl.bqkv, b, "the q|k|v bias");
    }
    dl.wo = put_linear({&lw.wo}, rs_attn, "the output projection");
    if ((dl.has_bo = lw.bo.size() > 0)) put(dl.bo, Vec(lw.bo * rs_attn), "the output projection bias");
    if (!lw.w_gate.empty()) dl.w_gate = put_linear({&lw.w_gate}, 1.f, "the output gate");
  }

  void ensure_model(const Model& m) {
    const uint64_t fp = fingerprint(m);
    if (fp == model_fp_ && !layers_.empty()) return;
    model_fp_ = 0;
    dev_bytes_.clear();
    const ModelConfig& c = m.config;
    const ModelWeights& w = m.weights;
    put_rows(tok_, tok_chunk_, w.tok_emb, "the token embeddings");
    if (!w.lm_head.empty())
      put_rows(unemb_, unemb_chunk_, w.lm_head, "the output embeddings");
    else unemb_.clear();
    if (c.arch == Arch::Gpt2) put(pos_, w.pos_emb, "the position embeddings");
    // Granite's logits × (1 / logits_scaling) folded into the final norm: (x̂·w + b)·s.
    const float ls = c.logit_scale;
    put(normf_w_, Vec(w.normf_w * ls), "final norm");
    if (w.normf_b.size()) put(normf_b_, Vec(w.normf_b * ls), "final norm");
    ropes_.clear();
    const float rs = c.residual_scale;  // folded into each branch's last weights (DevLayer)
    layers_.clear();
    layers_.resize(c.n_layer);
    for (int l = 0; l < c.n_layer; ++l) {
      const LayerWeights& lw = w.layers[l];
      DevLayer& dl = layers_[l];
      if ((dl.has_norm1 = lw.norm1_w.size() > 0)) put(dl.norm1_w, lw.norm1_w, "a norm");
      if (lw.norm1_b.size()) put(dl.norm1_b, lw.norm1_b, "a norm");
      const Mixer mixer = c.layer(l).mixer;
      dl.d = c.head_size_at(l), dl.kv = c.kv_heads_at(l), dl.inner = c.inner_at(l), dl.ld = cache_ld(c, l);
      dl.kv_source = c.layer(l).kv_source, dl.v_from_k = c.layer(l).v_from_k;
      dl.layer_scalar = lw.layer_scalar;
      if (c.v_norm) put(dl.v_norm_ones, Vec(Vec::Ones(dl.d)), "the V-norm");
      if (c.ple_dim) {
        dl.ple_gate = put_linear({&lw.ple_gate}, 1.f, "the per-layer input gate");
        dl.ple_proj = put_linear({&lw.ple_proj}, 1.f, "the per-layer input projection");
        put(dl.ple_post_norm, lw.ple_post_norm, "the per-layer input norm");
      }
      if (c.qk_norm != QkNorm::None && mixer == Mixer::Softmax) {
        put(dl.q_norm, lw.q_norm, "the QK-norm");
        put(dl.k_norm, lw.k_norm, "the QK-norm");
      }
      if ((dl.has_post_attn = lw.post_attn_norm.size() > 0)) put(dl.post_attn, Vec(lw.post_attn_norm * rs), "a norm");
      if ((dl.has_post_mlp = lw.post_mlp_norm.size() > 0)) put(dl.post_mlp, Vec(lw.post_mlp_norm * rs), "a norm");
      const float rs_attn = dl.has_post_attn ? 1.f : rs, rs_mlp = dl.has_post_mlp ? 1.f : rs;
      switch (mixer) {  // the mixer's weights; every kind has its case
        case Mixer::GatedDeltaNet:
          dl.lin_qkv = put_linear({&lw.lin_qkv}, 1.f, "the linear layer's q|k|v projection");
          dl.lin_z = put_linear({&lw.lin_z}, 1.f, "the linear layer's z projection");
          dl.lin_ba = put_linear({&lw.lin_b, &lw.lin_a}, 1.f, "the linear layer's b|a projection");
          dl.lin_out = put_linear({&lw.lin_out}, rs_attn, "the linear layer's output projection");
          put(dl.lin_conv, lw.lin_conv, "the convolution's taps");
          put(dl.lin_neg_a, lw.lin_decay_rate, "the decay rates");
          put(dl.lin_dt_bias, lw.lin_dt_bias, "the decay biases");
          put(dl.lin_norm, lw.lin_norm, "the gated norm");
          break;
        case Mixer::ShortConv:
          dl.sc_in = put_linear({&lw.sc_in}, 1.f, "the convolution's input projection");
          if (lw.sc_in_b.size()) put(dl.sc_in_b, lw.sc_in_b, "the convolution's input bias");
          put(dl.sc_taps, lw.sc_taps, "the convolution's taps");
          if (lw.sc_taps_b.size()) put(dl.sc_taps_b, lw.sc_taps_b, "the convolution's bias");
          dl.sc_out = put_linear({&lw.sc_out}, rs_attn, "the convolution's output projection");
          if (lw.sc_out_b.size()) put(dl.sc_out_b, Vec(lw.sc_out_b * rs_attn), "the convolution's output bias");
          break;
        case Mixer::Softmax: put_attention(lw, c.layer(l), rs_attn, dl); break;
      }
      if ((dl.has_norm2 = lw.norm2_w.size() > 0)) put(dl.norm2_w, lw.norm2_w, "a norm");
      if (lw.norm2_b.size()) put(dl.norm2_b, lw.norm2_b, "a norm");
      if (lw.sinks.size()) put(dl.sinks, lw.sinks, "the attention sinks");
      if (c.experts.gemma) {  // the dense branch's and the experts' own norms (the experts run on the host)
        put(dl.post_mlp_dense, lw.post_mlp_norm_dense, "a norm");
        put(dl.post_mlp_experts, lw.post_mlp_norm_experts, "a norm");
      }
      if (c.experts.count && !c.experts.gemma) {
        // GPT-OSS's experts run on the host (experts_step): nothing of them on the device
      } else if (!gated_mlp(c)) {
        dl.w_in = put_linear({&lw.w_fc}, 1.f, "the MLP");
        if ((dl.has_b_in = lw.b_fc.size() > 0)) put(dl.b_in, lw.b_fc, "the MLP bias");
      } else {
        dl.w_in = put_linear({&lw.w_fc, &lw.w_up}, 1.f, "the MLP gate|up projection");
        if ((dl.has_b_in = lw.b_fc.size() > 0)) {
          Vec b = Vec::Zero(out_cols(lw.w_fc) + out_cols(lw.w_up));
          b.segment(0, lw.b_fc.size()) = lw.b_fc;
          put(dl.b_in, b, "the MLP bias");
        }
      }
      if (!c.experts.count || c.experts.gemma) dl.w_down = put_linear({&lw.w_down}, rs_mlp, "the MLP down projection");
      if ((dl.has_b_down = lw.b_down.size() > 0)) put(dl.b_down, Vec(lw.b_down * rs_mlp), "the MLP bias");
    }
    count_device_bytes();
    // New weights: nothing cached is valid.
    caches_.clear();
    hashes_.clear();
    valid_rows_.clear();
    tcap_ = 0;
    model_fp_ = fp;
  }

  // The KV cache (q|k|v rows, q kept for the old queries' new columns) holds tcap_ rows, for
  // the softmax layers (the others keep their memory in the trace).
  void ensure_capacity(const ModelConfig& c, int T) {
    const int L = c.n_layer;
    if (T <= tcap_ && static_cast<int>(caches_.size()) == L) return;
    int ld_max = 1;
    for (int l = 0; l < L; ++l) ld_max = std::max(ld_max, cache_ld(c, l));
    tcap_ = std::max(T, std::max(64, 2 * tcap_));
    tcap_ = std::min(tcap_, std::max(T, static_cast<int>(k_->limit() / (sizeof(float) * ld_max))));
    caches_.clear();
    caches_.resize(L);
    for (int l = 0; l < L; ++l)
      if (c.layer(l).mixer == Mixer::Softmax)
        caches_[l].ensure(sizeof(float) * static_cast<size_t>(tcap_) * cache_ld(c, l), k_->limit(), "the KV cache");
    hashes_.assign(L, std::vector<uint64_t>(static_cast<size_t>(tcap_), 0));
    valid_rows_.assign(L, 0);
  }

  // Makes device rows [0, p) of layer l equal to the trace's q, k, v rows: kept when every
  // row's hash matches what was computed here, uploaded from the trace otherwise.
  void sync_cache(int l, const ModelConfig& c, int p, const LayerTrace& lt) {
    const int H = c.n_head, KV = c.kv_heads_at(l), d = c.head_size_at(l), ld = cache_ld(c, l);
    std::vector<float>& rows = gather_;
    rows.resize(static_cast<size_t>(p) * ld);
    const bool valid = valid_rows_[l] >= p;
    const std::vector<uint64_t>& hashes = hashes_[l];
    std::vector<uint64_t>& fresh = fresh_hashes_;  // each row's hash, taken once
    fresh.resize(static_cast<size_t>(p));
    int differ = 0;  // rows whose hash differs; every append checks all p rows, so in threads
#pragma omp parallel for reduction(+ : differ) if (static_cast<int64_t>(p) * ld >= 2048)
    for (int t = 0; t < p; ++t) {
      float* row = rows.data() + static_cast<size_t>(t) * ld;
      for (int hh = 0; hh < H + 2 * KV; ++hh) {
        const Tensor& src = hh < H ? lt.q : hh < H + KV ? lt.k : lt.v;
        const int head = hh < H ? hh : hh < H + KV ? hh - H : hh - H - KV;
        std::memcpy(row + hh * d, src.head(head) + static_cast<size_t>(t) * src.ld(), sizeof(float) * d);
      }
      fresh[static_cast<size_t>(t)] = hash_row(row, ld);
      if (valid && fresh[static_cast<size_t>(t)] != hashes[t]) ++differ;
    }
    const bool same = valid && differ == 0;
    if (!same) {
      caches_[l].upload(rows.data(), sizeof(float) * rows.size());
      std::copy(fresh.begin(), fresh.end(), hashes_[l].begin());
      ++reuploads_;
    }
    valid_rows_[l] = p;
  }

  mutable std::mutex mu_;
  std::unique_ptr<GlContext> ctx_;
  std::unique_ptr<GlKernels> k_;
  bool verbose_ = false;
  double last_device_ms_ = -1;

  // the model on the device
  uint64_t model_fp_ = 0;
  std::vector<DevLayer> layers_;
  // vocabulary tables in chunks of tok_chunk_ (unemb_chunk_) rows; unemb_ empty when tied
  std::vector<GlWeight> tok_, unemb_;
  int tok_chunk_ = 1, unemb_chunk_ = 1;
  std::map<std::string, long long> dev_bytes_;  // the weights' device bytes by device type
  GlBuffer pos_, normf_w_, normf_b_;
  std::vector<DevRope> ropes_;  // RoPE tables, one per set of frequencies in use (rope_for)

  // the KV cache: per layer (tcap_, (H+2·KV)·d) q|k|v rows, per-row hashes, rows valid
  int tcap_ = 0;
  std::vector<GlBuffer> caches_;
  std::vector<std::vector<uint64_t>> hashes_;
  std::vector<int> valid_rows_;
  std::vector<float> gather_;
  std::vector<uint64_t> fresh_hashes_;  // sync_cache's hashes of the trace's rows
  std::vector<float> logit_rows_;  // a block of logits rows read back for their losses (last logits only)
  long long reuploads_ = 0;

  // activations of the new rows
  GlBuffer x_, h_, att_, mlp_, act_, ids_, logits_;
  GlBuffer gate_, gated_;  // (n, H·d) Qwen3.5's output gates (σ applied) and att ⊙ gate
  // the hybrids' layers: the K − 1 rows before the new ones (their input, and normed), the
  // convolution's input (hist + n rows) and output, z, β | g, o, the memory and its snapshots
  GlBuffer hist_, hist_norm_, mix_, conv_, z_, bg_, o_, state_, snaps_;
  GlBuffer ple_, ple_gu_, ple_act_;  // Gemma 4: (n, L·P) per-layer embeddings, (n, 2·P) gate | ple, (n, P)
  GlAttentionScratch scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_gl_backend(const GlBackendOptions& options) {
  return std::make_unique<GlBackend>(options);
}

std::map<std::string, long long> gl_device_weight_bytes(const Backend& b) {
  const auto* g = dynamic_cast<const GlBackend*>(&b);
  return g ? g->device_weight_bytes() : std::map<std::string, long long>{};
}

std::string gl_device_renderer(const Backend& b) {
  const auto* g = dynamic_cast<const GlBackend*>(&b);
  return g ? g->renderer() : std::string();
}

long long gl_device_weight_total(const Backend& b) {
  long long n = 0;
  for (const auto& [type, bytes] : gl_device_weight_bytes(b)) n += bytes;
  return n;
}

}  // namespace attnviz
