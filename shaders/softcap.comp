#version 430
// Final logit soft-capping (Gemma 2) in place on a (rows, cols) matrix with row stride ld:
//   x ← c·tanh(x / c)
// Dispatch: (ceil(cols / 64), rows).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

uniform int rows;
uniform int cols;
uniform int ld;
uniform float cap;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  int idx = r * ld + c;
  x[idx] = cap * tanh_stable(x[idx] / cap);
}
