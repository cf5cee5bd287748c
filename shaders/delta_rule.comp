#version 430
// The gated delta rule (core/engine/delta_rule.h) over the n new rows, sequential in the
// rows and parallel over value heads and value dims: invocation (e, j) holds column e of
// value head j's memory S (DK, dv) in registers and for each row t:
//   S ← e^{g_t}·S;  δ = β_t·(v_t[e] − Σ_i S[i,e]·k_t[i]);  S[:,e] += k_t·δ;  o_t[e] = Σ_i S[i,e]·q_t[i]
// q, k and v come from the convolution's output rows (ldc apart): q of key head kh at
// column kh·DK, k at Hk·DK + kh·DK, v of value head j at 2·Hk·DK + j·dv; value head j reads
// key head j / group (grouped) or j % Hk (tiled). S starts from `state` (Hv, DK, dv) and is
// written back there after the last row. After each row whose position + 1 is a multiple
// of snap_every, S is also written to snaps slot (position + 1) / snap_every − snap0 − 1.
// DK (the key dim) is a compile-time constant, so that S can live in registers.
// Dispatch: (ceil(dv / 64), Hv).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Conv { float cv[]; };       // (n, ldc)
layout(std430, binding = 1) readonly buffer BG { float bg[]; };         // (n, 2·Hv) β | g
layout(std430, binding = 2) buffer State { float st[]; };               // (Hv, DK, dv)
layout(std430, binding = 3) writeonly buffer O { float o[]; };          // (n, Hv·dv)
layout(std430, binding = 4) writeonly buffer Snaps { float snaps[]; };  // (slots, Hv, DK, dv)

uniform int n;
uniform int ldc;
uniform int Hv;
uniform int Hk;
uniform int dv;
uniform int group;
uniform int tiled;
uniform int pos0;
uniform int snap_every;
uniform int snap0;

void main() {
  int e = int(gl_GlobalInvocationID.x);
  int j = int(gl_WorkGroupID.y);
  if (e >= dv) return;
  int kh = tiled != 0 ? j % Hk : j / group;
  int base = j * DK * dv + e;
  float s[DK];
  for (int i = 0; i < DK; ++i) s[i] = st[base + i * dv];
  for (int r = 0; r < n; ++r) {
    int qo = r * ldc + kh * DK, ko = qo + Hk * DK;
    float decay = exp(bg[r * 2 * Hv + Hv + j]), beta = bg[r * 2 * Hv + j];
    float kv = 0.0;
    for (int i = 0; i < DK; ++i) {
      s[i] *= decay;
      kv += s[i] * cv[ko + i];
    }
    float delta = beta * (cv[r * ldc + 2 * Hk * DK + j * dv + e] - kv);
    float out_e = 0.0;
    for (int i = 0; i < DK; ++i) {
      s[i] += cv[ko + i] * delta;
      out_e += s[i] * cv[qo + i];
    }
    o[r * Hv * dv + j * dv + e] = out_e;
    int done = pos0 + r + 1;
    if (done % snap_every == 0) {
      int slot = done / snap_every - snap0 - 1;
      for (int i = 0; i < DK; ++i) snaps[(slot * Hv + j) * DK * dv + i * dv + e] = s[i];
    }
  }
  for (int i = 0; i < DK; ++i) st[base + i * dv] = s[i];
}
