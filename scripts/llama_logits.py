#!/usr/bin/env python3
"""llama.cpp and attnviz on the same GGUF file: the largest logits after the same prompt.

A check that both programs read a file alike (names, layouts, metadata), run by hand after
teaching attnviz a GGUF architecture; llama.cpp is a peer here, never a dependency of the
build or the tests. It runs bench/llama_peer (node-llama-cpp; install it as its header
says) with --top-logits K on a seeded prompt of --prompt-tokens ids, then
`attnviz-cli dump --tokens <the same ids> --stages logits`, and prints llama.cpp's K largest
logits after the prompt beside attnviz's values for the same ids.

    /usr/bin/python3 scripts/llama_logits.py --cli build/app/attnviz-cli FILE.gguf [--top 5]
        [--prompt-tokens 32] [--threads 2] [--tolerance 0.01] [--arith f32|int8]

Exits 1 when an id differs in rank or a value differs by more than --tolerance (absolute).
llama.cpp multiplies quantized weights by an 8-bit copy of the activations, attnviz by the
float32 ones (attnviz's default, --arith f32): compare F32 files for a tight bound (0.002 was
enough for every family so far), quantized ones for the order and a looser one. With
--arith int8 attnviz quantizes the activations as well (core/engine/int8_product.h), so the
difference says how close the two integer arithmetics come.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def last_logits(dump_path):
    """The last row of the dump's `logits` tensor (float32)."""
    with open(dump_path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8 : 8 + n])
    t = header["logits"]
    start, end = t["data_offsets"]
    return np.frombuffer(b[8 + n + start : 8 + n + end], dtype=np.float32).reshape(t["shape"])[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--cli", required=True, help="attnviz-cli")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=0.01)
    p.add_argument("--arith", default="f32", choices=["f32", "int8"], help="attnviz's arithmetic")
    a = p.parse_args()
    peer = os.path.join(HERE, "..", "bench", "llama_peer", "llama_peer.mjs")
    out = subprocess.run(["node", peer, "--model", a.model, "--threads", str(a.threads), "--prompt-tokens",
                          str(a.prompt_tokens), "--reps", "1", "--top-logits", str(a.top), "--json"],
                         capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    ids = ",".join(str(i) for i in ref["prompt_ids"])
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "logits.safetensors")
        subprocess.run([a.cli, "dump", "--model", a.model, "--tokens", ids, "--stages", "logits", "--out", dump,
                        "--arith", a.arith],
                       capture_output=True, text=True, check=True)
        mine = last_logits(dump)
    order = list(np.argsort(-mine)[: a.top])
    worst, same_order = 0.0, True
    print(f"{'rank':>4} {'id':>8} {'llama.cpp':>12} {'attnviz':>12} {'attnviz id':>10}")
    for rank, (tid, value) in enumerate(ref["top_logits"]):
        worst = max(worst, abs(float(mine[tid]) - value))
        same_order = same_order and int(order[rank]) == tid
        print(f"{rank:>4} {tid:>8} {value:>12.4f} {float(mine[tid]):>12.4f} {int(order[rank]):>10}")
    print(f"largest difference {worst:.4g} ({ref['architecture']}, llama.cpp {ref['node_llama_cpp_version']}); "
          f"{'the same order' if same_order else 'the order differs'}")
    return 0 if same_order and worst <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
