// common.glsl — spliced into every attnviz compute shader where it says
// #include "common.glsl" (the loader does this; GLSL itself has no includes).
//
// Conventions shared by all kernels:
//  * every buffer is a flat std430 array of float (or int); matrices are row-major;
//  * a kernel gets element offsets (*_off) and leading dimensions (ld*, the distance
//    between consecutive rows, in elements) as uniforms, so one buffer can hold a matrix
//    anywhere and a view can pick columns out of a wider row (one head of a q|k|v row);
//  * dimension letters as in core/model/config.h: C model width, d head size, T tokens,
//    n new rows computed in this call, H query heads, KV key/value heads, I MLP width.

// Work-group barrier that also makes shared-memory writes visible to the whole group
// (barrier() alone orders execution; GLSL 4.30 wants memoryBarrierShared() too).
void group_sync() {
  memoryBarrierShared();
  barrier();
}

// −inf, for masked attention scores.
float neg_inf() { return uintBitsToFloat(0xff800000u); }

// tanh that never overflows: (1 − e^−2|x|) / (1 + e^−2|x|), with the sign of x.
float tanh_stable(float x) {
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}

// GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
float gelu_tanh(float x) {
  const float k = 0.7978845608028654;  // √(2/π)
  return 0.5 * x * (1.0 + tanh_stable(k * (x + 0.044715 * x * x * x)));
}

// SiLU: x / (1 + e^−x).
float silu(float x) { return x / (1.0 + exp(-x)); }
