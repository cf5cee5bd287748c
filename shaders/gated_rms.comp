#version 430
// A gated-delta-rule layer's gated norm, per row and value head (one work group each):
//   y[r, j·d + e] = o[r, j·d + e] / sqrt(mean_e(o²) + eps) · w[e] · silu(z[r, j·d + e])
// with the norm's weight as stored (no 1 + w). o, z and y are (n, heads·d).
// Dispatch: (n, heads).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer Z { float z[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };  // (d)
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

uniform int heads;
uniform int d;
uniform float eps;

shared float part[WG];

void main() {
  int base = (int(gl_WorkGroupID.x) * heads + int(gl_WorkGroupID.y)) * d;
  uint l = gl_LocalInvocationID.x;
  float q = 0.0;
  for (int c = int(l); c < d; c += WG) q += o[base + c] * o[base + c];
  part[l] = q;
  group_sync();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (l < s) part[l] += part[l + s];
    group_sync();
  }
  float inv = 1.0 / sqrt(part[0] / float(d) + eps);
  for (int c = int(l); c < d; c += WG) y[base + c] = o[base + c] * inv * w[c] * silu(z[base + c]);
}
