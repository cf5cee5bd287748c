#!/bin/bash
# Packs what scripts/device-check.sh needs on a machine that has a GPU driver and nothing
# else (no network, no Debian packages): the three programs built here and the shared
# libraries they load, into .devpack/pack.tar.xz (git-ignored). The C library itself stays
# behind: the target's own (glibc at least as new as this one) is used.
#
#   scripts/device-pack.sh [BUILD_DIR]        (default: build)
#
# Then, with the device tool: carry .devpack, and run
#   scripts/device-check.sh --pack .devpack/pack.tar.xz
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bins=("$build/app/attnviz-cli" "$build/app/attnviz" "$build/tests/attnviz_gpu_tests")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "device-pack: $b is missing; build first: ninja -C $build attnviz-cli attnviz attnviz_gpu_tests" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "${bins[@]}" "$stage/bin/"
# The libraries ldd lists, but not glibc's own (libc, libm, libdl, libpthread, librt, the
# loader): mixing a newer target's loader with an older libc fails. The GL loaders
# (glvnd's libEGL, libGL, libGLX) are dlopened, so ldd does not list them; the vendor
# driver (NVIDIA's libEGL_nvidia) is the target's.
libs=$(ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
       grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so' || true)
for l in $libs /lib/x86_64-linux-gnu/libEGL.so.1 /lib/x86_64-linux-gnu/libGL.so.1 /lib/x86_64-linux-gnu/libGLX.so.0; do
  cp -L "$l" "$stage/lib/"
done
mkdir -p .devpack
tar -C "$stage" -cJf .devpack/pack.tar.xz bin lib
echo "device-pack: .devpack/pack.tar.xz ($(du -h .devpack/pack.tar.xz | cut -f1)): $(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | wc -l) libraries"
