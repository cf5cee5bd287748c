#version 430
// x ← x · s in place on (rows, cols), rows ld apart: Gemma 4's layer_scalar on the stream.
// Dispatch: (ceil(cols / 64), rows).
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

uniform int rows;
uniform int cols;
uniform int ld;
uniform float s;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  x[r * ld + c] *= s;
}
