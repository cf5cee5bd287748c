#version 430
// QK-norm: RMSNorm in place of `heads` consecutive slices of d values starting at column
// col0 of rows row0 … row0+n-1 (stride ld), one work group per (row, slice):
//   x ← x / sqrt(mean(x²) + eps) · w,  w (d) shared by the slices
// Per head (qwen3, gemma3): heads = H (or KV), d = head size. Over the whole projection
// (olmo2): heads = 1, d = H·d (or KV·d). Runs on the q | k | v rows before RoPE.
// Dispatch: (n, heads).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) buffer X { float x[]; };           // rows of width ld
layout(std430, binding = 1) readonly buffer W { float w[]; };  // (d)

uniform int row0;
uniform int ld;
uniform int col0;
uniform int d;
uniform float eps;

shared float part[WG];

void main() {
  int base = (row0 + int(gl_WorkGroupID.x)) * ld + col0 + int(gl_WorkGroupID.y) * d;
  uint l = gl_LocalInvocationID.x;
  float q = 0.0;
  for (int c = int(l); c < d; c += WG) q += x[base + c] * x[base + c];
  part[l] = q;
  group_sync();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) part[l] += part[l + s];
    group_sync();
  }
  float inv = 1.0 / sqrt(part[0] / float(d) + eps);
  for (int c = int(l); c < d; c += WG) x[base + c] = x[base + c] * inv * w[c];
}
