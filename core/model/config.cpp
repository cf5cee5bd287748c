#include "core/model/config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace attnviz {

namespace {

int get_int(const nlohmann::json& j, const char* key, const std::string& where, int fallback = -1) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback >= 0) return fallback;
    throw Error(where + ": missing key \"" + key + "\"\n  HINT: config.json must be a Hugging Face config for this model_type.");
  }
  if (!j[key].is_number_integer() || j[key].get<long long>() <= 0)
    throw Error(where + ": \"" + key + "\" must be a positive integer, found " + j[key].dump());
  return j[key].get<int>();
}

float get_float(const nlohmann::json& j, const char* key, float fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) throw Error(where + ": \"" + key + "\" must be a number, found " + j[key].dump());
  return j[key].get<float>();
}

bool get_bool(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) throw Error(where + ": \"" + key + "\" must be true or false, found " + j[key].dump());
  return j[key].get<bool>();
}

}  // namespace

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a JSON object");
  if (!j.contains("model_type") || !j["model_type"].is_string())
    throw Error(where + ": missing \"model_type\"\n  HINT: attnviz reads model_type \"gpt2\", \"llama\", \"qwen2\" or \"mistral\".");
  ModelConfig c;
  c.model_type = j["model_type"].get<std::string>();
  if (c.model_type == "gpt2") {
    c.arch = Arch::Gpt2;
    c.vocab_size = get_int(j, "vocab_size", where);
    c.n_layer = get_int(j, "n_layer", where);
    c.n_embd = get_int(j, "n_embd", where);
    c.n_head = get_int(j, "n_head", where);
    c.n_kv_head = c.n_head;
    c.n_ctx = get_int(j, "n_positions", where, j.contains("n_ctx") ? get_int(j, "n_ctx", where) : -1);
    c.n_inner = get_int(j, "n_inner", where, 4 * c.n_embd);
    c.norm_eps = get_float(j, "layer_norm_epsilon", 1e-5f, where);
    c.tie_embeddings = true;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    if (c.n_embd % c.n_head != 0)
      throw Error(where + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                  std::to_string(c.n_head) + " (n_embd = n_head x head_size)");
    c.head_size = c.n_embd / c.n_head;
    const std::string act = j.value("activation_function", std::string("gelu_new"));
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
      throw Error(where + ": activation_function \"" + act + "\" is not supported (gelu_new expected)");
    if (get_bool(j, "scale_attn_by_inverse_layer_idx", false, where) || get_bool(j, "reorder_and_upcast_attn", false, where))
      throw Error(where + ": scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported");
  } else if (c.model_type == "llama" || c.model_type == "qwen2" || c.model_type == "mistral") {
    c.arch = Arch::Llama;
    c.vocab_size = get_int(j, "vocab_size", where);
    c.n_layer = get_int(j, "num_hidden_layers", where);
    c.n_embd = get_int(j, "hidden_size", where);
    c.n_head = get_int(j, "num_attention_heads", where);
    c.n_kv_head = get_int(j, "num_key_value_heads", where, c.n_head);
    c.n_inner = get_int(j, "intermediate_size", where);
    c.n_ctx = get_int(j, "max_position_embeddings", where);
    c.norm_eps = get_float(j, "rms_norm_eps", 1e-6f, where);
    c.rope_theta = get_float(j, "rope_theta", 10000.f, where);
    c.tie_embeddings = get_bool(j, "tie_word_embeddings", false, where);
    const bool attn_bias = get_bool(j, "attention_bias", false, where);
    c.qkv_bias = attn_bias || c.model_type == "qwen2";
    c.o_bias = attn_bias;
    if (get_bool(j, "mlp_bias", false, where)) throw Error(where + ": mlp_bias is not supported yet");
    if (j.contains("head_dim") && !j["head_dim"].is_null()) {
      c.head_size = get_int(j, "head_dim", where);
    } else {
      if (c.n_embd % c.n_head != 0)
        throw Error(where + ": hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                    std::to_string(c.n_head));
      c.head_size = c.n_embd / c.n_head;
    }
    if (c.head_size % 2 != 0) throw Error(where + ": head size " + std::to_string(c.head_size) + " must be even for RoPE");
    if (c.n_head % c.n_kv_head != 0)
      throw Error(where + ": num_attention_heads " + std::to_string(c.n_head) +
                  " is not a multiple of num_key_value_heads " + std::to_string(c.n_kv_head));
    const std::string act = j.value("hidden_act", std::string("silu"));
    if (act != "silu") throw Error(where + ": hidden_act \"" + act + "\" is not supported (silu expected)");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      throw Error(where + ": rope_scaling is not supported; remove it or use a model without it");
  } else {
    throw Error(where + ": unknown model_type \"" + c.model_type +
                "\"\n  HINT: attnviz reads model_type \"gpt2\", \"llama\", \"qwen2\" or \"mistral\".");
  }
  return c;
}

ParamCounts parameter_counts(const ModelConfig& c) {
  ParamCounts p;
  const int64_t C = c.n_embd, V = c.vocab_size, L = c.n_layer, I = c.n_inner;
  const int64_t Hd = static_cast<int64_t>(c.n_head) * c.head_size;
  const int64_t KVd = static_cast<int64_t>(c.n_kv_head) * c.head_size;
  const bool gpt2 = c.arch == Arch::Gpt2;
  p.token_embedding = V * C;
  p.position_embedding = gpt2 ? static_cast<int64_t>(c.n_ctx) * C : 0;
  int64_t attn = C * Hd + 2 * C * KVd + Hd * C;
  if (c.qkv_bias) attn += Hd + 2 * KVd;
  if (c.o_bias) attn += C;
  p.attention = L * attn;
  int64_t mlp = gpt2 ? 2 * C * I : 3 * C * I;  // gpt2 c_fc + c_proj; llama gate + up + down
  if (c.mlp_bias) mlp += gpt2 ? I + C : 2 * I + C;
  p.mlp = L * mlp;
  const int64_t norm = gpt2 ? 2 * C : C;  // LayerNorm has weight and bias, RMSNorm a weight
  p.norms = (2 * L + 1) * norm;
  p.lm_head = c.tie_embeddings ? 0 : V * C;
  return p;
}

nlohmann::json config_to_json(const ModelConfig& c) {
  nlohmann::json j;
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  if (c.arch == Arch::Gpt2) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["n_layer"] = c.n_layer;
    j["n_embd"] = c.n_embd;
    j["n_head"] = c.n_head;
    j["n_positions"] = c.n_ctx;
    j["n_inner"] = c.n_inner;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = "gelu_new";
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["num_hidden_layers"] = c.n_layer;
    j["hidden_size"] = c.n_embd;
    j["num_attention_heads"] = c.n_head;
    j["num_key_value_heads"] = c.n_kv_head;
    j["head_dim"] = c.head_size;
    j["intermediate_size"] = c.n_inner;
    j["max_position_embeddings"] = c.n_ctx;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["tie_word_embeddings"] = c.tie_embeddings;
    j["hidden_act"] = "silu";
    if (c.model_type == "llama") j["attention_bias"] = c.qkv_bias;
  }
  return j;
}

}  // namespace attnviz
