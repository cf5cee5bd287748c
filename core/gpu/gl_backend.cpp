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

#include "core/engine/head_summary.h"
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
  GlBuffer norm1_w, norm1_b, bqkv, bo, norm2_w, norm2_b, b_in, b_down;
  GlBuffer q_norm, k_norm;          // (d) per head or (H·d), (KV·d) whole; QK-norm
  GlBuffer post_attn, post_mlp;     // (C) norms of the branch outputs before their adds
  bool has_bqkv = false, has_bo = false, has_b_in = false, has_b_down = false;
  bool has_norm1 = true, has_norm2 = true;  // false: no norm before attention / MLP (OLMo 2)
  bool has_post_attn = false, has_post_mlp = false;
};

// Whether the MLP is gated (gate | up, SwiGLU or GeGLU) or one projection and GELU (gpt2).
bool gated_mlp(const ModelConfig& c) { return c.arch != Arch::Gpt2 && c.mlp != MlpKind::Gelu; }

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
    if (m.config.any_linear())
      throw Error("the GPU backend does not run linear-attention (gated delta rule) layers yet, and this " +
                      m.config.model_type + " model has some\n  HINT: use --backend cpu.",
                  ErrorKind::Usage);
    if (m.config.attn_sinks || m.config.experts.count)
      throw Error("the GPU backend does not run attention sinks or experts (GPT-OSS) yet\n  HINT: use --backend cpu.",
                  ErrorKind::Usage);
    if (m.config.per_layer_attention())
      throw Error("the GPU backend does not run layers of different head sizes, shared keys and values or per-layer "
                  "embeddings (Gemma 4) yet\n  HINT: use --backend cpu.",
                  ErrorKind::Usage);
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

    k_->timer_begin();
    embed(c, n, p);
    k_->timer_end();
    read_resid(c, T, p, tr.layers[0].resid);
    // (T − p) lists: the induction targets of the new rows, for the summaries' row_stats
    const std::vector<std::vector<int>> targets = tr.summaries ? induction_targets(window, p) : std::vector<std::vector<int>>{};
    k_->timer_begin();
    for (int l = 0; l < c.n_layer; ++l) {
      LayerTrace& lt = tr.layers[l];
      layer_step(c, l, T, p, tr.compact, tr.summaries ? &targets : nullptr, old_T, lt);
      k_->timer_end();
      const auto t_read = std::chrono::steady_clock::now();
      read_back_layer(c, l, T, p, lt);
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
    const int T = static_cast<int>(window.size()), n = T - p, C = c.n_embd, I = c.n_inner;
    const int ld = (c.n_head + 2 * c.n_kv_head) * c.head_size;
    ensure_model(m);
    ensure_capacity(T, ld, c.n_layer);
    for (int l = 0; l < c.n_layer && p > 0; ++l) sync_cache(l, c, p, tr.layers[l]);

    const long long lim = k_->limit();
    x_.ensure(sizeof(float) * n * C, lim, "the residual stream");
    h_.ensure(sizeof(float) * n * C, lim, "normalised activations");
    att_.ensure(sizeof(float) * n * c.n_head * c.head_size, lim, "attention outputs");
    mlp_.ensure(sizeof(float) * n * mlp_width(c), lim, "MLP activations");
    if (gated_mlp(c)) act_.ensure(sizeof(float) * n * I, lim, "MLP activations");
    ids_.ensure(sizeof(int) * n, lim, "token ids");
    ids_.upload(window.data() + p, sizeof(int) * n);
  }

  // Width of the first MLP product: fc (gpt2) or gate|up side by side (gated).
  static int mlp_width(const ModelConfig& c) { return gated_mlp(c) ? 2 * c.n_inner : c.n_inner; }

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

  // Layer l on the device for the new rows [p, T), as CpuBackend::run_layers does: q|k|v
  // of norm1(x) (or of x, OLMo 2) into the cache, QK-norm, RoPE of the layer's kind,
  // attention under the layer's rule into the trace's scores and probs, x += attention · Wo
  // (post-normed for Gemma / OLMo 2), x += MLP(norm2(x)) (likewise).
  void layer_step(const ModelConfig& c, int l, int T, int p, bool compact, const std::vector<std::vector<int>>* targets,
                  int old_T, LayerTrace& lt) {
    const int H = c.n_head, KV = c.n_kv_head, d = c.head_size, C = c.n_embd, I = c.n_inner, n = T - p;
    const int ld = (H + 2 * KV) * d, mlp_w = mlp_width(c);
    const LayerSpec spec = c.layer(l);
    DevLayer& w = layers_[l];
    GlBuffer& qkv = caches_[l];
    const GlBuffer* hin = &x_;  // (n, C) what the projections read
    if (w.has_norm1) {
      k_->norm(x_, n, C, w.norm1_w, c.arch == Arch::Gpt2 ? &w.norm1_b : nullptr, c.norm_eps, h_);
      hin = &h_;
    }
    GemmArgs g;  // q|k|v of the new rows, straight into the cache rows [p, T)
    g.M = n, g.K = C;
    g.a = {hin, 0, C, 0}, g.c = {&qkv, p * ld, ld, 0};
    if (w.has_bqkv) g.bias = {&w.bqkv, 0, 0, 0};
    linear(g, w.wqkv);
    if (c.qk_norm == QkNorm::PerHead) {  // q heads at columns [0, H·d), k heads at [H·d, (H+KV)·d)
      k_->qk_norm(qkv, p, n, ld, 0, H, d, w.q_norm, c.norm_eps);
      k_->qk_norm(qkv, p, n, ld, H * d, KV, d, w.k_norm, c.norm_eps);
    } else if (c.qk_norm == QkNorm::Whole) {
      k_->qk_norm(qkv, p, n, ld, 0, 1, H * d, w.q_norm, c.norm_eps);
      k_->qk_norm(qkv, p, n, ld, H * d, 1, KV * d, w.k_norm, c.norm_eps);
    }
    if (spec.rope) {
      const std::vector<double> inv_freq = rope_inv_freq(c, l, T);  // (rot/2)
      const float mscale = spec.rope_scaling.mscale;
      const int half = static_cast<int>(inv_freq.size());
      if (c.attn_temp_beta != 0.f) {  // the queries turned and × their temperature, the keys turned
        k_->rope(qkv, p, n, ld, 0, H, d, half, p, rope_for(inv_freq, mscale, T, &c));
        k_->rope(qkv, p, n, ld, H * d, KV, d, half, p, rope_for(inv_freq, mscale, T));
      } else {
        k_->rope(qkv, p, n, ld, 0, H + KV, d, half, p, rope_for(inv_freq, mscale, T));
      }
    }

    lt.q.resize_keep({H, T, d}, p, d);
    lt.k.resize_keep({KV, T, d}, p, d);
    lt.v.resize_keep({KV, T, d}, p, d);
    lt.out.resize_keep({H, T, d}, p, d);
    lt.compact = compact;
    for (Tensor* t : {&lt.scores, &lt.probs}) {
      if (compact) *t = Tensor{};
      else t->resize_keep({H, T, T}, p, p);
    }
    GlSummaryArgs sum;  // row_stats and thumbnails, as the CPU backend keeps them
    sum.old_thumbs = std::move(lt.thumbs);
    sum.old_bucket = lt.thumb_bucket, sum.old_T = old_T;
    if (targets) {
      sum.targets = targets;
      lt.row_stats.resize_keep({H, T, kRowStats}, p, kRowStats);
      lt.thumb_bucket = thumb_bucket(T);
      const int tn = thumb_cells(T, lt.thumb_bucket);
      lt.thumbs = Tensor{{H, tn, tn}, FloatBuf(static_cast<size_t>(H) * tn * tn, 0.f)};
    } else {
      lt.row_stats = Tensor{}, lt.thumbs = Tensor{};
      lt.thumb_bucket = 0;
    }
    gl_attention(*k_, H, KV, d, qkv, T, p, AttnRule{spec.scale, spec.softcap, spec.window}, scratch_, att_, lt, sum);
    for (const auto& [al, ah] : ablation_.heads)  // att_ (n, H·d): the ablated heads' columns replaced
      if (al == l && ah < H) k_->ablate_head(att_, n, d, H * d, ah * d, ablation_.mode == AblationMode::Mean);

    GemmArgs o;  // x += att · Wo (+ bo), or into h_ (n, C) and x += post_attn_norm(h_)
    o.M = n, o.K = H * d;
    o.a = {&att_, 0, H * d, 0}, o.c = {w.has_post_attn ? &h_ : &x_, 0, C, 0};
    if (w.has_bo) o.bias = {&w.bo, 0, 0, 0};
    o.accumulate = !w.has_post_attn;
    linear(o, w.wo);
    if (w.has_post_attn) k_->norm(h_, n, C, w.post_attn, nullptr, c.norm_eps, x_, true);
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
    if (w.has_post_mlp) k_->norm(h_, n, C, w.post_mlp, nullptr, c.norm_eps, x_, true);
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

  // Reads q, k, v (from the cache rows [p, T)) and the head outputs of the new rows back
  // into the trace's (heads, T, d) layout, and records the rows' hashes.
  void read_back_layer(const ModelConfig& c, int l, int T, int p, LayerTrace& lt) {
    const int H = c.n_head, KV = c.n_kv_head, d = c.head_size, n = T - p, ld = (H + 2 * KV) * d;
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
        std::memcpy(dst.head(head) + static_cast<size_t>(p + r) * d, row + hh * d, sizeof(float) * d);
      }
    }
    valid_rows_[l] = T;
    att_.read(rows.data(), sizeof(float) * n * H * d);
    for (int r = 0; r < n; ++r)
      for (int hh = 0; hh < H; ++hh)
        std::memcpy(lt.out.head(hh) + static_cast<size_t>(p + r) * d, rows.data() + (static_cast<size_t>(r) * H + hh) * d,
                    sizeof(float) * d);
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
    auto ok = [&](const Tensor& t, int heads) {
      return t.shape.size() == 3 && t.dim(0) == heads && t.dim(1) >= p && t.dim(2) == c.head_size;
    };
    bool good = static_cast<int>(tr.layers.size()) == c.n_layer && static_cast<int>(tr.tokens.size()) >= p;
    for (const auto& l : tr.layers) good = good && ok(l.q, c.n_head) && ok(l.k, c.n_kv_head) && ok(l.v, c.n_kv_head);
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
      for (const DevLinear* lin : {&l.wqkv, &l.wo, &l.w_in, &l.w_down})
        for (const DevPart& part : *lin) add(part.w);
      for (const GlBuffer* b : {&l.norm1_w, &l.norm1_b, &l.bqkv, &l.bo, &l.norm2_w, &l.norm2_b, &l.b_in, &l.b_down,
                                &l.q_norm, &l.k_norm, &l.post_attn, &l.post_mlp})
        addb(*b);
    }
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
      if (c.qk_norm != QkNorm::None) {
        put(dl.q_norm, lw.q_norm, "the QK-norm");
        put(dl.k_norm, lw.k_norm, "the QK-norm");
      }
      if ((dl.has_post_attn = lw.post_attn_norm.size() > 0)) put(dl.post_attn, Vec(lw.post_attn_norm * rs), "a norm");
      if ((dl.has_post_mlp = lw.post_mlp_norm.size() > 0)) put(dl.post_mlp, Vec(lw.post_mlp_norm * rs), "a norm");
      const float rs_attn = dl.has_post_attn ? 1.f : rs, rs_mlp = dl.has_post_mlp ? 1.f : rs;
      dl.wqkv = put_linear({&lw.wq, &lw.wk, &lw.wv}, 1.f, "the q|k|v projection");
      const int nq = out_cols(lw.wq), nk = out_cols(lw.wk), nv = out_cols(lw.wv);
      dl.has_bqkv = lw.bq.size() || lw.bk.size() || lw.bv.size();
      if (dl.has_bqkv) {
        Vec b = Vec::Zero(nq + nk + nv);
        if (lw.bq.size()) b.segment(0, lw.bq.size()) = lw.bq;
        if (lw.bk.size()) b.segment(nq, lw.bk.size()) = lw.bk;
        if (lw.bv.size()) b.segment(nq + nk, lw.bv.size()) = lw.bv;
        put(dl.bqkv, b, "the q|k|v bias");
      }
      dl.wo = put_linear({&lw.wo}, rs_attn, "the output projection");
      if ((dl.has_bo = lw.bo.size() > 0)) put(dl.bo, Vec(lw.bo * rs_attn), "the output projection bias");
      if ((dl.has_norm2 = lw.norm2_w.size() > 0)) put(dl.norm2_w, lw.norm2_w, "a norm");
      if (lw.norm2_b.size()) put(dl.norm2_b, lw.norm2_b, "a norm");
      if (!gated_mlp(c)) {
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
      dl.w_down = put_linear({&lw.w_down}, rs_mlp, "the MLP down projection");
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

  // The KV cache (q|k|v rows, q kept for the old queries' new columns) holds tcap_ rows.
  void ensure_capacity(int T, int ld, int L) {
    if (T <= tcap_ && static_cast<int>(caches_.size()) == L) return;
    tcap_ = std::max(T, std::max(64, 2 * tcap_));
    tcap_ = std::min(tcap_, std::max(T, static_cast<int>(k_->limit() / (sizeof(float) * ld))));
    caches_.clear();
    caches_.resize(L);
    for (auto& b : caches_) b.ensure(sizeof(float) * static_cast<size_t>(tcap_) * ld, k_->limit(), "the KV cache");
    hashes_.assign(L, std::vector<uint64_t>(static_cast<size_t>(tcap_), 0));
    valid_rows_.assign(L, 0);
  }

  // Makes device rows [0, p) of layer l equal to the trace's q, k, v rows: kept when every
  // row's hash matches what was computed here, uploaded from the trace otherwise.
  void sync_cache(int l, const ModelConfig& c, int p, const LayerTrace& lt) {
    const int H = c.n_head, KV = c.n_kv_head, d = c.head_size, ld = (H + 2 * KV) * d;
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
        std::memcpy(row + hh * d, src.head(head) + static_cast<size_t>(t) * d, sizeof(float) * d);
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
