#!/usr/bin/env python3
"""Numerical parity of the attnviz dump for the newer architectures: C++ engine vs. a float64
torch reference written from each architecture's own (Hugging Face) definition.

Usage
-----
    /usr/bin/python3 tests/reference/arch_parity.py --cli PATH/attnviz-cli --workdir DIR [--keep]
    /usr/bin/python3 tests/reference/arch_parity.py --selftest [--workdir DIR] [--keep]

Optional: --cases name1,name2 (a subset; --list prints them), --timeout SECONDS (per CLI
call), --backend cpu|gpu (passed on to `dump`; the dump's metadata must then name it).

Architectures (model_type, with Hugging Face's own config keys and tensor names):
  qwen3        per-head RMSNorm of q and k (q_norm/k_norm, weight (head_dim)) after the
               projection, before RoPE; explicit head_dim (H*d != hidden); no bias;
               use_sliding_window/sliding_window/max_window_layers (layers i >= max_window_layers
               are local) or an explicit layer_types list.
  gemma2       layer i local when (i+1) % 2 != 0 (or layer_types); attn_logit_softcapping
               (capped = c*tanh(scaled/c), between scaled and masked); final_logit_softcapping;
               scale = query_pre_attn_scalar^-1/2; four norms per block (input, post-attention,
               pre- and post-feedforward), RMSNorm output * (1 + w); embeddings * sqrt(hidden);
               GeGLU gelu_tanh(gate) * up; tied embeddings.
  gemma3_text  layer i global when (i+1) % sliding_window_pattern == 0 (default 6) or
               layer_types; local layers use rope_local_base_freq and plain RoPE, global layers
               rope_theta with rope_scaling; per-head QK-norm with (1 + w); no soft-capping.
  gemma3       {"model_type": "gemma3", "text_config": {...gemma3_text...}}, tensors under
               language_model.model. (or the newer model.language_model.), no lm_head, vision
               tower / projector tensors present and ignored.
  phi3         fused qkv_proj (rows q | k | v) and gate_up_proj (rows gate | up);
               partial_rotary_factor (only the first int(d*factor) dims of a head rotate,
               rotate-half within them); rope_scaling "longrope": factor = max_position_embeddings
               / original_max_position_embeddings, cos and sin times sqrt(1 + ln(factor) /
               ln(original_max)), inv_freq = 1 / (ext * base^(2i/rot)) with ext = short_factor
               when T <= original_max, long_factor when T > original_max (HF's dynamic update
               looks at the largest position + 1); sliding_window on every layer.
  smollm3      llama with no_rope_layers (1 = RoPE, 0 = none; default: layer i rotates iff
               (i+1) % 4 != 0).
  olmo2        q_norm over the whole q projection (weight H*d), k_norm over KV*d, before RoPE;
               no input norm; post_attention_layernorm on the attention output and
               post_feedforward_layernorm on the MLP output, each before its residual add.
  granite      scale = attention_multiplier; embeddings * embedding_multiplier; attention and
               MLP outputs * residual_multiplier before each add; logits / logits_scaling.
  mistral      sliding_window on every layer; qwen2 (q/k/v biases): like qwen3's window keys.
RoPE keys: rope_theta + rope_scaling, or transformers v5's rope_parameters ({"rope_type",
"rope_theta", ...}, for gemma3 one such dict per layer type: "full_attention",
"sliding_attention").

Window rule: a local layer with window W masks key j for query i when j > i or j <= i - W
(a query sees exactly keys [i-W+1, i], absolute positions); a global layer only when j > i.

For every case the script builds a small random model (seeded, float32), writes DIR/<case>/
(config.json + model.safetensors), computes every dump tensor in float64 with a literal
per-head loop implementation (`reference`), runs
    CLI dump --model DIR/<case> --tokens a,b,c,... [--backend B] --out DIR/<case>/ours.safetensors
and compares with parity.py's rule (shape and dtype exact, identical -inf pattern, no NaN,
max|ours-ref| / max|ref| <= 1e-4 over finite entries; metadata model/backend/block_size/
dropped as strings, block_size = the model context, dropped = 0). Dump tensors per layer l:
q (H,T,d) after QK-norm and RoPE, k (KV,T,d) likewise, v (KV,T,d), scores (H,T,T) = q k^T,
scaled = scores * scale, capped (only for models that soft-cap attention logits; a `capped`
in the dump of a model that does not is a failure), masked, probs, out (H,T,d) = probs v with
query head h reading kv head h // (H/KV); and logits (T,V) after the final soft-cap or
logits_scaling. One line per tensor, then "N passed, M failed"; exit 1 on any failure.

--selftest needs no CLI. Per case: the hand-written expectation of which layers are local
(and their W) and which rotate matches what the config parsing derives; the model directory
round-trips; a second, vectorised implementation (torch.nn.functional, HF-style cos/sin
tables with rotate_half, repeat_interleave GQA, tril band masks) agrees to 1e-9;
invariants (probs rows sum to 1, the -inf pattern is exactly the window band, capped =
c*tanh(scaled/c), out = probs v); the float32 dump passes the comparison; and the comparison
CAN fail: perturbed values, a broken -inf pattern in both directions, a missing `capped`,
an extra `capped`, and for each case a set of plausible misreadings of the architecture
(window off by one either way, windows ignored, local RoPE with the global parameters,
partial rotary ignored, longrope attention factor ignored, (1+w) read as w, QK-norm per head
instead of whole, 1/sqrt(d) instead of the configured scale, RoPE on no-RoPE layers, ...)
each of which must make at least one tensor fail. Finally the CLI path runs end to end
against a fake CLI (this script with --fake-cli), a failing one and a silent one.
"""

import math
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity as P  # noqa: E402  (safetensors I/O, comparison rule, report, fake CLI, main)
from parity import (Report, _f64, _randn, gelu_tanh, loop_rms_norm, read_safetensors, silu,  # noqa: E402,F401
                    to_dump)
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------------------------
# configs (each model's own config.json keys)
# ---------------------------------------------------------------------------------------------

def text_config(cfg: dict) -> dict:
    """gemma3's and qwen3_vl's text_config (model_type gemma3_text, qwen3_vl_text), else the
    config itself."""
    if cfg.get("model_type") in ("gemma3", "qwen3_vl", "mistral3"):
        tc = dict(cfg["text_config"])
        tc.setdefault("model_type", "ministral3" if cfg["model_type"] == "mistral3" else cfg["model_type"] + "_text")
        tc.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
        return tc
    return cfg


def qwen3_vl_config(**extra):
    """Qwen3-VL: a vision tower beside a Qwen3 text model whose RoPE is multi-axis
    (rope_scaling.mrope_section, interleaved), as Qwen3-VL-2B's config.json lays it out."""
    tc = qwen3_config(2, rope_theta=5000000.0,
                      rope_scaling={"rope_type": "default", "mrope_section": [3, 3, 2], "mrope_interleaved": True})
    tc.update(model_type="qwen3_vl_text", tie_word_embeddings=True)
    del tc["architectures"]
    cfg = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "text_config": tc,
           "vision_config": {"model_type": "qwen3_vl", "depth": 1}, "tie_word_embeddings": True}
    cfg.update(extra)
    return cfg


def interleaved_mrope_angles(inv_freq, sections, positions):
    """Qwen3-VL's rotary angles as its modeling code builds them: one angle table per axis
    (time, height, width), positions (3, T); then apply_interleaved_mrope takes pair i from
    axis 1 where i % 3 == 1 and i < 3·sections[1], from axis 2 where i % 3 == 2 and
    i < 3·sections[2], else from axis 0. -> (T, rot/2)."""
    freqs = [torch.outer(positions[a].to(torch.float64), inv_freq) for a in range(3)]
    out = freqs[0].clone()
    for dim, offset in ((1, 1), (2, 2)):
        idx = list(range(offset, sections[dim] * 3, 3))
        out[:, idx] = freqs[dim][:, idx]
    return out


def base_config(model_type, arch, vocab, hidden, inter, layers, heads, kv, max_pos, **extra):
    cfg = {
        "architectures": [arch], "model_type": model_type, "vocab_size": vocab,
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv,
        "max_position_embeddings": max_pos, "rms_norm_eps": 1e-6, "torch_dtype": "float32",
    }
    cfg.update(extra)
    return cfg


def qwen3_config(layers=2, **extra):
    cfg = base_config("qwen3", "Qwen3ForCausalLM", 61, 48, 80, layers, 4, 2, 128, head_dim=16,
                      hidden_act="silu", attention_bias=False, rope_theta=1000000.0,
                      tie_word_embeddings=False, use_sliding_window=False, sliding_window=None,
                      max_window_layers=layers)
    cfg.update(extra)
    return cfg


def gemma2_config(**extra):
    cfg = base_config("gemma2", "Gemma2ForCausalLM", 57, 48, 96, 3, 4, 2, 256, head_dim=16,
                      hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                      rope_theta=10000.0, attention_bias=False, query_pre_attn_scalar=12,
                      sliding_window=5, attn_logit_softcapping=8.0, final_logit_softcapping=5.0,
                      tie_word_embeddings=True, cache_implementation="hybrid")
    cfg.update(extra)
    return cfg


def gemma3_text_config(layers, **extra):
    cfg = base_config("gemma3_text", "Gemma3ForCausalLM", 53, 32, 64, layers, 4, 2, 512,
                      head_dim=16, hidden_activation="gelu_pytorch_tanh", attention_bias=False,
                      query_pre_attn_scalar=8, sliding_window=4, rope_theta=10000.0,
                      rope_local_base_freq=50.0, rope_scaling={"rope_type": "linear", "factor": 4.0},
                      final_logit_softcapping=None, attn_logit_softcapping=None,
                      tie_word_embeddings=True)
    cfg.update(extra)
    return cfg


def gemma3_v5_rope(cfg):
    """The transformers v5 form: one rope_parameters dict per layer type, old keys gone."""
    cfg = dict(cfg)
    full = {"rope_type": "default", "rope_theta": cfg.pop("rope_theta")}
    full.update(cfg.pop("rope_scaling") or {})
    cfg["rope_parameters"] = {"full_attention": full,
                              "sliding_attention": {"rope_type": "default",
                                                    "rope_theta": cfg.pop("rope_local_base_freq")}}
    return cfg


def gemma3_mm_config(text_cfg):
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": text_cfg,
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8,
                              "image_size": 16, "patch_size": 8, "num_hidden_layers": 1,
                              "num_attention_heads": 2, "intermediate_size": 16},
            "mm_tokens_per_image": 4, "image_token_index": 52, "boi_token_index": 50,
            "eoi_token_index": 51, "tie_word_embeddings": True, "torch_dtype": "float32"}


def phi3_config(**extra):
    cfg = base_config("phi3", "Phi3ForCausalLM", 67, 64, 96, 2, 4, 2, 64, hidden_act="silu",
                      rope_theta=10000.0, partial_rotary_factor=0.75, sliding_window=None,
                      original_max_position_embeddings=16, tie_word_embeddings=False,
                      attention_bias=False, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)
    cfg.update(extra)
    return cfg


def longrope(rot, seed):
    rng = np.random.RandomState(seed)
    return {"type": "longrope",
            "short_factor": [round(float(x), 4) for x in rng.uniform(1.0, 3.0, rot // 2)],
            "long_factor": [round(float(x), 4) for x in rng.uniform(2.0, 12.0, rot // 2)]}


def smollm3_config(layers, **extra):
    cfg = base_config("smollm3", "SmolLM3ForCausalLM", 49, 48, 80, layers, 4, 2, 128,
                      hidden_act="silu", rope_theta=5000.0, attention_bias=False, mlp_bias=False,
                      tie_word_embeddings=True, use_sliding_window=False, sliding_window=None)
    cfg.update(extra)
    return cfg


def olmo2_config(**extra):
    cfg = base_config("olmo2", "Olmo2ForCausalLM", 59, 48, 80, 2, 4, 2, 128, hidden_act="silu",
                      rope_theta=500000.0, attention_bias=False, tie_word_embeddings=False)
    cfg.update(extra)
    return cfg


def granite_config(**extra):
    cfg = base_config("granite", "GraniteForCausalLM", 71, 64, 96, 2, 4, 2, 128, hidden_act="silu",
                      rope_theta=10000.0, attention_bias=False, mlp_bias=False,
                      attention_multiplier=0.2, embedding_multiplier=6.0, residual_multiplier=0.3,
                      logits_scaling=4.0, tie_word_embeddings=True)
    cfg.update(extra)
    return cfg


def mistral_config(window, layers=2, **extra):
    cfg = base_config("mistral", "MistralForCausalLM", 47, 32, 64, layers, 4, 2, 128,
                      hidden_act="silu", rope_theta=10000.0, sliding_window=window,
                      tie_word_embeddings=False)
    cfg.update(extra)
    return cfg


def qwen2_config(**extra):
    cfg = base_config("qwen2", "Qwen2ForCausalLM", 43, 32, 64, 3, 4, 2, 128, hidden_act="silu",
                      rope_theta=1000000.0, tie_word_embeddings=False, use_sliding_window=True,
                      sliding_window=3, max_window_layers=1)
    cfg.update(extra)
    return cfg


def ministral3_config(layers=2, tie=False, top_orig=None, **rope):
    """Ministral 3's text model: Mistral with YaRN in rope_parameters and, in the same dict,
    llama_4_scaling_beta (the query temperature steps every original_max_position_embeddings
    positions: 4 here, so that a short text crosses it)."""
    rp = {"rope_type": "yarn", "type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
          "original_max_position_embeddings": 4, "beta_fast": 8.0, "beta_slow": 1.0, "llama_4_scaling_beta": 0.3}
    rp.update(rope)
    cfg = base_config("ministral3", "Ministral3ForCausalLM", 53, 48, 80, layers, 4, 2, 1024, head_dim=16,
                      hidden_act="silu", sliding_window=None, tie_word_embeddings=tie, rms_norm_eps=1e-5,
                      rope_parameters={k: v for k, v in rp.items() if v is not None})
    if top_orig is not None:  # Hugging Face's standardize_rope_params lets it win over the dict's
        cfg["original_max_position_embeddings"] = top_orig
    return cfg


def mistral3_config(text_cfg, **extra):
    """Mistral 3's multimodal checkpoint: the text model in text_config, a vision tower beside."""
    tc = dict(text_cfg)
    del tc["architectures"]
    cfg = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "text_config": tc,
           "vision_config": {"model_type": "pixtral", "hidden_size": 8}, "image_token_index": 10}
    cfg.update(extra)
    return cfg


# ---------------------------------------------------------------------------------------------
# test cases
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    config: dict                  # config.json contents
    n_tokens: int                 # T (all tokens stay in the window: T < context)
    seed: int
    windows: List[Optional[int]]  # hand-written: W per layer (None = global)
    rope: List[bool]              # hand-written: does layer l rotate q and k
    layout: str = "plain"         # gemma3: "old" (language_model.model.) | "new" (model.language_model.)
    tokens: List[int] = field(default_factory=list)

    def __post_init__(self):
        self.tokens = P.case_tokens(self.seed, text_config(self.config)["vocab_size"], self.n_tokens)


def _mistral_window_cases(T=12):
    out = []
    for label, W in (("w1", 1), ("w2", 2), ("wTm1", T - 1), ("wT", T), ("wTp1", T + 1)):
        out.append(Case(f"mistral_{label}", mistral_config(W), T, 1100 + W, [W, W], [True, True]))
    return out


CASES = [
    Case("qwen3_qknorm", qwen3_config(), 14, 11, [None, None], [True, True]),
    # Qwen3-VL's text model in its multimodal checkpoint (model.language_model.*, a vision
    # tower beside it), multi-axis RoPE sections in rope_scaling.
    Case("qwen3_vl_text", qwen3_vl_config(), 12, 41, [None, None], [True, True], layout="new"),
    Case("qwen3_window_v5",
         {k: v for k, v in qwen3_config(3, use_sliding_window=True, sliding_window=5,
                                        max_window_layers=1,
                                        rope_parameters={"rope_type": "default",
                                                         "rope_theta": 10000.0}).items()
          if k != "rope_theta"},
         16, 12, [None, 5, 5], [True, True, True]),
    Case("qwen3_layer_types",
         qwen3_config(3, use_sliding_window=True, sliding_window=4, max_window_layers=0,
                      layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
         13, 13, [4, None, 4], [True, True, True]),
    Case("gemma2", gemma2_config(), 15, 21, [5, None, 5], [True, True, True]),
    Case("gemma2_layer_types",
         gemma2_config(num_hidden_layers=2, sliding_window=3,
                       layer_types=["full_attention", "sliding_attention"]),
         11, 22, [None, 3], [True, True]),
    Case("gemma3_text_pattern6", gemma3_text_config(6), 14, 31, [4, 4, 4, 4, 4, None], [True] * 6),
    Case("gemma3_text_v5",
         gemma3_v5_rope(gemma3_text_config(3, sliding_window=3, layer_types=[
             "sliding_attention", "full_attention", "sliding_attention"])),
         12, 32, [3, None, 3], [True] * 3),
    Case("gemma3_mm_old",
         gemma3_mm_config(gemma3_text_config(3, sliding_window_pattern=3, sliding_window=5)),
         13, 33, [5, 5, None], [True] * 3, layout="old"),
    Case("gemma3_mm_new",
         gemma3_mm_config(gemma3_text_config(2, sliding_window=2, layer_types=[
             "sliding_attention", "full_attention"], rope_scaling=None)),
         10, 34, [2, None], [True] * 2, layout="new"),
    Case("phi3_longrope_short", phi3_config(rope_scaling=longrope(12, 41)), 14, 41,
         [None, None], [True, True]),
    Case("phi3_longrope_long",
         phi3_config(partial_rotary_factor=0.5, rope_scaling=longrope(8, 42),
                     tie_word_embeddings=True), 20, 42, [None, None], [True, True]),
    Case("phi3_window", phi3_config(partial_rotary_factor=0.5, sliding_window=4, rope_scaling=None),
         12, 43, [4, 4], [True, True]),
    Case("smollm3_default", smollm3_config(4), 13, 51, [None] * 4, [True, True, True, False]),
    Case("smollm3_list", smollm3_config(2, no_rope_layers=[0, 1], tie_word_embeddings=False),
         12, 52, [None, None], [False, True]),
    Case("olmo2", olmo2_config(), 13, 61, [None, None], [True, True]),
    Case("granite", granite_config(), 14, 71, [None, None], [True, True]),
    Case("mistral_window", mistral_config(4), 14, 81, [4, 4], [True, True]),
    Case("qwen2_window", qwen2_config(), 12, 91, [None, 3, 3], [True, True, True]),
    # Qwen2.5's own configs: sliding_window set, use_sliding_window false -> every layer global
    Case("qwen2_window_off", qwen2_config(use_sliding_window=False), 12, 92, [None] * 3, [True] * 3),
    # Ministral 3: YaRN (attention factor from the default 0.1·ln(factor) + 1; the correction
    # dims rounded outward) and the query temperature stepping at positions 4, 8, 12.
    Case("ministral3", ministral3_config(), 14, 101, [None, None], [True, True]),
    # In its multimodal checkpoint (model.language_model.*, tied as Ministral-3-3B is),
    # truncate false, mscale and mscale_all_dim (the attention factor their ratio), a larger beta,
    # and a top-level original_max_position_embeddings (5) that wins over the dict's (4).
    Case("ministral3_mm", mistral3_config(ministral3_config(
        3, tie=True, top_orig=5, truncate=False, mscale=1.0, mscale_all_dim=0.5, factor=8.0, beta_fast=16.0, llama_4_scaling_beta=0.5)),
         13, 102, [None] * 3, [True] * 3, layout="new"),
] + _mistral_window_cases()


# ---------------------------------------------------------------------------------------------
# the architecture as data, derived from config.json (our reading of HF's definitions)
# ---------------------------------------------------------------------------------------------

GEMMA = ("gemma2", "gemma3_text")


@dataclass
class Rope:
    inv_freq: torch.Tensor   # (rot/2,) float64
    rot: int                 # rotated dims (the first `rot` of each head)
    attn_factor: float       # multiplies cos and sin


@dataclass
class Layer:
    window: Optional[int]
    rope: Optional[Rope]


@dataclass
class Plan:
    arch: str
    C: int
    H: int
    KV: int
    d: int
    V: int
    eps: float
    norm_offset: float            # RMSNorm output * (offset + w): 1 for Gemma, 0 otherwise
    block: str                    # "pre" | "sandwich" (Gemma) | "post" (OLMo 2)
    qk_norm: Optional[str]        # None | "head" | "whole"
    fused: bool                   # phi3 qkv_proj / gate_up_proj
    act: str                      # "silu" | "gelu_tanh"
    embed_scale: float
    scale: float
    attn_softcap: Optional[float]
    final_softcap: Optional[float]
    logits_div: float
    residual_mult: float
    tie: bool
    layers: List[Layer]
    attn_temp: Optional[Tuple[float, int]] = None  # Ministral 3: (beta, length): q × (1 + beta·ln(1 + ⌊t/length⌋))


def _rope_inv_freq(theta, rot, kind, params, tc, T):
    """-> (inv_freq (rot/2,), attention factor)."""
    base = 1.0 / (float(theta) ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    if kind == "default":
        return base, 1.0
    if kind == "linear":
        return base / float(params["factor"]), 1.0
    if kind == "llama3":
        return P.rope_inv_freq({"rope_theta": theta, "rope_scaling": params}, rot), 1.0
    if kind == "yarn":  # Hugging Face's _compute_yarn_parameters, step by step
        # standardize_rope_params: a top-level original_max_position_embeddings wins
        orig = tc.get("original_max_position_embeddings") or params.get("original_max_position_embeddings") \
            or tc["max_position_embeddings"]
        factor = params.get("factor") or tc["max_position_embeddings"] / orig

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        attn = params.get("attention_factor")
        if attn is None:
            ms, ms_all = params.get("mscale"), params.get("mscale_all_dim")
            attn = get_mscale(factor, ms) / get_mscale(factor, ms_all) if ms and ms_all else get_mscale(factor)
        beta_fast, beta_slow = params.get("beta_fast") or 32, params.get("beta_slow") or 1

        def correction_dim(turns):
            return (rot * math.log(orig / (turns * 2 * math.pi))) / (2 * math.log(theta))
        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if params.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, rot - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(rot // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        inv = base / factor * (1 - extrapolation_factor) + base * extrapolation_factor
        return inv, float(attn)
    if kind == "longrope":
        orig = tc.get("original_max_position_embeddings",
                      params.get("original_max_position_embeddings"))
        if orig is not None:
            factor = tc["max_position_embeddings"] / orig
        else:
            orig, factor = tc["max_position_embeddings"], float(params["factor"])
        attn = params.get("attention_factor")
        if attn is None:
            attn = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(orig))
        ext = params["long_factor"] if T > orig else params["short_factor"]
        ext = torch.tensor(ext, dtype=torch.float64)
        assert ext.numel() == rot // 2, "longrope factors must have rot/2 entries"
        return base / ext, float(attn)
    raise ValueError(f"rope type {kind!r} not covered by this reference")


def make_plan(cfg: dict, T: int) -> Plan:
    tc = text_config(cfg)
    arch = tc["model_type"]
    if arch == "qwen3_vl_text":
        # Text puts every token at the same position on the three axes. Then the interleaved
        # multi-axis angles are position × the plain inverse frequencies: checked here on
        # this case's own table, after which the layers are Qwen3's.
        d0 = tc.get("head_dim") or tc["hidden_size"] // tc["num_attention_heads"]
        inv = 1.0 / (float(tc["rope_theta"]) ** (torch.arange(0, d0, 2, dtype=torch.float64) / d0))
        pos = torch.arange(T).repeat(3, 1)
        multi = interleaved_mrope_angles(inv, tc["rope_scaling"]["mrope_section"], pos)
        assert torch.equal(multi, torch.outer(torch.arange(T, dtype=torch.float64), inv)), "mrope for text != plain RoPE"
        arch = "qwen3"
    C, H = tc["hidden_size"], tc["num_attention_heads"]
    KV = tc.get("num_key_value_heads") or H
    d = tc.get("head_dim") or C // H
    L = tc["num_hidden_layers"]
    # which layers are local, and their window
    W = tc.get("sliding_window")
    if arch in ("qwen2", "qwen3", "smollm3") and not tc.get("use_sliding_window", False):
        W = None  # HF: sliding_window = sliding_window if use_sliding_window else None
    if arch == "smollm3":
        rope_on = tc.get("no_rope_layers") or [int((i + 1) % tc.get("no_rope_layer_interval", 4) != 0)
                                               for i in range(L)]
    else:
        rope_on = [1] * L
    if tc.get("layer_types") is not None:
        types = list(tc["layer_types"])
    elif arch in ("qwen2", "qwen3"):
        types = ["sliding_attention" if W is not None and i >= tc.get("max_window_layers", L) else
                 "full_attention" for i in range(L)]
    elif arch == "smollm3":  # SmolLM3Config: only the no-RoPE layers slide
        types = ["sliding_attention" if W is not None and not rope_on[i] else "full_attention"
                 for i in range(L)]
    elif arch in ("mistral", "phi3", "ministral3"):
        types = ["sliding_attention" if W is not None else "full_attention"] * L
    elif arch == "gemma2":
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
    elif arch == "gemma3_text":
        pattern = tc.get("sliding_window_pattern", 6)
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(L)]
    else:
        types = ["full_attention"] * L
    assert len(types) == L
    layers = []
    for i in range(L):
        local = types[i] == "sliding_attention"
        rp = tc.get("rope_parameters")
        if rp is not None:
            params = rp[types[i]] if ("full_attention" in rp or "sliding_attention" in rp) else rp
            theta = params["rope_theta"]
        elif arch == "gemma3_text" and local:
            params, theta = {}, tc.get("rope_local_base_freq", 10000.0)
        else:
            params, theta = (tc.get("rope_scaling") or {}), tc.get("rope_theta", 10000.0)
        kind = params.get("rope_type", params.get("type", "default"))
        partial = params.get("partial_rotary_factor", tc.get("partial_rotary_factor", 1.0))
        rot = int(d * partial)
        rope = None
        if rope_on[i]:
            inv, factor = _rope_inv_freq(theta, rot, kind, params, tc, T)
            rope = Rope(inv, rot, factor)
        layers.append(Layer(W if local and W is not None else None, rope))
    gemma = arch in GEMMA
    if gemma:
        scale = float(tc["query_pre_attn_scalar"]) ** -0.5
    elif arch == "granite":
        scale = float(tc["attention_multiplier"])
    else:
        scale = 1.0 / math.sqrt(d)
    tie = tc.get("tie_word_embeddings", cfg.get("tie_word_embeddings", gemma))
    attn_temp = None
    if arch == "ministral3" and (tc.get("rope_parameters") or {}).get("llama_4_scaling_beta"):
        rp = tc["rope_parameters"]
        attn_temp = (float(rp["llama_4_scaling_beta"]),
                     int(tc.get("original_max_position_embeddings") or rp["original_max_position_embeddings"]))
    return Plan(attn_temp=attn_temp,
        
        arch=arch, C=C, H=H, KV=KV, d=d, V=tc["vocab_size"], eps=tc.get("rms_norm_eps", 1e-6),
        norm_offset=1.0 if gemma else 0.0,
        block="sandwich" if gemma else "post" if arch == "olmo2" else "pre",
        qk_norm="head" if arch in ("qwen3", "gemma3_text") else "whole" if arch == "olmo2" else None,
        fused=arch == "phi3", act="gelu_tanh" if gemma else "silu",
        embed_scale=math.sqrt(C) if gemma else float(tc.get("embedding_multiplier", 1.0))
        if arch == "granite" else 1.0,
        scale=scale,
        attn_softcap=tc.get("attn_logit_softcapping") if gemma else None,
        final_softcap=tc.get("final_logit_softcapping") if gemma else None,
        logits_div=float(tc.get("logits_scaling", 1.0)) if arch == "granite" else 1.0,
        residual_mult=float(tc.get("residual_multiplier", 1.0)) if arch == "granite" else 1.0,
        tie=bool(tie) or gemma, layers=layers)


# ---------------------------------------------------------------------------------------------
# random weights (canonical names: model.*, lm_head.weight) and the model directory
# ---------------------------------------------------------------------------------------------

def build_weights(case: Case) -> Dict[str, np.ndarray]:
    p = make_plan(case.config, case.n_tokens)
    tc = text_config(case.config)
    gen = torch.Generator().manual_seed(case.seed)
    C, H, KV, d, V, I = p.C, p.H, p.KV, p.d, p.V, tc["intermediate_size"]
    qk_std = math.sqrt(3.0 / C)

    def norm_w(n, qk=False):  # Gemma stores w with the output scaled by (1 + w)
        if p.norm_offset:
            return _randn(gen, (n,), 0.1, 0.5 if qk else 0.0)
        return _randn(gen, (n,), 0.1, 1.5 if qk else 1.0)

    w = {"model.embed_tokens.weight": _randn(gen, (V, C), 0.15 if p.norm_offset else 0.1)}
    for i in range(len(p.layers)):
        a = f"model.layers.{i}."
        if p.block != "post":
            w[a + "input_layernorm.weight"] = norm_w(C)
        q_w, k_w = _randn(gen, (H * d, C), qk_std), _randn(gen, (KV * d, C), qk_std)
        v_w = _randn(gen, (KV * d, C), 0.15)
        if p.fused:
            w[a + "self_attn.qkv_proj.weight"] = torch.cat([q_w, k_w, v_w], dim=0)
        else:
            w[a + "self_attn.q_proj.weight"] = q_w
            w[a + "self_attn.k_proj.weight"] = k_w
            w[a + "self_attn.v_proj.weight"] = v_w
        if p.arch == "qwen2":
            for n, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
                w[a + f"self_attn.{n}_proj.bias"] = _randn(gen, (rows,), 0.1)
        if p.qk_norm == "head":
            w[a + "self_attn.q_norm.weight"] = norm_w(d, qk=True)
            w[a + "self_attn.k_norm.weight"] = norm_w(d, qk=True)
        elif p.qk_norm == "whole":
            w[a + "self_attn.q_norm.weight"] = norm_w(H * d, qk=True)
            w[a + "self_attn.k_norm.weight"] = norm_w(KV * d, qk=True)
        w[a + "self_attn.o_proj.weight"] = _randn(gen, (C, H * d), 0.1)
        w[a + "post_attention_layernorm.weight"] = norm_w(C)
        if p.block in ("sandwich", "post"):
            w[a + "post_feedforward_layernorm.weight"] = norm_w(C)
        if p.block == "sandwich":
            w[a + "pre_feedforward_layernorm.weight"] = norm_w(C)
        gate, up = _randn(gen, (I, C), 0.15), _randn(gen, (I, C), 0.15)
        if p.fused:
            w[a + "mlp.gate_up_proj.weight"] = torch.cat([gate, up], dim=0)
        else:
            w[a + "mlp.gate_proj.weight"] = gate
            w[a + "mlp.up_proj.weight"] = up
        w[a + "mlp.down_proj.weight"] = _randn(gen, (C, I), 0.1)
    w["model.norm.weight"] = norm_w(C)
    if not p.tie:
        w["lm_head.weight"] = _randn(gen, (V, C), 0.15)
    return {k: v.numpy().astype(np.float32) for k, v in w.items()}


def _vision_dummies(gen) -> Dict[str, np.ndarray]:
    names = {"vision_tower.vision_model.embeddings.patch_embedding.weight": (8, 3, 8, 8),
             "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight": (8, 8),
             "vision_tower.vision_model.post_layernorm.weight": (8,),
             "multi_modal_projector.mm_input_projection_weight": (8, 32),
             "multi_modal_projector.mm_soft_emb_norm.weight": (8,)}
    return {k: _randn(gen, s, 1.0).numpy() for k, s in names.items()}


def on_disk_names(case: Case, weights: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    if case.layout == "plain":
        return dict(weights)
    gen = torch.Generator().manual_seed(case.seed + 7)
    out = {}
    for k, v in weights.items():
        if k.startswith("lm_head."):
            continue  # tied; the multimodal checkpoints carry no lm_head
        if case.layout == "old":
            out["language_model." + k] = v                        # language_model.model.*
        else:
            out["model.language_model." + k[len("model."):]] = v  # model.language_model.*
    for k, v in _vision_dummies(gen).items():
        out[("model." + k) if case.layout == "new" else k] = v
    return out


def write_model_dir(case: Case, model_dir: str, weights: Dict[str, np.ndarray]):
    P.write_config_model_dir(model_dir, case.config, on_disk_names(case, weights))


def load_model_dir(model_dir: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """-> (config, canonical weights); gemma3's and qwen3_vl's vision tensors dropped."""
    cfg, tensors = P.read_config_model_dir(model_dir)
    if cfg.get("model_type") not in ("gemma3", "qwen3_vl", "mistral3"):
        return cfg, tensors
    out = {}
    for k, v in tensors.items():
        if k.startswith("language_model."):
            out[k[len("language_model."):]] = v
        elif k.startswith("model.language_model."):
            out["model." + k[len("model.language_model."):]] = v
        elif k == "lm_head.weight":
            out[k] = v
    return cfg, out


# ---------------------------------------------------------------------------------------------
# reference (float64, literal loops)
# ---------------------------------------------------------------------------------------------

def loop_attention(q, k, v, scale, softcap, window) -> Dict[str, torch.Tensor]:
    H, T, _ = q.shape
    group = H // k.shape[0]
    names = ["scores", "scaled"] + (["capped"] if softcap else []) + ["masked", "probs", "out"]
    res = {n: [] for n in names}
    for h in range(H):
        kv = h // group
        scores = q[h] @ k[kv].T
        scaled = scores * scale
        capped = softcap * torch.tanh(scaled / softcap) if softcap else scaled
        masked = capped.clone()
        probs = torch.zeros(T, T, dtype=torch.float64)
        for i in range(T):
            for j in range(T):
                if j > i or (window is not None and j <= i - window):
                    masked[i, j] = NEG_INF
            m = max(float(masked[i, j]) for j in range(T))
            e = [math.exp(float(masked[i, j]) - m) for j in range(T)]
            s = sum(e)
            for j in range(T):
                probs[i, j] = e[j] / s
        vals = {"scores": scores, "scaled": scaled, "capped": capped, "masked": masked,
                "probs": probs, "out": probs @ v[kv]}
        for n in names:
            res[n].append(vals[n])
    return {n: torch.stack(vals) for n, vals in res.items()}


def reference_plan(p: Plan, weights, toks: List[int]) -> Dict[str, torch.Tensor]:
    W = _f64(weights)
    H, KV, d = p.H, p.KV, p.d
    res = {"tokens": torch.tensor(toks, dtype=torch.int32)}

    def norm(x, name):
        return loop_rms_norm(x, W[name], p.eps, p.norm_offset)

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def heads(y, n):  # (T, n*d) -> (n,T,d)
        return torch.stack([y[:, h * d:(h + 1) * d] for h in range(n)])

    x = torch.stack([W["model.embed_tokens.weight"][t] for t in toks]) * p.embed_scale
    for l, layer in enumerate(p.layers):
        a = f"model.layers.{l}."
        h = x if p.block == "post" else norm(x, a + "input_layernorm.weight")
        if p.fused:
            qkv = lin(h, a + "self_attn.qkv_proj")
            qf, kf, vf = qkv[:, :H * d], qkv[:, H * d:(H + KV) * d], qkv[:, (H + KV) * d:]
        else:
            qf, kf, vf = (lin(h, a + f"self_attn.{n}_proj") for n in "qkv")
        if p.qk_norm == "whole":
            qf, kf = norm(qf, a + "self_attn.q_norm.weight"), norm(kf, a + "self_attn.k_norm.weight")
        q, k, v = heads(qf, H), heads(kf, KV), heads(vf, KV)
        if p.qk_norm == "head":
            q, k = norm(q, a + "self_attn.q_norm.weight"), norm(k, a + "self_attn.k_norm.weight")
        if layer.rope is not None:
            r = layer.rope  # dims (i, i + rot/2) rotated, both times attn_factor
            q, k = (P.loop_rope(x, r.inv_freq, r.rot, factor=r.attn_factor) for x in (q, k))
        if p.attn_temp is not None:  # after RoPE: query t × (1 + beta·ln(1 + ⌊t / length⌋))
            beta, length = p.attn_temp
            q = q.clone()
            for t in range(q.shape[1]):
                q[:, t, :] *= 1.0 + beta * math.log(1 + math.floor(t / length))
        att = loop_attention(q, k, v, p.scale, p.attn_softcap, layer.window)
        res.update({f"layers.{l}.{n}": t for n, t in [("q", q), ("k", k), ("v", v)] + list(att.items())})
        merged = torch.cat([att["out"][hh] for hh in range(H)], dim=1)      # (T, H*d)
        o = lin(merged, a + "self_attn.o_proj")
        if p.block != "pre":
            o = norm(o, a + "post_attention_layernorm.weight")
        x = x + p.residual_mult * o
        if p.block == "pre":
            h = norm(x, a + "post_attention_layernorm.weight")
        elif p.block == "sandwich":
            h = norm(x, a + "pre_feedforward_layernorm.weight")
        else:
            h = x
        if p.fused:
            gu = lin(h, a + "mlp.gate_up_proj")
            gate, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        else:
            gate, up = lin(h, a + "mlp.gate_proj"), lin(h, a + "mlp.up_proj")
        act = gelu_tanh(gate) if p.act == "gelu_tanh" else silu(gate)
        m = lin(act * up, a + "mlp.down_proj")
        if p.block != "pre":
            m = norm(m, a + "post_feedforward_layernorm.weight")
        x = x + p.residual_mult * m
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    logits = norm(x, "model.norm.weight") @ head.T
    if p.final_softcap:
        logits = p.final_softcap * torch.tanh(logits / p.final_softcap)
    res["logits"] = logits / p.logits_div
    return res


def reference(cfg, weights, toks, plan: Optional[Plan] = None) -> Dict[str, np.ndarray]:
    p = plan or make_plan(cfg, len(toks))
    return {k: v.numpy() for k, v in reference_plan(p, weights, toks).items()}


# ---------------------------------------------------------------------------------------------
# second, vectorised implementation (selftest only)
# ---------------------------------------------------------------------------------------------

def alt_reference(p: Plan, weights, toks) -> Dict[str, np.ndarray]:
    W = _f64(weights)
    T, H, KV, d = len(toks), p.H, p.KV, p.d
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": ids.to(torch.int32)}

    def norm(x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + p.eps) * (W[name] + p.norm_offset)

    def proj(x, name):
        return F.linear(x, W[name + ".weight"], W.get(name + ".bias"))

    def rope(x, r: Rope):  # HF style: cos/sin tables cat(freqs, freqs), rotate_half on x[..., :rot]
        pos = torch.arange(T, dtype=torch.float64)
        emb = torch.cat([torch.outer(pos, r.inv_freq)] * 2, dim=-1)
        cos, sin = emb.cos() * r.attn_factor, emb.sin() * r.attn_factor
        xr, xp = x[..., :r.rot], x[..., r.rot:]
        x1, x2 = xr[..., :r.rot // 2], xr[..., r.rot // 2:]
        return torch.cat([xr * cos + torch.cat([-x2, x1], dim=-1) * sin, xp], dim=-1)

    x = F.embedding(ids, W["model.embed_tokens.weight"]) * p.embed_scale
    for l, layer in enumerate(p.layers):
        a = f"model.layers.{l}."
        h = x if p.block == "post" else norm(x, a + "input_layernorm.weight")
        if p.fused:
            qf, kf, vf = proj(h, a + "self_attn.qkv_proj").split([H * d, KV * d, KV * d], dim=-1)
        else:
            qf, kf, vf = (proj(h, a + f"self_attn.{n}_proj") for n in "qkv")
        if p.qk_norm == "whole":
            qf, kf = norm(qf, a + "self_attn.q_norm.weight"), norm(kf, a + "self_attn.k_norm.weight")
        q, k, v = (t.view(T, n, d).transpose(0, 1) for t, n in ((qf, H), (kf, KV), (vf, KV)))
        if p.qk_norm == "head":
            q, k = norm(q, a + "self_attn.q_norm.weight"), norm(k, a + "self_attn.k_norm.weight")
        if layer.rope is not None:
            q, k = rope(q, layer.rope), rope(k, layer.rope)
        if p.attn_temp is not None:
            beta, length = p.attn_temp
            pos = torch.arange(q.shape[1], dtype=torch.float64)
            q = q * (1 + beta * torch.log1p(torch.floor(pos / length)))[None, :, None]
        k_rep, v_rep = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        st = {"scores": torch.matmul(q, k_rep.transpose(-1, -2))}
        st["scaled"] = st["scores"] * p.scale
        pre = st["scaled"]
        if p.attn_softcap:
            st["capped"] = pre = torch.tanh(pre / p.attn_softcap) * p.attn_softcap
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        if layer.window is not None:
            allowed &= ~torch.ones(T, T, dtype=torch.bool).tril(-layer.window)
        st["masked"] = pre.masked_fill(~allowed, NEG_INF)
        st["probs"] = F.softmax(st["masked"], dim=-1)
        st["out"] = torch.matmul(st["probs"], v_rep)
        res.update({f"layers.{l}.{n}": t for n, t in [("q", q), ("k", k), ("v", v)] + list(st.items())})
        o = proj(st["out"].transpose(0, 1).reshape(T, H * d), a + "self_attn.o_proj")
        if p.block != "pre":
            o = norm(o, a + "post_attention_layernorm.weight")
        x = x + o * p.residual_mult
        h = {"pre": lambda: norm(x, a + "post_attention_layernorm.weight"),
             "sandwich": lambda: norm(x, a + "pre_feedforward_layernorm.weight"),
             "post": lambda: x}[p.block]()
        if p.fused:
            gate, up = proj(h, a + "mlp.gate_up_proj").chunk(2, dim=-1)
        else:
            gate, up = proj(h, a + "mlp.gate_proj"), proj(h, a + "mlp.up_proj")
        act = F.gelu(gate, approximate="tanh") if p.act == "gelu_tanh" else F.silu(gate)
        m = proj(act * up, a + "mlp.down_proj")
        if p.block != "pre":
            m = norm(m, a + "post_feedforward_layernorm.weight")
        x = x + m * p.residual_mult
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    logits = F.linear(norm(x, "model.norm.weight"), head)
    if p.final_softcap:
        logits = torch.tanh(logits / p.final_softcap) * p.final_softcap
    res["logits"] = logits / p.logits_div
    return {k: v.numpy() for k, v in res.items()}


# ---------------------------------------------------------------------------------------------
# comparison and the CLI path
# ---------------------------------------------------------------------------------------------

def context_of(cfg) -> int:
    return int(text_config(cfg)["max_position_embeddings"])


def expected_metadata(cfg) -> Dict[str, str]:
    return {"block_size": str(context_of(cfg)), "dropped": "0"}


def check_dump(case_name, path, expected, want_meta, report: Report):
    """parity.py's rule, plus: a `capped` tensor in the dump of a model without attention
    soft-capping is a failure (the pinned dump has it only for models that soft-cap)."""
    P.check_dump(case_name, path, expected, want_meta, report)
    if any(k.endswith(".capped") for k in expected):
        return
    try:
        ours, _ = read_safetensors(path)
    except Exception:
        return  # already reported
    extra = sorted(k for k in ours if k.endswith(".capped"))
    if extra:
        report.add(case_name, "<capped>", False, f"model does not soft-cap, dump has {extra[0]}, ...")


def describe(case: Case) -> str:
    tc = text_config(case.config)
    wins = ",".join("g" if w is None else str(w) for w in case.windows)
    return (f"== {case.name}: {case.config['model_type']}, T={case.n_tokens}, "
            f"layers [{wins}] (W per layer, g = global), rope {''.join('1' if r else '0' for r in case.rope)}, "
            f"H={tc['num_attention_heads']} KV={tc['num_key_value_heads']}")


# ---------------------------------------------------------------------------------------------
# selftest
# ---------------------------------------------------------------------------------------------

def sanity_checks(case: Case, plan: Plan, expected, weights) -> List[Tuple[str, bool, str]]:
    checks = []
    T, H, KV, d = case.n_tokens, plan.H, plan.KV, plan.d
    got_w = [layer.window for layer in plan.layers]
    got_r = [layer.rope is not None for layer in plan.layers]
    checks.append(("local layers and W as written by hand", got_w == case.windows, f"{got_w}"))
    checks.append(("RoPE layers as written by hand", got_r == case.rope, f"{got_r}"))
    if any(w is not None for w in case.windows):
        crosses = all(w is None or w < T for w in case.windows) or case.name.startswith("mistral_w")
        checks.append(("T crosses the window (T > W on local layers)", crosses, f"T={T}"))
    ii, jj = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    for l, layer in enumerate(plan.layers):
        g = lambda n: expected[f"layers.{l}.{n}"]
        q, k, v = g("q"), g("k"), g("v")
        sq = ("scores", "scaled", "masked", "probs") + (("capped",) if plan.attn_softcap else ())
        shapes_ok = (q.shape == (H, T, d) and k.shape == (KV, T, d) and v.shape == (KV, T, d)
                     and all(g(n).shape == (H, T, T) for n in sq) and g("out").shape == (H, T, d))
        checks.append((f"L{l} shapes", shapes_ok, f"H={H} KV={KV} T={T} d={d}"))
        # the mask, built here from the rule's own words: keys [i-W+1, i]
        lo = ii - (layer.window - 1) if layer.window is not None else np.zeros_like(ii)
        visible = (jj <= ii) & (jj >= lo)
        masked, probs = g("masked"), g("probs")
        pre = g("capped") if plan.attn_softcap else g("scaled")
        mask_ok = (np.isneginf(masked[:, ~visible]).all() and np.isfinite(masked[:, visible]).all()
                   and (masked[:, visible] == pre[:, visible]).all())
        if layer.window is not None:
            mask_ok = mask_ok and (visible.sum(1) == np.minimum(ii[:, 0] + 1, layer.window)).all()
        checks.append((f"L{l} -inf exactly outside [i-W+1, i]", bool(mask_ok),
                       f"W={layer.window}, visible per row {visible.sum(1).tolist()}"))
        row_err = float(np.abs(probs.sum(-1) - 1).max())
        checks.append((f"L{l} probs rows sum to 1, 0 where masked",
                       row_err < 1e-12 and (probs[:, ~visible] == 0).all(), f"{row_err:.1e}"))
        s_err = float(np.abs(g("scaled") - g("scores") * plan.scale).max())
        checks.append((f"L{l} scaled == scores * {plan.scale:.4g}", s_err < 1e-12, f"{s_err:.1e}"))
        if plan.attn_softcap:
            c = plan.attn_softcap
            c_err = float(np.abs(g("capped") - c * np.tanh(g("scaled") / c)).max())
            bites = float(np.abs(g("capped") - g("scaled")).max())
            checks.append((f"L{l} capped == c tanh(scaled/c), and it bites", c_err < 1e-12 and bites > 0.1,
                           f"c={c}, max |capped-scaled| {bites:.2f}"))
        out_ref = probs @ np.repeat(v, H // KV, axis=0)
        wrong = probs @ np.tile(v, (H // KV, 1, 1))
        sep = float(np.abs(g("out") - wrong).max() / np.abs(out_ref).max())
        checks.append((f"L{l} out == probs @ v (h // (H/KV))",
                       float(np.abs(g("out") - out_ref).max()) < 1e-12 and sep > 1e-2,
                       f"h%KV differs by rel {sep:.2f}"))
        rows = [i for i in range(T) if visible[i].sum() >= 3]
        if rows:
            peak = float(probs[:, rows, :].max(-1).mean())
            uniform = float(np.mean([1.0 / visible[i].sum() for i in rows]))
            checks.append((f"L{l} probs peaked", peak > 1.5 * uniform,
                           f"mean row max {peak:.2f} vs uniform {uniform:.2f}"))
        if layer.rope is not None:
            # against the same layer without RoPE: dims >= rot untouched, each pair (i, i+rot/2)
            # keeps its norm times the attention factor, and position 0 is only scaled
            r, f = layer.rope.rot, layer.rope.attn_factor
            bare = replace(plan, layers=[replace(ly, rope=None) if i == l else ly
                                         for i, ly in enumerate(plan.layers)])
            raw = reference_plan_np(bare, weights, case.tokens)
            ok = True
            for n in ("q", "k"):
                rot, unrot = expected[f"layers.{l}.{n}"], raw[f"layers.{l}.{n}"]
                pair = lambda x: np.hypot(x[..., :r // 2], x[..., r // 2:r])
                ok = ok and np.allclose(rot[..., r:], unrot[..., r:], rtol=0, atol=1e-12)
                ok = ok and np.allclose(pair(rot), f * pair(unrot), rtol=1e-10, atol=1e-12)
                ok = ok and np.allclose(rot[:, 0, :r], f * unrot[:, 0, :r], rtol=1e-10, atol=1e-12)
                ok = ok and (T < 2 or not np.allclose(rot[:, 1:, :r], f * unrot[:, 1:, :r], atol=1e-6))
            checks.append((f"L{l} RoPE: first {r} of {d} dims rotated, pairs (i, i+{r // 2}), "
                           f"norms x {f:.4f}, position 0 fixed", bool(ok), ""))
    logit_std = float(expected["logits"].std())
    checks.append(("logits not degenerate", logit_std > 0.05, f"std {logit_std:.3f}"))
    if plan.final_softcap:
        c = plan.final_softcap
        checks.append(("final soft-cap bites", float(np.abs(expected["logits"]).max()) > 0.5 * c
                       and float(np.abs(expected["logits"]).max()) < c,
                       f"max |logit| {np.abs(expected['logits']).max():.2f}, c={c}"))
    return checks


def variants(case: Case, plan: Plan) -> List[Tuple[str, Plan]]:
    """Plausible misreadings of the architecture; each must fail the comparison."""
    out = []

    def with_layers(fn):
        return replace(plan, layers=[fn(i, layer) for i, layer in enumerate(plan.layers)])

    T = case.n_tokens
    if any(layer.window is not None for layer in plan.layers):
        if any(layer.window is not None and layer.window < T for layer in plan.layers):
            out.append(("window W+1 (sees [i-W, i])", with_layers(
                lambda i, ly: replace(ly, window=ly.window + 1) if ly.window else ly)))
            out.append(("windows ignored", with_layers(lambda i, ly: replace(ly, window=None))))
        if any(layer.window is not None and 1 < layer.window <= T for layer in plan.layers):
            out.append(("window W-1 (sees [i-W+2, i])", with_layers(
                lambda i, ly: replace(ly, window=ly.window - 1) if ly.window and ly.window > 1 else ly)))
        if any(layer.window is None for layer in plan.layers):
            ws = [layer.window for layer in plan.layers if layer.window]
            out.append(("every layer local", with_layers(lambda i, ly: replace(ly, window=ly.window or ws[0]))))
    tc = text_config(case.config)
    if tc.get("sliding_window") and all(layer.window is None for layer in plan.layers):
        out.append(("sliding_window applied though switched off", with_layers(
            lambda i, ly: replace(ly, window=tc["sliding_window"]) if i >= 1 else ly)))
    ropes = [layer.rope for layer in plan.layers]
    if plan.arch == "gemma3_text":
        glob = next(r for r, ly in zip(ropes, plan.layers) if ly.window is None)
        out.append(("local layers with the global RoPE", with_layers(
            lambda i, ly: replace(ly, rope=glob) if ly.window else ly)))
        loc = next(r for r, ly in zip(ropes, plan.layers) if ly.window is not None)
        out.append(("global layers with the local RoPE", with_layers(
            lambda i, ly: replace(ly, rope=loc) if ly.window is None else ly)))
    if any(r is not None and r.rot < plan.d for r in ropes):
        def full_rot(i, ly):
            if ly.rope is None:
                return ly
            inv = 1.0 / (1e4 ** (torch.arange(0, plan.d, 2, dtype=torch.float64) / plan.d))
            return replace(ly, rope=Rope(inv, plan.d, ly.rope.attn_factor))
        out.append(("partial rotary ignored", with_layers(full_rot)))
    if any(r is not None and r.attn_factor != 1.0 for r in ropes):
        out.append(("longrope attention factor ignored", with_layers(
            lambda i, ly: replace(ly, rope=replace(ly.rope, attn_factor=1.0)) if ly.rope else ly)))
    rs = case.config.get("rope_scaling") or {}
    if rs.get("type", rs.get("rope_type")) == "longrope":
        other = "short_factor" if T > case.config["original_max_position_embeddings"] else "long_factor"
        out.append((f"longrope with {other}", with_layers(lambda i, ly: replace(ly, rope=replace(
            ly.rope, inv_freq=(ly.rope.inv_freq * torch.tensor(
                rs["short_factor" if other == "long_factor" else "long_factor"], dtype=torch.float64)
                / torch.tensor(rs[other], dtype=torch.float64)))))))
    if any(r is None for r in ropes):
        some = next(r for r in ropes if r is not None)
        out.append(("RoPE on the no-RoPE layers", with_layers(lambda i, ly: replace(ly, rope=ly.rope or some))))
    if plan.norm_offset:
        out.append(("Gemma norm as w instead of (1 + w)", replace(plan, norm_offset=0.0)))
        out.append(("embeddings not scaled by sqrt(hidden)", replace(plan, embed_scale=1.0)))
    if plan.act == "gelu_tanh":
        out.append(("silu instead of gelu_tanh", replace(plan, act="silu")))
    if plan.qk_norm:
        out.append(("QK-norm skipped", replace(plan, qk_norm=None)))
    if abs(plan.scale - 1.0 / math.sqrt(plan.d)) > 1e-9:
        out.append(("scale 1/sqrt(d)", replace(plan, scale=1.0 / math.sqrt(plan.d))))
    if plan.attn_softcap:
        out.append(("attention soft-cap skipped", replace(plan, attn_softcap=None)))
    if plan.final_softcap:
        out.append(("final soft-cap skipped", replace(plan, final_softcap=None)))
    if plan.logits_div != 1.0:
        out.append(("logits_scaling ignored", replace(plan, logits_div=1.0)))
    if plan.residual_mult != 1.0:
        out.append(("residual_multiplier ignored", replace(plan, residual_mult=1.0)))
    if plan.arch == "granite":
        out.append(("embedding_multiplier ignored", replace(plan, embed_scale=1.0)))
    if plan.attn_temp is not None:
        out.append(("query temperature ignored", replace(plan, attn_temp=None)))
        out.append(("query temperature stepping one position early", replace(
            plan, attn_temp=(plan.attn_temp[0], plan.attn_temp[1] - 1))))
    tp = text_config(case.config).get("rope_parameters") or {}
    if tp.get("rope_type") == "yarn":
        out.append(("YaRN as linear scaling (every frequency / factor)", with_layers(lambda i, ly: replace(
            ly, rope=replace(ly.rope, inv_freq=1.0 / (tp["rope_theta"] ** (torch.arange(
                0, ly.rope.rot, 2, dtype=torch.float64) / ly.rope.rot)) / tp["factor"])))))
    return out


def negative_checks(case, plan, weights, dump, expected, want_meta, workdir):
    T = case.n_tokens
    mut = P.Mutations(dump, expected)

    def mutated(name, idx, val=None, rel=None):
        return mut.bump(name, idx, rel) if rel is not None else mut.set(name, idx, val)

    last = T - 1
    scen = [("logits +2e-4 rel", mutated("logits", (last, 0), rel=2e-4), ["logits"]),
            ("q +1e-3 rel", mutated("layers.0.q", (0, last, 0), rel=1e-3), ["layers.0.q"]),
            ("logits +2e-6 rel (within tolerance)", mutated("logits", (last, 0), rel=2e-6), [])]
    for l, layer in enumerate(plan.layers):
        if layer.window is not None and layer.window < T:
            W = layer.window
            # the key just outside the window left visible / the oldest visible key masked
            scen.append((f"L{l} key i-W visible", mutated(f"layers.{l}.masked", (0, last, last - W), 1.0),
                         [f"layers.{l}.masked"]))
            scen.append((f"L{l} key i-W+1 masked", mutated(f"layers.{l}.masked", (0, last, last - W + 1),
                                                            NEG_INF), [f"layers.{l}.masked"]))
            break
    for l, layer in enumerate(plan.layers):
        if layer.window is None and T > 1:
            scen.append((f"L{l} (global) key 0 masked", mutated(f"layers.{l}.masked", (0, last, 0), NEG_INF),
                         [f"layers.{l}.masked"]))
            break
    if plan.attn_softcap:
        d = mut.copy()
        d.pop("layers.0.capped")
        scen.append(("missing capped", d, ["layers.0.capped"]))
        d = mut.copy()
        d["layers.0.capped"] = d["layers.0.scaled"].copy()
        scen.append(("capped == scaled", d, ["layers.0.capped"]))
    else:
        d = mut.copy()
        d["layers.0.capped"] = d["layers.0.scaled"].copy()
        scen.append(("capped present without soft-capping", d, ["<capped>"]))
    # misreadings of the architecture: the reference under each must fail somewhere
    misreadings = ((desc, to_dump(reference_plan_np(vplan, weights, case.tokens)))
                   for desc, vplan in variants(case, plan))
    return P.check_negatives(case.name, workdir, dump, expected, want_meta, check_dump, scen, misreadings)


def reference_plan_np(p, weights, toks):
    return {k: v.numpy() for k, v in reference_plan(p, weights, toks).items()}


def selftest_parts(case, weights, expected, want_meta, workdir):
    plan = make_plan(case.config, case.n_tokens)
    return (alt_reference(plan, weights, case.tokens), sanity_checks(case, plan, expected, weights),
            lambda dump: negative_checks(case, plan, weights, dump, expected, want_meta, workdir))


SCRIPT = P.ConfigScript(os.path.abspath(__file__), "attnviz-arch-parity-", build_weights, write_model_dir,
                        load_model_dir, reference, expected_metadata, describe, lambda case: check_dump,
                        selftest_parts, lambda case, model_dir, weights: " (vision tensors ignored)")


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def main(argv: List[str]) -> int:
    return P.config_main(SCRIPT, argv, __doc__, CASES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
