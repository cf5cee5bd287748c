// The guided lesson: both shipped lesson files (English, Chinese) have the same steps and
// fill every placeholder; each step's numbers for a row of a real trace equal what the
// engine recorded (its own kernels: scores, softmax, head output) within a stated
// tolerance; malformed lesson files are errors naming the file and the step.
#include <gtest/gtest.h>

#include <cmath>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "tests/test_util.h"
#include "ui/state/lesson.h"

namespace attnviz::ui {
namespace {

// A trace of the built-in GQA model (8 query heads, 2 KV heads) on a repeated sentence.
struct Run {
  std::shared_ptr<const Model> model = load_model("builtin:fortunes-en");
  Engine engine{model, make_cpu_backend()};
  const Trace& trace = engine.run_text("The cat sat on the mat. The cat sat on the mat.");
};
const Run& run() {
  static const Run r;
  return r;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-6); }

TEST(Lesson, BothLanguagesHaveTheSameStepsAndFillEveryPlaceholder) {
  const std::string en = lesson_file("en"), zh = lesson_file("zh");
  ASSERT_FALSE(en.empty());
  ASSERT_FALSE(zh.empty());
  const Lesson a = load_lesson(en), b = load_lesson(zh);
  ASSERT_EQ(a.steps.size(), 13u);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  const Trace& tr = run().trace;
  const ModelConfig& c = run().model->config;
  const RowNumbers n = row_numbers(tr, c, 1, 5, tr.T() - 1, 3);
  for (size_t k = 0; k < a.steps.size(); ++k) {
    EXPECT_EQ(a.steps[k].id, b.steps[k].id);
    EXPECT_EQ(a.steps[k].stage, b.steps[k].stage) << a.steps[k].id;
    EXPECT_EQ(a.steps[k].show, b.steps[k].show) << a.steps[k].id;
    for (const Lesson* l : {&a, &b}) {  // walk every step: no placeholder left unfilled
      const std::string text = fill_placeholders(l->steps[k].title + l->steps[k].body + l->steps[k].body_sink, n);
      EXPECT_EQ(text.find('{'), std::string::npos) << l->language << " " << l->steps[k].id << ": " << text;
    }
  }
  // The thirteen steps, in the order a class meets them: the softmax, then where a row's
  // weight goes when nothing matches; the block_size crop, then a real sliding window beside
  // it; the KV cache, then a memory that does not grow.
  const char* want[] = {"qk",  "dot",        "scale",  "mask",         "exp",      "softmax", "sink",
                        "weighted_v", "gqa", "window", "local_window", "kv_cache", "memory"};
  for (size_t k = 0; k < 13; ++k) EXPECT_EQ(a.steps[k].id, want[k]);
  // The softmax and sink steps say it otherwise where the head has a learned sink.
  EXPECT_FALSE(a.steps[5].body_sink.empty());
  EXPECT_FALSE(b.steps[6].body_sink.empty());
  EXPECT_EQ(a.steps[6].body_for(false), a.steps[6].body);
  EXPECT_EQ(a.steps[6].body_for(true), a.steps[6].body_sink);
  EXPECT_EQ(a.steps[7].body_for(true), a.steps[7].body);  // no variant: the one body
  EXPECT_NE(fill_placeholders("{score} and {shared_heads}", n).find(", "), std::string::npos);
}

// The lesson's plain loops against the engine's kernels, for several rows, keys and heads:
// q·k against `scores` (1e-4 relative), the softmax weights against `probs` (1e-5 absolute),
// Σ p·v against the head output `out` (1e-4 relative to the row's largest value).
TEST(Lesson, RowNumbersMatchTheRecordedTrace) {
  const Trace& tr = run().trace;
  const ModelConfig& c = run().model->config;
  for (int layer : {0, 1})
    for (int head : {0, 3, 4, 7})
      for (int i : {0, 5, tr.T() - 1}) {
        const int j = i / 2;
        const RowNumbers n = row_numbers(tr, c, layer, head, i, j);
        const LayerTrace& lt = tr.layers[static_cast<size_t>(layer)];
        EXPECT_EQ(n.kv_head, c.kv_head_of(head));
        EXPECT_LT(rel(n.score, lt.scores.at(head, i, j)), 1e-4) << layer << "," << head << "," << i;
        EXPECT_NEAR(n.scaled, n.score / std::sqrt(static_cast<double>(c.head_size)), 1e-9);
        EXPECT_EQ(n.masked_count, tr.T() - 1 - i);
        double sum = 0.0, out_max = 0.0;
        for (int jj = 0; jj <= i; ++jj) {
          EXPECT_NEAR(n.weights[static_cast<size_t>(jj)], lt.probs.at(head, i, jj), 1e-5);
          sum += n.weights[static_cast<size_t>(jj)];
        }
        EXPECT_NEAR(sum, 1.0, 1e-9);
        EXPECT_NEAR(n.row_sum * n.weights[static_cast<size_t>(j)], n.exp_row[static_cast<size_t>(j)], 1e-9);
        for (int x = 0; x < c.head_size; ++x)
          out_max = std::max(out_max, std::abs(static_cast<double>(lt.out.at(head, i, x))));
        for (int x = 0; x < c.head_size; ++x)
          EXPECT_LT(std::abs(n.out_i[static_cast<size_t>(x)] - lt.out.at(head, i, x)), 1e-4 * std::max(out_max, 1e-6));
      }
  const RowNumbers n = row_numbers(tr, c, 0, 5, 2, 1);
  EXPECT_EQ(n.shared_heads, (std::vector<int>{4, 5, 6, 7}));  // h / (8 / 2) = 1
  EXPECT_EQ(n.kv_cache_floats, 2LL * c.n_layer * tr.T() * c.n_kv_head * c.head_size);
  EXPECT_THROW(row_numbers(tr, c, 0, 0, 3, 4), Error);  // the key after the row is masked
  EXPECT_THROW(row_numbers(tr, c, 2, 0, 3, 1), Error);  // no layer 2
}

// GPT-OSS's learned sinks: the lesson's row adds the head's sink logit to the softmax, so its
// weights equal the engine's probs (1e-5) and sum with the sink weight to 1, and the sink
// weight equals the recorded `sink` (1e-5); the first key's weight is the row's first weight.
TEST(Lesson, RowNumbersIncludeALearnedSink) {
  const nlohmann::json j = {{"model_type", "gpt_oss"}, {"vocab_size", 128}, {"hidden_size", 64},
                            {"intermediate_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                            {"num_key_value_heads", 2}, {"head_dim", 16}, {"num_local_experts", 4},
                            {"num_experts_per_tok", 2}, {"sliding_window", 4},
                            {"layer_types", {"sliding_attention", "full_attention"}}, {"max_position_embeddings", 64},
                            {"rms_norm_eps", 1e-5}, {"rope_theta", 150000}, {"attention_bias", true},
                            {"tie_word_embeddings", false}};
  const ModelConfig c = parse_config(j, "gpt_oss");
  ASSERT_TRUE(c.attn_sinks);
  std::shared_ptr<const Model> model = load_model(test::make_model_dir(c, 9, "lesson-sink"));
  Engine engine{model, make_cpu_backend()};
  const Trace& tr = engine.run_text("the cat sat on");
  for (int layer : {0, 1})
    for (int head : {0, 3})
      for (int i : {0, 3, tr.T() - 1}) {
        const RowNumbers n = row_numbers(tr, c, layer, head, i, i);
        const LayerTrace& lt = tr.layers[static_cast<size_t>(layer)];
        ASSERT_TRUE(n.has_sink);
        EXPECT_DOUBLE_EQ(n.sink_logit, lt.sinks[static_cast<size_t>(head)]);
        const float recorded = lt.sink.data[static_cast<size_t>(head * lt.sink.dim(1) + i)];  // (H, T)
        EXPECT_NEAR(n.sink_weight, recorded, 1e-5) << layer << "," << head << "," << i;
        double sum = n.sink_weight;
        for (int jj = 0; jj <= i; ++jj) {
          EXPECT_NEAR(n.weights[static_cast<size_t>(jj)], lt.probs.at(head, i, jj), 1e-5);
          sum += n.weights[static_cast<size_t>(jj)];
        }
        EXPECT_NEAR(sum, 1.0, 1e-9);
        EXPECT_DOUBLE_EQ(n.first_weight, n.weights[static_cast<size_t>(n.first_key)]);
      }
  EXPECT_FALSE(row_numbers(run().trace, run().model->config, 1, 2, 4, 1).has_sink);  // a llama has none
}

// A local layer (a mistral-style model, every layer a window of 3 keys): row i's numbers
// hide the keys before i − 2 and still equal the engine's weights and output; the window
// placeholders say what query i sees beside the block_size crop.
TEST(Lesson, RowNumbersHonourALocalLayersWindow) {
  nlohmann::json j = config_to_json(test::small_config("llama", 2, 32, 4, 2, 128, 64));
  j["model_type"] = "mistral";
  j["sliding_window"] = 3;
  const ModelConfig c = parse_config(j, "test config");
  ASSERT_TRUE(c.any_local());
  std::shared_ptr<const Model> model = load_model(test::make_model_dir(c, 7, "lesson-window"));
  Engine engine{model, make_cpu_backend()};
  const Trace& tr = engine.run_text("abcabcabcab");
  ASSERT_EQ(tr.layers[0].window, 3);
  const LayerTrace& lt = tr.layers[1];
  for (int head : {0, 3})
    for (int i : {0, 2, 5, tr.T() - 1}) {
      const RowNumbers n = row_numbers(tr, model->config, 1, head, i, i);
      EXPECT_EQ(n.window, 3);
      EXPECT_EQ(n.first_key, std::max(0, i - 2));
      EXPECT_EQ(n.outside_count, n.first_key);
      double sum = 0.0;
      for (int jj = 0; jj <= i; ++jj) {
        EXPECT_NEAR(n.weights[static_cast<size_t>(jj)], lt.probs.at(head, i, jj), 1e-5) << head << "," << i << "," << jj;
        if (jj < n.first_key) {
          EXPECT_EQ(n.weights[static_cast<size_t>(jj)], 0.0);
        }
        sum += n.weights[static_cast<size_t>(jj)];
      }
      EXPECT_NEAR(sum, 1.0, 1e-9);
      for (int x = 0; x < c.head_size; ++x)
        EXPECT_NEAR(n.out_i[static_cast<size_t>(x)], lt.out.at(head, i, x), 1e-4);
    }
  const RowNumbers n = row_numbers(tr, model->config, 0, 0, 6, 5);
  EXPECT_EQ(fill_placeholders("{first_key}..{i} of {seen_count}, W {window}, {outside_count} older, T {T} of {total}", n),
            "4..6 of 3, W 3, 4 older, T 11 of 11");
}

TEST(Lesson, MalformedFilesNameTheFileAndTheStep) {
  const std::string dir = test::temp_dir("lesson");
  const std::string ok = R"({"id": "dot", "title": "t", "body": "b {score}", "stage": "scores", "show": "dot"})";
  const std::pair<std::string, std::string> cases[] = {
      {"{ not json", "not valid JSON"},
      {R"({"steps": []})", "at least one step"},
      {R"({"steps": [)" + ok + R"(, {"id": "x", "body": "b"}]})", "step 2 (x): \"title\" must be a non-empty string"},
      {R"({"steps": [{"id": "x", "title": "t", "body": "b", "stage": "softmax"}]})",
       "step 1 (x): unknown stage 'softmax'"},
      {R"({"steps": [{"id": "x", "title": "t", "body": "{nope}"}]})", "step 1 (x): unknown placeholder {nope}"},
      {R"({"steps": [{"id": "x", "title": "t", "body": "b", "show": "pie"}]})", "step 1 (x): unknown \"show\" 'pie'"},
      {R"({"steps": [)" + ok + "," + ok + "]}", "step 2 (dot): the id 'dot' is used twice"},
  };
  int k = 0;
  for (const auto& [text, expect] : cases) {
    const std::string path = dir + "/lesson." + std::to_string(k++) + ".json";
    test::write_bytes(path, text);
    try {
      load_lesson(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
  test::write_bytes(dir + "/good.json", R"({"language": "test", "steps": [)" + ok + "]}");
  EXPECT_EQ(load_lesson(dir + "/good.json").steps.size(), 1u);
}

}  // namespace
}  // namespace attnviz::ui
