#version 430
// Rotary position embedding, rotate-half convention, in place on `heads` consecutive
// heads of d columns starting at column col0 of rows row0 … row0+n-1 (stride ld).
// Only the first rot = 2·half_rot columns of each head turn (partial_rotary_factor; rot = d
// for most models): row r is at position pos0 + r and pair (i, i + half_rot), i < half_rot,
// turns by angle pos · inv_freq[i], whose cos and sin (already × longrope's mscale) come
// from a table the host computes in double precision, exactly as the CPU backend does
// (rope_inplace), so both round the same way.
// Dispatch: (ceil(heads · half_rot / 64), n).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float cs[]; };  // (positions, half_rot, 2): cos, sin

uniform int n;
uniform int row0;
uniform int ld;
uniform int col0;
uniform int heads;
uniform int d;         // head stride (columns per head)
uniform int half_rot;  // rot / 2 ≤ d / 2
uniform int pos0;

void main() {
  int e = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (e >= heads * half_rot || r >= n) return;
  int h = e / half_rot, i = e % half_rot;
  int base = (row0 + r) * ld + col0 + h * d;
  int t = ((pos0 + r) * half_rot + i) * 2;
  float co = cs[t], si = cs[t + 1];
  float x1 = x[base + i], x2 = x[base + i + half_rot];
  x[base + i] = x1 * co - x2 * si;
  x[base + i + half_rot] = x2 * co + x1 * si;
}
