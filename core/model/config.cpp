#include "core/model/config.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"

namespace attnviz {

// The readers config_read.h declares (shared with the family files).

// A dimension: a positive integer of at most kMaxDim, read as 64-bit before narrowing.
int get_int(const nlohmann::json& j, const char* key, const std::string& where, int fallback) {
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
float get_float(const nlohmann::json& j, const char* key, float fallback, const std::string& where, bool positive) {
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

// One rope_scaling (or rope_parameters) object into s; its rope_theta, where it has one,
// into *theta. Phi-3's longrope also reads the model's max_position_embeddings and
// original_max_position_embeddings from `top`, and needs the rotary width for its lists.
void parse_rope_scaling(const nlohmann::json& r, const std::string& at, const nlohmann::json& top, int rot,
                        RopeScaling& s, float* theta) {
  if (!r.is_object()) throw Error(at + " must be an object, found " + json_excerpt(r));
  if (theta) *theta = get_float(r, "rope_theta", *theta, at, true);
  // Hugging Face writes "rope_type" (older files "type"). Without either, an object that
  // holds anything but the base θ is refused, as Hugging Face refuses it: a "factor" alone
  // could be linear, dynamic or YaRN, and reading it as "default" would drop it.
  if (!r.contains("rope_type") && !r.contains("type"))
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.key() != "rope_theta" && it.key() != "partial_rotary_factor")
        throw Error(at + " has \"" + excerpt(it.key()) + "\" but no \"rope_type\" (or \"type\") saying what it means" +
                    "\n  HINT: add the \"rope_type\" the model was trained with (\"linear\", \"llama3\", \"longrope\", …), "
                    "or remove the key; Hugging Face refuses this config too.");
  const std::string type = get_string(r, "rope_type", get_string(r, "type", "default", at), at);
  s = RopeScaling{};
  if (type == "default") return;
  if (type != "linear" && type != "llama3" && type != "longrope" && type != "yarn")
    throw Error(at + ": type \"" + excerpt(type) +
                "\" is not supported\n  HINT: attnviz reads \"linear\", \"llama3\", \"longrope\" and \"yarn\".");
  s.type = type;
  if (type == "yarn") {  // as Hugging Face's _compute_yarn_parameters
    // Hugging Face's standardize_rope_params: a top-level original_max_position_embeddings
    // wins over the one in the dict; without either, max_position_embeddings.
    const int max_pos = get_int(top, "max_position_embeddings", at, 0);
    s.original_max_position = get_int(top, "original_max_position_embeddings", at,
                                      get_int(r, "original_max_position_embeddings", at, max_pos));
    if (s.original_max_position <= 0)
      throw Error(at + ": YaRN needs \"original_max_position_embeddings\" (the context the model was trained with)");
    s.factor = r.contains("factor") && !r["factor"].is_null()
                   ? get_float(r, "factor", 0.f, at, true)
                   : static_cast<float>(max_pos) / static_cast<float>(s.original_max_position);
    if (!(s.factor >= 1.f)) throw Error(at + ": YaRN's \"factor\" must be at least 1, found " + std::to_string(s.factor));
    const auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    const double ms = get_float(r, "mscale", 0.f, at, true), ms_all = get_float(r, "mscale_all_dim", 0.f, at, true);
    const double af = ms != 0 && ms_all != 0 ? mscale_of(s.factor, ms) / mscale_of(s.factor, ms_all) : mscale_of(s.factor, 1.0);
    s.mscale = get_float(r, "attention_factor", static_cast<float>(af), at, true);
    s.beta_fast = get_float(r, "beta_fast", 32.f, at, true);
    s.beta_slow = get_float(r, "beta_slow", 1.f, at, true);
    s.truncate = get_bool(r, "truncate", true, at);
    if (!(s.mscale > 0.f) || !(s.beta_fast > 0.f) || !(s.beta_slow > 0.f))
      throw Error(at + ": YaRN's attention_factor, beta_fast and beta_slow must be positive numbers");
    return;
  }
  if (type == "longrope") {
    auto factors = [&](const char* key) {
      if (!r.contains(key) || !r[key].is_array() || r[key].size() != static_cast<size_t>(rot / 2))
        throw Error(at + ": \"" + key + "\" must be a list of " + std::to_string(rot / 2) +
                    " numbers (rotary dims / 2), found " + json_excerpt(r.value(key, nlohmann::json())));
      std::vector<float> f;
      for (const auto& v : r[key]) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
          throw Error(at + ": \"" + key + "\" holds " + json_excerpt(v) + "; every factor must be a positive number");
        f.push_back(v.get<float>());
      }
      return f;
    };
    s.freq_factors = factors("short_factor");
    s.long_factor = factors("long_factor");
    const int max_pos = get_int(top, "max_position_embeddings", at);
    const int orig = get_int(top, "original_max_position_embeddings", at, get_int(r, "original_max_position_embeddings", at, max_pos));
    s.original_max_position = orig;
    s.factor = std::max(1.f, static_cast<float>(max_pos) / static_cast<float>(orig));
    const float af = s.factor > 1.f && orig > 1 ? static_cast<float>(std::sqrt(1.0 + std::log(static_cast<double>(s.factor)) / std::log(static_cast<double>(orig))))
                                    : 1.f;
    s.mscale = get_float(r, "attention_factor", af, at, true);
    return;
  }
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

void read_head_size(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
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
}

std::vector<int> read_layer_types(const nlohmann::json& j, int L, const std::string& where,
                                  const std::vector<std::string>& names, const std::string& hint) {
  std::vector<int> out;
  if (!j.contains("layer_types") || j["layer_types"].is_null()) return out;
  const nlohmann::json& lt = j["layer_types"];
  if (!lt.is_array() || lt.size() != static_cast<size_t>(L))
    throw Error(where + ": \"layer_types\" must list " + std::to_string(L) + " layer types (num_hidden_layers), found " +
                json_excerpt(lt));
  for (int l = 0; l < L; ++l) {
    const nlohmann::json& e = lt[static_cast<size_t>(l)];
    const auto at = std::find(names.begin(), names.end(), e.is_string() ? e.get<std::string>() : std::string());
    if (!e.is_string() || at == names.end())
      throw Error(where + ": layer_types[" + std::to_string(l) + "] is " + json_excerpt(e) + "\n  HINT: " + hint);
    out.push_back(static_cast<int>(at - names.begin()));
  }
  return out;
}

namespace {

// A soft-cap: absent or null is none; otherwise a positive finite number.
float get_softcap(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return 0.f;
  const float v = get_float(j, key, 0.f, where);
  if (!(v > 0.f))
    throw Error(where + ": \"" + key + "\" must be a positive number (or null for none), found " + json_excerpt(j[key]));
  return v;
}

// The llama-like families: everything but gpt2. Keys as each family's config.json spells them.
void parse_decoder(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
  const FamilyTraits t = family_traits(family_of(c));
  const bool gemma = t.gemma;
  c.arch = Arch::Llama;
  c.vocab_size = get_int(j, "vocab_size", where);
  c.n_layer = checked_layers(get_int(j, "num_hidden_layers", where), where + ": \"num_hidden_layers\"");
  c.n_embd = get_int(j, "hidden_size", where);
  c.n_head = get_int(j, "num_attention_heads", where);
  c.n_kv_head = get_int(j, "num_key_value_heads", where, c.n_head);
  c.n_inner = get_int(j, "intermediate_size", where);
  c.n_ctx = get_int(j, "max_position_embeddings", where);
  c.norm_eps = get_float(j, "rms_norm_eps", t.default_eps, where, true);
  c.rope_theta = get_float(j, "rope_theta", t.default_theta, where, true);
  c.tie_embeddings = get_bool(j, "tie_word_embeddings", gemma, where);
  const bool attn_bias = get_bool(j, "attention_bias", false, where);
  c.qkv_bias = attn_bias || t.qkv_bias;
  c.o_bias = attn_bias;
  if (get_bool(j, "mlp_bias", false, where)) throw Error(where + ": mlp_bias is not supported yet");
  read_head_size(j, where, c);
  const int L = c.n_layer;

  // The MLP's activation.
  const char* act_key = gemma ? (j.contains("hidden_activation") ? "hidden_activation" : "hidden_act") : "hidden_act";
  const std::string act = get_string(j, act_key, gemma ? "gelu_pytorch_tanh" : "silu", where);
  if (gemma) {
    if (act != "gelu_pytorch_tanh" && act != "gelu_new")
      throw Error(where + ": " + act_key + " \"" + excerpt(act) + "\" is not supported (gelu_pytorch_tanh expected)");
    c.mlp = MlpKind::GeGLU;
  } else if (act != "silu") {
    throw Error(where + ": hidden_act \"" + excerpt(act) + "\" is not supported (silu expected)");
  }

  // Family traits.
  c.qk_norm = t.qk_norm;
  c.norm_place = t.norm_place;
  if (gemma) {
    c.norm_place = NormPlace::Sandwich;
    c.norm_plus_one = true;
    c.emb_scale = static_cast<float>(std::sqrt(static_cast<double>(c.n_embd)));
  }
  if (t.partial_rope) {
    c.fused_qkv = true;
    const float f = get_float(j, "partial_rotary_factor", 1.f, where);
    const double rot = static_cast<double>(c.head_size) * (f > 0.f && f <= 1.f ? f : 0.f);
    const int rot_i = static_cast<int>(rot);  // Hugging Face: int(head_dim * partial_rotary_factor)
    if (!(f > 0.f && f <= 1.f) || rot_i < 2 || rot_i % 2 != 0)
      throw Error(where + ": partial_rotary_factor " + json_excerpt(j.value("partial_rotary_factor", nlohmann::json())) +
                  " must be in (0, 1] and give an even number of rotary dims (head_dim " + std::to_string(c.head_size) +
                  " x factor = " + std::to_string(rot) + ")");
    c.rotary_dim = rot_i == c.head_size ? 0 : rot_i;
  }
  if (t.multipliers) {
    c.emb_scale = get_float(j, "embedding_multiplier", 1.f, where, true);
    c.residual_scale = get_float(j, "residual_multiplier", 1.f, where, true);
    c.logit_scale = 1.f / get_float(j, "logits_scaling", 1.f, where, true);
  }
  if (gemma) c.final_softcap = get_softcap(j, "final_logit_softcapping", where);
  const float attn_softcap = gemma ? get_softcap(j, "attn_logit_softcapping", where) : 0.f;
  float scale = 1.f / std::sqrt(static_cast<float>(c.head_size));
  if (gemma) scale = 1.f / std::sqrt(get_float(j, "query_pre_attn_scalar", static_cast<float>(c.head_size), where, true));
  if (t.multipliers) scale = get_float(j, "attention_multiplier", scale, where, true);

  // RoPE: rope_theta + rope_scaling, or the newer rope_parameters (one object, or one per
  // layer type). Gemma 3's local layers use rope_local_base_freq without scaling.
  const int rot = c.rotary();
  RopeScaling local_scaling;
  const bool per_type_rope = t.per_type_rope;
  float local_theta = per_type_rope ? get_float(j, "rope_local_base_freq", 10000.f, where, true) : c.rope_theta;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    parse_rope_scaling(j["rope_scaling"], where + ": rope_scaling", j, rot, c.rope_scaling, nullptr);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const nlohmann::json& rp = j["rope_parameters"];
    const std::string at = where + ": rope_parameters";
    if (rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
      if (rp.contains("full_attention"))
        parse_rope_scaling(rp["full_attention"], at + ".full_attention", j, rot, c.rope_scaling, &c.rope_theta);
      if (rp.contains("sliding_attention"))
        parse_rope_scaling(rp["sliding_attention"], at + ".sliding_attention", j, rot, local_scaling, &local_theta);
    } else {
      parse_rope_scaling(rp, at, j, rot, c.rope_scaling, &c.rope_theta);
      if (!per_type_rope) local_theta = c.rope_theta;
    }
  }
  if (!per_type_rope) local_scaling = c.rope_scaling;

  // Which layers are local: layer_types where given, else each family's own rule.
  const int W = j.contains("sliding_window") && !j["sliding_window"].is_null() ? 0 : -1;
  int window = 0;
  if (W == 0) {
    const nlohmann::json& v = j["sliding_window"];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      throw Error(where + ": \"sliding_window\" must be a positive integer (or null for none), found " + json_excerpt(v));
    window = v.get<int64_t>() > kMaxDim ? static_cast<int>(kMaxDim) : static_cast<int>(v.get<int64_t>());
  }
  std::vector<bool> local(static_cast<size_t>(L), false);
  const std::vector<int> types = read_layer_types(j, L, where, {"full_attention", "sliding_attention"},
                                                  "attnviz reads \"full_attention\" and \"sliding_attention\".");
  if (!types.empty()) {
    for (int l = 0; l < L; ++l) local[static_cast<size_t>(l)] = types[static_cast<size_t>(l)] == 1;
  } else {
    switch (t.local) {
      case LocalRule::None: break;
      case LocalRule::EveryOther:
        for (int l = 0; l < L; ++l) local[static_cast<size_t>(l)] = (l + 1) % 2 != 0;  // layer 0 local, 1 global, ...
        break;
      case LocalRule::Pattern: {
        const int pattern = get_int(j, "sliding_window_pattern", where, 6);
        for (int l = 0; l < L; ++l) local[static_cast<size_t>(l)] = (l + 1) % pattern != 0;  // 5 local : 1 global
        break;
      }
      case LocalRule::All: local.assign(static_cast<size_t>(L), window > 0); break;
      case LocalRule::FromMaxWindowLayers:
      case LocalRule::AllWhenEnabled:
        if (get_bool(j, "use_sliding_window", false, where)) {
          const int from = t.local == LocalRule::AllWhenEnabled ? 0 : get_int(j, "max_window_layers", where, L);
          for (int l = from; l < L; ++l)
            local[static_cast<size_t>(l)] = true;  // Hugging Face: layers ≥ max_window_layers
        }
        break;
    }
  }
  const bool any_local = std::find(local.begin(), local.end(), true) != local.end();
  if (any_local && window <= 0)
    throw Error(where + ": some layers are local (sliding_attention) but \"sliding_window\" is missing");

  // Layers without RoPE (SmolLM3): no_rope_layers[l] = 0, or every no_rope_layer_interval-th.
  std::vector<bool> rope(static_cast<size_t>(L), true);
  if (t.no_rope_layers) {
    if (j.contains("no_rope_layers") && !j["no_rope_layers"].is_null()) {
      const nlohmann::json& nr = j["no_rope_layers"];
      if (!nr.is_array() || nr.size() != static_cast<size_t>(L))
        throw Error(where + ": \"no_rope_layers\" must list " + std::to_string(L) + " entries of 0 or 1, found " + json_excerpt(nr));
      for (int l = 0; l < L; ++l) {
        const nlohmann::json& e = nr[static_cast<size_t>(l)];
        if (!e.is_number_integer() || (e.get<int64_t>() != 0 && e.get<int64_t>() != 1))
          throw Error(where + ": no_rope_layers[" + std::to_string(l) + "] is " + json_excerpt(e) + "; 1 (RoPE) or 0 (none) expected");
        rope[static_cast<size_t>(l)] = e.get<int64_t>() == 1;
      }
    } else {
      const int every = get_int(j, "no_rope_layer_interval", where, 4);
      for (int l = 0; l < L; ++l) rope[static_cast<size_t>(l)] = (l + 1) % every != 0;
    }
  }

  set_layer_specs(c, local, window, rope, local_theta, local_scaling, scale, attn_softcap, per_type_rope);
}
}  // namespace

std::vector<double> rope_inv_freq(float theta, int d, const ModelConfig::RopeScaling& s, int T) {
  const bool long_factors = s.type == "longrope" && T > s.original_max_position;
  const int half = d / 2;
  std::vector<double> f(static_cast<size_t>(std::max(half, 0)));
  constexpr double kPi = 3.14159265358979323846;
  // YaRN's ramp over the pairs: the dims whose wavelength makes beta_fast (low) and
  // beta_slow (high) turns over the original context.
  double yarn_low = 0, yarn_high = 1;
  if (s.type == "yarn") {
    const auto dim_of = [&](double turns) {
      return d * std::log(s.original_max_position / (turns * 2 * kPi)) / (2 * std::log(static_cast<double>(theta)));
    };
    yarn_low = dim_of(s.beta_fast), yarn_high = dim_of(s.beta_slow);
    if (s.truncate) yarn_low = std::floor(yarn_low), yarn_high = std::ceil(yarn_high);
    yarn_low = std::max(yarn_low, 0.0), yarn_high = std::min(yarn_high, d - 1.0);
    if (yarn_high == yarn_low) yarn_high += 0.001;
  }
  for (int i = 0; i < half; ++i) {
    double x = std::pow(static_cast<double>(theta), -2.0 * i / d);
    if (s.type == "linear") {
      x /= s.factor;
    } else if (s.type == "factors" || s.type == "longrope") {
      x /= (long_factors ? s.long_factor : s.freq_factors).at(static_cast<size_t>(i));
    } else if (s.type == "yarn") {
      // The kept frequency where pair i turns fast (i below the ramp), the interpolated one
      // (÷ factor) where it turns slowly (above it), a linear blend on the ramp.
      const double ramp = std::clamp((i - yarn_low) / (yarn_high - yarn_low), 0.0, 1.0);
      x = x / s.factor * ramp + x * (1 - ramp);
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

// A multimodal checkpoint's text model: its text_config parsed as `text_type`, with the top
// level's tie_word_embeddings where the text config has none, and a note on what is unused.
ModelConfig parse_text_config(const nlohmann::json& j, const std::string& where, const std::string& text_type,
                              const std::string& family, const std::string& unused) {
  const std::string type = j["model_type"].get<std::string>();
  if (!j.contains("text_config") || !j["text_config"].is_object())
    throw Error(where + ": model_type \"" + type + "\" without a \"text_config\" object\n  HINT: attnviz reads the text "
                "model of " + family + ".");
  nlohmann::json text = j["text_config"];
  text["model_type"] = text_type;
  if (!text.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
    text["tie_word_embeddings"] = j["tie_word_embeddings"];
  ModelConfig t = parse_config(text, where + ": text_config");
  t.notes.push_back(type + ": the text model of a multimodal checkpoint; " + unused);
  return t;
}

ModelConfig parse_gpt2(const nlohmann::json& j, const std::string& where) {
  ModelConfig c;
  c.model_type = "gpt2";
  c.arch = Arch::Gpt2;
  c.vocab_size = get_int(j, "vocab_size", where);
  c.n_layer = checked_layers(get_int(j, "n_layer", where), where + ": \"n_layer\"");
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
  if (get_bool(j, "scale_attn_by_inverse_layer_idx", false, where) ||
      get_bool(j, "reorder_and_upcast_attn", false, where))
    throw Error(where + ": scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported");
  return c;
}

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a JSON object (found " + json_excerpt(j) + ")");
  if (!j.contains("model_type") || !j["model_type"].is_string())
    throw Error(where + ": missing \"model_type\"\n  HINT: attnviz reads model_type " + known_model_types() + ".");
  ModelConfig c;
  c.model_type = j["model_type"].get<std::string>();
  const FamilyInfo* family = family_of_model_type(c.model_type);
  if (!family)
    throw Error(where + ": unknown model_type \"" + excerpt(c.model_type) + "\"\n  HINT: attnviz reads model_type " +
                known_model_types() + ".");
  const FamilyTraits t = family_traits(family->family);
  if (t.parse) return t.parse(j, where);     // the family's own reader (its wrappers too)
  if (c.model_type != family->model_type) {  // a multimodal checkpoint (gemma3): the text model's config inside
    if (!j.contains("text_config") || !j["text_config"].is_object())
      throw Error(where + ": model_type \"" + c.model_type +
                  "\" without a \"text_config\" object\n  HINT: attnviz reads "
                  "the text model of " +
                  c.model_type + ".");
    nlohmann::json text = j["text_config"];
    text["model_type"] = family->model_type;
    ModelConfig tc = parse_config(text, where + ": text_config");
    tc.notes.push_back(c.model_type + ": the text model of a multimodal checkpoint; its vision tower is not used");
    return tc;
  }
  parse_decoder(j, where, c);
  return c;
}

void set_layer_specs(ModelConfig& c, const std::vector<bool>& local, int window, const std::vector<bool>& rope,
                     float local_theta, const RopeScaling& local_scaling, float scale, float softcap, bool always) {
  const bool any_local = std::find(local.begin(), local.end(), true) != local.end();
  const bool uniform = !any_local && softcap == 0.f && std::find(rope.begin(), rope.end(), false) == rope.end() &&
                       scale == 1.f / std::sqrt(static_cast<float>(c.head_size));
  c.layer_specs.clear();
  if (uniform && !always) return;  // llama's layers: layer() derives them
  for (int l = 0; l < c.n_layer; ++l) {
    LayerSpec s;
    const bool loc = local[static_cast<size_t>(l)];
    s.window = loc ? window : 0;
    s.rope = rope[static_cast<size_t>(l)];
    s.rope_theta = loc ? local_theta : c.rope_theta;
    s.rope_scaling = loc ? local_scaling : c.rope_scaling;
    s.scale = scale;
    s.softcap = softcap;
    c.layer_specs.push_back(std::move(s));
  }
}

LayerSpec ModelConfig::layer(int l) const {
  if (!layer_specs.empty()) return layer_specs.at(static_cast<size_t>(l));
  LayerSpec s;
  s.rope = arch == Arch::Llama;
  s.rope_theta = rope_theta;
  s.rope_scaling = rope_scaling;
  s.scale = 1.f / std::sqrt(static_cast<float>(head_size));
  return s;
}

bool ModelConfig::any_local() const {
  return std::any_of(layer_specs.begin(), layer_specs.end(), [](const LayerSpec& s) { return s.window > 0; });
}
int ModelConfig::heads_at(int l) const {
  switch (layer(l).mixer) {
    case Mixer::Softmax: return n_head;
    case Mixer::GatedDeltaNet: return linear.v_heads;
    case Mixer::ShortConv: return 0;
  }
  return 0;
}

bool ModelConfig::any_linear() const {
  return std::any_of(layer_specs.begin(), layer_specs.end(), [](const LayerSpec& s) { return s.mixer != Mixer::Softmax; });
}
bool ModelConfig::any_softcap() const {
  return std::any_of(layer_specs.begin(), layer_specs.end(), [](const LayerSpec& s) { return s.softcap > 0; });
}

namespace {
// "0,2,4-9": the layers where `pick` holds, runs shortened.
template <class F>
std::string layer_list(int L, F pick) {
  std::string out;
  for (int l = 0; l < L;) {
    if (!pick(l)) {
      ++l;
      continue;
    }
    int e = l;
    while (e + 1 < L && pick(e + 1)) ++e;
    out += (out.empty() ? "" : ",") + std::to_string(l) + (e > l + 1 ? "-" + std::to_string(e) : e == l + 1 ? "," + std::to_string(e) : "");
    l = e + 1;
  }
  return out;
}
std::string num(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(v));
  return b;
}
}  // namespace

std::string ModelConfig::block_kind() const {
  if (arch == Arch::Gpt2) return "learned positions, LayerNorm, GELU";
  return std::string("RoPE, RMSNorm, ") + (experts.count ? "experts" : mlp == MlpKind::GeGLU ? "GeGLU" : "SwiGLU");
}

std::string ModelConfig::features() const {
  std::vector<std::string> f;
  if (qk_norm == QkNorm::PerHead) f.push_back("QK-norm per head");
  if (qk_norm == QkNorm::Whole) f.push_back("QK-norm over all heads");
  if (norm_place == NormPlace::Sandwich) f.push_back("4 norms per block");
  if (norm_place == NormPlace::Post) f.push_back("norms after attention and MLP");
  if (mlp == MlpKind::GeGLU) f.push_back("GeGLU");
  if (fused_qkv) f.push_back("fused qkv");
  if (rotary_dim) f.push_back("RoPE on " + std::to_string(rotary_dim) + " of " + std::to_string(head_size) + " dims");
  if (linear.v_heads)
    f.push_back("gated delta rule (linear attention) on layers " +
                layer_list(n_layer, [&](int l) { return layer(l).mixer == Mixer::GatedDeltaNet; }) + ", " +
                std::to_string(linear.v_heads) + " value heads of " + std::to_string(linear.k_dim) + "x" +
                std::to_string(linear.v_dim));
  if (attn_gate) f.push_back("output gate on attention");
  if (per_layer_attention() && arch == Arch::Llama) {  // Gemma 4
    std::map<int, std::string> sizes;  // d -> layers
    for (int l = 0; l < n_layer; ++l) sizes[head_size_at(l)];
    if (sizes.size() > 1)
      for (auto& [d, s] : sizes) {
        const int D = d;
        f.push_back("head size " + std::to_string(D) + " on layers " + layer_list(n_layer, [&](int l) { return head_size_at(l) == D; }));
      }
    const std::string kv = layer_list(n_layer, [&](int l) { return kv_heads_at(l) != n_kv_head; });
    if (!kv.empty()) f.push_back(std::to_string(kv_heads_at(n_layer - 1)) + " KV heads on layers " + kv);
    const std::string vk = layer_list(n_layer, [&](int l) { return layer(l).v_from_k; });
    if (!vk.empty()) f.push_back("V = K on layers " + vk);
    const std::string shared = layer_list(n_layer, [&](int l) { return layer(l).kv_source >= 0; });
    if (!shared.empty()) {
      std::map<int, bool> sources;
      for (int l = 0; l < n_layer; ++l)
        if (layer(l).kv_source >= 0) sources[layer(l).kv_source] = true;
      std::string from;
      for (auto& [src, b] : sources) from += (from.empty() ? "" : ", ") + std::to_string(src);
      f.push_back("layers " + shared + " read the K/V of layer" + (sources.size() > 1 ? "s " : " ") + from);
    }
    if (v_norm) f.push_back("V-norm");
    if (ple_dim) f.push_back("per-layer embeddings of " + std::to_string(ple_dim));
    if (layer_scalars) f.push_back("layer scalars");
  }
  if (attn_sinks) f.push_back("a sink logit per head");
  if (experts.count && experts.gemma)
    f.push_back(std::to_string(experts.count) + " experts of " + std::to_string(experts.width) + ", " +
                std::to_string(experts.top_k) + " per token, beside the dense MLP");
  else if (experts.count)
    f.push_back(std::to_string(experts.count) + " experts, " + std::to_string(experts.top_k) + " per token (swiglu limit " +
                num(experts.limit) + ")");
  if (short_conv_kernel)
    f.push_back("gated short convolution (" + std::to_string(short_conv_kernel) + " taps" +
                (short_conv_bias ? ", biases" : "") + ") on layers " +
                layer_list(n_layer, [&](int l) { return layer(l).mixer == Mixer::ShortConv; }));
  if (rope_scaling.type == "longrope") f.push_back("longrope x" + num(rope_scaling.mscale));
  if (rope_scaling.type == "yarn")
    f.push_back("YaRN x" + num(rope_scaling.factor) + " over " + std::to_string(rope_scaling.original_max_position) +
                (rope_scaling.mscale != 1.f ? ", attention factor " + num(rope_scaling.mscale) : ""));
  if (attn_temp_beta != 0.f)
    f.push_back("query temperature 1 + " + num(attn_temp_beta) + "·ln(1 + ⌊pos/" + std::to_string(attn_temp_length) + "⌋)");
  const int L = n_layer;
  std::map<int, std::string> windows;  // W -> layers
  for (int l = 0; l < L; ++l)
    if (const int w = layer(l).window) windows[w];
  for (auto& [w, s] : windows) {
    const int W = w;
    const std::string ls = layer_list(L, [&](int l) { return layer(l).window == W; });
    f.push_back("window " + std::to_string(W) + " on layers " + ls);
  }
  if (any_local()) {
    const std::string g = layer_list(L, [&](int l) { return layer(l).window == 0; });
    f.push_back(g.empty() ? "no global layer" : "global on " + g);
  }
  if (arch == Arch::Llama) {
    const std::string nr = layer_list(L, [&](int l) { return !layer(l).rope && layer(l).mixer == Mixer::Softmax; });
    if (!nr.empty()) f.push_back("no RoPE on layers " + nr);
    if (!layer_specs.empty() && layer(0).rope_theta != rope_theta)
      f.push_back("RoPE base " + num(layer(0).rope_theta) + " local, " + num(rope_theta) + " global");
  }
  if (any_softcap()) f.push_back("soft-cap " + num(layer(0).softcap));
  int first_softmax = 0;  // the scale of a softmax layer (a linear layer's is its q's dk^−½)
  while (first_softmax + 1 < L && layer(first_softmax).mixer != Mixer::Softmax) ++first_softmax;
  if (!layer_specs.empty() && layer(first_softmax).scale != 1.f / std::sqrt(static_cast<float>(head_size)))
    f.push_back("scale " + num(layer(first_softmax).scale));
  if (emb_scale != 1.f) f.push_back("embeddings x" + num(emb_scale));
  if (residual_scale != 1.f) f.push_back("residual x" + num(residual_scale));
  if (logit_scale != 1.f) f.push_back("logits x" + num(logit_scale));
  if (final_softcap > 0) f.push_back("final soft-cap " + num(final_softcap));
  std::string out;
  for (const auto& s : f) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::vector<double> rope_inv_freq(const ModelConfig& c, int l, int T) {
  const LayerSpec s = c.layer(l);
  if (!s.rope) return {};
  return rope_inv_freq(s.rope_theta, s.head_size ? s.head_size : c.rotary(), s.rope_scaling, T);
}

int ModelConfig::head_size_at(int l) const {
  return layer_specs.empty() || !layer_specs[static_cast<size_t>(l)].head_size ? head_size
                                                                                : layer_specs[static_cast<size_t>(l)].head_size;
}
int ModelConfig::kv_heads_at(int l) const {
  return layer_specs.empty() || !layer_specs[static_cast<size_t>(l)].kv_heads ? n_kv_head
                                                                               : layer_specs[static_cast<size_t>(l)].kv_heads;
}
int ModelConfig::inner_at(int l) const {
  return layer_specs.empty() || !layer_specs[static_cast<size_t>(l)].n_inner ? n_inner
                                                                              : layer_specs[static_cast<size_t>(l)].n_inner;
}
bool ModelConfig::per_layer_attention() const {
  return ple_dim > 0 || layer_scalars || v_norm ||
         std::any_of(layer_specs.begin(), layer_specs.end(), [&](const LayerSpec& s) {
           return (s.head_size && s.head_size != head_size) || (s.kv_heads && s.kv_heads != n_kv_head) ||
                  s.kv_source >= 0 || s.v_from_k;
         });
}
void ModelConfig::require_uniform_layers(const std::string& what) const {
  if (!per_layer_attention()) return;
  throw Error(what + " does not cover models whose layers differ in head size or share keys and values yet, and this " +
                  model_type + " model's do\n  HINT: `attnviz-cli dump` records every layer of it, and `eval`, `bench`, "
                  "`info`, `heads` and `tokenize` run it.",
              ErrorKind::Usage);
}

bool rope_changes(const ModelConfig& c, int T_old, int T) {
  for (int l = 0; l < c.n_layer; ++l) {
    const RopeScaling& s = c.layer(l).rope_scaling;
    if (s.type == "longrope" && (T_old > s.original_max_position) != (T > s.original_max_position)) return true;
  }
  return false;
}

void ModelConfig::require_softmax_only(const std::string& what) const {
  if (!any_linear()) return;
  const std::string ls = layer_list(n_layer, [&](int l) { return layer(l).mixer != Mixer::Softmax; });
  throw Error(what + " does not show layers other than softmax attention yet, and this " + model_type + " model's layers " +
                  ls + " are " + (linear.v_heads ? "linear attention (gated delta rule)" : "short convolutions") +
                  "\n  HINT: `attnviz-cli dump` records every layer of it (a linear layer's implicit attention matrix "
                  "too), and `eval`, `bench`, `info` and `tokenize` run it.",
              ErrorKind::Usage);
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
  int64_t attn = add(add(mul({c.attn_gate ? 2 : 1, C, Hd}), mul({2, C, KVd})), mul({Hd, C}));
  if (c.qkv_bias) attn = add(attn, add(Hd, mul({2, KVd})));
  if (c.o_bias) attn = add(attn, C);
  // A gated-delta-rule layer: in_proj_qkv, in_proj_z, in_proj_b and _a, the convolution,
  // dt_bias and A_log, the gated norm, out_proj.
  const LinearAttnDims& ld = c.linear;
  const int64_t linear = c.linear.v_heads ? add(add(add(mul({C, ld.conv_channels()}), mul({C, ld.value_width()})),
                                                  add(mul({2, C, ld.v_heads}), mul({ld.conv_channels(), ld.conv_kernel}))),
                                              add(add(2 * int64_t{ld.v_heads}, ld.v_dim), mul({ld.value_width(), C})))
                                        : 0;
  // An LFM2 convolution layer: in_proj (3C), the taps, out_proj (+ their biases).
  const int64_t conv = c.short_conv_kernel ? add(add(mul({4, C, C}), mul({C, c.short_conv_kernel})),
                                                 c.short_conv_bias ? 5 * C : 0)
                                           : 0;
  int64_t n_softmax = 0, n_linear = 0, n_conv = 0;
  for (int l = 0; l < L; ++l) {
    switch (c.layer(l).mixer) {  // every kind has its case
      case Mixer::Softmax: ++n_softmax; break;
      case Mixer::GatedDeltaNet: ++n_linear; break;
      case Mixer::ShortConv: ++n_conv; break;
    }
  }
  p.attention = add(add(mul({n_softmax, attn}), mul({n_linear, linear})), mul({n_conv, conv}));
  if (c.per_layer_attention()) {  // Gemma 4: each layer's own head size, KV heads and MLP width
    p.attention = 0;
    int64_t mlp_all = 0, qk_norms = 0;
    for (int l = 0; l < L; ++l) {
      const LayerSpec s = c.layer(l);
      const int64_t d = c.head_size_at(l), Hd_l = mul({c.n_head, d}), KVd_l = mul({c.kv_heads_at(l), d});
      const int64_t kv = s.kv_source >= 0 ? 0 : s.v_from_k ? KVd_l : mul({2, KVd_l});
      p.attention = add(p.attention, add(mul({2, C, Hd_l}), mul({C, kv})));
      mlp_all = add(mlp_all, mul({3, C, c.inner_at(l)}));
      qk_norms = add(qk_norms, s.kv_source >= 0 ? d : 2 * d);
    }
    if (c.experts.gemma) {  // per layer: the router (E, C), its scale (C), the per-expert scale (E), E experts
      const int64_t E = c.experts.count, Ie = c.experts.width;
      mlp_all = add(mlp_all, mul({L, add(add(mul({E, C}), add(C, E)), mul({E, 3, Ie, C}))}));
      qk_norms = add(qk_norms, mul({L, 3, C}));  // the experts' input norm and the two branches' own
    }
    p.mlp = mlp_all;
    p.norms = add(mul({add(mul({4, L}), 1), C}), qk_norms);
    if (c.ple_dim)  // the (V_ple, L·P) table, the model's (C, L·P) projection and its norm; per layer gate, projection, norm
      p.per_layer = add(add(mul({c.ple_vocab, L, c.ple_dim}), mul({C, L, c.ple_dim})),
                        add(c.ple_dim, mul({L, add(mul({2, C, c.ple_dim}), C)})));
    if (c.layer_scalars) p.per_layer = add(p.per_layer, L);
    p.lm_head = c.tie_embeddings ? 0 : mul({V, C});
    return p;
  }
  int64_t mlp = gpt2 ? mul({2, C, I}) : mul({3, C, I});  // gpt2 c_fc + c_proj; llama gate + up + down
  if (c.mlp_bias) mlp = add(mlp, gpt2 ? I + C : 2 * I + C);
  if (c.experts.count)  // GPT-OSS: the router (+ bias) and E experts (gate | up and down, + biases)
    mlp = add(mul({add(C, 1), c.experts.count}), mul({c.experts.count, add(add(mul({3, C, I}), 2 * I), C)}));
  p.mlp = mul({L, mlp});
  p.attention = add(p.attention, c.attn_sinks ? mul({L, c.n_head}) : 0);  // a sink logit per head
  const int64_t norm = gpt2 ? 2 * C : C;  // LayerNorm has weight and bias, RMSNorm a weight
  const int64_t block_norms = c.norm_place == NormPlace::Sandwich ? 4 : 2;  // Post: the two after
  p.norms = mul({add(mul({block_norms, L}), 1), norm});
  if (c.qk_norm == QkNorm::PerHead) p.norms = add(p.norms, mul({n_softmax, 2, c.head_size}));
  if (c.qk_norm == QkNorm::Whole) p.norms = add(p.norms, mul({L, add(Hd, KVd)}));
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
  const Family family = family_of(c);
  const FamilyTraits t = family_traits(family);
  const bool gemma = t.gemma;
  j["num_key_value_heads"] = c.n_kv_head;
  j["head_dim"] = c.head_size;
  j["rope_theta"] = c.rope_theta;
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "longrope") {
    j["rope_scaling"] = {{"rope_type", s.type}, {"short_factor", s.freq_factors}, {"long_factor", s.long_factor},
                         {"attention_factor", s.mscale}};
    j["original_max_position_embeddings"] = s.original_max_position;
  } else if (s.type == "yarn") {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", s.original_max_position},
                         {"beta_fast", s.beta_fast},
                         {"beta_slow", s.beta_slow},
                         {"truncate", s.truncate},
                         {"attention_factor", s.mscale}};
  } else if (!s.type.empty()) {
    j["rope_scaling"] = {{"rope_type", s.type}, {"factor", s.factor}};
    if (s.type == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = s.low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = s.high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] = s.original_max_position;
    }
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j[gemma ? "hidden_activation" : "hidden_act"] = gemma ? "gelu_pytorch_tanh" : "silu";
  if (t.json_attention_bias) j["attention_bias"] = c.qkv_bias;
  const LayerSpec first = c.layer(0);
  if (gemma) {
    j["architectures"] = {family == Family::Gemma2 ? "Gemma2ForCausalLM" : "Gemma3ForCausalLM"};
    j["query_pre_attn_scalar"] = 1.0 / (static_cast<double>(first.scale) * first.scale);
    j["attn_logit_softcapping"] = first.softcap > 0 ? nlohmann::json(first.softcap) : nlohmann::json();
    j["final_logit_softcapping"] = c.final_softcap > 0 ? nlohmann::json(c.final_softcap) : nlohmann::json();
  }
  if (t.per_type_rope) {
    j["rope_local_base_freq"] = 10000.f;
    for (int l = 0; l < c.n_layer; ++l)
      if (c.layer(l).window) j["rope_local_base_freq"] = c.layer(l).rope_theta;
  }
  if (t.partial_rope && c.rotary_dim) j["partial_rotary_factor"] = static_cast<double>(c.rotary_dim) / c.head_size;
  if (t.multipliers) {
    j["attention_multiplier"] = first.scale;
    j["embedding_multiplier"] = c.emb_scale;
    j["residual_multiplier"] = c.residual_scale;
    j["logits_scaling"] = 1.0 / static_cast<double>(c.logit_scale);
  }
  if (t.no_rope_layers) {
    j["no_rope_layers"] = nlohmann::json::array();
    for (int l = 0; l < c.n_layer; ++l) j["no_rope_layers"].push_back(c.layer(l).rope ? 1 : 0);
  }
  // Local layers: sliding_window, and layer_types where the family's config has them.
  if (t.json_windows) {
    int window = 0;
    for (int l = 0; l < c.n_layer; ++l) window = std::max(window, c.layer(l).window);
    j["sliding_window"] = window ? nlohmann::json(window) : nlohmann::json();
    if (window && t.json_layer_types) {
      if (!gemma) j["use_sliding_window"] = true;
      j["layer_types"] = nlohmann::json::array();
      for (int l = 0; l < c.n_layer; ++l)
        j["layer_types"].push_back(c.layer(l).window ? "sliding_attention" : "full_attention");
    }
  }
  if (t.to_json) t.to_json(c, j);  // the family's own keys
  return j;
}

}  // namespace attnviz
