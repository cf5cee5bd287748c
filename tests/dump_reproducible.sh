#!/usr/bin/env bash
# The same input gives bit-identical dumps in any process. Each model
# (builtin:fortunes-en, a random tiny llama, llama-small's shape as Q4_K GGUF) is
# dumped in separate processes whose heaps differ: a plain run; one whose blocks up to 32 MB
# come from the brk heap (MALLOC_MMAP_THRESHOLD_) after a 16-byte block taken first
# (ATTNVIZ_TEST_HEAP_SKEW), so every later block starts 16 bytes further along than it
# would; and the same with 48 bytes and a different top pad and arena count. The files must
# be equal byte for byte (cmp). A control shows the comparison can fail: the same model on
# other tokens gives a file that differs.
#   dump_reproducible.sh PATH/attnviz-cli WORKDIR
set -u
cli=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
export OMP_NUM_THREADS=2
heap1=(MALLOC_MMAP_THRESHOLD_=33554432 ATTNVIZ_TEST_HEAP_SKEW=16)
heap2=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TOP_PAD_=1048576 MALLOC_ARENA_MAX=1 ATTNVIZ_TEST_HEAP_SKEW=48)

# dump NAME [VAR=VALUE...] -- ARGS...: one process writing $work/NAME.safetensors
dump() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$cli" dump "$@" --out "$work/$name.safetensors"
}

check "random model" "$cli" random --preset tiny --layers 2 --out "$work/tiny"
# llama-small's shape stored as Q4_K: the products decode blocks into per-thread buffers.
check "random Q4_K model" "$cli" random --preset llama-small --gguf Q4_K --out "$work/q4k"
text="The cat sat on the mat. The cat ate the fish, and then the cat sat on the mat again."
ids=5,17,3,90,5,17,3,8,41,5,17,3,90,12,6,7,5,17,60,61,62,5,17,3,90,12
for m in builtin:fortunes-en "$work/tiny" "$work/q4k/model.gguf"; do
  case $m in
    builtin:*) tag=fortunes; args=(--model "$m" --text "$text") ;;
    *.gguf) tag=q4k; args=(--model "$m" --tokens "$ids") ;;
    *) tag=tiny; args=(--model "$m" --tokens "$ids") ;;
  esac
  check "$tag plain" dump "$tag-a" -- "${args[@]}"
  check "$tag heap skewed by 16" dump "$tag-b" "${heap1[@]}" -- "${args[@]}"
  check "$tag heap skewed by 48" dump "$tag-c" "${heap2[@]}" -- "${args[@]}"
  check "$tag identical (16)" cmp "$work/$tag-a.safetensors" "$work/$tag-b.safetensors"
  check "$tag identical (48)" cmp "$work/$tag-a.safetensors" "$work/$tag-c.safetensors"
done

# The control: other tokens, another file; cmp must see the difference.
check "control dump" dump tiny-other -- --model "$work/tiny" --tokens "${ids%,*},18"
check "control differs" bash -c "! cmp -s '$work/tiny-a.safetensors' '$work/tiny-other.safetensors'"
finish
