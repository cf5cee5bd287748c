#version 430
// A block of columns from one buffer into another:
//   dst[dst_off + r·ldd + c] = src[src_off + r·lds + c]   for r < rows, c < cols
// Gemma 4: a KV-sharing layer's keys and values from its source layer's cache rows, the raw
// keys into the value columns of a V = K layer (the same buffer, columns apart), and a
// layer's per-layer embedding beside its gate.
// Dispatch: (ceil(cols / 64), rows).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };

uniform int rows;
uniform int cols;
uniform int src_off;
uniform int lds;
uniform int dst_off;
uniform int ldd;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= rows) return;
  dst[dst_off + r * ldd + c] = src[src_off + r * lds + c];
}
