#!/usr/bin/env python3
"""Numerical parity of the attnviz dump for Google's Gemma 4 text model (four small random
models, seeded, float32 weights; one with the 26B-A4B mixture of experts): C++ engine vs. a float64
torch reference written from the model's own definition, transformers' models/gemma4 (modeling_gemma4.py,
configuration_gemma4.py) and _compute_proportional_rope_parameters in modeling_rope_utils.py.

Usage
-----
    /usr/bin/python3 tests/reference/gemma4_parity.py --cli PATH/attnviz-cli --workdir DIR [--cases a,b]
    /usr/bin/python3 tests/reference/gemma4_parity.py --selftest [--workdir DIR]
Options as parity.py's: --cases, --list, --keep, --timeout SECONDS (per CLI call), --backend cpu|gpu.

Architecture (model_type "gemma4_text", Gemma4ForCausalLM, tensors under model.; or "gemma4" with the
text config in text_config and tensors under model.language_model., vision tensors ignored; tied
embeddings, no lm_head). RMSNorm(x, w) = x·(mean x² + eps)^-½·w, w as stored (no 1 + w).
  types      layer_types; the last layer is forced to "full_attention". Full layers: head size
             global_head_dim, KV heads num_global_key_value_heads when attention_k_eq_v (else
             num_key_value_heads), no v_proj when attention_k_eq_v. Sliding layers: head_dim,
             num_key_value_heads, window W = sliding_window: query i sees keys i − W < j ≤ i.
  embedding  e = embed_tokens[id]·√C (exact float). PLE when hidden_size_per_layer_input P > 0:
             ple[l] = (RMSNorm((e·per_layer_model_projectionᵀ·C^-½)[l], per_layer_projection_norm)
             + embed_tokens_per_layer[id][l]·√P)·2^-½ (the table row split into L slices of P).
  layer      h = RMSNorm(x, input_layernorm); q = RoPE(RMSNorm_head(q_proj h, q_norm)); on layers
             with their own K/V: kraw = k_proj h, vraw = v_proj h (or kraw itself when there is no
             v_proj), k = RoPE(RMSNorm_head(kraw, k_norm)), v = RMSNorm_head(vraw) without weight.
             The last num_kv_shared_layers layers compute no K/V: they use the k, v of the last
             non-shared layer of the same type (their k_proj/v_proj/k_norm are in the file, unused),
             and their MLP is 2·intermediate_size wide when use_double_wide_mlp. Attention scale 1.0
             (scores = q·kᵀ), GQA: head h reads KV head h // (H/KV). x += RMSNorm(o_proj(out),
             post_attention_layernorm); x += RMSNorm(down(gelu_tanh(gate h2)·up h2),
             post_feedforward_layernorm) with h2 = RMSNorm(x, pre_feedforward_layernorm) (with MoE, below,
             the dense branch's output first goes through post_feedforward_layernorm_1); with PLE
             x += RMSNorm(per_layer_projection(gelu_tanh(per_layer_input_gate x)·ple[l]),
             post_per_layer_input_norm) (the gate reads the raw stream); then x *= layer_scalar.
  RoPE       rotate-half over the whole head, pairs (i, i + d/2), angle t·inv_freq[i]. Sliding
             ("default"): inv_freq[i] = θ^(-2i/d). Full ("proportional", partial_rotary_factor p):
             inv_freq[i] = θ^(-2i/d) for i < n = int(p·d // 2), 0 for the others (they pass through).
  MoE        enable_moe_block (num_experts E, top_k_experts K, moe_intermediate_size I_e; every
             layer; the dense MLP keeps intermediate_size): r = the stream after the attention add.
             Router (HF Gemma4TextRouter): z = RMSNorm_noweight(r)·router.scale·C^-½, logits =
             z·router.proj.weightᵀ (E), probs = softmax over all E, (w, e) = top-K of probs, w ← w/Σw,
             w ← w·router.per_expert_scale[e]. Experts (Gemma4TextExperts): h2e = RMSNorm(r,
             pre_feedforward_layernorm_2); gate, up = the first and last I_e rows of
             experts.gate_up_proj[e] (E, 2·I_e, C; 3-D parameter, no .weight) times h2e;
             y = experts.down_proj[e] (E, C, I_e)·(gelu_tanh(gate)·up). x = r + RMSNorm(RMSNorm(mlp,
             post_feedforward_layernorm_1) + RMSNorm(Σ w_k·y_k, post_feedforward_layernorm_2),
             post_feedforward_layernorm).
  logits     30·tanh(RMSNorm(x, norm)·embed_tokensᵀ / 30) (final_logit_softcapping).

The dump must hold, per layer l: q (H,T,d_l) after q_norm and RoPE, k and v (KV_l,T,d_l) as used
(a KV-shared layer: its source's), scores (H,T,T) = q·kᵀ, scaled = scores·1.0, masked (−inf where
masked), probs, out (H,T,d_l) = probs·v; with MoE also router (T,E) = the router logits before
the softmax, experts (T,K) int32 = the chosen experts by descending final weight (compared exactly;
the case has no top-K tie within 1e-4), expert_weights (T,K) = their final weights w in that order
(HF's topk order is by probability, before per_expert_scale); tokens (T) int32, logits (T,V);
metadata model, backend, block_size = max_position_embeddings, dropped = 0. Rule: parity.py's
(max|ours − ref| / max|ref| ≤ 1e-4, identical −inf pattern, exact shapes, F32/I32). Each misreading
in MISREADINGS must fail it.

--selftest (no CLI): model dirs round-trip; hand-written per-layer plans (window, d, KV, K/V source,
MLP width, MoE shape) match the config parsing; a second formulation (complex RoPE, band masks,
repeat_interleave GQA, einsum, every expert on every token weighted by a dense (T,E) matrix) agrees
with the literal per-head (per-token, per-expert) loop to 1e-9; the reference as a float32 dump
passes; MoE: no near-tie in the routing, every expert used, per_expert_scale reorders some pair;
each misreading moves some tensor by > 10× the tolerance; the CLI path runs end to end with a fake
CLI (this script, --fake-cli); a failing CLI, one writing no dump and a missing one each give one
FAIL line per case.
"""
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity as P  # noqa: E402

torch.set_default_dtype(torch.float64)
SL, FULL = "sliding_attention", "full_attention"
ROPE = {SL: {"rope_type": "default", "rope_theta": 10000.0},
        FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def text_cfg(L, types, C=32, I=24, H=2, KV=1, W=3, **extra):
    c = {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "vocab_size": 61,
         "hidden_size": C, "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": H,
         "num_key_value_heads": KV, "head_dim": 8, "global_head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
         "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
         "rope_parameters": ROPE, "attention_bias": False, "sliding_window": W, "layer_types": types,
         "final_logit_softcapping": 30.0, "vocab_size_per_layer_input": 61, "hidden_size_per_layer_input": 0,
         "attention_k_eq_v": False, "num_kv_shared_layers": 0, "enable_moe_block": False,
         "use_double_wide_mlp": False, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    c.update(extra)
    return c


# name -> (config.json, tokens, seed, hand-written per-layer expectation: window (None = full), d, KV,
# K/V source layer, MLP width)
CASES = {
    "gemma4_text_e": (text_cfg(5, [SL, SL, FULL, SL, FULL], num_kv_shared_layers=2, use_double_wide_mlp=True,
                               hidden_size_per_layer_input=8),
                      [2, 17, 42, 5, 17, 42, 9, 60, 1, 17, 42, 5, 33], 11,
                      dict(window=[3, 3, None, 3, None], d=[8, 8, 16, 8, 16], kv=[1] * 5, src=[0, 1, 2, 1, 2],
                           inter=[24, 24, 24, 48, 48])),
    "gemma4_keqv": (text_cfg(3, [SL, SL, SL], C=48, I=40, H=4, KV=2, W=4, attention_k_eq_v=True,
                             num_global_key_value_heads=1),
                    [5, 3, 59, 12, 5, 3, 59, 40, 7, 0, 5, 3, 22, 31], 22,
                    dict(window=[4, 4, None], d=[8, 8, 16], kv=[2, 2, 1], src=[0, 1, 2], inter=[40] * 3)),
    "gemma4_nested": ({"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
                       "text_config": text_cfg(2, [SL, FULL], hidden_size_per_layer_input=4),
                       "vision_config": {"model_type": "gemma4_vision", "hidden_size": 8},
                       "tie_word_embeddings": True, "image_token_id": 58},
                      [9, 4, 44, 18, 9, 4, 44, 2, 51, 9, 4, 27], 33,
                      dict(window=[3, None], d=[8, 16], kv=[1, 1], src=[0, 1], inter=[24, 24])),
    # 26B-A4B-style: dense MLP and a mixture of experts side by side on every layer
    "gemma4_moe": (text_cfg(3, [SL, SL, FULL], attention_k_eq_v=True, num_global_key_value_heads=1,
                            enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=16),
                   [2, 17, 42, 5, 17, 42, 9, 60, 1, 17, 42, 5, 33, 8], 44,
                   dict(window=[3, 3, None], d=[8, 8, 16], kv=[1] * 3, src=[0, 1, 2], inter=[24] * 3,
                        moe=[(4, 2, 16)] * 3)),
}
# misreading -> the cases it applies to (where the model has the feature it misreads)
MISREADINGS = {
    "scale 1/sqrt(d)": "all", "(1+w) norms": "all", "RoPE pairs (i, i+n) in the first 2n dims": "all",
    "proportional inv_freq over 2n": "all", "no V-norm": "all", "window off by one": "all", "no soft-cap": "all",
    "layer_scalar on the branches only": "all",
    "V after k_norm (k_eq_v)": ["gemma4_keqv"], "last layer not forced to full": ["gemma4_keqv"],
    "KV source: the immediately previous layer": ["gemma4_text_e"],
    "KV source: the first layer of the type": ["gemma4_text_e"],
    "KV-shared layers compute their own K/V": ["gemma4_text_e"],
    "PLE without 2^-1/2": ["gemma4_text_e", "gemma4_nested"],
    "PLE gate on the normed stream": ["gemma4_text_e", "gemma4_nested"],
    "router on the normed h2": ["gemma4_moe"], "no renormalisation of the top-K weights": ["gemma4_moe"],
    "per_expert_scale missing": ["gemma4_moe"], "gate/up interleaved (even/odd rows)": ["gemma4_moe"],
    "m1 + m2 without their own post norms": ["gemma4_moe"],
}


def text_of(cfg):
    return cfg["text_config"] if cfg["model_type"] == "gemma4" else cfg


def prefix_of(cfg):  # where the text model's tensors are
    return "model.language_model." if cfg["model_type"] == "gemma4" else "model."


def is_int(name):  # the dump's int32 tensors
    return name == "tokens" or name.endswith(".experts")


def moe_shape(tc):
    """-> (experts E, chosen per token K, expert width I_e), or None without enable_moe_block."""
    return (tc["num_experts"], tc["top_k_experts"], tc["moe_intermediate_size"]) if tc.get("enable_moe_block") \
        else None


def layer_types(tc):
    return list(tc["layer_types"][:-1]) + [FULL]


def geometry(tc, types, l):
    """Layer l -> (head size, KV heads, has v_proj, K/V source layer, MLP width)."""
    full, L = types[l] == FULL, tc["num_hidden_layers"]
    d = tc["global_head_dim"] if full and tc.get("global_head_dim") else tc["head_dim"]
    keqv = full and tc.get("attention_k_eq_v", False)
    kv = tc.get("num_global_key_value_heads") if keqv else None
    kv = kv or tc["num_key_value_heads"]
    first = L - tc.get("num_kv_shared_layers", 0)
    shared = l >= first and first < L
    src = max(j for j in range(first) if types[j] == types[l]) if shared else l
    wide = 2 if shared and tc.get("use_double_wide_mlp") else 1
    return d, kv, not keqv, src, tc["intermediate_size"] * wide


def build_weights(cfg, seed):
    """On-disk tensors (float32), under the file's own names."""
    tc, pre = text_of(cfg), prefix_of(cfg)
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, sd=1.0, mean=0.0: (torch.randn(*s, generator=g, dtype=torch.float32) * sd + mean)  # noqa: E731
    V, C, H, L, Pl = (tc[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                                      "hidden_size_per_layer_input"))
    types = layer_types(tc)
    w = {"embed_tokens.weight": r(V, C, sd=2.0), "norm.weight": r(C, sd=0.2, mean=1.0)}  # logits beyond the cap
    if Pl:
        w["embed_tokens_per_layer.weight"] = r(tc["vocab_size_per_layer_input"], L * Pl)
        w["per_layer_model_projection.weight"] = r(L * Pl, C, sd=C ** -0.5)
        w["per_layer_projection_norm.weight"] = r(Pl, sd=0.3, mean=1.0)
    for l in range(L):
        p = f"layers.{l}."
        d, kv, has_v, _, inter = geometry(tc, types, l)
        for n, mean in (("input_layernorm", 1.0), ("post_attention_layernorm", 2.0),
                        ("pre_feedforward_layernorm", 1.0), ("post_feedforward_layernorm", 2.0)):
            w[p + n + ".weight"] = r(C, sd=0.3, mean=mean)
        for n, rows in (("q", H), ("k", kv), ("v", kv if has_v else 0)):  # k_proj also on KV-shared layers
            if rows:
                w[p + f"self_attn.{n}_proj.weight"] = r(rows * d, C, sd=C ** -0.5)
        for n in ("q_norm", "k_norm"):
            w[p + f"self_attn.{n}.weight"] = r(d, sd=0.3, mean=1.0)
        w[p + "self_attn.o_proj.weight"] = r(C, H * d, sd=(H * d) ** -0.5)
        for n in ("gate", "up"):
            w[p + f"mlp.{n}_proj.weight"] = r(inter, C, sd=C ** -0.5)
        w[p + "mlp.down_proj.weight"] = r(C, inter, sd=inter ** -0.5)
        if Pl:
            w[p + "per_layer_input_gate.weight"] = r(Pl, C, sd=0.1 * C ** -0.5)
            # small: the branch is ~1e-3 before post_per_layer_input_norm, so the norm's eps keeps the
            # scale of ple visible (a pure RMSNorm would hide the 2^-1/2)
            w[p + "per_layer_projection.weight"] = r(C, Pl, sd=2e-4)
            w[p + "post_per_layer_input_norm.weight"] = r(C, sd=0.3, mean=2.0)
        if moe_shape(tc):
            E, _, Ie = moe_shape(tc)
            w[p + "router.proj.weight"] = r(E, C, sd=1.5)  # logits of order 1: routing varies by token
            w[p + "router.scale"] = r(C, sd=0.3, mean=1.0)
            # positive, 0.5..1.5: it can reorder the two chosen experts
            w[p + "router.per_expert_scale"] = 0.5 + torch.rand(E, generator=g, dtype=torch.float32)
            w[p + "experts.gate_up_proj"] = r(E, 2 * Ie, C, sd=C ** -0.5)  # 3-D parameters, no .weight
            w[p + "experts.down_proj"] = r(E, C, Ie, sd=Ie ** -0.5)
            for n, mean in (("pre_feedforward_layernorm_2", 1.0), ("post_feedforward_layernorm_1", 1.0),
                            ("post_feedforward_layernorm_2", 1.5)):
                w[p + n + ".weight"] = r(C, sd=0.3, mean=mean)
        scalar = 0.5 + torch.rand(1, generator=g, dtype=torch.float32)
        # Checkpoints may leave a layer's scalar out (it is then 1): here the global layers of
        # the attention_k_eq_v models have none.
        if not (tc.get("attention_k_eq_v") and types[l] == FULL):
            w[p + "layer_scalar"] = scalar
    w = {pre + k: v for k, v in w.items()}
    if cfg["model_type"] == "gemma4":  # multimodal parts: present, to be ignored
        w["model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"] = r(8, 8)
        w["model.embed_vision.embedding_projection.weight"] = r(C, 8)
    return w


def rms(x, w, eps, plus_one=False):
    y = x * ((x * x).mean(-1, keepdim=True) + eps) ** -0.5
    return y if w is None else y * (1 + w if plus_one else w)


def rope_plan(tc, kind, d, m):
    """-> [(dim a, dim b, inv_freq)] for a head of size d under rope_parameters[kind]."""
    rp = tc["rope_parameters"][kind]
    theta, half = rp["rope_theta"], d // 2
    if rp["rope_type"] == "default":
        return [(i, i + half, theta ** (-2 * i / d)) for i in range(half)]
    n = int(rp.get("partial_rotary_factor", 1.0) * d // 2)
    f = rp.get("factor", 1.0)
    if "RoPE pairs (i, i+n) in the first 2n dims" in m:
        return [(i, i + n, theta ** (-2 * i / d) / f) for i in range(n)]
    over = 2 * n if "proportional inv_freq over 2n" in m else d
    return [(i, i + half, theta ** (-2 * i / over) / f if i < n else 0.0) for i in range(half)]


def rope(x, plan):
    """x (N,T,d): position t turns dims (a, b) by t·f; dims in no pair pass through."""
    out, t = x.clone(), torch.arange(x.shape[1], dtype=torch.float64)
    for a, b, f in plan:
        c, s = torch.cos(t * f), torch.sin(t * f)
        out[..., a], out[..., b] = x[..., a] * c - x[..., b] * s, x[..., b] * c + x[..., a] * s
    return out


def mixture(r, h2, W, p, tc, m, norm):
    """MoE branch of layer prefix p, literal per token and expert -> (Σ w_k·y_k before its post norm,
    {"router": logits (T,E), "experts": (T,K) int32 by descending final weight, "expert_weights": (T,K)})."""
    (E, K, Ie), eps, T = moe_shape(tc), tc["rms_norm_eps"], r.shape[0]
    src = h2 if "router on the normed h2" in m else r
    z = rms(src, None, eps) * W[p + "router.scale"] * tc["hidden_size"] ** -0.5
    logits = z @ W[p + "router.proj.weight"].T
    probs = torch.softmax(logits, -1)
    top_w, top_e = torch.topk(probs, K, -1)
    if "no renormalisation of the top-K weights" not in m:
        top_w = top_w / top_w.sum(-1, keepdim=True)
    if "per_expert_scale missing" not in m:
        top_w = top_w * W[p + "router.per_expert_scale"][top_e]
    order = torch.argsort(top_w, -1, descending=True)
    top_w, top_e = top_w.gather(-1, order), top_e.gather(-1, order)
    h2e = norm(r, p + "pre_feedforward_layernorm_2")
    moe = torch.zeros_like(r)
    for t in range(T):
        for k in range(K):
            e = int(top_e[t, k])
            gu = W[p + "experts.gate_up_proj"][e] @ h2e[t]  # (2·Ie)
            gate, up = (gu[0::2], gu[1::2]) if "gate/up interleaved (even/odd rows)" in m else (gu[:Ie], gu[Ie:])
            moe[t] += top_w[t, k] * (W[p + "experts.down_proj"][e] @ (P.gelu_tanh(gate) * up))
    return moe, {"router": logits, "experts": top_e.to(torch.int32), "expert_weights": top_w}


def reference(cfg, w, toks, m=frozenset()):
    """Literal float64 forward -> expected dump (numpy); m: names of misreadings to apply (MISREADINGS)."""
    tc, pre = text_of(cfg), prefix_of(cfg)
    W = {k[len(pre):]: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in w.items() if k.startswith(pre)}
    V, C, H, L, Pl, eps = (tc[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                                           "hidden_size_per_layer_input", "rms_norm_eps"))
    T, ids, one = len(toks), torch.tensor(toks), "(1+w) norms" in m
    norm = lambda x, n: rms(x, W[n + ".weight"], eps, one)  # noqa: E731
    types = layer_types(tc)
    seen = list(tc["layer_types"]) if "last layer not forced to full" in m else types  # mask and RoPE only
    out = {"tokens": torch.tensor(toks, dtype=torch.int32)}
    e = W["embed_tokens.weight"][ids] * math.sqrt(C)
    x = e
    if Pl:
        tok = (W["embed_tokens_per_layer.weight"][ids] * math.sqrt(Pl)).reshape(T, L, Pl)
        proj = norm((e @ W["per_layer_model_projection.weight"].T * C ** -0.5).reshape(T, L, Pl),
                    "per_layer_projection_norm")
        ple = (proj + tok) * (1.0 if "PLE without 2^-1/2" in m else 2 ** -0.5)
    kvs = {}
    for l in range(L):
        p = f"layers.{l}."
        d, KV, has_v, src, _ = geometry(tc, types, l)
        plan = rope_plan(tc, seen[l], d, m)
        heads = lambda y, n: y.reshape(T, n, d).transpose(0, 1)  # noqa: E731
        x_in = x
        h = norm(x, p + "input_layernorm")
        q = rope(norm(heads(h @ W[p + "self_attn.q_proj.weight"].T, H), p + "self_attn.q_norm"), plan)
        if src != l and "KV-shared layers compute their own K/V" not in m:
            if "KV source: the immediately previous layer" in m:
                src = l - 1
            elif "KV source: the first layer of the type" in m:
                src = min(j for j in range(L) if types[j] == types[l])
            k, v = kvs[src]
            if k.shape[-1] != d:  # the misread source has another head size: only its k, v to show
                out.update({f"layers.{l}.k": k, f"layers.{l}.v": v})
                return {k: v.numpy() for k, v in out.items()}
        else:
            kraw = heads(h @ W[p + "self_attn.k_proj.weight"].T, KV)
            vraw = heads(h @ W[p + "self_attn.v_proj.weight"].T, KV) if has_v else kraw
            if not has_v and "V after k_norm (k_eq_v)" in m:
                vraw = norm(kraw, p + "self_attn.k_norm")
            k = rope(norm(kraw, p + "self_attn.k_norm"), plan)
            v = vraw if "no V-norm" in m else rms(vraw, None, eps)
        kvs[l] = (k, v)
        KV = k.shape[0]
        win = tc["sliding_window"] + ("window off by one" in m)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        masked_out = (j > i) | ((j <= i - win) if seen[l] == SL else torch.zeros(T, T, dtype=torch.bool))
        scale = d ** -0.5 if "scale 1/sqrt(d)" in m else 1.0
        res = {n: [] for n in ("scores", "scaled", "masked", "probs", "out")}
        for hh in range(H):  # literal per-head loop
            kvh = hh // (H // KV)
            scores = q[hh] @ k[kvh].T
            scaled = scores * scale
            masked = scaled.masked_fill(masked_out, float("-inf"))
            ex = torch.exp(masked - masked.max(-1, keepdim=True).values)
            probs = ex / ex.sum(-1, keepdim=True)
            for n, val in (("scores", scores), ("scaled", scaled), ("masked", masked), ("probs", probs),
                           ("out", probs @ v[kvh])):
                res[n].append(val)
        res = {n: torch.stack(vals) for n, vals in res.items()}
        out.update({f"layers.{l}.{n}": t for n, t in [("q", q), ("k", k), ("v", v)] + list(res.items())})
        a = res["out"].transpose(0, 1).reshape(T, H * d) @ W[p + "self_attn.o_proj.weight"].T
        x = x + norm(a, p + "post_attention_layernorm")
        h2 = norm(x, p + "pre_feedforward_layernorm")
        mlp = (P.gelu_tanh(h2 @ W[p + "mlp.gate_proj.weight"].T) * (h2 @ W[p + "mlp.up_proj.weight"].T)) \
            @ W[p + "mlp.down_proj.weight"].T
        if moe_shape(tc):
            moe, routing = mixture(x, h2, W, p, tc, m, norm)
            out.update({p + n: t for n, t in routing.items()})
            mlp = mlp + moe if "m1 + m2 without their own post norms" in m else \
                norm(mlp, p + "post_feedforward_layernorm_1") + norm(moe, p + "post_feedforward_layernorm_2")
        x = x + norm(mlp, p + "post_feedforward_layernorm")
        if Pl:
            gin = rms(x, None, eps) if "PLE gate on the normed stream" in m else x
            y = P.gelu_tanh(gin @ W[p + "per_layer_input_gate.weight"].T) * ple[:, l]
            y = y @ W[p + "per_layer_projection.weight"].T
            x = x + norm(y, p + "post_per_layer_input_norm")
        s = W.get(p + "layer_scalar", 1.0)  # absent: 1
        x = x_in + s * (x - x_in) if "layer_scalar on the branches only" in m else x * s
    logits = norm(x, "norm") @ W["embed_tokens.weight"].T
    cap = tc.get("final_logit_softcapping")
    out["logits"] = logits if not cap or "no soft-cap" in m else cap * torch.tanh(logits / cap)
    return {k: v.numpy() for k, v in out.items()}


def alternative(cfg, w, toks):
    """Second formulation (selftest only): complex-number RoPE, band masks, repeat_interleave GQA,
    einsum, torch.softmax; own bookkeeping of layer kinds and K/V sources."""
    tc = text_of(cfg)
    pre = "model.language_model." if "text_config" in cfg else "model."
    W = {k[len(pre):]: torch.tensor(np.asarray(v), dtype=torch.float64) for k, v in w.items() if k.startswith(pre)}
    V, C, H, L, Pl, eps = (tc[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                                           "hidden_size_per_layer_input", "rms_norm_eps"))
    T, ids = len(toks), torch.tensor(toks)
    gl = lambda z: 0.5 * z * (1 + torch.tanh((2 / math.pi) ** 0.5 * (z + 0.044715 * z ** 3)))  # noqa: E731

    def nrm(x, n=None):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 if n is None else W[n])
    kinds = ["full" if (l == L - 1 or t == FULL) else "local" for l, t in enumerate(tc["layer_types"])]
    n_own = L - tc["num_kv_shared_layers"]
    last = {kinds[l]: l for l in range(n_own)}  # the last non-shared layer of each kind
    x = W["embed_tokens.weight"][ids] * C ** 0.5
    if Pl:
        ple = (nrm(torch.einsum("tc,pc->tp", x, W["per_layer_model_projection.weight"]).view(T, L, Pl) / C ** 0.5,
                   "per_layer_projection_norm.weight")
               + W["embed_tokens_per_layer.weight"][ids].view(T, L, Pl) * Pl ** 0.5) / 2 ** 0.5
    pos = torch.arange(T, dtype=torch.float64)
    out, cache = {"tokens": torch.tensor(toks, dtype=torch.int32)}, {}
    for l in range(L):
        p = f"layers.{l}."
        full = kinds[l] == "full"
        d = tc["global_head_dim"] if full else tc["head_dim"]
        rp = tc["rope_parameters"][FULL if full else SL]
        idx = torch.arange(d // 2, dtype=torch.float64)
        inv = rp["rope_theta"] ** (-2 * idx / d)
        if rp["rope_type"] == "proportional":
            inv = torch.where(idx < int(rp["partial_rotary_factor"] * d) // 2, inv, torch.zeros_like(inv))
        rot = torch.polar(torch.ones(T, d // 2), pos[:, None] * inv[None, :])

        def rope(t):
            z = torch.complex(t[..., : d // 2], t[..., d // 2:]) * rot[:, None, :]
            return torch.cat([z.real, z.imag], -1)
        h = nrm(x, p + "input_layernorm.weight")
        q = rope(nrm(torch.einsum("tc,oc->to", h, W[p + "self_attn.q_proj.weight"]).view(T, H, d),
                     p + "self_attn.q_norm.weight")).permute(1, 0, 2)
        if l >= n_own:
            k, v = cache[last[kinds[l]]]
        else:
            kp = torch.einsum("tc,oc->to", h, W[p + "self_attn.k_proj.weight"]).view(T, -1, d)
            vw = W.get(p + "self_attn.v_proj.weight")
            vp = kp if vw is None else torch.einsum("tc,oc->to", h, vw).view(T, -1, d)
            k = rope(nrm(kp, p + "self_attn.k_norm.weight")).permute(1, 0, 2)
            v = nrm(vp).permute(1, 0, 2)
            cache[l] = (k, v)
        g = H // k.shape[0]
        scores = torch.einsum("htd,hsd->hts", q, k.repeat_interleave(g, 0))
        allowed = torch.ones(T, T).tril().bool()
        if not full:
            allowed &= torch.ones(T, T).triu(-(tc["sliding_window"] - 1)).bool()
        masked = torch.where(allowed, scores, torch.tensor(float("-inf")))
        probs = torch.softmax(masked, -1)
        o = torch.einsum("hts,hsd->htd", probs, v.repeat_interleave(g, 0))
        out.update({p + "q": q, p + "k": k, p + "v": v, p + "scores": scores, p + "scaled": scores.clone(),
                    p + "masked": masked, p + "probs": probs, p + "out": o})
        x2 = x + nrm(torch.einsum("tk,ck->tc", o.permute(1, 0, 2).reshape(T, -1), W[p + "self_attn.o_proj.weight"]),
                     p + "post_attention_layernorm.weight")
        h2 = nrm(x2, p + "pre_feedforward_layernorm.weight")
        gate, up = h2 @ W[p + "mlp.gate_proj.weight"].T, h2 @ W[p + "mlp.up_proj.weight"].T
        ff = (gl(gate) * up) @ W[p + "mlp.down_proj.weight"].T
        if tc.get("enable_moe_block"):  # every expert on every token, weighted by a dense (T, E) matrix
            E, K, Ie = tc["num_experts"], tc["top_k_experts"], tc["moe_intermediate_size"]
            logits = torch.einsum("tc,ec->te", nrm(x2) * W[p + "router.scale"] / C ** 0.5, W[p + "router.proj.weight"])
            pr = torch.softmax(logits, -1)
            chosen = pr.argsort(-1, descending=True)[:, :K]
            dense = torch.zeros(T, E).scatter(1, chosen, pr.gather(1, chosen))
            dense = dense / dense.sum(-1, keepdim=True) * W[p + "router.per_expert_scale"]  # 0 where not chosen
            gu = W[p + "experts.gate_up_proj"].view(E, 2, Ie, C)
            he = nrm(x2, p + "pre_feedforward_layernorm_2.weight")
            act = gl(torch.einsum("tc,eic->tei", he, gu[:, 0])) * torch.einsum("tc,eic->tei", he, gu[:, 1])
            ys = torch.einsum("tei,eci->tec", act, W[p + "experts.down_proj"])
            moe = torch.einsum("te,tec->tc", dense, ys)
            ff = nrm(ff, p + "post_feedforward_layernorm_1.weight") \
                + nrm(moe, p + "post_feedforward_layernorm_2.weight")
            ex = dense.argsort(-1, descending=True)[:, :K]  # per_expert_scale > 0: the chosen ones come first
            out.update({p + "router": logits, p + "experts": ex.int(), p + "expert_weights": dense.gather(1, ex)})
        x2 = x2 + nrm(ff, p + "post_feedforward_layernorm.weight")
        if Pl:
            gt = gl(x2 @ W[p + "per_layer_input_gate.weight"].T)
            x2 = x2 + nrm(torch.einsum("tp,cp->tc", gt * ple[:, l], W[p + "per_layer_projection.weight"]),
                          p + "post_per_layer_input_norm.weight")
        x = x2 * W.get(p + "layer_scalar", 1.0)
    cap = tc["final_logit_softcapping"]
    out["logits"] = torch.tanh(nrm(x, "norm.weight") @ W["embed_tokens.weight"].T / cap) * cap
    return {k: v.numpy() for k, v in out.items()}


def as_dump(ref):
    return {k: v.astype(np.int32 if is_int(k) else np.float32) for k, v in ref.items()}


def misreadings(name):
    return [mis for mis, where in MISREADINGS.items() if where == "all" or name in where]


def compare(dump, ref, rep=None, case=""):
    """parity.py's rule (and F32 / I32) on every tensor of ref -> (all ok, worst rel); rep: one line each."""
    ok_all, worst = True, 0.0
    for name, r in ref.items():
        if name not in dump:
            ok, max_abs, rel, problem = False, float("nan"), float("inf"), "missing from the dump"
        else:
            ok, max_abs, rel, problem = P.compare_tensor(dump[name], r)
            if ok and P.st_code(dump[name].dtype) != ("I32" if is_int(name) else "F32"):
                ok, problem = False, f"dtype {P.st_code(dump[name].dtype)}"
        worst = max(worst, rel if rel == rel else float("inf"))  # NaN (shape) counts as infinite
        if rep is not None:
            rep.tensor(case, name, dump[name].shape if name in dump else r.shape, max_abs, rel, ok, problem)
        ok_all &= ok
    return ok_all, worst


def prepare(name, workdir):
    """Writes DIR/<name>/ -> (model dir, config read back, tensors read back, expected tensors)."""
    cfg, toks, seed, _ = CASES[name]
    model = os.path.join(workdir, name)
    P.write_config_model_dir(model, cfg, {k: v.numpy() for k, v in build_weights(cfg, seed).items()})
    cfg2, w = P.read_config_model_dir(model)
    return model, cfg2, w, reference(cfg2, w, toks)


def want_meta(cfg):
    return {"block_size": str(text_of(cfg)["max_position_embeddings"]), "dropped": "0"}


def run_case(name, cli, workdir, rep, timeout, backend=None):
    """CLI dump of one case, compared; a CLI that fails is one FAIL line with its message."""
    model, cfg, w, ref = prepare(name, workdir)
    out = os.path.join(model, "ours.safetensors")
    if os.path.exists(out):
        os.remove(out)
    cmd = [cli, "dump", "--model", model, "--tokens", ",".join(map(str, CASES[name][1]))]
    cmd += (["--backend", backend] if backend else []) + ["--out", out]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        msg = (r.stderr.strip() or r.stdout.strip() or "no message").splitlines()
        ran, why = r.returncode == 0, f"exit code {r.returncode}: " + " | ".join(msg[-3:])
    except (OSError, subprocess.TimeoutExpired) as e:
        ran, why = False, f"could not run {cli}: {e}"
    if not ran:
        return rep.add(name, "<cli>", False, why)
    try:
        dump, meta = P.read_safetensors(out)
    except Exception as e:  # noqa: BLE001 (no dump, or a broken one: one failure)
        return rep.add(name, "<dump file>", False, f"cannot read {out}: {e}")
    compare(dump, ref, rep, name)
    problems = P.check_metadata(meta, {**want_meta(cfg), **({"backend": backend} if backend else {})})
    rep.add(name, "__metadata__", not problems, "; ".join(problems) or str({k: meta.get(k) for k in P.META_KEYS}))
    for mis in misreadings(name):
        bad = reference(cfg, w, CASES[name][1], frozenset([mis]))
        rep.add(name, "misreading", not compare(dump, bad)[0], f"fails: {mis}")


def selftest(cases, workdir, timeout):
    rep = P.Report()
    for name in (c.name for c in cases):
        cfg0, toks, seed, expect = CASES[name]
        model, cfg, w, ref = prepare(name, workdir)
        def check(what, ok, detail="", name=name):
            rep.add(name, "selftest", bool(ok), what + (f" ({detail})" if detail else ""))
        built = {k: v.numpy() for k, v in build_weights(cfg0, seed).items()}
        check("model dir round-trips", cfg == cfg0 and set(w) == set(built)
              and all(np.array_equal(w[k], built[k]) for k in built))
        tc = text_of(cfg)
        types, T = layer_types(tc), len(toks)
        got = [geometry(tc, types, l) for l in range(tc["num_hidden_layers"])]
        parsed = dict(window=[tc["sliding_window"] if t == SL else None for t in types], d=[g[0] for g in got],
                      kv=[g[1] for g in got], src=[g[3] for g in got], inter=[g[4] for g in got])
        if moe_shape(tc) or "moe" in expect:
            parsed["moe"] = [moe_shape(tc)] * tc["num_hidden_layers"]
        check(f"layer plan {expect}", parsed == expect, "" if parsed == expect else f"parsed {parsed}")
        alt = alternative(cfg, w, toks)
        res = {k: P.compare_tensor(alt[k], ref[k], tol=1e-9) for k in ref}
        check(f"second formulation agrees (worst rel {max(r[2] for r in res.values()):.1e})",
              set(alt) == set(ref) and all(r[0] for r in res.values()), [k for k, r in res.items() if not r[0]])
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        for l, win in enumerate(expect["window"]):
            band = (j <= i) & ((j > i - win) if win else True)
            check(f"L{l}: -inf exactly outside the {'window' if win else 'causal'} band, probs rows sum to 1",
                  (np.isneginf(ref[f"layers.{l}.masked"]) == ~band).all()
                  and np.abs(ref[f"layers.{l}.probs"].sum(-1) - 1).max() < 1e-12)
            s = expect["src"][l]
            if s != l:
                check(f"L{l}: k, v are layer {s}'s", all(np.array_equal(ref[f"layers.{l}.{n}"], ref[f"layers.{s}.{n}"])
                                                          for n in "kv"))
        check("the tokens cross the window several times", T >= 3 * tc["sliding_window"])
        if moe_shape(tc):
            E, K, _ = moe_shape(tc)
            for l in range(tc["num_hidden_layers"]):
                lg, ex, wt = (ref[f"layers.{l}.{n}"] for n in ("router", "experts", "expert_weights"))
                pr = np.sort(np.exp(lg - lg.max(-1, keepdims=True)) / np.exp(lg - lg.max(-1, keepdims=True))
                             .sum(-1, keepdims=True), -1)[:, ::-1]
                gap = min((pr[:, K - 1] - pr[:, K]).min(), (-np.diff(wt, axis=-1)).min())
                check(f"L{l}: no near-tie in the top-{K} choice nor in the order of the final weights "
                      f"(smallest gap {gap:.1e})", gap > 1e-4)
                check(f"L{l}: the routing varies ({len(np.unique(ex))}/{E} experts chosen, "
                      f"{len({tuple(sorted(r)) for r in ex})} distinct pairs)", len(np.unique(ex)) == E)
            # per_expert_scale reorders a pair somewhere: an engine ordering by probability fails
            flips = sum(int((np.argsort(-np.take_along_axis(ref[f"layers.{l}.router"], ref[f"layers.{l}.experts"]
                                                            .astype(np.int64), -1), -1)[:, 0] != 0).sum())
                        for l in range(tc["num_hidden_layers"]))
            check(f"the order by final weight differs from the order by probability ({flips} token-layers)",
                  flips > 0)
        raw = reference(cfg, w, toks, frozenset(["no soft-cap"]))["logits"]
        check(f"the soft-cap matters (max |logit| {np.abs(raw).max():.0f} before it)",
              np.abs(raw).max() > 1.5 * tc["final_logit_softcapping"])
        dump = as_dump(ref)
        check("the reference as a float32 dump passes", compare(dump, ref)[0])
        for mis in misreadings(name):
            passes, worst = compare(dump, reference(cfg, w, toks, frozenset([mis])))
            check(f"misreading moves the dump by > 10x tol: {mis} (worst rel {worst:.1e})",
                  not passes and worst > 10 * P.REL_TOL)
    ok_cli, fail_cli, silent_cli = P.write_fake_clis(workdir, os.path.abspath(__file__))
    for cli, what, bad in ((ok_cli, "fake CLI: every case passes", False), (fail_cli, "failing CLI", True),
                           (silent_cli, "CLI writing no dump", True),
                           (os.path.join(workdir, "none"), "missing CLI", True)):
        sub = P.Report(quiet=True)
        for c in cases:
            run_case(c.name, cli, workdir, sub, timeout)
        rep.add("end-to-end", "selftest", sub.failed == (len(cases) if bad else 0) and (bad or sub.passed > 0),
                f"{what}{': one FAIL per case' if bad else ''} ({sub.summary()})")
    return rep


def fake_cli(argv):
    """`gemma4_parity.py --fake-cli dump --model D --tokens a,b --out F`: the reference as a dump."""
    a = P.fake_cli_args("gemma4_parity.py", argv, backend={"default": "python-reference"})
    cfg, w = P.read_config_model_dir(a.model)
    P.write_safetensors(a.out, as_dump(reference(cfg, w, [int(t) for t in a.tokens.split(",")])),
                        {"model": a.model, "backend": a.backend, **want_meta(cfg)})
    return 0


def main(argv):
    if argv[:1] == ["--fake-cli"]:
        return fake_cli(argv[1:])
    cases = [SimpleNamespace(name=n) for n in CASES]
    args, cases = P.parse_args(argv, __doc__.split("\n")[0], cases, lambda c: c.name)
    if args is None:
        return 0

    def cli_cases(cases, cli, workdir, rep, timeout):
        for c in cases:
            run_case(c.name, cli, workdir, rep, timeout, args.backend)
    return P.drive(args, cases, "attnviz-gemma4-", selftest, cli_cases)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
