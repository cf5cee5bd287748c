#!/usr/bin/python3
"""One command for the README's performance table: attnviz (CPU) against PyTorch eager.

    /usr/bin/python3 scripts/perf_table.py BUILD_DIR [--workdir DIR] [--rounds N] [--quick]
                                           [--torch-blas DIR|system] [--json-out F]
                                           [--sections base,job,large,llama] [--shapes 0.5b,3b,8b]
                                           [--types Q4_K,Q8_0,F16] [--llama-reps N] [--keep-models]
                                           [--max-load L] [--node NODE]

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

More tables (--sections picks which of base, job, large, llama run; default the first three):

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

llama: attnviz against llama.cpp on the same GGUF file, 2 threads each. For every shape
(--shapes, default 0.5b,3b,8b: presets qwen2.5-0.5b, llama3.2-3b, llama3.1-8b; the hybrids
qwen3.5-0.8b and lfm2-350m when named) and type
(--types, default Q4_K,Q8_0,F16) it writes the file with `attnviz-cli random --gguf TYPE`
(random weights, character tokenizer), runs `attnviz-cli bench --model FILE --length 512
--matrices auto --last-logits --json` with OMP_NUM_THREADS=2 (the default weights, again
with `--weights f32` when bench accepts that flag, and with `--arith int8` when it accepts
that one), then
bench/llama_peer/llama_peer.mjs on the same file (node-llama-cpp's prebuilt CPU llama.cpp,
2 threads, a 512-token prompt, then one more token), and deletes the file unless
--keep-models. Goals: attnviz's append <= 1.25 x llama.cpp's decode of one token after the
prompt; attnviz's full pass at T=512 <= 1.5 x llama.cpp's pp512. A run attnviz refuses for
memory (float32 weights of the 8B shape: 32 GB) is shown as such. One run per row, reps
(--llama-reps, default 3 / 2 / 1 for 0.5B / 3B / 8B) small: the 8B F16 row alone is
several minutes on 2 cores; --max-load L waits (up to 10 minutes) before each
measurement for the 1-minute load average to fall to L. Needs Node 20+ and the peer installed once:
`cd bench/llama_peer && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional`.
Big files go to --workdir (default a temporary directory; an 8B F16 file is 16 GB).

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
PEER = os.path.join(ROOT, "bench", "llama_peer", "llama_peer.mjs")
# llama section: shape name -> (random preset, reps per row by default).
LLAMA_SHAPES = {"0.5b": ("qwen2.5-0.5b", 3), "3b": ("llama3.2-3b", 2), "8b": ("llama3.1-8b", 1),
                "qwen3.5-0.8b": ("qwen3.5-0.8b", 2), "lfm2-350m": ("lfm2-350m", 3)}  # the hybrids: --shapes
LLAMA_T = 512


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
                    help="comma list of the tables to make: base, job, large, llama (default base,job,large)")
    ap.add_argument("--shapes", default="0.5b,3b,8b",
                    help="llama section: comma list of 0.5b, 3b, 8b, qwen3.5-0.8b, lfm2-350m (default 0.5b,3b,8b)")
    ap.add_argument("--types", default="Q4_K,Q8_0,F16", help="llama section: comma list of GGUF types")
    ap.add_argument("--llama-reps", type=int, help="llama section: reps per row (default 3 / 2 / 1 for 0.5B / 3B / 8B)")
    ap.add_argument("--keep-models", action="store_true", help="llama section: keep the GGUF files (default: delete "
                    "each after its row)")
    ap.add_argument("--max-load", type=float, help="llama section: before each measurement wait (up to 10 minutes) "
                    "until the 1-minute load average is at most this (the cores are shared)")
    ap.add_argument("--skip-f32-weights", action="store_true",
                    help="llama section: leave out the `--weights f32` runs (their columns show —)")
    ap.add_argument("--node", default="node", help="llama section: the Node.js binary (default: node on PATH)")
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
    sections = set(a.sections.split(","))
    unknown = sections - {"base", "job", "large", "llama"}
    if unknown:
        sys.exit(f"perf_table.py: unknown --sections {','.join(sorted(unknown))}\n  HINT: base, job, large, llama")
    bad = [s for s in a.shapes.lower().split(",") if s.strip() and s.strip() not in LLAMA_SHAPES]
    if bad:
        sys.exit(f"perf_table.py: unknown --shapes {','.join(bad)}\n  HINT: {', '.join(LLAMA_SHAPES)}")
    try:
        peak, peak_desc = (measured_peak(os.path.abspath(a.build)) or cpu_peak()) if "base" in sections else (None, None)
        raw = []
        if "base" in sections:
            base_table(a, cli, work, torch_env, blas, peak, peak_desc, raw, t_start)
        if "job" in sections:
            job_table(a, cli, work, torch_env, raw, t_start)
        if "large" in sections:
            large_table(cli, work, raw, t_start)
        if "llama" in sections:
            llama_table(a, cli, work, raw, t_start)
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



def mem_available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def fmt_ms(v):
    return "—" if v is None else f"{v:.0f}" if v >= 1000 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_ratio(x, y, goal):
    if x is None or y is None:
        return "—"
    r = x / y
    return f"{r:.2f}" + ("" if r <= goal else " ✗")


def wait_for_quiet(max_load, limit_s=600):
    """Waits until the 1-minute load average is at most max_load (or limit_s passed);
    -> the load average when the measurement starts."""
    t0 = time.time()
    while max_load is not None and os.getloadavg()[0] > max_load and time.time() - t0 < limit_s:
        time.sleep(10)
    return os.getloadavg()[0]


def attnviz_llama_run(cli, path, reps, extra, env, need_mb):
    """bench on one GGUF file as the GUI runs it; -> its JSON, or {"error": why} when it
    cannot run (attnviz refused, or the float32 weights alone would not fit in memory)."""
    avail = mem_available_mb()
    if need_mb is not None and need_mb > 0.9 * avail:
        return {"error": f"skipped: about {need_mb / 1024:.1f} GB of weights, {avail / 1024:.1f} GB available"}
    cmd = [cli, "bench", "--model", path, "--length", str(LLAMA_T), "--reps", str(reps), "--matrices", "auto",
           "--last-logits", "--json"] + extra
    try:
        return json.loads(run(cmd, env=env, timeout=3600))
    except RuntimeError as e:
        lines = str(e).splitlines()
        return {"error": "refused: " + (lines[1] if len(lines) > 1 else lines[0])[:160]}


def llama_table(a, cli, work, raw, t_start):
    """attnviz against llama.cpp (node-llama-cpp's prebuilt CPU build) on the same GGUF files."""
    shapes = [s.strip().lower() for s in a.shapes.split(",") if s.strip()]
    types = [t.strip().upper() for t in a.types.split(",") if t.strip()]
    peer_dir = os.path.dirname(PEER)
    if not os.path.isdir(os.path.join(peer_dir, "node_modules", "node-llama-cpp")):
        sys.exit("perf_table.py: the llama.cpp peer is not installed\n  HINT: cd bench/llama_peer && "
                 "NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional   (Node 20+; nothing else needs it)")
    bench_help = run([cli, "bench", "--help"])
    has_weights_flag, has_arith = "--weights" in bench_help, "--arith" in bench_help
    env = dict(os.environ, OMP_NUM_THREADS="2")
    rows, peer_build = [], None
    for shape in shapes:
        preset, default_reps = LLAMA_SHAPES[shape]
        reps = a.llama_reps or default_reps
        for typ in types:
            d = os.path.join(work, f"llama-{shape}-{typ}")
            path = os.path.join(d, "model.gguf")
            t0 = time.time()
            if not os.path.exists(path):
                run([cli, "random", "--preset", preset, "--gguf", typ, "--out", d], timeout=3600)
            gen_s = time.time() - t0
            try:
                info = json.loads(run([cli, "info", "--model", path, "--json"]))
                f32_mb = info["parameters"]["total"] * 4 / 2**20
                size_mb = os.path.getsize(path) / 2**20
                # The default path keeps the file's types once --weights exists; before, it is float32.
                load = [wait_for_quiet(a.max_load)]
                ours = attnviz_llama_run(cli, path, reps, [], env, None if has_weights_flag else f32_mb)
                print(f"  llama {shape} {typ}: attnviz done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
                load.append(wait_for_quiet(a.max_load))
                try:
                    peer = json.loads(run([a.node, PEER, "--model", path, "--threads", "2", "--prompt-tokens",
                                           str(LLAMA_T), "--reps", str(reps), "--json"], timeout=3600))
                    peer_build = f"node-llama-cpp {peer['node_llama_cpp_version']}, llama.cpp {peer['llama_cpp_build']}"
                except RuntimeError as e:  # llama.cpp refused the file: say so in the row
                    peer = {"error": "llama.cpp: " + str(e).splitlines()[-1][:160]}
                print(f"  llama {shape} {typ}: llama.cpp done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
                f32 = None
                if has_weights_flag and a.skip_f32_weights:
                    f32 = {"error": "--weights f32 not run"}
                elif has_weights_flag:
                    load.append(wait_for_quiet(a.max_load))
                    f32 = attnviz_llama_run(cli, path, reps, ["--weights", "f32"], env, f32_mb)
                int8 = None
                if has_arith:
                    load.append(wait_for_quiet(a.max_load))
                    int8 = attnviz_llama_run(cli, path, reps, ["--arith", "int8"], env, None)
                load.append(os.getloadavg()[0])
            finally:
                if not a.keep_models:
                    shutil.rmtree(d, ignore_errors=True)
            for who, j in (("attnviz", ours), ("llama.cpp", peer), ("attnviz --weights f32", f32),
                           ("attnviz --arith int8", int8)):
                if j is not None:
                    raw.append({"table": "llama", "shape": shape, "type": typ, "who": who, "load_avg": load, **j})
            rows.append((shape, typ, size_mb, ours, peer, f32, int8, reps, load))
            print(f"  llama {shape} {typ}: done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
    print(f"\nattnviz against llama.cpp on the same GGUF file (random weights), 2 threads each, T = {LLAMA_T}: "
          "attnviz `bench --matrices auto --last-logits` (OMP_NUM_THREADS=2); llama.cpp through "
          f"bench/llama_peer ({peer_build or '?'}; CPU, no mmap, no flash attention). "
          "append = one token through the KV cache (attnviz: the 512th after 511; llama.cpp: the 513th after "
          "512, logits + greedy pick); full = the whole 512-token pass with the last row's logits (llama.cpp: "
          "pp512). Goals: append / decode <= 1.25, full / pp512 <= 1.5; with --arith int8 (the int8 columns), "
          "append / decode <= 1.0 and full / pp512 <= 1.2 (✗ = not met). load avg: the 1-minute "
          f"load average around the row's runs ({os.cpu_count()} logical CPUs; above that the runs shared the cores).")
    if not has_weights_flag:
        print("This build's bench has no --weights flag: its default path converts the weights to float32, so the "
              "default columns are the float32 path and the f32 columns repeat them.")
    print("\n| shape | type | file MB | attnviz append ms | llama.cpp decode ms | append / decode | attnviz full ms "
          "| llama.cpp pp512 ms | full / pp512 | f32 append ms | f32 full ms | f32 append / decode | f32 full / pp512 "
          "| int8 append ms | int8 append / decode | int8 full ms | int8 full / pp512 "
          "| peak RSS MB: attnviz / f32 / llama.cpp | reps | load avg |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for shape, typ, size_mb, ours, peer, f32, int8, reps, load in rows:
        if f32 is None:
            f32 = ours
        g = lambda j, k: None if "error" in j else j[k]  # noqa: E731
        dec, pp = g(peer, "decode_median_ms"), g(peer, "pp_median_ms")
        rss = " / ".join("—" if "error" in j else f"{j['peak_rss_mb']:.0f}" for j in (ours, f32, peer))
        if int8 is None:
            int8 = {"error": "this build has no --arith"}
        notes = "; ".join(dict.fromkeys(j["error"] for j in (ours, f32, peer, int8) if "error" in j))
        print(f"| {shape} | {typ} | {size_mb:.0f} | {fmt_ms(g(ours, 'append_median_ms'))} | {fmt_ms(dec)} "
              f"| {fmt_ratio(g(ours, 'append_median_ms'), dec, 1.25)} | {fmt_ms(g(ours, 'median_ms'))} | {fmt_ms(pp)} "
              f"| {fmt_ratio(g(ours, 'median_ms'), pp, 1.5)} | {fmt_ms(g(f32, 'append_median_ms'))} "
              f"| {fmt_ms(g(f32, 'median_ms'))} | {fmt_ratio(g(f32, 'append_median_ms'), dec, 1.25)} "
              f"| {fmt_ratio(g(f32, 'median_ms'), pp, 1.5)} | {fmt_ms(g(int8, 'append_median_ms'))} "
              f"| {fmt_ratio(g(int8, 'append_median_ms'), dec, 1.0)} | {fmt_ms(g(int8, 'median_ms'))} "
              f"| {fmt_ratio(g(int8, 'median_ms'), pp, 1.2)} | {rss} | {reps}{' (' + notes + ')' if notes else ''} "
              f"| {min(load):.1f}–{max(load):.1f} |")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
