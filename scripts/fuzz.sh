#!/usr/bin/env bash
# Builds the libFuzzer binaries (clang, -fsanitize=fuzzer,address,undefined) and runs each
# fuzz target. Usage:
#   scripts/fuzz.sh [--seconds N] [--runs N] [--fork J] [--max-len B] [TARGET...]
# Each target stops after N seconds or N executions, whichever comes first (--runs alone:
# no time limit). --fork J runs J fuzzing processes per target at once (libFuzzer's
# -fork; --runs is then not exact). Defaults: 60 seconds per target, every target, one
# process. --max-len B: the largest input libFuzzer makes (default 4096 bytes; larger seeds
# are cut to it while fuzzing, and replayed whole by ctest's fuzz replays). Parsing time
# grows with the input: 4 kB inputs run about ten times as many executions per second as
# 64 kB ones, and still nest past tokenizer.json's depth limit; the limits only a larger
# file reaches (vocabulary, text size, shard count) are bad-input catalogue cases.
# New inputs go to build-fuzz/corpus/TARGET (ATTNVIZ_FUZZ_BUILD names another folder;
# seeded from tests/fuzz/corpus/TARGET, and chat_template also from ../shared/chat-templates,
# the real templates, when that folder is there); a crash leaves build-fuzz/artifacts/TARGET/crash-*
# and makes this script exit non-zero: add the file to tests/fuzz/corpus/TARGET/ with the
# fix, so every build replays it. Prints one summary line per target (executions, time).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds= runs=-1 fork=0 max_len=4096 targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --fork) fork="$2"; shift 2 ;;
    --max-len) max_len="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ -z "$seconds" ]]; then
  if [[ "$runs" -ge 0 ]]; then seconds=0; else seconds=60; fi
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  # the names listed in tests/fuzz/CMakeLists.txt
  mapfile -t targets < <(sed -n '/^set(ATTNVIZ_FUZZ_TARGETS/,/^)/p' tests/fuzz/CMakeLists.txt | sed '1d;$d' | tr -d ' ')
fi
build="${ATTNVIZ_FUZZ_BUILD:-build-fuzz}"  # the build folder (ATTNVIZ_FUZZ_BUILD overrides)
# -g1: line tables, all a crash's stack needs (full -g made the build about 40 s longer).
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g1 -O1"
# A unity build (CMake joins each target's sources 8 to a translation unit): the headers'
# template code is instrumented once per 8 files, which halves the build.
# ATTNVIZ_FUZZ_PREBUILT=1: the build folder is already configured with ATTNVIZ_FUZZ=ON and
# these sanitizers (.ci/run's one clang sanitizer build): it is built, not configured again.
if [[ "${ATTNVIZ_FUZZ_PREBUILT:-0}" != 1 ]]; then
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNVIZ_FUZZ=ON -DCMAKE_UNITY_BUILD=ON \
  -DATTNVIZ_GUI=OFF -DATTNVIZ_GPU=OFF -DATTNVIZ_NATIVE=OFF -DATTNVIZ_BLAS=eigen -DATTNVIZ_PYTHON=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target $(printf 'attnviz_fuzz_%s ' "${targets[@]}")
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# The targets that open files write each input to a scratch folder under TMPDIR: memory
# (/dev/shm) where there is one, rather than a disk.
if [[ -z "${TMPDIR:-}" && -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz-$t.log"
  start=$(date +%s)
  seeds=("tests/fuzz/corpus/$t")
  if [[ "$t" == chat_template && -d ../shared/chat-templates ]]; then seeds+=(../shared/chat-templates); fi
  if "$build/tests/fuzz/attnviz_fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$seconds" -runs="$runs" \
       -fork="$fork" -rss_limit_mb=2048 -timeout=10 -max_len="$max_len" -print_final_stats=1 \
       -artifact_prefix="$artifacts/" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log and $artifacts)"
    status=1
  fi
  # (grep finds nothing in one of the two forms: not a failure, hence the `|| true`s)
  execs=$( (grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || true) | awk '{s+=$2} END{print s+0}')
  # with --fork the parent prints running totals as "#N: cov: ..." instead
  if [[ "$fork" -gt 0 ]]; then execs=$( (grep -o '^#[0-9]*:' "$log" || true) | tr -d '#:' | tail -n 1); fi
  echo "fuzz $t: $execs executions in $(( $(date +%s) - start )) s, $result"
  if [[ "$result" != ok ]]; then
    # What a CI log needs to reproduce it elsewhere: the report, and each input (base64; add
    # it to tests/fuzz/corpus/TARGET/ after `base64 -d`).
    echo "--- the end of $log:"
    grep -v '^#[0-9]*: cov:' "$log" | tail -n 60 || true
    for a in "$artifacts"/*; do
      [[ -f "$a" ]] || continue
      echo "--- $(basename "$a") ($(stat -c %s "$a") bytes), base64:"
      head -c 16384 "$a" | base64 -w 120
    done
  fi
done
exit $status
