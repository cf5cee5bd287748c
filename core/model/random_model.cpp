#include "core/model/random_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/families/family.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

namespace {
// Writes model.safetensors, config.json and the tokenizer (`tokenizer_bytes` of
// `tokenizer_file` when one is given, else a character tokenizer of printable ASCII).
void write_random_model_files(const ModelConfig& c, uint64_t seed, const std::string& dir,
                              const std::string& tokenizer_file, const std::string& tokenizer_bytes);

// The random-model presets: small shapes for tests and trying things out, and the shapes
// of real checkpoints (their config.json values: openai-community/gpt2,
// HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B, TinyLlama/TinyLlama-1.1B-Chat-v1.0).
// gpt2 has biases everywhere and KV = H; qwen2 has q/k/v biases.
struct Preset {
  const char* name;
  const char* type;  // model_type: gpt2, llama or qwen2
  int layers, embd, heads, kv_heads, inner, vocab, ctx;
  float eps, theta;
  bool tie;
};
constexpr Preset kPresets[] = {
    // name            type     L   C     H   KV  I     V       ctx    eps    theta       tie
    {"tiny",           "llama", 4,  64,   8,  2,  172,  96,     1024,  1e-5f, 10000.f,    true},
    {"tiny-gpt2",      "gpt2",  4,  64,   4,  4,  256,  96,     1024,  1e-5f, 10000.f,    true},
    {"gpt2-small",     "gpt2",  12, 768,  12, 12, 3072, 50257,  1024,  1e-5f, 10000.f,    true},
    {"llama-small",    "llama", 12, 768,  12, 4,  2048, 32000,  2048,  1e-5f, 10000.f,    false},
    {"smollm2-135m",   "llama", 30, 576,  9,  3,  1536, 49152,  8192,  1e-5f, 100000.f,   true},
    {"qwen2.5-0.5b",   "qwen2", 24, 896,  14, 2,  4864, 151936, 32768, 1e-6f, 1000000.f,  true},
    {"tinyllama-1.1b", "llama", 22, 2048, 32, 4,  5632, 32000,  2048,  1e-5f, 10000.f,    false},
};

// The checkpoints of 2024-25, as their own config.json keys (the values of Qwen/Qwen3-0.6B,
// google/gemma-3-270m, google/gemma-3-1b-pt, meta-llama/Llama-3.2-1B and -3B,
// meta-llama/Llama-3.1-8B, google/gemma-3-4b-pt's text_config, microsoft/Phi-4-mini-instruct,
// HuggingFaceTB/SmolLM3-3B, allenai/OLMo-2-0425-1B), read by parse_config like any
// downloaded one. Phi-4-mini's longrope factors are not the checkpoint's: 48 ones (short)
// and a ramp (long) of the right length stand in for them.
// A preset with a `base` is that preset's JSON with its own keys merged over it (JSON merge
// patch: objects merge key by key, a null removes the key).
struct ConfigPreset {
  const char* name;
  const char* json;
  const char* base = nullptr;
};
constexpr ConfigPreset kConfigPresets[] = {
    // LFM2-350M (the published config.json; its MLP: 2/3 of 6656 rounded up to 256s, 4608).
    {"lfm2-350m", R"({"model_type": "lfm2", "vocab_size": 65536, "hidden_size": 1024, "intermediate_size": 6656,
      "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 8, "norm_eps": 1e-5,
      "conv_L_cache": 3, "conv_bias": false, "block_auto_adjust_ff_dim": true, "block_ffn_dim_multiplier": 1.0,
      "block_multiple_of": 256, "max_position_embeddings": 128000, "rope_theta": 1000000, "tie_embedding": true,
      "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "conv",
                      "full_attention", "conv", "full_attention", "conv", "full_attention", "conv", "full_attention",
                      "conv"]})"},
    // LFM2-1.2B (its config.json: block_ff_dim 12288 adjusted to 8192; full_attn_idxs in place of layer_types).
    {"lfm2-1.2b", R"({"hidden_size": 2048, "intermediate_size": null, "block_ff_dim": 12288, "num_attention_heads": 32,
      "layer_types": null, "full_attn_idxs": [2, 5, 8, 10, 12, 14]})", "lfm2-350m"},
    // LFM2-2.6B: 30 layers and the vocabulary from its model card; the width, heads, the MLP's 10752
    // (its w1 weight's rows) and the attention layers from third-party code, which together give
    // the card's 2,569,272,320 parameters (attnviz-cli info).
    {"lfm2-2.6b", R"({"hidden_size": 2048, "intermediate_size": null, "block_ff_dim": 10752,
      "block_auto_adjust_ff_dim": false, "num_hidden_layers": 30, "num_attention_heads": 32, "layer_types": null,
      "full_attn_idxs": [2, 5, 9, 13, 17, 21, 24, 27]})", "lfm2-350m"},
    // Qwen3.5's text models (the published config.json's text_config).
    {"qwen3.5-0.8b", R"({"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 1024,
      "intermediate_size": 3584, "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2,
      "head_dim": 256, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
      "attention_bias": false, "hidden_act": "silu", "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
      "linear_num_value_heads": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
      "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10], "mrope_interleaved": true}})"},
    {"qwen3.5-2b", R"({"hidden_size": 2048, "intermediate_size": 6144})", "qwen3.5-0.8b"},
    {"qwen3.5-4b", R"({"hidden_size": 2560, "intermediate_size": 9216, "num_hidden_layers": 32, "num_attention_heads": 16,
      "num_key_value_heads": 4, "linear_num_value_heads": 32})", "qwen3.5-0.8b"},
    {"qwen3.5-9b", R"({"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
      "num_attention_heads": 16, "num_key_value_heads": 4, "linear_num_value_heads": 32,
      "tie_word_embeddings": false})", "qwen3.5-0.8b"},
    {"qwen3-0.6b", R"({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
      "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true,
      "attention_bias": false, "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28,
      "hidden_act": "silu"})"},
    // Qwen3-VL-2B's text model (its text_config: the Qwen3-1.7B shape, RoPE θ 5e6 over
    // multi-axis sections, which text reduces to plain RoPE).
    {"qwen3-vl-2b", R"({"model_type": "qwen3_vl_text", "vocab_size": 151936, "hidden_size": 2048,
      "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
      "head_dim": 128, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "rope_theta": 5000000,
      "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true},
      "tie_word_embeddings": true, "attention_bias": false, "hidden_act": "silu"})"},
    // Ministral 3 3B's text model (its text_config, model_type ministral3): Mistral with YaRN
    // ×16 over 16,384 tokens (attention factor 1: mscale = mscale_all_dim) and the query
    // temperature 1 + 0.1·ln(1 + ⌊pos / 16384⌋).
    {"ministral3-3b", R"({"model_type": "ministral3", "vocab_size": 131072, "hidden_size": 3072,
      "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 32, "num_key_value_heads": 8,
      "head_dim": 128, "max_position_embeddings": 262144, "rms_norm_eps": 1e-5, "hidden_act": "silu",
      "sliding_window": null, "tie_word_embeddings": true,
      "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000, "factor": 16, "original_max_position_embeddings": 16384,
                          "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 1, "llama_4_scaling_beta": 0.1}})"},
    // GPT-OSS-20B (its config.json): 24 layers alternating 128-token windows (even layers) and
    // global ones, 64 query heads of 64 over 8 KV heads, a sink logit per head, 32 experts of
    // width 2880 with 4 per token, YaRN x32 over 4,096 tokens without truncation. Random
    // float32 experts take 4.5 GB per layer: write it with --layers.
    {"gpt-oss-20b", R"({"model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
      "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8,
      "head_dim": 64, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4,
      "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
      "max_position_embeddings": 131072, "initial_context_length": 4096, "rms_norm_eps": 1e-5, "rope_theta": 150000,
      "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
                       "original_max_position_embeddings": 4096},
      "attention_bias": true, "swiglu_limit": 7.0, "tie_word_embeddings": false, "hidden_act": "silu"})"},
    {"gemma3-270m", R"({"model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048,
      "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
      "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "rope_local_base_freq": 10000,
      "query_pre_attn_scalar": 256, "sliding_window": 512, "sliding_window_pattern": 6, "rope_scaling": null,
      "final_logit_softcapping": null, "attn_logit_softcapping": null, "hidden_activation": "gelu_pytorch_tanh",
      "tie_word_embeddings": true})"},
    {"gemma3-1b", R"({"vocab_size": 262144, "hidden_size": 1152, "intermediate_size": 6912,
      "num_hidden_layers": 26, "final_logit_softcapping": null, "attn_logit_softcapping": null})", "gemma3-270m"},
    {"gemma3-4b", R"({"vocab_size": 262208, "hidden_size": 2560, "intermediate_size": 10240,
      "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 131072,
      "sliding_window": 1024, "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "final_logit_softcapping": null,
      "attn_logit_softcapping": null})", "gemma3-270m"},
    // Gemma 4 E2B and 31B: their released text_config values (local layers of head size 256,
    // global ones of 512; E2B's per-layer embeddings, its last 20 layers reading layer 13's or
    // 14's keys and values with a double-wide MLP; 31B's global layers with V = K).
    {"gemma4-e2b", R"({"model_type": "gemma4_text", "vocab_size": 262144, "hidden_size": 1536,
      "intermediate_size": 6144, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
      "head_dim": 256, "global_head_dim": 512, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
      "sliding_window": 512, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                          "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                             "rope_theta": 1000000.0}},
      "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true,
      "hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144, "num_kv_shared_layers": 20,
      "use_double_wide_mlp": true, "attention_k_eq_v": false, "enable_moe_block": false})"},
    // A small Gemma 4 with every part of the family at once (local and global head sizes,
    // V = K, KV sharing with double-wide MLPs, per-layer embeddings, experts beside the MLP):
    // for trying it out and for llama.cpp cross-checks (scripts/llama_logits.py).
    {"gemma4-small", R"({"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 6,
      "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 128,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "global_head_dim": 128,
      "attention_k_eq_v": true, "num_global_key_value_heads": 1, "vocab_size": 512, "vocab_size_per_layer_input": 512,
      "hidden_size_per_layer_input": 32, "num_kv_shared_layers": 2, "max_position_embeddings": 4096, "sliding_window": 8,
      "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "full_attention"]})", "gemma4-e2b"},
    {"gemma4-e4b", R"({"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 42,
      "num_attention_heads": 8, "num_key_value_heads": 2, "layer_types": null, "num_kv_shared_layers": 18,
      "use_double_wide_mlp": false})", "gemma4-e2b"},
    // Gemma 4 12B (gemma4_unified's text model): no per-layer embeddings, V = K on global layers.
    {"gemma4-12b", R"({"hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48,
      "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
      "max_position_embeddings": 262144, "sliding_window": 1024, "layer_types": null, "hidden_size_per_layer_input": 0,
      "num_kv_shared_layers": 0, "use_double_wide_mlp": false})", "gemma4-e2b"},
    {"gemma4-26b-a4b", R"({"hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 30,
      "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "attention_k_eq_v": true,
      "max_position_embeddings": 262144, "sliding_window": 1024, "layer_types": null, "hidden_size_per_layer_input": 0,
      "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "enable_moe_block": true, "num_experts": 128,
      "top_k_experts": 8, "moe_intermediate_size": 704})", "gemma4-e2b"},
    {"gemma4-31b", R"({"hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 60,
      "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4, "attention_k_eq_v": true,
      "max_position_embeddings": 262144, "sliding_window": 1024, "layer_types": null,
      "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": false})", "gemma4-e2b"},
    {"llama3.2-1b", R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000, "tie_word_embeddings": true,
      "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}, "hidden_act": "silu"})"},
    {"llama3.2-3b", R"({"hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 24, "head_dim": 128})",
     "llama3.2-1b"},
    {"llama3.1-8b", R"({"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "head_dim": 128,
      "tie_word_embeddings": false, "rope_scaling": {"factor": 8.0}})", "llama3.2-1b"},
    {"phi4-mini", R"({"model_type": "phi3", "vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 8192,
      "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8, "max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.75, "rms_norm_eps": 1e-5,
      "rope_theta": 10000, "sliding_window": 262144, "tie_word_embeddings": true, "hidden_act": "silu",
      "rope_scaling": {"type": "longrope", "short_factor": "ONES48", "long_factor": "RAMP48"}})"},
    {"smollm3-3b", R"({"model_type": "smollm3", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 11008,
      "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 65536,
      "rms_norm_eps": 1e-6, "rope_theta": 5000000, "no_rope_layer_interval": 4, "use_sliding_window": false,
      "tie_word_embeddings": true, "hidden_act": "silu"})"},
    {"olmo2-1b", R"({"model_type": "olmo2", "vocab_size": 100352, "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 4096,
      "rms_norm_eps": 1e-6, "rope_theta": 500000, "tie_word_embeddings": false, "attention_bias": false,
      "hidden_act": "silu"})"},
};

// A config preset's JSON, its base's keys first.
nlohmann::json preset_json(const ConfigPreset& p) {
  const nlohmann::json own = parse_json(p.json, std::string("preset ") + p.name);
  if (!p.base) return own;
  for (const ConfigPreset& b : kConfigPresets) {
    if (std::string(p.base) != b.name) continue;
    nlohmann::json j = preset_json(b);
    j.merge_patch(own);
    return j;
  }
  throw Error(std::string("preset ") + p.name + ": unknown base " + p.base);
}

}  // namespace

ModelConfig preset_config(const std::string& name) {
  for (const ConfigPreset& p : kConfigPresets) {
    if (name != p.name) continue;
    nlohmann::json j = preset_json(p);
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object() && j["rope_scaling"].contains("short_factor")) {
      std::vector<double> ones(48, 1.0), ramp;
      for (int i = 0; i < 48; ++i) ramp.push_back(1.0 + 39.0 * i / 47.0);  // 1 … 40
      j["rope_scaling"]["short_factor"] = ones;
      j["rope_scaling"]["long_factor"] = ramp;
    }
    return parse_config(j, std::string("preset ") + p.name);
  }
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c;
    c.model_type = p.type;
    const FamilyTraits t = family_traits(family_of(c));
    const bool gpt2 = t.gpt2;
    c.arch = gpt2 ? Arch::Gpt2 : Arch::Llama;
    c.n_layer = p.layers;
    c.n_embd = p.embd;
    c.n_head = p.heads;
    c.n_kv_head = p.kv_heads;
    c.n_inner = p.inner;
    c.vocab_size = p.vocab;
    c.n_ctx = p.ctx;
    c.norm_eps = p.eps;
    c.rope_theta = p.theta;
    c.tie_embeddings = p.tie;
    c.qkv_bias = gpt2 || t.qkv_bias;
    c.o_bias = c.mlp_bias = gpt2;
    c.head_size = c.n_embd / c.n_head;
    return c;
  }
  std::string all;
  for (const auto& n : preset_names()) all += " " + n;
  throw Error("unknown preset '" + name + "'; choose one of:" + all, ErrorKind::Usage);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  for (const ConfigPreset& p : kConfigPresets) names.emplace_back(p.name);
  return names;
}

void write_random_model(const ModelConfig& c, uint64_t seed, const std::string& dir, const std::string& tokenizer_file) {
  // Every tensor is generated in memory, then written: refuse before creating anything
  // when that cannot fit.
  check_memory(4.0 * static_cast<double>(parameter_counts(c).total()),
               "a random " + c.model_type + " model of " + std::to_string(parameter_counts(c).total()) + " parameters",
               "choose a smaller preset or smaller --layers/--embd/--vocab/--context.");
  std::string tokenizer_bytes;  // read and checked before anything is written
  if (!tokenizer_file.empty()) {
    check_tokenizer_fits(*load_tokenizer_file(tokenizer_file), c.vocab_size, tokenizer_file);
    tokenizer_bytes = read_regular_file(tokenizer_file, kMaxJsonBytes, "tokenizer file");
  }
  // All files into a folder beside DIR, moved in when complete: a failed write (a full
  // disk, a file-size limit) leaves nothing. A tokenizer of the other kind already in DIR
  // would be read instead of the new one: it goes.
  const bool sp = !tokenizer_file.empty() && tokenizer_file_is_sentencepiece(tokenizer_file);
  write_dir_atomic(
      dir, [&](const std::string& tmp) { write_random_model_files(c, seed, tmp, tokenizer_file, tokenizer_bytes); },
      {sp ? "tokenizer.json" : "tokenizer.model"});
}

namespace {
void write_random_model_files(const ModelConfig& c, uint64_t seed, const std::string& dir,
                              const std::string& tokenizer_file, const std::string& tokenizer_bytes) {
  std::mt19937_64 rng(seed);
  SafetensorsWriter w;
  std::vector<float> buf;
  // N(mean, std) values for a tensor of the given shape.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float std, float mean = 0.f) {
    const int64_t n = checked_product(shape, "random tensor '" + name + "'");
    std::normal_distribution<float> dist(mean, std);
    buf.resize(static_cast<size_t>(n));
    for (auto& v : buf) v = dist(rng);
    w.add_f32(name, std::move(shape), buf.data());
  };
  const int64_t C = c.n_embd, I = c.n_inner, V = c.vocab_size, Hd = checked_dim(c.n_head, c.head_size, "query width");
  checked_dim(c.n_kv_head, c.head_size, "key/value width");
  const float s_in = 1.f / std::sqrt(static_cast<float>(C));  // keeps activations O(1)
  const float s_hid = 1.f / std::sqrt(static_cast<float>(I));
  if (c.arch == Arch::Gpt2) {
    add("wte.weight", {V, C}, 0.5f);
    add("wpe.weight", {c.n_ctx, C}, 0.3f);
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      add(p + "ln_1.weight", {C}, 0.1f, 1.f);
      add(p + "ln_1.bias", {C}, 0.1f);
      add(p + "attn.c_attn.weight", {C, checked_dim(3, C, "c_attn width")}, 1.5f * s_in);  // Conv1D (in, out)
      add(p + "attn.c_attn.bias", {checked_dim(3, C, "c_attn width")}, 0.1f);
      add(p + "attn.c_proj.weight", {C, C}, s_in);
      add(p + "attn.c_proj.bias", {C}, 0.02f);
      add(p + "ln_2.weight", {C}, 0.1f, 1.f);
      add(p + "ln_2.bias", {C}, 0.1f);
      add(p + "mlp.c_fc.weight", {C, I}, s_in);
      add(p + "mlp.c_fc.bias", {I}, 0.1f);
      add(p + "mlp.c_proj.weight", {I, C}, s_hid);
      add(p + "mlp.c_proj.bias", {C}, 0.02f);
    }
    add("ln_f.weight", {C}, 0.1f, 1.f);
    add("ln_f.bias", {C}, 0.1f);
  } else {
    // The family's own names and shapes (decoder_tensors, as the loader reads them).
    for (const DecoderTensor& t : decoder_tensors(c)) {
      float sd = s_in, mean = 0.f;
      switch (t.slot) {
        case Slot::TokEmb: sd = 0.5f; break;
        case Slot::Wq: case Slot::Wk: case Slot::Wqkv: sd = 1.5f * s_in; break;
        case Slot::Wo: sd = 1.f / std::sqrt(static_cast<float>(Hd)); break;
        case Slot::Wdown: sd = s_hid; break;
        case Slot::Bq: case Slot::Bk: case Slot::Bv: sd = 0.1f; break;
        case Slot::Bo: sd = 0.02f; break;
        case Slot::WqGate: case Slot::LinQkv: case Slot::LinZ: case Slot::LinB: case Slot::LinA: sd = 1.5f * s_in; break;
        case Slot::LinOut: sd = 1.f / std::sqrt(static_cast<float>(std::max(1, c.linear.value_width()))); break;
        case Slot::LinConv: sd = 0.5f; break;
        case Slot::LinALog: sd = 0.5f, mean = 1.f; break;  // A = e^{A_log} around e: memory fades at a few % a token
        case Slot::LinDtBias: sd = 0.5f; break;
        case Slot::LinNorm: sd = 0.1f, mean = 1.f; break;  // the gated norm's weight, no (1 + w)
        case Slot::ConvIn: sd = 1.5f * s_in; break;
        case Slot::ConvOut: sd = s_in; break;
        case Slot::ConvTaps: sd = 0.5f; break;
        case Slot::ConvInBias: case Slot::ConvTapsBias: case Slot::ConvOutBias: sd = 0.1f; break;
        case Slot::Sinks: sd = 1.f; break;  // sink logits of the size of the scaled scores: visible mass
        case Slot::Router: sd = 1.5f * s_in; break;
        case Slot::RouterBias: case Slot::ExpGateUpBias: sd = 0.1f; break;
        case Slot::ExpGateUp: sd = s_in; break;
        case Slot::ExpDown: sd = s_hid; break;
        case Slot::ExpDownBias: sd = 0.02f; break;
        case Slot::LayerScalar: sd = 0.1f, mean = 1.f; break;
        case Slot::RouterScale: case Slot::ExpertScale: sd = 0.2f, mean = 1.f; break;
        case Slot::ExpGateUpHalves: sd = s_in; break;
        case Slot::ExpDownRows: sd = 1.f / std::sqrt(static_cast<float>(std::max(1, c.experts.width))); break;
        default:
          if (slot_is_norm(t.slot)) sd = 0.1f, mean = c.norm_plus_one ? 0.f : 1.f;  // Gemma stores w of (1 + w)
          break;
      }
      add(t.name, t.shape, sd, mean);
    }
  }
  w.set_metadata("format", "pt");
  w.set_metadata("generator", "attnviz random seed " + std::to_string(seed));
  w.write(dir + "/model.safetensors");
  write_file_atomic(dir + "/config.json", config_to_json(c).dump(2) + "\n");

  if (!tokenizer_file.empty()) {
    const bool sp = tokenizer_file_is_sentencepiece(tokenizer_file);
    write_file_atomic(dir + (sp ? "/tokenizer.model" : "/tokenizer.json"), tokenizer_bytes);
    return;
  }
  std::vector<std::string> pieces;
  pieces.push_back("\n");
  for (char ch = ' '; ch <= '~'; ++ch) pieces.emplace_back(1, ch);
  pieces.resize(std::min<size_t>(pieces.size(), static_cast<size_t>(V)));
  while (pieces.size() < static_cast<size_t>(V)) pieces.push_back("<" + std::to_string(pieces.size()) + ">");
  write_file_atomic(dir + "/tokenizer.json", CharTokenizer(pieces).to_json() + "\n");
}

}  // namespace

}  // namespace attnviz
