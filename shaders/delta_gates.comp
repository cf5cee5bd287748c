#version 430
// A gated-delta-rule layer's write strength and decay, in place on bg (n, 2·Hv), whose rows
// hold b | a (the in_proj_b and in_proj_a products) and become β | g:
//   β = σ(b),  g = neg_a[j] · softplus(a + dt_bias[j])   (neg_a = −exp(A_log) < 0, so g ≤ 0)
// softplus as Hugging Face's: x above 20 as is, else log(1 + eˣ).
// Dispatch: (ceil(Hv / 64), n).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer BG { float bg[]; };               // (n, 2·Hv)
layout(std430, binding = 1) readonly buffer NegA { float neg_a[]; };  // (Hv)
layout(std430, binding = 2) readonly buffer Dt { float dt_bias[]; };  // (Hv)

uniform int n;
uniform int Hv;

float softplus(float x) {
  if (x > 20.0) return x;
  float y = exp(x);
  return y < 1e-4 ? y - 0.5 * y * y : log(1.0 + y);  // log1p where 1 + y would round
}

void main() {
  int j = int(gl_GlobalInvocationID.x);
  int r = int(gl_GlobalInvocationID.y);
  if (j >= Hv || r >= n) return;
  int i = r * 2 * Hv + j;
  float b = bg[i], a = bg[i + Hv];
  bg[i] = 1.0 / (1.0 + exp(-b));
  bg[i + Hv] = neg_a[j] * softplus(a + dt_bias[j]);
}
