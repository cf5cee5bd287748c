// The shipped models (assets/models) keep their promises: both load as builtin:NAME and
// dump every pinned tensor, and fortunes-en has the heads the README promises: a
// previous-token head (mean weight ≥ 0.6 on the previous character of English text) and
// an induction head (mean weight ≥ 0.4 on the character after the earlier occurrence, on
// random strings repeated twice; averaged over several strings, not one lucky seed).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/engine/backend.h"
#include "core/export/dump.h"
#include "core/engine/engine.h"
#include "core/engine/head_scores.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

Engine open(const std::string& spec) { return Engine(load_model(spec), make_backend("cpu", nullptr)); }

TEST(Builtins, BothLoadAndDumpEveryPinnedTensor) {
  for (const char* spec : {"builtin:poems-zh", "builtin:fortunes-en"}) {
    Engine e = open(spec);
    const Model& m = e.model();
    ASSERT_TRUE(m.tokenizer) << spec;
    const std::string text = std::string(spec).find("zh") != std::string::npos ? "床前明月光，疑是地上霜。" : "The cat sat on the mat.";
    const Trace& tr = e.run_text(text);
    ASSERT_GT(tr.T(), 5) << spec;
    const std::string path = test::temp_dir("builtins") + "/dump.safetensors";
    write_dump(tr, path);
    const auto f = SafetensorsFile::open(path);
    for (int l = 0; l < m.config.n_layer; ++l)
      for (int s = 0; s < kStageCount; ++s) {
        if (!tr.layers[static_cast<size_t>(l)].has(static_cast<Stage>(s))) continue;
        const TensorInfo* t = f.find(dump_tensor_name(l, static_cast<Stage>(s)));
        ASSERT_NE(t, nullptr) << spec << " " << dump_tensor_name(l, static_cast<Stage>(s));
        EXPECT_EQ(t->shape, tr.layers[static_cast<size_t>(l)].shape(static_cast<Stage>(s)));
      }
    ASSERT_NE(f.find("logits"), nullptr);
  }
}

TEST(Builtins, PoemsIsMultiHeadGpt2AndFortunesIsGqaLlama) {
  const auto poems = load_model("builtin:poems-zh"), fortunes = load_model("builtin:fortunes-en");
  EXPECT_EQ(poems->config.arch, Arch::Gpt2);
  EXPECT_EQ(poems->config.n_kv_head, poems->config.n_head);
  EXPECT_GE(poems->config.n_ctx, 64);
  EXPECT_EQ(fortunes->config.arch, Arch::Llama);
  EXPECT_LT(fortunes->config.n_kv_head, fortunes->config.n_head);
  EXPECT_GE(fortunes->config.n_layer, 2);
  EXPECT_GE(fortunes->config.n_ctx, 128);
}

float best(const std::vector<HeadScore>& s, float HeadScore::*field) {
  float b = -1;
  for (const auto& h : s) b = std::max(b, h.*field);
  return b;
}

TEST(Builtins, FortunesEnHasAPreviousTokenHeadOnEnglish) {
  Engine e = open("builtin:fortunes-en");
  const Trace& tr = e.run_text(
      "It was the best of times, it was the worst of times; it was the age of wisdom, it was the age of "
      "foolishness.");
  EXPECT_GE(best(score_heads(tr), &HeadScore::previous_token), 0.6f);
}

TEST(Builtins, FortunesEnHasAnInductionHead) {
  Engine e = open("builtin:fortunes-en");
  const Model& m = e.model();
  // The mean over 5 strings of each head's score; the best head must reach 0.4.
  std::vector<double> sum;
  const int seeds = 5;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const auto ids = repeated_random_tokens(m.tokenizer.get(), m.config.vocab_size, std::min(40, e.block_size() / 2), seed);
    const auto s = score_heads(e.run(ids));
    sum.resize(s.size(), 0.0);
    for (size_t i = 0; i < s.size(); ++i) sum[i] += s[i].induction;
  }
  EXPECT_GE(*std::max_element(sum.begin(), sum.end()) / seeds, 0.4);
}

}  // namespace
}  // namespace attnviz
