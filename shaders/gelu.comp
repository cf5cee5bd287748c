#version 430
// GELU (tanh form) in place on a (rows, cols) matrix with row stride ld.
// Dispatch: (ceil(cols / 64), rows).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

uniform int rows;
uniform int cols;
uniform int ld;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  int idx = r * ld + c;
  x[idx] = gelu_tanh(x[idx]);
}
