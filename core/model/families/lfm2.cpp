// Liquid AI's LFM2 (model_type "lfm2"): the keys of config.json and the tensor names of
// Hugging Face's Lfm2ForCausalLM.
//
// Most layers (layer_types "conv", or every layer not in full_attn_idxs) are gated short
// convolutions: in_proj gives B | C | x (C columns each), u = B ⊙ x runs through a causal
// depthwise convolution of conv_L_cache taps, y = C ⊙ conv(u), then out_proj; no activation.
// The others are softmax attention with a per-head RMSNorm of q and k (q_layernorm,
// k_layernorm), RoPE over the whole head and an out_proj. Every RMSNorm weight acts as w
// (not 1 + w), with norm_eps; the last norm is named embedding_norm; the MLP (w1, w3, w2) is
// SwiGLU of a width derived from block_ff_dim / intermediate_size.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/config.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"
#include "core/model/gguf_families.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"

namespace attnviz {

void parse_lfm2(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
  c.arch = Arch::Llama;
  c.vocab_size = get_int(j, "vocab_size", where);
  c.n_layer = checked_layers(get_int(j, "num_hidden_layers", where), where + ": \"num_hidden_layers\"");
  c.n_embd = get_int(j, "hidden_size", where);
  c.n_head = get_int(j, "num_attention_heads", where);
  c.n_kv_head = get_int(j, "num_key_value_heads", where, 8);
  c.n_ctx = get_int(j, "max_position_embeddings", where, 128000);
  c.norm_eps = get_float(j, "norm_eps", 1e-5f, where, true);
  // Liquid's own key first (tie_embedding), then Hugging Face's; tied by default.
  c.tie_embeddings = get_bool(j, "tie_embedding", get_bool(j, "tie_word_embeddings", true, where), where);
  read_head_size(j, where, c);
  checked_dim(3, c.n_embd, where + ": the convolution's in_proj width 3 x hidden_size");
  c.qk_norm = QkNorm::PerHead;
  c.short_conv_kernel = get_int(j, "conv_L_cache", where, 3);
  if (c.short_conv_kernel > 64)
    throw Error(where + ": conv_L_cache " + std::to_string(c.short_conv_kernel) + " is more than 64 taps");
  c.short_conv_bias = get_bool(j, "conv_bias", false, where);

  // The MLP's width: block_ff_dim (or intermediate_size), × 2/3 when auto-adjusted, then ×
  // block_ffn_dim_multiplier rounded up to a multiple of block_multiple_of.
  int64_t ff = j.contains("block_ff_dim") && !j["block_ff_dim"].is_null()
                   ? get_int(j, "block_ff_dim", where)
                   : get_int(j, "intermediate_size", where, 12288);
  if (get_bool(j, "block_auto_adjust_ff_dim", true, where)) {
    ff = 2 * ff / 3;
    if (j.contains("block_ffn_dim_multiplier") && j["block_ffn_dim_multiplier"].is_null()) {
      // no multiplier: no rounding either
    } else {
      const double mult = get_float(j, "block_ffn_dim_multiplier", 1.f, where, true);
      const int64_t m = get_int(j, "block_multiple_of", where, 256);
      ff = static_cast<int64_t>(mult * static_cast<double>(ff));
      ff = m * ((ff + m - 1) / m);
    }
  }
  if (ff <= 0 || ff > kMaxDim)
    throw Error(where + ": the feed-forward width derived from block_ff_dim / intermediate_size is " +
                std::to_string(ff) + ", outside 1 … " + std::to_string(kMaxDim));
  c.n_inner = static_cast<int>(ff);

  // RoPE base: rope_parameters' rope_theta, else rope_theta (1e6 by default).
  c.rope_theta = get_float(j, "rope_theta", 1e6f, where, true);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null())
    parse_rope_scaling(j["rope_parameters"], where + ": rope_parameters", j, c.head_size, c.rope_scaling,
                       &c.rope_theta);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    parse_rope_scaling(j["rope_scaling"], where + ": rope_scaling", j, c.head_size, c.rope_scaling, nullptr);

  // Which layers are attention: layer_types, else full_attn_idxs, else all.
  const int L = c.n_layer;
  std::vector<bool> conv(static_cast<size_t>(L), false);
  const std::vector<int> types =
      read_layer_types(j, L, where, {"full_attention", "conv"}, "LFM2's layers are \"conv\" or \"full_attention\".");
  if (!types.empty()) {
    for (int l = 0; l < L; ++l) conv[static_cast<size_t>(l)] = types[static_cast<size_t>(l)] == 1;
  } else if (j.contains("full_attn_idxs") && !j["full_attn_idxs"].is_null()) {
    const nlohmann::json& idx = j["full_attn_idxs"];
    if (!idx.is_array() || idx.size() > static_cast<size_t>(L))
      throw Error(where + ": \"full_attn_idxs\" must list at most " + std::to_string(L) + " layer indices, found " +
                  json_excerpt(idx));
    conv.assign(static_cast<size_t>(L), true);
    for (const nlohmann::json& e : idx) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= L)
        throw Error(where + ": full_attn_idxs holds " + json_excerpt(e) + "; layer indices 0 … " +
                    std::to_string(L - 1) + " expected");
      conv[static_cast<size_t>(e.get<int64_t>())] = false;
    }
  }
  set_layer_specs(c, std::vector<bool>(static_cast<size_t>(L), false), 0,
                  std::vector<bool>(static_cast<size_t>(L), true), c.rope_theta, c.rope_scaling,
                  1.f / std::sqrt(static_cast<float>(c.head_size)), 0.f, /*always=*/true);
  for (int l = 0; l < L; ++l)
    if (conv[static_cast<size_t>(l)]) {
      c.layer_specs[static_cast<size_t>(l)].mixer = Mixer::ShortConv;
      c.layer_specs[static_cast<size_t>(l)].rope = false;
    }
}

std::vector<DecoderTensor> lfm2_tensors(const ModelConfig& c, const std::string& prefix, const std::string& lm_head) {
  const int64_t C = c.n_embd, I = c.n_inner, d = c.head_size, Hd = c.n_head * d, KVd = c.n_kv_head * d;
  std::vector<DecoderTensor> out;
  out.push_back({prefix + "embed_tokens.weight", {c.vocab_size, C}, -1, Slot::TokEmb});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    auto add = [&](const std::string& name, std::vector<int64_t> shape, Slot slot) {
      out.push_back({p + name, std::move(shape), i, slot});
    };
    add("operator_norm.weight", {C}, Slot::Norm1);
    if (c.layer(i).mixer == Mixer::ShortConv) {
      add("conv.in_proj.weight", {3 * C, C}, Slot::ConvIn);
      if (c.short_conv_bias) add("conv.in_proj.bias", {3 * C}, Slot::ConvInBias);
      add("conv.conv.weight", {C, 1, c.short_conv_kernel}, Slot::ConvTaps);
      if (c.short_conv_bias) add("conv.conv.bias", {C}, Slot::ConvTapsBias);
      add("conv.out_proj.weight", {C, C}, Slot::ConvOut);
      if (c.short_conv_bias) add("conv.out_proj.bias", {C}, Slot::ConvOutBias);
    } else {
      add("self_attn.q_proj.weight", {Hd, C}, Slot::Wq);
      add("self_attn.k_proj.weight", {KVd, C}, Slot::Wk);
      add("self_attn.v_proj.weight", {KVd, C}, Slot::Wv);
      add("self_attn.q_layernorm.weight", {d}, Slot::QNorm);
      add("self_attn.k_layernorm.weight", {d}, Slot::KNorm);
      add("self_attn.out_proj.weight", {C, Hd}, Slot::Wo);
    }
    add("ffn_norm.weight", {C}, Slot::Norm2);
    add("feed_forward.w1.weight", {I, C}, Slot::Wfc);
    add("feed_forward.w3.weight", {I, C}, Slot::Wup);
    add("feed_forward.w2.weight", {C, I}, Slot::Wdown);
  }
  out.push_back({prefix + "embedding_norm.weight", {C}, -1, Slot::NormF});
  if (!c.tie_embeddings) out.push_back({lm_head, {c.vocab_size, C}, -1, Slot::LmHead});
  return out;
}

}  // namespace attnviz

// ---- GGUF (llama.cpp's "lfm2") --------------------------------------------------------

namespace attnviz {

std::string lfm2_gguf_name(Slot s, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (s) {
    case Slot::NormF: return "token_embd_norm.weight";  // embedding_norm, applied after the last layer
    case Slot::ConvIn: return p + "shortconv.in_proj.weight";
    case Slot::ConvTaps: return p + "shortconv.conv.weight";  // (C, K), the (C, 1, K) kernel squeezed
    case Slot::ConvOut: return p + "shortconv.out_proj.weight";
    default: return "";
  }
}

ModelConfig lfm2_gguf_config(const GgufFile& f) {
  const std::string a = "lfm2.", where = "GGUF file '" + f.path() + "'";
  const int L = gguf_positive(f, a + "block_count");
  // The layer kinds: attention.head_count_kv per layer, 0 for a short convolution.
  const GgufValue* kv = f.find_key(a + "attention.head_count_kv");
  if (!kv)
    throw Error(where + ": missing metadata '" + a +
                "attention.head_count_kv' (per layer: its KV heads, 0 for a "
                "convolution layer)");
  nlohmann::json types = nlohmann::json::array();
  int64_t kv_heads = 0;
  if (kv->type == GgufValueType::ARRAY) {
    if (kv->ints.size() != kv->array_size() || kv->array_size() != static_cast<size_t>(L))
      throw Error(where + ": metadata '" + a + "attention.head_count_kv' must list " + std::to_string(L) +
                  " integers (one per layer, block_count), found " + std::to_string(kv->array_size()) + " entries");
    for (int l = 0; l < L; ++l) {
      const int64_t e = kv->ints[static_cast<size_t>(l)];
      if (e < 0 || e > kMaxDim || (e > 0 && kv_heads > 0 && e != kv_heads))
        throw Error(where + ": metadata '" + a + "attention.head_count_kv'[" + std::to_string(l) + "] is " +
                    std::to_string(e) +
                    "; every attention layer needs the same positive count, and 0 marks a "
                    "convolution layer");
      if (e > 0) kv_heads = e;
      types.push_back(e > 0 ? "full_attention" : "conv");
    }
  } else {
    kv_heads = gguf_positive(f, a + "attention.head_count_kv");
    for (int l = 0; l < L; ++l) types.push_back("full_attention");
  }
  const int H = gguf_positive(f, a + "attention.head_count");
  // llama.cpp's lfm2 has no biases in its convolution blocks: a file with them is not its lfm2.
  for (int l = 0; l < L; ++l)
    if (types[static_cast<size_t>(l)] == "conv") {
      const std::string b = "blk." + std::to_string(l) + ".shortconv.in_proj.bias";
      if (f.find(b))
        throw Error(where + ": tensor '" + b +
                    "': biases in the short convolution are not part of llama.cpp's lfm2, "
                    "so attnviz does not read them");
      break;
    }
  // The rest as config.json would say it, read by the same parser; the feed-forward width
  // is the one the converter already derived (no adjustment again).
  const nlohmann::json j = {{"model_type", "lfm2"},
                            {"vocab_size", gguf_vocab_size(f, "lfm2")},
                            {"hidden_size", gguf_positive(f, a + "embedding_length")},
                            {"num_hidden_layers", L},
                            {"num_attention_heads", H},
                            {"num_key_value_heads", kv_heads > 0 ? kv_heads : H},
                            {"block_ff_dim", gguf_positive(f, a + "feed_forward_length")},
                            {"block_auto_adjust_ff_dim", false},
                            {"max_position_embeddings", gguf_positive(f, a + "context_length")},
                            {"norm_eps", f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5)},
                            {"rope_theta", f.get_float(a + "rope.freq_base", 1000000.0)},
                            {"conv_L_cache", gguf_positive(f, a + "shortconv.l_cache")},
                            {"conv_bias", false},
                            {"layer_types", types},
                            {"tie_embedding", f.find("output.weight") == nullptr}};
  return parse_config(j, where);
}

namespace {

ModelConfig lfm2_parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c;
  c.model_type = "lfm2";
  parse_lfm2(j, where, c);
  return c;
}

// config.json: layer kinds, the convolution, the MLP width as is.
void lfm2_config_json(const ModelConfig& c, nlohmann::json& j) {
  j["architectures"] = {"Lfm2ForCausalLM"};
  j["norm_eps"] = c.norm_eps;
  j["conv_L_cache"] = c.short_conv_kernel;
  j["conv_bias"] = c.short_conv_bias;
  j["block_auto_adjust_ff_dim"] = false;
  j["block_ff_dim"] = c.n_inner;
  j["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l)
    j["layer_types"].push_back(c.layer(l).mixer == Mixer::ShortConv ? "conv" : "full_attention");
}

// GGUF: per layer its KV heads, 0 for a short-convolution layer; the convolution's taps.
bool lfm2_gguf_write(const ModelConfig& c, const std::string& a, GgufWriter& g) {
  std::vector<int32_t> kv;
  for (int l = 0; l < c.n_layer; ++l) kv.push_back(c.layer(l).mixer == Mixer::ShortConv ? 0 : c.n_kv_head);
  g.set_i32s(a + "attention.head_count_kv", kv);
  g.set_u32(a + "shortconv.l_cache", static_cast<uint32_t>(c.short_conv_kernel));
  return false;
}

}  // namespace

FamilyTraits lfm2_traits() {
  FamilyTraits t;
  t.parse = lfm2_parse;
  t.to_json = lfm2_config_json;
  t.json_windows = false;
  t.hf_tensors = lfm2_tensors;
  t.gguf_name = lfm2_gguf_name;
  t.gguf_read = lfm2_gguf_config;
  t.gguf_write = lfm2_gguf_write;
  return t;
}

}  // namespace attnviz
