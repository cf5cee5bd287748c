#version 430
// Token embeddings (+ learned positions for gpt2) of the n new rows:
//   x[r, c] = tok[ids[r], c] · scale (+ pos[pos0 + r, c])
// (scale: Gemma's √C, Granite's embedding_multiplier; 1 for the others)
// The token table may be split into chunks of rows (a storage buffer has a size limit):
// this dispatch holds rows [v0, v0 + vn) and writes only the rows whose id falls in it.
// With WTYPE defined the table is a compact weight (shaders/weights.glsl): rows of C values
// decoded where they are read.
// Dispatch: (ceil(C / 64), n).
#include "common.glsl"
#ifdef WTYPE
#include "weights.glsl"
#endif

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Ids { int ids[]; };    // (n)
#ifndef WTYPE
layout(std430, binding = 1) readonly buffer Tok { float tok[]; };  // (vn, C) rows v0 … v0+vn-1 of (V, C)
#endif
layout(std430, binding = 2) readonly buffer Pos { float pos[]; };  // (n_ctx, C), read when use_pos != 0
layout(std430, binding = 3) writeonly buffer X { float x[]; };     // (n, C)

uniform int n;
uniform int C;
uniform int v0;
uniform int vn;
uniform int pos0;
uniform int use_pos;
uniform float scale;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= C || r >= n) return;
  int row = ids[r] - v0;
  if (row < 0 || row >= vn) return;
#ifdef WTYPE
  float v = w_value(uint(row), uint(c)) * scale;
#else
  float v = tok[row * C + c] * scale;
#endif
  if (use_pos != 0) v += pos[(pos0 + r) * C + c];
  x[r * C + c] = v;
}
