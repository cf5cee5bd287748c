// A compact trace (no (T, T) matrices; heads recomputed on request) against a full one
// computed side by side: every stage of every head must be the same bits, after one pass
// and after typing token by token and editing; the per-head summaries (row_stats,
// thumbnails) must match what they summarise, computed here from the full matrices; and
// a long compact trace must stay within an O(T) bound computed from the config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/engine/head_scores.h"
#include "core/engine/head_summary.h"
#include "core/engine/importance.h"
#include "test_util.h"

namespace attnviz {
namespace {
using namespace test;

struct Pair {
  Engine keep, compact;
  Pair(std::shared_ptr<const Model> m)
      : keep(m, make_cpu_backend()), compact(m, make_cpu_backend()) {
    keep.set_matrices(Engine::Matrices::kKeep);
    compact.set_matrices(Engine::Matrices::kRecompute);
  }
};

// Every matrix stage of every head, every stored stage and the logits: equal bits.
void expect_same(const Trace& full, const Trace& compact, const std::string& when) {
  ASSERT_EQ(full.T(), compact.T()) << when;
  ASSERT_EQ(compact.layers.size(), full.layers.size());
  std::vector<float> a, b;
  for (size_t l = 0; l < full.layers.size(); ++l) {
    const LayerTrace &F = full.layers[l], &C = compact.layers[l];
    ASSERT_FALSE(F.compact) << when;
    ASSERT_TRUE(C.compact) << when;
    ASSERT_TRUE(C.scores.data.empty() && C.probs.data.empty()) << "a compact layer holds no (T, T) matrix";
    for (Stage s : {Stage::Q, Stage::K, Stage::V, Stage::Scores, Stage::Scaled, Stage::Capped, Stage::Masked, Stage::Probs,
                    Stage::Out}) {
      ASSERT_EQ(F.shape(s), C.shape(s)) << when;
      for (int64_t h = 0; h < F.shape(s)[0]; ++h) {
        const int64_t n = F.shape(s)[1] * F.shape(s)[2];
        const float* x = F.head_values(s, h, a);
        const float* y = C.head_values(s, h, b);
        for (int64_t e = 0; e < n; ++e)
          if (std::memcmp(&x[e], &y[e], sizeof(float)) != 0) {
            FAIL() << when << ": layer " << l << " head " << h << " " << stage_name(s) << " element " << e << ": full "
                   << x[e] << " vs compact " << y[e] << " (diff " << (x[e] - y[e]) << ")";
          }
        if (LayerTrace::matrix(s) && h == F.heads() - 1) {  // one row and one element the cheap ways
          const int64_t i = F.T() - 1, T = F.T();
          const float* r = C.row_values(s, h, i, b);
          for (int64_t j = 0; j < T; ++j) ASSERT_EQ(std::memcmp(&r[j], &x[i * T + j], 4), 0) << when << " row_values";
          ASSERT_EQ(C.value(s, h, i, 0), x[i * T]) << when << " value";
        }
      }
    }
    const FloatBuf fr = F.row_stats.dense_copy().data, cr = C.row_stats.dense_copy().data;  // NaN: no target
    EXPECT_TRUE(fr.size() == cr.size() && std::memcmp(fr.data(), cr.data(), fr.size() * 4) == 0) << when << " row_stats, layer " << l;
    EXPECT_EQ(F.thumbs.data, C.thumbs.data) << when << " thumbnails, layer " << l;
  }
  EXPECT_EQ(full.logits.dense_copy().data, compact.logits.dense_copy().data) << when;
}

// The summaries against the full matrices: row_stats within float rounding of a double
// computation, thumbnails exactly the max over each bucket.
void expect_summaries(const Trace& t, const std::string& when) {
  const int T = t.T();
  const auto targets = induction_targets(t.tokens, 0);
  std::vector<float> scratch;
  for (const LayerTrace& lt : t.layers) {
    const int b = thumb_bucket(T), n = thumb_cells(T, b);
    ASSERT_EQ(lt.thumb_bucket, b) << when;
    ASSERT_EQ(lt.thumbs.shape, (std::vector<int64_t>{lt.heads(), n, n})) << when;
    for (int64_t h = 0; h < lt.heads(); ++h) {
      const float* P = lt.head_values(Stage::Probs, h, scratch);
      std::vector<float> want(static_cast<size_t>(n) * n, 0.f);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) want[(i / b) * n + j / b] = std::max(want[(i / b) * n + j / b], P[i * T + j]);
      for (int c = 0; c < n * n; ++c) ASSERT_EQ(lt.thumbs.head(h)[c], want[c]) << when << " thumbnail cell " << c;
      for (int i = 0; i < T; ++i) {
        const float* r = P + static_cast<int64_t>(i) * T;
        double ent = 0, dist = 0, ind = 0;
        for (int j = 0; j <= i; ++j) {
          if (r[j] > 0) ent -= r[j] * std::log2(static_cast<double>(r[j]));
          dist += static_cast<double>(r[j]) * (i - j);
        }
        for (int j : targets[i]) ind += r[j];
        const float* s = lt.row_stats.head(h) + i * lt.row_stats.ld();
        ASSERT_EQ(s[kFirst], r[0]);
        ASSERT_EQ(s[kSelf], r[i]);
        if (i > 0) ASSERT_EQ(s[kPrevious], r[i - 1]);
        ASSERT_NEAR(s[kEntropyBits], ent, 1e-5 * std::max(1.0, ent)) << when << " row " << i;
        ASSERT_NEAR(s[kDistance], dist, 1e-5 * std::max(1.0, dist)) << when << " row " << i;
        if (targets[i].empty())
          ASSERT_TRUE(std::isnan(s[kInduction]));
        else
          ASSERT_NEAR(s[kInduction], ind, 1e-6);
      }
    }
  }
}

std::shared_ptr<const Model> gqa_model() {
  // llama with RoPE and GQA (8 query heads over 2 KV heads), head size 16.
  return load_model(make_model_dir(small_config("llama", 3, 128, 8, 2, 300, 512), 7, "compact_gqa"));
}

TEST(CompactTrace, OnePassGivesTheSameBitsAsTheFullTrace) {
  for (const auto& m : {gqa_model(), load_model(make_model_dir(small_config("gpt2", 2, 64, 4, 4, 200, 512), 3, "compact_gpt2"))}) {
    for (int T : {1, 2, 7, 64, 200, 300}) {
      Pair p(m);
      const auto ids = random_ids(T, m->config.vocab_size, 11 + T);
      expect_same(p.keep.run(ids), p.compact.run(ids), std::string(m->config.arch == Arch::Llama ? "llama" : "gpt2") + " T=" + std::to_string(T));
      expect_summaries(p.keep.trace(), "T=" + std::to_string(T));
    }
  }
}

TEST(CompactTrace, TypingAndEditingKeepTheSameBitsAndSummaries) {
  Pair p(gqa_model());
  const auto ids = random_ids(260, 300, 5);
  std::vector<int> typed;
  for (int i = 0; i < 260; ++i) {  // crosses thumbnail buckets 1 → 2 → 4 (at T = 65 and 129, 257)
    typed.push_back(ids[static_cast<size_t>(i)]);
    const Trace& a = p.keep.run(typed);
    const Trace& b = p.compact.run(typed);
    ASSERT_EQ(p.compact.last_recomputed_from(), i) << "typing appends";
    if (i % 37 == 0 || i == 259 || i == 64 || i == 65 || i == 128 || i == 129) {
      expect_same(a, b, "typed " + std::to_string(i + 1));
      expect_summaries(b, "typed " + std::to_string(i + 1));
    }
  }
  for (int at : {250, 100, 3}) {  // an edit recomputes from `at`; a deletion shrinks the window
    typed[static_cast<size_t>(at)] = (typed[static_cast<size_t>(at)] + 1) % 300;
    expect_same(p.keep.run(typed), p.compact.run(typed), "edit at " + std::to_string(at));
    expect_summaries(p.compact.trace(), "edit at " + std::to_string(at));
  }
  typed.resize(120);  // the bucket shrinks from 8 to 2
  expect_same(p.keep.run(typed), p.compact.run(typed), "deleted to 120");
  expect_summaries(p.compact.trace(), "deleted to 120");
  EXPECT_EQ(score_heads(p.keep.trace()).size(), score_heads(p.compact.trace()).size());
}

TEST(CompactTrace, LocalSoftCappedLayersKeepTheSameBitsWhileTyping) {
  // Gemma 2's rules: windows of 6 on every other layer, scores soft-capped at 3.
  const ModelConfig c = parse_config(
      {{"model_type", "gemma2"}, {"vocab_size", 300}, {"hidden_size", 64}, {"intermediate_size", 96},
       {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
       {"max_position_embeddings", 512}, {"sliding_window", 6}, {"attn_logit_softcapping", 3.0}},
      "gemma2 test config");
  Pair p(load_model(make_model_dir(c, 5, "compact_gemma2")));
  const auto ids = random_ids(80, 300, 6);
  std::vector<int> typed;
  for (int i = 0; i < 80; ++i) {
    typed.push_back(ids[static_cast<size_t>(i)]);
    const Trace& a = p.keep.run(typed);
    const Trace& b = p.compact.run(typed);
    if (i % 13 == 0 || i == 79) expect_same(a, b, "gemma2 typed " + std::to_string(i + 1));
  }
  ASSERT_EQ(p.keep.trace().layers[0].window, 6);
  ASSERT_EQ(p.keep.trace().layers[1].window, 0);
  expect_summaries(p.compact.trace(), "gemma2");
}

TEST(CompactTrace, HeadScoresFromTheSummariesMatchThoseFromTheMatrices) {
  Pair p(gqa_model());
  auto ids = random_ids(40, 300, 9);
  ids.insert(ids.end(), ids.begin(), ids.end());  // induction rows in the second half
  const Trace& t = p.compact.run(ids);
  Trace bare = p.keep.run(ids);
  for (LayerTrace& lt : bare.layers) lt.row_stats = Tensor{};  // score_heads computes them from probs
  {
    std::vector<float> P, mine(kRowStats);
    const auto tg = induction_targets(ids, 0);
    const LayerTrace& lt = t.layers[1];
    for (int i = 0; i < 80; ++i) {
      lt.head_values(Stage::Probs, 3, P);
      row_stats(P.data() + i * 80, i, tg[i], mine.data());
      const float* r = lt.row_stats.head(3) + i * lt.row_stats.ld();
      for (int k = 0; k < kRowStats; ++k)
        if (!(std::isnan(r[k]) && std::isnan(mine[k]))) EXPECT_EQ(r[k], mine[k]) << "row " << i << " stat " << k;
    }
  }
  const auto a = score_heads(t), b = score_heads(bare);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FLOAT_EQ(a[i].previous_token, b[i].previous_token);
    EXPECT_FLOAT_EQ(a[i].induction, b[i].induction);
    EXPECT_FLOAT_EQ(a[i].entropy_bits, b[i].entropy_bits);
    EXPECT_FLOAT_EQ(a[i].mean_distance, b[i].mean_distance);
    EXPECT_GE(a[i].induction, 0.f);
  }
}

TEST(CompactTrace, AutoKeepsSmallTracesAndDropsLargeOnes) {
  const auto m = gqa_model();  // 3 layers × 8 heads: matrices of 2·24·T² floats
  Engine e(m, make_cpu_backend());
  int64_t T_switch = 1;
  while (!e.compact_for(T_switch)) ++T_switch;
  const double bytes_at = 2.0 * 3 * 8 * double(T_switch) * T_switch * 4;
  EXPECT_GT(bytes_at, kKeepMatricesBytes);
  EXPECT_LE(2.0 * 3 * 8 * double(T_switch - 1) * (T_switch - 1) * 4, kKeepMatricesBytes);
  EXPECT_FALSE(e.run(random_ids(100, 300, 1)).compact);
}

TEST(CompactTrace, MemoryGrowsWithTNotTSquared) {
  // T = 4096 with 8 heads: the matrices alone would be 3 × 2 × 8 × 4096² × 4 B = 3.2 GB.
  const auto m = load_model(make_model_dir(small_config("llama", 3, 64, 8, 2, 300, 4096), 7, "compact_long"));
  Engine e(m, make_cpu_backend());
  e.set_matrices(Engine::Matrices::kRecompute);
  const ModelConfig& c = m->config;
  for (int T : {1024, 4096}) {
    const Trace& t = e.run(random_ids(T, 300, 2));
    // The O(T) bound: per token, every layer's q, k, v, out, resid and row stats, and the
    // logits; plus the fixed thumbnails.
    const double per_token = c.n_layer * ((2.0 * c.n_head + 2.0 * c.n_kv_head) * c.head_size + c.n_embd +
                                          c.n_head * kRowStats) + c.vocab_size;
    const double bound = 4.0 * (per_token * T + c.n_layer * c.n_head * kThumbCells * kThumbCells);
    EXPECT_LE(static_cast<double>(t.bytes()), bound * 1.3) << "T=" << T << " (room to grow: a quarter)";
    EXPECT_LE(static_cast<double>(t.bytes()),
              Trace::estimate_bytes(c.n_layer, c.n_head, c.n_kv_head, c.head_size, c.n_embd, c.vocab_size, T, true) * 1.3);
    // A head recomputed on request is the softmax it should be: rows sum to 1.
    std::vector<float> P;
    t.layers[2].head_values(Stage::Probs, 5, P);
    for (int i : {0, T / 2, T - 1}) {
      double sum = 0;
      for (int j = 0; j < T; ++j) sum += P[static_cast<size_t>(i) * T + j];
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
}

// The GUI's block_size cap: the longest window whose estimated trace fits, for a model
// with a 128k context (Llama-3.2-1B's shape) whose whole context would need ~70 GB.
TEST(WindowLimit, TheLongestWindowThatFitsAndNoLonger) {
  ModelConfig c = small_config("llama", 16, 2048, 32, 8, 128256, 131072);
  c.head_size = 64;
  auto need = [&](int64_t T, bool compact) {
    return Trace::estimate_bytes(c.n_layer, c.n_head, c.n_kv_head, c.head_size, c.n_embd, c.vocab_size, T, compact,
                                 false);
  };
  for (bool compact : {true, false})
    for (double bytes : {1e9, 8e9, 20e9}) {
      const WindowLimit lim = window_limit_for_memory(c, compact, bytes);
      ASSERT_TRUE(lim.capped());
      EXPECT_LE(need(lim.max_T, compact), bytes) << bytes;
      EXPECT_GT(need(lim.max_T + 1, compact), bytes) << bytes;
      EXPECT_EQ(lim.bytes_at_n_ctx, need(c.n_ctx, compact));
      EXPECT_GT(lim.bytes_at_n_ctx, 50e9);  // what the message quotes: the whole context
    }
  // Compact traces reach further: 8 GB holds ~1300 tokens with matrices (2 x 16 x 32 x T² x 4 B
  // = 7.3 GB of them at T = 1336), over 10x more without (~0.5 MB a token).
  EXPECT_GT(window_limit_for_memory(c, true, 8e9).max_T, 10 * window_limit_for_memory(c, false, 8e9).max_T);
  // Enough memory: the model's own context, not capped; too little for one token: 1.
  const WindowLimit all = window_limit_for_memory(c, true, 1e12);
  EXPECT_EQ(all.max_T, c.n_ctx);
  EXPECT_FALSE(all.capped());
  EXPECT_EQ(window_limit_for_memory(c, true, 1.0).max_T, 1);
}

// While typing the GUI's engine holds kTypingTraceCopies traces of its window: the limit is
// the longest window whose copies all fit, and one token more would not.
TEST(WindowLimit, TypingCountsEveryCopy) {
  const ModelConfig c = small_config("llama", 4, 256, 8, 2, 1000, 8192);
  const auto est = [&](int64_t T) {
    return Trace::estimate_bytes(c.n_layer, c.n_head, c.n_kv_head, c.head_size, c.n_embd, c.vocab_size, T, true, false);
  };
  for (double bytes : {20e6, 80e6, 200e6}) {
    const WindowLimit lim = typing_window_limit(c, true, bytes);
    ASSERT_TRUE(lim.capped()) << bytes;
    EXPECT_LE(kTypingTraceCopies * est(lim.max_T), bytes) << bytes;
    EXPECT_GT(kTypingTraceCopies * est(lim.max_T + 1), bytes) << bytes;
    EXPECT_DOUBLE_EQ(lim.bytes_at_n_ctx, kTypingTraceCopies * est(c.n_ctx));
    EXPECT_LT(lim.max_T, window_limit_for_memory(c, true, bytes).max_T) << "one trace would allow more";
  }
}

// The last row's logits and every row's loss (what the GUI records) against every row's
// logits (what dump records), after one pass, typing, and edits: an edit at p changes the
// target of row p − 1, whose loss must follow. Not bit for bit: the unembedding runs over
// other row blocks (Eigen's kernels differ in the last bit by shape).
// "" when two tensors have one shape and the same bits in every row (rows may be padded
// differently), else where they differ.
std::string same_rows(const Tensor& x, const Tensor& y) {
  if (x.shape != y.shape) return "shapes differ";
  if (x.shape.empty()) return "";
  const int64_t heads = x.shape.size() == 3 ? x.dim(0) : 1, rows = x.shape.size() == 3 ? x.dim(1) : x.dim(0);
  const size_t bytes = sizeof(float) * static_cast<size_t>(x.shape.back());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t ox = static_cast<size_t>(x.shape.size() == 3 ? h * x.head_stride() + r * x.ld() : r * x.ld());
      const size_t oy = static_cast<size_t>(y.shape.size() == 3 ? h * y.head_stride() + r * y.ld() : r * y.ld());
      if (std::memcmp(x.data.data() + ox, y.data.data() + oy, bytes) != 0)
        return "head " + std::to_string(h) + " row " + std::to_string(r);
    }
  return "";
}

// Without summaries (Engine::set_summaries(false): eval, head importance) a trace holds no
// row_stats and no thumbnails, and every recorded tensor and the logits are the same bits as
// with them, in one pass, while typing and after an edit, kept and compact. Summaries turned
// back on are complete again (recomputed from the start).
TEST(NoSummaries, TheSameBitsWithoutRowStatsOrThumbnails) {
  const auto m = gqa_model();
  for (const auto matrices : {Engine::Matrices::kKeep, Engine::Matrices::kRecompute}) {
    Engine with(m, make_cpu_backend()), without(m, make_cpu_backend());
    with.set_matrices(matrices);
    without.set_matrices(matrices);
    without.set_summaries(false);
    const std::string mode = matrices == Engine::Matrices::kKeep ? "kept" : "compact";
    auto check = [&](const std::vector<int>& ids, const std::string& when) {
      const Trace& a = with.run(ids);
      const Trace& b = without.run(ids);
      EXPECT_FALSE(b.summaries);
      for (size_t l = 0; l < b.layers.size(); ++l) {
        ASSERT_TRUE(b.layers[l].row_stats.data.empty() && b.layers[l].thumbs.data.empty()) << mode << " " << when;
        ASSERT_FALSE(a.layers[l].row_stats.data.empty() || a.layers[l].thumbs.data.empty()) << mode << " " << when;
        for (auto t : {&LayerTrace::q, &LayerTrace::k, &LayerTrace::v, &LayerTrace::scores, &LayerTrace::probs,
                       &LayerTrace::out, &LayerTrace::resid}) {
          ASSERT_EQ(same_rows(a.layers[l].*t, b.layers[l].*t), "") << mode << " " << when << " layer " << l;
        }
      }
      ASSERT_EQ(same_rows(a.logits, b.logits), "") << mode << " " << when << " logits";
    };
    auto ids = random_ids(70, m->config.vocab_size, 9);
    check(ids, "one pass");
    ids.push_back(3);
    check(ids, "typed");
    ASSERT_EQ(without.last_recomputed_from(), 70) << "typing appends without summaries too";
    ids[20] = (ids[20] + 1) % m->config.vocab_size;
    check(ids, "edit at 20");
    without.set_summaries(true);
    const Trace& back = without.run(ids);
    EXPECT_EQ(without.last_recomputed_from(), 0) << "turning summaries on recomputes the window";
    expect_summaries(back, mode + " summaries back on");
  }
}

TEST(LastRowLogits, LossesAndTheLastRowMatchEveryRowsLogits) {
  const auto m = gqa_model();
  Engine all(m, make_cpu_backend()), last(m, make_cpu_backend());
  last.set_all_logits(false);
  const int V = m->config.vocab_size;
  auto check = [&](const std::vector<int>& ids, const std::string& when) {
    const Trace& a = all.run(ids);
    const Trace& b = last.run(ids);
    const int T = a.T();
    ASSERT_EQ(b.logits_from, T - 1) << when;
    ASSERT_EQ(b.logits.shape, (std::vector<int64_t>{1, V})) << when;
    EXPECT_EQ(b.logits_row(T - 2), nullptr);
    const float* x = a.logits_row(T - 1);
    const float* y = b.logits_row(T - 1);
    for (int v = 0; v < V; ++v) ASSERT_NEAR(y[v], x[v], 1e-5 * (1 + std::abs(x[v]))) << when;
    ASSERT_EQ(b.row_loss.size(), static_cast<size_t>(T - 1)) << when;
    for (int i = 0; i + 1 < T; ++i)
      ASSERT_NEAR(b.row_loss[i], next_token_loss(a.logits_row(i), V, ids[i + 1]), 1e-5) << when << " row " << i;
    EXPECT_NEAR(mean_next_token_loss(b), mean_next_token_loss(a), 1e-5) << when;
    if (T > 1) EXPECT_LT(b.logits.data.size(), a.logits.data.size()) << when;
    // A hovered row's logits (the GUI asks for them) from the final hidden state.
    std::vector<float> r;
    for (int i : {0, T / 2, T - 1}) {
      row_logits(*m, b, i, r);
      ASSERT_EQ(r.size(), static_cast<size_t>(V));
      for (int v = 0; v < V; ++v) ASSERT_NEAR(r[v], a.logits_row(i)[v], 1e-5 * (1 + std::abs(a.logits_row(i)[v]))) << when;
    }
    EXPECT_THROW(row_logits(*m, b, T, r), Error);
  };
  auto ids = random_ids(150, V, 4);
  check(ids, "one pass");
  for (int i = 0; i < 3; ++i) {
    ids.push_back((i * 7) % V);
    check(ids, "typed");
  }
  ids[100] = (ids[100] + 5) % V;
  check(ids, "edit at 100");
  ids.resize(90);
  check(ids, "deleted to 90");
  ids.resize(1);
  check(ids, "one token");
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {
using namespace test;

// A forward stopped half-way (RunControl::cancel, as the GUI's worker sets it for a newer
// edit) keeps the KV cache of the positions before it; the next run starts there and gives
// the same bits as an engine that was never stopped.
TEST(Cancel, AStoppedRunKeepsItsPrefixAndTheNextRunMatches) {
  const auto m = gqa_model();
  for (bool compact : {false, true}) {
    Engine a(m, make_cpu_backend()), b(m, make_cpu_backend());
    for (Engine* e : {&a, &b}) {
      e->set_matrices(compact ? Engine::Matrices::kRecompute : Engine::Matrices::kKeep);
      e->set_all_logits(!compact);
    }
    RunControl ctl;
    b.set_control(&ctl);
    auto ids = random_ids(120, 300, 8);
    const std::vector<int> prefix(ids.begin(), ids.begin() + 100);
    a.run(prefix);
    b.run(prefix);
    ctl.reset(3);
    ctl.cancel = true;  // stops after the first of 3 layers
    EXPECT_THROW(b.run(ids), Cancelled);
    EXPECT_EQ(ctl.layers_done, 1);
    ctl.reset(3);
    const Trace& tb = b.run(ids);
    EXPECT_EQ(b.last_recomputed_from(), 100) << "the prefix's KV cache survived";
    EXPECT_EQ(ctl.layers_done, 3);
    const Trace& ta = a.run(ids);
    EXPECT_EQ(compare_traces(tb, ta, 0.0), "") << "compact " << compact;  // every stage, through materialize
    EXPECT_EQ(tb.row_loss, ta.row_loss);
    // Stopped again, then asked for exactly the kept prefix: it must run, not return the
    // half-written trace.
    ctl.cancel = true;
    auto more = ids;
    more.push_back(5);
    EXPECT_THROW(b.run(more), Cancelled);
    ctl.reset(3);
    const Trace& again = b.run(ids);
    EXPECT_EQ(again.T(), 120);
    EXPECT_EQ(b.last_recomputed_from(), 119) << "the last row runs again";
    // Row 119 alone goes through one-row projections (Eigen's matrix-vector kernel), not the
    // block `a` computed it in: equal within float rounding, not bit for bit.
    EXPECT_EQ(compare_traces(again, a.run(ids), 1e-5), "");
  }
}

}  // namespace
}  // namespace attnviz
