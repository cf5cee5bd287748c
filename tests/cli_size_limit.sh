#!/usr/bin/env bash
# Writes under a file-size limit (RLIMIT_FSIZE, `ulimit -f`, as on a quota-limited disk):
# every writer of attnviz-cli fails with exit 1 and an error naming the file, is not killed
# by SIGXFSZ (exit 153), and leaves nothing behind: no *.tmp-attnviz, no half-written
# file, no checkpoint directory it made. Usage: cli_size_limit.sh PATH/attnviz-cli WORKDIR
set -u
cli=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
limit_kb=16  # bash's ulimit -f counts 1024-byte blocks; every output below is larger
# limited NAME PATTERN GONE -- ARGS...: attnviz-cli ARGS under the limit exits 1 with
# PATTERN on stderr, and neither GONE nor any temporary file exists afterwards.
limited() {
  local name=$1 pattern=$2 gone=$3
  shift 4
  (ulimit -f "$limit_kb"; exec "$cli" "$@") >"$work/$name.out" 2>"$work/$name.err"
  local got=$?
  local left
  left=$(find "$work" -name '*.tmp-attnviz*')
  if [ "$got" -eq 1 ] && grep -q -- "$pattern" "$work/$name.err" && [ ! -e "$gone" ] && [ -z "$left" ]; then
    passed
  else
    echo "not ok: $name: attnviz-cli $* -> exit $got (want 1; 153 = killed by SIGXFSZ); left: ${left:-nothing}" \
      "$( [ -e "$gone" ] && echo "and $gone")"
    failed "$work/$name.err"
  fi
}

"$cli" random --preset tiny --out "$work/m" 2>/dev/null || { echo "cannot make a model"; exit 1; }
text=$(printf 'the cat sat on the mat and the dog saw the cat %.0s' $(seq 1 3))

# dump: the tensors of every layer, far beyond 16 KiB.
limited dump "cannot write '$work/o.safetensors': File too large" "$work/o.safetensors" -- \
  dump --model "$work/m" --tokens "$(seq -s, 1 60)" --out "$work/o.safetensors"
grep -q "ulimit -f" "$work/dump.err" && passed || { echo "not ok: dump's error has no hint"; failed "$work/dump.err"; }
# export: a CSV of every head's weights, and an SVG.
limited export_csv "cannot write '$work/o.csv'" "$work/o.csv" -- \
  export --model "$work/m" --tokens "$(seq -s, 1 60)" --out "$work/o.csv"
limited export_svg "cannot write '$work/o.svg'" "$work/o.svg" -- \
  export --model "$work/m" --tokens "$(seq -s, 1 60)" --layer all --head all --out "$work/o.svg"
# random: a model directory's weights, safetensors and GGUF.
limited random "cannot write '$work/r/model.safetensors'" "$work/r/model.safetensors" -- \
  random --preset tiny --out "$work/r"
limited random_gguf "cannot write '$work/g/model.gguf'" "$work/g/model.gguf" -- \
  random --preset tiny --gguf F32 --out "$work/g"
# train: the first checkpoint; the directory it made goes again.
limited train "cannot write '$work/t/model.safetensors'" "$work/t" -- \
  train --preset induction-head --steps 2 --eval-every 2 --eval-batches 1 --quiet --out "$work/t"
# tokenize --json to a file through standard output: the output is not complete.
head -c 40000 /dev/zero | tr '\0' 'a' >"$work/long.txt"
limited tokenize "cannot write the output to standard output" "$work/none" -- \
  tokenize --model "$work/m" --text-file "$work/long.txt" --json

# Without the limit the same commands work (the limit, not the command, made them fail).
check "dump without a limit" "$cli" dump --model "$work/m" --tokens "$(seq -s, 1 60)" --out "$work/o.safetensors"
check "no temporary file after a good write" test -z "$(find "$work" -name '*.tmp-attnviz*')"
finish
