#!/usr/bin/env python3
"""Numerical parity of the attnviz dump for Qwen3.5's hybrid text model (Gated DeltaNet linear
attention + gated full attention): C++ engine vs. a float64 torch reference written from the
model's own (Hugging Face) definition.

Usage
-----
    /usr/bin/python3 tests/reference/hybrid_parity.py --cli PATH/attnviz-cli --workdir DIR [--keep]
    /usr/bin/python3 tests/reference/hybrid_parity.py --selftest [--workdir DIR] [--keep]

Optional: --cases name1,name2 (a subset; --list prints them), --timeout SECONDS (per CLI
call), --backend cpu|gpu (passed on to `dump`; the dump's metadata must then name it).

Architecture (model_type "qwen3_5_text", or "qwen3_5" with the text model in "text_config",
its tensors under model.language_model., vision (model.visual.*) and multi-token-prediction
(mtp.*) tensors present and ignored, lm_head.weight at the top level):
  layer kinds  layer_types ("linear_attention" | "full_attention"), else
               full_attention_interval (layer i full iff (i+1) % interval == 0; default 4).
  blocks       x += mixer(RMSNorm1(x)); x += down(silu(gate(u)) * up(u)), u = RMSNorm2(x);
               logits = RMSNorm_f(x) @ lm_head^T (embed_tokens when tie_word_embeddings).
               Every RMSNorm is x * rsqrt(mean(x^2) + eps) * (1 + w), except the linear
               layer's gated norm (weight w, no +1).
  full layers  q_proj rows per head [query (d) | gate (d)]; q_norm / k_norm per head (1 + w);
               RoPE rotate-half on the first rot = int(d * partial_rotary_factor) dims
               (pairs (i, i + rot/2)), the rest unchanged; rope_theta / partial_rotary_factor
               at the top level or in rope_parameters (mrope_section / mrope_interleaved: for
               text all three position axes are equal, so plain RoPE); scale d^-1/2, causal
               mask, GQA h // (H/KV); output (probs v) * sigmoid(gate), then o_proj.
  linear layers  mixed = in_proj_qkv h; depthwise causal conv1d (kernel K, taps on
               t-K+1 .. t), SiLU; channels q (Hk*dk) | k (Hk*dk) | v (Hv*dv);
               z = in_proj_z h; beta = sigmoid(in_proj_b h); g = -exp(A_log) *
               softplus(in_proj_a h + dt_bias); q, k repeat_interleave'd to Hv heads (value
               head j reads key head j // (Hv/Hk)); q, k L2-normalised (x rsqrt(sum x^2 +
               1e-6)), q *= dk^-1/2; per value head, S (dk, dv) = 0, per token:
               S = exp(g_t) S; delta = beta_t (v_t - S^T k_t); S += k_t delta^T; o_t = S^T q_t;
               then RMSNorm(o_t) * w * silu(z_t) per head, flattened, out_proj.

For every case the script builds a small random model (seeded, float32), writes DIR/<case>/
(config.json + model.safetensors), computes every dump tensor in float64 with a literal
per-head, per-token loop implementation (`reference`), runs
    CLI dump --model DIR/<case> --tokens a,b,c,... [--backend B] --out DIR/<case>/ours.safetensors
and compares with parity.py's rule (shape and dtype exact, identical -inf pattern, no NaN,
max|ours-ref| / max(max|ref|, 1e-6) <= 1e-4 over finite entries; metadata model/backend/
block_size/dropped as strings, block_size = the model context, dropped = 0). A failing
tensor's line names the layer kind and where the largest error is, with both values.

Dump tensors (float32; tokens (T) int32; logits (T,V)):
  full layer l:   q (H,T,d) after q_norm and RoPE, k (KV,T,d) likewise, v (KV,T,d),
                  scores (H,T,T) = q k^T, scaled = scores d^-1/2, masked (-inf where j > i),
                  probs, out (H,T,d) = probs v (before the gate), gate (H,T,d) = sigmoid(gate).
  linear layer l: q, k (Hv,T,dk) as they enter the recurrence (after conv, SiLU, repeat, L2
                  norm; q also after the dk^-1/2 scale), v (Hv,T,dv), beta (Hv,T), decay
                  (Hv,T) = g, implicit (Hv,T,T) = A with o_t = sum_{s<=t} A[t,s] v_s (0 above
                  the diagonal), out (Hv,T,dv) = o before the gated norm.
A missing expected tensor fails; so does scores/scaled/masked/probs/capped in a linear layer,
or beta/decay/implicit/capped in a full layer. Other extra tensors are reported, not failed.

The implicit matrix: S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, so
A[t,s] = beta_s q_t^T P_t P_{t-1} ... P_{s+1} k_s with P_r = exp(g_r) (I - beta_r k_r k_r^T)
(the decay of step t itself multiplies everything older than t, never the token t). The
reference computes it by the backward sweep: w = q_t; for s = t .. 0: A[t,s] = beta_s (w.k_s);
w = exp(g_s) (w - beta_s (w.k_s) k_s). Closed form (checked in the selftest):
A = (Q K^T o Gam o L) (I + diag(beta) (K K^T o Gam o L-))^-1 diag(beta), Gam[t,s] =
exp(G_t - G_s), G = cumsum(g), L lower triangle with the diagonal, L- without.

--selftest needs no CLI. Per case: the layer kinds and rotated dims derived from config.json
equal the ones written by hand; the model directory round-trips; a second, vectorised
implementation (F.conv1d with padding K-1 and groups = channels, HF-style (M)RoPE tables
with rotate_half, chunked WY form of the gated delta rule with chunk 4, the closed form of A)
agrees to 1e-9; invariants (A v == o to 1e-10, closed form == sweep, A zero above the
diagonal, g <= 0, 0 < beta < 1, |k| = 1, |q| = dk^-1/2, the memory reaches back, probs rows
sum to 1, -inf exactly above the diagonal, RoPE only on the first rot dims, ...); the float32
dump passes the comparison; and the comparison CAN fail: perturbed values, missing and
wrong-kind tensors, and for each case a set of plausible misreadings of the architecture (gate
as the second half of the whole q vector, (1 + w) in the gated norm, w instead of (1 + w)
elsewhere, no L2 norm, q scale missing, repeat instead of repeat_interleave, conv off by one
either way or flipped, RoPE on all dims or on adjacent pairs, decay after the update or the
delta read from the undecayed state, A_log without exp, dt_bias ignored, sigmoid(z) in the
gated norm, ungated attention output) each of which must make at least one tensor fail.
Finally the CLI path runs end to end against a fake CLI (this script with --fake-cli), a
failing one and a silent one.
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
                    loop_rope, read_safetensors, to_dump)

NEG_INF = float("-inf")
L2_EPS = 1e-6          # the L2 norm of q and k: x * rsqrt(sum(x^2) + 1e-6)
FULL, LINEAR = "full_attention", "linear_attention"
FULL_ONLY = ("scores", "scaled", "masked", "probs")   # their presence in a linear layer fails
LINEAR_ONLY = ("beta", "decay", "implicit")           # their presence in a full layer fails


# ---------------------------------------------------------------------------------------------
# configs
# ---------------------------------------------------------------------------------------------

def text_config(cfg: dict) -> dict:
    """qwen3_5's text_config (model_type qwen3_5_text), else the config itself."""
    if cfg.get("model_type") == "qwen3_5":
        tc = dict(cfg["text_config"])
        tc.setdefault("model_type", "qwen3_5_text")
        return tc
    return cfg


def qwen35_text_config(vocab=50, hidden=64, inter=96, layers=4, heads=4, kv=2, head_dim=16,
                       hk=2, hv=4, dk=8, dv=12, conv=4, tie=False, **extra):
    cfg = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
        "head_dim": head_dim, "rms_norm_eps": 1e-6, "max_position_embeddings": 64,
        "tie_word_embeddings": tie, "hidden_act": "silu", "attention_bias": False,
        "attention_dropout": 0.0, "linear_conv_kernel_dim": conv, "linear_key_head_dim": dk,
        "linear_value_head_dim": dv, "linear_num_key_heads": hk, "linear_num_value_heads": hv,
        "torch_dtype": "float32",
    }
    cfg.update(extra)
    return cfg


def nested(text_cfg: dict) -> dict:
    """The multimodal checkpoint's config.json around a text config."""
    tc = dict(text_cfg)
    tc.pop("architectures", None)
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "text_config": tc,
            "vision_config": {"depth": 1, "hidden_size": 8,
                              "num_heads": 2, "patch_size": 4, "temporal_patch_size": 2,
                              "in_channels": 3, "out_hidden_size": tc["hidden_size"]},
            "image_token_id": 45, "video_token_id": 46, "vision_start_token_id": 47,
            "vision_end_token_id": 48, "tie_word_embeddings": tc["tie_word_embeddings"],
            "torch_dtype": "float32"}


L_, F_ = "L", "F"  # hand-written layer kinds in the cases


@dataclass
class Case:
    name: str
    config: dict                  # config.json contents
    n_tokens: int                 # T (< context)
    seed: int
    kinds: str                    # hand-written: "L" / "F" per layer
    rot: int                      # hand-written: rotated dims per full-attention head
    layout: str = "plain"         # "plain" (model.*) | "nested" (model.language_model.*)
    tokens: List[int] = field(default_factory=list)

    def __post_init__(self):
        self.tokens = P.case_tokens(self.seed, text_config(self.config)["vocab_size"], self.n_tokens)


CASES = [
    # full_attention_interval 2 -> L F L F; rope_theta / partial_rotary_factor at the top level
    Case("qwen35_small",
         qwen35_text_config(full_attention_interval=2, rope_theta=10000.0, partial_rotary_factor=0.25),
         11, 3501, "LFLF", 4),
    # the same dimensions in the multimodal layout, explicit layer_types, rope_parameters
    # (mrope_section sums to rot/2 = 2)
    Case("qwen35_nested",
         nested(qwen35_text_config(
             layer_types=[LINEAR, LINEAR, LINEAR, FULL],
             rope_parameters={"rope_type": "default", "rope_theta": 100000.0,
                              "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
                              "mrope_interleaved": True})),
         11, 3502, "LLLF", 4, layout="nested"),
    # num_v == num_k, a full layer first, tied embeddings, MRoPE parameters (sum = rot/2 = 4)
    Case("qwen35_ratio1_mrope",
         qwen35_text_config(vocab=43, layers=3, hk=2, hv=2, dk=8, dv=8, tie=True,
                            layer_types=[FULL, LINEAR, LINEAR],
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.5,
                                             "mrope_section": [2, 1, 1], "mrope_interleaved": True}),
         13, 3503, "FLL", 8),
    # neither layer_types nor full_attention_interval: HF's default interval 4 -> L L L F;
    # MQA in the full layer, GQA ratio 3 in the linear layers, conv kernel 3
    Case("qwen35_default_interval",
         qwen35_text_config(vocab=40, hidden=48, inter=64, layers=4, heads=4, kv=1, head_dim=8,
                            hk=2, hv=6, dk=8, dv=8, conv=3, rope_theta=1000.0,
                            partial_rotary_factor=0.5),
         12, 3504, "LLLF", 4),
]


# ---------------------------------------------------------------------------------------------
# the architecture as data, derived from config.json (our reading of HF's definition)
# ---------------------------------------------------------------------------------------------

@dataclass
class Rope:
    inv_freq: torch.Tensor   # (rot/2,) float64
    rot: int                 # rotated dims (the first `rot` of each head)
    pairs: str = "half"      # "half": (i, i + rot/2) [correct]; "adjacent": (2i, 2i+1) [misreading]
    mrope_section: Optional[List[int]] = None
    mrope_interleaved: bool = False
    theta: float = 10000.0


@dataclass
class Plan:
    C: int
    V: int
    eps: float
    tie: bool
    kinds: List[str]              # FULL / LINEAR per layer
    # full attention
    H: int
    KV: int
    d: int
    rope: Rope
    # linear attention
    Hk: int
    Hv: int
    dk: int
    dv: int
    K: int
    # switches that the misreadings flip (the defaults are our reading of the definition)
    norm_offset: float = 1.0      # RMSNorm * (offset + w), all norms but the gated one
    gated_offset: float = 0.0     # gated norm * (offset + w)
    gate_split: str = "head"      # "head": [query | gate] per head; "halves": of the whole vector
    gate_applied: bool = True
    l2: bool = True
    q_scale: bool = True
    lin_gqa: str = "interleave"   # "interleave": j // (Hv/Hk); "tile": j % Hk
    conv_shift: int = 0           # taps on t-(K-1)+k+shift
    conv_flip: bool = False       # kernel read backwards
    decay: str = "before"         # "before" | "after" the update | "read_undecayed"
    a_exp: bool = True            # -exp(A_log) (else -A_log)
    dt_bias: bool = True
    z_act: str = "silu"           # "silu" | "sigmoid"
    rope_off: Tuple[int, ...] = ()  # selftest only: layers computed without RoPE


def layer_kinds(tc: dict) -> List[str]:
    L = tc["num_hidden_layers"]
    if tc.get("layer_types") is not None:
        kinds = list(tc["layer_types"])
    else:
        interval = tc.get("full_attention_interval", 4)
        kinds = [FULL if (i + 1) % interval == 0 else LINEAR for i in range(L)]
    assert len(kinds) == L and all(k in (FULL, LINEAR) for k in kinds), kinds
    return kinds


def make_plan(cfg: dict) -> Plan:
    tc = text_config(cfg)
    C, H = tc["hidden_size"], tc["num_attention_heads"]
    d = tc.get("head_dim") or C // H
    rp = tc.get("rope_parameters") or {}
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind != "default":
        raise ValueError(f"rope type {kind!r} not covered by this reference")
    theta = float(rp.get("rope_theta", tc.get("rope_theta", 10000.0)))
    # HF's Qwen3.5 text config defaults partial_rotary_factor to 0.25 (every case sets it)
    partial = rp.get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25))
    rot = int(d * partial)
    inv = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    tie = tc.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    return Plan(C=C, V=tc["vocab_size"], eps=tc.get("rms_norm_eps", 1e-6), tie=bool(tie),
                kinds=layer_kinds(tc), H=H, KV=tc.get("num_key_value_heads") or H, d=d,
                rope=Rope(inv, rot, "half", rp.get("mrope_section"), bool(rp.get("mrope_interleaved")), theta),
                Hk=tc["linear_num_key_heads"], Hv=tc["linear_num_value_heads"],
                dk=tc["linear_key_head_dim"], dv=tc["linear_value_head_dim"],
                K=tc["linear_conv_kernel_dim"])


# ---------------------------------------------------------------------------------------------
# random weights (canonical names: model.*, lm_head.weight) and the model directory
# ---------------------------------------------------------------------------------------------

def build_weights(case: Case) -> Dict[str, np.ndarray]:
    p = make_plan(case.config)
    tc = text_config(case.config)
    gen = torch.Generator().manual_seed(case.seed)
    C, V, I = p.C, p.V, tc["intermediate_size"]
    H, KV, d = p.H, p.KV, p.d
    Hk, Hv, dk, dv, K = p.Hk, p.Hv, p.dk, p.dv, p.K
    conv_dim = 2 * Hk * dk + Hv * dv

    def norm_w(n, mean=0.0):  # stored w, applied as (1 + w) (gated norm: as w)
        return _randn(gen, (n,), 0.1, mean)

    w = {"model.embed_tokens.weight": _randn(gen, (V, C), 0.3)}
    for i, kind in enumerate(p.kinds):
        a = f"model.layers.{i}."
        w[a + "input_layernorm.weight"] = norm_w(C)
        if kind == FULL:
            s = a + "self_attn."
            w[s + "q_proj.weight"] = _randn(gen, (H * d * 2, C), C ** -0.5)
            w[s + "k_proj.weight"] = _randn(gen, (KV * d, C), C ** -0.5)
            w[s + "v_proj.weight"] = _randn(gen, (KV * d, C), 0.15)
            w[s + "o_proj.weight"] = _randn(gen, (C, H * d), 0.1)
            # (1 + w) ~ 1.5: scaled scores with std ~2, clearly peaked rows
            w[s + "q_norm.weight"] = norm_w(d, 0.5)
            w[s + "k_norm.weight"] = norm_w(d, 0.5)
        else:
            s = a + "linear_attn."
            w[s + "in_proj_qkv.weight"] = _randn(gen, (conv_dim, C), 0.15)
            w[s + "in_proj_z.weight"] = _randn(gen, (Hv * dv, C), 0.15)
            w[s + "in_proj_b.weight"] = _randn(gen, (Hv, C), 0.15)
            w[s + "in_proj_a.weight"] = _randn(gen, (Hv, C), 0.05)
            w[s + "conv1d.weight"] = _randn(gen, (conv_dim, 1, K), 0.4)
            # N(0, 1) - 2.5: softplus(dt_bias) ~ 0.01 .. 0.5, so exp(g) spans ~0.001 .. 0.99 and
            # the state carries memory over several tokens (with N(0, 1) alone exp(g) is
            # ~0.005 in most heads and A is nearly diagonal)
            w[s + "dt_bias"] = _randn(gen, (Hv,), 1.0, -2.5)
            w[s + "A_log"] = torch.log(1.0 + 15.0 * torch.rand(Hv, generator=gen, dtype=torch.float32))
            w[s + "norm.weight"] = norm_w(dv)
            w[s + "out_proj.weight"] = _randn(gen, (C, Hv * dv), 0.3)
        w[a + "post_attention_layernorm.weight"] = norm_w(C)
        w[a + "mlp.gate_proj.weight"] = _randn(gen, (I, C), 0.15)
        w[a + "mlp.up_proj.weight"] = _randn(gen, (I, C), 0.15)
        w[a + "mlp.down_proj.weight"] = _randn(gen, (C, I), 0.1)
    w["model.norm.weight"] = norm_w(C)
    if not p.tie:
        w["lm_head.weight"] = _randn(gen, (V, C), 0.15)
    return {k: v.numpy().astype(np.float32) for k, v in w.items()}


def on_disk_names(case: Case, weights: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The checkpoint's own names; the nested layout adds tensors the text model ignores."""
    if case.layout == "plain":
        return dict(weights)
    gen = torch.Generator().manual_seed(case.seed + 7)
    C = make_plan(case.config).C
    out = {}
    for k, v in weights.items():
        out[k if k.startswith("lm_head.") else "model.language_model." + k[len("model."):]] = v
    out["model.visual.patch_embed.proj.weight"] = _randn(gen, (8, 3, 2, 4, 4), 1.0).numpy()
    out["mtp.fc.weight"] = _randn(gen, (C, 2 * C), 1.0).numpy()
    return out


def write_model_dir(case: Case, model_dir: str, weights: Dict[str, np.ndarray]):
    P.write_config_model_dir(model_dir, case.config, on_disk_names(case, weights))


def load_model_dir(model_dir: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """-> (config, canonical weights); vision and mtp tensors dropped."""
    cfg, tensors = P.read_config_model_dir(model_dir)
    out = {}
    for k, v in tensors.items():
        if k.startswith("model.language_model."):
            out["model." + k[len("model.language_model."):]] = v
        elif k.startswith("model.visual.") or k.startswith("mtp."):
            continue
        else:
            out[k] = v
    return cfg, out


# ---------------------------------------------------------------------------------------------
# reference (float64, literal per-head, per-token loops)
# ---------------------------------------------------------------------------------------------

def sigmoid_s(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def silu_s(x: float) -> float:
    return x * sigmoid_s(x)


def softplus_s(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def loop_full(p: Plan, W, a: str, h, rope_on=True) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    T, H, KV, d = h.shape[0], p.H, p.KV, p.d
    qg = h @ W[a + "q_proj.weight"].T                                     # (T, H*2d)
    q = torch.zeros(H, T, d, dtype=torch.float64)
    gate = torch.zeros(H, T, d, dtype=torch.float64)
    for t in range(T):
        for hh in range(H):
            if p.gate_split == "head":
                row = qg[t, hh * 2 * d:(hh + 1) * 2 * d]
                q[hh, t], gate[hh, t] = row[:d], row[d:]
            else:
                q[hh, t] = qg[t, hh * d:(hh + 1) * d]
                gate[hh, t] = qg[t, H * d + hh * d:H * d + (hh + 1) * d]
    k = heads_of(h @ W[a + "k_proj.weight"].T, KV, d)
    v = heads_of(h @ W[a + "v_proj.weight"].T, KV, d)
    q = loop_rms_norm(q, W[a + "q_norm.weight"], p.eps, p.norm_offset)
    k = loop_rms_norm(k, W[a + "k_norm.weight"], p.eps, p.norm_offset)
    if rope_on:
        r = p.rope
        q, k = loop_rope(q, r.inv_freq, r.rot, r.pairs), loop_rope(k, r.inv_freq, r.rot, r.pairs)
    group = H // KV
    res, out = loop_causal_attention(q, k, v, d ** -0.5, lambda hh: hh // group)
    sig = torch.zeros(H, T, d, dtype=torch.float64)
    for hh in range(H):
        for i in range(T):
            for c in range(d):
                sig[hh, i, c] = sigmoid_s(float(gate[hh, i, c]))
    gated = out * sig if p.gate_applied else out
    merged = torch.stack([torch.cat([gated[hh, t] for hh in range(H)]) for t in range(T)])  # (T, H*d)
    mix = merged @ W[a + "o_proj.weight"].T
    return mix, {"q": q, "k": k, "v": v, **res, "out": out, "gate": sig}


def sweep_implicit(q, k, beta, g):
    """One value head: q, k (T,dk), beta, g (T,) -> A (T,T) with o_t = sum_s A[t,s] v_s,
    by the backward sweep w = q_t; A[t,s] = beta_s (w.k_s); w = exp(g_s)(w - beta_s (w.k_s) k_s)."""
    T = q.shape[0]
    A = torch.zeros(T, T, dtype=torch.float64)
    for t in range(T):
        w = q[t].clone()
        for s in range(t, -1, -1):
            dot = float(w @ k[s])
            A[t, s] = float(beta[s]) * dot
            w = math.exp(float(g[s])) * (w - float(beta[s]) * dot * k[s])
    return A


def loop_linear(p: Plan, W, a: str, h) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    T = h.shape[0]
    Hk, Hv, dk, dv, K = p.Hk, p.Hv, p.dk, p.dv, p.K
    mixed = h @ W[a + "in_proj_qkv.weight"].T                             # (T, conv_dim)
    cw = W[a + "conv1d.weight"][:, 0, :]                                  # (conv_dim, K)
    conv = torch.zeros_like(mixed)
    for t in range(T):
        for kk in range(K):
            src = t - (K - 1) + kk + p.conv_shift
            if 0 <= src < T:
                conv[t] += cw[:, K - 1 - kk if p.conv_flip else kk] * mixed[src]
    act = torch.zeros_like(conv)
    for t in range(T):
        for c in range(conv.shape[1]):
            act[t, c] = silu_s(float(conv[t, c]))
    qf, kf, vf = act[:, :Hk * dk], act[:, Hk * dk:2 * Hk * dk], act[:, 2 * Hk * dk:]
    z = h @ W[a + "in_proj_z.weight"].T                                   # (T, Hv*dv)
    b = h @ W[a + "in_proj_b.weight"].T                                   # (T, Hv)
    araw = h @ W[a + "in_proj_a.weight"].T                                # (T, Hv)
    beta = torch.zeros(Hv, T, dtype=torch.float64)
    g = torch.zeros(Hv, T, dtype=torch.float64)
    for j in range(Hv):
        A_log = float(W[a + "A_log"][j])
        A = math.exp(A_log) if p.a_exp else A_log
        bias = float(W[a + "dt_bias"][j]) if p.dt_bias else 0.0
        for t in range(T):
            beta[j, t] = sigmoid_s(float(b[t, j]))
            g[j, t] = -A * softplus_s(float(araw[t, j]) + bias)
    q = torch.zeros(Hv, T, dk, dtype=torch.float64)
    k = torch.zeros(Hv, T, dk, dtype=torch.float64)
    v = torch.zeros(Hv, T, dv, dtype=torch.float64)
    ratio = Hv // Hk
    for j in range(Hv):
        kh = j // ratio if p.lin_gqa == "interleave" else j % Hk
        for t in range(T):
            qv, kv_ = qf[t, kh * dk:(kh + 1) * dk], kf[t, kh * dk:(kh + 1) * dk]
            if p.l2:
                qv = qv / math.sqrt(float(qv @ qv) + L2_EPS)
                kv_ = kv_ / math.sqrt(float(kv_ @ kv_) + L2_EPS)
            if p.q_scale:
                qv = qv * dk ** -0.5
            q[j, t], k[j, t] = qv, kv_
            v[j, t] = vf[t, j * dv:(j + 1) * dv]
    o = torch.zeros(Hv, T, dv, dtype=torch.float64)
    implicit = torch.zeros(Hv, T, T, dtype=torch.float64)
    for j in range(Hv):
        S = torch.zeros(dk, dv, dtype=torch.float64)
        for t in range(T):
            decay = math.exp(float(g[j, t]))
            if p.decay == "before":
                S = decay * S
                delta = float(beta[j, t]) * (v[j, t] - S.T @ k[j, t])
                S = S + torch.outer(k[j, t], delta)
            elif p.decay == "after":
                delta = float(beta[j, t]) * (v[j, t] - S.T @ k[j, t])
                S = decay * (S + torch.outer(k[j, t], delta))
            else:  # "read_undecayed"
                delta = float(beta[j, t]) * (v[j, t] - S.T @ k[j, t])
                S = decay * S + torch.outer(k[j, t], delta)
            o[j, t] = S.T @ q[j, t]
        implicit[j] = sweep_implicit(q[j], k[j], beta[j], g[j])
    nw = W[a + "norm.weight"]
    normed = torch.zeros(T, Hv * dv, dtype=torch.float64)
    for t in range(T):
        for j in range(Hv):
            ot = o[j, t]
            r = ot / math.sqrt(float(ot @ ot) / dv + p.eps) * (p.gated_offset + nw)
            zt = z[t, j * dv:(j + 1) * dv]
            gz = torch.tensor([silu_s(float(x)) if p.z_act == "silu" else sigmoid_s(float(x)) for x in zt],
                              dtype=torch.float64)
            normed[t, j * dv:(j + 1) * dv] = r * gz
    mix = normed @ W[a + "out_proj.weight"].T
    return mix, {"q": q, "k": k, "v": v, "beta": beta, "decay": g, "implicit": implicit, "out": o}


def reference_plan(p: Plan, weights, toks: List[int]) -> Dict[str, torch.Tensor]:
    W = _f64(weights)
    res = {"tokens": torch.tensor(toks, dtype=torch.int32)}

    def norm(x, name):
        return loop_rms_norm(x, W[name], p.eps, p.norm_offset)

    x = torch.stack([W["model.embed_tokens.weight"][t] for t in toks])
    for l, kind in enumerate(p.kinds):
        a = f"model.layers.{l}."
        h = norm(x, a + "input_layernorm.weight")
        if kind == FULL:
            mix, dump = loop_full(p, W, a + "self_attn.", h, l not in p.rope_off)
        else:
            mix, dump = loop_linear(p, W, a + "linear_attn.", h)
        res.update({f"layers.{l}.{n}": t for n, t in dump.items()})
        x = x + mix
        u = norm(x, a + "post_attention_layernorm.weight")
        gate = u @ W[a + "mlp.gate_proj.weight"].T
        up = u @ W[a + "mlp.up_proj.weight"].T
        act = torch.tensor([[silu_s(float(gate[t, i])) for i in range(gate.shape[1])]
                            for t in range(gate.shape[0])], dtype=torch.float64)
        x = x + (act * up) @ W[a + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    res["logits"] = norm(x, "model.norm.weight") @ head.T
    return res


def reference_plan_np(p: Plan, weights, toks) -> Dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in reference_plan(p, weights, toks).items()}


def reference(cfg, weights, toks) -> Dict[str, np.ndarray]:
    return reference_plan_np(make_plan(cfg), weights, toks)


# ---------------------------------------------------------------------------------------------
# second, vectorised implementation (selftest only)
# ---------------------------------------------------------------------------------------------

def closed_form_implicit(q, k, beta, g):
    """q, k (N,T,dk), beta, g (N,T) -> A (N,T,T) =
    (Q K^T o Gam o L) (I + diag(beta)(K K^T o Gam o L-))^-1 diag(beta)."""
    N, T, _ = q.shape
    G = torch.cumsum(g, dim=-1)                                           # (N,T)
    low = torch.ones(T, T, dtype=torch.bool).tril()
    strict = torch.ones(T, T, dtype=torch.bool).tril(-1)
    diff = G[:, :, None] - G[:, None, :]
    gam = torch.where(low, torch.exp(torch.where(low, diff, torch.zeros_like(diff))), torch.zeros_like(diff))
    qk = (q @ k.transpose(-1, -2)) * gam
    kk = (k @ k.transpose(-1, -2)) * gam * strict
    M = torch.eye(T, dtype=torch.float64) + beta[:, :, None] * kk
    return qk @ torch.linalg.solve(M, torch.diag_embed(beta))


def chunked_delta_rule(q, k, v, beta, g, chunk=4):
    """The gated delta rule in the chunked WY form: q, k (N,T,dk), v (N,T,dv), beta, g (N,T)
    -> o (N,T,dv). Per chunk with state S0: U = (I + diag(b)(K K^T o Gam o L-))^-1 diag(b)
    (V - (K o e^G) S0), O = (Q o e^G) S0 + (Q K^T o Gam o L) U, S = e^{G_last} S0 +
    (K o e^{G_last - G})^T U, with G the cumulative g inside the chunk."""
    N, T, dk = q.shape
    dv = v.shape[-1]
    S = torch.zeros(N, dk, dv, dtype=torch.float64)
    outs = []
    for c0 in range(0, T, chunk):
        sl = slice(c0, min(c0 + chunk, T))
        qc, kc, vc, bc = q[:, sl], k[:, sl], v[:, sl], beta[:, sl]
        G = torch.cumsum(g[:, sl], dim=-1)
        n = qc.shape[1]
        low = torch.ones(n, n, dtype=torch.bool).tril()
        diff = G[:, :, None] - G[:, None, :]
        gam = torch.where(low, torch.exp(torch.where(low, diff, torch.zeros_like(diff))), torch.zeros_like(diff))
        kk = (kc @ kc.transpose(-1, -2)) * gam * torch.ones(n, n, dtype=torch.float64).tril(-1)
        M = torch.eye(n, dtype=torch.float64) + bc[:, :, None] * kk
        rhs = bc[:, :, None] * (vc - (kc * G.exp()[:, :, None]) @ S)
        U = torch.linalg.solve_triangular(M, rhs, upper=False, unitriangular=True)
        outs.append((qc * G.exp()[:, :, None]) @ S + ((qc @ kc.transpose(-1, -2)) * gam) @ U)
        S = G[:, -1:, None].exp() * S + (kc * (G[:, -1:] - G).exp()[:, :, None]).transpose(-1, -2) @ U
    return torch.cat(outs, dim=1)


def hf_rope_tables(r: Rope, T: int):
    """cos, sin (T, rot) the HF way: 3 equal position axes (text), MRoPE frequency selection
    (interleaved: axis 1 on indices 1, 4, ..; axis 2 on 2, 5, ..; or contiguous sections),
    then cat(freqs, freqs)."""
    pos = torch.arange(T, dtype=torch.float64)[None].expand(3, T)
    freqs = pos[:, :, None] * r.inv_freq[None, None, :]                   # (3,T,rot/2)
    if r.mrope_section:
        sec = r.mrope_section
        if r.mrope_interleaved:
            f = freqs[0].clone()
            for dim, offset in ((1, 1), (2, 2)):
                f[..., offset:sec[dim] * 3:3] = freqs[dim][..., offset:sec[dim] * 3:3]
        else:
            f = torch.cat([c[i % 3] for i, c in enumerate(freqs.split(sec, dim=-1))], dim=-1)
    else:
        f = freqs[0]
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def alt_reference(p: Plan, weights, toks) -> Dict[str, np.ndarray]:
    W = _f64(weights)
    T = len(toks)
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": ids.to(torch.int32)}

    def norm(x, w, offset=1.0):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + p.eps) * (w + offset)

    def l2(x):
        return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + L2_EPS)

    cos, sin = hf_rope_tables(p.rope, T)

    def rope(x):
        rot = p.rope.rot
        xr, xp = x[..., :rot], x[..., rot:]
        rotated = torch.cat([-xr[..., rot // 2:], xr[..., :rot // 2]], dim=-1)
        return torch.cat([xr * cos + rotated * sin, xp], dim=-1)

    x = F.embedding(ids, W["model.embed_tokens.weight"])
    for l, kind in enumerate(p.kinds):
        a = f"model.layers.{l}."
        h = norm(x, W[a + "input_layernorm.weight"])
        if kind == FULL:
            s = a + "self_attn."
            H, KV, d = p.H, p.KV, p.d
            q, gate = torch.chunk(F.linear(h, W[s + "q_proj.weight"]).view(T, H, 2 * d), 2, dim=-1)
            q = norm(q, W[s + "q_norm.weight"]).transpose(0, 1)
            k = norm(F.linear(h, W[s + "k_proj.weight"]).view(T, KV, d), W[s + "k_norm.weight"]).transpose(0, 1)
            v = F.linear(h, W[s + "v_proj.weight"]).view(T, KV, d).transpose(0, 1)
            q, k = rope(q), rope(k)
            st = {"scores": q @ k.repeat_interleave(H // KV, dim=0).transpose(-1, -2)}
            st["scaled"] = st["scores"] * d ** -0.5
            st["masked"] = st["scaled"].masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG_INF)
            st["probs"] = F.softmax(st["masked"], dim=-1)
            st["out"] = st["probs"] @ v.repeat_interleave(H // KV, dim=0)
            st["gate"] = torch.sigmoid(gate).transpose(0, 1)
            res.update({f"layers.{l}.{n}": t for n, t in [("q", q), ("k", k), ("v", v)] + list(st.items())})
            mix = F.linear((st["out"] * st["gate"]).transpose(0, 1).reshape(T, H * d), W[s + "o_proj.weight"])
        else:
            s = a + "linear_attn."
            Hk, Hv, dk, dv, K = p.Hk, p.Hv, p.dk, p.dv, p.K
            mixed = F.linear(h, W[s + "in_proj_qkv.weight"])                 # (T, conv_dim)
            conv = F.conv1d(mixed.T[None], W[s + "conv1d.weight"], padding=K - 1,
                            groups=mixed.shape[1])[0, :, :T].T
            qf, kf, vf = F.silu(conv).split([Hk * dk, Hk * dk, Hv * dv], dim=-1)
            q = l2(qf.view(T, Hk, dk)).repeat_interleave(Hv // Hk, dim=1).transpose(0, 1) * dk ** -0.5
            k = l2(kf.view(T, Hk, dk)).repeat_interleave(Hv // Hk, dim=1).transpose(0, 1)
            v = vf.view(T, Hv, dv).transpose(0, 1)
            beta = torch.sigmoid(F.linear(h, W[s + "in_proj_b.weight"])).T           # (Hv,T)
            g = (-W[s + "A_log"].exp() * F.softplus(F.linear(h, W[s + "in_proj_a.weight"])
                                                    + W[s + "dt_bias"])).T       # (Hv,T)
            o = chunked_delta_rule(q, k, v, beta, g)
            res.update({f"layers.{l}.{n}": t for n, t in
                        [("q", q), ("k", k), ("v", v), ("beta", beta), ("decay", g),
                         ("implicit", closed_form_implicit(q, k, beta, g)), ("out", o)]})
            z = F.linear(h, W[s + "in_proj_z.weight"]).view(T, Hv, dv)
            gated = norm(o.transpose(0, 1), W[s + "norm.weight"], 0.0) * F.silu(z)
            mix = F.linear(gated.reshape(T, Hv * dv), W[s + "out_proj.weight"])
        x = x + mix
        u = norm(x, W[a + "post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(u, W[a + "mlp.gate_proj.weight"])) * F.linear(u, W[a + "mlp.up_proj.weight"]),
                         W[a + "mlp.down_proj.weight"])
    head = W["model.embed_tokens.weight"] if p.tie else W["lm_head.weight"]
    res["logits"] = F.linear(norm(x, W["model.norm.weight"]), head)
    return {k: v.numpy() for k, v in res.items()}


# ---------------------------------------------------------------------------------------------
# comparison and the CLI path
# ---------------------------------------------------------------------------------------------

def context_of(cfg) -> int:
    return int(text_config(cfg)["max_position_embeddings"])


def expected_metadata(cfg) -> Dict[str, str]:
    return {"block_size": str(context_of(cfg)), "dropped": "0"}


def kinds_of_expected(expected) -> Dict[int, str]:
    out = {}
    for name in expected:
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "layers":
            l = int(parts[1])
            if parts[2] == "implicit":
                out[l] = LINEAR
            else:
                out.setdefault(l, FULL)
    return out


def _axes(name: str) -> str:
    last = name.split(".")[-1]
    if last in ("q", "k", "v", "out", "gate"):
        return " (head, t, dim)"
    if last in FULL_ONLY + ("implicit",):
        return " (head, t, s)"
    if last in ("beta", "decay"):
        return " (head, t)"
    return " (t, vocab)" if name == "logits" else ""


def check_dump(case_name, path, expected, want_meta, report: Report):
    """parity.py's rule, tensor by tensor, with the layer kind and the worst entry in each
    failing line; plus: a full-attention-only tensor (scores, scaled, masked, probs) in a
    linear layer, a linear-only one (beta, decay, implicit) in a full layer, or `capped`
    anywhere, is a failure."""
    kinds = kinds_of_expected(expected)

    def layer_of(name):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit() and int(parts[1]) in kinds:
            return int(parts[1]), parts[2]
        return None, None

    def tag(name):
        l, _ = layer_of(name)
        return "" if l is None else " [" + ("linear" if kinds[l] == LINEAR else "full") + f" layer {l}]"

    def misplaced(name):
        l, what = layer_of(name)
        if l is not None and (what == "capped" or what in (FULL_ONLY if kinds[l] == LINEAR else LINEAR_ONLY)):
            kind = "linear-attention" if kinds[l] == LINEAR else "full-attention"
            return f"present in the dump of a {kind} layer, which has no {what}"
        return None

    P.check_dump(case_name, path, expected, want_meta, report, tag, _axes, misplaced)


def describe(case: Case) -> str:
    p = make_plan(case.config)
    kinds = "".join("F" if k == FULL else "L" for k in p.kinds)
    return (f"== {case.name}: {case.config['model_type']}, T={case.n_tokens}, layers {kinds} "
            f"(L = linear, F = full); full: H={p.H} KV={p.KV} d={p.d} rot={p.rope.rot}; "
            f"linear: Hk={p.Hk} Hv={p.Hv} dk={p.dk} dv={p.dv} K={p.K}")


# ---------------------------------------------------------------------------------------------
# selftest
# ---------------------------------------------------------------------------------------------

def sanity_checks(case: Case, plan: Plan, expected, weights) -> List[Tuple[str, bool, str]]:
    checks = []
    T = case.n_tokens
    got = "".join("F" if k == FULL else "L" for k in plan.kinds)
    checks.append(("layer kinds as written by hand", got == case.kinds, got))
    checks.append(("rotated dims as written by hand", plan.rope.rot == case.rot and plan.rope.rot < plan.d,
                   f"rot={plan.rope.rot} of d={plan.d}"))
    if plan.rope.mrope_section:
        checks.append(("mrope_section sums to rot/2", sum(plan.rope.mrope_section) == plan.rope.rot // 2,
                       f"{plan.rope.mrope_section}"))
    upper = np.triu(np.ones((T, T), dtype=bool), 1)
    noted_memory = False
    for l, kind in enumerate(plan.kinds):
        g = lambda n: expected[f"layers.{l}.{n}"]
        names = {n for n in (k.split(".")[2] for k in expected if k.startswith(f"layers.{l}."))}
        if kind == LINEAR:
            Hv, dk, dv = plan.Hv, plan.dk, plan.dv
            want = {"q", "k", "v", "beta", "decay", "implicit", "out"}
            shapes = (g("q").shape == (Hv, T, dk) and g("k").shape == (Hv, T, dk) and g("v").shape == (Hv, T, dv)
                      and g("beta").shape == (Hv, T) and g("decay").shape == (Hv, T)
                      and g("implicit").shape == (Hv, T, T) and g("out").shape == (Hv, T, dv))
            checks.append((f"L{l} linear: tensors and shapes", names == want and shapes,
                           f"Hv={Hv} T={T} dk={dk} dv={dv}"))
            A, v, o = g("implicit"), g("v"), g("out")
            av_err = float(np.abs(A @ v - o).max())
            checks.append((f"L{l} A v == recurrence output", av_err < 1e-10, f"max err {av_err:.1e}"))
            cf = closed_form_implicit(torch.as_tensor(g("q")), torch.as_tensor(g("k")),
                                      torch.as_tensor(g("beta")), torch.as_tensor(g("decay"))).numpy()
            cf_err = float(np.abs(cf - A).max() / np.abs(A).max())
            checks.append((f"L{l} closed form of A == backward sweep", cf_err < 1e-10, f"rel {cf_err:.1e}"))
            checks.append((f"L{l} A zero above the diagonal", bool((A[:, upper] == 0).all()), ""))
            beta, dec = g("beta"), g("decay")
            checks.append((f"L{l} g <= 0, 0 < beta < 1", bool((dec <= 0).all() and (beta > 0).all() and (beta < 1).all()),
                           f"g in [{dec.min():.2f}, {dec.max():.2f}], beta in [{beta.min():.2f}, {beta.max():.2f}]"))
            kn, qn = np.linalg.norm(g("k"), axis=-1), np.linalg.norm(g("q"), axis=-1)
            checks.append((f"L{l} |k| ~ 1, |q| ~ dk^-1/2", bool(np.allclose(kn, 1, atol=1e-4)
                                                                 and np.allclose(qn, dk ** -0.5, atol=1e-4)),
                           f"|k| in [{kn.min():.5f}, {kn.max():.5f}]"))
            if plan.Hv > plan.Hk:
                r = plan.Hv // plan.Hk
                ok = all(np.array_equal(g("k")[j], g("k")[(j // r) * r]) for j in range(Hv))
                checks.append((f"L{l} value head j reads key head j // {r}", ok, ""))
            # the recurrence must carry memory, or decay-order misreadings could not show
            far = float(max(np.abs(A[:, t, :t - 2]).max() for t in range(3, T)) / np.abs(A).max())
            checks.append((f"L{l} memory reaches back (|A[t, s<t-2]| / max|A|)", far > 1e-2, f"{far:.3f}"))
            noted_memory = True
        else:
            H, KV, d = plan.H, plan.KV, plan.d
            want = {"q", "k", "v", "scores", "scaled", "masked", "probs", "out", "gate"}
            shapes = (g("q").shape == (H, T, d) and g("k").shape == (KV, T, d) and g("v").shape == (KV, T, d)
                      and all(g(n).shape == (H, T, T) for n in FULL_ONLY)
                      and g("out").shape == (H, T, d) and g("gate").shape == (H, T, d))
            checks.append((f"L{l} full: tensors and shapes", names == want and shapes, f"H={H} KV={KV} T={T} d={d}"))
            att = P.causal_attention_checks(l, g, T, H, KV, d)
            gt = g("gate")
            # the gate's check stands before "probs peaked", the last of the attention checks
            checks += att[:-1] + [(f"L{l} gate is a sigmoid, not saturated",
                                   bool((gt > 0).all() and (gt < 1).all() and gt.std() > 0.1),
                                   f"std {gt.std():.2f}")] + att[-1:]
            # RoPE: against the same model without it, dims >= rot untouched, pairs (i, i+rot/2)
            # keep their norms, position 0 fixed, later positions moved
            bare = reference_plan_np(replace(plan, rope_off=(l,)), weights, case.tokens)
            r = plan.rope.rot
            ok = all(P.rope_moved(expected[f"layers.{l}.{n}"], bare[f"layers.{l}.{n}"], r) for n in ("q", "k"))
            checks.append((f"L{l} RoPE: first {r} of {d} dims rotated, pairs (i, i+{r // 2}), position 0 fixed",
                           bool(ok), ""))
    if not noted_memory:
        checks.append(("case has a linear layer", False, ""))
    logit_std = float(expected["logits"].std())
    checks.append(("logits not degenerate", logit_std > 0.05, f"std {logit_std:.3f}"))
    return checks


def variants(case: Case, plan: Plan) -> List[Tuple[str, Plan]]:
    """Plausible misreadings of the architecture; each must fail the comparison."""
    out = [
        ("gate = second half of the whole q projection, not per head", replace(plan, gate_split="halves")),
        ("attention output not gated", replace(plan, gate_applied=False)),
        ("(1 + w) in the gated norm", replace(plan, gated_offset=1.0)),
        ("w instead of (1 + w) in the other RMSNorms", replace(plan, norm_offset=0.0)),
        ("no L2 norm of q and k", replace(plan, l2=False)),
        ("q scale dk^-1/2 missing", replace(plan, q_scale=False)),
        ("conv taps one step late (t-K .. t-1)", replace(plan, conv_shift=-1)),
        ("conv taps one step early (t-K+2 .. t+1, not causal)", replace(plan, conv_shift=1)),
        ("conv kernel flipped", replace(plan, conv_flip=True)),
        ("RoPE on all d dims", replace(plan, rope=Rope(
            1.0 / (plan.rope.theta ** (torch.arange(0, plan.d, 2, dtype=torch.float64) / plan.d)), plan.d,
            theta=plan.rope.theta))),
        ("RoPE on adjacent pairs (2i, 2i+1)", replace(plan, rope=replace(plan.rope, pairs="adjacent"))),
        ("decay applied after the update", replace(plan, decay="after")),
        ("delta read from the undecayed state", replace(plan, decay="read_undecayed")),
        ("A_log used without exp", replace(plan, a_exp=False)),
        ("dt_bias ignored", replace(plan, dt_bias=False)),
        ("sigmoid(z) instead of silu(z) in the gated norm", replace(plan, z_act="sigmoid")),
    ]
    if plan.Hv > plan.Hk > 1:
        out.append(("repeat (j % Hk) instead of repeat_interleave (j // (Hv/Hk))", replace(plan, lin_gqa="tile")))
    return out


def negative_checks(case, plan, weights, dump, expected, want_meta, workdir):
    T = case.n_tokens
    mut = P.Mutations(dump, expected)
    copy, mutated = mut.copy, mut.bump
    lin = plan.kinds.index(LINEAR)
    full = plan.kinds.index(FULL)
    Ln, Fn = f"layers.{lin}.", f"layers.{full}."
    last = T - 1
    scen = [("logits +2e-4 rel", mutated("logits", (last, 0), 2e-4), ["logits"]),
            ("logits +2e-6 rel (within tolerance)", mutated("logits", (last, 0), 2e-6), []),
            ("implicit +1e-3 rel", mutated(Ln + "implicit", (0, last, 1), 1e-3), [Ln + "implicit"]),
            ("implicit nonzero above the diagonal", mutated(Ln + "implicit", (0, 1, last), 1e-3),
             [Ln + "implicit"]),
            ("decay +1e-3 rel", mutated(Ln + "decay", (0, last), 1e-3), [Ln + "decay"]),
            ("beta +1e-3 rel", mutated(Ln + "beta", (0, last), 1e-3), [Ln + "beta"]),
            ("gate +1e-3 rel", mutated(Fn + "gate", (0, last, 0), 1e-3), [Fn + "gate"])]
    d = copy()
    d[Ln + "implicit"] = np.ascontiguousarray(d[Ln + "implicit"].transpose(0, 2, 1))
    scen.append(("implicit transposed", d, [Ln + "implicit"]))
    d = copy()
    d[Ln + "decay"] = np.exp(d[Ln + "decay"]).astype(np.float32)
    scen.append(("decay written as exp(g)", d, [Ln + "decay"]))
    d = copy()
    d[Ln + "q"] = (d[Ln + "q"] * np.float32(math.sqrt(plan.dk))).astype(np.float32)
    scen.append(("linear q without the dk^-1/2 scale", d, [Ln + "q"]))
    for n in ("implicit", "decay", "out"):
        d = copy()
        d.pop(Ln + n)
        scen.append((f"missing {Ln + n}", d, [Ln + n]))
    d = copy()
    d.pop(Fn + "gate")
    scen.append((f"missing {Fn}gate", d, [Fn + "gate"]))
    for n in FULL_ONLY:
        d = copy()
        d[Ln + n] = np.zeros((plan.Hv, T, T), dtype=np.float32)
        scen.append((f"{n} present in linear layer {lin}", d, [Ln + n]))
    d = copy()
    d[Fn + "implicit"] = np.zeros((plan.H, T, T), dtype=np.float32)
    scen.append((f"implicit present in full layer {full}", d, [Fn + "implicit"]))
    d = copy()
    d[Fn + "capped"] = d[Fn + "scaled"].copy()
    scen.append(("capped present (no soft-capping)", d, [Fn + "capped"]))
    d = copy()
    d[Ln + "conv"] = np.zeros((3,), dtype=np.float32)
    scen.append(("an unknown extra tensor is only reported", d, []))
    misreadings = ((desc, to_dump(reference_plan_np(vplan, weights, case.tokens)))
                   for desc, vplan in variants(case, plan))
    return P.check_negatives(case.name, workdir, dump, expected, want_meta, check_dump, scen, misreadings)


def selftest_parts(case, weights, expected, want_meta, workdir):
    plan = make_plan(case.config)
    return (alt_reference(plan, weights, case.tokens), sanity_checks(case, plan, expected, weights),
            lambda dump: negative_checks(case, plan, weights, dump, expected, want_meta, workdir))


def round_trip_note(case, model_dir, weights) -> str:
    on_disk, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    ignored = sorted(set(on_disk) - {("model.language_model." + k[6:]) if case.layout == "nested"
                                     and k.startswith("model.") else k for k in weights})
    return f" (ignored: {', '.join(ignored)})" if ignored else ""


SCRIPT = P.ConfigScript(os.path.abspath(__file__), "attnviz-hybrid-parity-", build_weights, write_model_dir,
                        load_model_dir, reference, expected_metadata, describe, lambda case: check_dump,
                        selftest_parts, round_trip_note)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def main(argv: List[str]) -> int:
    return P.config_main(SCRIPT, argv, __doc__, CASES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
