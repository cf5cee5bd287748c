#version 430
// Elementwise product of two column blocks: out[r, c] = a[r·lda + ca + c] · b[r·ldb + cb + c]
// for rows r < rows and columns c < cols, out (rows, cols). LFM2's short convolution: B ⊙ x
// before it and C ⊙ conv after it.
// Dispatch: (ceil(cols / 64), rows).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

uniform int rows;
uniform int cols;
uniform int lda;
uniform int ca;
uniform int ldb;
uniform int cb;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  o[r * cols + c] = a[r * lda + ca + c] * b[r * ldb + cb + c];
}
