#version 430
// L2 normalisation in place of `heads` consecutive slices of d values from column col0 of
// rows 0 … n−1 (ld apart), one work group per (row, slice), as Hugging Face's l2norm:
//   x ← x · scale / sqrt(Σx² + 1e-6)
// Qwen3.5's linear layers: q (scale dk^−½) and k (scale 1) after the convolution.
// Dispatch: (n, heads).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) buffer X { float x[]; };

uniform int ld;
uniform int col0;
uniform int d;
uniform float scale;

shared float part[WG];

void main() {
  int base = int(gl_WorkGroupID.x) * ld + col0 + int(gl_WorkGroupID.y) * d;
  uint l = gl_LocalInvocationID.x;
  float q = 0.0;
  for (int c = int(l); c < d; c += WG) q += x[base + c] * x[base + c];
  part[l] = q;
  group_sync();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) part[l] += part[l + s];
    group_sync();
  }
  float f = scale / sqrt(part[0] + 1e-6);
  for (int c = int(l); c < d; c += WG) x[base + c] = x[base + c] * f;
}
