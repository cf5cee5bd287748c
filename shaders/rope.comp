#version 430
// Rotary position embedding, rotate-half convention, in place on `heads` consecutive
// heads of d columns starting at column col0 of rows row0 … row0+n-1 (stride ld).
// Row r is at position pos0 + r; pair (i, i + d/2) turns by angle pos · theta^(−2i/d),
// whose cos and sin come from a table the host computes in double precision, exactly as
// the CPU backend does, so both round the same way.
// Dispatch: (ceil(heads · d/2 / 64), n).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float cs[]; };  // (positions, d/2, 2): cos, sin

uniform int n;
uniform int row0;
uniform int ld;
uniform int col0;
uniform int heads;
uniform int d;
uniform int pos0;

void main() {
  int half_d = d / 2;
  int e = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (e >= heads * half_d || r >= n) return;
  int h = e / half_d, i = e % half_d;
  int base = (row0 + r) * ld + col0 + h * d;
  int t = ((pos0 + r) * half_d + i) * 2;
  float co = cs[t], si = cs[t + 1];
  float x1 = x[base + i], x2 = x[base + i + half_d];
  x[base + i] = x1 * co - x2 * si;
  x[base + i + half_d] = x2 * co + x1 * si;
}
