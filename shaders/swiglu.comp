#version 430
// Gated MLP activation: SwiGLU y = silu(gate) ⊙ up, or with geglu != 0 GeGLU
// y = gelu_tanh(gate) ⊙ up (Gemma), where each row of gu holds gate | up (2·I values, from
// one matrix product with the gate and up projections side by side).
// Dispatch: (ceil(I / 64), rows).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer GateUp { float gu[]; };  // (rows, 2·I)
layout(std430, binding = 1) writeonly buffer Y { float y[]; };        // (rows, I)

uniform int rows;
uniform int I;
uniform int geglu;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= I || r >= rows) return;
  float g = gu[r * 2 * I + c];
  float u = gu[r * 2 * I + I + c];
  y[r * I + c] = (geglu != 0 ? gelu_tanh(g) : silu(g)) * u;
}
