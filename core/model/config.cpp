#include "core/model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

namespace {

// A dimension: a positive integer of at most kMaxDim, read as 64-bit before narrowing.
int get_int(const nlohmann::json& j, const char* key, const std::string& where, int fallback = -1) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback >= 0) return fallback;
    throw Error(where + ": missing key \"" + key + "\"\n  HINT: config.json must be a Hugging Face config for this model_type.");
  }
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() == 0 : v.get<int64_t>() <= 0))
    throw Error(where + ": \"" + key + "\" must be a positive integer, found " + json_excerpt(v));
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxDim) : v.get<int64_t>() > kMaxDim)
    throw Error(where + ": \"" + key + "\" is " + json_excerpt(v) + ", more than the largest dimension attnviz accepts (" +
                std::to_string(kMaxDim) + ")");
  return static_cast<int>(v.get<int64_t>());
}

// A finite number; with `positive`, also > 0 (epsilons, RoPE base).
float get_float(const nlohmann::json& j, const char* key, float fallback, const std::string& where,
                bool positive = false) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) throw Error(where + ": \"" + key + "\" must be a number, found " + json_excerpt(j[key]));
  const float v = j[key].get<float>();
  if (!std::isfinite(v) || (positive && !(v > 0.f)))
    throw Error(where + ": \"" + key + "\" must be a " + (positive ? "positive " : "") + "finite number, found " +
                json_excerpt(j[key]));
  return v;
}

std::string get_string(const nlohmann::json& j, const char* key, const std::string& fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw Error(where + ": \"" + key + "\" must be a string, found " + json_excerpt(j[key]));
  return j[key].get<std::string>();
}

bool get_bool(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) throw Error(where + ": \"" + key + "\" must be true or false, found " + json_excerpt(j[key]));
  return j[key].get<bool>();
}

void parse_rope_scaling(const nlohmann::json& r, const std::string& where, ModelConfig& c) {
  const std::string at = where + ": rope_scaling";
  if (!r.is_object()) throw Error(at + " must be an object, found " + json_excerpt(r));
  // Hugging Face writes "rope_type" (older files "type").
  const std::string type = get_string(r, "rope_type", get_string(r, "type", "", at), at);
  ModelConfig::RopeScaling& s = c.rope_scaling;
  if (type == "default") return;
  if (type != "linear" && type != "llama3")
    throw Error(at + ": type \"" + excerpt(type) + "\" is not supported\n  HINT: attnviz reads \"linear\" and \"llama3\".");
  s.type = type;
  s.factor = get_float(r, "factor", 0.f, at, true);
  if (!(s.factor >= 1.f)) throw Error(at + ": \"factor\" must be at least 1, found " + json_excerpt(r.value("factor", nlohmann::json())));
  if (type == "llama3") {
    s.low_freq_factor = get_float(r, "low_freq_factor", 1.f, at, true);
    s.high_freq_factor = get_float(r, "high_freq_factor", 4.f, at, true);
    s.original_max_position = get_int(r, "original_max_position_embeddings", at, 8192);
    if (!(s.high_freq_factor > s.low_freq_factor))
      throw Error(at + ": high_freq_factor must be larger than low_freq_factor");
  }
}

}  // namespace

std::vector<double> rope_inv_freq(float theta, int d, const ModelConfig::RopeScaling& s) {
  const int half = d / 2;
  std::vector<double> f(static_cast<size_t>(std::max(half, 0)));
  constexpr double kPi = 3.14159265358979323846;
  for (int i = 0; i < half; ++i) {
    double x = std::pow(static_cast<double>(theta), -2.0 * i / d);
    if (s.type == "linear") {
      x /= s.factor;
    } else if (s.type == "factors") {
      x /= s.freq_factors.at(static_cast<size_t>(i));
    } else if (s.type == "llama3") {
      // Wavelengths under old_ctx / high_freq_factor are kept; over old_ctx / low_freq_factor
      // divided by factor; between, a linear blend in old_ctx / wavelength.
      const double old_ctx = s.original_max_position, wavelen = 2 * kPi / x;
      if (wavelen > old_ctx / s.low_freq_factor) {
        x /= s.factor;
      } else if (wavelen >= old_ctx / s.high_freq_factor) {
        const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1 - smooth) * x / s.factor + smooth * x;
      }
    }
    f[static_cast<size_t>(i)] = x;
  }
  return f;
}

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a JSON object (found " + json_excerpt(j) + ")");
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
    c.n_inner = j.contains("n_inner") && !j["n_inner"].is_null()
                    ? get_int(j, "n_inner", where)
                    : checked_dim(4, c.n_embd, where + ": n_inner (by default 4 x n_embd)");
    c.norm_eps = get_float(j, "layer_norm_epsilon", 1e-5f, where, true);
    checked_dim(3, c.n_embd, where + ": c_attn width 3 x n_embd");
    c.tie_embeddings = true;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    if (c.n_embd % c.n_head != 0)
      throw Error(where + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                  std::to_string(c.n_head) + " (n_embd = n_head x head_size)");
    c.head_size = c.n_embd / c.n_head;
    const std::string act = get_string(j, "activation_function", "gelu_new", where);
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
      throw Error(where + ": activation_function \"" + excerpt(act) + "\" is not supported (gelu_new expected)");
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
    c.norm_eps = get_float(j, "rms_norm_eps", 1e-6f, where, true);
    c.rope_theta = get_float(j, "rope_theta", 10000.f, where, true);
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
    checked_dim(c.n_head, c.head_size, where + ": query width num_attention_heads x head size");
    checked_dim(c.n_kv_head, c.head_size, where + ": key/value width num_key_value_heads x head size");
    const std::string act = get_string(j, "hidden_act", "silu", where);
    if (act != "silu") throw Error(where + ": hidden_act \"" + excerpt(act) + "\" is not supported (silu expected)");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) parse_rope_scaling(j["rope_scaling"], where, c);
  } else {
    throw Error(where + ": unknown model_type \"" + excerpt(c.model_type) +
                "\"\n  HINT: attnviz reads model_type \"gpt2\", \"llama\", \"qwen2\" or \"mistral\".");
  }
  return c;
}

ParamCounts parameter_counts(const ModelConfig& c) {
  ParamCounts p;
  const int64_t C = c.n_embd, V = c.vocab_size, L = c.n_layer, I = c.n_inner;
  const std::string what = "parameter count of this configuration";
  auto mul = [&](std::initializer_list<int64_t> f) { return checked_product(f, what); };
  auto add = [&](int64_t a, int64_t b) {
    if (a > INT64_MAX - b) throw Error(what + ": size overflows");
    return a + b;
  };
  const int64_t Hd = mul({c.n_head, c.head_size});
  const int64_t KVd = mul({c.n_kv_head, c.head_size});
  const bool gpt2 = c.arch == Arch::Gpt2;
  p.token_embedding = mul({V, C});
  p.position_embedding = gpt2 ? mul({c.n_ctx, C}) : 0;
  int64_t attn = add(add(mul({C, Hd}), mul({2, C, KVd})), mul({Hd, C}));
  if (c.qkv_bias) attn = add(attn, add(Hd, mul({2, KVd})));
  if (c.o_bias) attn = add(attn, C);
  p.attention = mul({L, attn});
  int64_t mlp = gpt2 ? mul({2, C, I}) : mul({3, C, I});  // gpt2 c_fc + c_proj; llama gate + up + down
  if (c.mlp_bias) mlp = add(mlp, gpt2 ? I + C : 2 * I + C);
  p.mlp = mul({L, mlp});
  const int64_t norm = gpt2 ? 2 * C : C;  // LayerNorm has weight and bias, RMSNorm a weight
  p.norms = mul({add(mul({2, L}), 1), norm});
  p.lm_head = c.tie_embeddings ? 0 : mul({V, C});
  int64_t total = 0;
  for (int64_t part : {p.token_embedding, p.position_embedding, p.attention, p.mlp, p.norms, p.lm_head})
    total = add(total, part);
  return p;
}

namespace {
// The config.json keys of what every architecture has, in each one's own spelling.
struct DimKeys {
  const char *architecture, *layers, *embd, *heads, *ctx, *inner, *eps;
};
constexpr DimKeys kGpt2Keys{"GPT2LMHeadModel", "n_layer", "n_embd", "n_head", "n_positions", "n_inner",
                            "layer_norm_epsilon"};
constexpr DimKeys kLlamaKeys{"LlamaForCausalLM", "num_hidden_layers", "hidden_size", "num_attention_heads",
                             "max_position_embeddings", "intermediate_size", "rms_norm_eps"};
}  // namespace

nlohmann::json config_to_json(const ModelConfig& c) {
  const bool gpt2 = c.arch == Arch::Gpt2;
  const DimKeys& k = gpt2 ? kGpt2Keys : kLlamaKeys;
  nlohmann::json j;
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["architectures"] = {k.architecture};
  j[k.layers] = c.n_layer;
  j[k.embd] = c.n_embd;
  j[k.heads] = c.n_head;
  j[k.ctx] = c.n_ctx;
  j[k.inner] = c.n_inner;
  j[k.eps] = c.norm_eps;
  if (gpt2) {
    j["activation_function"] = "gelu_new";
    return j;
  }
  j["num_key_value_heads"] = c.n_kv_head;
  j["head_dim"] = c.head_size;
  j["rope_theta"] = c.rope_theta;
  if (!c.rope_scaling.type.empty()) {
    const ModelConfig::RopeScaling& s = c.rope_scaling;
    j["rope_scaling"] = {{"rope_type", s.type}, {"factor", s.factor}};
    if (s.type == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = s.low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = s.high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] = s.original_max_position;
    }
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["hidden_act"] = "silu";
  if (c.model_type == "llama") j["attention_bias"] = c.qkv_bias;
  return j;
}

}  // namespace attnviz
