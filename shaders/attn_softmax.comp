#version 430
// From raw scores q·kᵀ to the softmax weights, one work group per (row i, head):
//   a = scores · scale                   (scale = 1/√d unless the layer says otherwise)
//   a ← c·tanh(a / c)   when softcap c > 0 (Gemma 2's attention logit soft-capping)
//   probs = softmax(a) over the keys j in [first, i], 0 elsewhere, where first = 0 on a
//   global layer (window 0) and max(0, i − window + 1) on a local one (window_first in
//   core/engine/mask.h): exactly `window` keys, the query's own included.
// With has_sinks (GPT-OSS), head h's learned sink logit sinks[head0 + h] joins each new row's
// softmax as one more column that is then dropped: the row's probs sum to 1 − p_sink, and
// p_sink goes to sink_p[(head0 + h)·T + i] (core/engine/ops.h's softmax_window_row).
// The scaled, capped and masked stages are not stored (LayerTrace derives them from the
// scores).
// Rows i ≥ p are new and done in full; rows i < p were computed earlier and only their
// new columns j ≥ p are written (all of them above the diagonal: probs 0).
// Dispatch: (T, heads in this group).
#include "common.glsl"

#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Scores { float s[]; };     // (heads, T, T)
layout(std430, binding = 1) writeonly buffer Probs { float pr[]; };    // (heads, T, T)
layout(std430, binding = 2) readonly buffer Sinks { float sinks[]; };  // (H) when has_sinks
layout(std430, binding = 3) writeonly buffer SinkP { float sink_p[]; };  // (H, T) when has_sinks

uniform int T;
uniform int p;
uniform float scale;
uniform float softcap;  // 0: none
uniform int window;     // 0: global
uniform int has_sinks;
uniform int head0;      // the first head of this group (the sinks' index)

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

// The scaled (and soft-capped) score of one visible cell.
float logit(float score) {
  float a = score * scale;
  return softcap > 0.0 ? softcap * tanh_stable(a / softcap) : a;
}

void main() {
  int i = int(gl_WorkGroupID.x);
  int base = (int(gl_WorkGroupID.y) * T + i) * T;
  int l = int(gl_LocalInvocationID.x);
  if (i < p) {  // an old row: only the new columns, all masked (uniform per work group)
    for (int j = p + l; j < T; j += WG) pr[base + j] = 0.0;
    return;
  }
  int first = window > 0 ? max(0, i - window + 1) : 0;
  float m = neg_inf();
  for (int j = first + l; j <= i; j += WG) m = max(m, logit(s[base + j]));
  m = group_max(m);
  int h = head0 + int(gl_WorkGroupID.y);
  float z = has_sinks != 0 ? sinks[h] : 0.0;
  if (has_sinks != 0) m = max(m, z);
  float sum = 0.0;
  for (int j = first + l; j <= i; j += WG) sum += exp(logit(s[base + j]) - m);
  float e_sink = has_sinks != 0 ? exp(z - m) : 0.0;
  float inv = 1.0 / (group_sum(sum) + e_sink);
  if (has_sinks != 0 && l == 0) sink_p[h * T + i] = e_sink * inv;
  for (int j = l; j < T; j += WG) pr[base + j] = j >= first && j <= i ? exp(logit(s[base + j]) - m) * inv : 0.0;
}
