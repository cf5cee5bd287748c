#!/usr/bin/env python3
"""PyTorch eager baseline for `attnviz-cli bench`: the same full forward with every matrix
recorded, and appending one token through a KV cache, on the same weights.

Usage
-----
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 tests/reference/torch_bench.py \\
        --model DIR --length T [--reps N] [--threads 2] [--json]

DIR is a Hugging Face model directory as written by `attnviz-cli random` (or a built-in
model's directory, assets/models/NAME): config.json + model.safetensors. The architectures
are those of tests/reference/parity.py (gpt2: learned positions, LayerNorm, GELU-tanh,
Conv1D; llama/qwen2: RoPE rotate-half, RMSNorm, SwiGLU, GQA with query head h reading KV
head h // (H/KV)), here in float32 and batched over heads (one (H,T,T) matmul per layer
instead of parity.py's per-head loop, which is the float64 correctness reference).

"Recording" means what attnviz records: per layer q, k, v (H/KV, T, d), scores, scaled,
masked, probs (H, T, T) and out (H, T, d) are kept as separate tensors (no in-place reuse),
plus the logits (T, V). Timings therefore include allocating and writing them.

Full forward: all T tokens from scratch, as `attnviz-cli bench` after clear_cache().
Append: the first T-1 tokens are run once, their k/v kept (the KV cache); one timed
repetition runs the last token's row only (q for 1 row against T keys) and produces the
full (H,T,T) record by copying the earlier rows into new (H,T,T) tensors and writing the new
row and the new column, which is what attnviz's trace holds after an append. Without
--no-append-record the copy is part of the timing (`append_median_ms`); the time of the
computation alone is printed as `append_compute_median_ms`.

Tokens: the same ids as attnviz-cli bench (std::mt19937(7), uniform over the vocabulary)
is not reproducible bit for bit in Python without reimplementing libstdc++'s
uniform_int_distribution; timing does not depend on the ids, so numpy's seeded generator
is used instead.

Prints one JSON object (--json) with the keys of `attnviz-cli bench --json`: model,
backend ("torch"), length, reps, median_ms, min_ms, append_median_ms, threads, gflop,
gflops_per_s, trace_mb, plus torch_version, blas (the BLAS library torch loaded) and
append_compute_median_ms. Debian's python3-torch calls the generic libblas.so.3, which is
netlib's reference BLAS (~2 GFLOP/s) unless an optimised one is installed; point
LD_LIBRARY_PATH at OpenBLAS's directory (e.g. /usr/lib/x86_64-linux-gnu/openblas-pthread
from libopenblas0-pthread) for a fair baseline: scripts/perf_table.sh does.

Only numpy and torch (Debian's python3-torch via /usr/bin/python3); the safetensors reader
is parity.py's.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import read_safetensors  # noqa: E402  (same directory)


def load(model_dir):
    """-> (arch, cfg, {canonical name: float32 tensor}); gpt2 names without 'transformer.'."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    arch = cfg["model_type"]
    if arch == "gpt2":
        tensors = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in tensors.items()}
    W = {k: torch.from_numpy(np.ascontiguousarray(v.astype(np.float32, copy=False))) for k, v in tensors.items()}
    return ("gpt2" if arch == "gpt2" else "llama"), cfg, W


def dims(arch, cfg):
    """-> dict of the dimension letters of core/model/config.h."""
    if arch == "gpt2":
        C, H = cfg["n_embd"], cfg["n_head"]
        return dict(L=cfg["n_layer"], C=C, H=H, KV=H, d=C // H, I=cfg.get("n_inner") or 4 * C,
                    V=cfg["vocab_size"], ctx=cfg["n_positions"], eps=cfg.get("layer_norm_epsilon", 1e-5))
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    return dict(L=cfg["num_hidden_layers"], C=C, H=H, KV=cfg.get("num_key_value_heads", H),
                d=cfg.get("head_dim") or C // H, I=cfg["intermediate_size"], V=cfg["vocab_size"],
                ctx=cfg["max_position_embeddings"], eps=cfg.get("rms_norm_eps", 1e-6),
                theta=float(cfg.get("rope_theta", 10000.0)), tie=cfg.get("tie_word_embeddings", True))


def forward_flops(arch, D, T):
    """The FLOP count of app/cmd_bench.cpp's forward_flops (multiply-add = 2)."""
    C, Hd, KVd, I = D["C"], D["H"] * D["d"], D["KV"] * D["d"], D["I"]
    proj = 2.0 * T * C * (Hd + 2 * KVd) + 2.0 * T * Hd * C
    attn = 2.0 * 2.0 * D["H"] * T * T * D["d"]
    mlp = 2.0 * T * C * I * (2 if arch == "gpt2" else 3)
    return D["L"] * (proj + attn + mlp) + 2.0 * T * C * D["V"]


class Model:
    """float32, batched over heads; W (in, out) or nn.Linear (out, in) as stored."""

    def __init__(self, arch, cfg, W):
        self.arch, self.cfg, self.W, self.D = arch, cfg, W, dims(arch, cfg)
        D = self.D
        if arch == "llama":
            half = D["d"] // 2
            self.inv_freq = D["theta"] ** (-2.0 * torch.arange(half, dtype=torch.float64) / D["d"])
            self.head = W["model.embed_tokens.weight"] if D["tie"] or "lm_head.weight" not in W else W["lm_head.weight"]
        else:
            self.head = W["wte.weight"]

    # --- pieces --------------------------------------------------------------------------
    def rope(self, x, pos0):
        """x (N, n, d) at positions pos0..pos0+n-1, rotate-half convention."""
        n, d = x.shape[1], x.shape[2]
        ang = torch.arange(pos0, pos0 + n, dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).float()
        sin = torch.cat([ang.sin(), ang.sin()], -1).float()
        half = d // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def norm(self, x, p):
        D, W = self.D, self.W
        if self.arch == "gpt2":
            return F.layer_norm(x, (D["C"],), W[p + ".weight"], W[p + ".bias"], D["eps"])
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + D["eps"]) * W[p + ".weight"]

    def qkv(self, l, h, pos0):
        """h (n, C) -> q (H, n, d), k (KV, n, d), v (KV, n, d), after RoPE."""
        D, W, n = self.D, self.W, h.shape[0]
        H, KV, d = D["H"], D["KV"], D["d"]
        if self.arch == "gpt2":
            p = f"h.{l}.attn.c_attn"
            qkv = torch.addmm(W[p + ".bias"], h, W[p + ".weight"])  # Conv1D (C, 3C)
            q, k, v = qkv.split(D["C"], dim=-1)
            return (q.reshape(n, H, d).transpose(0, 1), k.reshape(n, KV, d).transpose(0, 1),
                    v.reshape(n, KV, d).transpose(0, 1))
        p = f"model.layers.{l}.self_attn."
        proj = lambda name, heads: F.linear(h, W[p + name + ".weight"], W.get(p + name + ".bias")).reshape(n, heads, d).transpose(0, 1)
        q, k, v = proj("q_proj", H), proj("k_proj", KV), proj("v_proj", KV)
        return self.rope(q, pos0), self.rope(k, pos0), v

    def after_attention(self, l, x, merged):
        W = self.W
        if self.arch == "gpt2":
            p = f"h.{l}."
            x = x + torch.addmm(W[p + "attn.c_proj.bias"], merged, W[p + "attn.c_proj.weight"])
            m = F.gelu(torch.addmm(W[p + "mlp.c_fc.bias"], self.norm(x, p + "ln_2"), W[p + "mlp.c_fc.weight"]),
                       approximate="tanh")
            return x + torch.addmm(W[p + "mlp.c_proj.bias"], m, W[p + "mlp.c_proj.weight"])
        p = f"model.layers.{l}."
        x = x + F.linear(merged, W[p + "self_attn.o_proj.weight"])
        h = self.norm(x, p + "post_attention_layernorm")
        g = F.silu(F.linear(h, W[p + "mlp.gate_proj.weight"])) * F.linear(h, W[p + "mlp.up_proj.weight"])
        return x + F.linear(g, W[p + "mlp.down_proj.weight"])

    def embed(self, ids, pos0):
        W = self.W
        if self.arch == "gpt2":
            return W["wte.weight"][ids] + W["wpe.weight"][pos0:pos0 + len(ids)]
        return W["model.embed_tokens.weight"][ids]

    def first_norm(self, l):
        return f"h.{l}.ln_1" if self.arch == "gpt2" else f"model.layers.{l}.input_layernorm"

    def final_norm(self):
        return "ln_f" if self.arch == "gpt2" else "model.norm"

    # --- passes ------------------------------------------------------------------------------
    def full(self, ids, weights_only=False):
        """Every recorded matrix for T tokens -> (record, k/v cache). weights_only: keep
        only q, k, v, the attention weights (probs) and the last position's logits, the
        job a viewer needs (all heads' weights, the next-token distribution)."""
        D = self.D
        T, H, KV, d = len(ids), D["H"], D["KV"], D["d"]
        G, scale = H // KV, 1.0 / math.sqrt(d)
        above = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = self.embed(ids, 0)
        rec = {}
        for l in range(D["L"]):
            q, k, v = self.qkv(l, self.norm(x, self.first_norm(l)), 0)
            kr = k.repeat_interleave(G, dim=0) if G > 1 else k  # (H, T, d)
            vr = v.repeat_interleave(G, dim=0) if G > 1 else v
            scores = torch.matmul(q, kr.transpose(1, 2))      # (H, T, T)
            if weights_only:
                probs = torch.softmax((scores * scale).masked_fill_(above, float("-inf")), dim=-1)
                out = torch.matmul(probs, vr)                 # (H, T, d)
                rec[l] = dict(q=q, k=k, v=v, probs=probs)
                x = self.after_attention(l, x, out.transpose(0, 1).reshape(T, H * d))
                continue
            scaled = scores * scale
            masked = scaled.masked_fill(above, float("-inf"))
            probs = torch.softmax(masked, dim=-1)
            out = torch.matmul(probs, vr)                     # (H, T, d)
            rec[l] = dict(q=q.contiguous(), k=k.contiguous(), v=v.contiguous(), scores=scores, scaled=scaled,
                          masked=masked, probs=probs, out=out)
            x = self.after_attention(l, x, out.transpose(0, 1).reshape(T, H * d))
        if weights_only:
            rec["logits"] = F.linear(self.norm(x[-1:], self.final_norm()), self.head)  # (1, V)
            return rec
        rec["logits"] = F.linear(self.norm(x, self.final_norm()), self.head)  # (T, V)
        return rec

    def append(self, ids, rec, keep_record=True):
        """Runs the last id of `ids` on top of `rec` (the record of ids[:-1]) -> new record."""
        D = self.D
        T, H, KV, d = len(ids), D["H"], D["KV"], D["d"]
        G, scale, p = H // KV, 1.0 / math.sqrt(d), T - 1
        x = self.embed(ids[p:], p)  # (1, C)
        new = {}
        for l in range(D["L"]):
            old = rec[l]
            q1, k1, v1 = self.qkv(l, self.norm(x, self.first_norm(l)), p)  # (H|KV, 1, d)
            k = torch.cat([old["k"], k1], dim=1)  # (KV, T, d): the KV cache plus the new row
            v = torch.cat([old["v"], v1], dim=1)
            q = torch.cat([old["q"], q1], dim=1)
            kr = k.repeat_interleave(G, dim=0) if G > 1 else k
            vr = v.repeat_interleave(G, dim=0) if G > 1 else v
            s_row = torch.matmul(q1, kr.transpose(1, 2))                      # (H, 1, T)
            s_col = torch.matmul(old["q"], kr[:, p:].transpose(1, 2))          # (H, T-1, 1)
            sc_row = s_row * scale
            probs_row = torch.softmax(sc_row, dim=-1)                          # last row: nothing masked
            out_row = torch.matmul(probs_row, vr)                              # (H, 1, d)
            layer = dict(q=q, k=k, v=v, out=torch.cat([old["out"], out_row], dim=1))
            if keep_record:  # the trace's (H,T,T) tensors grow by a row and a column
                for name, row, col in (("scores", s_row, s_col), ("scaled", sc_row, s_col * scale),
                                       ("masked", sc_row, None), ("probs", probs_row, None)):
                    t = torch.empty(H, T, T)
                    t[:, :p, :p] = old[name]
                    t[:, p:, :] = row
                    if col is not None:
                        t[:, :p, p:] = col
                    else:
                        t[:, :p, p:] = float("-inf") if name == "masked" else 0.0
                    layer[name] = t
            new[l] = layer
            x = self.after_attention(l, x, out_row.transpose(0, 1).reshape(1, H * d))
        logits1 = F.linear(self.norm(x, self.final_norm()), self.head)         # (1, V)
        new["logits"] = torch.cat([rec["logits"], logits1], dim=0) if keep_record else logits1
        return new


def blas_library():
    """The BLAS shared library torch runs on (Debian's torch links the generic libblas.so.3:
    netlib's reference BLAS unless OpenBLAS/BLIS provides it), from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return "unknown"
    return ",".join(sorted(libs)) or "none"


def record_bytes(rec):
    n = rec["logits"].numel()
    for l, layer in rec.items():
        if l != "logits":
            n += sum(t.numel() for t in layer.values())
    return 4 * n


def check_dump(m, path):
    """This script's passes against an attnviz dump: proves it computes the same thing."""
    dump, _ = read_safetensors(path)
    ids = torch.from_numpy(dump["tokens"].astype(np.int64))
    with torch.inference_mode():
        full = m.full(ids)
        appended = m.append(ids, m.full(ids[:-1])) if len(ids) > 1 else full
    worst, bad = 0.0, []
    for which, rec in (("full", full), ("append", appended)):
        for name, ref in dump.items():
            if name == "tokens":
                continue
            if name == "logits":
                ours = rec["logits"].numpy()
            else:
                _, l, stage = name.split(".")
                ours = rec[int(l)][stage].numpy()
            fin = np.isfinite(ref)
            same_inf = np.array_equal(np.isfinite(ours), fin) and np.array_equal(ours[~fin], ref[~fin])
            rel = float(np.abs(ours[fin] - ref[fin]).max() / max(np.abs(ref[fin]).max(), 1e-6)) if fin.any() else 0.0
            worst = max(worst, rel)
            if ours.shape != ref.shape or not same_inf or rel > 1e-3:
                bad.append(f"{which} {name}: shape {ours.shape} vs {ref.shape}, -inf pattern same {same_inf}, rel {rel:.2e}")
    print("\n".join(bad) if bad else f"torch_bench matches {path} (full and append, worst rel {worst:.2e})")
    return 1 if bad else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model directory (config.json + model.safetensors)")
    ap.add_argument("--length", type=int, required=True, help="tokens T")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--weights-only", action="store_true",
                    help="full forward keeping only q, k, v, the attention weights and the last position's "
                         "logits (compare with attnviz-cli bench --last-logits); no append timing")
    ap.add_argument("--no-append-record", action="store_true",
                    help="time the append without re-laying out the (H,T,T) record")
    ap.add_argument("--check-dump", metavar="F",
                    help="instead of timing: compare this script's full forward and append with an "
                         "`attnviz-cli dump` of the same model (its tokens), rel. error <= 1e-3; exit 1 if not")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    arch, cfg, W = load(a.model)
    m = Model(arch, cfg, W)
    D = m.D
    if not 1 <= a.length <= D["ctx"]:
        print(f"torch_bench.py: --length {a.length} is outside 1 … {D['ctx']} (the model's context)", file=sys.stderr)
        return 2
    if a.check_dump:
        return check_dump(m, a.check_dump)
    ids = torch.from_numpy(np.random.default_rng(7).integers(0, D["V"], size=a.length)).long()

    full, append, compute = [], [], []
    with torch.inference_mode():
        rec = m.full(ids, a.weights_only)  # warm-up
        for _ in range(a.reps):
            t0 = time.perf_counter()
            rec = m.full(ids, a.weights_only)
            full.append((time.perf_counter() - t0) * 1e3)
        trace_bytes = record_bytes(rec)
        del rec
        if a.length > 1 and not a.weights_only:
            prefix = m.full(ids[:-1])
            m.append(ids, prefix, keep_record=not a.no_append_record)  # warm-up
            for _ in range(a.reps):
                t0 = time.perf_counter()
                new = m.append(ids, prefix, keep_record=not a.no_append_record)
                append.append((time.perf_counter() - t0) * 1e3)
                del new
            for _ in range(a.reps):
                t0 = time.perf_counter()
                new = m.append(ids, prefix, keep_record=False)
                compute.append((time.perf_counter() - t0) * 1e3)
                del new
    med, flops = statistics.median(full), forward_flops(arch, D, a.length)
    j = {"model": a.model, "backend": "torch", "length": a.length, "reps": a.reps, "median_ms": med,
         "min_ms": min(full), "append_median_ms": statistics.median(append) if append else 0.0,
         "append_compute_median_ms": statistics.median(compute) if compute else 0.0,
         "threads": torch.get_num_threads(), "gflop": flops / 1e9, "gflops_per_s": flops / 1e6 / med,
         "trace_mb": trace_bytes / 1e6, "torch_version": torch.__version__, "blas": blas_library()}
    if a.json:
        print(json.dumps(j))
    else:
        print(f"model {a.model}, torch {torch.__version__} ({j['blas']}), T={a.length}, {a.reps} reps, {j['threads']} threads\n"
              f"full forward + recording: median {med:.3f} ms, min {j['min_ms']:.3f} ms ({j['gflops_per_s']:.3f} GFLOP/s)\n"
              f"append one token (KV cache): median {j['append_median_ms']:.3f} ms "
              f"(compute only {j['append_compute_median_ms']:.3f} ms)\n"
              f"recorded matrices: {j['trace_mb']:.3f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
