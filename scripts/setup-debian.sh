#!/usr/bin/env bash
# Installs everything attnviz needs to build, run and test on Debian 12, from Debian's own
# packages. Run as root (or with sudo).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  # build
  build-essential cmake pkg-config
  # core
  libeigen3-dev nlohmann-json3-dev libcli11-dev
  # tokenizers: regexes (PCRE2), Unicode normalization (utf8proc), SentencePiece models
  libpcre2-dev libutf8proc-dev libsentencepiece-dev
  # GUI: Dear ImGui (GLFW + OpenGL3 backends), fonts with CJK glyphs, PNG writing
  libimgui-dev libglfw3-dev libgl1-mesa-dev libfontconfig-dev fonts-noto-cjk fonts-dejavu-core libstb-dev
  # GPU backend: OpenGL 4.3 compute through EGL (Mesa's llvmpipe works without a GPU)
  libepoxy-dev libegl-dev libgl-dev libegl-mesa0 libgl1-mesa-dri
  # tests: GoogleTest, Google Benchmark, PyTorch reference, jinja2 (the chat-template reference),
  # a virtual X server for screenshots
  googletest libgtest-dev libbenchmark-dev python3 python3-numpy python3-torch python3-jinja2 xvfb xauth xdotool
  # fuzzing: clang with libFuzzer and the sanitizer runtimes, LLVM's OpenMP for clang builds
  clang libclang-rt-14-dev libomp-dev
  # the Python module (import attnviz): pybind11 and Python's headers to build it, numpy to run
  # it, pytest for its tests
  pybind11-dev python3-dev python3-pytest
  # ccache, the compiler launcher when present (CMakeLists.txt): a rebuild of unchanged files,
  # in this checkout or another clone of it, comes from its cache
  ccache
  # an optimised BLAS for PyTorch (the reference timings); Debian picks it over netlib
  libopenblas0-openmp
  # the engine's matrix products (linear, linear_bt: ATTNVIZ_BLAS, Eigen without it); OpenMP
  # build, as the engine's threads. bench/attnviz_bench_blas also wants libblis-openmp-dev.
  libopenblas-openmp-dev
)
apt-get update
apt-get install -y --no-install-recommends "${packages[@]}"
