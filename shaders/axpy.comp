#version 430
// y ← y + x on (rows, cols), both rows ld apart: a branch computed elsewhere (GPT-OSS's
// experts, on the host) added to the residual stream.
// Dispatch: (ceil(cols / 64), rows).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

uniform int rows;
uniform int cols;
uniform int ld;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  y[r * ld + c] += x[r * ld + c];
}
