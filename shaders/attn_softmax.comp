#version 430
// From raw scores q·kᵀ to the softmax weights, one work group per (row i, head):
//   probs = softmax(scores · scale) over j ≤ i, 0 above the diagonal (scale = 1/√d)
// The scaled and masked stages are not stored (LayerTrace derives them from the scores).
// Rows i ≥ p are new and done in full; rows i < p were computed earlier and only their
// new columns j ≥ p are written (all of them above the diagonal: probs 0).
// Dispatch: (T, heads in this group).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Scores { float s[]; };     // (heads, T, T)
layout(std430, binding = 1) writeonly buffer Probs { float pr[]; };    // (heads, T, T)

uniform int T;
uniform int p;
uniform float scale;

shared float part[WG];

float group_max(float v) {
  uint l = gl_LocalInvocationID.x;
  group_sync();  // every reader of the previous result is done
  part[l] = v;
  group_sync();
  for (uint s2 = WG / 2; s2 > 0; s2 >>= 1) {
    if (l < s2) part[l] = max(part[l], part[l + s2]);
    group_sync();
  }
  float r = part[0];
  group_sync();
  return r;
}

float group_sum(float v) {
  uint l = gl_LocalInvocationID.x;
  group_sync();  // every reader of the previous result is done
  part[l] = v;
  group_sync();
  for (uint s2 = WG / 2; s2 > 0; s2 >>= 1) {
    if (l < s2) part[l] += part[l + s2];
    group_sync();
  }
  float r = part[0];
  group_sync();
  return r;
}

void main() {
  int i = int(gl_WorkGroupID.x);
  int base = (int(gl_WorkGroupID.y) * T + i) * T;
  int l = int(gl_LocalInvocationID.x);
  if (i < p) {  // an old row: only the new columns, all masked (uniform per work group)
    for (int j = p + l; j < T; j += WG) pr[base + j] = 0.0;
    return;
  }
  float m = neg_inf();
  for (int j = l; j <= i; j += WG) m = max(m, s[base + j] * scale);
  m = group_max(m);
  float sum = 0.0;
  for (int j = l; j <= i; j += WG) sum += exp(s[base + j] * scale - m);
  float inv = 1.0 / group_sum(sum);
  for (int j = l; j < T; j += WG) pr[base + j] = j <= i ? exp(s[base + j] * scale - m) * inv : 0.0;
}
