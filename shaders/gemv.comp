#version 430
// Matrix product for few rows (typing appends one token: M = 1), same arguments and
// result as gemm.comp:  C[z] = A[z] · op(B[z']) (+ bias[z]) (+ C[z] when accumulate != 0).
// A 64-wide work group owns 64 columns of C and MR rows (gl_WorkGroupID.y picks which);
// those rows of A pass through shared memory KC values at a time and every invocation
// runs down its own column of B. Square tiles would leave most of their rows idle here.
// With WTYPE defined (a compact weight, shaders/weights.glsl) B is that matrix's N rows of K
// values read as Bᵀ (one batch): each invocation decodes its own row 16 values (one scale
// group) at a time, and the product is scaled by alpha before the bias.
// Dispatch: (ceil(N / 64), ceil(M / MR), batch).
#include "common.glsl"
#ifdef WTYPE
#include "weights.glsl"
uniform float alpha;
#endif

#ifndef MR
#define MR 4  // the loader sets 1 for a single row
#endif
#define KC 256

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer BufA { float a[]; };
#ifndef WTYPE
layout(std430, binding = 1) readonly buffer BufB { float b[]; };
#endif
layout(std430, binding = 2) buffer BufC { float c[]; };
layout(std430, binding = 3) readonly buffer BufBias { float bias[]; };

uniform int M;
uniform int N;
uniform int K;
uniform int a_off;
uniform int lda;
uniform int a_z;
uniform int b_off;
uniform int ldb;
uniform int b_z;
uniform int b_zdiv;
uniform int b_z0;
uniform int b_trans;
uniform int c_off;
uniform int ldc;
uniform int c_z;
uniform int bias_off;
uniform int bias_z;
uniform int has_bias;
uniform int accumulate;

shared float xs[MR][KC];

void main() {
  int z = int(gl_WorkGroupID.z);
  int row0 = int(gl_WorkGroupID.y) * MR;
  int col = int(gl_GlobalInvocationID.x);
  int lid = int(gl_LocalInvocationID.x);
  int abase = a_off + z * a_z;
  int bbase = b_off + ((z + b_z0) / b_zdiv) * b_z;
  float acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = 0.0;

  for (int k0 = 0; k0 < K; k0 += KC) {
    group_sync();  // the previous chunk is used up
    for (int e = lid; e < MR * KC; e += 64) {
      int r = e / KC, k = e % KC;
      xs[r][k] = (row0 + r < M && k0 + k < K) ? a[abase + (row0 + r) * lda + k0 + k] : 0.0;
    }
    group_sync();
#ifdef WTYPE
    if (col < N) {  // values past K: W's rows are whole blocks (or padded), xs holds zeros there
      int kn = min(KC, K - k0);
      for (int k = 0; k < kn; k += 16) {
        vec2 sm = w_scale16(uint(col), uint(k0 + k));
        for (int q = 0; q < 16; q += 4) {
          vec4 wv = w_values4(sm, uint(col), uint(k0 + k + q));
          for (int r = 0; r < MR; ++r)
            acc[r] += xs[r][k + q] * wv.x + xs[r][k + q + 1] * wv.y + xs[r][k + q + 2] * wv.z + xs[r][k + q + 3] * wv.w;
        }
      }
    }
#else
    if (col < N) {
      int kn = min(KC, K - k0);
      int bi = b_trans != 0 ? bbase + col * ldb + k0 : bbase + k0 * ldb + col;
      int bstep = b_trans != 0 ? 1 : ldb;
      for (int k = 0; k < kn; ++k) {
        float bv = b[bi];
        bi += bstep;
        for (int r = 0; r < MR; ++r) acc[r] += xs[r][k] * bv;
      }
    }
#endif
  }

  if (col >= N) return;
  int cbase = c_off + z * c_z;
  for (int r = 0; r < MR; ++r) {
    if (row0 + r >= M) break;
    float v = acc[r];
#ifdef WTYPE
    v *= alpha;
#endif
    if (has_bias != 0) v += bias[bias_off + z * bias_z + col];
    int idx = cbase + (row0 + r) * ldc + col;
    if (accumulate != 0) v = c[idx] + v;
    c[idx] = v;
  }
}
