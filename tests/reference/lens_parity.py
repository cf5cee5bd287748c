#!/usr/bin/env python3
"""The logit lens, direct logit attribution and activation patching of attnviz-cli against
a float64 PyTorch computation written from the architectures' definitions.

Usage
-----
    /usr/bin/python3 tests/reference/lens_parity.py --cli PATH/attnviz-cli --workdir DIR

For each family (gpt2; llama with grouped-query attention, 4 query heads on 2 KV heads)
the script writes a small random model with `attnviz-cli random`, reads its config.json
and model.safetensors itself, and runs the model in float64 torch with two hooks: a
head's output (before the output projection) replaced by a given (T, d) array, and one
row of the residual stream entering a layer replaced by a given vector. It then checks

  * `lens --json`: for every layer l and position i, the stream after layer l through the
    final norm and the unembedding, softmaxed: top_probs[l][i][k] equals the reference
    probability of top_ids[l][i][k], the listed probabilities are the K largest
    reference probabilities, next_prob is the reference probability of the next token,
    and next_rank lies between the number of reference logits above the next token's
    (by more than 1e-4) and the number at or above it (within 1e-4);
  * `heads --dla --json` (at a middle position, target A and A − B): the final norm's
    scale frozen at the run's value, each part of the stream (each head's output through
    its rows of the output projection, each MLP without its output bias, the embeddings,
    the biases) dotted with the frozen norm's direction; `sum` equals `logit`;
  * `patch --heads --json` and `patch --resid --json` (prompt B = A with two tokens
    changed; the default target and a logit difference at another position): `clean`,
    `other` and every cell of the grid against the reference run with that one
    replacement.

Tolerance: every compared number within 1e-4 × max(1, the largest |value| of its group)
(float32 passes of widths ≤ 256 against float64). The script also checks that its
comparison fails on a value moved by 1e-2. Exit status 1 on any mismatch.
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

TOL = 1e-4
torch.set_grad_enabled(False)


# --- the model files ---------------------------------------------------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}, this script reads F32 only")
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


class Model:
    """A gpt2 or llama model in float64, from a Hugging Face directory."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        c = self.cfg
        self.gpt2 = c["model_type"] == "gpt2"
        if self.gpt2:
            self.w = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in self.w.items()}
            self.L, self.H, self.C = c["n_layer"], c["n_head"], c["n_embd"]
            self.KV, self.eps = self.H, c["layer_norm_epsilon"]
            self.d = self.C // self.H
            self.unembed = self.w["wte.weight"]                      # tied
        else:
            self.L, self.H, self.C = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"]
            self.KV, self.eps = c["num_key_value_heads"], c["rms_norm_eps"]
            self.d = c.get("head_dim") or self.C // self.H
            self.theta = c.get("rope_theta", 10000.0)
            tied = c.get("tie_word_embeddings", False) or "lm_head.weight" not in self.w
            self.unembed = self.w["model.embed_tokens.weight" if tied else "lm_head.weight"]

    # Norms: LayerNorm (gpt2) or RMSNorm (llama), over the last axis.
    def norm(self, x, prefix):
        if self.gpt2:
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            return (x - mu) / torch.sqrt(var + self.eps) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.w[prefix + ".weight"]

    def final_norm_name(self):
        return "ln_f" if self.gpt2 else "model.norm"

    def embed(self, toks):
        if self.gpt2:
            return self.w["wte.weight"][toks] + self.w["wpe.weight"][: len(toks)]
        return self.w["model.embed_tokens.weight"][toks].clone()

    def rope(self, x):
        """x (N, T, d): rotate-half RoPE, dims (i, i + d/2) turned by angle t·θ^(−2i/d)."""
        T, d = x.shape[1], x.shape[2]
        inv = self.theta ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]          # (T, d/2)
        cos, sin = torch.cos(ang), torch.sin(ang)
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    def attention_in(self, l, h):
        """q (H, T, d), k, v (KV, T, d) of layer l from the normed stream h (T, C)."""
        T, d = h.shape[0], self.d
        if self.gpt2:
            p = f"h.{l}.attn."
            qkv = h @ self.w[p + "c_attn.weight"] + self.w[p + "c_attn.bias"]      # Conv1D: (in, out)
            q, k, v = qkv[:, : self.C], qkv[:, self.C: 2 * self.C], qkv[:, 2 * self.C:]
        else:
            p = f"model.layers.{l}.self_attn."
            q, k, v = (h @ self.w[p + n + "_proj.weight"].T for n in ("q", "k", "v"))
        split = lambda y, n: y.reshape(T, n, d).transpose(0, 1)                     # (n, T, d)
        q, k, v = split(q, self.H), split(k, self.KV), split(v, self.KV)
        if not self.gpt2:
            q, k = self.rope(q), self.rope(k)
        return q, k, v

    def out_proj(self, l):
        """(H·d, C) and the bias (C) or None: the output projection as x @ W."""
        if self.gpt2:
            return self.w[f"h.{l}.attn.c_proj.weight"], self.w[f"h.{l}.attn.c_proj.bias"]
        return self.w[f"model.layers.{l}.self_attn.o_proj.weight"].T, None

    def mlp(self, l, x):
        """The MLP branch without its output bias, and that bias (or None)."""
        if self.gpt2:
            p = f"h.{l}."
            h = self.norm(x, p + "ln_2")
            u = h @ self.w[p + "mlp.c_fc.weight"] + self.w[p + "mlp.c_fc.bias"]
            g = 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
            return g @ self.w[p + "mlp.c_proj.weight"], self.w[p + "mlp.c_proj.bias"]
        p = f"model.layers.{l}."
        h = self.norm(x, p + "post_attention_layernorm")
        gate, up = h @ self.w[p + "mlp.gate_proj.weight"].T, h @ self.w[p + "mlp.up_proj.weight"].T
        return (gate * torch.sigmoid(gate) * up) @ self.w[p + "mlp.down_proj.weight"].T, None

    def run(self, toks, head_patch=None, resid_patch=None):
        """The forward pass. head_patch: {(l, h): (T, d)} replaces those heads' outputs;
        resid_patch: (l, t, (C)) replaces the stream entering layer l at position t.
        Returns the streams entering each layer, the final stream, every head's output,
        each MLP's output (without bias) and the logits."""
        T = len(toks)
        x = self.embed(toks)
        rec = {"resid": [], "outs": [], "mlp": [], "embed": x.clone()}
        group = self.H // self.KV
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        for l in range(self.L):
            if resid_patch is not None and resid_patch[0] == l:
                x = x.clone()
                x[resid_patch[1]] = resid_patch[2]
            rec["resid"].append(x.clone())
            h = self.norm(x, f"h.{l}.ln_1" if self.gpt2 else f"model.layers.{l}.input_layernorm")
            q, k, v = self.attention_in(l, h)
            outs = []
            for hh in range(self.H):
                s = (q[hh] @ k[hh // group].T) / math.sqrt(self.d)
                s = s.masked_fill(mask, float("-inf"))
                o = torch.softmax(s, dim=-1) @ v[hh // group]                          # (T, d)
                if head_patch and (l, hh) in head_patch:
                    o = head_patch[(l, hh)].clone()
                outs.append(o)
            rec["outs"].append(torch.stack(outs))
            wo, bo = self.out_proj(l)
            x = x + torch.cat(outs, dim=-1) @ wo + (bo if bo is not None else 0)
            m, bd = self.mlp(l, x)
            rec["mlp"].append(m)
            x = x + m + (bd if bd is not None else 0)
        rec["final"] = x
        rec["logits"] = self.norm(x, self.final_norm_name()) @ self.unembed.T
        return rec

    def lens_logits(self, rec, l):
        """(T, V): the stream after layer l through the final norm and the unembedding."""
        x = rec["resid"][l + 1] if l + 1 < self.L else rec["final"]
        return self.norm(x, self.final_norm_name()) @ self.unembed.T


# --- checks ------------------------------------------------------------------------------

class Checker:
    def __init__(self, quiet=False):
        self.failed = 0
        self.passed = 0
        self.quiet = quiet

    def close(self, what, ours, ref, scale=None):
        ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        if ours.shape != ref.shape:
            return self.fail(f"{what}: shape {ours.shape}, expected {ref.shape}")
        scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0) if scale is None else scale
        err = float(np.max(np.abs(ours - ref))) if ref.size else 0.0
        if not err <= TOL * scale:
            return self.fail(f"{what}: max |ours − ref| = {err:.3g} > {TOL * scale:.3g}")
        self.passed += 1
        return True

    def true(self, what, ok):
        if not ok:
            return self.fail(what)
        self.passed += 1
        return True

    def fail(self, msg):
        if not self.quiet:
            print("FAIL", msg)
        self.failed += 1
        return False


def cli_json(cli, args):
    r = subprocess.run([cli] + args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"attnviz-cli {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return json.loads(r.stdout)


def ids(xs):
    return ",".join(str(x) for x in xs)


def metric(logits, pos, targets):
    v = float(logits[pos, targets[0]])
    return v - float(logits[pos, targets[1]]) if len(targets) > 1 else v


def check_lens(ck, cli, model_dir, m, toks, name, backend):
    top = 4
    j = cli_json(cli, ["lens", "--model", model_dir, "--tokens", ids(toks), "--top", str(top), "--json",
                       "--backend", backend])
    rec = m.run(toks)
    T = len(toks)
    ck.true(f"{name} lens: layers/positions", j["layers"] == m.L and j["positions"] == T)
    for l in range(m.L):
        z = m.lens_logits(rec, l)
        p = torch.softmax(z, dim=-1)
        for i in range(T):
            got_ids, got_p = j["top_ids"][l][i], j["top_probs"][l][i]
            ck.close(f"{name} lens L{l} i{i} top_probs", got_p, [float(p[i, t]) for t in got_ids], 1.0)
            ck.close(f"{name} lens L{l} i{i} the K largest", got_p, torch.sort(p[i], descending=True).values[:top], 1.0)
            if i + 1 < T:
                nxt = toks[i + 1]
                ck.close(f"{name} lens L{l} i{i} next_prob", j["next_prob"][l][i], float(p[i, nxt]), 1.0)
                zi, zn = z[i], float(z[i, nxt])
                lo, hi = int((zi > zn + 1e-4).sum()), int((zi >= zn - 1e-4).sum()) - 1
                r = j["next_rank"][l][i]
                ck.true(f"{name} lens L{l} i{i} next_rank {r} not in [{lo}, {hi}]", lo <= r <= hi)


def check_dla(ck, cli, model_dir, m, toks, name, pos, targets, backend):
    args = ["heads", "--model", model_dir, "--tokens", ids(toks), "--dla", "--position", str(pos), "--json",
            "--backend", backend]
    if targets:
        args += ["--target-ids", ids(targets)]
    j = cli_json(cli, args)
    rec = m.run(toks)
    if not targets:
        targets = [int(torch.argmax(rec["logits"][pos]))]
    ck.true(f"{name} dla target_ids {j['target_ids']} != {targets}", j["target_ids"] == targets)
    U = m.unembed
    u = U[targets[0]] - (U[targets[1]] if len(targets) > 1 else 0)                    # (C)
    xf = rec["final"][pos]
    w_f = m.w[m.final_norm_name() + ".weight"]
    centred = (xf - xf.mean()) if m.gpt2 else xf
    s = 1.0 / math.sqrt(float((centred ** 2).mean()) + m.eps)                       # frozen scale
    g = s * w_f * u
    if m.gpt2:
        g = g - g.mean()                       # LayerNorm's mean subtraction, linear in each part
    share = lambda part: float(part @ g)
    heads, mlps, rest = [], [], 0.0
    for l in range(m.L):
        wo, bo = m.out_proj(l)
        heads.append([share(rec["outs"][l][h][pos] @ wo[h * m.d:(h + 1) * m.d]) for h in range(m.H)])
        mlps.append(share(rec["mlp"][l][pos]))
        if bo is not None:
            rest += share(bo)
        if m.gpt2:
            rest += share(m.w[f"h.{l}.mlp.c_proj.bias"])
    if m.gpt2:
        rest += float(m.w["ln_f.bias"] @ u)
    embed = share(rec["embed"][pos])
    logit = metric(rec["logits"], pos, targets)
    total = embed + rest + sum(mlps) + sum(sum(r) for r in heads)
    ck.close(f"{name} dla: the reference's parts sum to its logit", total, logit)
    sc = max(1.0, abs(logit), max(abs(v) for r in heads for v in r))
    for key, ref in (("logit", logit), ("sum", logit), ("heads", heads), ("mlp", mlps), ("embed", embed),
                     ("rest", rest)):
        ck.close(f"{name} dla {key}", j[key], ref, sc)
    ck.close(f"{name} dla norm_scale", j["norm_scale"], s, max(1.0, s))


def check_patch(ck, cli, model_dir, m, a, b, name, pos, targets):
    base = ["patch", "--model", model_dir, "--tokens", ids(a), "--other-tokens", ids(b), "--json"]
    if pos is not None:
        base += ["--position", str(pos)]
    if targets:
        base += ["--target-ids", ids(targets)]
    p = len(a) - 1 if pos is None else pos
    ra, rb = m.run(a), m.run(b)
    want = targets or [int(torch.argmax(ra["logits"][p]))]
    for kind in ("heads", "resid"):
        j = cli_json(cli, base + ["--" + kind])
        ck.true(f"{name} patch --{kind}: metric {j['metric']}",
                j["metric"] == ("logit_diff" if len(want) > 1 else "logit") and j["target_ids"] == want)
        clean, other = metric(ra["logits"], p, want), metric(rb["logits"], p, want)
        if kind == "heads":
            grid = [[metric(m.run(a, head_patch={(l, h): rb["outs"][l][h]})["logits"], p, want) for h in range(m.H)]
                    for l in range(m.L)]
        else:
            grid = [[metric(m.run(a, resid_patch=(l, t, rb["resid"][l][t]))["logits"], p, want)
                     for t in range(len(a))] for l in range(m.L)]
        sc = max(1.0, abs(clean), abs(other), float(np.max(np.abs(grid))))
        ck.close(f"{name} patch --{kind} clean", j["clean"], clean, sc)
        ck.close(f"{name} patch --{kind} other", j["other"], other, sc)
        ck.close(f"{name} patch --{kind} grid", j[kind], grid, sc)
        moved = float(np.max(np.abs(np.asarray(grid) - clean)))
        ck.true(f"{name} patch --{kind}: the reference grid moves ({moved:.3g}), so the check means something",
                moved > 1e-3)


FAMILIES = [
    ("gpt2", ["--preset", "tiny-gpt2", "--layers", "3", "--seed", "5"]),
    ("llama_gqa", ["--preset", "llama-small", "--layers", "3", "--embd", "64", "--heads", "4", "--kv-heads", "2",
                   "--vocab", "96", "--context", "64", "--seed", "6"]),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"],
                    help="the backend of the lens and attribution runs (patching runs on the CPU only)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ck = Checker()
    # The comparison can fail: a value moved by 1e-2 is caught (and not counted).
    probe = Checker(quiet=True)
    probe.close("probe", [1.0, 2.01], [1.0, 2.0])
    if probe.failed != 1:
        print("FAIL the comparison does not catch a moved value")
        return 1
    a = [3, 17, 5, 60, 22, 9, 41, 8]
    b = list(a)
    b[2], b[5] = 71, 30
    for name, preset in FAMILIES:
        model_dir = os.path.join(args.workdir, name)
        shutil.rmtree(model_dir, ignore_errors=True)
        subprocess.run([args.cli, "random"] + preset + ["--out", model_dir], check=True, capture_output=True)
        m = Model(model_dir)
        before = ck.failed
        check_lens(ck, args.cli, model_dir, m, a, name, args.backend)
        check_dla(ck, args.cli, model_dir, m, a, name, 5, [], args.backend)
        check_dla(ck, args.cli, model_dir, m, a, name, 7, [11, 40], args.backend)
        if args.backend == "cpu":
            check_patch(ck, args.cli, model_dir, m, a, b, name, None, [])
            check_patch(ck, args.cli, model_dir, m, a, b, name, 6, [11, 40])
        print(f"{name}: L={m.L} H={m.H} KV={m.KV} d={m.d}: {'ok' if ck.failed == before else 'FAILED'}")
    print(f"{ck.passed} passed, {ck.failed} failed (tolerance {TOL} × max(1, |values|))")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
