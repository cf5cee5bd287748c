#!/usr/bin/env python3
"""Numerical parity test for the attnviz dump: C++ engine vs. a float64 torch reference.

Usage
-----
    /usr/bin/python3 tests/reference/parity.py --cli PATH/attnviz-cli --workdir DIR [--keep]
    /usr/bin/python3 tests/reference/parity.py --selftest [--workdir DIR] [--keep]

Optional: --cases name1,name2 (run a subset), --timeout SECONDS (per CLI call),
--backend cpu|gpu (passed on to `dump`; the dump's metadata must then name that backend,
so a GPU run that silently fell back to the CPU fails).

For every case in CASES the script
  1. builds a small random model with torch (seeded, float32 weights) and saves it as a
     Hugging Face model directory DIR/<case>/ (config.json + model.safetensors);
  2. computes every pinned tensor of the dump in float64 with a straightforward
     reference implementation (per-head loop, explicit formulas);
  3. runs  CLI dump --model DIR/<case> --tokens 3,1,4,... [--block-size N]
                   --out DIR/<case>/ours.safetensors
     (a non-zero exit code counts as a failure; its stderr is printed);
  4. reads ours.safetensors and compares it tensor by tensor, then checks __metadata__.

It prints one line per tensor (case, name, shape, max abs err, relative err, ok/FAIL) and
finally a line "N passed, M failed"; the exit status is 1 if anything failed, else 0.
Without --keep the case directories are removed at the end.

Dump format (what the CLI must write; T tokens in window, H query heads, KV kv heads,
d head size, V vocab; float32 unless noted):
    tokens               (T,)      int32   ids in the window
    layers.{l}.q         (H,T,d)   queries as used in the dot product (after RoPE for llama)
    layers.{l}.k         (KV,T,d)  keys as used (after RoPE)
    layers.{l}.v         (KV,T,d)  values
    layers.{l}.scores    (H,T,T)   q @ k^T, unscaled, full matrix (also above the diagonal)
    layers.{l}.scaled    (H,T,T)   scores / sqrt(d), full matrix
    layers.{l}.masked    (H,T,T)   scaled with -inf where j > i
    layers.{l}.probs     (H,T,T)   softmax(masked), rows sum to 1, 0 above the diagonal
    layers.{l}.out       (H,T,d)   probs @ v (query head h uses kv head h // (H/KV))
    logits               (T,V)
    __metadata__: string map with at least model, backend, block_size, dropped.
Window: a token list longer than block_size is cut to its LAST block_size tokens, whose
positions restart at 0; dropped = number of tokens cut off; block_size defaults to the
model context (n_positions / max_position_embeddings).

Comparison rule (per tensor)
----------------------------
  * the tensor must exist and have exactly the expected shape; dtype must be F32 (I32 for
    tokens);
  * tokens must be equal exactly;
  * no NaN anywhere in ours;
  * the infinity pattern must be identical: wherever the reference is -inf ours must be
    exactly -inf, and wherever the reference is finite ours must be finite;
  * over the finite entries:
        rel = max|ours - ref| / max(max|ref|, 1e-6)   must be <= 1e-4.
  * __metadata__ must contain model, backend, block_size, dropped, all strings, with
    block_size and dropped equal to the expected decimal values.
Extra tensors in the dump are reported but not failed.

Ablation cases (Case.ablate = "L:H,...", Case.ablate_mode = "zero" | "mean") pass
--ablate/--ablate-mode to the CLI; the reference then replaces those heads' `out` (H,T,d)
rows by 0 or by the head's mean over the T positions before the output projection, so
every later layer and the logits follow from the replaced outputs. The metadata must then
carry ablate and ablate_mode. (--selftest skips them: its second implementation has no
ablation.)

--selftest needs no CLI: for each case it writes the model directory, computes the
reference, cross-checks it against a second, vectorised implementation (torch.nn.functional,
complex-number RoPE, repeat_interleave GQA), checks invariants (probs rows sum to 1, -inf
exactly above the diagonal, out == probs @ v with the GQA mapping, ...), writes the reference
as a float32 dump, reads it back and compares it with the rule above. It then checks that the
comparison CAN fail (perturbed values, broken -inf pattern, NaN, missing tensor, wrong shape,
wrong dtype, wrong metadata, failing CLI) and runs the full CLI path end to end against a fake
CLI, which is this script invoked as `parity.py --fake-cli dump ...` (it loads the model
directory from disk and writes the reference dump).
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

REL_TOL = 1e-4
SCALE_FLOOR = 1e-6
PER_LAYER = ("q", "k", "v", "scores", "scaled", "masked", "probs", "out")
META_KEYS = ("model", "backend", "block_size", "dropped")


# ---------------------------------------------------------------------------------------------
# safetensors reader / writer
# ---------------------------------------------------------------------------------------------

_ST_TO_NP = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_NP_TO_ST = {dt: code for code, dt in _ST_TO_NP.items()}


def st_code(dtype: np.dtype) -> str:
    """safetensors dtype code of a numpy dtype (e.g. float32 -> 'F32')."""
    return _NP_TO_ST.get(np.dtype(dtype).newbyteorder("<"), str(dtype))


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[dict] = None):
    """Write {name: array} (+ optional __metadata__, written as given) to a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))
        data = arr.tobytes()
        header[name] = {"dtype": st_code(arr.dtype), "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)  # pad so the data buffer starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for data in blobs:
            f.write(data)


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """Read a safetensors file -> ({name: array}, metadata). Raises ValueError if malformed."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("file shorter than 8 bytes")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise ValueError(f"header length {n} exceeds file size {len(raw)}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    buf = memoryview(raw)[8 + n:]
    tensors = {}
    for name, info in header.items():
        code = info["dtype"]
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if code == "BF16":
            itemsize, dt = 2, np.dtype("<u2")
        elif code in _ST_TO_NP:
            dt = _ST_TO_NP[code]
            itemsize = dt.itemsize
        else:
            raise ValueError(f"{name}: unsupported dtype {code}")
        if not 0 <= begin <= end <= len(buf) or end - begin != count * itemsize:
            raise ValueError(f"{name}: bad data_offsets {[begin, end]} for shape {list(shape)} {code}")
        arr = np.frombuffer(buf[begin:end], dtype=dt, count=count).reshape(shape).copy()
        if code == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = arr
    return tensors, metadata


# ---------------------------------------------------------------------------------------------
# test cases
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    arch: str                     # "gpt2" | "llama" | "qwen2"
    config: dict                  # config.json contents
    n_tokens: int                 # length of the token list given to the CLI
    block_size: Optional[int]     # passed as --block-size when not None
    seed: int
    prefix: str = ""              # gpt2 only: "" or "transformer."
    ablate: str = ""              # "L:H,..." heads ablated (--ablate), "" for none
    ablate_mode: str = "zero"     # --ablate-mode
    tokens: List[int] = field(default_factory=list)

    def __post_init__(self):
        rng = np.random.RandomState(self.seed)
        self.tokens = [int(t) for t in rng.randint(0, self.config["vocab_size"], self.n_tokens)]

    @property
    def context(self) -> int:
        c = self.config
        return c["n_positions"] if self.arch == "gpt2" else c["max_position_embeddings"]

    @property
    def effective_block_size(self) -> int:
        return self.block_size if self.block_size is not None else self.context


def gpt2_config(vocab, n_positions, n_embd, n_layer, n_head, n_inner=None):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": vocab, "n_positions": n_positions, "n_ctx": n_positions,
        "n_embd": n_embd, "n_layer": n_layer, "n_head": n_head, "n_inner": n_inner,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": True, "torch_dtype": "float32",
    }


def llama_config(model_type, vocab, hidden, inter, n_layer, n_head, n_kv, max_pos,
                 rope_theta, tie, rms_eps, head_dim=None):
    cfg = {
        "architectures": ["Qwen2ForCausalLM" if model_type == "qwen2" else "LlamaForCausalLM"],
        "model_type": model_type, "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": n_layer,
        "num_attention_heads": n_head, "num_key_value_heads": n_kv,
        "max_position_embeddings": max_pos, "rms_norm_eps": rms_eps, "rope_theta": rope_theta,
        "tie_word_embeddings": tie, "hidden_act": "silu", "torch_dtype": "float32",
    }
    if model_type == "llama":
        cfg["attention_bias"] = False
        cfg["mlp_bias"] = False
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    return cfg


CASES = [
    Case("gpt2_plain", "gpt2", gpt2_config(37, 32, 48, 2, 4), n_tokens=11, block_size=None,
         seed=101, prefix=""),
    Case("gpt2_prefix_window", "gpt2", gpt2_config(23, 16, 30, 1, 3, n_inner=50), n_tokens=20,
         block_size=9, seed=202, prefix="transformer."),
    Case("llama_gqa", "llama",
         llama_config("llama", 41, 64, 96, 2, 8, 2, 64, 10000.0, False, 1e-5, head_dim=8),
         n_tokens=17, block_size=None, seed=303),
    Case("llama_mqa_tied_t1", "llama",
         llama_config("llama", 29, 36, 50, 1, 6, 1, 16, 500.0, True, 1e-6),
         n_tokens=1, block_size=None, seed=404),
    Case("qwen2_bias_window", "qwen2",
         llama_config("qwen2", 19, 32, 40, 2, 4, 2, 24, 1000000.0, False, 1e-6),
         n_tokens=30, block_size=None, seed=505),
    Case("gpt2_ablate_zero", "gpt2", gpt2_config(37, 32, 48, 3, 4), n_tokens=12, block_size=None,
         seed=606, ablate="0:1,2:3", ablate_mode="zero"),
    # rope_scaling: llama3 with d = 16 puts frequencies in all three bands (kept, blended,
    # divided by factor); linear divides them all.
    Case("llama3_rope_scaling", "llama",
         dict(llama_config("llama", 41, 64, 96, 2, 4, 2, 256, 10000.0, True, 1e-5, head_dim=16),
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
         n_tokens=40, block_size=None, seed=808),
    Case("llama_linear_rope_scaling", "llama",
         dict(llama_config("llama", 41, 64, 96, 1, 4, 4, 128, 500.0, False, 1e-5),
              rope_scaling={"type": "linear", "factor": 2.0}),
         n_tokens=25, block_size=None, seed=909),
    Case("llama_gqa_ablate_mean", "llama",
         llama_config("llama", 41, 64, 96, 2, 8, 2, 64, 10000.0, False, 1e-5, head_dim=8),
         n_tokens=15, block_size=None, seed=707, ablate="0:5,1:0,1:1", ablate_mode="mean"),
]


def case_ablation(case: Case):
    """(set of (layer, head), mode) of an ablation case, or None."""
    if not case.ablate:
        return None
    return ({tuple(int(x) for x in item.split(":")) for item in case.ablate.split(",")}, case.ablate_mode)


def ablate_out(out, layer: int, ablation):
    """out (H,T,d) of `layer`: the ablated heads' rows set to 0 (zero) or to the head's
    mean over the T positions (mean)."""
    if not ablation:
        return out
    heads, mode = ablation
    out = out.clone()
    for (l, h) in heads:
        if l == layer:
            out[h] = 0.0 if mode == "zero" else out[h].mean(dim=0, keepdim=True).expand_as(out[h])
    return out


# ---------------------------------------------------------------------------------------------
# random weights (float32; canonical names = HF names, gpt2 without the "transformer." prefix)
# ---------------------------------------------------------------------------------------------

def _randn(gen, shape, std, mean=0.0) -> torch.Tensor:
    return mean + std * torch.randn(*shape, generator=gen, dtype=torch.float32)


def build_gpt2_weights(cfg, gen) -> Dict[str, torch.Tensor]:
    C, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    inner = cfg["n_inner"] or 4 * C
    qk_std = math.sqrt(3.0 / C)  # scaled scores get std ~3 -> clearly peaked softmax rows
    w = {"wte.weight": _randn(gen, (V, C), 0.05),           # (V,C)
         "wpe.weight": _randn(gen, (P, C), 0.02)}           # (P,C)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = _randn(gen, (C,), 0.1, 1.0)
        w[p + "ln_1.bias"] = _randn(gen, (C,), 0.05)
        # Conv1D layout (in, out): y = x @ W + b, output packs q | k | v
        w[p + "attn.c_attn.weight"] = torch.cat(
            [_randn(gen, (C, C), qk_std), _randn(gen, (C, C), qk_std), _randn(gen, (C, C), 0.15)],
            dim=1)                                          # (C,3C)
        w[p + "attn.c_attn.bias"] = _randn(gen, (3 * C,), 0.05)
        w[p + "attn.c_proj.weight"] = _randn(gen, (C, C), 0.1)
        w[p + "attn.c_proj.bias"] = _randn(gen, (C,), 0.02)
        w[p + "ln_2.weight"] = _randn(gen, (C,), 0.1, 1.0)
        w[p + "ln_2.bias"] = _randn(gen, (C,), 0.05)
        w[p + "mlp.c_fc.weight"] = _randn(gen, (C, inner), 0.15)    # (C,inner)
        w[p + "mlp.c_fc.bias"] = _randn(gen, (inner,), 0.05)
        w[p + "mlp.c_proj.weight"] = _randn(gen, (inner, C), 0.1)   # (inner,C)
        w[p + "mlp.c_proj.bias"] = _randn(gen, (C,), 0.02)
    w["ln_f.weight"] = _randn(gen, (C,), 0.1, 1.0)
    w["ln_f.bias"] = _randn(gen, (C,), 0.05)
    return w


def _llama_dims(cfg):
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or C // H
    return C, H, KV, d


def build_llama_weights(cfg, gen, qkv_bias: bool) -> Dict[str, torch.Tensor]:
    C, H, KV, d = _llama_dims(cfg)
    V, I = cfg["vocab_size"], cfg["intermediate_size"]
    qk_std = math.sqrt(3.0 / C)
    w = {"model.embed_tokens.weight": _randn(gen, (V, C), 0.03)}     # (V,C)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = _randn(gen, (C,), 0.1, 1.0)
        # nn.Linear layout (out, in): y = x @ W^T (+ b)
        w[p + "self_attn.q_proj.weight"] = _randn(gen, (H * d, C), qk_std)
        w[p + "self_attn.k_proj.weight"] = _randn(gen, (KV * d, C), qk_std)
        w[p + "self_attn.v_proj.weight"] = _randn(gen, (KV * d, C), 0.15)
        w[p + "self_attn.o_proj.weight"] = _randn(gen, (C, H * d), 0.1)
        if qkv_bias:
            w[p + "self_attn.q_proj.bias"] = _randn(gen, (H * d,), 0.1)
            w[p + "self_attn.k_proj.bias"] = _randn(gen, (KV * d,), 0.1)
            w[p + "self_attn.v_proj.bias"] = _randn(gen, (KV * d,), 0.1)
        w[p + "post_attention_layernorm.weight"] = _randn(gen, (C,), 0.1, 1.0)
        w[p + "mlp.gate_proj.weight"] = _randn(gen, (I, C), 0.15)
        w[p + "mlp.up_proj.weight"] = _randn(gen, (I, C), 0.15)
        w[p + "mlp.down_proj.weight"] = _randn(gen, (C, I), 0.1)
    w["model.norm.weight"] = _randn(gen, (C,), 0.1, 1.0)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = _randn(gen, (V, C), 0.1)
    return w


def build_weights(case: Case) -> Dict[str, np.ndarray]:
    gen = torch.Generator().manual_seed(case.seed)
    if case.arch == "gpt2":
        w = build_gpt2_weights(case.config, gen)
    else:
        w = build_llama_weights(case.config, gen, qkv_bias=(case.arch == "qwen2"))
    return {k: v.numpy().astype(np.float32) for k, v in w.items()}


def write_model_dir(case: Case, model_dir: str, weights: Dict[str, np.ndarray]):
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(case.config, f, indent=2)
    on_disk = {case.prefix + k: v for k, v in weights.items()}
    write_safetensors(os.path.join(model_dir, "model.safetensors"), on_disk, {"format": "pt"})


def load_model_dir(model_dir: str) -> Tuple[str, dict, Dict[str, np.ndarray]]:
    """Load a model directory written above -> (arch, config, canonical weights)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    arch = cfg["model_type"]
    if arch == "gpt2":
        tensors = {k[len("transformer."):] if k.startswith("transformer.") else k: v
                   for k, v in tensors.items()}
    return arch, cfg, tensors


# ---------------------------------------------------------------------------------------------
# reference implementation (float64, straightforward)
# ---------------------------------------------------------------------------------------------

def window_tokens(tokens: List[int], block_size: int) -> Tuple[List[int], int]:
    """nanoGPT's idx[:, -block_size:] -> (kept tokens, number dropped)."""
    kept = list(tokens[-block_size:]) if len(tokens) > block_size else list(tokens)
    return kept, len(tokens) - len(kept)


def _f64(weights) -> Dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in weights.items()}


def layer_norm(x, w, b, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance
    return (x - mean) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + torch.exp(-x))


def rope_inv_freq(cfg, d):
    """(d/2,) float64: theta^(-2i/d) after config.json's rope_scaling, written the way
    Hugging Face's _compute_llama3_parameters / linear scaling describe it (torch.where
    over the bands), not as attnviz's loop."""
    theta = float(cfg["rope_theta"])
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        return inv_freq / rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return torch.where(medium, smoothed, scaled)
    return inv_freq


def rope_rotate_half(x, inv_freq):
    """x: (N,T,d) -> RoPE with positions 0..T-1, HF rotate-half convention."""
    _, T, d = x.shape
    half = d // 2
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T,d/2)
    cos = torch.cat([torch.cos(angle), torch.cos(angle)], dim=-1)              # (T,d)
    sin = torch.cat([torch.sin(angle), torch.sin(angle)], dim=-1)              # (T,d)
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def attention_per_head(q, k, v) -> Dict[str, torch.Tensor]:
    """q: (H,T,d), k/v: (KV,T,d) -> scores/scaled/masked/probs (H,T,T), out (H,T,d)."""
    H, T, d = q.shape
    group = H // k.shape[0]
    above = torch.ones(T, T, dtype=torch.bool).triu(1)  # True where j > i
    res = {name: [] for name in ("scores", "scaled", "masked", "probs", "out")}
    for h in range(H):
        kv = h // group
        scores = q[h] @ k[kv].T                          # (T,T)
        scaled = scores / math.sqrt(d)
        masked = scaled.masked_fill(above, float("-inf"))
        e = torch.exp(masked - masked.max(dim=-1, keepdim=True).values)
        probs = e / e.sum(dim=-1, keepdim=True)
        for name, val in (("scores", scores), ("scaled", scaled), ("masked", masked),
                          ("probs", probs), ("out", probs @ v[kv])):
            res[name].append(val)
    return {name: torch.stack(vals) for name, vals in res.items()}


def reference_gpt2(cfg, weights, toks: List[int], ablation=None) -> Dict[str, torch.Tensor]:
    W = _f64(weights)
    T, C, H = len(toks), cfg["n_embd"], cfg["n_head"]
    d, eps = C // H, cfg["layer_norm_epsilon"]
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": torch.tensor(toks, dtype=torch.int32)}
    x = W["wte.weight"][ids] + W["wpe.weight"][:T]                       # (T,C)
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # (T,3C)
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, H, d).permute(1, 0, 2)
                   for j in range(3))                                   # (H,T,d) each
        att = attention_per_head(q, k, v)
        att["out"] = ablate_out(att["out"], l, ablation)
        res.update({f"layers.{l}.{n}": t for n, t in
                    [("q", q), ("k", k), ("v", v)] + list(att.items())})
        merged = att["out"].permute(1, 0, 2).reshape(T, C)               # (T,C)
        x = x + merged @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        m = gelu_tanh(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        x = x + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    res["logits"] = layer_norm(x, W["ln_f.weight"], W["ln_f.bias"], eps) @ W["wte.weight"].T
    return res


def reference_llama(cfg, weights, toks: List[int], ablation=None) -> Dict[str, torch.Tensor]:
    W = _f64(weights)
    C, H, KV, d = _llama_dims(cfg)
    T, eps, theta = len(toks), cfg["rms_norm_eps"], float(cfg["rope_theta"])
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": torch.tensor(toks, dtype=torch.int32)}

    def linear(x, name, n_heads):  # (T,C) -> (n_heads,T,d)
        y = x @ W[name + ".weight"].T
        if name + ".bias" in W:
            y = y + W[name + ".bias"]
        return y.reshape(T, n_heads, d).permute(1, 0, 2)

    x = W["model.embed_tokens.weight"][ids]                              # (T,C)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = rope_rotate_half(linear(h, p + "self_attn.q_proj", H), rope_inv_freq(cfg, d))   # (H,T,d)
        k = rope_rotate_half(linear(h, p + "self_attn.k_proj", KV), rope_inv_freq(cfg, d))  # (KV,T,d)
        v = linear(h, p + "self_attn.v_proj", KV)                           # (KV,T,d)
        att = attention_per_head(q, k, v)
        att["out"] = ablate_out(att["out"], l, ablation)
        res.update({f"layers.{l}.{n}": t for n, t in
                    [("q", q), ("k", k), ("v", v)] + list(att.items())})
        merged = att["out"].permute(1, 0, 2).reshape(T, H * d)           # (T,H*d)
        x = x + merged @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        gate = silu(h @ W[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    res["logits"] = rms_norm(x, W["model.norm.weight"], eps) @ head.T    # (T,V)
    return res


def reference(arch, cfg, weights, toks, ablation=None) -> Dict[str, np.ndarray]:
    """Expected dump tensors: float64 arrays (tokens int32), in dump order."""
    fn = reference_gpt2 if arch == "gpt2" else reference_llama
    return {k: v.numpy() for k, v in fn(cfg, weights, toks, ablation).items()}


def expected_metadata(block_size: int, dropped: int) -> Dict[str, str]:
    return {"block_size": str(block_size), "dropped": str(dropped)}


# ---------------------------------------------------------------------------------------------
# second, vectorised implementation (selftest only: cross-checks the reference)
# ---------------------------------------------------------------------------------------------

def _alt_attention(q, k, v):
    """q (H,T,d), k/v (KV,T,d); GQA via repeat_interleave like HF's repeat_kv."""
    H, T, d = q.shape
    k_rep = k.repeat_interleave(H // k.shape[0], dim=0)                  # (H,T,d)
    v_rep = v.repeat_interleave(H // v.shape[0], dim=0)
    scores = torch.matmul(q, k_rep.transpose(-2, -1))
    scaled = scores * (1.0 / math.sqrt(d))
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    masked = scaled.masked_fill(~allowed, float("-inf"))
    probs = F.softmax(masked, dim=-1)
    return {"scores": scores, "scaled": scaled, "masked": masked, "probs": probs,
            "out": torch.matmul(probs, v_rep)}


def alt_gpt2(cfg, weights, toks):
    W = _f64(weights)
    T, C, H = len(toks), cfg["n_embd"], cfg["n_head"]
    eps = cfg["layer_norm_epsilon"]
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": ids.to(torch.int32)}
    x = F.embedding(ids, W["wte.weight"]) + F.embedding(torch.arange(T), W["wpe.weight"])
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = F.linear(h, W[p + "attn.c_attn.weight"].T, W[p + "attn.c_attn.bias"])
        q, k, v = (t.view(T, H, C // H).transpose(0, 1) for t in qkv.split(C, dim=-1))
        att = _alt_attention(q, k, v)
        res.update({f"layers.{l}.{n}": t for n, t in
                    [("q", q), ("k", k), ("v", v)] + list(att.items())})
        y = att["out"].transpose(0, 1).reshape(T, C)
        x = x + F.linear(y, W[p + "attn.c_proj.weight"].T, W[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        h = F.gelu(F.linear(h, W[p + "mlp.c_fc.weight"].T, W[p + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + F.linear(h, W[p + "mlp.c_proj.weight"].T, W[p + "mlp.c_proj.bias"])
    res["logits"] = F.linear(F.layer_norm(x, (C,), W["ln_f.weight"], W["ln_f.bias"], eps),
                             W["wte.weight"])
    return {k: v.numpy() for k, v in res.items()}


def _alt_rope(x, freqs):
    """Complex-number RoPE: (x1 + i x2) * e^{i pos w}, halves as real / imaginary parts."""
    _, T, d = x.shape
    half = d // 2
    angle = torch.outer(torch.arange(T, dtype=torch.float64), freqs)
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1)


def alt_llama(cfg, weights, toks):
    W = _f64(weights)
    C, H, KV, d = _llama_dims(cfg)
    T, eps, theta = len(toks), cfg["rms_norm_eps"], float(cfg["rope_theta"])
    ids = torch.tensor(toks, dtype=torch.long)
    res = {"tokens": ids.to(torch.int32)}

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def proj(x, name, n):
        return F.linear(x, W[name + ".weight"], W.get(name + ".bias")).view(T, n, d).transpose(0, 1)

    x = F.embedding(ids, W["model.embed_tokens.weight"])
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.self_attn."
        h = norm(x, W[f"model.layers.{l}.input_layernorm.weight"])
        q = _alt_rope(proj(h, p + "q_proj", H), rope_inv_freq(cfg, d))
        k = _alt_rope(proj(h, p + "k_proj", KV), rope_inv_freq(cfg, d))
        v = proj(h, p + "v_proj", KV)
        att = _alt_attention(q, k, v)
        res.update({f"layers.{l}.{n}": t for n, t in
                    [("q", q), ("k", k), ("v", v)] + list(att.items())})
        x = x + F.linear(att["out"].transpose(0, 1).reshape(T, H * d), W[p + "o_proj.weight"])
        m = f"model.layers.{l}.mlp."
        h = norm(x, W[f"model.layers.{l}.post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(h, W[m + "gate_proj.weight"]))
                         * F.linear(h, W[m + "up_proj.weight"]), W[m + "down_proj.weight"])
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    res["logits"] = F.linear(norm(x, W["model.norm.weight"]), head)
    return {k: v.numpy() for k, v in res.items()}


# ---------------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------------

def compare_tensor(ours: np.ndarray, ref: np.ndarray, tol: float = REL_TOL):
    """Apply the comparison rule -> (ok, max_abs, rel, problem-or-empty)."""
    if ours.shape != ref.shape:
        return False, float("nan"), float("nan"), f"shape {list(ours.shape)} != expected {list(ref.shape)}"
    if ref.dtype.kind in "iu":  # exact integer comparison (tokens)
        if ours.dtype.kind not in "iu":
            return False, float("nan"), float("nan"), "not an integer tensor"
        diff = np.abs(ours.astype(np.int64) - ref.astype(np.int64))
        max_abs = float(diff.max()) if diff.size else 0.0
        return max_abs == 0, max_abs, max_abs, "" if max_abs == 0 else "values differ"
    o, r = ours.astype(np.float64), ref.astype(np.float64)
    problems = []
    if np.isnan(o).any():
        problems.append(f"{int(np.isnan(o).sum())} NaN")
    ref_fin = np.isfinite(r)
    bad_inf = int((o[~ref_fin] != r[~ref_fin]).sum()) + int((~np.isfinite(o[ref_fin])).sum())
    if bad_inf:
        problems.append(f"inf pattern differs at {bad_inf} entries")
    both = ref_fin & np.isfinite(o)
    max_abs = float(np.abs(o[both] - r[both]).max()) if both.any() else 0.0
    scale = max(float(np.abs(r[ref_fin]).max()) if ref_fin.any() else 0.0, SCALE_FLOOR)
    rel = max_abs / scale
    if rel > tol:
        problems.append(f"rel {rel:.3e} > {tol:g}")
    return not problems, max_abs, rel, "; ".join(problems)


class Report:
    """Counts passes / failures and prints one line per checked item."""

    def __init__(self, quiet: bool = False):
        self.passed, self.failed, self.quiet = 0, 0, quiet
        self.failed_items: List[Tuple[str, str]] = []

    def add(self, case: str, name: str, ok: bool, detail: str):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failed_items.append((case, name))
        if not self.quiet:
            print(f"{case:<20} {name:<18} {detail}  {'ok' if ok else 'FAIL'}")

    def tensor(self, case, name, shape, max_abs, rel, ok, problem="", tag=""):
        shape_s = "(" + ",".join(str(s) for s in shape) + ")"
        detail = f"{shape_s:<12} max_abs={max_abs:.3e} rel={rel:.3e}{tag}"
        self.add(case, name, ok, detail + (f"  [{problem}]" if problem else ""))

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


def check_metadata(meta: dict, want: Dict[str, str]) -> List[str]:
    problems = []
    for key in META_KEYS:
        if key not in meta:
            problems.append(f"missing key {key!r}")
        elif not isinstance(meta[key], str):
            problems.append(f"{key!r} is not a string")
    for key, val in want.items():
        if key in meta and meta[key] != val:
            problems.append(f"{key}={meta[key]!r}, expected {val!r}")
        elif key.startswith("ablate") and key not in meta:  # an ablated run must say so
            problems.append(f"missing key {key!r}")
    return problems


def check_dump(case: str, path: str, expected: Dict[str, np.ndarray], want_meta: Dict[str, str],
               report: Report, tag=None, axes=None, misplaced=None):
    """Compare the dump at `path` with the expected tensors and metadata. The scripts with
    several kinds of layer (hybrid_parity.py, lfm2_parity.py) pass tag(name) -> a suffix
    naming the tensor's layer kind, axes(name) -> the axes of its entries (a failing float
    tensor's line then names its worst entry, see worst_entry), and misplaced(name) -> None,
    or why an extra tensor must not be in the dump (it then fails)."""
    try:
        ours, meta = read_safetensors(path)
    except Exception as e:  # missing / unreadable file counts as one failure
        report.add(case, "<dump file>", False, f"cannot read {path}: {e}")
        return
    tag = tag or (lambda name: "")
    for name, ref in expected.items():
        if name not in ours:
            report.add(case, name, False, f"{'-':<12} missing from dump{tag(name)}")
            continue
        arr = ours[name]
        ok, max_abs, rel, problem = compare_tensor(arr, ref)
        want_code = "I32" if name == "tokens" else "F32"
        if st_code(arr.dtype) != want_code:
            ok = False
            problem = "; ".join(filter(None, [problem, f"dtype {st_code(arr.dtype)} != {want_code}"]))
        if axes and not ok and arr.shape == ref.shape and ref.dtype.kind == "f" and arr.dtype.kind == "f":
            problem = "; ".join(filter(None, [problem, worst_entry(arr, ref, axes(name))]))
        report.tensor(case, name, arr.shape, max_abs, rel, ok, problem, tag(name))
    wrong = []
    for name in sorted(set(ours) - set(expected)):
        why = misplaced(name) if misplaced else None
        if why:
            wrong.append(name)
            report.add(case, name, False, f"{'-':<12} {why}")
    extra = sorted(set(ours) - set(expected) - set(wrong))
    if extra and not report.quiet:
        print(f"{case:<20} (extra tensors ignored: {', '.join(extra)})")
    problems = check_metadata(meta, want_meta)
    shown = {k: meta.get(k) for k in META_KEYS}
    report.add(case, "__metadata__", not problems,
               json.dumps(shown) + (f"  [{'; '.join(problems)}]" if problems else ""))


def worst_entry(ours: np.ndarray, ref: np.ndarray, axes: str = "") -> str:
    """Where the largest error of a float tensor is, with both values (shapes equal); `axes`
    names the index positions, e.g. " (head, t, dim)"."""
    o, r = ours.astype(np.float64), ref.astype(np.float64)
    bad = np.isnan(o) | (np.isfinite(r) != np.isfinite(o)) | (~np.isfinite(r) & (o != r))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"first bad entry at {list(idx)}{axes}: ours={o[idx]!r} ref={r[idx]!r} "
                f"({int(bad.sum())} such)")
    fin = np.isfinite(r)
    err = np.zeros_like(r)
    err[fin] = np.abs(o[fin] - r[fin])
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    return f"worst at {list(idx)}{axes}: ours={o[idx]:.6g} ref={r[idx]:.6g}"


# ---------------------------------------------------------------------------------------------
# CLI mode
# ---------------------------------------------------------------------------------------------

def prepare_case(case: Case, workdir: str):
    """Write DIR/<case>/ and compute the expectation -> (model_dir, expected, want_meta)."""
    model_dir = os.path.join(workdir, case.name)
    weights = build_weights(case)
    write_model_dir(case, model_dir, weights)
    toks, dropped = window_tokens(case.tokens, case.effective_block_size)
    expected = reference(case.arch, case.config, weights, toks, case_ablation(case))
    meta = expected_metadata(case.effective_block_size, dropped)
    if case.ablate:
        meta.update({"ablate": case.ablate, "ablate_mode": case.ablate_mode})
    return model_dir, expected, meta


CLI_BACKEND: Optional[str] = None  # --backend, passed on to the CLI when given


def cli_command(cli: str, case: Case, model_dir: str, out: str) -> List[str]:
    cmd = [cli, "dump", "--model", model_dir, "--tokens", ",".join(str(t) for t in case.tokens)]
    if case.block_size is not None:
        cmd += ["--block-size", str(case.block_size)]
    if CLI_BACKEND:
        cmd += ["--backend", CLI_BACKEND]
    if case.ablate:
        cmd += ["--ablate", case.ablate, "--ablate-mode", case.ablate_mode]
    return cmd + ["--out", out]


def run_cli_case(case: Case, cli: str, workdir: str, report: Report, timeout: float):
    model_dir, expected, want_meta = prepare_case(case, workdir)
    toks, dropped = window_tokens(case.tokens, case.effective_block_size)
    if not report.quiet:
        print(f"== {case.name}: {case.arch}, {len(case.tokens)} tokens, "
              f"block_size {case.effective_block_size}, T={len(toks)}, dropped {dropped}")
    out = os.path.join(model_dir, "ours.safetensors")
    if os.path.exists(out):
        os.remove(out)
    cmd = cli_command(cli, case, model_dir, out)
    if CLI_BACKEND:
        want_meta = {**want_meta, "backend": CLI_BACKEND}
    run_and_check(case.name, cmd, out, expected, want_meta, report, timeout, check_dump)


def run_and_check(name, cmd, out, expected, want_meta, report, timeout, check) -> None:
    """Runs the CLI command `cmd` (which writes the dump `out`); a failure to run or a
    non-zero exit is one failed entry of `report`, else check(name, out, expected, want_meta,
    report) compares the dump. arch_parity.py runs its cases through this too."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        report.add(name, "<cli>", False, f"could not run {' '.join(cmd)}: {e}")
        return
    if proc.returncode != 0:
        if not report.quiet:
            print(f"command: {' '.join(cmd)}\nstderr:\n{proc.stderr.rstrip()}")
        report.add(name, "<cli>", False, f"exit code {proc.returncode}")
        return
    check(name, out, expected, want_meta, report)


def run_cli_cases(cases, cli, workdir, report, timeout, run_one=None):
    """run_one(case, cli, workdir, report, timeout) for every case (default: this script's
    run_cli_case; arch_parity.py passes its own)."""
    for case in cases:
        (run_one or run_cli_case)(case, cli, workdir, report, timeout)


# ---------------------------------------------------------------------------------------------
# fake CLI (used by --selftest): `parity.py --fake-cli dump --model D --tokens ... --out F`
# ---------------------------------------------------------------------------------------------

def fake_cli_args(prog: str, argv: List[str], **extra) -> argparse.Namespace:
    """The fake CLI's `dump --model D --tokens ... --out F`, plus `extra` options
    (--name=add_argument keywords, with _ for -)."""
    ap = argparse.ArgumentParser(prog=prog + " --fake-cli")
    ap.add_argument("command", choices=["dump"])
    for name in ("--model", "--tokens", "--out"):
        ap.add_argument(name, required=True)
    for name, kw in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), **kw)
    return ap.parse_args(argv)


def fake_cli_main(argv: List[str]) -> int:
    a = fake_cli_args("parity.py", argv, block_size={"type": int})
    arch, cfg, weights = load_model_dir(a.model)
    context = cfg["n_positions"] if arch == "gpt2" else cfg["max_position_embeddings"]
    block_size = a.block_size or context
    toks, dropped = window_tokens([int(t) for t in a.tokens.split(",")], block_size)
    dump = {k: v.astype(np.int32 if k == "tokens" else np.float32)
            for k, v in reference(arch, cfg, weights, toks).items()}
    meta = {"model": a.model, "backend": "python-reference"}
    meta.update(expected_metadata(block_size, dropped))
    write_safetensors(a.out, dump, meta)
    return 0


# ---------------------------------------------------------------------------------------------
# selftest
# ---------------------------------------------------------------------------------------------

def to_dump(expected: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {k: v.astype(np.int32 if k == "tokens" else np.float32) for k, v in expected.items()}


def sanity_checks(case: Case, expected, weights, toks) -> List[Tuple[str, bool, str]]:
    """Invariants of the reference itself -> [(check, ok, detail)]."""
    checks = []
    cfg = case.config
    if case.arch == "gpt2":
        H, KV = cfg["n_head"], cfg["n_head"]
        d = cfg["n_embd"] // H
    else:
        _, H, KV, d = _llama_dims(cfg)
    T = len(toks)
    above = np.triu(np.ones((T, T), dtype=bool), 1)
    n_layers = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    wb, wd = window_tokens(case.tokens, case.effective_block_size)
    checks.append(("window", list(expected["tokens"]) == wb and wb == case.tokens[wd:]
                   and len(wb) == min(len(case.tokens), case.effective_block_size),
                   f"T={T} dropped={wd}"))
    for l in range(n_layers):
        g = lambda n: expected[f"layers.{l}.{n}"]
        q, k, v = g("q"), g("k"), g("v")
        shapes_ok = (q.shape == (H, T, d) and k.shape == (KV, T, d) and v.shape == (KV, T, d)
                     and all(g(n).shape == (H, T, T) for n in ("scores", "scaled", "masked", "probs"))
                     and g("out").shape == (H, T, d))
        checks.append((f"L{l} shapes", shapes_ok, f"H={H} KV={KV} T={T} d={d}"))
        probs, masked = g("probs"), g("masked")
        row_err = float(np.abs(probs.sum(-1) - 1).max())
        checks.append((f"L{l} probs rows sum to 1", row_err < 1e-12 and (probs[:, above] == 0).all()
                       and (probs >= 0).all(), f"max |sum-1| = {row_err:.1e}"))
        mask_ok = (np.isneginf(masked[:, above]).all() and np.isfinite(masked[:, ~above]).all()
                   and (masked[:, ~above] == g("scaled")[:, ~above]).all())
        checks.append((f"L{l} masked -inf exactly above diag", bool(mask_ok), ""))
        scale_err = float(np.abs(g("scaled") - g("scores") / math.sqrt(d)).max())
        checks.append((f"L{l} scaled == scores/sqrt(d)", scale_err < 1e-12, f"{scale_err:.1e}"))
        scores_ok = np.allclose(g("scores"), q @ np.repeat(k, H // KV, axis=0).transpose(0, 2, 1),
                                rtol=0, atol=1e-12)
        checks.append((f"L{l} scores == q @ k^T", bool(scores_ok), ""))
        # GQA: query head h uses kv head h // (H/KV), i.e. HF repeat_kv / repeat_interleave
        out_ref = probs @ np.repeat(v, H // KV, axis=0)
        out_err = float(np.abs(g("out") - out_ref).max())
        detail = f"max err {out_err:.1e}"
        ok = out_err < 1e-12
        if 1 < KV < H:  # the case must distinguish h // group from the wrong h % KV mapping
            wrong = probs @ np.tile(v, (H // KV, 1, 1))
            sep = float(np.abs(g("out") - wrong).max()) / float(np.abs(out_ref).max())
            ok = ok and sep > 1e-2
            detail += f", h%KV mapping differs by rel {sep:.2f}"
        checks.append((f"L{l} out == probs @ v (GQA h//(H/KV))", ok, detail))
        # attention should be clearly non-uniform so the comparison is meaningful
        rows = [i for i in range(T) if i >= 3]
        if rows:
            peak = float(probs[:, rows, :].max(-1).mean())
            uniform = float(np.mean([1.0 / (i + 1) for i in rows]))
            checks.append((f"L{l} probs peaked", peak > 2 * uniform,
                           f"mean row max {peak:.2f} vs uniform {uniform:.2f}"))
    if case.arch != "gpt2":  # RoPE preserves norms and is the identity at position 0
        p = "model.layers.0.self_attn.q_proj"
        h_norm = rms_norm(torch.as_tensor(weights["model.embed_tokens.weight"][toks], dtype=torch.float64),
                          torch.as_tensor(weights["model.layers.0.input_layernorm.weight"], dtype=torch.float64),
                          cfg["rms_norm_eps"])
        q_raw = h_norm @ torch.as_tensor(weights[p + ".weight"], dtype=torch.float64).T
        if p + ".bias" in weights:
            q_raw = q_raw + torch.as_tensor(weights[p + ".bias"], dtype=torch.float64)
        q_raw = q_raw.reshape(T, H, d).permute(1, 0, 2).numpy()
        q0 = expected["layers.0.q"]
        ok = (np.allclose(q0[:, 0], q_raw[:, 0], rtol=0, atol=1e-12)
              and np.allclose(np.linalg.norm(q0, axis=-1), np.linalg.norm(q_raw, axis=-1), atol=1e-12))
        checks.append(("RoPE identity at pos 0, norm-preserving", bool(ok), ""))
    logit_std = float(expected["logits"].std())
    checks.append(("logits not degenerate", logit_std > 0.05, f"std {logit_std:.3f}"))
    return checks


def negative_checks(case: Case, dump: Dict[str, np.ndarray], expected, want_meta, workdir):
    """Mutate a correct dump and make sure check_dump flags exactly what it should.
    -> [(check, ok, detail)]"""
    T = dump["tokens"].shape[0]
    meta_ok = {"model": "x", "backend": "test", **want_meta}

    def mutate(fn):
        d = {k: v.copy() for k, v in dump.items()}
        m = dict(meta_ok)
        fn(d, m)
        return d, m

    def bump(name, idx, amount_rel):
        def fn(d, m):
            scale = np.abs(expected[name][np.isfinite(expected[name])]).max()
            d[name][idx] += np.float32(amount_rel * scale)
        return fn

    def setval(name, idx, val):
        def fn(d, m):
            d[name][idx] = val
        return fn

    def drop(name):
        return lambda d, m: d.pop(name)

    def reshape(name, shape):
        def fn(d, m):
            d[name] = d[name].reshape(shape)
        return fn

    def retype(name, dtype):
        def fn(d, m):
            d[name] = d[name].astype(dtype)
        return fn

    def meta(key, val):
        def fn(d, m):
            if val is None:
                m.pop(key)
            else:
                m[key] = val
        return fn

    last = T - 1
    scenarios = [
        # (description, mutation, name expected to FAIL or None for "must pass")
        ("logits +2e-4 rel", bump("logits", (last, 0), 2e-4), "logits"),
        ("probs +1e-3", bump("layers.0.probs", (0, last, 0), 1e-3), "layers.0.probs"),
        ("out +1e-3 rel", bump("layers.0.out", (0, last, 0), 1e-3), "layers.0.out"),
        ("tokens off by one", setval("tokens", 0, dump["tokens"][0] + 1), "tokens"),
        ("NaN in q", setval("layers.0.q", (0, 0, 0), np.nan), "layers.0.q"),
        ("finite -> -inf in masked", setval("layers.0.masked", (0, last, 0), -np.inf), "layers.0.masked"),
        ("missing v", drop("layers.0.v"), "layers.0.v"),
        ("logits as F64", retype("logits", np.float64), "logits"),
        ("tokens as F32", retype("tokens", np.float32), "tokens"),
        ("scores wrong shape", reshape("layers.0.scores", (1,) + dump["layers.0.scores"].shape),
         "layers.0.scores"),
        ("metadata dropped wrong", meta("dropped", str(int(want_meta["dropped"]) + 1)), "__metadata__"),
        ("metadata missing backend", meta("backend", None), "__metadata__"),
        ("metadata block_size not a string", meta("block_size", int(want_meta["block_size"])),
         "__metadata__"),
        ("logits +2e-6 rel (within tolerance)", bump("logits", (last, 0), 2e-6), None),
    ]
    if T > 1:
        scenarios += [
            ("-inf -> -1e9 in masked", setval("layers.0.masked", (0, 0, last), -1e9), "layers.0.masked"),
            ("scores masked above diag", setval("layers.0.scores", (0, 0, last), -np.inf),
             "layers.0.scores"),
        ]
    results = []
    path = os.path.join(workdir, case.name, "negative.safetensors")
    for desc, fn, must_fail in scenarios:
        d, m = mutate(fn)
        write_safetensors(path, d, m)
        rep = Report(quiet=True)
        check_dump(case.name, path, expected, want_meta, rep)
        failed_names = [n for _, n in rep.failed_items]
        if must_fail is None:
            ok = rep.failed == 0
        else:
            ok = failed_names == [must_fail]
        results.append((f"negative: {desc}", ok, f"flagged {failed_names or 'nothing'}"))
    # an unreadable / truncated file must fail as well
    with open(path, "wb") as f:
        f.write(b"\x10\x00\x00")
    rep = Report(quiet=True)
    check_dump(case.name, path, expected, want_meta, rep)
    results.append(("negative: truncated file", rep.failed == 1 and rep.passed == 0,
                    f"{rep.summary()}"))
    os.remove(path)
    return results


def write_fake_clis(workdir: str, script: str = os.path.abspath(__file__)) -> Tuple[str, str, str]:
    """-> (working fake CLI: `script --fake-cli ARGS`, CLI that exits 3, CLI that exits 0
    without writing a dump)."""
    scripts = {
        "fake-cli-ok": f'#!/bin/sh\nexec "{sys.executable}" "{script}" --fake-cli "$@"\n',
        "fake-cli-fail": '#!/bin/sh\necho "fake-cli-fail: deliberate error" >&2\nexit 3\n',
        "fake-cli-silent": "#!/bin/sh\nexit 0\n",
    }
    paths = []
    for name, text in scripts.items():
        p = os.path.join(workdir, name)
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, 0o755)
        paths.append(p)
    return tuple(paths)


def run_selftest(cases: List[Case], workdir: str, timeout: float) -> Report:
    report = Report()
    for case in cases:
        model_dir, expected, want_meta = prepare_case(case, workdir)
        weights = build_weights(case)
        toks, dropped = window_tokens(case.tokens, case.effective_block_size)
        print(f"== {case.name}: {case.arch}, {len(case.tokens)} tokens, "
              f"block_size {case.effective_block_size}, T={len(toks)}, dropped {dropped}")

        # the model directory round-trips and reproduces the expectation exactly
        arch, cfg, loaded = load_model_dir(model_dir)
        again = reference(arch, cfg, loaded, toks)
        same = (set(loaded) == set(weights) and all(np.array_equal(loaded[k], weights[k]) for k in weights)
                and all(np.array_equal(again[k], expected[k]) for k in expected))
        report.add(case.name, "selftest", same, "model dir round-trip")

        check_selftest_case(case.name, model_dir, expected, want_meta, report,
                            alt=(alt_gpt2 if case.arch == "gpt2" else alt_llama)(case.config, weights, toks),
                            sanity=sanity_checks(case, expected, weights, toks),
                            negatives=lambda dump: negative_checks(case, dump, expected, want_meta, workdir))

    check_end_to_end(cases, workdir, report, timeout)
    return report


def check_selftest_case(name, model_dir, expected, want_meta, report, alt, sanity, negatives, check=check_dump):
    """One case's selftest after its model directory round-tripped: the independent
    vectorised implementation `alt` agrees with the expectation to float64 precision, the
    `sanity` checks (name, ok, detail) hold, the expectation written as a float32 dump passes
    `check`, and every broken dump made from it by negatives(dump) is caught."""
    results = [compare_tensor(alt[k], expected[k], tol=1e-9) for k in expected]
    worst = max(r[2] for r in results)
    report.add(name, "selftest", set(alt) == set(expected) and all(r[0] for r in results),
               f"vectorised impl agrees (worst rel {worst:.1e})")
    for what, ok, detail in sanity:
        report.add(name, "selftest", ok, what + (f" ({detail})" if detail else ""))
    dump = to_dump(expected)
    path = os.path.join(model_dir, "ours.safetensors")
    write_safetensors(path, dump, {"model": model_dir, "backend": "selftest", **want_meta})
    check(name, path, expected, want_meta, report)
    for what, ok, detail in negatives(dump):
        report.add(name, "selftest", ok, f"{what} -> {detail}")


def check_end_to_end(cases, workdir, report, timeout, script=os.path.abspath(__file__), run_one=None):
    """The selftest's end-to-end part: `script --fake-cli` as the CLI passes every case
    (through run_one, as run_cli_cases), and a CLI that fails, one that writes nothing and
    one that does not exist fail them."""
    ok_cli, fail_cli, silent_cli = write_fake_clis(workdir, script)
    print("== end to end with fake CLI (loads the model dirs from disk)")
    rep = Report()
    run_cli_cases(cases, ok_cli, workdir, rep, timeout, run_one)
    print(rep.summary())
    report.add("end-to-end", "selftest", rep.failed == 0 and rep.passed > 0, f"fake CLI run: {rep.summary()}")
    for cli, what in ((fail_cli, "exit 3"), (silent_cli, "exit 0, no dump")):
        rep = Report(quiet=True)
        run_cli_cases(cases, cli, workdir, rep, timeout, run_one)
        report.add("end-to-end", "selftest", rep.failed == len(cases) and rep.passed == 0,
                   f"CLI {what} -> every case fails: {rep.summary()}")
    rep = Report(quiet=True)
    run_cli_cases(cases[:1], os.path.join(workdir, "no-such-cli"), workdir, rep, timeout, run_one)
    report.add("end-to-end", "selftest", rep.failed == 1, f"missing CLI -> {rep.summary()}")


# ---------------------------------------------------------------------------------------------
# shared by the config-driven scripts (arch_parity.py, hybrid_parity.py, lfm2_parity.py): a
# case there is config.json contents, a seed and tokens; the reference reads (config, weights,
# tokens); each script keeps only its architecture and hands its functions to these drivers
# ---------------------------------------------------------------------------------------------

def case_tokens(seed: int, vocab: int, n: int) -> List[int]:
    """A case's n random tokens below vocab, seeded."""
    rng = np.random.RandomState(seed)
    return [int(t) for t in rng.randint(0, vocab, n)]


def write_config_model_dir(model_dir: str, config: dict, tensors: Dict[str, np.ndarray]):
    """DIR/config.json and DIR/model.safetensors (tensors under their on-disk names)."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(model_dir, "model.safetensors"), tensors, {"format": "pt"})


def read_config_model_dir(model_dir: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """-> (config, tensors under their on-disk names)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    return cfg, tensors


def loop_rms_norm(x, w, eps, offset):
    """x (..., n): every row x / sqrt(mean(x^2) + eps) * (offset + w)."""
    flat = x.reshape(-1, x.shape[-1])
    out = torch.empty_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        out[r] = row / math.sqrt(float((row * row).sum()) / row.numel() + eps) * (offset + w)
    return out.reshape(x.shape)


def loop_rope(x, inv_freq, rot, pairs="half", factor=1.0):
    """x (N,T,d): position t rotates pair i of the first rot dims by t * inv_freq[i], both
    times factor; pairs (i, i + rot/2) (HF rotate_half), or (2i, 2i+1) for a misreading;
    dims >= rot pass through."""
    out = x.clone()
    N, T, _ = x.shape
    half = rot // 2
    for n in range(N):
        for t in range(T):
            for i in range(half):
                ang = t * float(inv_freq[i])
                c, s = math.cos(ang) * factor, math.sin(ang) * factor
                ia, ib = (i, i + half) if pairs == "half" else (2 * i, 2 * i + 1)
                a, b = float(x[n, t, ia]), float(x[n, t, ib])
                out[n, t, ia] = a * c - b * s
                out[n, t, ib] = b * c + a * s
    return out


def heads_of(y, n, width):
    """(T, n*width) -> (n, T, width)."""
    return torch.stack([y[:, h * width:(h + 1) * width] for h in range(n)])


def loop_causal_attention(q, k, v, scale, kv_of) -> Tuple[Dict[str, torch.Tensor], torch.Tensor]:
    """q (H,T,d), k, v (KV,T,d); query head h reads kv head kv_of(h) -> ({scores, scaled,
    masked, probs} (H,T,T), out (H,T,d) = probs v), by per-entry loops."""
    H, T, _ = q.shape
    res = {n: torch.zeros(H, T, T, dtype=torch.float64) for n in ("scores", "scaled", "masked", "probs")}
    out = torch.zeros(H, T, v.shape[-1], dtype=torch.float64)
    for hh in range(H):
        kv = kv_of(hh)
        for i in range(T):
            for j in range(T):
                sc = float(q[hh, i] @ k[kv, j])
                res["scores"][hh, i, j] = sc
                res["scaled"][hh, i, j] = sc * scale
                res["masked"][hh, i, j] = float("-inf") if j > i else sc * scale
            m = max(float(res["masked"][hh, i, j]) for j in range(i + 1))
            e = [math.exp(float(res["masked"][hh, i, j]) - m) for j in range(i + 1)]
            z = sum(e)
            for j in range(i + 1):
                res["probs"][hh, i, j] = e[j] / z
                out[hh, i] += (e[j] / z) * v[kv, j]
    return res, out


def causal_attention_checks(l: int, g, T: int, H: int, KV: int, d: int, tile_differs=False):
    """Invariants of a causal softmax layer's tensors g(name) -> [(check, ok, detail)]: probs
    rows sum to 1 and vanish above the diagonal, masked is -inf exactly there, scaled ==
    scores d^-1/2, out == probs v with head h reading kv head h // (H/KV) (with tile_differs,
    and 1 < KV < H, the wrong h % KV must differ), probs clearly peaked."""
    checks = []
    upper = np.triu(np.ones((T, T), dtype=bool), 1)
    probs, masked = g("probs"), g("masked")
    row_err = float(np.abs(probs.sum(-1) - 1).max())
    checks.append((f"L{l} probs rows sum to 1, 0 above the diagonal",
                   row_err < 1e-12 and bool((probs[:, upper] == 0).all()), f"{row_err:.1e}"))
    mask_ok = (np.isneginf(masked[:, upper]).all() and np.isfinite(masked[:, ~upper]).all()
               and (masked[:, ~upper] == g("scaled")[:, ~upper]).all())
    checks.append((f"L{l} masked -inf exactly above the diagonal", bool(mask_ok), ""))
    s_err = float(np.abs(g("scaled") - g("scores") * d ** -0.5).max())
    checks.append((f"L{l} scaled == scores * d^-1/2", s_err < 1e-12, f"{s_err:.1e}"))
    out_ref = probs @ np.repeat(g("v"), H // KV, axis=0)
    ok = float(np.abs(g("out") - out_ref).max()) < 1e-12
    detail = ""
    if tile_differs and 1 < KV < H:
        wrong = probs @ np.tile(g("v"), (H // KV, 1, 1))
        sep = float(np.abs(g("out") - wrong).max()) / float(np.abs(out_ref).max())
        ok = ok and sep > 1e-2
        detail = f"h % KV differs by rel {sep:.2f}"
    checks.append((f"L{l} out == probs v (h // (H/KV))", ok, detail))
    rows = list(range(3, T))
    peak = float(probs[:, rows, :].max(-1).mean())
    uniform = float(np.mean([1.0 / (i + 1) for i in rows]))
    checks.append((f"L{l} probs peaked", peak > 1.5 * uniform, f"mean row max {peak:.2f} vs uniform {uniform:.2f}"))
    return checks


def rope_moved(rot: np.ndarray, unrot: np.ndarray, r: int) -> bool:
    """q or k (N,T,d) with RoPE against the same without: dims >= r untouched, pairs (i, i+r/2)
    keep their norms, position 0 fixed, later positions moved."""
    pair = lambda x: np.hypot(x[..., :r // 2], x[..., r // 2:r])
    return bool(np.allclose(rot[..., r:], unrot[..., r:], rtol=0, atol=1e-12)
                and np.allclose(pair(rot), pair(unrot), rtol=1e-10, atol=1e-12)
                and np.allclose(rot[:, 0], unrot[:, 0], rtol=0, atol=1e-12)
                and not np.allclose(rot[:, 1:, :r], unrot[:, 1:, :r], atol=1e-6))


class Mutations:
    """Broken copies of a correct dump, for the negative checks."""

    def __init__(self, dump: Dict[str, np.ndarray], expected: Dict[str, np.ndarray]):
        self.dump, self.expected = dump, expected

    def copy(self) -> Dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.dump.items()}

    def bump(self, name, idx, rel) -> Dict[str, np.ndarray]:
        """entry idx of name + rel * max|expected finite entries of name|."""
        d = self.copy()
        scale = np.abs(self.expected[name][np.isfinite(self.expected[name])]).max()
        d[name][idx] += np.float32(rel * scale)
        return d

    def set(self, name, idx, val) -> Dict[str, np.ndarray]:
        d = self.copy()
        d[name][idx] = val
        return d


def check_negatives(case_name, workdir, dump, expected, want_meta, check, scenarios, misreadings,
                    meta_changes=()) -> List[Tuple[str, bool, str]]:
    """The comparison `check` on broken dumps -> [(check, ok, detail)]: each scenario (desc,
    dump, names) must flag exactly names; the metadata without block_size, and with each
    (desc, changes) of meta_changes, exactly __metadata__; and each misreading (desc, dump of
    the reference under it; lazily) at least one tensor."""
    results = []
    path = os.path.join(workdir, case_name, "negative.safetensors")
    meta = {"model": "x", "backend": "test", **want_meta}

    def run(d, m=meta):
        write_safetensors(path, d, m)
        rep = Report(quiet=True)
        check(case_name, path, expected, want_meta, rep)
        return [n for _, n in rep.failed_items]

    for desc, dd, want in scenarios:
        got = run(dd)
        results.append((f"negative: {desc}", got == want, f"flagged {got or 'nothing'}"))
    got = run(dump, {k: v for k, v in meta.items() if k != "block_size"})
    results.append(("negative: metadata without block_size", got == ["__metadata__"], f"flagged {got}"))
    for desc, changes in meta_changes:
        got = run(dump, {**meta, **changes})
        results.append((f"negative: {desc}", got == ["__metadata__"], f"flagged {got}"))
    for desc, alt in misreadings:
        got = run(alt)
        results.append((f"misreading: {desc}", len(got) > 0,
                        f"flagged {len(got)}: {', '.join(got[:3])}{' ...' if len(got) > 3 else ''}"))
    os.remove(path)
    return results


@dataclass
class ConfigScript:
    """What a config-driven script hands to the drivers below (config_main & co.)."""
    script: str                    # its path: `script --fake-cli` is the selftest's fake CLI
    prefix: str                    # of its temporary work directory
    build_weights: Callable        # case -> canonical weights
    write_model_dir: Callable      # (case, model_dir, weights)
    load_model_dir: Callable       # model_dir -> (config, canonical weights)
    reference: Callable            # (config, weights, tokens) -> expected tensors
    expected_metadata: Callable    # config -> {"block_size", "dropped"}
    describe: Callable             # case -> "== name: ..."
    checker: Callable              # case -> check(case_name, path, expected, want_meta, report)
    selftest_parts: Callable       # (case, weights, expected, want_meta, workdir) -> (alt, sanity, negatives)
    round_trip_note: Callable = lambda case, model_dir, weights: ""
    backend: Optional[str] = None  # --backend


def config_prepare_case(spec: ConfigScript, case, workdir: str):
    """Write DIR/<case>/ and compute the expectation -> (model_dir, weights, expected, want_meta)."""
    model_dir = os.path.join(workdir, case.name)
    weights = spec.build_weights(case)
    spec.write_model_dir(case, model_dir, weights)
    expected = spec.reference(case.config, weights, case.tokens)
    return model_dir, weights, expected, spec.expected_metadata(case.config)


def config_run_cli_case(spec: ConfigScript, case, cli: str, workdir: str, report: Report, timeout: float):
    model_dir, _, expected, want_meta = config_prepare_case(spec, case, workdir)
    if not report.quiet:
        print(spec.describe(case))
    out = os.path.join(model_dir, "ours.safetensors")
    if os.path.exists(out):
        os.remove(out)
    cmd = [cli, "dump", "--model", model_dir, "--tokens", ",".join(str(t) for t in case.tokens)]
    if spec.backend:
        cmd += ["--backend", spec.backend]
        want_meta = {**want_meta, "backend": spec.backend}
    cmd += ["--out", out]
    run_and_check(case.name, cmd, out, expected, want_meta, report, timeout, spec.checker(case))


def config_fake_cli_main(spec: ConfigScript, argv: List[str]) -> int:
    """`SCRIPT --fake-cli dump --model D --tokens ... [--backend B] --out F`."""
    a = fake_cli_args(os.path.basename(spec.script), argv, backend={"default": "python-reference"})
    cfg, weights = spec.load_model_dir(a.model)
    toks = [int(t) for t in a.tokens.split(",")]
    dump = to_dump(spec.reference(cfg, weights, toks))
    write_safetensors(a.out, dump, {"model": a.model, "backend": a.backend, **spec.expected_metadata(cfg)})
    return 0


def config_selftest(spec: ConfigScript, cases, workdir: str, timeout: float) -> Report:
    """Per case: the model directory round-trips (the reference of what is read back equals
    the expectation), then check_selftest_case with the script's parts; then end to end."""
    report = Report()
    for case in cases:
        print(spec.describe(case))
        model_dir, weights, expected, want_meta = config_prepare_case(spec, case, workdir)
        cfg2, loaded = spec.load_model_dir(model_dir)
        again = spec.reference(cfg2, loaded, case.tokens)
        same = (set(loaded) == set(weights) and all(np.array_equal(loaded[k], weights[k]) for k in weights)
                and all(np.array_equal(again[k], expected[k]) for k in expected))
        report.add(case.name, "selftest", same,
                   "model dir round-trip" + spec.round_trip_note(case, model_dir, weights))
        alt, sanity, negatives = spec.selftest_parts(case, weights, expected, want_meta, workdir)
        check_selftest_case(case.name, model_dir, expected, want_meta, report, alt=alt, sanity=sanity,
                            negatives=negatives, check=spec.checker(case))
    check_end_to_end(cases, workdir, report, timeout, spec.script,
                     lambda *a: config_run_cli_case(spec, *a))
    return report


def config_main(spec: ConfigScript, argv: List[str], doc: str, all_cases) -> int:
    """A config-driven script's main: --fake-cli, else parse_args and drive."""
    if argv[:1] == ["--fake-cli"]:
        return config_fake_cli_main(spec, argv[1:])
    args, cases = parse_args(argv, doc.split("\n")[0], all_cases, lambda c: spec.describe(c)[3:])
    if args is None:
        return 0
    spec.backend = args.backend
    return drive(args, cases, spec.prefix, lambda *a: config_selftest(spec, *a),
                 lambda *a: run_cli_cases(*a, run_one=lambda *b: config_run_cli_case(spec, *b)))


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def parse_args(argv: List[str], description: str, all_cases, describe) -> Tuple[Optional[argparse.Namespace], list]:
    """The command line both parity scripts take -> (args, the cases chosen with --cases);
    args is None after --list printed describe(case) for each case."""
    ap = argparse.ArgumentParser(description=description)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--cli", help="path to attnviz-cli")
    mode.add_argument("--selftest", action="store_true", help="test this script (no CLI needed)")
    mode.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--workdir", help="where model dirs and dumps go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the model dirs and dumps")
    ap.add_argument("--cases", help="comma-separated subset of: " + ",".join(c.name for c in all_cases))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per CLI call")
    ap.add_argument("--backend", choices=["cpu", "gpu"], help="pass --backend to the CLI and require it in the dump")
    args = ap.parse_args(argv)
    if args.list:
        for c in all_cases:
            print(describe(c))
        return None, []
    cases = all_cases
    if args.cases:
        wanted = args.cases.split(",")
        unknown = set(wanted) - {c.name for c in all_cases}
        if unknown:
            ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in all_cases if c.name in wanted]
    return args, cases


def main(argv: List[str]) -> int:
    if argv[:1] == ["--fake-cli"]:
        return fake_cli_main(argv[1:])
    args, cases = parse_args(argv, __doc__.split("\n")[0], CASES, lambda c: f"{c.name}: {c.arch}")
    if args is None:
        return 0
    global CLI_BACKEND
    CLI_BACKEND = args.backend
    if args.selftest:
        cases = [c for c in cases if not c.ablate]
    return drive(args, cases, "attnviz-parity-", run_selftest, run_cli_cases)


def drive(args, cases, prefix, selftest, cli_cases) -> int:
    """Runs `cases` (selftest, or against args.cli) in args.workdir (else a fresh temporary
    directory named `prefix`...), cleans up unless --keep, prints the summary; exit status.
    arch_parity.py drives its own cases and functions through this too."""
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix=prefix))
    os.makedirs(workdir, exist_ok=True)
    torch.set_num_threads(1)
    try:
        if args.selftest:
            report = selftest(cases, workdir, args.timeout)
        else:
            report = Report()
            cli_cases(cases, os.path.abspath(args.cli) if os.sep in args.cli else args.cli, workdir, report, args.timeout)
    finally:
        if args.keep:
            print(f"(kept {workdir})")
        elif args.workdir:
            for case in cases:
                shutil.rmtree(os.path.join(workdir, case.name), ignore_errors=True)
            for name in ("fake-cli-ok", "fake-cli-fail", "fake-cli-silent"):
                if os.path.exists(os.path.join(workdir, name)):
                    os.remove(os.path.join(workdir, name))
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(report.summary())
    return 1 if report.failed else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
