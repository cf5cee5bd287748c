// The OpenGL compute backend against the CPU: every kernel against core/engine/ops.h, the whole
// forward against the CPU backend (gpt2, llama GQA/MQA, odd sizes, T = 1, the block_size
// window, appends and edits through the KV cache; and the newer architectures: local windows,
// soft-capping, QK-norm, per-layer / partial / longrope RoPE, sandwich and post norms, GeGLU,
// Granite's multipliers), and the fallback when the GPU cannot start. Runs on Mesa's llvmpipe without a display (DISPLAY is unset below).
// Tolerance: relative error (max|gpu − cpu| / max|cpu| per tensor) ≤ 2e-4, −inf identical.
//
// No GL context at all is a FAILURE, so CI notices a broken setup, unless env
// ATTNVIZ_ALLOW_NO_GPU=1 is set (then those tests are skipped).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/engine/head_summary.h"
#include "core/engine/ops.h"
#include "core/error.h"
#include "core/gpu/gl_backend.h"
#include "core/gpu/gl_ops.h"
#include "core/model/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

constexpr double kTol = 2e-4;

// No X server, no Wayland: the backend must not need one.
const bool kNoDisplay = [] {
  unsetenv("DISPLAY");
  unsetenv("WAYLAND_DISPLAY");
  return true;
}();

bool allow_no_gpu() {
  const char* v = std::getenv("ATTNVIZ_ALLOW_NO_GPU");
  return v && std::string(v) == "1";
}

// One GL context for the op tests, made once.
GlHostOps* host_ops(std::string* why) {
  static std::unique_ptr<GlHostOps> ops;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    try {
      ops = std::make_unique<GlHostOps>();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  *why = error;
  return ops.get();
}

#define REQUIRE_GPU(ptr, why)                                                             \
  do {                                                                                    \
    if (!(ptr)) {                                                                         \
      if (allow_no_gpu()) GTEST_SKIP() << "no GL context (ATTNVIZ_ALLOW_NO_GPU=1): " << why; \
      FAIL() << "no GL 4.3 context could be made: " << why                               \
             << "\n(set ATTNVIZ_ALLOW_NO_GPU=1 to skip instead)";                         \
    }                                                                                     \
  } while (0)

#define OPS()                      \
  std::string why;                 \
  GlHostOps* gl = host_ops(&why);  \
  REQUIRE_GPU(gl, why)

Mat random_mat(int rows, int cols, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  Mat m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

double rel(const Mat& a, const Mat& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return -1;
  Tensor ta{{a.rows(), a.cols()}, FloatBuf(a.data(), a.data() + a.size())};
  Tensor tb{{b.rows(), b.cols()}, FloatBuf(b.data(), b.data() + b.size())};
  return test::rel_error(ta, tb);
}

// ---- every op against core/engine/ops.h ------------------------------------------------------

TEST(GpuOps, Embedding) {
  OPS();
  const Mat tok = random_mat(23, 30, 1), pos = random_mat(16, 30, 2);
  const std::vector<int> ids = {0, 22, 5, 11, 12, 11, 3};
  for (bool with_pos : {false, true}) {
    Mat want(static_cast<Eigen::Index>(ids.size()), 30);
    for (size_t r = 0; r < ids.size(); ++r) {
      want.row(static_cast<Eigen::Index>(r)) = tok.row(ids[r]);
      if (with_pos) want.row(static_cast<Eigen::Index>(r)) += pos.row(4 + static_cast<Eigen::Index>(r));
    }
    EXPECT_LE(rel(gl->embed(tok, with_pos ? pos : Mat(), ids, 4), want), 0.0) << "with_pos " << with_pos;
  }
}

// A buffer whose size creeps up (the attention scratch while typing) is reallocated a few
// times, not at every step; its contents still read back; the device limit still holds.
TEST(GpuOps, BufferThatGrowsAgainGrowsByHalf) {
  OPS();
  GlContext::Current cur(gl->context());
  const long long limit = 1 << 20;
  GlBuffer b;
  b.ensure(1000, limit, "test");
  EXPECT_EQ(b.bytes(), 1000u);  // a first allocation is what was asked
  b.ensure(1004, limit, "test");
  EXPECT_EQ(b.bytes(), 1500u);  // growing: half as much again
  b.ensure(1400, limit, "test");
  EXPECT_EQ(b.bytes(), 1500u);  // fits: kept
  b.ensure(5000, limit, "test");
  EXPECT_EQ(b.bytes(), 5000u);  // more than half as much again: what was asked
  b.ensure(900000, limit, "test");
  b.ensure(900004, limit, "test");
  EXPECT_EQ(b.bytes(), static_cast<size_t>(limit));  // never past the limit
  EXPECT_THROW(b.ensure(static_cast<size_t>(limit) + 4, limit, "test"), Error);
  std::vector<float> in(100), out(100);
  for (int i = 0; i < 100; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f;
  b.upload(in.data(), sizeof(float) * in.size());
  b.read(out.data(), sizeof(float) * out.size());
  EXPECT_EQ(in, out);
}

TEST(GpuOps, LayerNormAndRmsNorm) {
  OPS();
  for (int C : {30, 64, 300}) {
    const Mat x = random_mat(5, C, 3, 2.f);
    const Vec w = random_mat(1, C, 4), b = random_mat(1, C, 5);
    Mat want;
    layer_norm(x, w, b, 1e-5f, want);
    EXPECT_LE(rel(gl->layer_norm(x, w, b, 1e-5f), want), kTol) << "C " << C;
    rms_norm(x, w, 1e-6f, want);
    EXPECT_LE(rel(gl->rms_norm(x, w, 1e-6f), want), kTol) << "C " << C;
  }
}

void check_products(GlHostOps& gl, const std::string& label) {
  // (M, K, N): one and few rows (gemv), 16×16, 64×64 and 128×128 tiles, sizes that are no
  // multiple of a tile or of gemv's chunk of K.
  for (auto [M, K, N] : {std::tuple{1, 30, 23}, std::tuple{1, 600, 70}, std::tuple{8, 33, 5}, std::tuple{9, 10, 13},
                         std::tuple{70, 45, 130}, std::tuple{64, 64, 64}, std::tuple{3, 200, 90},
                         std::tuple{130, 70, 150}, std::tuple{20, 17, 31}}) {
    const Mat x = random_mat(M, K, 6), w = random_mat(K, N, 7), wt = random_mat(N, K, 8);
    const Vec b = random_mat(1, N, 9);
    Mat want;
    linear(x, w, b, want);
    EXPECT_LE(rel(gl.linear(x, w, b), want), kTol) << label << M << "x" << K << "x" << N << " with bias";
    linear(x, w, Vec(), want);
    EXPECT_LE(rel(gl.linear(x, w, Vec()), want), kTol) << label << M << "x" << K << "x" << N;
    want = x * wt.transpose();
    EXPECT_LE(rel(gl.linear_bt(x, wt), want), kTol) << label << M << "x" << K << "x" << N << " transposed";
  }
}

TEST(GpuOps, MatrixProductsOfOddSizes) {
  OPS();
  check_products(*gl, "");
}

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& v) : name(n) { setenv(n, v.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

TEST(GpuOps, MatrixProductsWithHardwareAndSoftwareTuning) {
  OPS();  // (whether a context can be made at all)
  for (const char* tuning : {"hardware", "software"}) {  // tile choices differ
    ScopedEnv env("ATTNVIZ_GL_TUNING", tuning);
    GlHostOps fresh;
    check_products(fresh, std::string(tuning) + ": ");
  }
}

TEST(GpuOps, GeluAndSwiglu) {
  OPS();
  Mat x = random_mat(9, 37, 10, 3.f);
  x(0, 0) = 40.f, x(0, 1) = -40.f, x(0, 2) = 0.f, x(0, 3) = 1e-4f;  // tanh must not overflow
  Mat want = x;
  gelu_tanh_inplace(want);
  EXPECT_LE(rel(gl->gelu(x), want), kTol);
  Mat g = random_mat(9, 37, 11, 3.f), u = random_mat(9, 37, 12);
  g(0, 0) = -100.f, g(0, 1) = 100.f;
  want = g;
  swiglu_inplace(want, u);
  EXPECT_LE(rel(gl->swiglu(g, u), want), kTol);
}

TEST(GpuOps, Rope) {
  OPS();
  for (auto [heads, d, pos0] : {std::tuple{3, 10, 0}, std::tuple{4, 16, 37}, std::tuple{1, 2, 1000}}) {
    const Mat x = random_mat(6, heads * d, 13);
    Mat want = x;
    rope_inplace(want, heads, d, pos0, rope_inv_freq(10000.f, d));
    EXPECT_LE(rel(gl->rope(x, heads, d, pos0, rope_inv_freq(10000.f, d)), want), kTol) << heads << " heads, d " << d << ", pos " << pos0;
  }
}

// Attention of one layer (GQA) computed plainly on the CPU: the full q·kᵀ, the masked and
// scaled row, softmax (core/engine/ops.h), probs · v.
LayerTrace cpu_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int H = static_cast<int>(q.dim(0)), T = static_cast<int>(q.dim(1)), d = static_cast<int>(q.dim(2));
  const int G = H / static_cast<int>(k.dim(0));
  LayerTrace lt;
  for (Tensor* t : {&lt.scores, &lt.probs}) t->resize_keep({H, T, T}, 0, 0);
  lt.out.resize_keep({H, T, d}, 0, 0);
  lt.scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<float> masked(static_cast<size_t>(T));
  for (int h = 0; h < H; ++h) {
    Eigen::Map<const Mat> Q(q.head(h), T, d), K(k.head(h / G), T, d), V(v.head(h / G), T, d);
    Eigen::Map<Mat> S(lt.scores.head(h), T, T), P(lt.probs.head(h), T, T), O(lt.out.head(h), T, d);
    S = Q * K.transpose();
    for (int i = 0; i < T; ++i) {
      for (int j = 0; j < T; ++j) masked[j] = j <= i ? S(i, j) * lt.scale : -INFINITY;
      softmax_causal_row(masked.data(), T, i, &P(i, 0));
    }
    O = P * V;
  }
  return lt;
}

Tensor random_tensor(int a, int b, int c, unsigned seed) {
  const Mat m = random_mat(a * b, c, seed);
  return Tensor{{a, b, c}, FloatBuf(m.data(), m.data() + m.size())};
}

TEST(GpuOps, AttentionScoresMaskSoftmaxAndWeightedValues) {
  OPS();
  // H = 6 query heads over KV = 2 (GQA groups of 3), d = 10, T = 13; then only rows ≥ 7.
  const Tensor q = random_tensor(6, 13, 10, 14), k = random_tensor(2, 13, 10, 15), v = random_tensor(2, 13, 10, 16);
  const LayerTrace want = cpu_attention(q, k, v);
  for (int p : {0, 7, 12}) {
    LayerTrace got;
    for (Tensor* t : {&got.scores, &got.probs}) t->resize_keep({6, 13, 13}, 0, 0);
    got.out.resize_keep({6, 13, 10}, 0, 0);
    // rows [0, p) × columns [0, p) are the caller's (kept from before): copy them in.
    for (Stage st : {Stage::Scores, Stage::Probs, Stage::Out}) {
      const int s = static_cast<int>(st);
      const Tensor& w = *want.stored(st);
      Tensor& g = *got.stored(st);
      const int cols = static_cast<int>(w.dim(2));
      for (int h = 0; h < 6; ++h)
        for (int i = 0; i < p; ++i)
          for (int j = 0; j < std::min(p, cols); ++j)
            g.head(h)[i * cols + j] = w.head(h)[i * cols + j];
      if (s == static_cast<int>(Stage::Out))
        for (int h = 0; h < 6; ++h)
          for (int i = 0; i < p; ++i)
            for (int j = 0; j < cols; ++j) g.head(h)[i * cols + j] = w.head(h)[i * cols + j];
    }
    gl->attention(q, k, v, p, got);
    for (int s = static_cast<int>(Stage::Scores); s <= static_cast<int>(Stage::Out); ++s)
      EXPECT_LE(test::rel_error(got.materialize(static_cast<Stage>(s)), want.materialize(static_cast<Stage>(s))), kTol)
          << stage_name(static_cast<Stage>(s)) << " from row " << p;
  }
}

// ---- the newer architectures' pieces against core/engine/ops.h ----------------------------

// One layer's attention through the CPU's own kernel (attention_block: scale, soft-cap,
// window) for every row of every head, then probs · v.
LayerTrace cpu_attention_rule(const Tensor& q, const Tensor& k, const Tensor& v, const AttnRule& rule) {
  const int H = static_cast<int>(q.dim(0)), T = static_cast<int>(q.dim(1)), d = static_cast<int>(q.dim(2));
  const int G = H / static_cast<int>(k.dim(0));
  LayerTrace lt;
  for (Tensor* t : {&lt.scores, &lt.probs}) t->resize_keep({H, T, T}, 0, 0);
  lt.out.resize_keep({H, T, d}, 0, 0);
  lt.scale = rule.scale, lt.softcap = rule.softcap, lt.window = rule.window;
  for (int h = 0; h < H; ++h) {
    Eigen::Map<const Mat> Q(q.head(h), T, d), K(k.head(h / G), T, d), V(v.head(h / G), T, d);
    Eigen::Map<Mat> S(lt.scores.head(h), T, T), P(lt.probs.head(h), T, T), O(lt.out.head(h), T, d);
    const Mat Kt = keys_transposed(K);  // (d, T)
    attention_block(Q, Kt, rule, 0, S, P);
    O = P * V;
  }
  return lt;
}

// A trace holding `want`'s rows [0, p) (columns [0, p) of the matrices), as the engine
// hands it to a pass that computes from row p.
LayerTrace kept_rows(const LayerTrace& want, int p) {
  const int64_t H = want.scores.dim(0), T = want.scores.dim(1), d = want.out.dim(2);
  LayerTrace got;
  for (Tensor* t : {&got.scores, &got.probs}) t->resize_keep({H, T, T}, 0, 0);
  got.out.resize_keep({H, T, d}, 0, 0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < p; ++i) {
      for (int64_t j = 0; j < p; ++j) {
        got.scores.at(h, i, j) = want.scores.at(h, i, j);
        got.probs.at(h, i, j) = want.probs.at(h, i, j);
      }
      for (int64_t j = 0; j < d; ++j) got.out.at(h, i, j) = want.out.at(h, i, j);
    }
  return got;
}

TEST(GpuOps, AttentionWithWindowSoftcapAndScaleMatchesAttentionBlock) {
  OPS();
  // H = 6 over KV = 2, d = 10, T = 13. Scores of unit normals over d = 10 are ~N(0, 10):
  // a soft-cap of 2 after a scale of 0.5 changes most of them. Windows 1 (only the query
  // itself), 4, T (= global) and T + 1; rows from 0, 7 and 12 (an append).
  const Tensor q = random_tensor(6, 13, 10, 24), k = random_tensor(2, 13, 10, 25), v = random_tensor(2, 13, 10, 26);
  const std::vector<AttnRule> rules = {{0.5f, 0.f, 1},  {0.5f, 0.f, 4}, {0.5f, 0.f, 13},
                                       {0.5f, 0.f, 14}, {0.5f, 2.f, 0}, {0.3f, 2.f, 5}};
  const LayerTrace plain = cpu_attention_rule(q, k, v, AttnRule{0.5f, 0.f, 0});
  for (const AttnRule& rule : rules) {
    const LayerTrace want = cpu_attention_rule(q, k, v, rule);
    if ((rule.window > 0 && rule.window < 13) || rule.softcap > 0) {  // the rule matters here: a GPU ignoring it fails
      EXPECT_GT(test::rel_error(want.probs, plain.probs), 1e-2) << rule.window << " " << rule.softcap;
    }
    for (int p : {0, 7, 12}) {
      LayerTrace got = kept_rows(want, p);
      gl->attention(q, k, v, p, rule, got);
      EXPECT_EQ(got.scale, rule.scale);
      EXPECT_EQ(got.softcap, rule.softcap);
      EXPECT_EQ(got.window, rule.window);
      for (int s = static_cast<int>(Stage::Scores); s <= static_cast<int>(Stage::Out); ++s) {
        const Stage st = static_cast<Stage>(s);
        EXPECT_LE(test::rel_error(got.materialize(st), want.materialize(st)), kTol)
            << stage_name(st) << " from row " << p << ", window " << rule.window << ", softcap " << rule.softcap;
      }
    }
  }
}

TEST(GpuOps, QkNormPerHeadAndOverTheWholeProjection) {
  OPS();
  // (heads, d): per head (qwen3), whole rows (olmo2), and slices longer than a work group.
  for (auto [heads, d] : {std::pair{4, 12}, std::pair{1, 48}, std::pair{2, 130}}) {
    const Mat x = random_mat(5, heads * d, 27, 3.f);
    const Vec w = random_mat(1, d, 28);
    Mat want = x;
    rms_norm_heads(want, heads, d, w, 1e-6f);
    EXPECT_LE(rel(gl->rms_norm_heads(x, heads, d, w, 1e-6f), want), kTol) << heads << " × " << d;
  }
}

TEST(GpuOps, PartialRotaryWithAttentionFactor) {
  OPS();
  // (heads, d, rot, pos0, mscale): phi3's partial rotary, longrope's factor on cos and sin.
  for (auto [heads, d, rot, pos0, mscale] : {std::tuple{3, 16, 8, 5, 1.3f}, std::tuple{2, 12, 6, 40, 1.f},
                                              std::tuple{4, 16, 16, 0, 1.2f}}) {
    const Mat x = random_mat(6, heads * d, 29);
    const std::vector<double> inv_freq = rope_inv_freq(10000.f, rot);  // (rot/2)
    Mat want = x;
    rope_inplace(want, heads, d, pos0, inv_freq, mscale);
    const Mat got = gl->rope(x, heads, d, pos0, inv_freq, mscale);
    EXPECT_LE(rel(got, want), kTol) << heads << " heads, d " << d << ", rot " << rot;
    for (int h = 0; h < heads; ++h)  // the dims past rot are untouched, bit for bit
      EXPECT_EQ(got.middleCols(h * d + rot, d - rot), x.middleCols(h * d + rot, d - rot)) << "head " << h;
  }
}

TEST(GpuOps, GegluSoftcapScaledEmbeddingAndPostNorm) {
  OPS();
  Mat g = random_mat(9, 37, 30, 3.f), u = random_mat(9, 37, 31);
  g(0, 0) = -40.f, g(0, 1) = 40.f;
  Mat want = g;
  gelu_tanh_inplace(want);
  want.array() *= u.array();  // GeGLU: gelu_tanh(gate) ⊙ up
  EXPECT_LE(rel(gl->swiglu(g, u, true), want), kTol);

  Mat x = random_mat(4, 50, 32, 10.f);
  x(0, 0) = 1e4f, x(0, 1) = -1e4f, x(0, 2) = 1e-3f;
  want = x.unaryExpr([](float e) { return softcap_value(e, 3.f); });
  EXPECT_LE(rel(gl->softcap(x, 3.f), want), kTol);

  const Mat tok = random_mat(11, 20, 33);
  const std::vector<int> ids = {3, 0, 10, 3};
  want.resize(4, 20);
  for (int r = 0; r < 4; ++r) want.row(r) = tok.row(ids[static_cast<size_t>(r)]) * 2.5f;
  EXPECT_LE(rel(gl->embed(tok, Mat(), ids, 0, 2.5f), want), 0.0);

  const Mat a = random_mat(5, 70, 34, 2.f), y = random_mat(5, 70, 35);
  const Vec w = random_mat(1, 70, 36);
  rms_norm(a, w, 1e-6f, want);
  want += y;  // a post-norm added to the residual stream
  EXPECT_LE(rel(gl->rms_norm_add(a, w, 1e-6f, y), want), kTol);
}

// ---- the whole forward against the CPU backend ----------------------------------------

std::unique_ptr<Backend> gpu_backend(std::string* why) {
  try {
    return make_gl_backend();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

using test::random_ids;

// The models: small, with odd sizes where the architecture allows.
ModelConfig gpt2_odd() {  // C = 30, 3 heads of d = 10, vocab 23
  return test::small_config("gpt2", 2, 30, 3, 3, 23, 24);
}
ModelConfig llama_gqa() {  // 6 query heads over 2 KV heads, d = 6, vocab 23
  return test::small_config("llama", 2, 36, 6, 2, 23, 24);
}
ModelConfig qwen_mqa_odd() {  // 3 query heads over 1 KV head, d = 10, q/k/v biases, untied
  ModelConfig c = test::small_config("llama", 2, 30, 3, 1, 29, 24);
  c.model_type = "qwen2";
  c.qkv_bias = true;
  c.tie_embeddings = false;
  c.rope_theta = 5000.f;
  return c;
}

// The newer families, from their own config.json keys (as tests/reference/arch_parity.py
// writes them), small: every feature the GPU backend must honour is on in one of them.
ModelConfig from_json(const char* text) { return parse_config(nlohmann::json::parse(text), "test config"); }
ModelConfig qwen3_window() {  // per-head QK-norm, head_dim 10 (H·d ≠ C), layers 1, 2 local (W 5)
  return from_json(R"({"model_type": "qwen3", "vocab_size": 29, "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 10,
    "max_position_embeddings": 24, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "use_sliding_window": true, "sliding_window": 5, "max_window_layers": 1})");
}
ModelConfig gemma2_softcap() {  // local/global, soft-caps, sandwich norms, GeGLU, √C embeddings
  return from_json(R"({"model_type": "gemma2", "vocab_size": 31, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "max_position_embeddings": 24, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "query_pre_attn_scalar": 12,
    "sliding_window": 4, "attn_logit_softcapping": 3.0, "final_logit_softcapping": 2.0,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})");
}
ModelConfig gemma3_local_global() {  // local RoPE base 50, global linear scaling, MQA
  return from_json(R"({"model_type": "gemma3_text", "vocab_size": 37, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
    "max_position_embeddings": 24, "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 8, "sliding_window": 3,
    "sliding_window_pattern": 3, "rope_theta": 10000.0, "rope_local_base_freq": 50.0,
    "rope_scaling": {"rope_type": "linear", "factor": 4.0}, "hidden_activation": "gelu_pytorch_tanh",
    "tie_word_embeddings": true})");
}
ModelConfig phi3_longrope() {  // partial rotary (6 of 12), longrope short ≤ 16 < long, window 6
  return from_json(R"({"model_type": "phi3", "vocab_size": 41, "hidden_size": 48, "intermediate_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "original_max_position_embeddings": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "partial_rotary_factor": 0.5, "sliding_window": 6, "tie_word_embeddings": false,
    "rope_scaling": {"type": "longrope", "short_factor": [1.5, 2.0, 1.2], "long_factor": [3.0, 5.0, 8.0]}})");
}
ModelConfig smollm3_no_rope() {  // layer 3 without RoPE
  return from_json(R"({"model_type": "smollm3", "vocab_size": 29, "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 5000.0, "tie_word_embeddings": true})");
}
ModelConfig olmo2_post_norm() {  // QK-norm over the whole projections, norms after the branches only
  return from_json(R"({"model_type": "olmo2", "vocab_size": 29, "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "tie_word_embeddings": false})");
}
ModelConfig granite_multipliers() {  // attention, embedding, residual multipliers, logits_scaling
  return from_json(R"({"model_type": "granite", "vocab_size": 29, "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "attention_multiplier": 0.2, "embedding_multiplier": 6.0,
    "residual_multiplier": 0.3, "logits_scaling": 4.0, "tie_word_embeddings": true})");
}

// The hybrids: Qwen3.5 (3 gated-delta-rule layers, then a gated full layer with partial
// RoPE and (1 + w) QK-norm) and LFM2 (short convolutions with biases beside attention).
ModelConfig qwen35_hybrid() {
  ModelConfig c = test::small_qwen35();
  c.n_ctx = 24;
  return c;
}
ModelConfig lfm2_conv() {
  ModelConfig c = test::small_lfm2();
  c.n_ctx = 24;
  return c;
}

// Gemma 4 (as tests/reference/gemma4_parity.py's cases): local layers of head size 8 and
// global ones of 16 with proportional RoPE (a quarter of the pairs turn), V-norm, per-layer
// embeddings, layer scalars, soft-capped logits; `shared`: the last two layers read layer
// 1's (local) and 2's (global) K and V with double-wide MLPs; `k_eq_v`: V = K with one KV
// head on the global layers (the last layer, forced global); `experts`: with k_eq_v, 4 experts
// beside each dense MLP of which each token takes 2 (the 26B-A4B's block; on the host).
ModelConfig gemma4_small(bool k_eq_v, int ctx, bool experts = false) {
  nlohmann::json j = nlohmann::json::parse(R"({"model_type": "gemma4_text", "vocab_size": 61, "hidden_size": 32,
    "intermediate_size": 24, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "global_head_dim": 16,
    "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                           "rope_theta": 1000000.0}},
    "sliding_window": 3, "final_logit_softcapping": 30.0, "vocab_size_per_layer_input": 61})");
  j["max_position_embeddings"] = ctx;
  if (k_eq_v) {
    j.update({{"num_hidden_layers", 3}, {"hidden_size", 48}, {"intermediate_size", 40}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"sliding_window", 4}, {"attention_k_eq_v", true},
              {"num_global_key_value_heads", 1}, {"hidden_size_per_layer_input", 0},
              {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention"}}});
  } else {
    j.update({{"num_hidden_layers", 5}, {"hidden_size_per_layer_input", 8}, {"num_kv_shared_layers", 2},
              {"use_double_wide_mlp", true},
              {"layer_types", {"sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                               "full_attention"}}});
  }
  if (experts)
    j.update({{"enable_moe_block", true}, {"num_experts", 4}, {"top_k_experts", 2}, {"moe_intermediate_size", 16}});
  return parse_config(j, "test config");
}
ModelConfig gemma4_shared() { return gemma4_small(false, 24); }
ModelConfig gemma4_experts() { return gemma4_small(true, 24, true); }
// GPT-OSS: a learned sink per head, 3-token windows beside a global layer, YaRN, q/k/v/o
// biases, and 5 experts of which each token takes 2 (run on the host by the GPU backend).
ModelConfig gpt_oss_sinks() {
  return from_json(R"({"model_type": "gpt_oss", "vocab_size": 29, "hidden_size": 32, "intermediate_size": 24,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "max_position_embeddings": 24, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "num_local_experts": 5, "num_experts_per_tok": 2, "sliding_window": 3,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
                     "original_max_position_embeddings": 8}})");
}
ModelConfig gemma4_k_eq_v() { return gemma4_small(true, 24); }

std::shared_ptr<const Model> model_for(const ModelConfig& c, const char* tag) {
  return load_model(test::make_model_dir(c, 1234, tag));
}

struct ForwardCase {
  const char* name;
  ModelConfig (*config)();
};
void PrintTo(const ForwardCase& c, std::ostream* os) { *os << c.name; }

// Each case gets the GPU backend (or skips / fails as REQUIRE_GPU says) and its model.
class GpuForward : public ::testing::TestWithParam<ForwardCase> {
 protected:
  void SetUp() override {
    std::string why;
    gpu = gpu_backend(&why);
    REQUIRE_GPU(gpu, why);
    model = model_for(GetParam().config(), GetParam().name);
    V = model->config.vocab_size;
  }
  std::unique_ptr<Backend> gpu;
  std::shared_ptr<const Model> model;
  int V = 0;  // vocabulary size of the model
};

TEST_P(GpuForward, MatchesTheCpuForLengthsOneToFull) {
  auto cpu = make_cpu_backend();
  for (int T : {1, 2, 17, model->config.n_ctx}) {
    const auto ids = random_ids(T, V, static_cast<unsigned>(T));
    Trace want, got;
    cpu->forward(*model, ids, 0, want);
    gpu->forward(*model, ids, 0, got);
    EXPECT_EQ(test::compare_traces(got, want, kTol), "") << GetParam().name << ", T = " << T;
    EXPECT_GE(gpu->last_device_ms(), 0.0);
  }
}

TEST_P(GpuForward, KvCacheAppendsAndEditsMatchAFullRecompute) {
  Engine engine(model, std::move(gpu));
  auto full = [&](const std::vector<int>& ids) {
    Trace t;
    make_cpu_backend()->forward(*model, ids, 0, t);
    return t;
  };
  std::vector<int> ids = random_ids(9, V, 3);
  EXPECT_EQ(test::compare_traces(engine.run(ids), full(ids), kTol), "") << "first run";
  for (int step = 0; step < 3; ++step) {  // typing: one token at a time
    ids.push_back((step * 7 + 2) % V);
    const Trace& t = engine.run(ids);
    EXPECT_EQ(engine.last_recomputed_from(), static_cast<int>(ids.size()) - 1);
    EXPECT_EQ(test::compare_traces(t, full(ids), kTol), "") << "append " << step;
  }
  ids[4] = (ids[4] + 1) % V;  // an edit in the middle: rows from 4 on
  EXPECT_EQ(test::compare_traces(engine.run(ids), full(ids), kTol), "") << "edit at 4";
  EXPECT_EQ(engine.last_recomputed_from(), 4);
  ids.resize(6);  // deleting the tail: the last row again
  EXPECT_EQ(test::compare_traces(engine.run(ids), full(ids), kTol), "") << "shortened";
  ids.insert(ids.end(), {1, 2, 3, 4, 5});  // pasting several tokens
  EXPECT_EQ(test::compare_traces(engine.run(ids), full(ids), kTol), "") << "pasted";
}

// Compact traces with the last row's logits only (Engine::Matrices::kRecompute and
// set_all_logits(false): what the GUI runs above 256 MB of matrices): the GPU backend keeps
// no (T, T) matrix and no (T, V) logits, and its summaries (row_stats and the thumbnails,
// computed from the probs rows it reads back) and row losses match the CPU backend's,
// through appends, an edit and a window past 64 tokens (the thumbnails' cells merge 2 × 2).
// Its kept traces (every row's logits) now carry the same summaries.
// The hybrids (Qwen3.5's gated delta rule, whose thumbnails pool |A|; LFM2's convolutions,
// which record none) as well as llama.
TEST(GpuForward, CompactTracesAndSummariesMatchTheCpuWhileTyping) {
  std::string why;
  auto gpu = gpu_backend(&why);
  REQUIRE_GPU(gpu, why);
  for (const ModelConfig& cfg : {test::small_config("llama", 2, 36, 6, 2, 23, 160), test::small_qwen35(), test::small_lfm2(),
                                 gemma4_small(false, 160)}) {
  SCOPED_TRACE(cfg.model_type);
  const auto model = model_for(cfg, ("compact-" + cfg.model_type).c_str());
  auto summaries_match = [](const Trace& a, const Trace& b) -> std::string {
    for (size_t l = 0; l < a.layers.size(); ++l) {
      const LayerTrace &x = a.layers[l], &y = b.layers[l];
      if (x.thumb_bucket != y.thumb_bucket) return "layer " + std::to_string(l) + ": thumbnail buckets differ";
      const double et = test::rel_error(x.thumbs, y.thumbs);
      if (et < 0 || et > kTol) return "layer " + std::to_string(l) + ": thumbs " + std::to_string(et);
      // row_stats (H, T, kRowStats), rows ld() apart (room to grow may differ); NaN where a
      // row has no induction target, in both.
      if (x.row_stats.shape != y.row_stats.shape) return "layer " + std::to_string(l) + ": row_stats shapes differ";
      if (x.row_stats.shape.empty()) continue;  // a linear or convolution layer: none
      for (int64_t h = 0; h < x.row_stats.dim(0); ++h)
        for (int64_t i = 0; i < x.row_stats.dim(1); ++i)
          for (int k = 0; k < kRowStats; ++k) {
            const float u = x.row_stats.head(h)[i * x.row_stats.ld() + k], w = y.row_stats.head(h)[i * y.row_stats.ld() + k];
            const bool same = std::isnan(u) ? std::isnan(w) : std::abs(u - w) <= kTol * std::max(1.f, std::abs(w));
            if (!same)
              return "layer " + std::to_string(l) + ": row_stats[" + std::to_string(h) + "][" + std::to_string(i) + "][" +
                     std::to_string(k) + "] " + std::to_string(u) + " vs " + std::to_string(w);
          }
    }
    return "";
  };
  for (Engine::Matrices mode : {Engine::Matrices::kRecompute, Engine::Matrices::kKeep}) {
    const bool compact = mode == Engine::Matrices::kRecompute;
    Engine g(model, make_gl_backend()), c(model, make_cpu_backend());
    g.set_matrices(mode);
    c.set_matrices(mode);
    g.set_all_logits(!compact);
    c.set_all_logits(!compact);
    std::vector<int> ids = random_ids(60, cfg.vocab_size, 8);
    auto check = [&](const std::string& what) {
      const Trace& tg = g.run(ids);
      const Trace& tc = c.run(ids);
      EXPECT_EQ(tg.compact, compact) << what;
      for (const LayerTrace& lt : tg.layers) {
        if (lt.mixer == Mixer::ShortConv) continue;  // records no attention
        EXPECT_EQ(lt.compact, compact) << what;
        const Tensor& matrix = lt.mixer == Mixer::Softmax ? lt.probs : lt.implicit;
        EXPECT_EQ(matrix.data.empty(), compact) << what;
        if (lt.mixer == Mixer::Softmax) EXPECT_FALSE(lt.row_stats.data.empty()) << what;
        else EXPECT_FALSE(lt.thumbs.data.empty()) << what;
      }
      EXPECT_EQ(test::compare_traces(tg, tc, kTol), "") << what;  // with the logits held: every row, or the last
      EXPECT_EQ(summaries_match(tg, tc), "") << what;
      EXPECT_EQ(tg.logits_from, compact ? static_cast<int>(ids.size()) - 1 : 0) << what;
      ASSERT_EQ(tg.row_loss.size(), tc.row_loss.size()) << what;
      EXPECT_EQ(tg.row_loss.size(), compact ? ids.size() - 1 : 0) << what;
      for (size_t i = 0; i < tg.row_loss.size(); ++i)
        EXPECT_NEAR(tg.row_loss[i], tc.row_loss[i], 1e-4 * std::max(1.f, std::abs(tc.row_loss[i]))) << what << ", row " << i;
    };
    check(compact ? "compact, 60 tokens" : "kept, 60 tokens");
    for (int step = 0; step < 6; ++step) {  // 61 … 66: past 64 the thumbnail cells merge
      ids.push_back((step * 5 + 1) % cfg.vocab_size);
      check("append to " + std::to_string(ids.size()));
    }
    ids[30] = (ids[30] + 1) % cfg.vocab_size;
    check("edit at 30");
  }
  }
}

TEST_P(GpuForward, BlockSizeWindowSlides) {
  Engine g(model, std::move(gpu)), c(model, make_cpu_backend());
  g.set_block_size(8);
  c.set_block_size(8);
  std::vector<int> ids = random_ids(6, V, 5);
  for (int step = 0; step < 5; ++step) {  // 6, 7, 8 tokens fit; 9, 10 slide the window
    const Trace& tg = g.run(ids);
    const Trace& tc = c.run(ids);
    EXPECT_EQ(tg.dropped, tc.dropped);
    EXPECT_EQ(test::compare_traces(tg, tc, kTol), "") << ids.size() << " tokens";
    ids.push_back(step + 1);
  }
}

TEST_P(GpuForward, CacheThatDisagreesWithTheTraceIsReloaded) {
  // The trace handed in holds rows of a different sequence than the device cache: the
  // backend must notice (row hashes) and use the trace's keys and values.
  auto cpu = make_cpu_backend();
  const auto a = random_ids(10, V, 21), b = random_ids(10, V, 22);
  Trace ta, tb;
  gpu->forward(*model, a, 0, ta);  // device cache now holds sequence a
  cpu->forward(*model, b, 0, tb);  // the trace holds sequence b (from the CPU)
  std::vector<int> b2 = b;
  b2.push_back(1), b2.push_back(2);
  Trace want = tb;
  cpu->forward(*model, b2, 10, want);
  gpu->forward(*model, b2, 10, tb);
  EXPECT_EQ(test::compare_traces(tb, want, kTol), "");
}

TEST_P(GpuForward, AblatedHeadsMatchTheCpuWhileTyping) {
  // Both modes; `mean` recomputes the whole window on every run, `zero` stays incremental.
  const int L = model->config.n_layer, H = model->config.n_head;
  const std::vector<std::pair<int, int>> heads = {{0, H - 1}, {L - 1, 0}};
  Engine g(model, std::move(gpu));
  if (model->config.any_linear()) {  // a hybrid: refused by both backends, as a usage error
    g.set_ablation(Ablation{AblationMode::Zero, heads});
    Engine c(model, make_cpu_backend());
    c.set_ablation(Ablation{AblationMode::Zero, heads});
    const auto ids = random_ids(7, V, 11);
    EXPECT_THROW(g.run(ids), Error);
    EXPECT_THROW(c.run(ids), Error);
    return;
  }
  for (AblationMode mode : {AblationMode::Zero, AblationMode::Mean}) {
    const Ablation a{mode, heads};
    g.set_ablation(a);
    std::vector<int> ids = random_ids(7, V, 11);
    for (int step = 0; step < 3; ++step) {
      Engine c(model, make_cpu_backend());
      c.set_ablation(a);
      EXPECT_EQ(test::compare_traces(g.run(ids), c.run(ids), kTol), "") << ablation_mode_name(mode) << ", step " << step;
      ids.push_back((step * 5 + 1) % V);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RandomModels, GpuForward,
                         ::testing::Values(ForwardCase{"gpt2_odd", gpt2_odd}, ForwardCase{"llama_gqa", llama_gqa},
                                           ForwardCase{"qwen2_mqa_odd", qwen_mqa_odd},
                                           ForwardCase{"qwen3_window", qwen3_window},
                                           ForwardCase{"gemma2_softcap", gemma2_softcap},
                                           ForwardCase{"gemma3_local_global", gemma3_local_global},
                                           ForwardCase{"phi3_longrope", phi3_longrope},
                                           ForwardCase{"smollm3_no_rope", smollm3_no_rope},
                                           ForwardCase{"olmo2_post_norm", olmo2_post_norm},
                                           ForwardCase{"granite_multipliers", granite_multipliers},
                                           ForwardCase{"qwen35_hybrid", qwen35_hybrid},
                                           ForwardCase{"lfm2_conv", lfm2_conv},
                                           ForwardCase{"gemma4_shared", gemma4_shared},
                                           ForwardCase{"gemma4_k_eq_v", gemma4_k_eq_v},
                                           ForwardCase{"gemma4_experts", gemma4_experts},
                                           ForwardCase{"gpt_oss_sinks", gpt_oss_sinks}),
                         [](const auto& info) { return std::string(info.param.name); });

// The hybrids' memory on the GPU: typing past the memory's snapshot at kStateEvery (256)
// rows, then edits after, at and before it (the GPU continues from the trace's snapshot
// replayed on the host) and one at the start, each trace against a fresh CPU pass.
TEST(GpuForward, HybridsTypedPastTheMemorysSnapshotMatchTheCpu) {
  std::string why;
  auto probe = gpu_backend(&why);
  REQUIRE_GPU(probe, why);
  for (const ModelConfig& cfg : {test::small_qwen35(), test::small_lfm2()}) {
    SCOPED_TRACE(cfg.model_type);
    const auto model = model_for(cfg, ("snap-" + cfg.model_type).c_str());
    Engine g(model, make_gl_backend());
    std::vector<int> ids = random_ids(250, cfg.vocab_size, 4);
    auto check = [&](const std::string& what, int from) {
      Trace want;
      make_cpu_backend()->forward(*model, ids, 0, want);
      EXPECT_EQ(test::compare_traces(g.run(ids), want, kTol), "") << what;
      EXPECT_EQ(g.last_recomputed_from(), from) << what;
    };
    check("250 tokens", 0);
    for (int i = 250; i < 258; ++i) {
      ids.push_back((i * 7 + 3) % cfg.vocab_size);
      check("typed " + std::to_string(i + 1), i);
    }
    for (int at : {257, 256, 255, 100, 0}) {
      ids[static_cast<size_t>(at)] = (ids[static_cast<size_t>(at)] + 1) % cfg.vocab_size;
      check("edit at " + std::to_string(at), at);
    }
    if (cfg.model_type != "lfm2") {
      const LayerTrace& lt = g.trace().layers[0];  // a linear layer: one snapshot of Hv memories
      EXPECT_EQ(lt.state_snaps.size(), static_cast<size_t>(cfg.linear.v_heads * cfg.linear.k_dim * cfg.linear.v_dim));
      EXPECT_EQ(lt.state_rows, 258);
    }
  }
}

TEST(GpuForward, TheTestModelsHaveTheFeaturesTheyStandFor) {
  // Guards the cases above: a config key misread would quietly test plain llama.
  EXPECT_EQ(qwen3_window().qk_norm, QkNorm::PerHead);
  EXPECT_EQ(qwen3_window().layer(1).window, 5);
  const ModelConfig g2 = gemma2_softcap();
  EXPECT_GT(g2.layer(0).softcap, 0.f);
  EXPECT_GT(g2.layer(0).window, 0);
  EXPECT_EQ(g2.layer(1).window, 0);
  EXPECT_GT(g2.final_softcap, 0.f);
  EXPECT_EQ(g2.norm_place, NormPlace::Sandwich);
  EXPECT_EQ(g2.mlp, MlpKind::GeGLU);
  EXPECT_NE(g2.emb_scale, 1.f);
  const ModelConfig g3 = gemma3_local_global();
  EXPECT_NE(g3.layer(0).rope_theta, g3.layer(2).rope_theta);
  EXPECT_EQ(g3.layer(2).window, 0);
  const ModelConfig phi = phi3_longrope();
  EXPECT_EQ(phi.rotary(), 6);
  EXPECT_TRUE(rope_changes(phi, 16, 17));
  EXPECT_NE(phi.layer(0).rope_scaling.mscale, 1.f);
  EXPECT_FALSE(smollm3_no_rope().layer(3).rope);
  EXPECT_EQ(olmo2_post_norm().qk_norm, QkNorm::Whole);
  EXPECT_EQ(olmo2_post_norm().norm_place, NormPlace::Post);
  const ModelConfig gr = granite_multipliers();
  EXPECT_NE(gr.residual_scale, 1.f);
  EXPECT_NE(gr.logit_scale, 1.f);
  EXPECT_NE(gr.emb_scale, 1.f);
  EXPECT_FLOAT_EQ(gr.layer(0).scale, 0.2f);
  const ModelConfig q35 = qwen35_hybrid();
  EXPECT_EQ(q35.layer(0).mixer, Mixer::GatedDeltaNet);
  EXPECT_EQ(q35.layer(3).mixer, Mixer::Softmax);
  EXPECT_TRUE(q35.attn_gate);
  EXPECT_GT(q35.linear.group(), 1);
  EXPECT_LT(q35.rotary(), q35.head_size);
  const ModelConfig lfm = lfm2_conv();
  EXPECT_EQ(lfm.layer(0).mixer, Mixer::ShortConv);
  EXPECT_EQ(lfm.layer(2).mixer, Mixer::Softmax);
  EXPECT_TRUE(lfm.short_conv_bias);
  const ModelConfig g4 = gemma4_shared();
  EXPECT_GT(g4.ple_dim, 0);
  EXPECT_TRUE(g4.v_norm);
  EXPECT_NE(g4.head_size_at(0), g4.head_size_at(2));
  EXPECT_EQ(g4.layer(3).kv_source, 1);
  EXPECT_EQ(g4.layer(4).kv_source, 2);
  EXPECT_EQ(g4.inner_at(4), 2 * g4.inner_at(0));
  EXPECT_TRUE(gemma4_experts().experts.gemma);
  EXPECT_EQ(gemma4_experts().experts.count, 4);
  const ModelConfig oss = gpt_oss_sinks();
  EXPECT_TRUE(oss.attn_sinks);
  EXPECT_EQ(oss.experts.count, 5);
  EXPECT_EQ(oss.layer(0).window, 3);
  EXPECT_TRUE(oss.qkv_bias);
  const ModelConfig kv = gemma4_k_eq_v();
  EXPECT_TRUE(kv.layer(2).v_from_k);
  EXPECT_NE(kv.kv_heads_at(2), kv.kv_heads_at(0));
}

TEST(GpuForward, LongropeCrossingItsOriginalContextRecomputesEveryRow) {
  // Typing across original_max_position (16): longrope's factors change with T, so the
  // cached keys are wrong and the backend must compute every row again, as the CPU does.
  std::string why;
  auto gpu = gpu_backend(&why);
  REQUIRE_GPU(gpu, why);
  const auto model = model_for(phi3_longrope(), "longrope");
  Engine g(model, std::move(gpu));
  std::vector<int> ids = random_ids(14, model->config.vocab_size, 40);
  for (int step = 0; step < 5; ++step) {  // 14 … 18 tokens
    Trace want;
    make_cpu_backend()->forward(*model, ids, 0, want);
    EXPECT_EQ(test::compare_traces(g.run(ids), want, kTol), "") << ids.size() << " tokens";
    ids.push_back((step * 3 + 1) % model->config.vocab_size);
  }
}

TEST(GpuForward, TwoModelsThroughOneBackend) {
  std::string why;
  auto gpu = gpu_backend(&why);
  REQUIRE_GPU(gpu, why);
  const auto m1 = model_for(gpt2_odd(), "two1"), m2 = model_for(llama_gqa(), "two2");
  auto cpu = make_cpu_backend();
  for (const auto& m : {m1, m2, m1}) {
    const auto ids = random_ids(5, m->config.vocab_size, 9);
    Trace want, got;
    cpu->forward(*m, ids, 0, want);
    gpu->forward(*m, ids, 0, got);
    EXPECT_EQ(test::compare_traces(got, want, kTol), "") << m->config.model_type;
  }
}

TEST(GpuForward, RunsFromWhicheverThreadCallsIt) {
  // The GUI calls the engine from a worker thread. The context must be current only
  // during forward(): while thread A is still alive, the main thread runs, then A again.
  std::string why;
  auto gpu = gpu_backend(&why);
  REQUIRE_GPU(gpu, why);
  const auto model = model_for(llama_gqa(), "threads");
  const auto ids = random_ids(7, model->config.vocab_size, 4);
  Trace want;
  make_cpu_backend()->forward(*model, ids, 0, want);
  std::promise<void> a_done, main_done;
  std::string a_result1, a_result2;
  // One forward on the calling thread, compared with the CPU's: "" or what differs.
  auto run = [&]() -> std::string {
    try {
      Trace t;
      gpu->forward(*model, ids, 0, t);
      return test::compare_traces(t, want, kTol);
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  std::thread a([&] {
    a_result1 = run();
    a_done.set_value();
    main_done.get_future().wait();
    a_result2 = run();
  });
  a_done.get_future().wait();
  EXPECT_EQ(run(), "") << "main thread";
  main_done.set_value();
  a.join();
  EXPECT_EQ(a_result1, "") << "worker thread, first";
  EXPECT_EQ(a_result2, "") << "worker thread, after the main thread";
}

// ---- weights kept compact on the device ------------------------------------------------
// Matrices stored as F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K go up as
// their own bytes and are decoded in the shaders (shaders/weights.glsl); other stored types
// (Q2_K, Q3_K) are decoded on the host.

// A stored matrix of `rows` rows of `cols` random values of `type` (its bytes in `bytes`).
StoredRows random_stored(GgmlType type, int rows, int cols, uint64_t seed, std::string& bytes) {
  bytes = random_tensor_bytes(type, static_cast<int64_t>(rows) * cols, seed);
  StoredRows s;
  s.type = type;
  s.data = reinterpret_cast<const uint8_t*>(bytes.data());
  s.rows = rows, s.cols = cols;
  s.row_bytes = stored_row_bytes(type, cols, "test");
  s.origin = "test";
  return s;
}

Mat decoded(const StoredRows& s) {  // (rows, cols) as dequantize() gives them
  Mat m(s.rows, s.cols);
  s.decode_rows(0, s.rows, m.data(), s.cols);
  return m;
}

const GgmlType kCompactTypes[] = {GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                  GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

TEST(GpuWeights, TheDeviceTypes) {
  for (GgmlType t : kCompactTypes) EXPECT_NE(gl_device_type(t), GlWType::F32) << ggml_type_info(t).name;
  for (GgmlType t : {GgmlType::F32, GgmlType::Q2_K, GgmlType::Q3_K})
    EXPECT_EQ(gl_device_type(t), GlWType::F32) << ggml_type_info(t).name;
}

TEST(GpuWeights, EveryValueDecodesAsDequantizeGivesIt) {
  OPS();
  // Through the embedding kernel (× 1): every row of the table read back as the device decodes it.
  for (GgmlType t : kCompactTypes) {
    for (int cols : {256, 512}) {
      std::string bytes;
      const StoredRows s = random_stored(t, 37, cols, 11 + cols, bytes);
      const Mat want = decoded(s);
      std::vector<int> ids(37);
      for (int i = 0; i < 37; ++i) ids[i] = (i * 5) % 37;
      const Mat got = gl->embed_stored(s, ids);
      ASSERT_EQ(got.rows(), 37);
      double worst = 0, scale = 0;
      for (int i = 0; i < 37; ++i)
        for (int c = 0; c < cols; ++c) {
          worst = std::max(worst, std::abs(static_cast<double>(got(i, c)) - want(ids[i], c)));
          scale = std::max(scale, std::abs(static_cast<double>(want(ids[i], c))));
        }
      // Exact, but for the types with a min (Q4_1, Q5_1: d·q + m; Q4_K, Q5_K: d·sc·q − dmin·m), which
      // the host compiler may fuse into one rounding (an FMA) where the shader rounds twice:
      // a last-bit difference at most.
      const bool with_min = t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
      const double allowed = with_min ? 1e-6 * scale : 0.0;
      EXPECT_LE(worst, allowed) << ggml_type_info(t).name << " cols " << cols;
      EXPECT_GT(scale, 0.0);
    }
  }
}

TEST(GpuWeights, ProductsWithStoredRowsMatchTheDecodedMatrix) {
  OPS();
  for (const char* tuning : {"hardware", "software"}) {  // gemv, and 16/64/128 tiles
    ScopedEnv env("ATTNVIZ_GL_TUNING", tuning);
    GlHostOps fresh;
    for (GgmlType t : kCompactTypes) {
      // K = 256, 512 (and for the float types widths that are no multiple of 16)
      std::vector<int> widths = {256, 512};
      if (t == GgmlType::F16 || t == GgmlType::BF16) widths.insert(widths.end(), {30, 600});
      for (int K : widths)
        for (auto [M, N] : {std::pair{1, 23}, std::pair{3, 70}, std::pair{9, 13}, std::pair{20, 40}, std::pair{70, 130},
                            std::pair{130, 150}}) {
          std::string bytes;
          const StoredRows s = random_stored(t, N, K, 100 + K + N, bytes);
          const Mat x = random_mat(M, K, 6);
          const Vec b = random_mat(1, N, 9);
          const float alpha = M == 3 ? 0.3f : 1.f;
          const Mat want = ((x * decoded(s).transpose()) * alpha).rowwise() + b;
          EXPECT_LE(rel(fresh.linear_stored(x, s, b, alpha), want), kTol)
              << tuning << " " << ggml_type_info(t).name << " " << M << "x" << K << "x" << N;
        }
    }
  }
}

TEST(GpuWeights, AStoredTypeWithoutAShaderIsDecodedOnTheHost) {
  OPS();
  std::string bytes;
  const StoredRows s = random_stored(GgmlType::Q3_K, 40, 256, 3, bytes);
  const Mat x = random_mat(5, 256, 4);
  EXPECT_LE(rel(gl->linear_stored(x, s), x * decoded(s).transpose()), kTol);
}

// Rows of 256 values so the K types fit: C = 256, H·d = 256, I = 512.
ModelConfig llama_256() {
  return from_json(R"({"model_type": "llama", "vocab_size": 40, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false})");
}
ModelConfig qwen2_256() {  // q/k/v biases, tied
  return from_json(R"({"model_type": "qwen2", "vocab_size": 40, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true})");
}
ModelConfig granite_256() {  // the residual multiplier: compact W_o and W_down get it as alpha
  return from_json(R"({"model_type": "granite", "vocab_size": 40, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 24,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "attention_multiplier": 0.2, "embedding_multiplier": 6.0,
    "residual_multiplier": 0.3, "logits_scaling": 4.0, "tie_word_embeddings": true})");
}

std::shared_ptr<const Model> gguf_model(const ModelConfig& c, GgmlType t, const std::string& tag,
                                        WeightsMode mode = WeightsMode::Stored) {
  static std::map<std::string, std::string> written;  // one file per (config, type)
  const std::string key = c.model_type + "-" + ggml_type_info(t).name + "-" + tag;
  if (!written.count(key)) written[key] = write_random_gguf(c, 77, test::temp_dir("gguf-" + key), t);
  LoadOptions o;
  o.weights = mode;
  return load_model(written[key], o);
}

// The GPU forward of `model` against the CPU's (the same stored weights): whole passes, then
// tokens appended one at a time through the KV cache.
void expect_parity(const std::shared_ptr<const Model>& model, const std::string& label) {
  std::string why;
  auto gpu = gpu_backend(&why);
  REQUIRE_GPU(gpu, why);
  ASSERT_TRUE(model->weights.any_stored()) << label;
  const int V = model->config.vocab_size;
  auto cpu = make_cpu_backend();
  for (int T : {1, 17}) {
    const auto ids = random_ids(T, V, static_cast<unsigned>(T));
    Trace want, got;
    cpu->forward(*model, ids, 0, want);
    gpu->forward(*model, ids, 0, got);
    EXPECT_EQ(test::compare_traces(got, want, kTol), "") << label << ", T = " << T;
  }
  Engine engine(model, std::move(gpu));
  std::vector<int> ids = random_ids(6, V, 3);
  engine.run(ids);
  for (int step = 0; step < 2; ++step) {
    ids.push_back((step * 7 + 2) % V);
    Trace want;
    cpu->forward(*model, ids, 0, want);
    EXPECT_EQ(test::compare_traces(engine.run(ids), want, kTol), "") << label << ", append " << step;
    EXPECT_EQ(engine.last_recomputed_from(), static_cast<int>(ids.size()) - 1);
  }
}

class GpuStoredForward : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GpuStoredForward, LlamaMatchesTheCpu) { expect_parity(gguf_model(llama_256(), GetParam(), "a"), "llama"); }
TEST_P(GpuStoredForward, Qwen2WithBiasesAndTiedTableMatchesTheCpu) {
  expect_parity(gguf_model(qwen2_256(), GetParam(), "a"), "qwen2");
}
TEST_P(GpuStoredForward, GraniteResidualMultiplierMatchesTheCpu) {
  expect_parity(gguf_model(granite_256(), GetParam(), "a"), "granite");
}

INSTANTIATE_TEST_SUITE_P(Types, GpuStoredForward,
                         ::testing::Values(GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                           return std::string(ggml_type_info(i.param).name);
                         });

TEST(GpuStoredForward, MixedTypesInOneProjectionMatchTheCpu) {
  // As in Q4_K_M files: v (and down) in Q6_K beside q, k (and gate, up) in Q4_K, so the fused
  // q|k|v runs as two products; and a v in a type decoded on the host (Q3_K) beside them.
  for (GgmlType other : {GgmlType::Q6_K, GgmlType::Q3_K}) {
    const auto base = gguf_model(llama_256(), GgmlType::Q4_K, "a");
    const auto second = gguf_model(llama_256(), other, "a");
    auto mixed = std::make_shared<Model>(*base);
    for (size_t l = 0; l < mixed->weights.layers.size(); ++l) {
      mixed->weights.layers[l].wv = second->weights.layers[l].wv;
      mixed->weights.layers[l].w_up = second->weights.layers[l].w_up;
    }
    mixed->files.insert(mixed->files.end(), second->files.begin(), second->files.end());
    expect_parity(mixed, std::string("Q4_K with ") + ggml_type_info(other).name);
  }
}

TEST(GpuStoredForward, TheDeviceHoldsFewerBytesThanFloat32) {
  std::string why;
  auto probe = gpu_backend(&why);
  REQUIRE_GPU(probe, why);
  EXPECT_TRUE(gl_device_weight_bytes(*make_cpu_backend()).empty());
  auto device_bytes = [](const std::shared_ptr<const Model>& m) {
    auto gpu = make_gl_backend();
    Trace t;
    gpu->forward(*m, {1, 2, 3}, 0, t);
    return std::pair{gl_device_weight_total(*gpu), gl_device_weight_bytes(*gpu)};
  };
  const auto [f32, f32_types] = device_bytes(gguf_model(llama_256(), GgmlType::Q4_K, "a", WeightsMode::F32));
  EXPECT_EQ(f32_types.size(), 1u);
  EXPECT_GT(f32, 4LL * 2 * (256 * 256 * 2 + 256 * 128 * 2 + 3 * 256 * 512));  // the layers' matrices alone
  // (vectors stay float32: a few KiB here)
  for (auto [t, most] :
       {std::pair{GgmlType::F16, 0.52}, std::pair{GgmlType::BF16, 0.52}, std::pair{GgmlType::Q8_0, 0.28},
        std::pair{GgmlType::Q4_0, 0.15}, std::pair{GgmlType::Q5_0, 0.18}, std::pair{GgmlType::Q4_K, 0.15},
        std::pair{GgmlType::Q5_K, 0.18}, std::pair{GgmlType::Q6_K, 0.21}}) {
    const auto [bytes, types] = device_bytes(gguf_model(llama_256(), t, "a"));
    EXPECT_LE(static_cast<double>(bytes), most * static_cast<double>(f32)) << ggml_type_info(t).name;
    EXPECT_GT(types.count(ggml_type_info(t).name), 0u) << ggml_type_info(t).name;
  }
}

// A measurement, not a check: the device bytes of the GGUF file $ATTNVIZ_TEST_GGUF held as
// stored and as float32, and the wall time of one pass of 8 tokens each way.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*DeviceBytesOfAFile'.
TEST(GpuStoredForward, DISABLED_DeviceBytesOfAFile) {
  const char* path = std::getenv("ATTNVIZ_TEST_GGUF");
  if (!path) GTEST_SKIP() << "set ATTNVIZ_TEST_GGUF";
  for (WeightsMode mode : {WeightsMode::Stored, WeightsMode::F32}) {
    LoadOptions o;
    o.weights = mode;
    const auto model = load_model(path, o);
    auto gpu = make_gl_backend();
    for (int rep = 0; rep < 2; ++rep) {
      Trace t;
      const auto t0 = std::chrono::steady_clock::now();
      gpu->forward(*model, random_ids(8, model->config.vocab_size, 1), 0, t);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s pass %d: %.0f ms (device %.0f ms)\n", mode == WeightsMode::Stored ? "stored" : "f32", rep, ms,
                  gpu->last_device_ms());
    }
    std::printf("%s: device weights %.1f MiB:", mode == WeightsMode::Stored ? "stored" : "f32",
                gl_device_weight_total(*gpu) / 1048576.0);
    for (const auto& [type, bytes] : gl_device_weight_bytes(*gpu))
      std::printf(" %s %.1f MiB", type.c_str(), bytes / 1048576.0);
    std::printf("\n");
  }
}

// ---- falling back to the CPU ----------------------------------------------------------

// Each case asks for the GPU backend under one condition and reads which backend it got
// and the note that says why.
class GpuFallback : public ::testing::Test {
 protected:
  // make_backend(name), with ATTNVIZ_SHADER_DIR = shader_dir when that is not empty.
  // Returns the backend's name; the note is left in `note`.
  std::string backend(const std::string& name = "gpu", const std::string& shader_dir = "") {
    std::unique_ptr<ScopedEnv> env;
    if (!shader_dir.empty()) env = std::make_unique<ScopedEnv>("ATTNVIZ_SHADER_DIR", shader_dir);
    note = "stale";
    return make_backend(name, &note)->name();
  }
  bool note_has(const std::string& part) const { return note.find(part) != std::string::npos; }
  std::string note;
};

// A shader with a type error in it, at a known line of the compiled text.
std::string broken(const std::string& text) {
  std::string s = text;
  const size_t at = s.find("void main() {");
  s.insert(at + 13, "\n  vec3 broken_here = 1.0 + ivec2(2);  // deliberate\n");
  return s;
}

// Writes the embedded shaders into a fresh folder, `broken_name` (if any) with a compile error.
std::string write_shader_dir(const std::string& tag, const std::string& broken_name) {
  const std::string dir = test::temp_dir(tag);
  ShaderSources embedded;
  for (const auto& name : embedded_shader_names()) {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f << (name == broken_name ? broken(embedded.file(name)) : embedded.file(name));
  }
  return dir;
}

TEST_F(GpuFallback, TooOldOpenGlGivesTheCpuWithANote) {
  ScopedEnv env("ATTNVIZ_GL_MIN_VERSION", "9.9");
  EXPECT_EQ(backend(), "cpu");
  EXPECT_TRUE(note_has("GPU backend unavailable")) << note;
  EXPECT_TRUE(note_has("running on the CPU")) << note;
  if (!allow_no_gpu()) {
    EXPECT_TRUE(note_has("9.9")) << note;
  }
}

TEST_F(GpuFallback, CpuRequestedHasNoNote) {
  EXPECT_EQ(backend("cpu"), "cpu");
  EXPECT_EQ(note, "");
}

TEST_F(GpuFallback, ShaderThatDoesNotCompileStopsTheBackendWithNumberedSource) {
  OPS();
  ShaderSources src;
  src.overrides["norm.comp"] = broken(src.file("norm.comp"));
  const std::string text = assemble_shader(src, "norm.comp");
  int line = 0;
  {
    std::istringstream in(text);
    std::string l;
    for (int n = 1; std::getline(in, l); ++n)
      if (l.find("broken_here") != std::string::npos) line = n;
  }
  ASSERT_GT(line, 0);
  GlBackendOptions o;
  o.shaders = src;
  try {
    make_gl_backend(o);
    FAIL() << "a backend with a broken shader was created";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("norm.comp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not compile"), std::string::npos) << msg;
    char numbered[32];
    std::snprintf(numbered, sizeof numbered, "%4d >| ", line);
    EXPECT_NE(msg.find(std::string(numbered) + "  vec3 broken_here"), std::string::npos)
        << "expected the numbered line '" << numbered << "…' in:\n" << msg;
  }
}

TEST_F(GpuFallback, BrokenShaderOnDiskFallsBackToTheCpu) {
  OPS();
  EXPECT_EQ(backend("gpu", write_shader_dir("shaders", "gemm.comp")), "cpu");
  EXPECT_TRUE(note_has("GPU backend unavailable: shader 'gemm.comp' does not compile")) << note;
  EXPECT_TRUE(note_has(" >|   vec3 broken_here")) << note;
}

TEST_F(GpuFallback, ShadersLoadFromDiskWhenAsked) {
  OPS();
  const std::string dir = write_shader_dir("shaders-ok", "");
  EXPECT_EQ(backend("gpu", dir), "gpu") << note;
  std::filesystem::remove(dir + "/rope.comp");
  EXPECT_EQ(backend("gpu", dir), "cpu");
  EXPECT_TRUE(note_has("rope.comp")) << note;
}

TEST(GpuShaders, IncludesAreSplicedAndNumbered) {
  ShaderSources src;
  src.overrides["a.comp"] = "#version 430\n#include \"b.glsl\"\nvoid main() {}\n";
  src.overrides["b.glsl"] = "float f() { return 1.0; }\n";
  const std::string text = assemble_shader(src, "a.comp", "#define X 1\n");
  EXPECT_EQ(text,
            "#version 430\n#define X 1\n// ---- begin b.glsl ----\nfloat f() { return 1.0; }\n"
            "// ---- end b.glsl ----\nvoid main() {}\n");
  EXPECT_EQ(numbered_source("a\nb\nc\n"), "   1  | a\n   2  | b\n   3  | c\n");
  EXPECT_EQ(log_line_numbers("0:12(5): error: x\n0:3(1): error: y\n"), (std::vector<int>{12, 3}));
  EXPECT_EQ(log_line_numbers("ERROR: 0:7: 'x' : undeclared"), (std::vector<int>{7}));
}

}  // namespace
}  // namespace attnviz
