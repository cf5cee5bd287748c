// Model hyper-parameters, read from a Hugging Face config.json.
//
// Dimension letters used in shape comments throughout core/:
//   V vocab size, C n_embd (model width), L layers, H query heads, KV key/value heads,
//   d head size (C / H unless the config says head_dim), I MLP hidden size,
//   T tokens in the window (≤ block_size ≤ n_ctx), n new rows computed in one call.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

enum class Arch {
  Gpt2,   // learned positions, LayerNorm, GELU(tanh), biases, Conv1D weights, tied lm_head
  Llama,  // RoPE (rotate-half), RMSNorm, SwiGLU, GQA; also qwen2 / mistral checkpoints
};

struct ModelConfig {
  std::string model_type;  // as in config.json: "gpt2", "llama", "qwen2", "mistral"
  Arch arch = Arch::Gpt2;
  int vocab_size = 0;  // V
  int n_layer = 0;     // L
  int n_embd = 0;      // C
  int n_head = 0;      // H
  int n_kv_head = 0;   // KV (== H for gpt2)
  int head_size = 0;   // d
  int n_inner = 0;     // I
  int n_ctx = 0;       // longest context the model was built for (n_positions / max_position_embeddings)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  // config.json's rope_scaling: "" (none), "linear" (every frequency / factor) or "llama3"
  // (Llama 3.1/3.2: long wavelengths / factor, short ones kept, a smooth blend between);
  // or, from a GGUF file, "factors": frequency i divided by freq_factors[i] (llama.cpp's
  // rope_freqs tensor, where a converter has written Llama 3's divisors).
  struct RopeScaling {
    std::string type;
    float factor = 1.f, low_freq_factor = 1.f, high_freq_factor = 4.f;
    int original_max_position = 8192;
    std::vector<float> freq_factors;  // (d/2) for "factors"
  } rope_scaling;
  bool tie_embeddings = true;
  bool qkv_bias = false;   // q/k/v projections have biases (gpt2, qwen2, llama attention_bias)
  bool o_bias = false;     // output projection has a bias (gpt2, llama attention_bias)
  bool mlp_bias = false;   // MLP linears have biases (gpt2, llama mlp_bias)

  // Query heads that share one KV head; query head h reads KV head h / group_size().
  int group_size() const { return n_head / n_kv_head; }
  int kv_head_of(int h) const { return h / group_size(); }
};

// Parameter counts per part, from the config alone.
struct ParamCounts {
  int64_t token_embedding = 0;  // V × C
  int64_t position_embedding = 0;  // n_ctx × C (gpt2)
  int64_t attention = 0;        // all layers: W_q, W_k, W_v, W_o (+ biases)
  int64_t mlp = 0;              // all layers
  int64_t norms = 0;            // all layer norms + the final one
  int64_t lm_head = 0;          // 0 when tied to the token embedding
  int64_t total() const { return token_embedding + position_embedding + attention + mlp + norms + lm_head; }
};
ParamCounts parameter_counts(const ModelConfig& c);

// Parses and validates; `where` names the file in error messages.
ModelConfig parse_config(const nlohmann::json& j, const std::string& where);

// The Hugging Face config.json for `c` (used when writing generated models).
nlohmann::json config_to_json(const ModelConfig& c);

// The RoPE frequencies θ^(−2i/d), i < d/2, after rope_scaling, in double (the backends
// round them to float where they always did). Every RoPE in attnviz reads them here.
std::vector<double> rope_inv_freq(float theta, int d, const ModelConfig::RopeScaling& s = {});
inline std::vector<double> rope_inv_freq(const ModelConfig& c) {
  return rope_inv_freq(c.rope_theta, c.head_size, c.rope_scaling);
}

}  // namespace attnviz
