#!/usr/bin/python3
"""One command for the README's performance table: attnviz (CPU) against PyTorch eager.

    /usr/bin/python3 scripts/perf_table.py BUILD_DIR [--workdir DIR] [--rounds N] [--quick]
                                           [--torch-blas DIR|system] [--json-out F]

Builds nothing: BUILD_DIR must hold app/attnviz-cli. It writes random models with
`attnviz-cli random` (preset tiny: llama GQA, 4 layers, 64 wide, 8 heads, 2 KV heads;
preset gpt2-small: 12 layers, 768 wide, 12 heads, 50257 vocab) and adds builtin:poems-zh /
builtin:fortunes-en when `attnviz-cli info --list` shows them. For every model and T in
64, 256, 1024 (skipping a T above the model's context) it runs `attnviz-cli bench --json`
and tests/reference/torch_bench.py --json on the same model directory, interleaved
(attnviz, torch, attnviz, torch, ... with the order alternating per round), and prints
a Markdown table of the medians over the rounds (each round's value is itself the median
of its repetitions).

PyTorch runs as tests/reference/torch_bench.py says: Debian's python3-torch through
/usr/bin/python3, float32, torch.set_num_threads(2), OPENBLAS_CORETYPE=SkylakeX. Debian's
torch calls the generic libblas.so.3; where that is netlib's reference BLAS (no OpenBLAS
installed) PyTorch's matrix products run at ~2 GFLOP/s, which says nothing about PyTorch.
--torch-blas DIR puts DIR (a directory with libblas.so.3, e.g.
/usr/lib/x86_64-linux-gnu/openblas-openmp from libopenblas0-openmp) first on torch's
LD_LIBRARY_PATH; by default the first of openblas-openmp, openblas-pthread that exists
under /usr/lib/x86_64-linux-gnu is used, else the system's. The table names the BLAS.

Peak: measured by BUILD_DIR/bench/attnviz_bench_ops (BM_FmaPeak: 24 independent FMA
chains per thread, as many threads as OpenMP runs) when it is built; otherwise estimated as
cores × FMA units × SIMD width (float32 lanes) × 2 (multiply + add) × clock, with
the cores from os.cpu_count() (logical CPUs: on a VM, its vCPUs), the clock from
/proc/cpuinfo's "cpu MHz" (the reported clock, not a boost clock) and the SIMD width from
its flags (avx512f 16, avx2+fma 8, else 4). FMA units per core: AMD Zen 4 (family 25
with avx512f) runs 512-bit FMAs on two 256-bit pipes (= 1 × 16 lanes per cycle, written
as 2 units × 8 lanes); other AVX-512 / AVX2 CPUs are assumed to have 2 FMA units of the
full width. GFLOP/s counts the forward's FLOPs as app/cmd_bench.cpp's forward_flops.
"weights read once" is bench's weights_read_median_ms: a summing pass over every weight a
one-token pass reads (the floor for appending a token); the last ratio is append / that.

Two more tables (--sections picks which of base, job, large run; default all three):

job: GPT-2 small at T=256 and 1024 doing what a viewer needs, all heads' attention
weights and the next-token distribution at the last position: `bench --matrices keep
--last-logits` against `torch_bench.py --weights-only` (q, k, v, the softmax of every head,
the last position's logits), interleaved rounds, full-pass medians.

large: the Qwen2.5-0.5B shape at T = 512, 2048, 4096 and the TinyLlama-1.1B shape at
T = 2048 (random weights, float32), attnviz only, run as the GUI runs them (`bench
--matrices auto --last-logits`: compact traces, the last row's logits): full pass, append
against reading the weights once, one head's heatmap recomputed, trace size and peak RSS
against the budget 2 x weights + 1 GB. One round each; the full pass dominates (T=4096:
about 3 x 35 s on 2 cores).

Run time: about 5–10 minutes for base on 2 busy cores (gpt2-small at T=1024 alone is most
of it: one round, one repetition), about 5 for job, about 10 for large; --quick skips
gpt2-small at 1024 in base.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCH_BENCH = os.path.join(ROOT, "tests", "reference", "torch_bench.py")
LENGTHS = (64, 256, 1024)


def cpu_peak():
    """-> (GFLOP/s, description of the assumption)."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if ":" in line:
                k, v = (s.strip() for s in line.split(":", 1))
                info.setdefault(k, v)
    flags = set(info.get("flags", "").split())
    mhz = float(info.get("cpu MHz", "0") or 0)
    cores = os.cpu_count() or 1
    vendor, family = info.get("vendor_id", ""), int(info.get("cpu family", "0") or 0)
    if "avx512f" in flags and vendor == "AuthenticAMD" and family == 25:
        units, lanes, why = 2, 8, "AMD Zen 4: AVX-512 on 2 × 256-bit FMA pipes"
    elif "avx512f" in flags:
        units, lanes, why = 2, 16, "AVX-512, assumed 2 × 512-bit FMA units"
    elif "avx2" in flags and "fma" in flags:
        units, lanes, why = 2, 8, "AVX2+FMA, assumed 2 × 256-bit FMA units"
    else:
        units, lanes, why = 1, 4, "SSE, no FMA assumed"
    peak = cores * units * lanes * 2 * mhz / 1e3
    desc = (f"{info.get('model name', '?')}, {cores} logical CPUs × {units} FMA units × {lanes} float32 lanes × 2 "
            f"× {mhz:.0f} MHz (/proc/cpuinfo) = {peak:.0f} GFLOP/s ({why})")
    return peak, desc


def measured_peak(build):
    """-> (GFLOP/s, description) from bench_ops' BM_FmaPeak (24 independent FMA chains per
    thread, every OpenMP thread), or None when that binary is not built."""
    exe = os.path.join(build, "bench", "attnviz_bench_ops")
    if not os.access(exe, os.X_OK):
        return None
    out = run([exe, "--benchmark_filter=BM_FmaPeak", "--benchmark_repetitions=5", "--benchmark_format=json"])
    vals = [b["GFLOP/s"] for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    peak = statistics.median(vals)
    return peak, (f"measured: float32 FMAs on {os.cpu_count()} logical CPUs, 24 independent chains each "
                  f"(bench_ops BM_FmaPeak, median of 5) = {peak:.0f} GFLOP/s")


def run(cmd, env=None, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr.strip()}")
    return p.stdout


def find_blas(choice):
    if choice == "system":
        return None
    if choice:
        if not os.path.exists(os.path.join(choice, "libblas.so.3")):
            sys.exit(f"perf_table.py: --torch-blas {choice}: no libblas.so.3 there")
        return choice
    for sub in ("openblas-openmp", "openblas-pthread"):
        d = os.path.join("/usr/lib/x86_64-linux-gnu", sub)
        if os.path.exists(os.path.join(d, "libblas.so.3")):
            return d
    return None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="build directory with app/attnviz-cli (nothing is built)")
    ap.add_argument("--workdir", help="where the random models go (default: a temporary directory, removed)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per case (default 3; 1 for gpt2-small at 1024)")
    ap.add_argument("--quick", action="store_true", help="skip gpt2-small at T=1024")
    ap.add_argument("--torch-blas", help="directory with the libblas.so.3 torch should use, or 'system'")
    ap.add_argument("--json-out", help="also write every measurement as JSON here")
    ap.add_argument("--sections", default="base,job,large",
                    help="comma list of the tables to make: base, job, large (default all)")
    a = ap.parse_args(argv)
    cli = os.path.join(os.path.abspath(a.build), "app", "attnviz-cli")
    if not os.access(cli, os.X_OK):
        sys.exit(f"perf_table.py: {cli} not found\n  HINT: build first: cmake --build {a.build} --target attnviz-cli")
    work = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="attnviz-perf-")
    os.makedirs(work, exist_ok=True)
    blas = find_blas(a.torch_blas)
    torch_env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
    if blas:
        torch_env["LD_LIBRARY_PATH"] = blas + (":" + torch_env["LD_LIBRARY_PATH"] if torch_env.get("LD_LIBRARY_PATH") else "")
    t_start = time.time()
    try:
        sections = set(a.sections.split(","))
        peak, peak_desc = measured_peak(os.path.abspath(a.build)) or cpu_peak()
        raw = []
        if "base" in sections:
            base_table(a, cli, work, torch_env, blas, peak, peak_desc, raw, t_start)
        if "job" in sections:
            job_table(a, cli, work, torch_env, raw, t_start)
        if "large" in sections:
            large_table(cli, work, raw, t_start)
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump({"peak_gflops": peak, "peak": peak_desc, "runs": raw}, f, indent=1)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def preset_dir(cli, work, preset):
    d = os.path.join(work, preset)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        run([cli, "random", "--preset", preset, "--out", d])
    return d


def base_table(a, cli, work, torch_env, blas, peak, peak_desc, raw, t_start):
    models = []  # (label, spec for attnviz, directory for torch)
    for preset in ("tiny", "gpt2-small"):
        d = preset_dir(cli, work, preset)
        models.append((preset, d, d))
    listed = run([cli, "info", "--list"])
    for name in ("builtin:poems-zh", "builtin:fortunes-en"):
        if name in listed.split():
            info = json.loads(run([cli, "info", "--model", name, "--json"]))
            models.append((name, name, info["dir"]))
    rows = []
    for label, spec, mdir in models:
        info = json.loads(run([cli, "info", "--model", spec, "--json"]))
        for T in LENGTHS:
            if T > info["context"]:
                continue
            big = info["n_embd"] >= 512
            if big and T == 1024 and a.quick:
                continue
            rounds = 1 if big and T == 1024 else a.rounds
            reps = 1 if big and T == 1024 else 2 if big else 5 if T == 1024 else 9
            ours = {"median_ms": [], "append_median_ms": [], "gflops_per_s": [], "weights_read_median_ms": []}
            theirs = {"median_ms": [], "append_median_ms": []}
            blas_used = "?"
            for r in range(rounds):
                order = ("attnviz", "torch") if r % 2 == 0 else ("torch", "attnviz")
                for who in order:
                    if who == "attnviz":
                        j = json.loads(run([cli, "bench", "--model", spec, "--length", str(T), "--reps", str(reps), "--json"]))
                        for k in ours:
                            ours[k].append(j[k])
                    else:
                        j = json.loads(run(["/usr/bin/python3", TORCH_BENCH, "--model", mdir, "--length", str(T),
                                            "--reps", str(reps), "--threads", "2", "--json"], env=torch_env))
                        for k in theirs:
                            theirs[k].append(j[k])
                        blas_used = j.get("blas", "?")
                    raw.append({"model": label, "T": T, "round": r, "who": who, **j})
            med = {k: statistics.median(v) for k, v in ours.items()}
            tmed = {k: statistics.median(v) for k, v in theirs.items()}
            rows.append((label, T, med["median_ms"], med["append_median_ms"], med["gflops_per_s"],
                         100 * med["gflops_per_s"] / peak, tmed["median_ms"], tmed["append_median_ms"],
                         med["median_ms"] / tmed["median_ms"], med["append_median_ms"] / tmed["append_median_ms"],
                         med["weights_read_median_ms"], med["append_median_ms"] / med["weights_read_median_ms"],
                         rounds, reps))
            print(f"  {label} T={T}: done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
    blas_name = "system libblas.so.3" if not blas else blas
    print(f"CPU peak: {peak_desc}")
    print(f"PyTorch: torch_bench.py, float32, 2 threads, OPENBLAS_CORETYPE=SkylakeX, BLAS {blas_name} "
          f"(loaded: {os.path.basename(blas_used.split(',')[-1])})")
    print(f"Medians over interleaved rounds; total run time {time.time() - t_start:.0f} s\n")
    print("| model | T | attnviz full ms | attnviz append ms | GFLOP/s | % of peak | PyTorch full ms "
          "| PyTorch append ms | attnviz/PyTorch full | attnviz/PyTorch append | weights read once ms "
          "| append / weights read | rounds × reps |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (label, T, f, ap_, g, pct, tf, ta, rf, ra, wr, aw, rounds, reps) in rows:
        print(f"| {label} | {T} | {f:.2f} | {ap_:.2f} | {g:.1f} | {pct:.1f}% | {tf:.2f} | {ta:.2f} | {rf:.3g} | {ra:.3g} "
              f"| {wr:.3g} | {aw:.3g} | {rounds} × {reps} |")


def job_table(a, cli, work, torch_env, raw, t_start):
    """GPT-2 small: all heads' weights and the last position's distribution, both sides."""
    d = preset_dir(cli, work, "gpt2-small")
    rows = []
    for T in (256, 1024):
        rounds, reps = (a.rounds, 3) if T == 256 else (2, 1)
        ours, theirs = [], []
        for r in range(rounds):
            for who in (("attnviz", "torch") if r % 2 == 0 else ("torch", "attnviz")):
                if who == "attnviz":
                    j = json.loads(run([cli, "bench", "--model", d, "--length", str(T), "--reps", str(reps),
                                        "--matrices", "keep", "--last-logits", "--json"]))
                    ours.append(j["median_ms"])
                else:
                    j = json.loads(run(["/usr/bin/python3", TORCH_BENCH, "--model", d, "--length", str(T), "--reps",
                                        str(reps), "--threads", "2", "--weights-only", "--json"], env=torch_env))
                    theirs.append(j["median_ms"])
                raw.append({"table": "job", "model": "gpt2-small", "T": T, "round": r, "who": who, **j})
        rows.append((T, statistics.median(ours), statistics.median(theirs), rounds, reps))
        print(f"  job gpt2-small T={T}: done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
    print("\nGPT-2-small shape: all heads' attention weights and the last position's next-token distribution "
          "(attnviz bench --matrices keep --last-logits; torch_bench.py --weights-only)\n")
    print("| T | attnviz ms | PyTorch ms | attnviz / PyTorch | rounds × reps |")
    print("|---:|---:|---:|---:|---:|")
    for T, o, t, rounds, reps in rows:
        print(f"| {T} | {o:.1f} | {t:.1f} | {o / t:.2f} | {rounds} × {reps} |")


def large_table(cli, work, raw, t_start):
    """The 0.5B and 1.1B shapes at long T, as the GUI runs them."""
    cases = (("qwen2.5-0.5b", 512, 3), ("qwen2.5-0.5b", 2048, 2), ("qwen2.5-0.5b", 4096, 2), ("tinyllama-1.1b", 2048, 2))
    rows = []
    for preset, T, reps in cases:
        d = preset_dir(cli, work, preset)
        j = json.loads(run([cli, "bench", "--model", d, "--length", str(T), "--reps", str(reps), "--matrices", "auto",
                            "--last-logits", "--json"], timeout=3600))
        raw.append({"table": "large", "model": preset, "T": T, "who": "attnviz", **j})
        rows.append((preset, T, j, reps))
        print(f"  large {preset} T={T}: done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
    print("\nLarge models and long texts, as the GUI runs them (bench --matrices auto --last-logits; "
          "budgets: append <= 1.5 x weights read, peak RSS <= 2 x weights + 1 GB, a head's heatmap <= 50 ms at T=2048)\n")
    print("| model | T | full ms | GFLOP/s | append ms | weights read ms | append / weights read | head heatmap ms "
          "| trace MB | compact | weights MB | peak RSS MB | RSS budget MB | reps |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for preset, T, j, reps in rows:
        w = j["weights_mb"]
        print(f"| {preset} | {T} | {j['median_ms']:.0f} | {j['gflops_per_s']:.0f} | {j['append_median_ms']:.1f} "
              f"| {j['weights_read_median_ms']:.1f} | {j['append_median_ms'] / j['weights_read_median_ms']:.2f} "
              f"| {j['head_median_ms']:.1f} | {j['trace_mb']:.0f} | {'yes' if j['compact'] else 'no'} | {w:.0f} "
              f"| {j['peak_rss_mb']:.0f} | {2 * w + 1000:.0f} | {reps} |")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
