#!/usr/bin/env bash
# attnviz-cli re-executes itself once so that idle OpenMP threads sleep instead of spinning
# (core/engine/threads.h), unless the user chose a wait policy. bench --json reports the
# policy the run had. Usage: cli_wait_policy.sh PATH/attnviz-cli WORKDIR
set -u
cli=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
# policy_is WANT [VAR=VALUE...]: one JSON line on stdout whose omp_wait_policy is WANT
policy_is() {
  local want=$1
  shift
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$cli" bench --model builtin:poems-zh --length 8 --reps 1 --json \
    >"$work/out" 2>"$work/err"
  local code=$? lines
  lines=$(wc -l <"$work/out")
  if [ "$code" -eq 0 ] && [ "$lines" -eq 1 ] && grep -q "\"omp_wait_policy\":\"$want\"" "$work/out"; then
    passed
  else
    echo "not ok: ${*:-(no policy set)} -> exit $code, $lines lines, want omp_wait_policy $want:"
    cat "$work/out"
    failed "$work/err"
  fi
}
policy_is passive                       # none set: the program sets passive and runs again
policy_is active OMP_WAIT_POLICY=active  # the user's choice is kept
policy_is spincount=1000 GOMP_SPINCOUNT=1000
finish
