// The readers every family's config.json parser shares (defined in config.cpp), and the
// parsers of the families that live in files of their own (qwen35.cpp, ...). parse_config
// dispatches to them by model_type. Every reader names `where` (the file, and the object
// inside it) in its errors.
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

// Qwen3.5's text model ("qwen3_5_text"), core/model/qwen35.cpp: full-attention layers with
// an output gate and partial RoPE between gated-delta-rule (linear attention) layers.
void parse_qwen35_text(const nlohmann::json& j, const std::string& where, ModelConfig& c);
// Liquid AI's LFM2 ("lfm2"), core/model/lfm2.cpp: gated short convolutions between
// softmax-attention layers with per-head QK-norm.
void parse_lfm2(const nlohmann::json& j, const std::string& where, ModelConfig& c);
// OpenAI's GPT-OSS ("gpt_oss"), core/model/gpt_oss.cpp: a llama-style decoder with a sink
// logit per head and a mixture of experts; gpt_oss_config_json writes its own keys into j.
ModelConfig parse_gpt_oss(const nlohmann::json& j, const std::string& where);
void gpt_oss_config_json(const ModelConfig& c, nlohmann::json& j);
// Google's Gemma 4 text model ("gemma4_text"; "gemma4" and "gemma4_unified" hold it in their
// text_config), core/model/gemma4.cpp: local and global layers of different head sizes,
// V = K and KV shared between layers, per-layer embeddings, layer scalars.
ModelConfig parse_gemma4_text(const nlohmann::json& j, const std::string& where);
void gemma4_config_json(const ModelConfig& c, nlohmann::json& j);

}  // namespace attnviz
