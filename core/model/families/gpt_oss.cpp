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
//
// In GGUF (general.architecture "gpt-oss", as llama.cpp's converter writes it) the model is
// the same with llama.cpp's names: gpt-oss.expert_count / expert_used_count /
// expert_feed_forward_length; attn_sinks.weight (H); post_attention_norm.weight (the norm
// before the MLP); the router as ffn_gate_inp.weight (E, C) + bias; and each layer's experts
// stacked (E, out, in) with gate and up apart: ffn_gate_exps, ffn_up_exps (E, I, C),
// ffn_down_exps (E, C, I), each with an (E, out) bias (Hugging Face's interleaved gate | up
// columns are split by the converter). The experts are MXFP4 in the files people run, read
// where they lie. llama.cpp fixes what the file does not say: layers alternate a window
// (even layers) with global ones, the clamp is 7 and α 1.702.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/config.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"
#include "core/model/gguf_families.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"

namespace attnviz {

ModelConfig parse_gpt_oss(const nlohmann::json& j, const std::string& where) {
  if (j.contains("quantization_config") && j["quantization_config"].is_object() &&
      j["quantization_config"].value("quant_method", std::string()) == "mxfp4")
    throw Error(where +
                ": this GPT-OSS checkpoint holds its experts as MXFP4 blocks, which attnviz does not read from "
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
  const char* count_key =
      j.contains("num_experts") && !j.contains("num_local_experts") ? "num_experts" : "num_local_experts";
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
  for (int l = 0; l < c.n_layer; ++l)
    j["layer_types"].push_back(c.layer(l).window ? "sliding_attention" : "full_attention");
}

void gpt_oss_gguf_traits(const GgufFile& f, ModelConfig& c) {
  const std::string a = "gpt-oss.", where = "GGUF file '" + f.path() + "': ";
  c.model_type = "gpt_oss";
  c.attn_sinks = true;
  c.experts.count = gguf_positive(f, a + "expert_count");
  c.experts.top_k = gguf_positive(f, a + "expert_used_count");
  if (c.experts.top_k > c.experts.count)
    throw Error(where + "metadata '" + a + "expert_used_count' " + std::to_string(c.experts.top_k) +
                " is more than the " + std::to_string(c.experts.count) + " experts ('" + a + "expert_count')");
  c.n_inner = gguf_positive(f, a + "expert_feed_forward_length", c.n_inner);
  // llama.cpp's YaRN always rounds the correction range outward; Hugging Face's gpt-oss
  // config says truncate: false (docs/models.md: the logits differ slightly there).
  c.rope_scaling.truncate = true;
  if (!f.find("blk.0.attn_sinks.weight"))
    throw Error(where +
                "missing tensor 'blk.0.attn_sinks.weight' (GPT-OSS's per-head sink logits)\n  HINT: the file "
                "is not a gpt-oss model as llama.cpp's converter writes it.");
}

std::string gpt_oss_gguf_name(Slot s, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (s) {
    case Slot::Norm2: return p + "post_attention_norm.weight";  // Hugging Face's post_attention_layernorm
    case Slot::Sinks: return p + "attn_sinks.weight";
    case Slot::Router: return p + "ffn_gate_inp.weight";
    case Slot::RouterBias: return p + "ffn_gate_inp.bias";
    case Slot::ExpGate: return p + "ffn_gate_exps.weight";
    case Slot::ExpUp: return p + "ffn_up_exps.weight";
    case Slot::ExpDown: return p + "ffn_down_exps.weight";
    case Slot::ExpGateBias: return p + "ffn_gate_exps.bias";
    case Slot::ExpUpBias: return p + "ffn_up_exps.bias";
    case Slot::ExpDownBias: return p + "ffn_down_exps.bias";
    default: return "";
  }
}

std::vector<DecoderTensor> gpt_oss_gguf_tensors(const ModelConfig& c) {
  const int64_t E = c.experts.count, C = c.n_embd, I = c.n_inner;
  std::vector<DecoderTensor> out;
  for (DecoderTensor& t : decoder_tensors(c)) {
    auto as = [&](Slot s, std::vector<int64_t> shape) {
      out.push_back({gpt_oss_gguf_name(s, t.layer), std::move(shape), t.layer, s});
    };
    switch (t.slot) {
      case Slot::ExpGateUp:
        as(Slot::ExpGate, {E, I, C}), as(Slot::ExpUp, {E, I, C});
        break;  // stored (out, in) per expert
      case Slot::ExpGateUpBias: as(Slot::ExpGateBias, {E, I}), as(Slot::ExpUpBias, {E, I}); break;
      case Slot::ExpDown: as(Slot::ExpDown, {E, C, I}); break;
      default: out.push_back(std::move(t)); break;
    }
  }
  return out;
}

namespace {

// GGUF: the experts' count, choice and width.
void gpt_oss_gguf_write_tail(const ModelConfig& c, const std::string& a, GgufWriter& g) {
  g.set_u32(a + "expert_count", static_cast<uint32_t>(c.experts.count));
  g.set_u32(a + "expert_used_count", static_cast<uint32_t>(c.experts.top_k));
  g.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_inner));
}

}  // namespace

FamilyTraits gpt_oss_traits() {
  FamilyTraits t;
  t.parse = parse_gpt_oss;
  t.to_json = gpt_oss_config_json;
  t.gguf_name = gpt_oss_gguf_name;
  t.gguf_tensors = gpt_oss_gguf_tensors;
  t.gguf_read_traits = gpt_oss_gguf_traits;
  t.gguf_local_period = 2;  // sliding windows on the even layers
  t.gguf_write_tail = gpt_oss_gguf_write_tail;
  t.gguf_yarn_truncate = true;
  return t;
}

}  // namespace attnviz
