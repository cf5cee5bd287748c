// The readers every family's config.json parser shares (defined in config.cpp); the
// families' own parsers (core/model/families/) use them, and parse_config reaches those
// through FamilyTraits::parse. Every reader names `where` (the file, and the object inside
// it) in its errors.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace attnviz {

struct RopeScaling;  // core/model/config.h
struct ModelConfig;

// A dimension: a positive integer of at most kMaxDim; `fallback` ≥ 0 when the key may be absent.
int get_int(const nlohmann::json& j, const char* key, const std::string& where, int fallback = -1);
// A finite number; with `positive`, also > 0 (epsilons, RoPE base).
float get_float(const nlohmann::json& j, const char* key, float fallback, const std::string& where,
                bool positive = false);
std::string get_string(const nlohmann::json& j, const char* key, const std::string& fallback, const std::string& where);
bool get_bool(const nlohmann::json& j, const char* key, bool fallback, const std::string& where);
// One rope_scaling (or rope_parameters) object into s; its rope_theta, where it has one,
// into *theta. `top` is the config (longrope reads its context lengths); rot the rotary width.
void parse_rope_scaling(const nlohmann::json& r, const std::string& at, const nlohmann::json& top, int rot,
                        RopeScaling& s, float* theta);

// head_dim, else hidden_size / num_attention_heads (which must divide it): even for RoPE,
// num_attention_heads a multiple of num_key_value_heads, the widths within kMaxDim. Reads
// c.n_embd, c.n_head and c.n_kv_head; sets c.head_size.
void read_head_size(const nlohmann::json& j, const std::string& where, ModelConfig& c);
// "layer_types" when the config has it: per layer, the index of its name in `names` (an
// Error naming the entry, with `hint`, for any other); empty when it has none.
std::vector<int> read_layer_types(const nlohmann::json& j, int L, const std::string& where,
                                  const std::vector<std::string>& names, const std::string& hint);

// A multimodal checkpoint's text model: its text_config parsed as `text_type`, with the top
// level's tie_word_embeddings where the text config has none, and a note that `unused` (its
// vision tower, ...) is not used. `family` names the model in the hint.
ModelConfig parse_text_config(const nlohmann::json& j, const std::string& where, const std::string& text_type,
                              const std::string& family, const std::string& unused);
// GPT-2's config.json (n_layer, n_embd, n_head, n_positions, ...).
ModelConfig parse_gpt2(const nlohmann::json& j, const std::string& where);

}  // namespace attnviz
