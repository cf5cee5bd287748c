#!/usr/bin/env python3
"""Attention rollout of `attnviz-cli dump --rollout` against a direct NumPy computation.

Usage: /usr/bin/python3 tests/reference/rollout_check.py --cli PATH/attnviz-cli --workdir DIR

For a random GQA llama model and the built-in fortunes-en model, the dump's `rollout`
(L, T, T) must equal, layer by layer,
    A_l = mean over heads of probs_l + I, each row divided by its sum
    R_l = A_l @ R_{l-1},   R_{-1} = I
computed here in float64 from the dump's own `layers.{l}.probs`, within a relative error
of 1e-5 (max |ours - ref| / max |ref|). It also checks that the comparison can fail: the
product without the identity (plain head-averaged attention) must NOT match.
Prints one line per check and exits 1 if any failed.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import read_safetensors  # noqa: E402  (the same reader the parity test uses)

TOL = 1e-5


def numpy_rollout(probs, residual=True):
    """probs: list of (H, T, T) per layer -> (L, T, T) rollout after each layer."""
    T = probs[0].shape[1]
    R = np.eye(T)
    out = []
    for p in probs:
        A = p.astype(np.float64).mean(axis=0)
        if residual:
            A = A + np.eye(T)
        A = A / A.sum(axis=-1, keepdims=True)
        R = A @ R
        out.append(R)
    return np.stack(out)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-6))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.workdir, exist_ok=True)
    model_dir = os.path.join(a.workdir, "gqa")
    subprocess.run([a.cli, "random", "--preset", "tiny", "--layers", "3", "--heads", "4", "--kv-heads", "2",
                    "--seed", "5", "--out", model_dir], check=True, capture_output=True)
    cases = [("random_gqa", ["--model", model_dir, "--tokens", "3,1,4,1,5,9,2,6,5,3,5,8,9,7"]),
             ("fortunes_en", ["--model", "builtin:fortunes-en", "--text", "The cat sat. The cat sat."])]
    failed = 0
    for name, args in cases:
        out = os.path.join(a.workdir, name + ".safetensors")
        subprocess.run([a.cli, "dump", *args, "--rollout", "--out", out], check=True, capture_output=True)
        tensors, _ = read_safetensors(out)
        L = sum(1 for k in tensors if k.endswith(".probs"))
        probs = [tensors[f"layers.{l}.probs"] for l in range(L)]
        ours = tensors["rollout"]
        want = numpy_rollout(probs)
        checks = [
            ("shape", ours.shape == want.shape, f"{ours.shape} vs {want.shape}"),
            ("matches numpy", ours.shape == want.shape and rel(ours, want) <= TOL,
             f"rel {rel(ours, want):.2e}" if ours.shape == want.shape else ""),
            ("rows sum to 1", np.allclose(ours.sum(axis=-1), 1.0, atol=1e-5), ""),
            ("can fail: no identity differs", rel(ours, numpy_rollout(probs, residual=False)) > 1e-2, ""),
        ]
        for check, ok, detail in checks:
            print(f"{name:12s} {check:32s} {detail:14s} {'ok' if ok else 'FAIL'}")
            failed += 0 if ok else 1
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
