#!/usr/bin/env python3
"""Trainer parity: the C++ loss and every parameter gradient vs. PyTorch autograd (float64).

Usage
-----
    /usr/bin/python3 tests/reference/train_parity.py --grad-tool PATH/attnviz_train_grad --workdir DIR

For every case the script
  1. builds a small random model with torch (seeded, float32 weights, norms and biases away
     from 1 and 0) and saves it as a Hugging Face model directory DIR/<case>/model
     (config.json + model.safetensors, HF names and layouts; gpt2 Conv1D (in, out), llama
     nn.Linear (out, in));
  2. picks a batch of B rows of T+1 token ids (inputs = row[:-1], targets = row[1:]);
  3. computes the mean cross-entropy and its gradient with torch.autograd in float64, with
     a straightforward model written here (per-head loops for GQA, rotate-half RoPE);
  4. runs  GRAD_TOOL DIR/<case>/model B T ids DIR/<case>/grads, which prints the C++ loss
     and writes the C++ gradients as a model directory with the same tensor names;
  5. compares the loss and every gradient tensor:
        rel = max|ours - ref| / max(max|ref|, 1e-6)  must be <= 1e-4
     (ours is float32 arithmetic; the reference is float64).
     The key bias of gpt2 has a true gradient of 0 (softmax is shift-invariant per row), so
     it is compared with an absolute bound of 1e-6 instead.
It also checks that the comparison fails for a gradient perturbed by 1% in one entry.
Exit status 1 if anything failed.
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from typing import Dict

import numpy as np
import torch

REL_TOL = 1e-4
FLOOR = 1e-6


def write_safetensors(path: str, tensors: Dict[str, np.ndarray]):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name].astype("<f4"))
        data = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    buf = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{name}: dtype {info['dtype']}, expected F32")
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(buf[b:e], dtype="<f4").reshape(info["shape"]).copy()
    return out


CASES = [
    # name, arch, vocab, C, layers, heads, kv_heads, inner, T, B, tie
    ("gpt2", "gpt2", 13, 24, 2, 4, 4, 40, 7, 3, True),
    ("llama_gqa_untied", "llama", 17, 32, 2, 8, 2, 48, 9, 2, False),
    ("llama_mqa_tied", "llama", 11, 24, 1, 4, 1, 36, 6, 3, True),
]


def make_case(name, arch, V, C, L, H, KV, I, T, B, tie, seed):
    g = torch.Generator().manual_seed(seed)

    def rn(*shape, std=0.3, mean=0.0):
        return (mean + std * torch.randn(*shape, generator=g, dtype=torch.float32)).numpy()

    w = {}
    d = C // H
    if arch == "gpt2":
        cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": T,
               "n_embd": C, "n_layer": L, "n_head": H, "n_inner": I, "activation_function": "gelu_new",
               "layer_norm_epsilon": 1e-5}
        w["wte.weight"] = rn(V, C, std=0.5)
        w["wpe.weight"] = rn(T, C, std=0.3)
        for l in range(L):
            p = f"h.{l}."
            w[p + "ln_1.weight"] = rn(C, std=0.2, mean=1.0)
            w[p + "ln_1.bias"] = rn(C, std=0.2)
            w[p + "attn.c_attn.weight"] = rn(C, 3 * C, std=1.0 / math.sqrt(C))
            w[p + "attn.c_attn.bias"] = rn(3 * C, std=0.2)
            w[p + "attn.c_proj.weight"] = rn(C, C, std=1.0 / math.sqrt(C))
            w[p + "attn.c_proj.bias"] = rn(C, std=0.2)
            w[p + "ln_2.weight"] = rn(C, std=0.2, mean=1.0)
            w[p + "ln_2.bias"] = rn(C, std=0.2)
            w[p + "mlp.c_fc.weight"] = rn(C, I, std=1.0 / math.sqrt(C))
            w[p + "mlp.c_fc.bias"] = rn(I, std=0.2)
            w[p + "mlp.c_proj.weight"] = rn(I, C, std=1.0 / math.sqrt(I))
            w[p + "mlp.c_proj.bias"] = rn(C, std=0.2)
        w["ln_f.weight"] = rn(C, std=0.2, mean=1.0)
        w["ln_f.bias"] = rn(C, std=0.2)
    else:
        cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V, "hidden_size": C,
               "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": H,
               "num_key_value_heads": KV, "max_position_embeddings": T, "rms_norm_eps": 1e-5,
               "rope_theta": 100.0, "tie_word_embeddings": tie, "hidden_act": "silu", "attention_bias": False}
        w["model.embed_tokens.weight"] = rn(V, C, std=0.5)
        for l in range(L):
            p = f"model.layers.{l}."
            w[p + "input_layernorm.weight"] = rn(C, std=0.2, mean=1.0)
            w[p + "self_attn.q_proj.weight"] = rn(H * d, C, std=1.5 / math.sqrt(C))
            w[p + "self_attn.k_proj.weight"] = rn(KV * d, C, std=1.5 / math.sqrt(C))
            w[p + "self_attn.v_proj.weight"] = rn(KV * d, C, std=1.0 / math.sqrt(C))
            w[p + "self_attn.o_proj.weight"] = rn(C, H * d, std=1.0 / math.sqrt(H * d))
            w[p + "post_attention_layernorm.weight"] = rn(C, std=0.2, mean=1.0)
            w[p + "mlp.gate_proj.weight"] = rn(I, C, std=1.0 / math.sqrt(C))
            w[p + "mlp.up_proj.weight"] = rn(I, C, std=1.0 / math.sqrt(C))
            w[p + "mlp.down_proj.weight"] = rn(C, I, std=1.0 / math.sqrt(I))
        w["model.norm.weight"] = rn(C, std=0.2, mean=1.0)
        if not tie:
            w["lm_head.weight"] = rn(V, C, std=1.0 / math.sqrt(C))
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, V, size=(B, T + 1))
    return cfg, w, ids


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(q, k, v, H, KV, d):
    """q (B,T,H*d), k/v (B,T,KV*d) -> (B,T,H*d); query head h reads kv head h // (H/KV)."""
    B, T, _ = q.shape
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    outs = []
    for h in range(H):
        g = h // (H // KV)
        qh, kh, vh = q[..., h * d:(h + 1) * d], k[..., g * d:(g + 1) * d], v[..., g * d:(g + 1) * d]
        s = qh @ kh.transpose(1, 2) / math.sqrt(d)
        s = s.masked_fill(mask, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ vh)
    return torch.cat(outs, dim=-1)


def rope(x, heads, d, theta):
    B, T, _ = x.shape
    half = d // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # (T, half)
    c, s = torch.cos(ang), torch.sin(ang)
    out = []
    for h in range(heads):
        xh = x[..., h * d:(h + 1) * d]
        x1, x2 = xh[..., :half], xh[..., half:]
        out.append(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1))
    return torch.cat(out, dim=-1)


def torch_loss(cfg, t, ids):
    """Mean next-token cross-entropy; t: {name: float64 tensor requiring grad}."""
    inp = torch.tensor(ids[:, :-1])
    tgt = torch.tensor(ids[:, 1:])
    B, T = inp.shape
    if cfg["model_type"] == "gpt2":
        C, H, L, eps = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["layer_norm_epsilon"]
        x = t["wte.weight"][inp] + t["wpe.weight"][:T][None]
        for l in range(L):
            p = f"h.{l}."
            h = layer_norm(x, t[p + "ln_1.weight"], t[p + "ln_1.bias"], eps)
            qkv = h @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
            q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
            a = attention(q, k, v, H, H, C // H)
            x = x + a @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
            h = layer_norm(x, t[p + "ln_2.weight"], t[p + "ln_2.bias"], eps)
            m = gelu_tanh(h @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
            x = x + m @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
        h = layer_norm(x, t["ln_f.weight"], t["ln_f.bias"], eps)
        logits = h @ t["wte.weight"].T
    else:
        C, H, KV, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
        d, eps, theta = C // H, cfg["rms_norm_eps"], cfg["rope_theta"]
        x = t["model.embed_tokens.weight"][inp]
        for l in range(L):
            p = f"model.layers.{l}."
            h = rms_norm(x, t[p + "input_layernorm.weight"], eps)
            q = rope(h @ t[p + "self_attn.q_proj.weight"].T, H, d, theta)
            k = rope(h @ t[p + "self_attn.k_proj.weight"].T, KV, d, theta)
            v = h @ t[p + "self_attn.v_proj.weight"].T
            x = x + attention(q, k, v, H, KV, d) @ t[p + "self_attn.o_proj.weight"].T
            h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps)
            gate = h @ t[p + "mlp.gate_proj.weight"].T
            up = h @ t[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(gate) * up) @ t[p + "mlp.down_proj.weight"].T
        h = rms_norm(x, t["model.norm.weight"], eps)
        head = t["lm_head.weight"] if "lm_head.weight" in t else t["model.embed_tokens.weight"]
        logits = h @ head.T
    return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


def compare(ours: np.ndarray, ref: np.ndarray, name: str):
    """-> (ok, rel or abs error, how)"""
    if ours.shape != ref.shape:
        return False, float("inf"), f"shape {ours.shape} vs {ref.shape}"
    if not np.all(np.isfinite(ours)):
        return False, float("inf"), "non-finite values"
    err = float(np.max(np.abs(ours.astype(np.float64) - ref)))
    if name.endswith("attn.c_attn.bias"):  # the k part has a zero true gradient
        C = ref.shape[0] // 3
        k_abs = float(np.max(np.abs(ours[C:2 * C])))
        scale = max(float(np.max(np.abs(ref))), FLOOR)
        rest = np.concatenate([ours[:C] - ref[:C], ours[2 * C:] - ref[2 * C:]])
        rel = float(np.max(np.abs(rest))) / scale
        return rel <= REL_TOL and k_abs <= 1e-6, rel, f"q,v parts rel; k part |max| {k_abs:.1e}"
    rel = err / max(float(np.max(np.abs(ref))), FLOOR)
    return rel <= REL_TOL, rel, "rel"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grad-tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    os.makedirs(args.workdir, exist_ok=True)
    passed = failed = 0

    def report(case, what, ok, detail):
        nonlocal passed, failed
        print(f"{case:18s} {what:45s} {detail:40s} {'ok' if ok else 'FAIL'}")
        if ok:
            passed += 1
        else:
            failed += 1

    for i, (name, arch, V, C, L, H, KV, I, T, B, tie) in enumerate(CASES):
        cdir = os.path.join(args.workdir, name)
        shutil.rmtree(cdir, ignore_errors=True)
        mdir, gdir = os.path.join(cdir, "model"), os.path.join(cdir, "grads")
        os.makedirs(mdir)
        cfg, w, ids = make_case(name, arch, V, C, L, H, KV, I, T, B, tie, seed=1000 + i)
        with open(os.path.join(mdir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(mdir, "model.safetensors"), w)

        t = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in w.items()}
        loss = torch_loss(cfg, t, ids)
        loss.backward()
        ref = {k: v.grad.numpy() for k, v in t.items()}

        cmd = [args.grad_tool, mdir, str(B), str(T), ",".join(str(int(x)) for x in ids.reshape(-1)), gdir]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            report(name, "grad tool", False, f"exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            continue
        our_loss = float(proc.stdout.strip())
        lrel = abs(our_loss - loss.item()) / abs(loss.item())
        report(name, "loss", lrel <= REL_TOL, f"ours {our_loss:.7f} ref {loss.item():.7f} rel {lrel:.1e}")
        ours = read_safetensors(os.path.join(gdir, "model.safetensors"))
        missing = set(ref) - set(ours)
        report(name, "every weight has a gradient", not missing, f"missing {sorted(missing)[:3]}" if missing else "")
        for k in sorted(ref):
            if k not in ours:
                continue
            ok, err, how = compare(ours[k], ref[k], k)
            report(name, "grad " + k, ok, f"{how} {err:.1e}")
        # the comparison can fail: 1% off in one entry of the largest gradient
        big = max(ref, key=lambda k: float(np.max(np.abs(ref[k]))))
        bad = ours[big].copy().reshape(-1)
        j = int(np.argmax(np.abs(ref[big]).reshape(-1)))
        bad[j] *= 1.01
        ok, err, _ = compare(bad.reshape(ref[big].shape), ref[big], big)
        report(name, "negative: 1% error is caught", not ok, f"rel {err:.1e}")
        if not args.keep:
            shutil.rmtree(cdir, ignore_errors=True)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
