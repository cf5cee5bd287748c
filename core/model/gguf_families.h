// The hybrid families as llama.cpp stores them in GGUF: their metadata read into a
// ModelConfig (each family's own file: qwen35.cpp, lfm2.cpp; their tensor names are in
// model.h), and the metadata helpers those readers share with gguf_model.cpp.
#pragma once
#include <string>

#include "core/model/config.h"
#include "core/model/gguf.h"

namespace attnviz {

// A positive metadata integer that fits an int (fallback < 0: the key is required).
int gguf_positive(const GgufFile& f, const std::string& key, int64_t fallback = -1);
// A positive finite metadata number (`fallback` when absent); `what` describes it in the error.
float gguf_positive_float(const GgufFile& f, const std::string& key, float fallback,
                          const char* what = "a positive number");

// The vocabulary: {arch}.vocab_size when given, else the token embedding's rows.
int gguf_vocab_size(const GgufFile& f, const std::string& arch);

// Qwen3.5 (general.architecture "qwen35"): the trunk's layers (block_count minus the
// multi-token-prediction layers, nextn_predict_layers), which are linear (attention.
// recurrent_layers, or every layer l with (l + 1) % full_attention_interval != 0), the
// ssm.* sizes, partial RoPE (rope.dimension_count) and the value heads in llama.cpp's tiled
// order. Errors name the file and the key.
ModelConfig qwen35_gguf_config(const GgufFile& f);
// LFM2 ("lfm2"): layers whose attention.head_count_kv entry is 0 are short convolutions of
// shortconv.l_cache taps.
ModelConfig lfm2_gguf_config(const GgufFile& f);
// GPT-OSS ("gpt-oss", read by gguf_config as a llama-style model with windows on even
// layers): what is its own, set on c: model_type, sinks, the experts' count, choice and
// width (expert_feed_forward_length), and llama.cpp's YaRN rounding. gpt_oss.cpp.
void gpt_oss_gguf_traits(const GgufFile& f, ModelConfig& c);
// Gemma 4 ("gemma4"): its per-layer arrays and rope_freqs read into the config.json keys
// parse_gemma4_text reads (gemma4.cpp).
ModelConfig gemma4_gguf_config(const GgufFile& f);

}  // namespace attnviz
