// Score attribution, the head scan's windows and results, in-process: what the PyTorch and
// Python references (qk_parity.py, scan_check.py) cannot reach from the CLI: compact traces,
// scan_window against the scan's own windows, the results file round trip, cancelling.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/engine/head_scan.h"
#include "core/engine/score_attribution.h"
#include "core/engine/stream_parts.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

const char* const kText =
    "The miller kept a grey cat. The miller kept a grey cat that slept on the flour.\n"
    "Rain came late that year, and the river ran low. Rain came late that year.\n"
    "Mara counted the boats: seven red ones and a green one. Mara counted the boats.\n";

std::string corpus_file(const std::string& tag) {
  const std::string path = test::temp_dir(tag) + "/corpus.txt";
  test::write_bytes(path, kText);
  return path;
}

// The parts of the stream entering each layer sum to the stream the trace recorded.
TEST(StreamParts, SumToTheRecordedStreamEveryLayer) {
  for (const char* arch : {"gpt2", "llama"}) {
    const auto m = test::small_model(arch, 4, std::string(arch) == "gpt2" ? 4 : 2, 61, 5, "parts");
    Engine engine(m, make_cpu_backend());
    const Trace& tr = engine.run(test::random_ids(14, 61, 3));
    for (int l = 0; l <= m->config.n_layer; ++l)
      for (int i : {0, 7, 13}) {
        const StreamParts sp = stream_parts(*m, tr, l, i);
        const Tensor& want = l < m->config.n_layer ? tr.layers[static_cast<size_t>(l)].resid : tr.final_resid;
        for (int e = 0; e < m->config.n_embd; ++e) {
          const double got = sp.rows.col(e).cast<double>().sum();
          EXPECT_NEAR(got, want.data[static_cast<size_t>(i) * m->config.n_embd + e], 1e-4) << arch << " l" << l << " i" << i;
        }
        EXPECT_EQ(part_name(sp.parts.front()), "embed");
        EXPECT_EQ(part_name(sp.parts.back()), "bias");
      }
  }
}

// A compact trace (no (T, T) matrix kept) gives the same split as a full one.
TEST(ScoreAttribution, CompactTraceGivesTheSameTerms) {
  const auto m = test::small_model("llama", 4, 2, 61, 9, "qk-compact");
  const std::vector<int> ids = test::random_ids(20, 61, 4);
  Engine full(m, make_cpu_backend()), compact(m, make_cpu_backend());
  full.set_matrices(Engine::Matrices::kKeep);
  compact.set_matrices(Engine::Matrices::kRecompute);
  const Trace& a = full.run(ids);
  const Trace& b = compact.run(ids);
  ASSERT_TRUE(b.layers[1].scores.shape.empty());  // compact indeed
  const ScoreAttribution x = score_attribution(*m, a, 1, 3, 19, 6), y = score_attribution(*m, b, 1, 3, 19, 6);
  ASSERT_EQ(x.terms.size(), y.terms.size());
  for (size_t t = 0; t < x.terms.size(); ++t) EXPECT_NEAR(x.terms[t], y.terms[t], 1e-9);
  EXPECT_NEAR(x.sum, x.score, 1e-4 * std::max(1.0, std::abs(x.score)));
  EXPECT_NEAR(x.score, y.score, 1e-6);
}

// Window k from scan_window is the window the scan ran as its k-th: the examples' weights
// come back from a run of it.
TEST(HeadScan, ScanWindowIsTheScansWindow) {
  const auto m = load_model("builtin:fortunes-en");
  Engine engine(m, make_cpu_backend());
  const std::string path = corpus_file("scan-window");
  ScanOptions o;
  o.window = 40;
  o.stride = 23;
  o.top = 3;
  const ScanResult r = scan_corpus(engine, path, o);
  ASSERT_GT(r.windows, 4);
  const std::vector<int> all = m->tokenizer->encode_with(kText, false);
  EXPECT_EQ(r.tokens, static_cast<int64_t>(all.size()));
  for (int k = 0; k < r.windows; ++k) {
    const std::vector<int> w = scan_window(*m, engine.block_size(), path, o, k);
    const size_t s = static_cast<size_t>(k) * 23;
    const std::vector<int> want(all.begin() + static_cast<std::ptrdiff_t>(s),
                                all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), s + 40)));
    EXPECT_EQ(w, want) << "window " << k;
  }
  EXPECT_THROW(scan_window(*m, engine.block_size(), path, o, r.windows), Error);
  Engine check(m, make_cpu_backend());
  for (const ScanHead& h : r.heads)
    for (const ScanExample& e : h.top) {
      const Trace& tr = check.run(scan_window(*m, check.block_size(), path, o, e.window));
      EXPECT_NEAR(tr.layers[static_cast<size_t>(h.layer)].value(Stage::Probs, h.head, e.query, e.key), e.weight, 1e-6);
    }
}

TEST(HeadScan, ResultsJsonRoundTrip) {
  const auto m = load_model("builtin:fortunes-en");
  Engine engine(m, make_cpu_backend());
  ScanOptions o;
  o.window = 32;
  o.top = 2;
  const ScanResult r = scan_corpus(engine, corpus_file("scan-json"), o);
  const ScanResult back = scan_result_from_json(scan_result_json(r, m->config));
  EXPECT_EQ(back.windows, r.windows);
  EXPECT_EQ(back.tokens, r.tokens);
  EXPECT_EQ(back.queries, r.queries);
  ASSERT_EQ(back.heads.size(), r.heads.size());
  for (size_t h = 0; h < r.heads.size(); ++h) {
    EXPECT_EQ(back.heads[h].layer, r.heads[h].layer);
    EXPECT_EQ(back.heads[h].head, r.heads[h].head);
    for (size_t k = 0; k < r.heads[h].metrics.size(); ++k) EXPECT_NEAR(back.heads[h].metrics[k], r.heads[h].metrics[k], 1e-12);
    ASSERT_EQ(back.heads[h].top.size(), r.heads[h].top.size());
  }
  EXPECT_THROW(scan_result_from_json("{\"windows\": 3}"), Error);
  EXPECT_THROW(scan_result_from_json("not json"), Error);
}

TEST(HeadScan, CancelStopsWithNoResult) {
  const auto m = load_model("builtin:fortunes-en");
  Engine engine(m, make_cpu_backend());
  std::atomic<bool> cancel{false};
  int calls = 0;
  ScanOptions o;
  o.window = 16;
  EXPECT_THROW(scan_corpus(engine, corpus_file("scan-cancel"), o,
                           [&](const ScanProgress&) {
                             if (++calls == 2) cancel = true;
                           },
                           &cancel),
               Cancelled);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace attnviz
