#!/usr/bin/env python3
"""Score attribution (`attnviz-cli qk`) and head composition (`heads --composition`) against a
float64 PyTorch computation written from the definitions.

Usage
-----
    /usr/bin/python3 tests/reference/qk_parity.py --cli PATH/attnviz-cli --workdir DIR

Families: gpt2 (LayerNorm, learned positions, biases), llama with grouped-query attention,
qwen3 (per-head QK-norm), gemma2 (sandwich norms with (1 + w) weights, soft-capped scores, a
sliding window, query_pre_attn_scalar) and olmo2 (norms after each branch, QK-norm over the
whole projection). Each model is random: gpt2 and llama from `attnviz-cli random`, the others
written by arch_parity.py's builders.

The split (`qk`): the reference runs the model in float64 and keeps, for every layer before
the one asked about, each head's output through its columns of the output projection, each
MLP's output (both through a post-norm whose scale is frozen at the row, where the family has
one) and the biases; with the embeddings (and gpt2's positions) these are the parts, and their
sum is the stream entering the layer (checked). Each part then goes through the layer's input
norm with the scale of the real stream at its row (LayerNorm: the part minus its own mean),
the query or key projection (the projection's bias and the norm's bias with the `bias` part),
QK-norm with the scale of the real projection, and RoPE at the row's position. The term of
query part a and key part b is scale·q_a·k_b. Checked: `parts` (names and order), every term,
`score` against the reference's scaled score (before soft-cap and mask), and `sum` = `score`;
the reference's own terms sum to its score. Usage errors (exit 2): a key after the query, a
key outside a sliding window, a layer or head out of range.

Composition: for heads h1 in l1 < l2 and h2 in l2, with W_QK = W_Q,hᵀ·W_K,h and
W_OV = W_O,h·W_V,h (Hugging Face's (out, in) weights; the layer's input-norm weight folded into
W_Q, W_K, W_V and a post-norm's weight into W_O; RoPE left out), Q = ‖W_QK2ᵀ·W_OV1‖_F,
K = ‖W_QK2·W_OV1‖_F, V = ‖W_OV2·W_OV1‖_F, each over the product of the two matrices' norms
(Elhage et al. 2021); 0 where l2 ≤ l1. The (C, C) matrices are formed here in full.

Hybrids (qwen3_5, lfm2; no float64 model here): a linear layer's value heads and a convolution
layer appear as parts, the terms sum to the score, and a linear or convolution layer is refused.

Tolerance: terms within 1e-4 × max(1, the largest |term|); composition within 1e-4. The script
checks that its comparison fails on a value moved by 1e-2. Exit status 1 on any mismatch.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arch_parity as A  # noqa: E402  (random configs, weights, Plan and the literal attention loops)
import parity as P  # noqa: E402

TOL = 1e-4
torch.set_grad_enabled(False)


# --- the models ----------------------------------------------------------------------------

class PlanNet:
    """A llama-family model (llama, qwen3, gemma2, olmo2) in float64, read as arch_parity reads it."""

    def __init__(self, model_dir, T):
        cfg, weights = A.load_model_dir(model_dir)
        self.p = A.make_plan(cfg, T)
        self.weights = weights
        self.W = P._f64(weights)
        self.L, self.H = len(self.p.layers), self.p.H

    def w(self, name):
        return self.W[name]

    def norm_w(self, name):  # the weight as applied: (1 + w) for Gemma
        return self.p.norm_offset + self.W[name]

    def rms(self, x):  # 1/rms per row of x (..., n)
        return 1.0 / torch.sqrt((x * x).mean(-1) + self.p.eps)

    def layer_qkv(self, l, h):
        """q (T, H·d), k, v (T, KV·d) of layer l from its normed input h, before QK-norm."""
        a = f"model.layers.{l}.self_attn."
        out = []
        for n in "qkv":
            y = h @ self.W[a + n + "_proj.weight"].T
            if a + n + "_proj.bias" in self.W:
                y = y + self.W[a + n + "_proj.bias"]
            out.append(y)
        return out

    def split(self, toks, target):
        """The parts of the stream entering layer `target` (name -> (T, C)) and that stream."""
        p, T = self.p, len(toks)
        H, KV, d = p.H, p.KV, p.d
        emb = torch.stack([self.W["model.embed_tokens.weight"][t] for t in toks]) * p.embed_scale
        parts = {"embed": emb}
        bias = torch.zeros(T, p.C, dtype=torch.float64)
        x = emb.clone()
        for l in range(target):
            a = f"model.layers.{l}."
            h = x if p.block == "post" else A.loop_rms_norm(x, self.W[a + "input_layernorm.weight"], p.eps, p.norm_offset)
            qf, kf, vf = self.layer_qkv(l, h)
            q, k, v = self.heads_after_norm(l, qf, kf, vf)
            ly = p.layers[l]
            if ly.rope is not None:
                q, k = (P.loop_rope(t, ly.rope.inv_freq, ly.rope.rot, factor=ly.rope.attn_factor) for t in (q, k))
            att = A.loop_attention(q, k, v, p.scale, p.attn_softcap, ly.window)
            Wo = self.W[a + "self_attn.o_proj.weight"]  # (C, H·d)
            outs = [att["out"][hh] @ Wo[:, hh * d:(hh + 1) * d].T for hh in range(H)]  # (T, C) each
            total = sum(outs)
            ob = torch.zeros(T, p.C, dtype=torch.float64)
            if p.block != "pre":  # the post-norm, its scale frozen at each row
                r = self.rms(total)[:, None] * self.norm_w(a + "post_attention_layernorm.weight")
                outs = [o * r for o in outs]
                ob = ob * r
            for hh in range(H):
                parts[f"L{l}H{hh}"] = p.residual_mult * outs[hh]
            x = x + p.residual_mult * (sum(outs) + ob)
            bias = bias + p.residual_mult * ob
            if p.block == "pre":
                hm = A.loop_rms_norm(x, self.W[a + "post_attention_layernorm.weight"], p.eps, p.norm_offset)
            elif p.block == "sandwich":
                hm = A.loop_rms_norm(x, self.W[a + "pre_feedforward_layernorm.weight"], p.eps, p.norm_offset)
            else:
                hm = x
            gate, up = hm @ self.W[a + "mlp.gate_proj.weight"].T, hm @ self.W[a + "mlp.up_proj.weight"].T
            act = P.gelu_tanh(gate) if p.act == "gelu_tanh" else P.silu(gate)
            m = (act * up) @ self.W[a + "mlp.down_proj.weight"].T
            if p.block != "pre":
                m = m * self.rms(m)[:, None] * self.norm_w(a + "post_feedforward_layernorm.weight")
            parts[f"L{l}.mlp"] = p.residual_mult * m
            x = x + p.residual_mult * m
        parts["bias"] = bias
        return parts, x

    def heads_after_norm(self, l, qf, kf, vf):
        p = self.p
        a = f"model.layers.{l}.self_attn."
        if p.qk_norm == "whole":
            qf = A.loop_rms_norm(qf, self.W[a + "q_norm.weight"], p.eps, p.norm_offset)
            kf = A.loop_rms_norm(kf, self.W[a + "k_norm.weight"], p.eps, p.norm_offset)
        q, k, v = P.heads_of(qf, p.H, p.d), P.heads_of(kf, p.KV, p.d), P.heads_of(vf, p.KV, p.d)
        if p.qk_norm == "head":
            q = A.loop_rms_norm(q, self.W[a + "q_norm.weight"], p.eps, p.norm_offset)
            k = A.loop_rms_norm(k, self.W[a + "k_norm.weight"], p.eps, p.norm_offset)
        return q, k, v

    def scaled(self, toks, l):
        return A.reference_plan(self.p, self.weights, toks)[f"layers.{l}.scaled"]

    def side(self, parts, x, l, head, row, which):
        """(P, d): every part at `row` through the frozen input norm, the projection of `which`
        ('q' or 'k'), the frozen QK-norm and RoPE at `row`."""
        p = self.p
        a = f"model.layers.{l}."
        names = list(parts)
        X = torch.stack([parts[n][row] for n in names])  # (P, C)
        if p.block != "post":
            X = X * self.rms(x[row]) * self.norm_w(a + "input_layernorm.weight")
        Wp = self.W[a + f"self_attn.{which}_proj.weight"]
        Y = X @ Wp.T  # (P, n·d)
        if a + f"self_attn.{which}_proj.bias" in self.W:
            Y[names.index("bias")] += self.W[a + f"self_attn.{which}_proj.bias"]
        d = p.d
        g = head if which == "q" else head // (p.H // p.KV)
        real = Y.sum(0)  # the real projection at the row
        if p.qk_norm == "whole":
            Y = Y * self.rms(real) * self.norm_w(a + f"self_attn.{which}_norm.weight")
        Yh = Y[:, g * d:(g + 1) * d]
        if p.qk_norm == "head":
            Yh = Yh * self.rms(real[g * d:(g + 1) * d]) * self.norm_w(a + f"self_attn.{which}_norm.weight")
        r = p.layers[l].rope
        if r is not None:
            Yh = rope_at(Yh, row, r.inv_freq, r.rot, r.attn_factor)
        return Yh

    def scale(self, l):
        return self.p.scale

    # composition: (W_Q, W_K, W_V, W_O) per head as (out, in) matrices, norm weights folded in
    def head_mats(self, l, h):
        p = self.p
        a = f"model.layers.{l}."
        d, g = p.d, h // (p.H // p.KV)
        fold = self.norm_w(a + "input_layernorm.weight") if p.block != "post" else torch.ones(p.C, dtype=torch.float64)
        Wq = self.W[a + "self_attn.q_proj.weight"][h * d:(h + 1) * d] * fold
        Wk = self.W[a + "self_attn.k_proj.weight"][g * d:(g + 1) * d] * fold
        Wv = self.W[a + "self_attn.v_proj.weight"][g * d:(g + 1) * d] * fold
        Wo = self.W[a + "self_attn.o_proj.weight"][:, h * d:(h + 1) * d]
        if p.block != "pre":
            Wo = self.norm_w(a + "post_attention_layernorm.weight")[:, None] * Wo
        return Wq, Wk, Wv, Wo


class Gpt2Net:
    """gpt2 in float64 (Hugging Face's names; Conv1D weights are (in, out))."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        _, t = P.read_config_model_dir(model_dir)
        self.W = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in P._f64(t).items()}
        self.L, self.H, self.C = c["n_layer"], c["n_head"], c["n_embd"]
        self.KV, self.d = self.H, self.C // self.H
        self.eps = c.get("layer_norm_epsilon", 1e-5)

    def ln(self, x, name):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.W[name + ".weight"] + self.W[name + ".bias"]

    def attn(self, l, x):
        """q, k, v (H, T, d) of layer l from the stream x."""
        T, C, d = x.shape[0], self.C, self.d
        qkv = self.ln(x, f"h.{l}.ln_1") @ self.W[f"h.{l}.attn.c_attn.weight"] + self.W[f"h.{l}.attn.c_attn.bias"]
        return tuple(P.heads_of(qkv[:, n * C:(n + 1) * C], self.H, d) for n in range(3))

    def split(self, toks, target):
        T, C, d = len(toks), self.C, self.d
        parts = {"embed": self.W["wte.weight"][toks].clone(), "pos": self.W["wpe.weight"][:T].clone()}
        bias = torch.zeros(T, C, dtype=torch.float64)
        x = parts["embed"] + parts["pos"]
        for l in range(target):
            q, k, v = self.attn(l, x)
            att = A.loop_attention(q, k, v, 1.0 / math.sqrt(d), None, None)
            Wo = self.W[f"h.{l}.attn.c_proj.weight"]  # (C_in = H·d, C)
            for hh in range(self.H):
                parts[f"L{l}H{hh}"] = att["out"][hh] @ Wo[hh * d:(hh + 1) * d]
                x = x + parts[f"L{l}H{hh}"]
            bo = self.W[f"h.{l}.attn.c_proj.bias"]
            x, bias = x + bo, bias + bo
            u = self.ln(x, f"h.{l}.ln_2") @ self.W[f"h.{l}.mlp.c_fc.weight"] + self.W[f"h.{l}.mlp.c_fc.bias"]
            m = P.gelu_tanh(u) @ self.W[f"h.{l}.mlp.c_proj.weight"]
            parts[f"L{l}.mlp"] = m
            bd = self.W[f"h.{l}.mlp.c_proj.bias"]
            x, bias = x + m + bd, bias + bd
        parts["bias"] = bias
        return parts, x

    def scaled(self, toks, l):
        parts, x = self.split(toks, l)
        q, k, _ = self.attn(l, x)
        return torch.stack([q[h] @ k[h].T for h in range(self.H)]) / math.sqrt(self.d)

    def side(self, parts, x, l, head, row, which):
        names = list(parts)
        X = torch.stack([parts[n][row] for n in names])  # (P, C)
        xr = x[row]
        s = 1.0 / math.sqrt(float(((xr - xr.mean()) ** 2).mean()) + self.eps)
        X = (X - X.mean(-1, keepdim=True)) * s * self.W[f"h.{l}.ln_1.weight"]
        b = names.index("bias")
        X[b] += self.W[f"h.{l}.ln_1.bias"]
        n = 0 if which == "q" else 1
        C, d = self.C, self.d
        Wc = self.W[f"h.{l}.attn.c_attn.weight"][:, n * C + head * d:n * C + (head + 1) * d]
        Y = X @ Wc
        Y[b] += self.W[f"h.{l}.attn.c_attn.bias"][n * C + head * d:n * C + (head + 1) * d]
        return Y

    def scale(self, l):
        return 1.0 / math.sqrt(self.d)

    def head_mats(self, l, h):
        C, d = self.C, self.d
        w = self.W[f"h.{l}.ln_1.weight"]
        Wc = self.W[f"h.{l}.attn.c_attn.weight"]  # (C, 3C) as x @ W
        cols = lambda n: Wc[:, n * C + h * d:n * C + (h + 1) * d].T * w  # (d, C), (out, in)
        Wo = self.W[f"h.{l}.attn.c_proj.weight"][h * d:(h + 1) * d].T  # (C, d)
        return cols(0), cols(1), cols(2), Wo


def rope_at(X, pos, inv_freq, rot, factor):
    """Each row of X (P, d) rotated as position `pos`: pairs (i, i + rot/2) by pos·inv_freq[i], times factor."""
    out = X.clone()
    half = rot // 2
    for i in range(half):
        ang = pos * float(inv_freq[i])
        c, s = math.cos(ang) * factor, math.sin(ang) * factor
        a, b = X[:, i].clone(), X[:, i + half].clone()
        out[:, i] = a * c - b * s
        out[:, i + half] = b * c + a * s
    return out


# --- checks ----------------------------------------------------------------------------------

class Checker:
    def __init__(self, quiet=False):
        self.failed = self.passed = 0
        self.quiet = quiet

    def close(self, what, ours, ref, tol=TOL):
        ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        if ours.shape != ref.shape:
            return self.fail(f"{what}: shape {ours.shape} != {ref.shape}")
        bound = tol * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
        err = float(np.abs(ours - ref).max()) if ref.size else 0.0
        if err > bound:
            return self.fail(f"{what}: max |diff| {err:.3g} > {bound:.3g}")
        self.passed += 1

    def true(self, what, ok):
        if ok:
            self.passed += 1
        else:
            self.fail(what)

    def fail(self, msg):
        self.failed += 1
        if not self.quiet:
            print("FAIL", msg)


def run_cli(cli, args):
    return subprocess.run([cli] + args, capture_output=True, text=True, timeout=300)


def cli_json(cli, args):
    r = run_cli(cli, args)
    if r.returncode != 0:
        raise SystemExit(f"attnviz-cli {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def check_qk(ck, cli, model_dir, net, toks, name, layer, head, i, j):
    what = f"{name} L{layer}H{head} q{i} k{j}"
    parts, x = net.split(toks, layer)
    ref_scaled = float(net.scaled(toks, layer)[head, i, j])
    total = sum(parts.values())
    ck.close(f"{what}: the parts sum to the stream", total, x)
    Q = net.side(parts, x, layer, head, i, "q")
    K = net.side(parts, x, layer, head, j, "k")
    terms = net.scale(layer) * (Q @ K.T)  # (P, P)
    ck.close(f"{what}: the reference's terms sum to its score", [float(terms.sum())], [ref_scaled])
    out = cli_json(cli, ["qk", "--model", model_dir, "--tokens", ",".join(map(str, toks)), "--layer", str(layer),
                         "--head", str(head), "--query", str(i), "--key", str(j), "--json"])
    ck.true(f"{what}: parts {out['parts']} != {list(parts)}", out["parts"] == list(parts))
    if out["parts"] == list(parts):
        ck.close(f"{what}: terms", out["terms"], terms.numpy())
    ck.close(f"{what}: score", [out["score"]], [ref_scaled])
    ck.close(f"{what}: sum = score", [out["sum"]], [out["score"]])


def check_usage_errors(ck, cli, model_dir, toks, name, window_layer=None, window=None):
    base = ["qk", "--model", model_dir, "--tokens", ",".join(map(str, toks))]
    T = len(toks)
    cases = [("key after query", ["--layer", "0", "--head", "0", "--query", "3", "--key", "4"], "after the query"),
             ("layer out of range", ["--layer", "99", "--head", "0", "--query", "3", "--key", "1"], "does not exist"),
             ("head out of range", ["--layer", "0", "--head", "99", "--query", "3", "--key", "1"], "does not exist"),
             ("query out of range", ["--layer", "0", "--head", "0", "--query", str(T), "--key", "1"], "outside the text")]
    if window_layer is not None:
        cases.append(("key outside the window", ["--layer", str(window_layer), "--head", "0", "--query", str(T - 1),
                                                  "--key", str(T - 1 - window)], "sliding window"))
    for what, args, needle in cases:
        r = run_cli(cli, base + args)
        ck.true(f"{name}: {what}: exit {r.returncode} (want 2), stderr {r.stderr.strip()!r}",
                r.returncode == 2 and needle in r.stderr)


def fro(m):
    return float(torch.linalg.norm(m))


def check_composition(ck, cli, model_dir, net, name):
    out = cli_json(cli, ["heads", "--model", model_dir, "--composition", "--json"])
    L, H = net.L, net.H
    mats = {(l, h): net.head_mats(l, h) for l in range(L) for h in range(H)}
    qk = {k: Wq.T @ Wk for k, (Wq, Wk, Wv, Wo) in mats.items()}  # (C, C)
    ov = {k: Wo @ Wv for k, (Wq, Wk, Wv, Wo) in mats.items()}    # (C, C)
    ref = {s: np.zeros((L, H, L, H)) for s in "qkv"}
    for l1 in range(L):
        for h1 in range(H):
            for l2 in range(l1 + 1, L):
                for h2 in range(H):
                    a, b, c = ov[(l1, h1)], qk[(l2, h2)], ov[(l2, h2)]
                    ref["q"][l1, h1, l2, h2] = fro(b.T @ a) / (fro(a) * fro(b))
                    ref["k"][l1, h1, l2, h2] = fro(b @ a) / (fro(a) * fro(b))
                    ref["v"][l1, h1, l2, h2] = fro(c @ a) / (fro(a) * fro(c))
    for s in "qkv":
        ck.close(f"{name}: composition {s}", out[s], ref[s])
    # The ratios are not all alike: the check would notice q and k swapped.
    ck.true(f"{name}: Q- and K-composition differ", float(np.abs(ref["q"] - ref["k"]).max()) > 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    probe = Checker(quiet=True)
    probe.close("probe", [1.0, 2.01], [1.0, 2.0])
    if probe.failed != 1:
        print("FAIL the comparison does not catch a moved value")
        return 1
    ck = Checker()
    toks = [3, 17, 5, 40, 22, 9, 31, 8, 17, 5]
    T = len(toks)

    # gpt2 and llama-GQA from attnviz-cli random.
    for name, preset in [("gpt2", ["--preset", "tiny-gpt2", "--layers", "3", "--seed", "5"]),
                         ("llama_gqa", ["--preset", "llama-small", "--layers", "3", "--embd", "64", "--heads", "4",
                                        "--kv-heads", "2", "--vocab", "96", "--context", "64", "--seed", "6"])]:
        model_dir = os.path.join(args.workdir, name)
        shutil.rmtree(model_dir, ignore_errors=True)
        subprocess.run([args.cli, "random"] + preset + ["--out", model_dir], check=True, capture_output=True)
        net = Gpt2Net(model_dir) if name == "gpt2" else PlanNet(model_dir, T)
        before = ck.failed
        for (l, h, i, j) in [(0, 1, 6, 2), (2, 3, 9, 9), (2, 0, 8, 2), (1, 2, 5, 0)]:
            check_qk(ck, args.cli, model_dir, net, toks, name, l, h, i, j)
        check_composition(ck, args.cli, model_dir, net, name)
        check_usage_errors(ck, args.cli, model_dir, toks, name)
        print(f"{name}: {'ok' if ck.failed == before else 'FAILED'}")

    # qwen3 (per-head QK-norm), gemma2 (sandwich norms, soft-cap, windows), olmo2 (post-norms, whole QK-norm).
    cases = [("qwen3", A.qwen3_config(layers=3), None, None),
             ("gemma2", A.gemma2_config(), 0, 5),
             ("olmo2", A.olmo2_config(num_hidden_layers=3), None, None)]
    for name, cfg, window_layer, window in cases:
        case = A.Case(name, cfg, T, 11, [None] * cfg["num_hidden_layers"], [True] * cfg["num_hidden_layers"])
        case.tokens = [t % cfg["vocab_size"] for t in toks]
        weights = A.build_weights(case)
        model_dir = os.path.join(args.workdir, name)
        shutil.rmtree(model_dir, ignore_errors=True)
        A.write_model_dir(case, model_dir, weights)
        net = PlanNet(model_dir, T)
        before = ck.failed
        tk = case.tokens
        points = [(0, 1, 6, 2), (2, 3, 9, 9), (2, 0, 8, 4), (1, 2, 5, 0)]
        if name == "gemma2":  # layers 0 and 2 slide (window 5): keys inside it there
            points = [(0, 1, 6, 2), (2, 3, 9, 9), (2, 0, 8, 4), (1, 2, 9, 0)]
        for (l, h, i, j) in points:
            check_qk(ck, args.cli, model_dir, net, tk, name, l, h, i, j)
        check_composition(ck, args.cli, model_dir, net, name)
        check_usage_errors(ck, args.cli, model_dir, tk, name, window_layer, window)
        print(f"{name}: {'ok' if ck.failed == before else 'FAILED'}")
    # Hybrids: the parts of linear (value heads) and convolution layers, terms that sum to the
    # score, and the refusal on a layer without softmax scores.
    for name, preset, part, linear_layer, soft_layer, needle in [
            ("qwen3_5", "qwen3.5-0.8b", "L0H15", 0, 3, "linear-attention"),
            ("lfm2", "lfm2-350m", "L0.conv", 0, 2, "short-convolution")]:
        model_dir = os.path.join(args.workdir, name)
        shutil.rmtree(model_dir, ignore_errors=True)
        subprocess.run([args.cli, "random", "--preset", preset, "--layers", "4", "--embd", "64", "--heads", "4",
                        "--kv-heads", "2", "--vocab", "200", "--seed", "4", "--out", model_dir], check=True,
                       capture_output=True)
        before = ck.failed
        tk = ",".join(str(t % 200) for t in toks)
        out = cli_json(args.cli, ["qk", "--model", model_dir, "--tokens", tk, "--layer", str(soft_layer), "--head", "1",
                                  "--query", "9", "--key", "4", "--json"])
        ck.true(f"{name}: {part} among the parts {out['parts']}", part in out["parts"])
        ck.close(f"{name}: sum of the terms = score", [out["sum"], float(np.sum(out["terms"]))], [out["score"]] * 2)
        r = run_cli(args.cli, ["qk", "--model", model_dir, "--tokens", tk, "--layer", str(linear_layer), "--head", "0",
                               "--query", "9", "--key", "4"])
        ck.true(f"{name}: layer {linear_layer} refused: exit {r.returncode}, {r.stderr.strip()!r}",
                r.returncode == 2 and needle in r.stderr)
        print(f"{name}: {'ok' if ck.failed == before else 'FAILED'}")
    print(f"{ck.passed} passed, {ck.failed} failed (tolerance {TOL} × max(1, |values|))")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
