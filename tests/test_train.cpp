// The trainer's gradients, optimizer and checkpoints.
//
// Gradient checks run the trainer's own code in double precision (core/train/backward.h is
// templated on the scalar) against central differences with eps = 1e-5:
//   rel = max_i |analytic_i − numeric_i| / max(max_i |numeric_i|, 1e-12)  ≤ 1e-6 per tensor.
// (Truncation error is O(eps²) ≈ 1e-10 and rounding error ≈ 1e-16/eps ≈ 1e-11, so 1e-6
// leaves a wide margin while a wrong formula gives ≥ 1e-2.) A negative test shows the
// check catches a 1% error in a single gradient entry.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include "core/train/backward.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/engine/head_scores.h"
#include "core/train/train.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using MatD = MatT<double>;
using VecD = VecT<double>;
constexpr double kEps = 1e-5, kTol = 1e-6;

std::mt19937_64& rng() {
  static std::mt19937_64 r(1234);
  return r;
}
MatD rnd(int r, int c, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  MatD m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = n(rng());
  return m;
}
VecD rndv(int n, double scale = 1.0, double mean = 0.0) {
  VecD v = rnd(1, n, scale);
  v.array() += mean;
  return v;
}

// Relative error of the analytic gradient `g` of loss() with respect to x[0..n), checking
// at most `max_checks` entries (evenly spread).
double fd_error(const std::function<double()>& loss, double* x, const double* g, Eigen::Index n,
                Eigen::Index max_checks = 400) {
  double err = 0, scale = 0;
  const Eigen::Index step = std::max<Eigen::Index>(1, n / max_checks);
  for (Eigen::Index i = 0; i < n; i += step) {
    const double save = x[i];
    x[i] = save + kEps;
    const double lp = loss();
    x[i] = save - kEps;
    const double lm = loss();
    x[i] = save;
    const double num = (lp - lm) / (2 * kEps);
    err = std::max(err, std::abs(num - g[i]));
    scale = std::max(scale, std::abs(num));
  }
  return err / std::max(scale, 1e-12);
}

// loss = Σ y ⊙ R for a fixed random R: ∂loss/∂y = R.
double dot(const MatD& y, const MatD& R) { return y.cwiseProduct(R).sum(); }

TEST(GradCheck, LayerNorm) {
  const int N = 5, C = 7;
  MatD x = rnd(N, C), R = rnd(N, C), y, dx;
  VecD w = rndv(C, 0.3, 1.0), b = rndv(C, 0.3);
  ColT<double> mean, rstd;
  auto loss = [&] {
    layer_norm_fwd(x, w, b, 1e-5, y, mean, rstd);
    return dot(y, R);
  };
  loss();
  VecD dw = VecD::Zero(C), db = VecD::Zero(C);
  layer_norm_bwd(R, x, w, mean, rstd, dx, dw, db);
  EXPECT_LT(fd_error(loss, x.data(), dx.data(), x.size()), kTol);
  EXPECT_LT(fd_error(loss, w.data(), dw.data(), w.size()), kTol);
  EXPECT_LT(fd_error(loss, b.data(), db.data(), b.size()), kTol);
}

TEST(GradCheck, RmsNorm) {
  const int N = 4, C = 9;
  MatD x = rnd(N, C), R = rnd(N, C), y, dx;
  VecD w = rndv(C, 0.3, 1.0);
  ColT<double> rstd;
  auto loss = [&] {
    rms_norm_fwd(x, w, 1e-6, y, rstd);
    return dot(y, R);
  };
  loss();
  VecD dw = VecD::Zero(C);
  rms_norm_bwd(R, x, w, rstd, dx, dw);
  EXPECT_LT(fd_error(loss, x.data(), dx.data(), x.size()), kTol);
  EXPECT_LT(fd_error(loss, w.data(), dw.data(), w.size()), kTol);
}

TEST(GradCheck, LinearWithBias) {
  MatD x = rnd(6, 5), W = rnd(5, 3), R = rnd(6, 3), y, dx;
  VecD b = rndv(3);
  auto loss = [&] {
    linear_fwd(x, W, b, y);
    return dot(y, R);
  };
  MatD dW = MatD::Zero(5, 3);
  VecD db = VecD::Zero(3);
  linear_bwd(R, x, W, &dx, false, dW, &db);
  EXPECT_LT(fd_error(loss, x.data(), dx.data(), x.size()), kTol);
  EXPECT_LT(fd_error(loss, W.data(), dW.data(), W.size()), kTol);
  EXPECT_LT(fd_error(loss, b.data(), db.data(), b.size()), kTol);
}

// GELU on random x with a random upstream gradient R: loss = Σ gelu(x) ⊙ R, dx from gelu_bwd.
struct GeluCase {
  MatD x = rnd(4, 6, 2.0), R = rnd(4, 6), y, dx;
  GeluCase() { gelu_bwd(R, x, dx); }
  double fd_error_of_dx() {
    return fd_error([this] { gelu_fwd(x, y); return dot(y, R); }, x.data(), dx.data(), x.size());
  }
};

TEST(GradCheck, GeluTanh) {
  GeluCase g;
  EXPECT_LT(g.fd_error_of_dx(), kTol);
}

TEST(GradCheck, SwiGLU) {
  MatD g = rnd(4, 6, 2.0), u = rnd(4, 6), R = rnd(4, 6), y, dg, du;
  auto loss = [&] {
    swiglu_fwd(g, u, y);
    return dot(y, R);
  };
  swiglu_bwd(R, g, u, dg, du);
  EXPECT_LT(fd_error(loss, g.data(), dg.data(), g.size()), kTol);
  EXPECT_LT(fd_error(loss, u.data(), du.data(), u.size()), kTol);
}

TEST(GradCheck, RopeAndItsInverse) {
  const int B = 2, T = 5, heads = 3, d = 8;
  MatD x = rnd(B * T, heads * d), R = rnd(B * T, heads * d);
  auto loss = [&] {
    MatD y = x;
    rope_rows(y, heads, d, T, rope_inv_freq(100.f, d), false);
    return dot(y, R);
  };
  MatD dx = R;
  rope_rows(dx, heads, d, T, rope_inv_freq(100.f, d), true);
  EXPECT_LT(fd_error(loss, x.data(), dx.data(), x.size()), kTol);
  // The inverse undoes the forward exactly (up to rounding), and position 0 is untouched.
  MatD y = x;
  rope_rows(y, heads, d, T, rope_inv_freq(100.f, d), false);
  EXPECT_LT((y.row(0) - x.row(0)).norm(), 1e-12);
  EXPECT_GT((y.row(1) - x.row(1)).norm(), 1e-3);
  rope_rows(y, heads, d, T, rope_inv_freq(100.f, d), true);
  EXPECT_LT((y - x).norm(), 1e-10);
}

// Attention with GQA (H = 6 query heads over KV = 2): the gradient of each KV head must sum
// over its query group, which the FD check on k and v proves.
TEST(GradCheck, AttentionGqaCausal) {
  const int B = 2, T = 6, H = 6, KV = 2, d = 4;
  MatD q = rnd(B * T, H * d), k = rnd(B * T, KV * d), v = rnd(B * T, KV * d), R = rnd(B * T, H * d), att;
  std::vector<double> probs;
  auto loss = [&] {
    attention_fwd(q, k, v, B, T, H, KV, d, att, probs);
    return dot(att, R);
  };
  loss();
  MatD dq, dk, dv;
  attention_bwd(R, q, k, v, probs, B, T, H, KV, d, dq, dk, dv);
  EXPECT_LT(fd_error(loss, q.data(), dq.data(), q.size()), kTol);
  EXPECT_LT(fd_error(loss, k.data(), dk.data(), k.size()), kTol);
  EXPECT_LT(fd_error(loss, v.data(), dv.data(), v.size()), kTol);
  // causal: rows sum to 1, zero above the diagonal
  for (int bh = 0; bh < B * H; ++bh)
    for (int i = 0; i < T; ++i) {
      double s = 0;
      for (int j = 0; j < T; ++j) {
        const double p = probs[(static_cast<size_t>(bh) * T + i) * T + j];
        if (j > i) {
          EXPECT_EQ(p, 0.0);
        }
        s += p;
      }
      EXPECT_NEAR(s, 1.0, 1e-12);
    }
}

TEST(GradCheck, CrossEntropy) {
  MatD logits = rnd(7, 5, 2.0), dl;
  const std::vector<int> targets = {0, 4, 2, 2, 1, 3, 0};
  cross_entropy(logits, targets, &dl);
  auto loss = [&] { return cross_entropy<double>(logits, targets, nullptr); };
  EXPECT_LT(fd_error(loss, logits.data(), dl.data(), logits.size()), kTol);
}

TEST(GradCheck, TheCheckCatchesASmallError) {
  GeluCase g;
  // Perturb the largest entry by 1%, which must fail.
  Eigen::Index r, c;
  g.dx.cwiseAbs().maxCoeff(&r, &c);
  g.dx(r, c) *= 1.01;
  EXPECT_GT(g.fd_error_of_dx(), 10 * kTol);
}

// ---------------------------------------------------------------------------------------
// Whole models, every parameter tensor.

ModelConfig tiny_config(const std::string& arch, bool tie, int kv) {
  TrainOptions o;
  o.arch = arch;
  o.layers = 2;
  o.embd = 16;
  o.heads = 4;
  o.kv_heads = arch == "llama" ? kv : 0;
  o.block_size = 6;
  o.tie = tie;
  o.inner = 24;
  return make_train_config(o, 11);
}

// Random parameters (not the init: norms and biases away from 1 and 0 so their gradients
// are exercised), in double.
Params<double> random_params(const ModelConfig& c, uint64_t seed) {
  Params<float> pf = init_params(c, seed);
  std::mt19937_64 r(seed);
  std::normal_distribution<float> n(0.f, 0.3f);
  for (auto& ref : param_list(pf))
    for (Eigen::Index i = 0; i < ref.size; ++i) ref.data[i] += n(r);
  Params<double> p = params_from_weights<double>(weights_from_params(pf));
  return p;
}

void check_model_grads(const ModelConfig& c) {
  const int B = 2, T = c.n_ctx;
  Params<double> p = random_params(c, 5);
  std::vector<int> in(B * T), tg(B * T);
  std::mt19937 r(3);
  for (int i = 0; i < B * T; ++i) in[i] = static_cast<int>(r() % c.vocab_size), tg[i] = static_cast<int>(r() % c.vocab_size);
  Activations<double> acts;
  Params<double> g = zeros_like(p);
  model_loss<double>(c, p, in, tg, B, T, &g, acts);
  auto loss = [&] { return model_loss<double>(c, p, in, tg, B, T, nullptr, acts); };
  const auto P = param_list(p), G = param_list(g);
  ASSERT_EQ(P.size(), G.size());
  for (size_t t = 0; t < P.size(); ++t) {
    // The key bias cannot change the loss (it adds q·b_k to a whole softmax row), so its
    // true gradient is 0: the analytic one must be 0 up to rounding.
    if (P[t].name.find(".bk") != std::string::npos) {
      for (Eigen::Index i = 0; i < G[t].size; ++i) EXPECT_LT(std::abs(G[t].data[i]), 1e-12) << P[t].name;
      continue;
    }
    const double e = fd_error(loss, P[t].data, G[t].data, P[t].size, 150);
    EXPECT_LT(e, kTol) << c.model_type << " " << P[t].name;
    double gnorm = 0;
    for (Eigen::Index i = 0; i < G[t].size; ++i) gnorm += std::abs(G[t].data[i]);
    EXPECT_GT(gnorm, 0) << P[t].name << " gets no gradient";
  }
}

TEST(GradCheck, WholeGpt2Model) { check_model_grads(tiny_config("gpt2", true, 0)); }
TEST(GradCheck, WholeLlamaGqaUntied) { check_model_grads(tiny_config("llama", false, 2)); }
TEST(GradCheck, WholeLlamaMqaTied) { check_model_grads(tiny_config("llama", true, 1)); }

// The float trainer agrees with the double one (what training actually runs).
TEST(GradCheck, FloatMatchesDouble) {
  const ModelConfig c = tiny_config("llama", false, 2);
  Params<double> pd = random_params(c, 9);
  Params<float> pf = init_params(c, 9);
  {
    auto D = param_list(pd);
    auto F = param_list(pf);
    for (size_t t = 0; t < D.size(); ++t)
      for (Eigen::Index i = 0; i < D[t].size; ++i) F[t].data[i] = static_cast<float>(D[t].data[i]);
  }
  const int B = 2, T = c.n_ctx;
  std::vector<int> in(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) in[i] = (i * 7) % c.vocab_size, tg[i] = (i * 5 + 1) % c.vocab_size;
  Activations<double> ad;
  Activations<float> af;
  Params<double> gd = zeros_like(pd);
  Params<float> gf = zeros_like(pf);
  const double ld = model_loss<double>(c, pd, in, tg, B, T, &gd, ad);
  const double lf = model_loss<float>(c, pf, in, tg, B, T, &gf, af);
  EXPECT_NEAR(lf, ld, 1e-5 * std::abs(ld));
  const auto D = param_list(gd);
  const auto F = param_list(gf);
  for (size_t t = 0; t < D.size(); ++t) {
    double err = 0, scale = 0;
    for (Eigen::Index i = 0; i < D[t].size; ++i) {
      err = std::max(err, std::abs(F[t].data[i] - D[t].data[i]));
      scale = std::max(scale, std::abs(D[t].data[i]));
    }
    EXPECT_LT(err / std::max(scale, 1e-12), 1e-4) << D[t].name;
  }
}

// ---------------------------------------------------------------------------------------
// Optimizer pieces

TEST(Optimizer, ScheduleWarmsUpThenDecaysToTheFloor) {
  TrainOptions o;
  o.lr = 1e-3f;
  o.warmup = 10;
  o.steps = 110;
  o.min_lr_frac = 0.1f;
  EXPECT_NEAR(lr_at(o, 0), 1e-4, 1e-9);
  EXPECT_NEAR(lr_at(o, 9), 1e-3, 1e-9);
  EXPECT_NEAR(lr_at(o, 60), 0.55e-3, 1e-6);  // half way down the cosine
  EXPECT_NEAR(lr_at(o, 110), 1e-4, 1e-9);
  EXPECT_GT(lr_at(o, 30), lr_at(o, 31));
}

TEST(Optimizer, ClipScalesToTheGlobalNorm) {
  const ModelConfig c = tiny_config("gpt2", true, 0);
  Params<float> g = zeros_like(init_params(c, 1));
  g.tok_emb(0, 0) = 3.f;
  g.layers[1].w_down(2, 3) = 4.f;
  EXPECT_NEAR(clip_grad_norm(g, 1.f), 5.0, 1e-6);
  EXPECT_NEAR(g.tok_emb(0, 0), 0.6f, 1e-5);
  EXPECT_NEAR(g.layers[1].w_down(2, 3), 0.8f, 1e-5);
}

TEST(Optimizer, AdamWFirstStepAndDecoupledDecay) {
  const ModelConfig c = tiny_config("gpt2", true, 0);
  Params<float> p = init_params(c, 1), g = zeros_like(p);
  AdamState st{zeros_like(p), zeros_like(p), 0};
  TrainOptions o;
  o.weight_decay = 0.5f;
  const float w0 = p.layers[0].wq(1, 2), e0 = p.tok_emb(3, 1);
  g.layers[0].wq(1, 2) = 0.25f;  // first Adam step moves by lr·sign(g) (bias-corrected)
  g.tok_emb(3, 1) = -2.f;
  adamw_step(o, 0.01f, p, g, st);
  EXPECT_NEAR(p.layers[0].wq(1, 2), w0 - 0.01f * 0.5f * w0 - 0.01f, 1e-6);  // matrix: decays
  EXPECT_NEAR(p.tok_emb(3, 1), e0 + 0.01f, 1e-6);                           // embedding: no decay
  EXPECT_EQ(st.step, 1);
}

// ---------------------------------------------------------------------------------------
// Training end to end: loss falls, checkpoints reload, resume continues exactly.

// A small, learnable text: repeated sentences with a few variations.
std::string write_corpus(const std::string& dir) { return test::write_sentence_corpus(dir, "the", 400, 4); }

TrainOptions small_run(const std::string& arch, const std::string& corpus, const std::string& out) {
  TrainOptions o;
  o.arch = arch;
  o.layers = 2;
  o.embd = 32;
  o.heads = 4;
  o.kv_heads = arch == "llama" ? 2 : 0;
  o.block_size = 32;
  o.batch = 8;
  o.steps = 60;
  o.warmup = 10;
  o.lr = 1e-2f;
  o.eval_every = 30;
  o.eval_batches = 2;
  o.corpus = corpus;
  o.out = out;
  return o;
}

// The engine's forward (core/cpu_backend) on the reloaded checkpoint gives the same loss
// as the trainer's forward on the trained parameters.
void expect_engine_loss_matches(const std::string& dir, const Params<float>* trained_opt) {
  const auto model = load_model(dir);
  const ModelConfig& c = model->config;
  Params<float> p = params_from_weights<float>(model->weights);
  if (trained_opt) {  // the file holds exactly the trained values
    auto A = param_list(p);
    auto Bp = param_list(const_cast<Params<float>&>(*trained_opt));
    ASSERT_EQ(A.size(), Bp.size());
  }
  const int T = c.n_ctx;
  std::vector<int> ids(T + 1);
  for (int i = 0; i <= T; ++i) ids[i] = (i * 3 + 1) % c.vocab_size;
  const std::vector<int> in(ids.begin(), ids.end() - 1), tg(ids.begin() + 1, ids.end());
  Activations<float> acts;
  const double trainer_loss = model_loss<float>(c, p, in, tg, 1, T, nullptr, acts);
  Engine engine(model, make_cpu_backend());
  const Trace& tr = engine.run(in);
  double sum = 0;
  const int V = c.vocab_size;
  for (int i = 0; i < T; ++i) {
    const float* row = tr.logits.data.data() + static_cast<size_t>(i) * V;
    double mx = row[0], s = 0;
    for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    sum += mx + std::log(s) - row[tg[i]];
  }
  EXPECT_NEAR(sum / T, trainer_loss, 1e-4 * std::max(1.0, trainer_loss)) << dir;
}

TEST(Train, ValidationLossFallsAndTheCheckpointReloads) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const std::string dir = test::temp_dir("train_" + arch);
    const TrainOptions o = small_run(arch, write_corpus(dir), dir + "/ckpt");
    const TrainResult r = train(o, nullptr);
    EXPECT_EQ(r.steps, 60);
    EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0) << arch << ": " << r.first_val_loss << " -> " << r.final_val_loss;
    EXPECT_LT(r.final_val_loss, 1.5) << arch;
    ASSERT_TRUE(std::filesystem::exists(dir + "/ckpt/trainer_state.safetensors"));
    const auto m = load_model(dir + "/ckpt");
    EXPECT_EQ(m->config.model_type, arch);
    EXPECT_EQ(m->config.n_ctx, 32);
    ASSERT_TRUE(m->tokenizer);
    EXPECT_EQ(m->tokenizer->decode(encode_text(*m, "the cat sat")), "the cat sat");
    expect_engine_loss_matches(dir + "/ckpt", nullptr);
  }
}

TEST(Train, UntiedLlamaCheckpointMatchesTheEngine) {
  const std::string dir = test::temp_dir("train_untied");
  TrainOptions o = small_run("llama", write_corpus(dir), dir + "/ckpt");
  o.tie = false;
  o.steps = 10;
  o.eval_every = 10;
  train(o, nullptr);
  EXPECT_FALSE(load_model(dir + "/ckpt")->config.tie_embeddings);
  expect_engine_loss_matches(dir + "/ckpt", nullptr);
}

TEST(Train, ResumeContinuesTheSameRun) {
  const std::string dir = test::temp_dir("train_resume");
  const std::string corpus = write_corpus(dir);
  TrainOptions full = small_run("llama", corpus, dir + "/full");
  full.steps = 20;
  full.eval_every = 10;
  train(full, nullptr);
  // The same 20-step schedule, stopped at step 10 by copying its step-10 checkpoint.
  TrainOptions first = full;
  first.out = dir + "/part";
  train(first, [&](const TrainProgress& p) {
    if (p.saved && p.step == 10) std::filesystem::copy(dir + "/part", dir + "/at10", std::filesystem::copy_options::recursive);
  });
  TrainOptions resumed = full;
  resumed.out = dir + "/resumed";
  resumed.resume = dir + "/at10";
  const TrainResult r = train(resumed, nullptr);
  EXPECT_EQ(r.steps, 20);
  const auto a = load_model(dir + "/full"), b = load_model(dir + "/resumed");
  Params<float> pa = params_from_weights<float>(a->weights), pb = params_from_weights<float>(b->weights);
  const auto A = param_list(pa), Bv = param_list(pb);
  ASSERT_EQ(A.size(), Bv.size());
  for (size_t t = 0; t < A.size(); ++t)
    for (Eigen::Index i = 0; i < A[t].size; ++i)
      ASSERT_NEAR(A[t].data[i], Bv[t].data[i], 1e-6) << A[t].name << "[" << i << "]";
}

TEST(Train, CorpusVocabularyIsSortedDistinctCodePoints) {
  const std::string dir = test::temp_dir("corpus");
  test::write_bytes(dir + "/c.txt", "ba\xe4\xb8\xad" "ab\n");
  const Corpus c = load_corpus(dir + "/c.txt", 0.1f);
  EXPECT_EQ(c.vocab, (std::vector<std::string>{"\n", "a", "b", "\xe4\xb8\xad"}));
  EXPECT_EQ(c.ids, (std::vector<int>{2, 1, 3, 1, 2, 0}));
  EXPECT_EQ(c.n_train, 5u);
  test::write_bytes(dir + "/bad.txt", "a\xff");
  EXPECT_THROW(load_corpus(dir + "/bad.txt", 0.1f), Error);
}

// ---------------------------------------------------------------------------------------
// Head scores on hand-made traces

Trace pattern_trace(const std::vector<int>& tokens, const std::function<int(int)>& target) {
  Trace t;
  t.tokens = tokens;
  const int T = static_cast<int>(tokens.size());
  t.layers.resize(1);
  t.layers[0].probs.shape = {1, T, T};
  t.layers[0].probs.data.assign(static_cast<size_t>(T) * T, 0.f);
  for (int i = 0; i < T; ++i) t.layers[0].probs.data[static_cast<size_t>(i) * T + target(i)] = 1.f;
  return t;
}

TEST(HeadScores, RecognisesThePatterns) {
  const std::vector<int> rep = {5, 6, 7, 8, 5, 6, 7, 8};  // a random string repeated twice
  auto prev = score_heads(pattern_trace(rep, [](int i) { return std::max(0, i - 1); }))[0];
  EXPECT_FLOAT_EQ(prev.previous_token, 1.f);
  EXPECT_FLOAT_EQ(prev.induction, 0.f);
  EXPECT_EQ(head_label(prev), "previous-token");
  auto ind = score_heads(pattern_trace(rep, [](int i) { return i >= 4 ? i - 3 : 0; }))[0];
  EXPECT_FLOAT_EQ(ind.induction, 1.f);  // rows 4..7 look at the token after the earlier copy
  EXPECT_NEAR(ind.first_token, 3.f / 7.f, 1e-6);  // rows 1..3 attend to position 0
  EXPECT_EQ(head_label(ind), "induction");
  auto sink = score_heads(pattern_trace(rep, [](int) { return 0; }))[0];
  EXPECT_FLOAT_EQ(sink.first_token, 1.f);
  auto self = score_heads(pattern_trace(rep, [](int i) { return i; }))[0];
  EXPECT_FLOAT_EQ(self.self, 1.f);
  EXPECT_EQ(head_label(self), "self");
  // rows without an earlier occurrence: induction is undefined
  EXPECT_EQ(score_heads(pattern_trace({1, 2, 3}, [](int) { return 0; }))[0].induction, -1.f);
}

TEST(HeadScores, RepeatedRandomString) {
  const auto ids = repeated_random_tokens(nullptr, 50, 20, 3);
  ASSERT_EQ(ids.size(), 40u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ids[i], ids[i + 20]);
  std::vector<int> first(ids.begin(), ids.begin() + 20);
  std::sort(first.begin(), first.end());
  EXPECT_EQ(std::unique(first.begin(), first.end()), first.end());  // distinct
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {

// --repeat-frac sequences: periodic inputs, targets = the next input, corpus or random.
TEST(Train, RepeatedSegmentsArePeriodicWithNextTokenTargets) {
  std::vector<int> ids(100);
  for (int i = 0; i < 100; ++i) ids[i] = i % 37;
  std::mt19937_64 rng(3);
  for (bool random_chars : {false, true}) {
    const int T = 40, P = 11;
    std::vector<int> in(T), tg(T);
    fill_repeated(ids, 20, P, random_chars, 37, rng, T, in.data(), tg.data());
    for (int t = 0; t < T; ++t) {
      if (t + P < T) {
        EXPECT_EQ(in[t], in[t + P]) << t;
      }
      if (t + 1 < T) {
        EXPECT_EQ(tg[t], in[t + 1]) << t;
      }
      if (!random_chars && t < P) {
        EXPECT_EQ(in[t], ids[20 + t]);
      }
    }
    EXPECT_EQ(tg[T - 1], in[(T) % P]);
  }
}

}  // namespace
}  // namespace attnviz
