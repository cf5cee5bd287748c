#version 430
// Qwen3.5's gated attention output, per element of the n new rows' (n, cols) head outputs:
//   gate ← σ(gate) (kept, for the trace's `gate` stage);  y = att · gate
// (att kept: the trace's `out` is the output before the gate).
// Dispatch: (ceil(cols / 64), n).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Gate { float gate[]; };  // (n, cols)
layout(std430, binding = 1) readonly buffer Att { float att[]; };  // (n, cols)
layout(std430, binding = 2) writeonly buffer Y { float y[]; };     // (n, cols)

uniform int n;
uniform int cols;

void main() {
  int c = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (c >= cols || r >= n) return;
  float g = 1.0 / (1.0 + exp(-gate[r * cols + c]));
  gate[r * cols + c] = g;
  y[r * cols + c] = att[r * cols + c] * g;
}
