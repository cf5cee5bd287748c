#!/usr/bin/env python3
"""`attnviz-cli scan` against per-window `heads --json` runs and `dump`s, averaged here.

Usage
-----
    /usr/bin/python3 tests/reference/scan_check.py --cli PATH/attnviz-cli --workdir DIR \
        --tokenizer tests/data/tokenizers/spm32k.tokenizer.json

Models: builtin:fortunes-en (a character tokenizer, no BOS) and a random llama model with
the 32000-entry SentencePiece tokenizer (which adds BOS). The corpus is written here from a
few sentences, some repeated, so that induction has something to find.

The windows are cut here from the whole corpus's ids (`tokenize --no-special`; the corpus is
one block, so the scan's block-wise encoding gives the same ids), as the scan documents:
window k = the tokenizer's leading special ids (what `tokenize` adds before a text) then
corpus ids [k·S, k·S + N − prefix); the windows stop with the first that reaches the end; a
window of fewer than two tokens is dropped. For each window `heads --tokens … --json` gives
every head's metrics; the scan's must be their average, each window weighted by T − 1
(induction: over the windows where it is defined, else −1). `top`: from each window's dumped
probs, for each query i ≥ 8 the largest weight on a key 1 ≤ j ≤ i (the lower j among equals),
the K largest over the corpus (ties: earlier window, earlier query). Also checked: `windows`,
`tokens`, usage and data errors (empty corpus, not UTF-8, a window beyond the block size,
exit codes 1 and 2), and that `--out` is written only by a completed scan (not after a
SIGINT, which stops the scan with exit 1).

Tolerance: metrics within 1e-5 (float32 sums in a different order); weights within 1e-6.
Exit status 1 on any mismatch.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity as P  # noqa: E402  (read_safetensors)

METRICS = ["previous_token", "induction", "first_token", "self", "entropy_bits", "mean_distance"]
MIN_QUERY = 8

SENTENCES = [
    "The miller kept a grey cat that slept on the flour sacks.",
    "Every morning the baker walked past the mill and waved at the cat.",
    "Rain came late that year, and the river ran low under the old bridge.",
    "Mara counted the boats: seven red ones, three blue ones and a green one with a torn sail.",
    "When the bell rang at noon, the children ran out of the school and down to the river.",
]


def corpus_text():
    out = []
    for r in range(3):  # each sentence comes back, so later copies can be predicted from earlier ones
        for k, s in enumerate(SENTENCES):
            out.append(s)
            if (k + r) % 2 == 0:
                out.append(s)
        out.append("")
    return "\n".join(out) + "\n"


def run(cli, args, check=True):
    r = subprocess.run([cli] + args, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise SystemExit(f"attnviz-cli {' '.join(args[:6])} … failed ({r.returncode}): {r.stderr}")
    return r


class Checker:
    def __init__(self):
        self.failed = self.passed = 0

    def ok(self, what, cond):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL", what)


def windows_of(ids, prefix, N, S):
    M = N - len(prefix)
    S = S or M  # the default stride: no overlap
    out, start = [], 0
    while start < len(ids):
        w = prefix + ids[start:start + M]
        if len(w) >= 2:
            out.append(w)
        if start + M >= len(ids):
            break
        start += S
    return out


def check_model(ck, cli, model, corpus, workdir, N, S, K, name):
    ids = json.loads(run(cli, ["tokenize", "--model", model, "--no-special", "--text-file", corpus, "--json"]).stdout)["ids"]
    with_s = json.loads(run(cli, ["tokenize", "--model", model, "--text", "a", "--json"]).stdout)["ids"]
    without = json.loads(run(cli, ["tokenize", "--model", model, "--no-special", "--text", "a", "--json"]).stdout)["ids"]
    prefix = with_s[:len(with_s) - len(without)] if with_s[len(with_s) - len(without):] == without else []
    wins = windows_of(ids, prefix, N, S)
    args = ["scan", "--model", model, "--corpus", corpus, "--window", str(N), "--top", str(K), "--json"]
    if S:
        args += ["--stride", str(S)]
    out = json.loads(run(cli, args).stdout)
    ck.ok(f"{name}: windows {out['windows']} != {len(wins)}", out["windows"] == len(wins))
    ck.ok(f"{name}: tokens {out['tokens']} != {len(ids)}", out["tokens"] == len(ids))
    ck.ok(f"{name}: metrics {out['metrics']}", out["metrics"] == METRICS)
    sums, ind, weight = {}, {}, 0
    examples = {}
    for w_i, w in enumerate(wins):
        toks = ",".join(map(str, w))
        hj = json.loads(run(cli, ["heads", "--model", model, "--tokens", toks, "--json"]).stdout)
        q = len(w) - 1
        weight += q
        for h in hj["heads"]:
            key = (h["layer"], h["head"])
            s = sums.setdefault(key, np.zeros(len(METRICS)))
            for m_i, m in enumerate(METRICS):
                if m != "induction":
                    s[m_i] += h[m] * q
            if h["induction"] >= 0:
                a = ind.setdefault(key, [0.0, 0.0])
                a[0] += h["induction"] * q
                a[1] += q
        path = os.path.join(workdir, f"{name}-w{w_i}.safetensors")
        run(cli, ["dump", "--model", model, "--tokens", toks, "--stages", "probs", "--out", path])
        tensors, _ = P.read_safetensors(path)
        for key in sums:
            probs = tensors[f"layers.{key[0]}.probs"][key[1]]  # (T, T)
            for i in range(MIN_QUERY, len(w)):
                row = probs[i, 1:i + 1]
                j = int(np.argmax(row)) + 1
                examples.setdefault(key, []).append((float(probs[i, j]), w_i, i, j))
    for key, s in sums.items():
        l, h = key
        got = out["heads"][l][h]
        ref = s / weight
        ref[METRICS.index("induction")] = ind[key][0] / ind[key][1] if key in ind else -1.0
        for m_i, m in enumerate(METRICS):
            ck.ok(f"{name}: L{l}H{h} {m}: {got[m]} != {ref[m_i]}", abs(got[m] - ref[m_i]) <= 1e-5 * max(1.0, abs(ref[m_i])))
        best = sorted(examples.get(key, []), key=lambda e: (-e[0], e[1], e[2]))[:K]
        mine = [(e["weight"], e["window"], e["query"], e["key"]) for e in got["top"]]
        same = len(best) == len(mine) and all(
            abs(a[0] - b[0]) <= 1e-6 and a[1:] == b[1:] for a, b in zip(mine, best))
        # Weights equal to float rounding may order differently: accept the same weights then.
        if not same and len(best) == len(mine):
            same = all(abs(a[0] - b[0]) <= 1e-6 for a, b in zip(mine, best))
        ck.ok(f"{name}: L{l}H{h} top {mine} != {best}", same)
    return len(wins)


def check_errors(ck, cli, workdir):
    m = "builtin:fortunes-en"
    empty = os.path.join(workdir, "empty.txt")
    open(empty, "w").close()
    bad = os.path.join(workdir, "latin1.txt")
    with open(bad, "wb") as f:
        f.write(b"The cat sat on the mat.\ncaf\xe9 au lait\n")
    good = os.path.join(workdir, "corpus.txt")
    out = os.path.join(workdir, "results.json")
    cases = [("empty corpus", ["--corpus", empty], 1, "is empty"),
             ("not UTF-8", ["--corpus", bad], 1, "not UTF-8"),
             ("missing corpus", ["--corpus", os.path.join(workdir, "nope.txt")], 1, "cannot read"),
             ("window beyond the block size", ["--corpus", good, "--window", "100000"], 2, "block size"),
             ("window of one", ["--corpus", good, "--window", "1"], 2, "outside 2"),
             ("top of zero", ["--corpus", good, "--top", "0"], 2, "at least 1")]
    for what, args, code, needle in cases:
        if os.path.exists(out):
            os.remove(out)
        r = run(cli, ["scan", "--model", m, "--out", out] + args, check=False)
        ck.ok(f"{what}: exit {r.returncode} (want {code}), stderr {r.stderr.strip()!r}",
              r.returncode == code and needle in r.stderr)
        ck.ok(f"{what}: a failed scan wrote {out}", not os.path.exists(out) and not os.path.exists(out + ".part"))
    r = run(cli, ["scan", "--model", m, "--corpus", good, "--out", out])
    ck.ok("--out holds the results", os.path.exists(out) and json.load(open(out))["windows"] > 0)
    # Ctrl-C (SIGINT) during a long scan: exit 1 with a message, --out left as it was (absent).
    big = os.path.join(workdir, "big.txt")
    with open(big, "w") as f:
        f.write(corpus_text() * 3000)  # about 5 MB: a minute's scan
    os.remove(out)
    p = subprocess.Popen([cli, "scan", "--model", m, "--corpus", big, "--out", out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    ck.ok(f"SIGINT: exit {p.returncode} (want 1), stderr {err.strip()!r}", p.returncode == 1 and "interrupted" in err)
    ck.ok("SIGINT: no results file", not os.path.exists(out) and not os.path.exists(out + ".part"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tokenizer", required=True, help="a SentencePiece tokenizer.json that adds BOS (spm32k)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    corpus = os.path.join(args.workdir, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(corpus_text())
    ck = Checker()
    n = check_model(ck, args.cli, "builtin:fortunes-en", corpus, args.workdir, 96, 0, 4, "fortunes-en")
    n2 = check_model(ck, args.cli, "builtin:fortunes-en", corpus, args.workdir, 64, 40, 3, "fortunes-en-overlap")
    llama = os.path.join(args.workdir, "llama_spm")
    shutil.rmtree(llama, ignore_errors=True)
    run(args.cli, ["random", "--preset", "llama-small", "--layers", "2", "--embd", "32", "--heads", "4", "--kv-heads",
                   "2", "--vocab", "32000", "--context", "64", "--seed", "3", "--out", llama])
    shutil.copy(args.tokenizer, os.path.join(llama, "tokenizer.json"))
    n3 = check_model(ck, args.cli, llama, corpus, args.workdir, 48, 0, 3, "llama-spm")
    check_errors(ck, args.cli, args.workdir)
    print(f"windows checked: {n} + {n2} + {n3}; {ck.passed} passed, {ck.failed} failed")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
