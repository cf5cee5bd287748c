// Model hyper-parameters, read from a Hugging Face config.json.
//
// Dimension letters used in shape comments throughout core/:
//   V vocab size, C n_embd (model width), L layers, H query heads, KV key/value heads,
//   d head size (C / H unless the config says head_dim), I MLP hidden size,
//   T tokens in the window (≤ block_size ≤ n_ctx), n new rows computed in one call.
#pragma once
#include <cmath>
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

enum class Arch {
  Gpt2,   // learned positions, LayerNorm, GELU(tanh), biases, Conv1D weights, tied lm_head
  Llama,  // RoPE (rotate-half), RMSNorm, gated MLP, GQA: every other family (qwen2, mistral,
          // qwen3, gemma2/3, phi3, smollm3, olmo2, granite), told apart by the data below
};

// Where a block's norms sit. Pre: x += attn(norm1(x)); x += mlp(norm2(x)) (gpt2, llama).
// Sandwich (Gemma): x += post_attn(attn(norm1(x))); x += post_mlp(mlp(norm2(x))).
// Post (OLMo 2): x += post_attn(attn(x)); x += post_mlp(mlp(x)).
enum class NormPlace { Pre, Sandwich, Post };
// RMSNorm of queries and keys before RoPE: none, per head over d (qwen3, gemma3), or over
// the whole projection H·d / KV·d (olmo2).
enum class QkNorm { None, PerHead, Whole };
// The MLP: gpt2's GELU(tanh) of one projection; SwiGLU silu(gate)·up; GeGLU gelu_tanh(gate)·up.
enum class MlpKind { Gelu, SwiGLU, GeGLU };

// config.json's rope_scaling: "" (none), "linear" (every frequency / factor) or "llama3"
// (Llama 3.1/3.2: long wavelengths / factor, short ones kept, a smooth blend between);
// "longrope" (Phi-3/4: frequency i / short_factor[i], and cos, sin × mscale); or, from a
// GGUF file, "factors": frequency i divided by freq_factors[i] (llama.cpp's rope_freqs
// tensor, where a converter has written Llama 3's divisors); or "yarn" (YaRN, as Hugging
// Face computes it: frequency i blended from θ^(−2i/d) (kept) and θ^(−2i/d) / factor
// (interpolated) by a ramp between the correction dims of beta_fast and beta_slow rotations
// over original_max_position, those dims rounded outward unless truncate is false; cos, sin
// × mscale, the attention factor).
struct RopeScaling {
  std::string type;
  float factor = 1.f, low_freq_factor = 1.f, high_freq_factor = 4.f;
  int original_max_position = 8192;
  std::vector<float> freq_factors;  // (rot/2) for "factors" and "longrope" (its short_factor)
  std::vector<float> long_factor;   // (rot/2) "longrope" when the window is longer than original_max_position
  float mscale = 1.f;               // "longrope"'s and "yarn"'s attention factor: multiplies cos and sin
  float beta_fast = 32.f, beta_slow = 1.f;  // "yarn": the rotation counts that bound the ramp
  bool truncate = true;                     // "yarn": the correction dims floored / ceiled (Hugging Face's default)
};

// What mixes a layer's tokens. Softmax: causal softmax attention over a KV cache (every
// family so far). GatedDeltaNet: linear attention with a fixed-size memory per head, the
// gated delta rule (Qwen3.5's linear_attention layers; core/engine/delta_rule.h).
// ShortConv: LFM2's gated short convolution, a causal depthwise convolution of a few taps
// between two input-dependent gates (no attention weights at all).
enum class Mixer { Softmax, GatedDeltaNet, ShortConv };

// The sizes of a model's gated-delta-rule layers (Qwen3.5's linear_* keys): Hk key heads
// and Hv value heads (Hv a multiple of Hk; key_head(j) says which key head value head j
// reads) of dk and dv dims, and the causal depthwise convolution's kernel over q | k | v.
struct LinearAttnDims {
  int k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0, conv_kernel = 0;
  // How value heads are numbered over the key heads: grouped (Hugging Face's: value head j
  // reads key head j / (Hv/Hk)) or tiled (llama.cpp's GGUF files, whose converter reorders
  // them when Hv ≠ Hk: value head j reads key head j mod Hk).
  bool v_tiled = false;
  int key_head(int j) const { return v_tiled ? j % k_heads : j / group(); }
  int key_width() const { return k_heads * k_dim; }                    // Hk·dk
  int value_width() const { return v_heads * v_dim; }                  // Hv·dv
  int conv_channels() const { return 2 * key_width() + value_width(); }  // q | k | v
  int group() const { return v_heads / k_heads; }                      // value heads per key head
};

// What one layer's attention does, built from the config (ModelConfig::layer).
struct LayerSpec {
  Mixer mixer = Mixer::Softmax;
  int window = 0;           // 0: global (keys j ≤ i); W > 0: local, keys [i−W+1, i] (W of them)
  bool rope = true;         // false: no positional encoding in this layer (gpt2; smollm3's no_rope_layers)
  float rope_theta = 10000.f;
  RopeScaling rope_scaling;
  float scale = 1.f;        // multiplies q·k: 1/√d, query_pre_attn_scalar^−½ or attention_multiplier
  float softcap = 0.f;      // > 0: scaled scores s ← c·tanh(s/c) before the mask (Gemma 2)
  // Gemma 4: what a layer has of its own where it differs from the model's. 0: the model's
  // head_size (d), n_kv_head (KV) and n_inner (I); ModelConfig::head_size_at etc. read them.
  int head_size = 0, kv_heads = 0, n_inner = 0;
  int kv_source = -1;       // ≥ 0: no K/V of its own, layer kv_source's are read (Gemma 4's KV sharing)
  bool v_from_k = false;    // V is the raw key projection, before k_norm and RoPE (attention_k_eq_v): no v_proj
};

struct ModelConfig {
  std::string model_type;  // as in config.json: "gpt2", "llama", "qwen2", "mistral"
  Arch arch = Arch::Gpt2;
  int vocab_size = 0;  // V
  int n_layer = 0;     // L
  int n_embd = 0;      // C
  int n_head = 0;      // H
  int n_kv_head = 0;   // KV (== H for gpt2)
  int head_size = 0;   // d
  int n_inner = 0;     // I
  int n_ctx = 0;       // longest context the model was built for (n_positions / max_position_embeddings)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  using RopeScaling = attnviz::RopeScaling;
  RopeScaling rope_scaling;  // of the global layers (local ones may differ: layer_specs)
  bool tie_embeddings = true;
  bool qkv_bias = false;   // q/k/v projections have biases (gpt2, qwen2, llama attention_bias)
  bool o_bias = false;     // output projection has a bias (gpt2, llama attention_bias)
  bool mlp_bias = false;   // MLP linears have biases (gpt2, llama mlp_bias)

  // What the families after llama change, as data (defaults: llama's).
  std::vector<LayerSpec> layer_specs;  // (L) or empty: every layer as layer() derives it
  int rotary_dim = 0;                  // dims of a head that RoPE turns (its first ones); 0: all d
  NormPlace norm_place = NormPlace::Pre;
  QkNorm qk_norm = QkNorm::None;
  MlpKind mlp = MlpKind::SwiGLU;       // gpt2: Gelu
  bool norm_plus_one = false;          // Gemma: the file's RMSNorm weights w act as (1 + w); held as 1 + w
  bool fused_qkv = false;              // phi3: one qkv_proj (q | k | v rows) and gate_up_proj (gate | up)
  float emb_scale = 1.f;               // token embeddings × this (Gemma √C, Granite embedding_multiplier)
  float residual_scale = 1.f;          // attention and MLP outputs × this before each add (Granite)
  float logit_scale = 1.f;             // logits × this (Granite: 1 / logits_scaling)
  float final_softcap = 0.f;           // > 0: logits ← c·tanh(logits/c) (Gemma 2)
  // Ministral 3's query temperature (Llama 4's attention temperature tuning): after RoPE the
  // query at position p is multiplied by 1 + beta·ln(1 + ⌊p / length⌋), exactly 1 before
  // position `length`. beta 0: none.
  float attn_temp_beta = 0.f;
  int attn_temp_length = 0;
  float query_temperature(int pos) const {
    return attn_temp_beta != 0.f && attn_temp_length > 0
               ? static_cast<float>(1.0 + attn_temp_beta * std::log1p(static_cast<double>(pos / attn_temp_length)))
               : 1.f;
  }
  std::vector<std::string> notes;      // what loading decided that the user should know
  bool attn_gate = false;              // Qwen3.5: q_proj also gives a per-head output gate, out ⊙ σ(gate)
  LinearAttnDims linear;               // the gated-delta-rule layers' sizes (layer_specs say which layers)
  int short_conv_kernel = 0;           // LFM2: the short convolution's taps (conv_L_cache)
  // GPT-OSS: every query head has a learned sink logit, an extra softmax column that is
  // dropped after the softmax, so a row's weights sum to 1 − p_sink (LayerWeights::sinks).
  bool attn_sinks = false;
  // GPT-OSS's mixture of experts in place of the MLP: the router's logits (with bias), the
  // top_k largest, softmax over those k; each chosen expert's gate | up columns interleaved
  // (gate = even columns, up = odd), gate ≤ limit, −limit ≤ up ≤ limit,
  // glu = gate·σ(alpha·gate), out = ((up + 1)·glu)·W_down + b. count 0: a plain MLP.
  // Gemma 4's (gemma): beside the dense MLP, the router reads RMSNorm(x)·scale·C^−½ (the
  // stream entering the block, norm without weight), softmax over all E, the top K
  // renormalised and times a per-expert scale; each expert gelu_tanh(gate)·up (gate and up
  // halves of one matrix, no biases, no clamps) of width `width`; the two branches each
  // normed, summed, then post_feedforward_layernorm (LayerWeights::router_scale, ...).
  struct Experts {
    int count = 0, top_k = 0;  // E experts, K chosen per token
    float limit = 7.f, alpha = 1.702f;
    int width = 0;       // an expert's MLP width; 0: n_inner (GPT-OSS)
    bool gemma = false;  // Gemma 4's routing and experts, beside the dense MLP
  } experts;
  bool short_conv_bias = false;        // LFM2: its in_proj, conv and out_proj have biases (conv_bias)
  // Gemma 4: V RMS-normed per head without a weight; per-layer embeddings of width ple_dim
  // (P; 0: none) from a (ple_vocab, L·P) table; a learned scalar multiplying the residual
  // stream at the end of each layer (LayerWeights::layer_scalar).
  bool v_norm = false;
  int ple_dim = 0, ple_vocab = 0;
  bool layer_scalars = false;

  // Layer l's attention: layer_specs[l], or llama's (global, RoPE with rope_theta and
  // rope_scaling, scale 1/√d) and gpt2's (no RoPE) when the config has none.
  LayerSpec layer(int l) const;
  int rotary() const { return rotary_dim ? rotary_dim : head_size; }
  bool any_local() const;    // some layer has a window
  bool any_linear() const;   // some layer's mixer is not softmax attention (Qwen3.5's linear layers, LFM2's convolutions)
  // "3 linear attention layers (0-2)": what `what` (a command or panel) cannot show yet, as
  // an Error naming it and the layers, for models with linear layers; nothing otherwise.
  void require_softmax_only(const std::string& what) const;
  bool any_softcap() const;  // some layer soft-caps its scores
  // "QK-norm per head, soft-cap 50, window 4096 on layers 0,2,4, no RoPE on 3,7": what
  // the architecture does beyond llama's, for info and the model panel ("" when nothing).
  std::string features() const;
  // The block's basic parts: "learned positions, LayerNorm, GELU" (gpt2), else "RoPE,
  // RMSNorm, " and the MLP's kind ("SwiGLU", "GeGLU", "experts"). info and the model panel.
  std::string block_kind() const;

  // Heads a trace holds for layer l: query heads (softmax), value heads (gated delta rule),
  // none (short convolution).
  int heads_at(int l) const;

  // Query heads that share one KV head; query head h reads KV head h / group_size().
  int group_size() const { return n_head / n_kv_head; }
  int kv_head_of(int h) const { return h / group_size(); }
  // Layer l's head size, KV heads and MLP width (Gemma 4's differ by layer), and the KV head
  // its query head h reads.
  int head_size_at(int l) const;
  int kv_heads_at(int l) const;
  int inner_at(int l) const;
  int kv_head_of(int l, int h) const { return h / (n_head / kv_heads_at(l)); }
  // Whether some layer's head size or KV heads differ from the model's, or it reads another
  // layer's K/V (Gemma 4), or the model adds per-layer embeddings or layer scalars.
  bool per_layer_attention() const;
  // What `what` cannot show yet for such a model, as an Error naming it; nothing otherwise.
  void require_uniform_layers(const std::string& what) const;
};

// Parameter counts per part, from the config alone.
struct ParamCounts {
  int64_t token_embedding = 0;  // V × C
  int64_t position_embedding = 0;  // n_ctx × C (gpt2)
  int64_t attention = 0;        // all layers: W_q, W_k, W_v, W_o (+ biases)
  int64_t mlp = 0;              // all layers
  int64_t norms = 0;            // all layer norms + the final one
  int64_t lm_head = 0;          // 0 when tied to the token embedding
  int64_t per_layer = 0;        // Gemma 4's per-layer embeddings (table, projections, norms) and layer scalars
  int64_t total() const { return token_embedding + position_embedding + attention + mlp + norms + lm_head + per_layer; }
};
ParamCounts parameter_counts(const ModelConfig& c);

// Fills c.layer_specs (L): layer l local with `window` where local[l], with RoPE where
// rope[l]; local layers turn with local_theta / local_scaling, global ones with the model's
// rope_theta / rope_scaling. Left empty (llama's layers, see ModelConfig::layer) when no
// layer differs from llama's and `always` is false. Both loaders (config.json, GGUF) call it.
void set_layer_specs(ModelConfig& c, const std::vector<bool>& local, int window, const std::vector<bool>& rope,
                     float local_theta, const RopeScaling& local_scaling, float scale, float softcap, bool always);

// Parses and validates; `where` names the file in error messages.
ModelConfig parse_config(const nlohmann::json& j, const std::string& where);

// The Hugging Face config.json for `c` (used when writing generated models).
nlohmann::json config_to_json(const ModelConfig& c);

// The RoPE frequencies θ^(−2i/d), i < d/2, after rope_scaling, in double (the backends
// round them to float where they always did). Every RoPE in attnviz reads them here.
// With longrope, T (the tokens in the window) chooses the factors: short up to
// original_max_position, long beyond (as Hugging Face does for the current length).
std::vector<double> rope_inv_freq(float theta, int d, const ModelConfig::RopeScaling& s = {}, int T = 0);
// Whether a pass over T tokens turns keys differently from one over T_old (longrope
// crossing original_max_position): then no cached key can be reused.
bool rope_changes(const ModelConfig& c, int T_old, int T);
inline std::vector<double> rope_inv_freq(const ModelConfig& c) {
  return rope_inv_freq(c.rope_theta, c.rotary(), c.rope_scaling);
}
// Layer l's frequencies (rot/2) for a window of T tokens, or none for a layer without RoPE.
std::vector<double> rope_inv_freq(const ModelConfig& c, int l, int T);

}  // namespace attnviz
