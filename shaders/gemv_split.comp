#version 430
// One row of A times a compact weight (typing appends one token: M = 1), on hardware:
//   C[0, col] = alpha · (A[0, :] · W[col, :]) (+ bias[col]) (+ C[0, col] when accumulate != 0)
// with W the compact matrix's N rows of K values (shaders/weights.glsl), as gemv.comp
// computes it with MR 1. gemv.comp gives each invocation a whole row of W, so neighbouring
// invocations read memory a row apart; here a team of TEAM invocations shares one row,
// lane j taking its groups of 16 values j, j + TEAM, …, so a team reads consecutive
// bytes, and the team's partial sums are added in shared memory. (llvmpipe keeps
// gemv.comp: its invocations run one after another anyway.)
// Dispatch: (ceil(N / ROWS), 1, 1).
#include "common.glsl"
#include "weights.glsl"

#define TEAM 8   // invocations per row of W
#define ROWS 8   // rows of W (columns of C) per 64-wide work group

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer BufA { float a[]; };
layout(std430, binding = 2) buffer BufC { float c[]; };
layout(std430, binding = 3) readonly buffer BufBias { float bias[]; };

uniform int N;
uniform int K;
uniform int a_off;
uniform int c_off;
uniform int bias_off;
uniform int has_bias;
uniform int accumulate;
uniform float alpha;

shared float part[64];

// A's value k, 0 past K (W's rows are whole blocks, or padded to 16 values).
float a_at(int k) { return k < K ? a[a_off + k] : 0.0; }

void main() {
  int lid = int(gl_LocalInvocationID.x);
  int lane = lid % TEAM;
  int col = int(gl_WorkGroupID.x) * ROWS + lid / TEAM;
  float acc = 0.0;
  if (col < N) {
    int g16 = (K + 15) / 16;  // groups of 16 values in a row
    for (int g = lane; g < g16; g += TEAM) {
      int k = g * 16;
      vec2 sm = w_scale16(uint(col), uint(k));
      for (int q = 0; q < 16; q += 4) {
        vec4 wv = w_values4(sm, uint(col), uint(k + q));
        acc += a_at(k + q) * wv.x + a_at(k + q + 1) * wv.y + a_at(k + q + 2) * wv.z + a_at(k + q + 3) * wv.w;
      }
    }
  }
  part[lid] = acc;
  group_sync();
  for (int s = TEAM / 2; s > 0; s /= 2) {  // the team's sum into its lane 0
    if (lane < s) part[lid] += part[lid + s];
    group_sync();
  }
  if (lane != 0 || col >= N) return;
  float v = part[lid] * alpha;
  if (has_bias != 0) v += bias[bias_off + col];
  int idx = c_off + col;
  if (accumulate != 0) v = c[idx] + v;
  c[idx] = v;
}
