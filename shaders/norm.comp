#version 430
// LayerNorm (gpt2) or RMSNorm (llama) of each row, one work group per row:
//   layer: y = (x − mean) / sqrt(var + eps) · w + b      (two passes: mean, then variance)
//   rms:   y = x / sqrt(mean(x²) + eps) · w
// With accumulate != 0 the result is added to y instead (y += …): a post-attention or
// post-MLP norm (Gemma, OLMo 2) straight into the residual stream.
// Dispatch: (n, 1, 1).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };   // (n, C)
layout(std430, binding = 1) readonly buffer W { float w[]; };   // (C)
layout(std430, binding = 2) readonly buffer B { float b[]; };   // (C), read when rms == 0
layout(std430, binding = 3) buffer Y { float y[]; };            // (n, C)

uniform int C;
uniform int rms;
uniform float eps;
uniform int accumulate;

shared float part[WG];

// Sum of v over the work group (every invocation gets it).
float group_sum(float v) {
  uint i = gl_LocalInvocationID.x;
  group_sync();  // every reader of the previous result is done
  part[i] = v;
  group_sync();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (i < s) part[i] += part[i + s];
    group_sync();
  }
  float total = part[0];
  group_sync();
  return total;
}

void put(int at, float v) { y[at] = accumulate != 0 ? y[at] + v : v; }

void main() {
  int base = int(gl_WorkGroupID.x) * C;
  int i = int(gl_LocalInvocationID.x);
  float fC = float(C);
  float mean = 0.0;
  float inv;
  if (rms == 0) {
    float s = 0.0;
    for (int c = i; c < C; c += WG) s += x[base + c];
    mean = group_sum(s) / fC;
    float q = 0.0;
    for (int c = i; c < C; c += WG) {
      float t = x[base + c] - mean;
      q += t * t;
    }
    inv = 1.0 / sqrt(group_sum(q) / fC + eps);
    for (int c = i; c < C; c += WG) put(base + c, (x[base + c] - mean) * inv * w[c] + b[c]);
  } else {
    float q = 0.0;
    for (int c = i; c < C; c += WG) q += x[base + c] * x[base + c];
    inv = 1.0 / sqrt(group_sum(q) / fC + eps);
    for (int c = i; c < C; c += WG) put(base + c, x[base + c] * inv * w[c]);
  }
}
