#!/usr/bin/env bash
# attnviz-cli as a real process: bad input must print "error: ..." on stderr and exit 1 or
# 2, never crash (a signal gives 128+n). Usage: cli_errors.sh PATH/attnviz-cli WORKDIR
set -u
cli=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
# expect CODE PATTERN -- ARGS...
expect() {
  local code=$1 pattern=$2
  shift 3
  "$cli" "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [ "$got" -eq "$code" ] && grep -q -- "$pattern" "$work/err"; then
    passed
  else
    echo "not ok: attnviz-cli $* -> exit $got (want $code), stderr:"
    failed "$work/err"
  fi
}
"$cli" random --preset tiny --layers 1 --context 8 --out "$work/m" 2>/dev/null || { echo "cannot make a model"; exit 1; }
printf 'garbage' >"$work/corrupt.safetensors"
mkdir -p "$work/corrupt" && cp "$work/m/config.json" "$work/corrupt/" && cp "$work/corrupt.safetensors" "$work/corrupt/model.safetensors"
head -c 2000 "$work/m/model.safetensors" >"$work/trunc.safetensors"
mkdir -p "$work/trunc" && cp "$work/m/config.json" "$work/trunc/" && cp "$work/trunc.safetensors" "$work/trunc/model.safetensors"

expect 1 "does not exist"          -- dump --model "$work/none" --tokens 1 --out "$work/o.safetensors"
expect 1 "not a valid safetensors" -- dump --model "$work/corrupt" --tokens 1 --out "$work/o.safetensors"
expect 1 "truncated"               -- dump --model "$work/trunc" --tokens 1 --out "$work/o.safetensors"
# GGUF files: a wrong magic, an unknown version, a cut-off header, a 1 KB file claiming 2^60 tensors.
printf 'GGML\003\000\000\000' >"$work/magic.gguf"
{ printf 'GGUF\007\000\000\000'; head -c 16 /dev/zero; } >"$work/v7.gguf"
printf 'GGUF\003\000' >"$work/cut.gguf"
{ printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\020'; head -c 1000 /dev/zero; } >"$work/claims.gguf"
expect 1 "wrong magic"             -- dump --model "$work/magic.gguf" --tokens 1 --out "$work/o.safetensors"
expect 1 "unsupported GGUF version 7" -- info --model "$work/v7.gguf"
expect 1 "truncated"               -- info --model "$work/cut.gguf"
expect 1 "larger than the file could hold" -- info --model "$work/claims.gguf"
expect 1 "outside the vocabulary"  -- dump --model "$work/m" --tokens 5,1000 --out "$work/o.safetensors"
expect 1 "not in the model's vocabulary" -- dump --model "$work/m" --text "é" --out "$work/o.safetensors"
expect 2 "takes 1"                 -- dump --model "$work/m" --tokens 1 --block-size 9 --out "$work/o.safetensors"
expect 2 "required"                -- dump --tokens 1 --out "$work/o.safetensors"
expect 2 "unknown subcommand"      -- frobnicate
expect 1 "cannot write"            -- dump --model "$work/m" --tokens 1 --out "$work/no/such/dir/o.safetensors"
# Text longer than the window is not an error: the oldest characters are dropped.
"$cli" dump --model "$work/m" --text "0123456789abc" --out "$work/ok.safetensors" 2>"$work/err"
if [ $? -eq 0 ] && grep -q "dropped 5" "$work/err"; then passed; else echo "not ok: long text"; failed "$work/err"; fi
[ -e "$work/o.safetensors" ] && { echo "not ok: a failed dump left a file"; failed; }
finish
