#!/bin/bash
# The GPU backend measured on a machine with a GPU, in one command of a few minutes:
#   1. the GPU parity tests (attnviz_gpu_tests; tests/reference/parity.py and the hybrids',
#      Gemma 4's and GPT-OSS's references with --backend gpu, where a python3 with torch is
#      at hand);
#   2. `bench --backend gpu` against `--backend cpu` on random GGUF files of the
#      Qwen2.5-0.5B and Llama-3.2-3B shapes (Q4_K) at T = 512 and 2048, with appends;
#   3. the GUI's --type run at T = 2000, drawn offscreen through EGL (attnviz --headless),
#      on each backend.
# It writes $OUT/device-check.json and $OUT/device-check.md (a table for
# docs/performance.md), $OUT/device-check.log, $OUT/device-check-profile.txt (every GPU
# kernel timed, ATTNVIZ_GL_PROFILE=1) and $OUT/device-check-gpu.png (the GUI's last frame).
#
#   scripts/device-check.sh [--pack FILE.tar.xz] [--build DIR] [--out DIR] [--allow-software] [--quick]
#
# --pack unpacks what scripts/device-pack.sh packed here (programs and libraries) and runs
# those; else the programs come from --build (default build). --out defaults to $OUT, else
# ./device-check-out. Without a GPU (the GPU backend falls back to the CPU, or the renderer
# is a software one: llvmpipe, softpipe, SwiftShader) it says so and exits 3 without
# running the rest; --allow-software runs it anyway (the test of this script on Mesa).
# --quick: the tiny preset, T = 64 and 256, a short text: a run of a minute on llvmpipe.
#
# CPU runs: OMP_NUM_THREADS=2 for the 0.5B shape (the figure the README's 2-core machine
# gives) and all cores for both shapes. Per-step time limits keep the whole under 8 minutes.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
pack="" build=build out="${OUT:-$root/device-check-out}" allow_software=0 quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) pack=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --allow-software) allow_software=1; shift ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$out/device-check.log"
: >"$log"
say() { echo "device-check: $*" | tee -a "$log"; }

if [ -n "$pack" ]; then
  tar -C "$work" -xf "$pack" || { say "cannot unpack $pack"; exit 1; }
  cli="$work/bin/attnviz-cli" gui="$work/bin/attnviz" gtest="$work/bin/attnviz_gpu_tests"
  # The packed libraries first, then the driver's (NVIDIA's glvnd vendor libraries).
  export LD_LIBRARY_PATH="$work/lib:/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  cli="$build/app/attnviz-cli" gui="$build/app/attnviz" gtest="$build/tests/attnviz_gpu_tests"
fi
# NVIDIA's EGL vendor file, where the driver is mounted rather than installed.
for f in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
  if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f "$f" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES=$f; fi
done
export ATTNVIZ_DATA_DIR="$root" DISPLAY= WAYLAND_DISPLAY=
for p in "$cli" "$gui" "$gtest"; do
  [ -x "$p" ] || { say "$p is missing (build it, or pass --pack from scripts/device-pack.sh)"; exit 1; }
done
cores=$(nproc)
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch, numpy' 2>/dev/null; then py=$p; break; fi
done

# 0. Is there a GPU? The backend names its renderer; a fallback to the CPU says why.
"$cli" bench --model builtin:fortunes-en --backend gpu --length 16 --reps 1 --json >"$work/probe.json" 2>"$work/probe.err"
renderer=$(sed -n 's/.*"gpu_renderer":"\([^"]*\)".*/\1/p' "$work/probe.json")
if [ -z "$renderer" ]; then
  say "no GPU: the GPU backend cannot run here ($(tr '\n' ' ' <"$work/probe.err" | cut -c1-400))"
  exit 3
fi
say "renderer: $renderer; $cores cores; $(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
if echo "$renderer" | grep -Eqi 'llvmpipe|softpipe|swiftshader|software' && [ $allow_software = 0 ]; then
  say "no GPU: the renderer is a software one ($renderer); --allow-software runs the check anyway"
  exit 3
fi

if [ $quick = 1 ]; then
  shapes="tiny" lengths="64 256" type_t=200 keys=6 gpu_reps=2 limit=300
else
  shapes="qwen2.5-0.5b llama3.2-3b" lengths="512 2048" type_t=2000 keys=20 gpu_reps=3 limit=150
fi
# The models, written in the background while the tests run.
for s in $shapes; do
  ( "$cli" random --preset "$s" --gguf Q4_K --out "$work/$s" >"$work/$s.random.log" 2>&1; echo $? >"$work/$s.random.rc" ) &
done

# 1. Parity.
t0=$(date +%s)
timeout 150 "$gtest" --gtest_brief=1 >"$work/gtest.log" 2>&1
gtest_rc=$?
gtest_summary=$(grep -E '^\[  (PASSED|FAILED)  \]' "$work/gtest.log" | tr '\n' ' ')
say "attnviz_gpu_tests: exit $gtest_rc, $gtest_summary($(( $(date +%s) - t0 )) s)"
grep -E '^\[  FAILED  \]|Failure|error' "$work/gtest.log" | head -40 >>"$log"
parity_rc=-1 parity_summary="not run: no python3 with torch"
if [ -n "$py" ]; then
  # parity.py (one kind of layer), then the hybrids', Gemma 4's and GPT-OSS's references
  parity_rc=0 parity_summary=""
  for check in parity hybrid_parity lfm2_parity gemma4_parity gpt_oss_parity; do
    t0=$(date +%s)
    timeout 150 "$py" "tests/reference/$check.py" --backend gpu --cli "$cli" --workdir "$work/$check" >"$work/$check.log" 2>&1
    rc=$?
    [ "$rc" = 0 ] || parity_rc=$rc
    parity_summary="$parity_summary$check: $(tail -1 "$work/$check.log"); "
    say "$check.py --backend gpu: exit $rc, $(tail -1 "$work/$check.log") ($(( $(date +%s) - t0 )) s)"
    grep -E 'FAIL' "$work/$check.log" | head -20 >>"$log"
  done
fi
wait  # the models

# 2. bench, GPU against CPU.
runs="$out/device-check-runs.jsonl"  # every run as it ends: what a cut-off check still returns
: >"$runs"
bench() {  # label threads backend model T reps
  local label=$1 threads=$2 backend=$3 model=$4 t=$5 reps=$6 o
  o=$(OMP_NUM_THREADS=$threads timeout $limit "$cli" bench --model "$model" --backend "$backend" --length "$t" --reps "$reps" \
        --matrices auto --last-logits --json 2>>"$log")
  local rc=$?
  if [ $rc -ne 0 ] || [ -z "$o" ]; then
    say "bench $label $backend T=$t: exit $rc (124: past ${limit} s)"
    echo "{\"label\":\"$label\",\"backend\":\"$backend\",\"length\":$t,\"threads\":$threads,\"failed\":$rc}" >>"$runs"
    return
  fi
  echo "{\"label\":\"$label\",\"threads\":$threads,\"run\":$o}" >>"$runs"
  say "bench $label $backend threads=$threads T=$t: full $(echo "$o" | sed -n 's/.*"median_ms":\([0-9.]*\).*/\1/p') ms, append $(echo "$o" | sed -n 's/.*"append_median_ms":\([0-9.]*\).*/\1/p') ms"
}
for s in $shapes; do
  m="$work/$s/model.gguf"
  [ "$(cat "$work/$s.random.rc" 2>/dev/null)" = 0 ] || { say "random $s failed: $(tail -3 "$work/$s.random.log")"; continue; }
  for t in $lengths; do
    bench "$s" "$cores" gpu "$m" "$t" "$gpu_reps"
    bench "$s" "$cores" cpu "$m" "$t" 1
    if [ "$s" = qwen2.5-0.5b ] || [ $quick = 1 ]; then bench "$s" 2 cpu "$m" "$t" 1; fi
  done
done

# Where the GPU's time goes: every kernel timed (ATTNVIZ_GL_PROFILE=1 serialises them), one
# full pass and one append of the first shape at the longest T.
s=${shapes%% *}
t=${lengths##* }
[ -f "$work/$s/model.gguf" ] && ATTNVIZ_GL_PROFILE=1 ATTNVIZ_GL_VERBOSE=1 timeout $limit "$cli" bench --model "$work/$s/model.gguf" --backend gpu \
  --length "$t" --reps 1 --matrices auto --last-logits >"$out/device-check-profile.txt" 2>&1

# 3. The GUI typing at T = type_t, offscreen, on each backend.
s=${shapes%% *}
text=$(yes "the cat sat on the mat." | head -n $((type_t / 20 + 1)) | tr '\n' ' ' | cut -c1-$type_t)
typed=$(echo "and then it ran away from the dog" | cut -c1-$keys)
for backend in gpu cpu; do
  timeout 240 "$gui" --headless --model "$work/$s/model.gguf" --backend "$backend" --text "$text" --type "$typed" \
    --screenshot "$work/type-$backend.png" >>"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && [ -f "$work/type-$backend.png.json" ]; then
    echo "{\"label\":\"type\",\"backend\":\"$backend\",\"length\":$type_t,\"sidecar\":$(tr -d '\n' <"$work/type-$backend.png.json")}" >>"$runs"
    say "GUI --type on $backend, T=$type_t: done"
  else
    say "GUI --type on $backend: exit $rc"
  fi
done
cp "$work/type-gpu.png" "$out/device-check-gpu.png" 2>/dev/null

# 4. The report.
report_py=$(command -v "${py:-python3}" || command -v python3 || echo /usr/bin/python3)
"$report_py" - "$runs" "$out" "$renderer" "$cores" "$gtest_rc" "$gtest_summary" "$parity_rc" "$parity_summary" <<'PY'
import json, sys
runs_path, out, renderer, cores, gtest_rc, gtest_summary, parity_rc, parity_summary = sys.argv[1:9]
runs = [json.loads(l) for l in open(runs_path) if l.strip()]
bench = {}
for r in runs:
    if "run" in r:
        b = r["run"]
        bench[(r["label"], b["length"], b["backend"], r["threads"])] = b
rows, table = [], []
for (label, t, backend, threads), b in sorted(bench.items()):
    if backend != "gpu":
        continue
    cpu_all = bench.get((label, t, "cpu", int(cores)))
    cpu_2 = bench.get((label, t, "cpu", 2))
    row = {"shape": label, "length": t, "gpu_full_ms": b["median_ms"], "gpu_device_ms": b.get("device_median_ms"),
           "gpu_append_ms": b["append_median_ms"],
           "cpu_full_ms": cpu_all and cpu_all["median_ms"], "cpu_append_ms": cpu_all and cpu_all["append_median_ms"],
           "cpu2_full_ms": cpu_2 and cpu_2["median_ms"], "cpu2_append_ms": cpu_2 and cpu_2["append_median_ms"],
           "gpu_weights_mb": b.get("device_weights_mb")}
    rows.append(row)
typing = {}
for r in runs:
    if r.get("label") == "type":
        t = r["sidecar"].get("typing", {})
        fwd = sorted(t.get("forward_ms", []))
        lat = sorted(t.get("latency_ms", []))
        med = lambda v: v[len(v) // 2] if v else None
        typing[r["backend"]] = {"length": r["length"], "keys": t.get("keys"), "key_to_frame_median_ms": t.get("median_ms"),
                                "forward_median_ms": med(fwd), "draw_median_ms": med(sorted(t.get("draw_ms", []))),
                                "ratio": (t.get("median_ms") / med(fwd)) if fwd and med(fwd) else None}
report = {"renderer": renderer, "cores": int(cores), "gpu_tests": {"exit": int(gtest_rc), "summary": gtest_summary.strip()},
          "parity": {"exit": int(parity_rc), "summary": parity_summary.strip()}, "bench": rows, "typing": typing, "raw": runs}
json.dump(report, open(f"{out}/device-check.json", "w"), indent=1)
f = lambda v: "–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}")
x = lambda a, b: "–" if not a or not b else f"{b / a:.1f}×"
md = [f"GPU: {renderer}; CPU: {cores} cores of the same machine. Q4_K random GGUF files; "
      "bench --matrices auto --last-logits; medians in ms.", "",
      f"GPU tests: {gtest_summary.strip() or 'exit ' + gtest_rc}; PyTorch references --backend gpu: {parity_summary.strip()}", "",
      f"| shape | T | GPU full | GPU device | CPU {cores} thr full | CPU 2 thr full | 2 thr / GPU | GPU append | CPU {cores} thr append | CPU 2 thr append |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    md.append(f"| {r['shape']} | {r['length']} | {f(r['gpu_full_ms'])} | {f(r['gpu_device_ms'])} | {f(r['cpu_full_ms'])} | "
              f"{f(r['cpu2_full_ms'])} | {x(r['gpu_full_ms'], r['cpu2_full_ms'])} | {f(r['gpu_append_ms'])} | "
              f"{f(r['cpu_append_ms'])} | {f(r['cpu2_append_ms'])} |")
md += ["", "| GUI --type (headless) | T | keys | key → frame | forward | draw | key / forward |", "|---|---:|---:|---:|---:|---:|---:|"]
for backend, t in typing.items():
    md.append(f"| {backend} | {t['length']} | {t['keys']} | {f(t['key_to_frame_median_ms'])} | {f(t['forward_median_ms'])} | "
              f"{f(t['draw_median_ms'])} | {'–' if t['ratio'] is None else format(t['ratio'], '.2f')} |")
open(f"{out}/device-check.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
report_rc=$?
[ $report_rc -eq 0 ] || { say "the report failed (exit $report_rc)"; exit 1; }
[ "$gtest_rc" = 0 ] || exit 1
[ "$parity_rc" = 0 ] || [ "$parity_rc" = -1 ] || exit 1
exit 0
