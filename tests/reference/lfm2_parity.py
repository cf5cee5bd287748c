#!/usr/bin/env python3
"""Numerical parity of the attnviz dump for Liquid AI's LFM2 text models (gated short
convolution + grouped-query attention): C++ engine vs. a float64 torch reference written from
the model's own (Hugging Face) definition, transformers' models/lfm2 (modeling_lfm2.py,
configuration_lfm2.py).

Usage
-----
    /usr/bin/python3 tests/reference/lfm2_parity.py --cli PATH/attnviz-cli --workdir DIR [--keep]
    /usr/bin/python3 tests/reference/lfm2_parity.py --selftest [--workdir DIR] [--keep]

Optional: --cases name1,name2 (a subset; --list prints them), --timeout SECONDS (per CLI
call), --backend cpu|gpu (passed on to `dump`; the dump's metadata must then name it).

Architecture (model_type "lfm2", Lfm2ForCausalLM; every tensor under model., lm_head.weight
at the top level and absent when the embeddings are tied):
  config       hidden_size C, num_attention_heads H, num_key_value_heads KV (default 8),
               head_dim d (default C / H), vocab_size, num_hidden_layers, norm_eps (default 1e-5),
               conv_L_cache K (default 3), conv_bias (default false), max_position_embeddings
               (default 128000); tie: "tie_embedding" if present, else tie_word_embeddings
               (default TRUE); RoPE base: rope_parameters.rope_theta, else rope_theta, else
               1e6 (rope_type must be "default").
  layer kinds  layer_types[i] == "full_attention" -> attention, "conv" -> short convolution;
               without layer_types: full_attn_idxs (attention iff i in the list; without it
               every layer is attention).
  ff size      ff = block_ff_dim if present, else intermediate_size (default 12288); if
               block_auto_adjust_ff_dim (default TRUE): ff = int(2 ff / 3); then, only if
               block_ffn_dim_multiplier (default 1.0) is not null: ff = int(mult ff),
               ff = m ceil(ff / m) with m = block_multiple_of (default 256).
  blocks       x = embed_tokens[ids] (no scaling, no positions);
               per layer: x += mixer(RMSNorm(x, operator_norm)); x += w2(silu(w1 u) * w3 u),
               u = RMSNorm(x, ffn_norm); logits = RMSNorm(x, embedding_norm) @ head^T
               (head = lm_head, or embed_tokens when tied). Every RMSNorm is
               x * rsqrt(mean(x^2) + norm_eps) * w (w, NOT 1 + w).
  conv layer   in_proj (3C, C) [+ bias]: rows [B (C) | C (C) | x (C)] ; u = B * x;
               depthwise causal conv1d over time, weight (C, 1, K) [+ bias (C)]:
               conv[t, c] = sum_{k=0}^{K-1} w[c, 0, k] u[t - (K-1) + k, c] (+ b[c]), u = 0
               before the first token (taps on t-K+1 .. t, the newest token on tap K-1);
               y = C * conv; out_proj (C, C) [+ bias]. conv_bias adds all three biases.
  attention    q_proj (H d, C), k_proj/v_proj (KV d, C), no biases; per head RMSNorm of q and
               k over d (q_layernorm / k_layernorm, weight (d), w not 1 + w, eps norm_eps),
               then RoPE rotate-half on all d dims (pairs (i, i + d/2), inv_freq_i =
               theta^(-2i/d), position t = 0 .. T-1); scale d^-1/2; causal mask; GQA query
               head h reads KV head h // (H/KV); out_proj (C, H d) of the heads concatenated.

For every case the script builds a small random model (seeded, float32), writes DIR/<case>/
(config.json + model.safetensors, Hugging Face's own names and shapes), computes every dump
tensor in float64 with a literal per-head, per-token loop implementation (`reference`), runs
    CLI dump --model DIR/<case> --tokens a,b,c,... [--backend B] --out DIR/<case>/ours.safetensors
and compares with parity.py's rule (shape and dtype exact, identical -inf pattern, no NaN,
max|ours-ref| / max(max|ref|, 1e-6) <= 1e-4 over finite entries; metadata model/backend/
block_size/dropped as strings, block_size = the model context, dropped = 0). A failing
tensor's line names the layer kind and where the largest error is, with both values.

Dump tensors (float32; tokens (T) int32; logits (T,V)):
  attention layer l: q (H,T,d) after q_layernorm and RoPE, k (KV,T,d) likewise, v (KV,T,d),
                     scores (H,T,T) = q k^T, scaled = scores d^-1/2, masked (-inf where
                     j > i), probs, out (H,T,d) = probs v (before out_proj).
  conv layer l:      nothing. Any of q, k, v, scores, scaled, masked, probs, out, implicit,
                     beta, decay, gate, capped for a conv layer is a failure (a wrong
                     convolution shows in the logits and in the later attention layers).
A missing expected tensor fails; so does implicit/beta/decay/gate/capped in an attention layer.
Other extra tensors are reported, not failed.

--selftest needs no CLI. Per case: the layer kinds, ff size, head size, tie and RoPE base
derived from config.json equal the ones written by hand (and the ff size equals the file's
w1 rows); the model directory round-trips; a second, vectorised implementation (F.conv1d with
padding K-1 and groups = C, complex-number RoPE, matmul attention with repeat_interleave GQA)
agrees to 1e-9; invariants (the conv's impulse response sits on taps t .. t+K-1 and equals the
kernel read backwards, the whole model is causal: the first T-1 tokens alone reproduce every
tensor's first T-1 rows, no tensors for conv layers, probs rows sum to 1, -inf exactly above the
diagonal, q/k RMS-normalised per head, RoPE keeps pair norms and fixes position 0, ...);
the float32 dump passes the comparison; and the comparison CAN fail: perturbed values, missing
tensors, attention tensors in a conv layer, and for each case a set of plausible misreadings
of the architecture (conv taps one step late or early, centred, kernel flipped; B and C
swapped; split read as [x | B | C]; gating after the convolution or both gates before it; C
gate missing; QK-norm missing; (1 + w) norms; RoPE on adjacent pairs; final norm missing; GQA
as h % KV; the ff size rule ignored or misapplied (a loader that trusts the config reads the
file's bytes with the wrong shape); conv biases ignored; tied/untied misread; the RoPE base
default or rope_parameters misread; d^-1/2 from C / H instead of head_dim) each of which must
make at least one tensor fail. Finally the CLI path runs end to end against a fake CLI (this
script with --fake-cli), a failing one and a silent one.
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
from parity import (Report, _f64, _randn, heads_of, loop_causal_attention, loop_rms_norm,  # noqa: E402
                    loop_rope, to_dump)

NEG_INF = float("-inf")
FULL, CONV = "full_attention", "conv"
ATTN = ("q", "k", "v", "scores", "scaled", "masked", "probs", "out")
SQUARE = ("scores", "scaled", "masked", "probs")
FOREIGN = ("implicit", "beta", "decay", "gate", "capped")  # no LFM2 layer has these
# HF defaults (configuration_lfm2.py)
DEFAULTS = {"num_key_value_heads": 8, "intermediate_size": 12288, "norm_eps": 1e-5, "tie_word_embeddings": True,
            "conv_bias": False, "conv_L_cache": 3, "block_multiple_of": 256,
            "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True,
            "max_position_embeddings": 128000, "rope_theta": 1000000.0}


# ---------------------------------------------------------------------------------------------
# configs and cases
# ---------------------------------------------------------------------------------------------

def lfm2_config(vocab, hidden, layers, heads, kv, **extra):
    cfg = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "vocab_size": vocab,
           "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
           "torch_dtype": "float32"}
    cfg.update(extra)
    return cfg


C_, A_ = "C", "A"  # hand-written layer kinds: conv / attention


@dataclass
class Case:
    name: str
    config: dict                  # config.json contents
    n_tokens: int                 # T (< context)
    seed: int
    kinds: str                    # hand-written: "C" / "A" per layer
    ff: int                       # hand-written feed-forward size
    d: int                        # hand-written head size
    tie: bool                     # hand-written
    theta: float                  # hand-written RoPE base
    tokens: List[int] = field(default_factory=list)

    def __post_init__(self):
        self.tokens = P.case_tokens(self.seed, self.config["vocab_size"], self.n_tokens)


CASES = [
    # explicit layer_types, MHA, kernel 3, tied embeddings (no lm_head in the file), the ff rule
    # switched off (ff = intermediate_size = 48; with it on it would be 256)
    Case("lfm2_small_tied",
         lfm2_config(50, 32, 5, 4, 4, intermediate_size=48, norm_eps=1e-5, conv_L_cache=3,
                     conv_bias=False, max_position_embeddings=64, rope_theta=10000.0,
                     tie_word_embeddings=True, block_auto_adjust_ff_dim=False,
                     block_ffn_dim_multiplier=1.0, block_multiple_of=256,
                     layer_types=[CONV, CONV, FULL, CONV, FULL]),
         11, 4101, "CCACA", 48, 8, True, 10000.0),
    # full_attn_idxs instead of layer_types, GQA ratio 2, head_dim 8 != 64/4, kernel 4, untied,
    # the ff rule on with a multiplier: int(2*100/3) = 66, int(1.5*66) = 99, up to 16 -> 112;
    # transformers v5's rope_parameters
    Case("lfm2_gqa_ffrule",
         lfm2_config(53, 64, 6, 4, 2, head_dim=8, intermediate_size=100, norm_eps=1e-6,
                     conv_L_cache=4, conv_bias=False, max_position_embeddings=128,
                     rope_parameters={"rope_type": "default", "rope_theta": 500.0},
                     tie_word_embeddings=False, block_auto_adjust_ff_dim=True,
                     block_ffn_dim_multiplier=1.5, block_multiple_of=16, full_attn_idxs=[1, 4]),
         13, 4102, "CACCAC", 112, 8, False, 500.0),
    # Liquid's original keys: block_ff_dim (no intermediate_size), tie_embedding false (with
    # tie_word_embeddings absent, whose default is true); block_auto_adjust_ff_dim, conv_L_cache,
    # norm_eps and the RoPE base left to their defaults (true, 3, 1e-5, 1e6); the multiplier
    # null: int(2*90/3) = 60, no rounding to block_multiple_of; conv biases; attention first;
    # GQA ratio 3
    Case("lfm2_liquid_keys_bias",
         lfm2_config(47, 48, 4, 6, 2, block_ff_dim=90, block_ffn_dim_multiplier=None,
                     block_multiple_of=32, conv_bias=True, tie_embedding=False,
                     max_position_embeddings=96, layer_types=[FULL, CONV, CONV, FULL]),
         12, 4103, "ACCA", 60, 8, False, 1e6),
]


# ---------------------------------------------------------------------------------------------
# the architecture as data, derived from config.json (our reading of HF's definition)
# ---------------------------------------------------------------------------------------------

def inv_freq_of(theta: float, d: int) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))


@dataclass
class Plan:
    C: int
    V: int
    eps: float
    tie: bool
    kinds: List[str]              # FULL / CONV per layer
    H: int
    KV: int
    d: int
    theta: float
    K: int                        # conv_L_cache
    bias: bool                    # conv_bias
    ff: int
    # switches that the misreadings flip (the defaults are our reading of the definition)
    norm_offset: float = 0.0      # RMSNorm * (offset + w)
    qk_norm: bool = True
    rope_pairs: str = "half"      # "half": (i, i + d/2) [correct]; "adjacent": (2i, 2i+1)
    scale_d: Optional[int] = None  # d in the d^-1/2 scale (None: d)
    gqa: str = "interleave"       # "interleave": h // (H/KV); "tile": h % KV
    split: str = "BCx"            # in_proj rows [B | C | x]; "xBC" misreading
    swap_bc: bool = False
    gating: str = "B_pre_C_post"  # "B_pre_C_post" [correct] | "both_post" | "both_pre" | "no_C"
    conv_shift: int = 0           # taps on t-(K-1)+k+shift
    conv_flip: bool = False
    use_bias: bool = True         # conv_bias honoured
    final_norm: bool = True
    ff_read: Optional[int] = None  # a loader's (wrong) idea of ff: the file's bytes re-read
    rope_off: Tuple[int, ...] = ()  # selftest only: layers computed without RoPE


def layer_kinds(cfg: dict) -> List[str]:
    L = cfg["num_hidden_layers"]
    if cfg.get("layer_types") is not None:
        kinds = list(cfg["layer_types"])
    else:
        idxs = cfg.get("full_attn_idxs")
        idxs = list(range(L)) if idxs is None else list(idxs)
        kinds = [FULL if i in idxs else CONV for i in range(L)]
    # HF treats every string but "full_attention" as conv; only "conv" is seen in checkpoints
    assert len(kinds) == L and all(k in (FULL, CONV) for k in kinds), kinds
    return kinds


def ff_size(cfg: dict, *, auto=None, use_multiplier=True, round_always=False,
            read_block_ff_dim=True) -> int:
    """HF's Lfm2MLP size; the keyword switches give the misreadings."""
    ff = cfg.get("intermediate_size", DEFAULTS["intermediate_size"])
    if read_block_ff_dim and "block_ff_dim" in cfg:
        ff = cfg["block_ff_dim"]
    on = cfg.get("block_auto_adjust_ff_dim", DEFAULTS["block_auto_adjust_ff_dim"]) if auto is None else auto
    if on:
        ff = int(2 * ff / 3)
        mult = cfg.get("block_ffn_dim_multiplier", DEFAULTS["block_ffn_dim_multiplier"])
        m = cfg.get("block_multiple_of", DEFAULTS["block_multiple_of"])
        if mult is not None:          # HF: the rounding sits inside this branch
            if use_multiplier:
                ff = int(mult * ff)
            ff = m * ((ff + m - 1) // m)
        elif round_always:
            ff = m * ((ff + m - 1) // m)
    return ff


def rope_theta(cfg: dict) -> float:
    rp = cfg.get("rope_parameters") or {}
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind != "default" or (cfg.get("rope_scaling") or {}):
        raise ValueError(f"rope type {kind!r} / rope_scaling not covered by this reference")
    if "rope_theta" in rp:
        return float(rp["rope_theta"])
    return float(cfg.get("rope_theta", DEFAULTS["rope_theta"]))


def tie_of(cfg: dict) -> bool:
    return bool(cfg.get("tie_embedding", cfg.get("tie_word_embeddings", DEFAULTS["tie_word_embeddings"])))


def make_plan(cfg: dict) -> Plan:
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    return Plan(C=C, V=cfg["vocab_size"], eps=float(cfg.get("norm_eps", DEFAULTS["norm_eps"])),
                tie=tie_of(cfg), kinds=layer_kinds(cfg), H=H,
                KV=int(cfg.get("num_key_value_heads", DEFAULTS["num_key_value_heads"])), d=cfg.get("head_dim") or C // H,
                theta=rope_theta(cfg), K=int(cfg.get("conv_L_cache", DEFAULTS["conv_L_cache"])),
                bias=bool(cfg.get("conv_bias", DEFAULTS["conv_bias"])), ff=ff_size(cfg))


# ---------------------------------------------------------------------------------------------
# random weights (float32, HF names and shapes, nn.Linear layout (out, in))
# ---------------------------------------------------------------------------------------------

def build_weights(case: Case) -> Dict[str, np.ndarray]:
    p = make_plan(case.config)
    gen = torch.Generator().manual_seed(case.seed)
    C, V, H, KV, d, K, ff = p.C, p.V, p.H, p.KV, p.d, p.K, p.ff

    def norm_w(n, mean=1.0, std=0.1):  # applied as w
        return _randn(gen, (n,), std, mean)

    w = {"model.embed_tokens.weight": _randn(gen, (V, C), 1.0)}
    for i, kind in enumerate(p.kinds):
        a = f"model.layers.{i}."
        w[a + "operator_norm.weight"] = norm_w(C)
        if kind == FULL:
            s = a + "self_attn."
            w[s + "q_proj.weight"] = _randn(gen, (H * d, C), C ** -0.5)
            w[s + "k_proj.weight"] = _randn(gen, (KV * d, C), C ** -0.5)
            w[s + "v_proj.weight"] = _randn(gen, (KV * d, C), C ** -0.5)
            w[s + "out_proj.weight"] = _randn(gen, (C, H * d), (H * d) ** -0.5)
            # w ~ 1.6: scaled scores with std ~2.5, clearly peaked rows
            w[s + "q_layernorm.weight"] = norm_w(d, 1.6, 0.2)
            w[s + "k_layernorm.weight"] = norm_w(d, 1.6, 0.2)
        else:
            s = a + "conv."
            w[s + "in_proj.weight"] = _randn(gen, (3 * C, C), C ** -0.5)
            w[s + "conv.weight"] = _randn(gen, (C, 1, K), 0.6)
            w[s + "out_proj.weight"] = _randn(gen, (C, C), C ** -0.5)
            if p.bias:
                w[s + "in_proj.bias"] = _randn(gen, (3 * C,), 0.3)
                w[s + "conv.bias"] = _randn(gen, (C,), 0.3)
                w[s + "out_proj.bias"] = _randn(gen, (C,), 0.3)
        w[a + "ffn_norm.weight"] = norm_w(C)
        w[a + "feed_forward.w1.weight"] = _randn(gen, (ff, C), C ** -0.5)
        w[a + "feed_forward.w3.weight"] = _randn(gen, (ff, C), C ** -0.5)
        w[a + "feed_forward.w2.weight"] = _randn(gen, (C, ff), ff ** -0.5)
    w["model.embedding_norm.weight"] = norm_w(C)
    if not p.tie:
        w["lm_head.weight"] = _randn(gen, (V, C), C ** -0.5)
    return {k: v.numpy().astype(np.float32) for k, v in w.items()}


def write_model_dir(case: Case, model_dir: str, weights: Dict[str, np.ndarray]):
    P.write_config_model_dir(model_dir, case.config, weights)


# ---------------------------------------------------------------------------------------------
# reference (float64, literal per-head, per-token loops)
# ---------------------------------------------------------------------------------------------

def silu_s(x: float) -> float:
    return x / (1.0 + math.exp(-x))


def linear(W, name, x, bias=True):
    y = x @ W[name + ".weight"].T
    if bias and name + ".bias" in W:
        y = y + W[name + ".bias"]
    return y


def loop_attention(p: Plan, W, a: str, h, rope_on=True) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    T, H, KV, d = h.shape[0], p.H, p.KV, p.d
    q = heads_of(h @ W[a + "q_proj.weight"].T, H, d)
    k = heads_of(h @ W[a + "k_proj.weight"].T, KV, d)
    v = heads_of(h @ W[a + "v_proj.weight"].T, KV, d)
    if p.qk_norm:
        q = loop_rms_norm(q, W[a + "q_layernorm.weight"], p.eps, p.norm_offset)
        k = loop_rms_norm(k, W[a + "k_layernorm.weight"], p.eps, p.norm_offset)
    if rope_on:
        inv = inv_freq_of(p.theta, d)
        q, k = loop_rope(q, inv, d, p.rope_pairs), loop_rope(k, inv, d, p.rope_pairs)
    group = H // KV
    scale = (p.scale_d or d) ** -0.5
    res, out = loop_causal_attention(q, k, v, scale, lambda hh: hh // group if p.gqa == "interleave" else hh % KV)
    merged = torch.stack([torch.cat([out[hh, t] for hh in range(H)]) for t in range(T)])  # (T, H*d)
    mix = merged @ W[a + "out_proj.weight"].T
    return mix, {"q": q, "k": k, "v": v, **res, "out": out}


def loop_causal_conv(u, cw, cb, shift=0, flip=False):
    """u (T, C), cw (C, K), cb (C,) or None -> conv (T, C): per token t,
    conv[t] = sum_k cw[:, k] * u[t - (K-1) + k (+ shift)] (+ cb), u = 0 outside 0 .. T-1."""
    T, K = u.shape[0], cw.shape[1]
    conv = torch.zeros_like(u)
    for t in range(T):
        for kk in range(K):
            src = t - (K - 1) + kk + shift
            if 0 <= src < T:
                conv[t] += cw[:, K - 1 - kk if flip else kk] * u[src]
        if cb is not None:
            conv[t] += cb
    return conv


def loop_conv(p: Plan, W, a: str, h) -> torch.Tensor:
    C = p.C
    bcx = linear(W, a + "in_proj", h, p.use_bias)                           # (T, 3C)
    parts = [bcx[:, :C], bcx[:, C:2 * C], bcx[:, 2 * C:]]
    if p.split == "BCx":
        B, Cg, x = parts
    else:  # "xBC"
        x, B, Cg = parts
    if p.swap_bc:
        B, Cg = Cg, B
    cw = W[a + "conv.weight"][:, 0, :]                                     # (C, K)
    cb = W.get(a + "conv.bias") if p.use_bias else None
    T = h.shape[0]
    if p.gating == "B_pre_C_post":
        u = torch.stack([B[t] * x[t] for t in range(T)])
        conv = loop_causal_conv(u, cw, cb, p.conv_shift, p.conv_flip)
        y = torch.stack([Cg[t] * conv[t] for t in range(T)])
    elif p.gating == "both_post":
        conv = loop_causal_conv(x, cw, cb, p.conv_shift, p.conv_flip)
        y = torch.stack([Cg[t] * B[t] * conv[t] for t in range(T)])
    elif p.gating == "both_pre":
        y = loop_causal_conv(torch.stack([Cg[t] * B[t] * x[t] for t in range(T)]), cw, cb,
                             p.conv_shift, p.conv_flip)
    else:  # "no_C"
        y = loop_causal_conv(torch.stack([B[t] * x[t] for t in range(T)]), cw, cb, p.conv_shift, p.conv_flip)
    return linear(W, a + "out_proj", y, p.use_bias)


def mlp_weights(p: Plan, W, a: str):
    """w1, w3 (ff, C), w2 (C, ff); with ff_read set (a misreading), the file's bytes re-read
    with the shapes that size implies (truncated, or zero-padded where the file runs out)."""
    w1, w3, w2 = (W[a + f"feed_forward.{n}.weight"] for n in ("w1", "w3", "w2"))
    if p.ff_read is None:
        if w1.shape[0] != p.ff or w2.shape[1] != p.ff:
            raise ValueError(f"{a}feed_forward: file has ff={w1.shape[0]}, config says {p.ff}")
        return w1, w3, w2
    n, C = p.ff_read, p.C

    def reread(w, shape):
        flat, want = w.reshape(-1), shape[0] * shape[1]
        flat = flat[:want] if flat.numel() >= want else torch.cat(
            [flat, torch.zeros(want - flat.numel(), dtype=flat.dtype)])
        return flat.reshape(shape)

    return reread(w1, (n, C)), reread(w3, (n, C)), reread(w2, (C, n))


def reference_plan(p: Plan, weights, toks: List[int]) -> Dict[str, torch.Tensor]:
    W = _f64(weights)
    res = {"tokens": torch.tensor(toks, dtype=torch.int32)}

    def norm(x, name):
        return loop_rms_norm(x, W[name], p.eps, p.norm_offset)

    x = torch.stack([W["model.embed_tokens.weight"][t] for t in toks])
    for l, kind in enumerate(p.kinds):
        a = f"model.layers.{l}."
        h = norm(x, a + "operator_norm.weight")
        if kind == FULL:
            mix, dump = loop_attention(p, W, a + "self_attn.", h, l not in p.rope_off)
            res.update({f"layers.{l}.{n}": t for n, t in dump.items()})
        else:
            mix = loop_conv(p, W, a + "conv.", h)
        x = x + mix
        u = norm(x, a + "ffn_norm.weight")
        w1, w3, w2 = mlp_weights(p, W, a)
        g = u @ w1.T
        act = torch.tensor([[silu_s(float(g[t, i])) for i in range(g.shape[1])]
                            for t in range(g.shape[0])], dtype=torch.float64)
        x = x + (act * (u @ w3.T)) @ w2.T
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    final = norm(x, "model.embedding_norm.weight") if p.final_norm else x
    res["logits"] = final @ head.T
    return res


def reference_plan_np(p: Plan, weights, toks) -> Dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in reference_plan(p, weights, toks).items()}


def reference(cfg, weights, toks) -> Dict[str, np.ndarray]:
    return reference_plan_np(make_plan(cfg), weights, toks)


# ---------------------------------------------------------------------------------------------
# second, vectorised implementation (selftest only)
# ---------------------------------------------------------------------------------------------

def _alt_rope(x, inv_freq):
    """Complex-number RoPE: (x1 + i x2) * e^{i pos w}, the halves as real / imaginary parts."""
    _, T, d = x.shape
    angle = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    z = torch.complex(x[..., :d // 2], x[..., d // 2:]) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1)


def alt_reference(p: Plan, weights, toks) -> Dict[str, np.ndarray]:
    W = _f64(weights)
    T = len(toks)
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": ids.to(torch.int32)}

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + p.eps) * w

    inv = inv_freq_of(p.theta, p.d)
    x = F.embedding(ids, W["model.embed_tokens.weight"])
    for l, kind in enumerate(p.kinds):
        a = f"model.layers.{l}."
        h = norm(x, W[a + "operator_norm.weight"])
        if kind == FULL:
            s = a + "self_attn."
            H, KV, d = p.H, p.KV, p.d
            q = norm(F.linear(h, W[s + "q_proj.weight"]).view(T, H, d), W[s + "q_layernorm.weight"]).transpose(0, 1)
            k = norm(F.linear(h, W[s + "k_proj.weight"]).view(T, KV, d), W[s + "k_layernorm.weight"]).transpose(0, 1)
            v = F.linear(h, W[s + "v_proj.weight"]).view(T, KV, d).transpose(0, 1)
            q, k = _alt_rope(q, inv), _alt_rope(k, inv)
            st = {"scores": torch.matmul(q, k.repeat_interleave(H // KV, dim=0).transpose(-1, -2))}
            st["scaled"] = st["scores"] * d ** -0.5
            st["masked"] = st["scaled"].masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
            st["probs"] = F.softmax(st["masked"], dim=-1)
            st["out"] = torch.matmul(st["probs"], v.repeat_interleave(H // KV, dim=0))
            res.update({f"layers.{l}.{n}": t for n, t in [("q", q), ("k", k), ("v", v)] + list(st.items())})
            mix = F.linear(st["out"].transpose(0, 1).reshape(T, H * d), W[s + "out_proj.weight"])
        else:
            s = a + "conv."
            B, Cg, xx = F.linear(h, W[s + "in_proj.weight"], W.get(s + "in_proj.bias")).T.chunk(3, dim=0)
            conv = F.conv1d((B * xx)[None], W[s + "conv.weight"], W.get(s + "conv.bias"),
                            padding=p.K - 1, groups=p.C)[0, :, :T]
            mix = F.linear((Cg * conv).T, W[s + "out_proj.weight"], W.get(s + "out_proj.bias"))
        x = x + mix
        u = norm(x, W[a + "ffn_norm.weight"])
        f = a + "feed_forward."
        x = x + F.linear(F.silu(F.linear(u, W[f + "w1.weight"])) * F.linear(u, W[f + "w3.weight"]),
                         W[f + "w2.weight"])
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    res["logits"] = F.linear(norm(x, W["model.embedding_norm.weight"]), head)
    return {k: v.numpy() for k, v in res.items()}


# ---------------------------------------------------------------------------------------------
# comparison and the CLI path
# ---------------------------------------------------------------------------------------------

def expected_metadata(cfg) -> Dict[str, str]:
    return {"block_size": str(int(cfg.get("max_position_embeddings", DEFAULTS["max_position_embeddings"]))),
            "dropped": "0"}


def _axes(name: str) -> str:
    last = name.split(".")[-1]
    if last in ("q", "k", "v", "out"):
        return " (head, t, dim)"
    if last in SQUARE:
        return " (head, t, s)"
    return " (t, vocab)" if name == "logits" else ""


def check_dump(case_name, path, expected, want_meta, report: Report, kinds: List[str]):
    """parity.py's rule, tensor by tensor, with the layer kind and the worst entry in each
    failing line; plus: any attention tensor (q, k, v, scores, scaled, masked, probs, out) or
    implicit/beta/decay/gate/capped in a conv layer, or implicit/beta/decay/gate/capped in an
    attention layer, is a failure."""

    def layer_of(name):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit() and int(parts[1]) < len(kinds):
            return int(parts[1]), parts[2]
        return None, None

    def tag(name):
        l, _ = layer_of(name)
        return "" if l is None else f" [{'attention' if kinds[l] == FULL else 'conv'} layer {l}]"

    def misplaced(name):
        l, what = layer_of(name)
        if l is not None and ((kinds[l] == CONV and what in ATTN + FOREIGN) or (kinds[l] == FULL and what in FOREIGN)):
            kind = "a conv layer, which has no attention" if kinds[l] == CONV else "an attention layer"
            return f"present in the dump of {kind} ({what})"
        return None

    P.check_dump(case_name, path, expected, want_meta, report, tag, _axes, misplaced)


def checker(kinds: List[str]):
    """check_dump for a model with these layer kinds, with parity.py's check signature."""
    return lambda name, path, expected, want_meta, report: check_dump(name, path, expected, want_meta,
                                                                        report, kinds)


def describe(case: Case) -> str:
    p = make_plan(case.config)
    kinds = "".join(A_ if k == FULL else C_ for k in p.kinds)
    return (f"== {case.name}: {case.config['model_type']}, T={case.n_tokens}, layers {kinds} "
            f"(C = conv, A = attention); C={p.C} H={p.H} KV={p.KV} d={p.d} K={p.K} ff={p.ff} "
            f"theta={p.theta:g} tie={p.tie} conv_bias={p.bias}")


# ---------------------------------------------------------------------------------------------
# selftest
# ---------------------------------------------------------------------------------------------

def sanity_checks(case: Case, plan: Plan, expected, weights) -> List[Tuple[str, bool, str]]:
    checks = []
    T = case.n_tokens
    got = "".join(A_ if k == FULL else C_ for k in plan.kinds)
    checks.append(("layer kinds as written by hand", got == case.kinds, got))
    checks.append(("ff size as written by hand and as in the file",
                   plan.ff == case.ff == weights["model.layers.0.feed_forward.w1.weight"].shape[0],
                   f"ff={plan.ff}"))
    checks.append(("head size, tie, RoPE base as written by hand",
                   (plan.d, plan.tie, plan.theta) == (case.d, case.tie, case.theta)
                   and (("lm_head.weight" in weights) != plan.tie),
                   f"d={plan.d} tie={plan.tie} theta={plan.theta:g}"))
    checks.append(("both kinds of layer present", CONV in plan.kinds and FULL in plan.kinds, ""))
    names_by_layer: Dict[int, set] = {}
    for k in expected:
        if k.startswith("layers."):
            names_by_layer.setdefault(int(k.split(".")[1]), set()).add(k.split(".")[2])
    for l, kind in enumerate(plan.kinds):
        g = lambda n: expected[f"layers.{l}.{n}"]
        if kind == CONV:
            checks.append((f"L{l} conv: no tensors in the dump", l not in names_by_layer, ""))
            continue
        H, KV, d = plan.H, plan.KV, plan.d
        shapes = (g("q").shape == (H, T, d) and g("k").shape == (KV, T, d) and g("v").shape == (KV, T, d)
                  and all(g(n).shape == (H, T, T) for n in SQUARE) and g("out").shape == (H, T, d))
        checks.append((f"L{l} attention: tensors and shapes", names_by_layer.get(l) == set(ATTN) and shapes,
                       f"H={H} KV={KV} T={T} d={d}"))
        checks += P.causal_attention_checks(l, g, T, H, KV, d, tile_differs=True)
        # QK-norm and RoPE: against the same model without RoPE in this layer
        bare = reference_plan_np(replace(plan, rope_off=(l,)), weights, case.tokens)
        a = f"model.layers.{l}.self_attn."
        ok = True
        for n, wn in (("q", "q_layernorm"), ("k", "k_layernorm")):
            un = bare[f"layers.{l}.{n}"] / weights[a + wn + ".weight"].astype(np.float64)
            ok = ok and np.allclose((un ** 2).mean(-1), 1.0, rtol=0, atol=1e-3)
        checks.append((f"L{l} q, k RMS-normalised per head (times w) before RoPE", bool(ok), ""))
        ok = all(P.rope_moved(expected[f"layers.{l}.{n}"], bare[f"layers.{l}.{n}"], d) for n in ("q", "k"))
        checks.append((f"L{l} RoPE: pairs (i, i+{d // 2}) keep their norms, position 0 fixed", bool(ok), ""))
    # the conv kernel convention: an impulse at s shows on t = s .. s+K-1 as w[K-1-(t-s)]
    K, s0 = plan.K, 2
    cw = torch.as_tensor(weights[f"model.layers.{plan.kinds.index(CONV)}.conv.conv.weight"][:, 0, :],
                         dtype=torch.float64)
    imp = torch.zeros(T, plan.C, dtype=torch.float64)
    imp[s0] = 1.0
    resp = loop_causal_conv(imp, cw, None)
    want = torch.zeros_like(resp)
    for t in range(s0, min(T, s0 + K)):
        want[t] = cw[:, K - 1 - (t - s0)]
    tv = F.conv1d(imp.T[None], cw[:, None, :], padding=K - 1, groups=plan.C)[0, :, :T].T
    checks.append((f"conv impulse response on taps t .. t+{K - 1}, kernel read backwards (== F.conv1d)",
                   bool(torch.equal(resp, want)) and float((tv - want).abs().max()) < 1e-15, ""))
    # the whole model is causal: the first T-1 tokens alone give the first T-1 rows
    short = reference_plan_np(plan, weights, case.tokens[:-1])
    err = 0.0
    for k, v in short.items():
        full = expected[k]
        if k == "logits":
            full = full[:T - 1]
        elif k != "tokens":
            full = full[:, :T - 1, :T - 1] if k.split(".")[-1] in SQUARE else full[:, :T - 1]
        if k == "tokens":
            full = full[:T - 1]
        fin = np.isfinite(v)
        same = np.array_equal(np.isfinite(full), fin)
        err = max(err, float(np.abs(v[fin] - full[fin]).max()) if same else float("inf"))
    checks.append(("causal: the first T-1 tokens reproduce the first T-1 rows", err < 1e-12, f"max err {err:.1e}"))
    logit_std = float(expected["logits"].std())
    checks.append(("logits not degenerate", logit_std > 0.05, f"std {logit_std:.3f}"))
    return checks


def variants(case: Case, plan: Plan) -> List[Tuple[str, Plan]]:
    """Plausible misreadings of the architecture; each must fail the comparison."""
    cfg = case.config
    K = plan.K
    out = [
        ("conv taps one step late (t-K .. t-1)", replace(plan, conv_shift=-1)),
        ("conv taps one step early (t-K+2 .. t+1, not causal)", replace(plan, conv_shift=1)),
        ("conv centred (padding 'same', not causal)", replace(plan, conv_shift=(K - 1) - (K - 1) // 2)),
        ("conv kernel flipped", replace(plan, conv_flip=True)),
        ("B and C gates swapped", replace(plan, swap_bc=True)),
        ("in_proj split read as [x | B | C]", replace(plan, split="xBC")),
        ("B gate applied after the convolution (C * B * conv(x))", replace(plan, gating="both_post")),
        ("C gate applied before the convolution (conv(C * B * x))", replace(plan, gating="both_pre")),
        ("C gate missing (conv(B * x))", replace(plan, gating="no_C")),
        ("QK-norm missing", replace(plan, qk_norm=False)),
        ("RMSNorm weights read as (1 + w)", replace(plan, norm_offset=1.0)),
        ("RoPE on adjacent pairs (2i, 2i+1)", replace(plan, rope_pairs="adjacent")),
        ("final norm (embedding_norm) missing", replace(plan, final_norm=False)),
    ]
    if 1 < plan.KV < plan.H:
        out.append(("GQA as h % KV instead of h // (H/KV)", replace(plan, gqa="tile")))
    if cfg.get("head_dim") and cfg["head_dim"] != plan.C // plan.H:
        out.append(("scale from hidden/heads instead of head_dim", replace(plan, scale_d=plan.C // plan.H)))
    if plan.bias:
        out.append(("conv_bias ignored", replace(plan, use_bias=False)))
    if not plan.tie:
        out.append(("embeddings read as tied", replace(plan, tie=True)))
    if "rope_parameters" in cfg and "rope_theta" not in cfg:
        out.append(("rope_parameters ignored (default base 1e6)", replace(plan, theta=DEFAULTS["rope_theta"])))
    if "rope_parameters" not in cfg and "rope_theta" not in cfg:
        out.append(("RoPE base default read as 10000", replace(plan, theta=10000.0)))
    # feed-forward size: a loader trusting a misread size re-reads the file's bytes
    ffv = [("ff rule ignored", ff_size(cfg, auto=False)),
           ("ff rule applied although switched off", ff_size(cfg, auto=True)),
           ("ff multiplier ignored", ff_size(cfg, use_multiplier=False)),
           ("ff rounded to block_multiple_of without a multiplier", ff_size(cfg, round_always=True)),
           ("block_ff_dim ignored", ff_size(cfg, read_block_ff_dim=False))]
    seen = {plan.ff}
    for desc, n in ffv:
        if n not in seen:
            seen.add(n)
            out.append((f"{desc} (ff {n} instead of {plan.ff})", replace(plan, ff_read=n)))
    return out


def negative_checks(case, plan, weights, dump, expected, want_meta, workdir):
    T = case.n_tokens
    mut = P.Mutations(dump, expected)
    copy, mutated = mut.copy, mut.bump
    cv = plan.kinds.index(CONV)
    fa = plan.kinds.index(FULL)
    Cn, An = f"layers.{cv}.", f"layers.{fa}."
    last = T - 1
    scen = [("logits +2e-4 rel", mutated("logits", (last, 0), 2e-4), ["logits"]),
            ("logits +2e-6 rel (within tolerance)", mutated("logits", (last, 0), 2e-6), []),
            ("probs +1e-3", mutated(An + "probs", (0, last, 0), 1e-3), [An + "probs"]),
            ("out +1e-3 rel", mutated(An + "out", (0, last, 0), 1e-3), [An + "out"]),
            ("k +1e-3 rel", mutated(An + "k", (plan.KV - 1, last, 0), 1e-3), [An + "k"])]
    d = copy()
    d[An + "masked"][0, 0, last] = np.float32(-1e9)
    scen.append(("-inf -> -1e9 in masked", d, [An + "masked"]))
    for n in ("q", "scores", "out"):
        d = copy()
        d.pop(An + n)
        scen.append((f"missing {An + n}", d, [An + n]))
    shapes = {"q": (plan.H, T, plan.d), "k": (plan.KV, T, plan.d), "v": (plan.KV, T, plan.d),
              "out": (plan.H, T, plan.d), "implicit": (plan.H, T, T), "beta": (plan.H, T),
              "decay": (plan.H, T), "gate": (plan.H, T, plan.d), "capped": (plan.H, T, T)}
    for n in ATTN + ("implicit",):
        d = copy()
        d[Cn + n] = np.zeros(shapes.get(n, (plan.H, T, T)), dtype=np.float32)
        scen.append((f"{n} present in conv layer {cv}", d, [Cn + n]))
    for n in ("implicit", "gate", "capped"):
        d = copy()
        d[An + n] = np.zeros(shapes[n], dtype=np.float32)
        scen.append((f"{n} present in attention layer {fa}", d, [An + n]))
    d = copy()
    d[Cn + "conv_state"] = np.zeros((plan.C, plan.K), dtype=np.float32)
    d["layers.99.q"] = np.zeros((1,), dtype=np.float32)
    scen.append(("unknown extra tensors are only reported", d, []))
    misreadings = ((desc, to_dump(reference_plan_np(vplan, weights, case.tokens)))
                   for desc, vplan in variants(case, plan))
    return P.check_negatives(case.name, workdir, dump, expected, want_meta, checker(plan.kinds), scen, misreadings,
                             [("block_size not the model context", {"block_size": "2048"})])


def selftest_parts(case, weights, expected, want_meta, workdir):
    plan = make_plan(case.config)
    return (alt_reference(plan, weights, case.tokens), sanity_checks(case, plan, expected, weights),
            lambda dump: negative_checks(case, plan, weights, dump, expected, want_meta, workdir))


SCRIPT = P.ConfigScript(os.path.abspath(__file__), "attnviz-lfm2-parity-", build_weights, write_model_dir,
                        P.read_config_model_dir, reference, expected_metadata, describe,
                        lambda case: checker(make_plan(case.config).kinds), selftest_parts)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def main(argv: List[str]) -> int:
    return P.config_main(SCRIPT, argv, __doc__, CASES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
