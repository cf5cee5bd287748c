#!/usr/bin/env python3
"""Numerical parity of the attnviz dump for OpenAI's GPT-OSS (attention sinks, a mixture of
experts, YaRN without truncation, alternating windows): C++ engine vs. a float64 torch reference
written from the model's own definition, transformers' models/gpt_oss (modeling_gpt_oss.py,
configuration_gpt_oss.py) and its YaRN in modeling_rope_utils.py.

Usage
-----
    /usr/bin/python3 tests/reference/gpt_oss_parity.py --cli PATH/attnviz-cli --workdir DIR [--backend cpu|gpu]

Architecture (model_type "gpt_oss", GptOssForCausalLM; tensors under model., lm_head.weight):
  blocks     x = embed_tokens[ids]; per layer x += o_proj(attn(RMSNorm(x, input_layernorm)))
             and x += moe(RMSNorm(x, post_attention_layernorm)); logits = RMSNorm(x, norm) @
             lm_head^T. RMSNorm: x * rsqrt(mean(x^2) + eps) * w.
  attention  q/k/v/o_proj with biases; rotate-half RoPE over head_dim with YaRN (below), cos
             and sin times the attention factor; scale head_dim^-1/2; causal mask, and for
             "sliding_attention" layers keys j > i - sliding_window only; then each row gets
             one more column, the head's sink logit (self_attn.sinks (H)); softmax over all
             T + 1 columns; the sink column dropped: probs = the first T (rows sum to 1 - sink).
  YaRN       rope_scaling {rope_type yarn, factor f, beta_fast, beta_slow, truncate,
             original_max_position_embeddings m}: low/high = d·ln(m / (beta·2π)) / (2 ln θ)
             for beta_fast / beta_slow, floored / ceiled only when truncate (GPT-OSS: false),
             clamped to [0, d − 1]; ramp_i = clamp((i − low) / (high − low), 0, 1);
             inv_freq_i = θ^(−2i/d) · (ramp_i / f + 1 − ramp_i); attention factor 0.1 ln f + 1.
  experts    router: logits = x·Wᵀ + b (E); the num_experts_per_tok largest; softmax over those.
             Expert e: gate_up = x @ gate_up_proj[e] + gate_up_proj_bias[e] (2I, columns
             interleaved: gate = [..., ::2], up = [..., 1::2]); gate ≤ 7 (swiglu_limit),
             −7 ≤ up ≤ 7; glu = gate·σ(1.702·gate); y = ((up + 1)·glu) @ down_proj[e] +
             down_proj_bias[e]; the layer's output is Σ weight_e · y_e.

The dump (attnviz-cli dump) must hold, per layer l: q, k (after RoPE), v, scores, probs, out,
sink (H, T) = the softmax's sink column, router (T, E), experts (T, K) int32 by descending
weight, expert_weights (T, K); and logits (T, V). Rule: parity.py's (max|ours − ref| /
max|ref| ≤ 1e-4; integers exact). The script also checks that probs' rows sum to 1 − sink,
that the clamps were reached and that several windows were crossed, and that plausible
misreadings of the definition (sinks ignored, softmax over all experts before the top k, gate
and up read as halves, no clamp, YaRN truncated) each fail the comparison.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity as P  # noqa: E402

torch.set_default_dtype(torch.float64)

CFG = {
    "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "vocab_size": 61, "hidden_size": 32,
    "intermediate_size": 12, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "num_local_experts": 6, "num_experts_per_tok": 2, "experts_per_token": 2,
    "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "rope_theta": 150000.0, "max_position_embeddings": 16384, "initial_context_length": 4096,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                     "original_max_position_embeddings": 4096},
    "rms_norm_eps": 1e-5, "attention_bias": True, "swiglu_limit": 7.0, "tie_word_embeddings": False,
    "hidden_act": "silu", "router_aux_loss_coef": 0.9, "output_router_logits": False,
}
TOKENS = [3, 17, 42, 5, 17, 42, 9, 60, 1, 17, 42, 5, 33, 0]


def build_weights(cfg, seed=7):
    g = torch.Generator().manual_seed(seed)
    C, I, H, KV, d, E, V = (cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                            "num_key_value_heads", "head_dim", "num_local_experts", "vocab_size"))
    r = lambda *shape, sd=1.0, mean=0.0: (torch.randn(*shape, generator=g) * sd + mean)  # noqa: E731
    w = {"model.embed_tokens.weight": r(V, C), "model.norm.weight": r(C, sd=0.1, mean=1.0), "lm_head.weight": r(V, C, sd=0.2)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = r(C, sd=0.1, mean=1.0)
        w[p + "post_attention_layernorm.weight"] = r(C, sd=0.1, mean=1.0)
        for n, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
            w[p + f"self_attn.{n}_proj.weight"] = r(rows, C, sd=1.5 / math.sqrt(C))
            w[p + f"self_attn.{n}_proj.bias"] = r(rows, sd=0.1)
        w[p + "self_attn.o_proj.weight"] = r(C, H * d, sd=1 / math.sqrt(H * d))
        w[p + "self_attn.o_proj.bias"] = r(C, sd=0.02)
        w[p + "self_attn.sinks"] = r(H, sd=1.0, mean=0.5)
        w[p + "mlp.router.weight"] = r(E, C, sd=1.5 / math.sqrt(C))
        w[p + "mlp.router.bias"] = r(E, sd=0.1)
        w[p + "mlp.experts.gate_up_proj"] = r(E, C, 2 * I, sd=3.5 / math.sqrt(C))  # large: the clamps are reached
        w[p + "mlp.experts.gate_up_proj_bias"] = r(E, 2 * I, sd=0.1)
        w[p + "mlp.experts.down_proj"] = r(E, I, C, sd=0.3 / math.sqrt(I))
        w[p + "mlp.experts.down_proj_bias"] = r(E, C, sd=0.02)
    return w


def yarn(cfg, truncate=None):
    """-> (inv_freq (d/2), attention factor), as modeling_rope_utils' _compute_yarn_parameters."""
    rs, d, base = cfg["rope_scaling"], cfg["head_dim"], cfg["rope_theta"]
    factor, orig = rs["factor"], rs["original_max_position_embeddings"]
    att = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    trunc = rs.get("truncate", True) if truncate is None else truncate

    def dim_of(turns):
        return d * math.log(orig / (turns * 2 * math.pi)) / (2 * math.log(base))
    low, high = dim_of(rs["beta_fast"]), dim_of(rs["beta_slow"])
    if trunc:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    i = torch.arange(d // 2, dtype=torch.float64)
    ramp = ((i - low) / (high - low)).clamp(0, 1)
    extrap = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    return extrap / factor * ramp + extrap * (1 - ramp), att


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def reference(cfg, w, toks, sinks=True, topk_first=True, interleaved=True, clamp=True, truncate=None):
    C, I, H, KV, d = (cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                      "num_key_value_heads", "head_dim"))
    E, K, eps, W = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["rms_norm_eps"], cfg["sliding_window"]
    T = len(toks)
    inv_freq, att = yarn(cfg, truncate)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, d/2)
    cos, sin = torch.cos(ang) * att, torch.sin(ang) * att

    def rope(x):  # (n, T, d): halves (first, second) as _apply_rotary_emb
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

    out = {}
    x = w["model.embed_tokens.weight"][toks]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        lin = lambda n: h @ w[p + f"self_attn.{n}_proj.weight"].T + w[p + f"self_attn.{n}_proj.bias"]  # noqa: E731
        q = rope(lin("q").reshape(T, H, d).transpose(0, 1))
        k = rope(lin("k").reshape(T, KV, d).transpose(0, 1))
        v = lin("v").reshape(T, KV, d).transpose(0, 1)
        kr, vr = k.repeat_interleave(H // KV, 0), v.repeat_interleave(H // KV, 0)
        scores = q @ kr.transpose(1, 2)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        mask = j > i
        if cfg["layer_types"][l] == "sliding_attention":
            mask = mask | (j <= i - W)
        masked = (scores * d ** -0.5).masked_fill(mask, float("-inf"))
        sink_col = w[p + "self_attn.sinks"].reshape(H, 1, 1).expand(H, T, 1)
        if not sinks:
            sink_col = torch.full_like(sink_col, float("-inf"))
        comb = torch.cat([masked, sink_col], -1)
        comb = comb - comb.max(-1, keepdim=True).values
        full = torch.softmax(comb, -1)
        probs, sink = full[..., :-1], full[..., -1]
        o = probs @ vr
        x = x + o.transpose(0, 1).reshape(T, H * d) @ w[p + "self_attn.o_proj.weight"].T + w[p + "self_attn.o_proj.bias"]
        h2 = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        logits = h2 @ w[p + "mlp.router.weight"].T + w[p + "mlp.router.bias"]  # (T, E)
        if topk_first:
            top_v, top_i = torch.topk(logits, K, dim=-1)
            top_w = torch.softmax(top_v, dim=1)
        else:  # misreading: softmax over every expert, then the k largest (not renormalised)
            top_w, top_i = torch.topk(torch.softmax(logits, dim=1), K, dim=-1)
        moe = torch.zeros(T, C)
        reached = 0
        for t in range(T):
            for kk in range(K):
                e = int(top_i[t, kk])
                gu = h2[t] @ w[p + "mlp.experts.gate_up_proj"][e] + w[p + "mlp.experts.gate_up_proj_bias"][e]
                gate, up = (gu[::2], gu[1::2]) if interleaved else (gu[:I], gu[I:])
                reached += int((gate > 7).sum() + (up.abs() > 7).sum())
                if clamp:
                    gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
                glu = gate * torch.sigmoid(gate * 1.702)
                y = ((up + 1) * glu) @ w[p + "mlp.experts.down_proj"][e] + w[p + "mlp.experts.down_proj_bias"][e]
                moe[t] += top_w[t, kk] * y
        x = x + moe
        L = f"layers.{l}."
        out.update({L + "q": q, L + "k": k, L + "v": v, L + "scores": scores, L + "probs": probs, L + "out": o,
                    L + "sink": sink, L + "router": logits, L + "expert_weights": top_w})
        out[L + "experts"] = top_i.to(torch.int32)
        out["_reached"] = out.get("_reached", 0) + reached
    out["logits"] = rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T
    return out


def compare(dump, ref, report, label):
    ok_all = True
    for name, r in ref.items():
        if name.startswith("_"):
            continue
        if name not in dump:
            if report is not None:
                report.check(f"{label}: {name} in the dump", False, "missing")
            ok_all = False
            continue
        rr = r.numpy()
        ok, max_abs, rel, problem = P.compare_tensor(dump[name], rr if rr.dtype.kind in "iu" else rr.astype(np.float64))
        if report is not None:
            report.check(f"{label}: {name}", ok, problem or f"rel {rel:.1e}")
        ok_all &= ok
    return ok_all


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, what, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
        self.failed += not ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--backend", choices=["cpu", "gpu"],
                    help="pass --backend to dump, and require the dump's metadata to name it")
    ap.add_argument("--write-model", metavar="DIR", help="only write the test model (config.json, model.safetensors) "
                    "to DIR, with --tokenizer's tokenizer.json and vocabulary, for the GUI's checks")
    ap.add_argument("--tokenizer", help="with --write-model: a tokenizer.json to copy in (the vocabulary grows to it)")
    if "--write-model" in sys.argv:
        ap._actions[1].required = False  # --cli
        ap._actions[2].required = False  # --workdir
    a = ap.parse_args()
    if a.write_model:
        cfg = dict(CFG)
        os.makedirs(a.write_model, exist_ok=True)
        if a.tokenizer:
            tok = json.load(open(a.tokenizer, encoding="utf-8"))
            ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
            cfg["vocab_size"] = max(ids) + 1
            with open(os.path.join(a.write_model, "tokenizer.json"), "w", encoding="utf-8") as f:
                json.dump(tok, f)
        with open(os.path.join(a.write_model, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        P.write_safetensors(os.path.join(a.write_model, "model.safetensors"),
                            {k: v.float().numpy() for k, v in build_weights(cfg).items()})
        return 0
    os.makedirs(a.workdir, exist_ok=True)
    model = os.path.join(a.workdir, "gpt_oss")
    os.makedirs(model, exist_ok=True)
    w = build_weights(CFG)
    with open(os.path.join(model, "config.json"), "w") as f:
        json.dump(CFG, f, indent=1)
    P.write_safetensors(os.path.join(model, "model.safetensors"), {k: v.float().numpy() for k, v in w.items()})
    w32 = {k: v.float().double() for k, v in w.items()}  # what the file holds, in float64
    out = os.path.join(a.workdir, "gpt_oss.dump.safetensors")
    cmd = [a.cli, "dump", "--model", model, "--tokens", ",".join(map(str, TOKENS)), "--out", out]
    if a.backend:
        cmd[2:2] = ["--backend", a.backend]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    rep = Report()
    rep.check("dump runs", r.returncode == 0, r.stderr[-2000:])
    if r.returncode != 0:
        return 1
    dump, meta = P.read_safetensors(out)
    if a.backend:
        rep.check("the dump names backend " + a.backend, (meta or {}).get("backend") == a.backend, str(meta))
    ref = reference(CFG, w32, TOKENS)
    compare(dump, ref, rep, "gpt_oss")
    # Invariants the comparison alone would not show.
    for l in range(CFG["num_hidden_layers"]):
        s = dump[f"layers.{l}.probs"].astype(np.float64).sum(-1) + dump[f"layers.{l}.sink"]
        rep.check(f"layer {l}: probs rows sum to 1 - sink", float(np.abs(s - 1).max()) < 1e-5, f"{np.abs(s - 1).max():.2e}")
        rep.check(f"layer {l}: the sink takes mass", float(dump[f"layers.{l}.sink"].mean()) > 0.01)
    rep.check("the experts' clamps were reached", ref["_reached"] > 0, "no pre-activation beyond 7: the clamp is untested")
    rep.check("the tokens cross the window", len(TOKENS) > CFG["sliding_window"] + 2)
    inv_t, _ = yarn(CFG, truncate=True)
    inv_f, _ = yarn(CFG, truncate=False)
    rep.check("truncate changes the frequencies", float((inv_t - inv_f).abs().max()) > 1e-6)
    # Misreadings of the definition: each must fail the comparison.
    for label, kw in (("sinks ignored", {"sinks": False}), ("softmax before the top k", {"topk_first": False}),
                      ("gate | up as halves", {"interleaved": False}), ("no clamp", {"clamp": False}),
                      ("YaRN truncated", {"truncate": True})):
        bad = reference(CFG, w32, TOKENS, **kw)
        rep.check(f"misreading fails: {label}", not compare(dump, bad, None, label))
    print(f"{rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
