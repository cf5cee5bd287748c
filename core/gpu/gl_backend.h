// The GPU backend: the forward pass in OpenGL 4.3 compute shaders (shaders/*.comp) on a
// headless context of its own (core/gpu/gl_context.h). Implements core/engine/backend.h exactly as
// the CPU backend does — rows [from, T) computed, K/V rows [0, from) reused from a
// device-side cache that is checked against the trace — and fills the same Trace layout
// by reading the results back.
//
// Env: ATTNVIZ_SHADER_DIR=DIR loads shaders from DIR (development); ATTNVIZ_GL_MIN_VERSION
// raises the OpenGL version required (tests force the fallback with 9.9);
// ATTNVIZ_GL_VERBOSE=1 prints one line per forward (rows, device and wall time) to stderr;
// ATTNVIZ_GL_PROFILE=1 times every kernel (serialising the GPU) and prints a table per
// forward; ATTNVIZ_GL_TUNING=software|hardware overrides the tile choices made for
// llvmpipe or a real GPU.
//
// Device time (last_device_ms) comes from GL_TIMESTAMP queries around the stretches of
// dispatches between read-backs: llvmpipe reports 0 for GL_TIME_ELAPSED around compute.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "core/engine/backend.h"
#include "core/gpu/gl_shaders.h"

namespace attnviz {

struct GlBackendOptions {
  ShaderSources shaders;  // overrides for tests (a broken shader, …)
};

// Creates the context and compiles every shader. Throws attnviz::Error saying why the
// backend cannot run (no EGL, OpenGL < 4.3, a shader that does not compile: its log and
// numbered source lines).
std::unique_ptr<Backend> make_gl_backend(const GlBackendOptions& options = {});

// Weights on the device. A matrix the file stores as F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K or Q6_K goes up as its own bytes (the fp16 scales of Q8_0, Q4_0, Q5_0
// and Q6_K blocks gathered into an array of their own, F16/BF16 rows padded to 16 values)
// and is decoded in the shaders (shaders/weights.glsl); float32 matrices, and stored types
// without a decoding shader (Q2_K, Q3_K), as float32.
// The bytes of the weight buffers `b` holds for the model of its last forward, by device
// type ("Q4_K", "F16", …, "F32": float32 matrices, norms and biases); empty when `b` is
// not the GPU backend or has run no forward yet. The total: gl_device_weight_total.
std::map<std::string, long long> gl_device_weight_bytes(const Backend& b);
long long gl_device_weight_total(const Backend& b);

// "GL_RENDERER (GL_VERSION)" of the GPU backend's context, e.g. "llvmpipe (LLVM 15.0.6,
// 256 bits) (4.5 (Core Profile) Mesa 22.3.6)"; empty when `b` is not the GPU backend.
std::string gl_device_renderer(const Backend& b);

}  // namespace attnviz
