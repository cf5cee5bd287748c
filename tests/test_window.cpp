// Real sliding-window attention and the architectures after llama, on the CPU backend
// against the literal reference loops (core/engine/reference.cpp, double precision):
// every recorded stage and the logits within 1e-4 relative, −inf identical.
//   - the window rule at W ∈ {1, 2, T−1, T, T+1}: query i sees exactly keys [i−W+1, i];
//   - one small random model per family (qwen3, gemma2, gemma3_text, phi3, smollm3, olmo2,
//     granite, mistral/qwen2 windows), built from its own config.json keys;
//   - typing token by token through a local layer (the KV cache) equals a fresh pass;
//   - ablation on a windowed, soft-capped model.
// The PyTorch side of the same checks is tests/reference/arch_parity.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "core/engine/engine.h"
#include "core/engine/reference.h"
#include "core/error.h"
#include "core/model/random_model.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::random_ids;

// A small config of `type` from JSON keys over a llama-like base (4 heads, 2 KV heads, d 16).
ModelConfig small(const std::string& type, nlohmann::json extra, int layers = 3) {
  nlohmann::json j = {{"model_type", type},        {"vocab_size", 97},         {"hidden_size", 64},
                      {"intermediate_size", 96},   {"num_hidden_layers", layers}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},  {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},     {"tie_word_embeddings", false}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return parse_config(j, "test config " + type);
}

std::shared_ptr<const Model> model_of(const ModelConfig& c, const std::string& tag, uint64_t seed = 3) {
  return load_model(test::make_model_dir(c, seed, tag));
}

TEST(WindowRule, QueryISeesExactlyKeysIMinusWPlusOneToI) {
  const int T = 12;
  for (int W : {1, 2, T - 1, T, T + 1}) {
    const auto m = model_of(small("mistral", {{"sliding_window", W}}, 2), "window_" + std::to_string(W));
    ASSERT_EQ(m->config.layer(0).window, W);
    const auto ids = random_ids(T, 97, 5);
    Engine engine(m, make_cpu_backend());
    const Trace& fast = engine.run(ids);
    const Trace ref = reference_forward(*m, ids);
    EXPECT_EQ(test::compare_traces(fast, ref, 1e-4), "") << "W=" << W;
    for (const LayerTrace& lt : fast.layers) {
      ASSERT_EQ(lt.window, W);
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < T; ++i) {
          int seen = 0;
          double sum = 0;
          for (int j = 0; j < T; ++j) {
            const bool visible = j <= i && j >= i - W + 1;  // written out, not through attention_masked
            ASSERT_EQ(std::isinf(lt.value(Stage::Masked, h, i, j)), !visible) << "W=" << W << " i=" << i << " j=" << j;
            if (!visible) {
              ASSERT_EQ(lt.probs.at(h, i, j), 0.f);
            }
            seen += visible;
            sum += lt.probs.at(h, i, j);
          }
          ASSERT_EQ(seen, std::min(i + 1, W));
          ASSERT_NEAR(sum, 1.0, 1e-5);
        }
    }
  }
}

TEST(WindowRule, AWindowAsLongAsTheTextChangesNothing) {
  // W ≥ T: the same numbers as a global layer (the window hides nothing yet).
  const int T = 10;
  const auto global = model_of(small("mistral", {}, 2), "window_none", 9);
  const auto local = model_of(small("mistral", {{"sliding_window", T}}, 2), "window_T", 9);
  const auto ids = random_ids(T, 97, 2);
  Engine a(global, make_cpu_backend()), b(local, make_cpu_backend());
  EXPECT_EQ(test::compare_traces(b.run(ids), a.run(ids), 1e-6), "");
  // One token more and the first key drops out of the last query's view: they must differ.
  const auto more = random_ids(T + 1, 97, 2);
  EXPECT_NE(test::compare_traces(b.run(more), a.run(more), 1e-4), "");
}

struct Family {
  const char* name;
  const char* type;
  nlohmann::json extra;
};

class FamilyVsReference : public ::testing::TestWithParam<Family> {};
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

TEST_P(FamilyVsReference, EveryStageAndTheLogitsMatchAcrossTheWindow) {
  const Family& f = GetParam();
  const ModelConfig c = small(f.type, f.extra);
  const auto m = model_of(c, std::string("family_") + f.name);
  const int T = 17;  // longer than every window below
  const auto ids = random_ids(T, 97, 11);
  Engine engine(m, make_cpu_backend());
  const Trace& fast = engine.run(ids);
  const Trace ref = reference_forward(*m, ids);
  EXPECT_EQ(test::compare_traces(fast, ref, 1e-4), "") << f.name;
  double err = 0, mx = 0;
  for (int i = 0; i < fast.logits.numel(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(fast.logits.data[i] - ref.logits.data[i])));
    mx = std::max(mx, std::abs(static_cast<double>(ref.logits.data[i])));
  }
  EXPECT_LE(err / mx, 1e-4) << f.name << " logits";
  for (size_t l = 0; l < fast.layers.size(); ++l)
    EXPECT_EQ(fast.layers[l].has(Stage::Capped), c.layer(static_cast<int>(l)).softcap > 0) << f.name;
}

const Family kFamilies[] = {
    {"qwen3", "qwen3", {{"head_dim", 24}}},
    {"qwen3_window", "qwen3", {{"use_sliding_window", true}, {"sliding_window", 5}, {"max_window_layers", 1}}},
    {"gemma2", "gemma2",
     {{"head_dim", 16}, {"sliding_window", 6}, {"attn_logit_softcapping", 3.0}, {"final_logit_softcapping", 4.0},
      {"query_pre_attn_scalar", 12}}},
    {"gemma3_text", "gemma3_text",
     {{"head_dim", 16}, {"sliding_window", 4}, {"sliding_window_pattern", 3}, {"rope_local_base_freq", 100.0},
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}, {"query_pre_attn_scalar", 16}}},
    {"phi3", "phi3",
     {{"partial_rotary_factor", 0.5}, {"sliding_window", 7}, {"original_max_position_embeddings", 64},
      {"rope_scaling", {{"type", "longrope"}, {"short_factor", {1.0, 1.5, 2.0, 3.0}}, {"long_factor", {2.0, 3.0, 4.0, 5.0}}}}}},
    {"phi3_long", "phi3",  // T = 17 > original 16: the long factors
     {{"partial_rotary_factor", 0.5}, {"original_max_position_embeddings", 16},
      {"rope_scaling", {{"type", "longrope"}, {"short_factor", {1.0, 1.5, 2.0, 3.0}}, {"long_factor", {2.0, 3.0, 4.0, 5.0}}}}}},
    {"smollm3", "smollm3", {{"no_rope_layers", {1, 0, 1}}}},
    {"olmo2", "olmo2", nlohmann::json::object()},
    {"granite", "granite",
     {{"attention_multiplier", 0.2}, {"embedding_multiplier", 3.0}, {"residual_multiplier", 0.5}, {"logits_scaling", 2.0}}},
    {"qwen2_window", "qwen2", {{"use_sliding_window", true}, {"sliding_window", 3}, {"max_window_layers", 2}}},
};
INSTANTIATE_TEST_SUITE_P(Families, FamilyVsReference, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(WindowTyping, AppendingThroughLocalLayersEqualsAFreshPass) {
  const auto m = model_of(small("gemma2", {{"head_dim", 16}, {"sliding_window", 5}, {"attn_logit_softcapping", 3.0}}),
                          "window_typing");
  const auto ids = random_ids(30, 97, 4);
  Engine typing(m, make_cpu_backend());
  std::vector<int> typed;
  for (int i = 0; i < 30; ++i) {
    typed.push_back(ids[static_cast<size_t>(i)]);
    typing.run(typed);
    ASSERT_EQ(typing.last_recomputed_from(), i) << "an append computes only the new row";
  }
  Engine fresh(m, make_cpu_backend());
  EXPECT_EQ(test::compare_traces(typing.trace(), fresh.run(typed), 1e-5), "");
  EXPECT_EQ(test::compare_traces(typing.trace(), reference_forward(*m, typed), 1e-4), "");
}

// GPT-OSS: sinks, experts, YaRN without truncation, windows of 3 on layers 0 and 2. Typed
// token by token (appends), with a compact trace (rows recomputed), and after an edit in the
// middle, every stage, sink, router, expert choice and the logits equal the reference loops.
ModelConfig gpt_oss_small() {
  return small("gpt_oss", {{"head_dim", 16}, {"num_local_experts", 5}, {"num_experts_per_tok", 2},
                           {"sliding_window", 3}, {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
                           {"max_position_embeddings", 1024},
                           {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                             {"truncate", false}, {"original_max_position_embeddings", 256}}}});
}

TEST(GptOss, TypingCompactAndEditedTracesEqualTheReference) {
  const auto m = model_of(gpt_oss_small(), "gpt_oss_typing");
  ASSERT_TRUE(m->config.attn_sinks);
  ASSERT_EQ(m->config.experts.count, 5);
  const auto ids = random_ids(20, 97, 6);
  for (const bool compact : {false, true}) {
    Engine typing(m, make_cpu_backend());
    if (compact) typing.set_matrices(Engine::Matrices::kRecompute);
    std::vector<int> typed;
    for (int i = 0; i < 20; ++i) {
      typed.push_back(ids[static_cast<size_t>(i)]);
      typing.run(typed);
      ASSERT_EQ(typing.last_recomputed_from(), i) << "an append computes only the new row";
    }
    EXPECT_EQ(test::compare_traces(typing.trace(), reference_forward(*m, typed), 1e-4), "") << "compact " << compact;
    typed[9] = (typed[9] + 1) % 97;  // an edit: rows from 9 again
    const Trace& edited = typing.run(typed);
    EXPECT_EQ(test::compare_traces(edited, reference_forward(*m, typed), 1e-4), "") << "edited, compact " << compact;
    for (const LayerTrace& lt : edited.layers)
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < 20; ++i) {
          double sum = lt.sink.data[static_cast<size_t>(h * 20 + i)];
          for (int j = 0; j <= i; ++j) sum += lt.value(Stage::Probs, h, i, j);
          ASSERT_NEAR(sum, 1.0, 1e-5) << "probs + sink, row " << i;
        }
  }
}

// The experts are held as float32 and counted in the parameters (parameter_counts): a model
// whose experts would not fit in the memory available is refused before any tensor is read.
TEST(GptOss, ExpertsThatDoNotFitAreRefusedBeforeLoading) {
  const ModelConfig c = gpt_oss_small();
  const std::string dir = test::make_model_dir(c, 3, "gpt_oss_memory");
  const double experts = 3 * 5 * (3.0 * 64 * 96 + 2 * 96 + 64) * 4;  // 1.1 MB as float32
  EXPECT_GE(static_cast<double>(parameter_counts(c).mlp) * 4, experts);
  ::setenv("ATTNVIZ_MAX_MEMORY_MB", "0.9", 1);  // less than the experts alone
  const std::string err = test::load_error(dir);
  ::unsetenv("ATTNVIZ_MAX_MEMORY_MB");
  EXPECT_NE(err.find("is available"), std::string::npos) << err;
  EXPECT_EQ(test::load_error(dir), "");  // and with the memory there, it loads
}

TEST(WindowAblation, AblatedHeadsOnALocalSoftCappedModelMatchTheReference) {
  const auto m = model_of(small("gemma2", {{"head_dim", 16}, {"sliding_window", 4}, {"attn_logit_softcapping", 2.0}}),
                          "window_ablation");
  const auto ids = random_ids(14, 97, 8);
  for (AblationMode mode : {AblationMode::Zero, AblationMode::Mean}) {
    Ablation a;
    a.mode = mode;
    a.heads = {{0, 1}, {1, 3}};
    auto backend = make_cpu_backend();
    backend->set_ablation(a);
    Engine engine(m, std::move(backend));
    EXPECT_EQ(test::compare_traces(engine.run(ids), reference_forward(*m, ids, a), 1e-4), "");
  }
}

// Gemma 4: local layers of head size 16 and global ones of 32 (their proportional RoPE turning
// a quarter of the pairs), per-layer embeddings, layer scalars, and the last two layers reading
// layer 2's (local) and 3's (global) keys and values with a double-wide MLP; `k_eq_v` adds V = K
// with one KV head on the global layers. Checked against PyTorch in gemma4_parity.py; here the
// engine's appends, compact traces and edits against its own fresh passes.
ModelConfig gemma4_small(bool k_eq_v, bool experts = false) {
  return small("gemma4_text", {{"head_dim", 16}, {"global_head_dim", 32}, {"sliding_window", 3},
                               {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                                                "sliding_attention", "full_attention"}},
                               {"num_kv_shared_layers", 2}, {"use_double_wide_mlp", true},
                               {"hidden_size_per_layer_input", 8}, {"final_logit_softcapping", 30.0},
                               {"attention_k_eq_v", k_eq_v}, {"num_global_key_value_heads", 1},
                               {"enable_moe_block", experts}, {"num_experts", 5}, {"top_k_experts", 2},
                               {"moe_intermediate_size", 24}},
               6);
}

TEST(Gemma4, TypingCompactAndEditedTracesEqualAFreshPass) {
  for (const int variant : {0, 1, 2}) {  // plain; V = K; V = K with experts beside the MLP
    const bool k_eq_v = variant > 0;
    const auto m = model_of(gemma4_small(k_eq_v, variant == 2), "gemma4_typing_" + std::to_string(variant));
    const ModelConfig& c = m->config;
    ASSERT_EQ(c.head_size_at(0), 16);
    ASSERT_EQ(c.head_size_at(5), 32);
    ASSERT_EQ(c.kv_heads_at(5), k_eq_v ? 1 : 2);
    ASSERT_EQ(c.layer(4).kv_source, 2);
    ASSERT_EQ(c.layer(5).kv_source, 3);
    ASSERT_EQ(c.inner_at(4), 2 * c.n_inner);
    const auto ids = random_ids(16, 97, 6);
    Engine fresh(m, make_cpu_backend());
    const Trace& full = fresh.run(ids);
    for (int l : {4, 5}) {  // a shared layer holds its source's keys and values
      const int src = c.layer(l).kv_source;
      EXPECT_EQ(full.layers[static_cast<size_t>(l)].k.data, full.layers[static_cast<size_t>(src)].k.data);
      EXPECT_EQ(full.layers[static_cast<size_t>(l)].v.data, full.layers[static_cast<size_t>(src)].v.data);
    }
    EXPECT_NE(full.layers[5].q.data, full.layers[3].q.data);  // but its own queries
    for (const bool compact : {false, true}) {
      Engine typing(m, make_cpu_backend());
      if (compact) typing.set_matrices(Engine::Matrices::kRecompute);
      std::vector<int> typed;
      for (int i = 0; i < 16; ++i) {
        typed.push_back(ids[static_cast<size_t>(i)]);
        typing.run(typed);
        ASSERT_EQ(typing.last_recomputed_from(), i) << "an append computes only the new row";
      }
      Engine again(m, make_cpu_backend());
      if (compact) again.set_matrices(Engine::Matrices::kRecompute);
      EXPECT_EQ(test::compare_traces(typing.trace(), again.run(typed), 1e-5), "") << "compact " << compact;
      typed[7] = (typed[7] + 1) % 97;  // an edit: rows from 7 again
      const Trace& edited = typing.run(typed);
      Engine after(m, make_cpu_backend());
      if (compact) after.set_matrices(Engine::Matrices::kRecompute);
      EXPECT_EQ(test::compare_traces(edited, after.run(typed), 1e-5), "") << "edited, compact " << compact;
      if (variant == 2)  // the experts' choice is recorded, and typed rows choose as a fresh pass does
        for (int l = 0; l < 6; ++l) {
          ASSERT_EQ(edited.layers[static_cast<size_t>(l)].experts.shape, (std::vector<int64_t>{16, 2}));
          EXPECT_EQ(edited.layers[static_cast<size_t>(l)].experts.data, after.trace().layers[static_cast<size_t>(l)].experts.data);
          EXPECT_EQ(edited.layers[static_cast<size_t>(l)].expert_weights.data.size(), 32u);
        }
    }
  }
}

// The literal reference loops (float64, core/engine/reference.cpp) read Gemma 4's per-layer
// description too: each layer's head size and KV heads, V = K, the weightless V-norm, shared
// K and V, per-layer embeddings and layer scalars; the engine matches them on both variants,
// plain and with head ablation, and they refuse the experts by name.
TEST(Gemma4, TheReferenceLoopsMatchTheEngine) {
  for (const bool k_eq_v : {false, true}) {
    const auto m = model_of(gemma4_small(k_eq_v), "gemma4_reference_" + std::to_string(k_eq_v));
    const auto ids = random_ids(14, 97, 9);
    Engine engine(m, make_cpu_backend());
    EXPECT_EQ(test::compare_traces(engine.run(ids), reference_forward(*m, ids), 1e-4), "") << "k_eq_v " << k_eq_v;
    const Ablation a{AblationMode::Mean, {{1, 0}, {5, 3}}};  // a local and a shared global layer's heads
    Engine ablated(m, make_cpu_backend());
    ablated.set_ablation(a);
    EXPECT_EQ(test::compare_traces(ablated.run(ids), reference_forward(*m, ids, a), 1e-4), "") << "ablated, k_eq_v " << k_eq_v;
  }
  const auto moe = model_of(gemma4_small(true, true), "gemma4_reference_moe");
  try {
    reference_forward(*moe, random_ids(4, 97, 1));
    ADD_FAILURE() << "the reference loops ran Gemma 4's experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("experts"), std::string::npos) << e.what();
  }
}

// The released E2B, E4B, 12B, 26B-A4B and 31B text configs give the parameter counts computed from their
// definition (each layer's own head size, KV heads and MLP width; shared layers' k/v left
// out; E2B's per-layer embeddings): 31B's is the 30.7B of its model card.
TEST(Gemma4, PresetsHaveTheReleasedShapes) {
  const ModelConfig e2b = preset_config("gemma4-e2b");
  EXPECT_EQ(parameter_counts(e2b).total(), 4628569379);
  EXPECT_EQ(parameter_counts(preset_config("gemma4-31b")).total(), 30697345340);
  EXPECT_EQ(parameter_counts(preset_config("gemma4-26b-a4b")).total(), 25233141790);  // its card's 25.2B
  EXPECT_EQ(parameter_counts(preset_config("gemma4-e4b")).total(), 7463013418);
  EXPECT_EQ(parameter_counts(preset_config("gemma4-12b")).total(), 11907350320);
  const ModelConfig e4b = preset_config("gemma4-e4b");
  for (int l = 24; l < 42; ++l)  // E4B's shared layers read layer 23 (global) or 22 (local)
    EXPECT_EQ(e4b.layer(l).kv_source, e4b.layer(l).window ? 22 : 23) << l;
  EXPECT_EQ(e4b.layer(23).kv_source, -1);
  for (int l = 15; l < 35; ++l)  // E2B's shared layers read layer 14 (global) or 13 (local)
    EXPECT_EQ(e2b.layer(l).kv_source, e2b.layer(l).window ? 13 : 14) << l;
  EXPECT_EQ(e2b.layer(14).kv_source, -1);
  // Global layers: the frequencies of a 512-dim head, the first 64 of 256 pairs turning.
  const std::vector<double> f = rope_inv_freq(e2b, 4, 100);
  ASSERT_EQ(f.size(), 256u);
  for (int i = 0; i < 256; ++i)
    EXPECT_DOUBLE_EQ(f[static_cast<size_t>(i)], i < 64 ? std::pow(1e6, -2.0 * i / 512) : 0.0) << i;
  EXPECT_EQ(rope_inv_freq(e2b, 0, 100).size(), 128u);
  EXPECT_DOUBLE_EQ(rope_inv_freq(e2b, 0, 100)[127], std::pow(1e4, -2.0 * 127 / 256));
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {

// A block_size change that leaves the window as it is (nothing cropped, the text within the
// new size) keeps the cache: the next key computes its own row only, and the trace equals a
// fresh engine's at that size. One that crops the text recomputes from the start.
TEST(BlockSize, ChangingItAboveTheTextKeepsTheCache) {
  const auto m = test::small_model("llama", 4, 2, 61, 5, "block-size-cache");
  const auto ids = test::random_ids(20, 61, 4);
  Engine e(m, make_cpu_backend());
  e.run(std::vector<int>(ids.begin(), ids.begin() + 12));
  e.set_block_size(16);  // still above the 12 tokens, and the 13 of the next run
  const Trace& t = e.run(std::vector<int>(ids.begin(), ids.begin() + 13));
  EXPECT_EQ(e.last_recomputed_from(), 12);
  EXPECT_EQ(t.block_size, 16);
  Engine fresh(m, make_cpu_backend());
  fresh.set_block_size(16);
  EXPECT_EQ(test::compare_traces(t, fresh.run(std::vector<int>(ids.begin(), ids.begin() + 13)), 1e-5), "");
  e.set_block_size(10);  // crops 3 tokens: every position moves
  e.run(std::vector<int>(ids.begin(), ids.begin() + 13));
  EXPECT_EQ(e.last_recomputed_from(), 0);
}

}  // namespace
}  // namespace attnviz
