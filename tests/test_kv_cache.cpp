// Incremental recomputation through the KV cache must give exactly what a full
// recompute gives: appending, editing in the middle, deleting, and the sliding window.
#include <gtest/gtest.h>

#include <random>

#include "core/engine/engine.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

class KvCache : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const bool gpt2 = std::string(GetParam()) == "gpt2";
    const auto c = gpt2 ? test::small_config("gpt2", 2, 24, 3, 3, 30, 40) : test::small_config("llama", 2, 32, 4, 2, 30, 40);
    model_ = load_model(test::make_model_dir(c, 11, GetParam()));
    std::mt19937 rng(5);
    for (int i = 0; i < 30; ++i) ids_.push_back(static_cast<int>(rng() % 30));
  }
  // A fresh engine's full result for `ids`.
  Trace full(const std::vector<int>& ids, int block_size = 0) {
    Engine e(model_, make_cpu_backend());
    if (block_size) e.set_block_size(block_size);
    return e.run(ids);
  }
  std::shared_ptr<const Model> model_;
  std::vector<int> ids_;
};

// Tight: the same float operations in the same order per row, so only reassociation in
// the matrix products can differ.
constexpr double kTol = 1e-5;

TEST_P(KvCache, AppendingOneTokenAtATimeEqualsFullRecompute) {
  Engine e(model_, make_cpu_backend());
  std::vector<int> typed;
  for (int t : ids_) {
    typed.push_back(t);
    const Trace& inc = e.run(typed);
    EXPECT_EQ(e.last_recomputed_from(), static_cast<int>(typed.size()) - 1) << "only the new row is computed";
    ASSERT_EQ(test::compare_traces(inc, full(typed), kTol), "") << "after " << typed.size() << " tokens";
  }
}

TEST_P(KvCache, EditInTheMiddleRecomputesFromThere) {
  Engine e(model_, make_cpu_backend());
  e.run(ids_);
  auto edited = ids_;
  edited[12] = (edited[12] + 1) % 30;
  const Trace& inc = e.run(edited);
  EXPECT_EQ(e.last_recomputed_from(), 12);
  EXPECT_EQ(test::compare_traces(inc, full(edited), kTol), "");
}

TEST_P(KvCache, DeletingAtTheEndAndInsertingMatch) {
  Engine e(model_, make_cpu_backend());
  e.run(ids_);
  std::vector<int> shorter(ids_.begin(), ids_.end() - 4);
  EXPECT_EQ(test::compare_traces(e.run(shorter), full(shorter), kTol), "");
  auto inserted = shorter;
  inserted.insert(inserted.begin() + 3, 7);
  EXPECT_EQ(test::compare_traces(e.run(inserted), full(inserted), kTol), "");
  EXPECT_EQ(e.last_recomputed_from(), 3);
}

TEST_P(KvCache, SlidingWindowKeepsLastBlockSizeTokensAtPositionsFromZero) {
  Engine e(model_, make_cpu_backend());
  e.set_block_size(8);
  std::vector<int> typed(ids_.begin(), ids_.begin() + 8);
  e.run(typed);
  typed.push_back(ids_[8]);  // the 9th token pushes the first out of the window
  const Trace& t = e.run(typed);
  EXPECT_EQ(t.dropped, 1);
  EXPECT_EQ(t.T(), 8);
  EXPECT_EQ(e.last_recomputed_from(), 0) << "positions shift, so everything is recomputed";
  const std::vector<int> window(typed.begin() + 1, typed.end());
  // Same as running just the window: positions restart at 0 (nanoGPT idx[:, -block_size:]).
  EXPECT_EQ(test::compare_traces(t, full(window), kTol), "");
  EXPECT_EQ(t.tokens, window);
}

TEST_P(KvCache, UnchangedInputComputesNothing) {
  Engine e(model_, make_cpu_backend());
  e.run(ids_);
  e.run(ids_);
  EXPECT_EQ(e.last_recomputed_from(), static_cast<int>(ids_.size()));
}

INSTANTIATE_TEST_SUITE_P(Arch, KvCache, ::testing::Values("gpt2", "llama"));

TEST(Engine, RejectsEmptyInputAndIdsOutsideTheVocabulary) {
  const auto model = load_model(test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 10, 8), 1, "bad"));
  Engine e(model, make_cpu_backend());
  EXPECT_THROW(e.run({}), Error);
  try {
    e.run({1, 2, 10});
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("token id 10 at position 2 is outside the vocabulary (ids 0 … 9)"), std::string::npos)
        << err.what();
  }
  EXPECT_THROW(e.set_block_size(0), Error);
  EXPECT_THROW(e.set_block_size(9), Error);
  // A failed run leaves the engine usable.
  EXPECT_EQ(e.run({1, 2, 3}).T(), 3);
}

}  // namespace
}  // namespace attnviz
