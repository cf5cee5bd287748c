// Google's Gemma 4 text model (model_type "gemma4_text"; "gemma4" and "gemma4_unified" hold
// it in their text_config): the keys of config.json and the tensor names of Hugging Face's
// Gemma4ForCausalLM / Gemma4ForConditionalGeneration (tensors under model. or
// model.language_model.).
//
// Gemma 3's block (four RMSNorms, GeGLU, embeddings × √C, per-head QK-norm, local and global
// layers by layer_types, the last layer always global, final soft-cap) with these changes:
//   - every RMSNorm multiplies by its weight as stored (Gemma 2/3: 1 + w);
//   - the attention scale is 1 (QK-norm bounds q·k), and V is RMS-normed per head without
//     a weight;
//   - global layers have their own head size (global_head_dim) and, with attention_k_eq_v,
//     their own KV heads (num_global_key_value_heads) and no v_proj: V is the raw key
//     projection, before k_norm and RoPE;
//   - global layers rotate "proportionally": the frequencies θ^(−2i/d) over the whole head
//     size d, only the first ⌊p·d/2⌋ pairs turning (p = partial_rotary_factor), the other
//     pairs at frequency 0; pairs are rotate-half (i, i + d/2) over the whole head;
//   - the last num_kv_shared_layers layers compute no K/V: each reads the K and V of the
//     last layer before them of the same kind (local or global);
//   - with use_double_wide_mlp those shared layers' MLP is twice as wide;
//   - per-layer embeddings (hidden_size_per_layer_input P > 0): for each token,
//     ple[l] = (E_ple[id][l·P, (l+1)·P)·√P + RMSNorm(W_proj·(e·C^−½))[l]) · 2^−½, e the scaled
//     token embedding; after each layer's MLP, x += RMSNorm(W_out·(gelu_tanh(x·W_gate) ⊙ ple[l]));
//   - a learned layer_scalar multiplies the whole residual stream at the end of each layer.
//   - with enable_moe_block (the 26B-A4B), experts beside each layer's dense MLP
//     (ModelConfig::Experts::gemma): the router on RMSNorm(r)·scale·C^−½ of the stream r
//     entering the block, softmax over all experts, the top k renormalised × a per-expert
//     scale; experts gelu_tanh(gate)·up on pre_feedforward_layernorm_2(r); the dense branch
//     normed by post_feedforward_layernorm_1, the experts' by _2, summed, then
//     post_feedforward_layernorm. In GGUF: expert_count, expert_used_count,
//     expert_feed_forward_length; ffn_gate_inp.weight / .scale, ffn_gate_up_exps (E, 2·I_e, C),
//     ffn_down_exps (E, C, I_e) and .scale (the per-expert scale), pre_ffw_norm_2,
//     post_ffw_norm_1 / _2.
//
// In GGUF (general.architecture "gemma4", as llama.cpp's converter writes it) the same model
// with llama.cpp's names: attention.key_length / key_length_swa (the global and local head
// sizes), attention.head_count_kv and feed_forward_length as a number or one per layer,
// attention.sliding_window_pattern (one bool per layer, true = local), attention.
// shared_kv_layers, embedding_length_per_layer_input, rope.freq_base / freq_base_swa; the
// tensors per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm, blk.N.inp_gate,
// blk.N.proj, blk.N.post_norm, blk.N.layer_output_scale, no attn_v where V = K; and
// rope_freqs (global head size / 2 divisors: 1 for the pairs that turn, 1e30 for the rest),
// which gives the proportion of pairs that turn. Norm weights as stored, q/k rows in Hugging
// Face's order.
#include <cmath>
#include <limits>
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

namespace {

// A count that may be 0: absent or null is `fallback`.
int get_count(const nlohmann::json& j, const char* key, const std::string& where, int fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxDim)
    throw Error(where + ": \"" + key + "\" must be a non-negative integer, found " + json_excerpt(v));
  return static_cast<int>(v.get<int64_t>());
}

struct TypeRope {
  float theta;
  float partial = 1.f;  // the fraction of pairs that turn
  float factor = 1.f;   // every frequency ÷ this
};

// rope_parameters.{sliding_attention, full_attention}: rope_type "default" or (global
// layers) "proportional".
TypeRope read_type_rope(const nlohmann::json& j, const char* kind, TypeRope r, const std::string& where) {
  if (!j.contains("rope_parameters") || !j["rope_parameters"].is_object() || !j["rope_parameters"].contains(kind))
    return r;
  const nlohmann::json& o = j["rope_parameters"][kind];
  const std::string at = where + ": rope_parameters." + kind;
  if (!o.is_object()) throw Error(at + " must be an object, found " + json_excerpt(o));
  const std::string type = get_string(o, "rope_type", "default", at);
  if (type != "default" && type != "proportional")
    throw Error(at + ": rope_type \"" + excerpt(type) +
                "\" is not supported\n  HINT: Gemma 4 uses \"default\" on "
                "sliding layers and \"proportional\" on full-attention layers.");
  r.theta = get_float(o, "rope_theta", r.theta, at, true);
  r.factor = get_float(o, "factor", 1.f, at, true);
  r.partial = type == "proportional" ? get_float(o, "partial_rotary_factor", r.partial, at, true) : 1.f;
  if (r.partial > 1.f)
    throw Error(at + ": partial_rotary_factor " + json_excerpt(o["partial_rotary_factor"]) + " is above 1");
  return r;
}

// A layer's RoPE as frequency divisors over its head size d: the first ⌊p·d/2⌋ pairs ÷ factor,
// the rest ÷ ∞ (frequency 0: they do not turn).
RopeScaling proportional(const TypeRope& r, int d) {
  RopeScaling s;
  const int half = d / 2, turning = static_cast<int>(static_cast<double>(r.partial) * d / 2);
  if (turning >= half && r.factor == 1.f) return s;
  s.type = "factors";
  s.freq_factors.assign(static_cast<size_t>(half), std::numeric_limits<float>::infinity());
  for (int i = 0; i < std::min(turning, half); ++i) s.freq_factors[static_cast<size_t>(i)] = r.factor;
  return s;
}

}  // namespace

ModelConfig parse_gemma4_text(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a JSON object (found " + json_excerpt(j) + ")");
  if (j.contains("use_bidirectional_attention") && j["use_bidirectional_attention"].is_string() &&
      j["use_bidirectional_attention"].get<std::string>() == "all")
    throw Error(where +
                ": use_bidirectional_attention \"all\" makes the model non-causal; attnviz shows causal models");
  const int L = checked_layers(get_int(j, "num_hidden_layers", where), where + ": \"num_hidden_layers\"");
  // Layer kinds: layer_types, else every 6th layer global; the last one global whatever they say.
  std::vector<int> types = read_layer_types(j, L, where, {"full_attention", "sliding_attention"},
                                            "Gemma 4 has \"full_attention\" and \"sliding_attention\" layers.");
  if (types.empty())
    for (int l = 0; l < L; ++l) types.push_back((l + 1) % 6 == 0 ? 0 : 1);
  const bool forced_last = types.back() != 0;
  types.back() = 0;

  // The Gemma 3 decoder first (norms, GeGLU, √C, QK-norm, windows, soft-cap), then what differs.
  nlohmann::json text = j;
  text["model_type"] = "gemma3_text";
  for (const char* k : {"rope_parameters", "rope_scaling", "query_pre_attn_scalar", "attn_logit_softcapping",
                        "sliding_window_pattern", "rope_local_base_freq"})
    text.erase(k);
  if (!text.contains("sliding_window")) text["sliding_window"] = 512;  // Gemma4TextConfig's default
  text["layer_types"] = nlohmann::json::array();
  for (int t : types) text["layer_types"].push_back(t == 0 ? "full_attention" : "sliding_attention");
  ModelConfig c = parse_config(text, where);
  c.model_type = "gemma4_text";
  c.norm_plus_one = false;
  c.v_norm = true;
  c.layer_scalars = true;
  if (forced_last) c.notes.push_back("gemma4: the last layer is global (full attention) whatever layer_types says");

  const int d_global = get_int(j, "global_head_dim", where, c.head_size);
  if (d_global % 2 != 0)
    throw Error(where + ": global_head_dim " + std::to_string(d_global) + " must be even for RoPE");
  checked_dim(c.n_head, d_global, where + ": global query width num_attention_heads x global_head_dim");
  const bool k_eq_v = get_bool(j, "attention_k_eq_v", false, where);
  const int kv_global = k_eq_v ? get_int(j, "num_global_key_value_heads", where, c.n_kv_head) : c.n_kv_head;
  if (c.n_head % kv_global != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(c.n_head) +
                " is not a multiple of "
                "num_global_key_value_heads " +
                std::to_string(kv_global));
  const int shared = get_count(j, "num_kv_shared_layers", where, 0);
  if (shared >= L)
    throw Error(where + ": num_kv_shared_layers " + std::to_string(shared) +
                " leaves no layer with keys and values of its "
                "own (num_hidden_layers " +
                std::to_string(L) + ")");
  const bool double_wide = get_bool(j, "use_double_wide_mlp", false, where);
  c.ple_dim = get_count(j, "hidden_size_per_layer_input", where, 0);
  c.ple_vocab = c.ple_dim ? get_int(j, "vocab_size_per_layer_input", where, c.vocab_size) : 0;
  if (c.ple_dim)
    checked_dim(L, c.ple_dim, where + ": per-layer embedding width num_hidden_layers x hidden_size_per_layer_input");

  if (get_bool(j, "enable_moe_block", false, where)) {  // the 26B-A4B: experts beside every layer's dense MLP
    c.experts.gemma = true;
    c.experts.count = get_int(j, "num_experts", where);
    c.experts.top_k = get_int(j, "top_k_experts", where);
    c.experts.width = get_int(j, "moe_intermediate_size", where);
    if (c.experts.top_k > c.experts.count)
      throw Error(where + ": top_k_experts " + std::to_string(c.experts.top_k) + " is more than the " +
                  std::to_string(c.experts.count) + " experts (num_experts)");
    checked_dim(2 * c.experts.width, c.n_embd,
                where + ": an expert's gate | up, 2 x moe_intermediate_size x hidden_size");
  }
  const TypeRope local_rope = read_type_rope(j, "sliding_attention", {10000.f}, where);
  const TypeRope global_rope = read_type_rope(j, "full_attention", {1e6f, 0.25f}, where);
  c.rope_theta = global_rope.theta;
  const int first_shared = L - shared;
  for (int l = 0; l < L; ++l) {
    LayerSpec& s = c.layer_specs.at(static_cast<size_t>(l));
    const bool global = types[static_cast<size_t>(l)] == 0;
    s.scale = 1.f;
    s.head_size = global ? d_global : c.head_size;
    s.kv_heads = global ? kv_global : c.n_kv_head;
    s.v_from_k = global && k_eq_v;
    s.rope_theta = global ? global_rope.theta : local_rope.theta;
    s.rope_scaling = proportional(global ? global_rope : local_rope, s.head_size);
    if (l >= first_shared) {  // the last layer before the shared ones of the same kind
      for (int src = first_shared - 1; src >= 0 && s.kv_source < 0; --src)
        if (types[static_cast<size_t>(src)] == types[static_cast<size_t>(l)]) s.kv_source = src;
      if (s.kv_source < 0)
        throw Error(where + ": layer " + std::to_string(l) + " shares keys and values (num_kv_shared_layers " +
                    std::to_string(shared) + ") but no layer before the shared ones is " +
                    (global ? "global" : "local") + " to share them");
      s.v_from_k = c.layer_specs[static_cast<size_t>(s.kv_source)].v_from_k;
      if (double_wide) s.n_inner = checked_dim(2, c.n_inner, where + ": double-wide MLP 2 x intermediate_size");
    }
  }
  if (shared)
    c.notes.push_back("gemma4: layers " + std::to_string(first_shared) + "-" + std::to_string(L - 1) +
                      " read an earlier layer's keys and values; their own k_proj / v_proj in the file are not used");
  return c;
}

void gemma4_config_json(const ModelConfig& c, nlohmann::json& j) {
  j["architectures"] = {"Gemma4ForCausalLM"};
  j.erase("hidden_act");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["attention_bias"] = false;
  j["final_logit_softcapping"] = c.final_softcap > 0 ? nlohmann::json(c.final_softcap) : nlohmann::json();
  j["layer_types"] = nlohmann::json::array();
  int window = 0, shared = 0, d_global = c.head_size, kv_global = c.n_kv_head;
  bool k_eq_v = false, double_wide = false;
  nlohmann::json rope = nlohmann::json::object();
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerSpec s = c.layer(l);
    const bool global = s.window == 0;
    j["layer_types"].push_back(global ? "full_attention" : "sliding_attention");
    window = std::max(window, s.window);
    shared += s.kv_source >= 0;
    double_wide = double_wide || c.inner_at(l) != c.n_inner;
    if (global) d_global = c.head_size_at(l), kv_global = c.kv_heads_at(l), k_eq_v = k_eq_v || s.v_from_k;
    // The pairs that turn (divisor finite) and their divisor: partial_rotary_factor and factor.
    int turning = 0;
    for (float f : s.rope_scaling.freq_factors) turning += std::isfinite(f);
    const int half = c.head_size_at(l) / 2;
    if (s.rope_scaling.type.empty()) turning = half;
    nlohmann::json r = {{"rope_type", global ? "proportional" : "default"}, {"rope_theta", s.rope_theta}};
    if (global) r["partial_rotary_factor"] = static_cast<double>(turning) / half;
    if (!s.rope_scaling.freq_factors.empty() && s.rope_scaling.freq_factors[0] != 1.f)
      r["factor"] = s.rope_scaling.freq_factors[0];
    rope[global ? "full_attention" : "sliding_attention"] = r;
  }
  j["sliding_window"] = window ? nlohmann::json(window) : nlohmann::json();
  j["rope_parameters"] = rope;
  j["global_head_dim"] = d_global;
  j["attention_k_eq_v"] = k_eq_v;
  if (k_eq_v) j["num_global_key_value_heads"] = kv_global;
  j["num_kv_shared_layers"] = shared;
  j["use_double_wide_mlp"] = double_wide;
  j["hidden_size_per_layer_input"] = c.ple_dim;
  j["vocab_size_per_layer_input"] = c.ple_dim ? c.ple_vocab : c.vocab_size;
  j["enable_moe_block"] = c.experts.gemma;
  if (c.experts.gemma) {
    j["num_experts"] = c.experts.count;
    j["top_k_experts"] = c.experts.top_k;
    j["moe_intermediate_size"] = c.experts.width;
  }
}

namespace {
// A metadata value per layer: one number for every layer, or an array of L (each > 0).
std::vector<int> gguf_per_layer(const GgufFile& f, const std::string& key, int L, const std::string& where) {
  const GgufValue* v = f.find_key(key);
  if (!v) throw Error(where + ": missing metadata '" + key + "'");
  std::vector<int> out(static_cast<size_t>(L));
  if (v->type != GgufValueType::ARRAY) {
    std::fill(out.begin(), out.end(), gguf_positive(f, key));
    return out;
  }
  if (v->ints.size() != v->array_size() || v->array_size() != static_cast<size_t>(L))
    throw Error(where + ": metadata '" + key + "' must be a number or list " + std::to_string(L) +
                " integers (one per layer, block_count), found " + std::to_string(v->array_size()) + " entries");
  for (int l = 0; l < L; ++l) {
    const int64_t e = v->ints[static_cast<size_t>(l)];
    if (e <= 0 || e > kMaxDim)
      throw Error(where + ": metadata '" + key + "'[" + std::to_string(l) + "] is " + std::to_string(e) +
                  "; a positive size is expected");
    out[static_cast<size_t>(l)] = static_cast<int>(e);
  }
  return out;
}
}  // namespace

ModelConfig gemma4_gguf_config(const GgufFile& f) {
  const std::string a = "gemma4.", where = "GGUF file '" + f.path() + "'";
  const int L = checked_layers(gguf_positive(f, a + "block_count"), where + ": metadata '" + a + "block_count'");
  // Which layers are local: one bool per layer (true = sliding window).
  const std::string pk = a + "attention.sliding_window_pattern";
  const GgufValue* pattern = f.find_key(pk);
  if (!pattern || pattern->type != GgufValueType::ARRAY || pattern->ints.size() != static_cast<size_t>(L) ||
      pattern->array_size() != static_cast<size_t>(L))
    throw Error(where + ": metadata '" + pk + "' must list " + std::to_string(L) +
                " bools (one per layer: true = local)");
  nlohmann::json types = nlohmann::json::array();
  int first_global = -1;
  for (int l = 0; l < L; ++l) {
    const bool local = pattern->ints[static_cast<size_t>(l)] != 0;
    types.push_back(local ? "sliding_attention" : "full_attention");
    if (!local && first_global < 0) first_global = l;
  }
  if (first_global < 0) first_global = L - 1;  // the parser makes the last layer global
  const std::vector<int> kv = gguf_per_layer(f, a + "attention.head_count_kv", L, where);
  const std::vector<int> ff = gguf_per_layer(f, a + "feed_forward_length", L, where);
  const int d_global = gguf_positive(f, a + "attention.key_length");
  const int d_local = gguf_positive(f, a + "attention.key_length_swa", d_global);
  for (const char* k : {"attention.value_length", "attention.value_length_swa"})
    if (f.find_key(a + k) && gguf_positive(f, a + k) != (std::string(k).back() == 'a' ? d_local : d_global))
      throw Error(where + ": metadata '" + a + k + "' differs from its key length; attnviz needs V and K of one size");
  int local0 = 0;  // the first local layer (its KV heads and MLP width are the model's)
  while (local0 + 1 < L && types[static_cast<size_t>(local0)] != "sliding_attention") ++local0;
  // Some of the L layers must keep keys and values of their own.
  const int shared = f.get_int_in(a + "attention.shared_kv_layers", 0, L - 1, 0);
  const int I = ff[0];
  bool double_wide = false;
  for (int l = 0; l < L; ++l) {
    const int want = l >= L - shared && ff[static_cast<size_t>(l)] == 2 * I ? 2 * I : I;
    if (ff[static_cast<size_t>(l)] != want)
      throw Error(where + ": metadata '" + a + "feed_forward_length'[" + std::to_string(l) + "] is " +
                  std::to_string(ff[static_cast<size_t>(l)]) +
                  "; Gemma 4 has one width, doubled on the KV-shared layers");
    double_wide = double_wide || want != I;
  }
  // V = K where a global layer has no attn_v of its own.
  const bool k_eq_v = !f.find("blk." + std::to_string(first_global) + ".attn_v.weight");
  // The pairs that turn on global layers: rope_freqs' finite divisors (1e30 marks the others).
  double partial = 1.0, factor = 1.0;
  if (const GgufTensorInfo* t = f.find("rope_freqs.weight")) {
    if (t->shape() != std::vector<int64_t>{d_global / 2})
      throw Error(where + ": tensor 'rope_freqs.weight' has shape " + std::to_string(t->numel) + ", expected (" +
                  std::to_string(d_global / 2) + ") (half the global head size)");
    const std::vector<float> div = f.read_f32(*t);
    int turning = 0;
    while (turning < static_cast<int>(div.size()) && div[static_cast<size_t>(turning)] < 1e20f) ++turning;
    for (size_t i = 0; i < div.size(); ++i)
      if (!(div[i] > 0.f) || (static_cast<int>(i) < turning ? div[i] != div[0] : div[i] < 1e20f))
        throw Error(where + ": tensor 'rope_freqs.weight' holds " + std::to_string(div[i]) + " at " +
                    std::to_string(i) +
                    "; Gemma 4's are one divisor for the first pairs and 1e30 (no turn) for the rest");
    partial = static_cast<double>(turning) / (d_global / 2);
    factor = turning ? div[0] : 1.0;
  }
  nlohmann::json full = {{"rope_type", "proportional"},
                         {"partial_rotary_factor", partial},
                         {"rope_theta", f.get_float(a + "rope.freq_base", 1e6)}};
  if (factor != 1.0) full["factor"] = factor;
  nlohmann::json j = {
      {"model_type", "gemma4_text"},
      {"vocab_size", gguf_vocab_size(f, "gemma4")},
      {"hidden_size", gguf_positive(f, a + "embedding_length")},
      {"intermediate_size", I},
      {"num_hidden_layers", L},
      {"num_attention_heads", gguf_positive(f, a + "attention.head_count")},
      {"num_key_value_heads", kv[static_cast<size_t>(local0)]},
      {"head_dim", d_local},
      {"global_head_dim", d_global},
      {"attention_k_eq_v", k_eq_v},
      {"max_position_embeddings", gguf_positive(f, a + "context_length")},
      {"rms_norm_eps", f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6)},
      {"sliding_window", gguf_positive(f, a + "attention.sliding_window")},
      {"layer_types", types},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", f.get_float(a + "rope.freq_base_swa", 1e4)}}},
        {"full_attention", full}}},
      {"tie_word_embeddings", f.find("output.weight") == nullptr},
      {"num_kv_shared_layers", shared},
      {"use_double_wide_mlp", double_wide},
      {"hidden_size_per_layer_input", f.get_int_in(a + "embedding_length_per_layer_input", 0, kMaxDim, 0)}};
  if (f.find_key(a + "final_logit_softcapping"))
    j["final_logit_softcapping"] = gguf_positive_float(f, a + "final_logit_softcapping", 0.f);
  if (k_eq_v) j["num_global_key_value_heads"] = kv[static_cast<size_t>(first_global)];
  if (f.find_key(a + "expert_count")) {  // the 26B-A4B: experts beside the dense MLP
    j["enable_moe_block"] = true;
    j["num_experts"] = gguf_positive(f, a + "expert_count");
    j["top_k_experts"] = gguf_positive(f, a + "expert_used_count");
    j["moe_intermediate_size"] = gguf_positive(f, a + "expert_feed_forward_length");
  }
  if (const GgufTensorInfo* t = f.find("per_layer_token_embd.weight")) j["vocab_size_per_layer_input"] = t->shape()[0];
  ModelConfig c = parse_gemma4_text(j, where);
  for (int l = 0; l < L; ++l)  // the per-layer KV heads the file gives must be the ones the model has
    if (c.kv_heads_at(l) != kv[static_cast<size_t>(l)])
      throw Error(where + ": metadata '" + a + "attention.head_count_kv'[" + std::to_string(l) + "] is " +
                  std::to_string(kv[static_cast<size_t>(l)]) + ", but a " + (c.layer(l).window ? "local" : "global") +
                  " layer of this model has " + std::to_string(c.kv_heads_at(l)));
  return c;
}

std::string gemma4_gguf_name(Slot s, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (s) {
    case Slot::PleTable: return "per_layer_token_embd.weight";
    case Slot::PleModelProj: return "per_layer_model_proj.weight";
    case Slot::PleNorm: return "per_layer_proj_norm.weight";
    case Slot::PleGate: return p + "inp_gate.weight";
    case Slot::PleProj: return p + "proj.weight";
    case Slot::PlePostNorm: return p + "post_norm.weight";
    case Slot::LayerScalar: return p + "layer_output_scale.weight";
    case Slot::Router: return p + "ffn_gate_inp.weight";  // (E, C), F32 as llama.cpp keeps it
    case Slot::RouterScale: return p + "ffn_gate_inp.scale";
    case Slot::ExpertScale: return p + "ffn_down_exps.scale";
    case Slot::ExpGateUpHalves: return p + "ffn_gate_up_exps.weight";  // (E, 2·I_e, C): gate rows, then up
    case Slot::ExpDownRows: return p + "ffn_down_exps.weight";         // (E, C, I_e)
    case Slot::Norm2Experts: return p + "pre_ffw_norm_2.weight";
    case Slot::PostMlpNormDense: return p + "post_ffw_norm_1.weight";
    case Slot::PostMlpNormExperts: return p + "post_ffw_norm_2.weight";
    default: return "";
  }
}

std::vector<DecoderTensor> gemma4_tensors(const ModelConfig& c, const std::string& prefix) {
  const int64_t C = c.n_embd, H = c.n_head, L = c.n_layer, P = c.ple_dim;
  std::vector<DecoderTensor> out;
  out.push_back({prefix + "embed_tokens.weight", {c.vocab_size, C}, -1, Slot::TokEmb});
  if (P) {
    out.push_back({prefix + "embed_tokens_per_layer.weight", {c.ple_vocab, L * P}, -1, Slot::PleTable});
    out.push_back({prefix + "per_layer_model_projection.weight", {L * P, C}, -1, Slot::PleModelProj});
    out.push_back({prefix + "per_layer_projection_norm.weight", {P}, -1, Slot::PleNorm});
  }
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    auto add = [&](const std::string& name, std::vector<int64_t> shape, Slot slot) {
      out.push_back({p + name, std::move(shape), i, slot});
    };
    const LayerSpec s = c.layer(i);
    const int64_t d = c.head_size_at(i), KVd = c.kv_heads_at(i) * d, I = c.inner_at(i);
    const bool own_kv = s.kv_source < 0;
    add("input_layernorm.weight", {C}, Slot::Norm1);
    add("self_attn.q_proj.weight", {H * d, C}, Slot::Wq);
    if (own_kv) add("self_attn.k_proj.weight", {KVd, C}, Slot::Wk);
    if (own_kv && !s.v_from_k) add("self_attn.v_proj.weight", {KVd, C}, Slot::Wv);
    add("self_attn.q_norm.weight", {d}, Slot::QNorm);
    if (own_kv) add("self_attn.k_norm.weight", {d}, Slot::KNorm);
    add("self_attn.o_proj.weight", {C, H * d}, Slot::Wo);
    add("post_attention_layernorm.weight", {C}, Slot::PostAttnNorm);
    add("pre_feedforward_layernorm.weight", {C}, Slot::Norm2);
    add("mlp.gate_proj.weight", {I, C}, Slot::Wfc);
    add("mlp.up_proj.weight", {I, C}, Slot::Wup);
    add("mlp.down_proj.weight", {C, I}, Slot::Wdown);
    add("post_feedforward_layernorm.weight", {C}, Slot::PostMlpNorm);
    if (c.experts.gemma) {  // the experts beside the dense MLP, and the two branches' own norms
      const int64_t E = c.experts.count, Ie = c.experts.width;
      add("router.proj.weight", {E, C}, Slot::Router);
      add("router.scale", {C}, Slot::RouterScale);
      add("router.per_expert_scale", {E}, Slot::ExpertScale);
      add("experts.gate_up_proj", {E, 2 * Ie, C}, Slot::ExpGateUpHalves);
      add("experts.down_proj", {E, C, Ie}, Slot::ExpDownRows);
      add("pre_feedforward_layernorm_2.weight", {C}, Slot::Norm2Experts);
      add("post_feedforward_layernorm_1.weight", {C}, Slot::PostMlpNormDense);
      add("post_feedforward_layernorm_2.weight", {C}, Slot::PostMlpNormExperts);
    }
    if (P) {
      add("per_layer_input_gate.weight", {P, C}, Slot::PleGate);
      add("per_layer_projection.weight", {C, P}, Slot::PleProj);
      add("post_per_layer_input_norm.weight", {C}, Slot::PlePostNorm);
    }
    out.push_back(
        {p + "layer_scalar", {1}, i, Slot::LayerScalar, /*optional=*/true});  // some checkpoints leave it out: 1
  }
  out.push_back({prefix + "norm.weight", {C}, -1, Slot::NormF});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, C}, -1, Slot::LmHead});
  return out;
}

namespace {

ModelConfig gemma4_parse(const nlohmann::json& j, const std::string& where) {
  const std::string type = j["model_type"].get<std::string>();
  if (type == "gemma4" || type == "gemma4_unified")  // multimodal checkpoints: the text model inside
    return parse_text_config(j, where, "gemma4_text", "Gemma 4", "its vision and audio parts are not used");
  return parse_gemma4_text(j, where);
}

std::vector<DecoderTensor> gemma4_hf_tensors(const ModelConfig& c, const std::string& prefix, const std::string&) {
  return gemma4_tensors(c, prefix);
}

// Gemma 4 as llama.cpp's converter writes it: the global layers' head size as key_length and
// the local ones' as key_length_swa, per-layer KV heads and MLP widths where they differ, one
// bool per layer for the windows, the shared layers' count, the per-layer embeddings' width,
// and rope_freqs: 1 for the pairs the global layers turn, 1e30 for the others.
bool gemma4_gguf_write(const ModelConfig& c, const std::string& a, GgufWriter& g) {
  const int L = c.n_layer;
  if (c.experts.gemma) {
    g.set_u32(a + "expert_count", static_cast<uint32_t>(c.experts.count));
    g.set_u32(a + "expert_used_count", static_cast<uint32_t>(c.experts.top_k));
    g.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.experts.width));
  }
  int g0 = L - 1, l0 = -1, W = 0, shared = 0;  // a global and a local layer, the window, the shared layers
  for (int l = L - 1; l >= 0; --l) {
    const LayerSpec s = c.layer(l);
    if (s.window)
      l0 = l, W = s.window;
    else
      g0 = l;
    shared += s.kv_source >= 0;
  }
  std::vector<int32_t> kv, ff;
  std::vector<bool> local;
  for (int l = 0; l < L; ++l) {
    kv.push_back(c.kv_heads_at(l));
    ff.push_back(c.inner_at(l));
    local.push_back(c.layer(l).window > 0);
  }
  if (std::adjacent_find(kv.begin(), kv.end(), std::not_equal_to<>()) != kv.end())
    g.set_i32s(a + "attention.head_count_kv", kv);
  else
    g.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(kv[0]));
  if (std::adjacent_find(ff.begin(), ff.end(), std::not_equal_to<>()) != ff.end()) {
    g.remove(a + "feed_forward_length");
    g.set_i32s(a + "feed_forward_length", ff);
  }
  const int dg = c.head_size_at(g0), dl = l0 >= 0 ? c.head_size_at(l0) : dg;
  g.set_u32(a + "attention.key_length", static_cast<uint32_t>(dg));
  g.set_u32(a + "attention.value_length", static_cast<uint32_t>(dg));
  g.set_u32(a + "attention.key_length_swa", static_cast<uint32_t>(dl));
  g.set_u32(a + "attention.value_length_swa", static_cast<uint32_t>(dl));
  g.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(dg));
  g.set_u32(a + "rope.dimension_count_swa", static_cast<uint32_t>(dl));
  g.set_f32(a + "rope.freq_base", c.layer(g0).rope_theta);
  if (l0 >= 0) g.set_f32(a + "rope.freq_base_swa", c.layer(l0).rope_theta);
  g.set_f32(a + "attention.layer_norm_rms_epsilon", c.norm_eps);
  if (W) g.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(W));
  g.set_bools(a + "attention.sliding_window_pattern", local);
  g.set_u32(a + "attention.shared_kv_layers", static_cast<uint32_t>(shared));
  g.set_u32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(c.ple_dim));
  if (c.final_softcap > 0) g.set_f32(a + "final_logit_softcapping", c.final_softcap);
  std::vector<float> div(static_cast<size_t>(dg / 2), 1.f);
  const std::vector<float>& ff_g = c.layer(g0).rope_scaling.freq_factors;
  for (size_t i = 0; i < div.size() && i < ff_g.size(); ++i) div[i] = std::isfinite(ff_g[i]) ? ff_g[i] : 1e30f;
  g.add_f32("rope_freqs.weight", {dg / 2}, div);
  return true;
}

}  // namespace

FamilyTraits gemma4_traits() {
  FamilyTraits t;
  t.parse = gemma4_parse;
  t.to_json = gemma4_config_json;
  t.json_windows = false;
  t.hf_tensors = gemma4_hf_tensors;
  t.gguf_name = gemma4_gguf_name;
  t.gguf_read = gemma4_gguf_config;
  t.gguf_write = gemma4_gguf_write;
  return t;
}

}  // namespace attnviz
