// Qwen3.5's text model (model_type "qwen3_5_text", or inside a "qwen3_5" config's
// text_config): the keys of config.json as Hugging Face's Qwen3_5TextConfig spells them.
//
// Three of every four layers (layer_types "linear_attention", or every layer l with
// (l + 1) % full_attention_interval != 0) are gated-delta-rule layers of linear_num_key_heads
// key heads and linear_num_value_heads value heads (linear_key_head_dim, linear_value_head_dim)
// after a causal depthwise convolution of linear_conv_kernel_dim taps. The others are softmax
// attention whose q_proj also gives a per-head output gate, with QK-norm and every RMSNorm
// weight acting as (1 + w), RoPE on the first partial_rotary_factor of each head's dims, and
// multi-axis RoPE (mrope_section) that for text, where the three axes share the position,
// is plain RoPE.
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

void parse_qwen35_text(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
  // The keys Qwen3 has (sizes, head_dim, QK-norm per head, rope_theta / rope_parameters),
  // read by Qwen3's parser from a copy without the keys it does not know. The copy is of a
  // value the JSON reader has bounded in depth.
  nlohmann::json base = j;
  base["model_type"] = "qwen3";
  for (const char* k : {"layer_types", "partial_rotary_factor", "use_sliding_window", "sliding_window"}) base.erase(k);
  float partial = get_float(j, "partial_rotary_factor", 0.25f, where);  // Qwen3Next's default, kept by Qwen3.5
  if (base.contains("rope_parameters") && base["rope_parameters"].is_object()) {
    nlohmann::json& rp = base["rope_parameters"];
    partial = get_float(rp, "partial_rotary_factor", partial, where + ": rope_parameters");
    // Multi-axis RoPE: for text every axis holds the same position, so the sections
    // rotate the frequencies they would as one (docs/models.md).
    if (rp.contains("mrope_section") && !rp["mrope_section"].is_array())
      throw Error(where + ": rope_parameters: \"mrope_section\" must be a list, found " +
                  json_excerpt(rp["mrope_section"]));
    for (const char* k : {"partial_rotary_factor", "mrope_section", "mrope_interleaved"}) rp.erase(k);
  }
  ModelConfig q = parse_config(base, where);
  q.model_type = c.model_type;
  c = std::move(q);
  c.norm_plus_one = true;  // every Qwen3.5 RMSNorm but the gated one acts as x·(1 + w)
  c.attn_gate = true;
  c.tie_embeddings = get_bool(j, "tie_word_embeddings", false, where);

  // Partial RoPE: int(head_dim × factor) dims, their pairs (i, i + rot/2).
  const double rot = static_cast<double>(c.head_size) * partial;
  const int rot_i = static_cast<int>(rot);
  if (!(partial > 0.f && partial <= 1.f) || rot_i < 2 || rot_i % 2 != 0)
    throw Error(where + ": partial_rotary_factor " + std::to_string(partial) +
                " must be in (0, 1] and give an even number of rotary dims (head_dim " + std::to_string(c.head_size) +
                " x factor = " + std::to_string(rot) + ")");
  c.rotary_dim = rot_i == c.head_size ? 0 : rot_i;

  // The linear layers' sizes.
  LinearAttnDims& d = c.linear;
  d.k_heads = get_int(j, "linear_num_key_heads", where, 16);
  d.v_heads = get_int(j, "linear_num_value_heads", where, 32);
  d.k_dim = get_int(j, "linear_key_head_dim", where, 128);
  d.v_dim = get_int(j, "linear_value_head_dim", where, 128);
  d.conv_kernel = get_int(j, "linear_conv_kernel_dim", where, 4);
  if (d.v_heads % d.k_heads != 0)
    throw Error(where + ": linear_num_value_heads " + std::to_string(d.v_heads) +
                " is not a multiple of linear_num_key_heads " + std::to_string(d.k_heads));
  if (d.conv_kernel > 64)
    throw Error(where + ": linear_conv_kernel_dim " + std::to_string(d.conv_kernel) + " is more than 64 taps");
  checked_dim(d.k_heads, d.k_dim, where + ": key width linear_num_key_heads x linear_key_head_dim");
  checked_dim(d.v_heads, d.v_dim, where + ": value width linear_num_value_heads x linear_value_head_dim");
  checked_dim(3, std::max(d.key_width(), d.value_width()), where + ": convolution channels");

  // Which layers are linear: layer_types, else every layer but each full_attention_interval-th.
  const int L = c.n_layer;
  std::vector<bool> linear(static_cast<size_t>(L));
  const std::vector<int> types = read_layer_types(j, L, where, {"full_attention", "linear_attention"},
                                                  "Qwen3.5's layers are \"linear_attention\" or \"full_attention\".");
  if (!types.empty()) {
    for (int l = 0; l < L; ++l) linear[static_cast<size_t>(l)] = types[static_cast<size_t>(l)] == 1;
  } else {
    const int every = get_int(j, "full_attention_interval", where, 4);
    for (int l = 0; l < L; ++l) linear[static_cast<size_t>(l)] = (l + 1) % every != 0;
  }

  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_size));
  set_layer_specs(c, std::vector<bool>(static_cast<size_t>(L), false), 0,
                  std::vector<bool>(static_cast<size_t>(L), true), c.rope_theta, c.rope_scaling, scale, 0.f,
                  /*always=*/true);
  for (int l = 0; l < L; ++l) {
    if (!linear[static_cast<size_t>(l)]) continue;
    LayerSpec& s = c.layer_specs[static_cast<size_t>(l)];
    s.mixer = Mixer::GatedDeltaNet;
    s.rope = false;  // no positions: the recurrence's order is its only sense of them
    s.scale = 1.f / std::sqrt(static_cast<float>(d.k_dim));  // q × dk^−½ before the recurrence
  }
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
      j["rope_parameters"].contains("mrope_section"))
    c.notes.push_back(
        "qwen3_5: multi-axis RoPE (mrope_section) is plain RoPE for text, where its axes share the position");
}

}  // namespace attnviz

// ---- GGUF (llama.cpp's "qwen35") ------------------------------------------------------

namespace attnviz {

std::string qwen35_gguf_name(Slot s, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (s) {
    case Slot::WqGate: return p + "attn_q.weight";  // 2·H·d rows as q_proj's: each head's q, then its gate
    case Slot::Norm2: return p + "post_attention_norm.weight";  // the norm before the MLP
    case Slot::LinQkv: return p + "attn_qkv.weight";
    case Slot::LinZ: return p + "attn_gate.weight";
    case Slot::LinB: return p + "ssm_beta.weight";
    case Slot::LinA: return p + "ssm_alpha.weight";
    case Slot::LinConv: return p + "ssm_conv1d.weight";  // (channels, K), the (C, 1, K) kernel squeezed
    case Slot::LinDtBias: return p + "ssm_dt.bias";
    case Slot::LinALog: return p + "ssm_a";  // −exp(A_log), as the converter stores it
    case Slot::LinNorm: return p + "ssm_norm.weight";
    case Slot::LinOut: return p + "ssm_out.weight";
    default: return "";
  }
}

ModelConfig qwen35_gguf_config(const GgufFile& f) {
  const std::string a = "qwen35.", where = "GGUF file '" + f.path() + "'";
  auto key_error = [&](const std::string& key, const std::string& what) {
    return Error(where + ": metadata '" + a + key + "' " + what);
  };
  // block_count counts the multi-token-prediction layers after the trunk (not run here).
  const int all = gguf_positive(f, a + "block_count");
  const int nextn = f.get_int_in(a + "nextn_predict_layers", 0, all - 1, 0);  // up to block_count − 1
  const int L = all - nextn;
  const int d = gguf_positive(f, a + "attention.key_length");
  if (f.find_key(a + "attention.value_length") && gguf_positive(f, a + "attention.value_length") != d)
    throw key_error("attention.value_length",
                    "differs from the key length " + std::to_string(d) + "; attnviz needs one head size");
  const int rot = gguf_positive(f, a + "rope.dimension_count", d);
  if (rot > d || rot % 2 != 0)
    throw key_error("rope.dimension_count",
                    "= " + std::to_string(rot) + " must be even and at most the head size " + std::to_string(d));
  // Multi-axis RoPE's sections: for text every axis holds the token's position, so the
  // rotation is plain RoPE on the first rot dims whatever they say; only their form is checked.
  if (const GgufValue* v = f.find_key(a + "rope.dimension_sections"))
    if (v->type != GgufValueType::ARRAY || v->array_size() != 4 || v->ints.size() != 4)
      throw key_error("rope.dimension_sections", "must list 4 integers");
  const int nk = gguf_positive(f, a + "ssm.group_count"), nv = gguf_positive(f, a + "ssm.time_step_rank");
  const int dk = gguf_positive(f, a + "ssm.state_size"), inner = gguf_positive(f, a + "ssm.inner_size");
  const int K = gguf_positive(f, a + "ssm.conv_kernel");
  if (inner % nv != 0)
    throw key_error("ssm.inner_size", "= " + std::to_string(inner) +
                                          " is not a multiple of 'qwen35.ssm.time_step_rank' " + std::to_string(nv) +
                                          " (value heads)");
  // Which layers are linear: attention.recurrent_layers (one 0/1 per block, the MTP layers'
  // included or not), else every layer but each full_attention_interval-th.
  nlohmann::json types = nlohmann::json::array();
  if (const GgufValue* v = f.find_key(a + "attention.recurrent_layers")) {
    const size_t n = v->array_size();
    if (v->type != GgufValueType::ARRAY || v->ints.size() != n ||
        (n != static_cast<size_t>(all) && n != static_cast<size_t>(L)))
      throw key_error("attention.recurrent_layers", "must list one 0 or 1 per layer (" + std::to_string(all) +
                                                        ", block_count), found " + std::to_string(n) + " entries");
    for (int l = 0; l < L; ++l) {
      const int64_t e = v->ints[static_cast<size_t>(l)];
      if (e != 0 && e != 1)
        throw key_error("attention.recurrent_layers",
                        "[" + std::to_string(l) + "] is " + std::to_string(e) + "; 0 or 1 expected");
      types.push_back(e ? "linear_attention" : "full_attention");
    }
  } else {
    const int every = gguf_positive(f, a + "full_attention_interval", 4);
    for (int l = 0; l < L; ++l) types.push_back((l + 1) % every != 0 ? "linear_attention" : "full_attention");
  }
  // The rest as config.json would say it, read by the same parser. The factor gives
  // int(d × factor) = rot exactly (a quarter dim above it, below the next integer).
  const double partial = rot == d ? 1.0 : (rot + 0.25) / d;
  const nlohmann::json j = {{"model_type", "qwen3_5_text"},
                            {"vocab_size", gguf_vocab_size(f, "qwen35")},
                            {"hidden_size", gguf_positive(f, a + "embedding_length")},
                            {"num_hidden_layers", L},
                            {"num_attention_heads", gguf_positive(f, a + "attention.head_count")},
                            {"num_key_value_heads", gguf_positive(f, a + "attention.head_count_kv")},
                            {"head_dim", d},
                            {"intermediate_size", gguf_positive(f, a + "feed_forward_length")},
                            {"max_position_embeddings", gguf_positive(f, a + "context_length")},
                            {"rms_norm_eps", f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6)},
                            {"rope_theta", f.get_float(a + "rope.freq_base", 10000.0)},
                            {"partial_rotary_factor", partial},
                            {"layer_types", types},
                            {"linear_num_key_heads", nk},
                            {"linear_num_value_heads", nv},
                            {"linear_key_head_dim", dk},
                            {"linear_value_head_dim", inner / nv},
                            {"linear_conv_kernel_dim", K},
                            {"tie_word_embeddings", f.find("output.weight") == nullptr}};
  ModelConfig c = parse_config(j, where);
  c.linear.v_tiled = true;  // the converter tiles value heads over key heads: head j reads key head j mod Hk
  if (nextn > 0)
    c.notes.push_back("qwen35: the " + std::to_string(nextn) + " multi-token-prediction layer" +
                      (nextn == 1 ? "" : "s") + " after layer " + std::to_string(L - 1) + " (blk." + std::to_string(L) +
                      ".*) are not used");
  return c;
}

namespace {

ModelConfig qwen35_parse(const nlohmann::json& j, const std::string& where) {
  if (j["model_type"] == "qwen3_5")  // Qwen3.5's checkpoints hold a vision tower beside the text model
    return parse_text_config(j, where, "qwen3_5_text", "Qwen3.5", "its vision tower is not used");
  ModelConfig c;
  c.model_type = "qwen3_5_text";
  parse_qwen35_text(j, where, c);
  return c;
}

// config.json: layer kinds, the linear layers' sizes, partial RoPE.
void qwen35_config_json(const ModelConfig& c, nlohmann::json& j) {
  j["architectures"] = {"Qwen3_5ForCausalLM"};
  j["attention_bias"] = false;
  j["partial_rotary_factor"] = static_cast<double>(c.rotary()) / c.head_size;
  j["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l)
    j["layer_types"].push_back(c.layer(l).mixer == Mixer::GatedDeltaNet ? "linear_attention" : "full_attention");
  j["linear_num_key_heads"] = c.linear.k_heads;
  j["linear_num_value_heads"] = c.linear.v_heads;
  j["linear_key_head_dim"] = c.linear.k_dim;
  j["linear_value_head_dim"] = c.linear.v_dim;
  j["linear_conv_kernel_dim"] = c.linear.conv_kernel;
}

// GGUF: the linear layers' sizes, and which layers they are.
bool qwen35_gguf_write(const ModelConfig& c, const std::string& a, GgufWriter& g) {
  g.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_head));
  const LinearAttnDims& ld = c.linear;
  g.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(ld.conv_kernel));
  g.set_u32(a + "ssm.state_size", static_cast<uint32_t>(ld.k_dim));
  g.set_u32(a + "ssm.group_count", static_cast<uint32_t>(ld.k_heads));
  g.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(ld.v_heads));
  g.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(ld.value_width()));
  // Multi-axis RoPE's sections over the rot/2 frequencies (one text position on every axis).
  const int half = c.rotary() / 2, third = half / 3;
  g.set_i32s(a + "rope.dimension_sections", {half - 2 * third, third, third, 0});
  int every = 0;  // the interval whose rule gives these layers, if one does
  for (int e = 1; e <= c.n_layer && every == 0; ++e) {
    bool rule = true;
    for (int l = 0; l < c.n_layer; ++l) rule = rule && (c.layer(l).mixer == Mixer::GatedDeltaNet) == ((l + 1) % e != 0);
    if (rule) every = e;
  }
  if (every > 0) {
    g.set_u32(a + "full_attention_interval", static_cast<uint32_t>(every));
  } else {
    std::vector<bool> recurrent;
    for (int l = 0; l < c.n_layer; ++l) recurrent.push_back(c.layer(l).mixer == Mixer::GatedDeltaNet);
    g.set_bools(a + "attention.recurrent_layers", recurrent);
  }
  return false;
}

}  // namespace

FamilyTraits qwen35_traits() {
  FamilyTraits t;
  t.parse = qwen35_parse;
  t.to_json = qwen35_config_json;
  t.json_windows = false;
  t.gguf_name = qwen35_gguf_name;
  t.gguf_read = qwen35_gguf_config;
  t.gguf_write = qwen35_gguf_write;
  return t;
}

}  // namespace attnviz
