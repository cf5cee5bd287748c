#version 430
// Causal depthwise convolution (core/engine/delta_rule.h's causal_conv) for the n new rows:
//   out[r, ch] = act(Σ_k w[ch·K + k] · x[hist + r − (K−1) + k, col0 + ch] (+ bias[ch]))
// x holds `hist` rows before the new ones (the convolution's memory, read again), rows
// below 0 read as 0; act is SiLU (Qwen3.5's linear layers) or nothing (LFM2).
// Dispatch: (ceil(Ch / 64), n).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };     // (hist + n) rows, ldx apart
layout(std430, binding = 1) readonly buffer W { float w[]; };     // (Ch, K)
layout(std430, binding = 2) readonly buffer B { float bias[]; };  // (Ch) when has_bias
layout(std430, binding = 3) writeonly buffer O { float o[]; };    // (n, Ch)

uniform int n;
uniform int Ch;
uniform int K;
uniform int hist;
uniform int ldx;
uniform int col0;
uniform int has_bias;
uniform int act_silu;

void main() {
  int ch = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (ch >= Ch || r >= n) return;
  float s = 0.0;
  for (int k = 0; k < K; ++k) {
    int t = hist + r - (K - 1) + k;
    if (t >= 0) s += w[ch * K + k] * x[t * ldx + col0 + ch];
  }
  if (has_bias != 0) s += bias[ch];
  o[r * Ch + ch] = act_silu != 0 ? silu(s) : s;
}
