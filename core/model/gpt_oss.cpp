// OpenAI's GPT-OSS (model_type "gpt_oss"): the keys of config.json and what they mean, as
// Hugging Face's GptOssForCausalLM defines the model.
//
// A llama-style decoder (RMSNorm before attention and before the MLP, rotate-half RoPE with
// YaRN, GQA, biases on q, k, v and o, layer_types alternating 128-token windows with global
// layers) with two changes:
//   - every query head has a learned sink logit (self_attn.sinks, (H)): a column appended to
//     each row's masked scores before the softmax and dropped after it, so the row's weights
//     over the keys sum to 1 − p_sink;
//   - the MLP is a mixture of experts: router logits x·W_r + b (E), the num_experts_per_tok
//     largest, a softmax over those; each chosen expert computes gate | up = x·W_e + b_e
//     (interleaved columns), gate ≤ limit, |up| ≤ limit, glu = gate·σ(1.702·gate),
//     ((up + 1)·glu)·W_down,e + b_down,e, weighted by its softmax weight.
// The experts' matrices are stacked (E, in, out) parameters, not nn.Linear weights.
// Checkpoints as OpenAI ships them hold the experts as MXFP4 blocks (*_blocks, *_scales):
// those are refused with a hint until that format is read.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/config.h"
#include "core/model/config_read.h"

namespace attnviz {

ModelConfig parse_gpt_oss(const nlohmann::json& j, const std::string& where) {
  if (j.contains("quantization_config") && j["quantization_config"].is_object() &&
      j["quantization_config"].value("quant_method", std::string()) == "mxfp4")
    throw Error(where + ": this GPT-OSS checkpoint holds its experts as MXFP4 blocks, which attnviz does not read from "
                "safetensors yet\n  HINT: open a GGUF file of it, or a checkpoint with its experts dequantized "
                "(bf16 or float32 gate_up_proj / down_proj).");
  nlohmann::json text = j;
  text["model_type"] = "llama";  // the decoder keys are llama's (layer_types, sliding_window, rope_scaling, head_dim)
  text.erase("hidden_act");      // the experts' activation is their own, below
  if (!text.contains("attention_bias")) text["attention_bias"] = true;
  if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = false;
  ModelConfig c = parse_config(text, where);
  c.model_type = "gpt_oss";
  c.attn_sinks = true;
  const char* count_key = j.contains("num_experts") && !j.contains("num_local_experts") ? "num_experts" : "num_local_experts";
  c.experts.count = get_int(j, count_key, where);
  c.experts.top_k = get_int(j, j.contains("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token", where);
  if (c.experts.top_k > c.experts.count)
    throw Error(where + ": num_experts_per_tok " + std::to_string(c.experts.top_k) + " is more than the " +
                std::to_string(c.experts.count) + " experts (" + count_key + ")");
  c.experts.limit = get_float(j, "swiglu_limit", 7.f, where, true);
  return c;
}

void gpt_oss_config_json(const ModelConfig& c, nlohmann::json& j) {
  j["architectures"] = {"GptOssForCausalLM"};
  j["attention_bias"] = c.qkv_bias;
  j["num_local_experts"] = c.experts.count;
  j["num_experts_per_tok"] = c.experts.top_k;
  j["swiglu_limit"] = c.experts.limit;
  j.erase("hidden_act");
  j["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l) j["layer_types"].push_back(c.layer(l).window ? "sliding_attention" : "full_attention");
}

}  // namespace attnviz
