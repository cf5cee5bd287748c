#version 430
// Tiled matrix product, batched, with strided views — every matrix product of the forward:
//   C[z] = A[z] · op(B[z']) (+ bias[z]) (+ C[z] when accumulate != 0)
//   A[z] (M, K) at a_off + z·a_z, row stride lda
//   B[z'] (K, N) at b_off + z'·b_z, row stride ldb, z' = (z + b_z0) / b_zdiv; with
//         b_trans != 0 it is stored transposed, (N, K), so op(B) = Bᵀ (keys for q·kᵀ, the
//         tied embedding for the logits). b_zdiv is the GQA group: query head h reads
//         KV head h / (H / KV) in place, no copies.
//   C[z] (M, N) at c_off + z·c_z, row stride ldc
// A work group of 16×16 invocations computes a TS×TS tile of C, TS = 16·RM: each
// invocation keeps RM×RM results in registers, and the A and B tiles pass through shared
// memory BK columns at a time. RM is set by the loader: 1, 4 or 8 (core/gpu/gl_ops.cpp picks
// per product).
// With WTYPE defined (a compact weight, shaders/weights.glsl) B is that matrix's N rows of K
// values, read as op(B) = Bᵀ (b_trans, ldb, b_z… unused; one batch), decoded while the tile
// is loaded (the 16 columns of a tile are one scale group), and the product is scaled by
// alpha (Granite's residual multiplier) before the bias.
// Dispatch: (ceil(N / TS), ceil(M / TS), batch).
#include "common.glsl"
#ifdef WTYPE
#include "weights.glsl"
uniform float alpha;
#endif

#ifndef RM
#define RM 4
#endif
#define TS (16 * RM)
#define BK 16

layout(local_size_x = 16, local_size_y = 16) in;

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

shared float As[BK][TS];  // As[k][row]
shared float Bs[BK][TS];  // Bs[k][col]

void main() {
  int z = int(gl_WorkGroupID.z);
  int row0 = int(gl_WorkGroupID.y) * TS;
  int col0 = int(gl_WorkGroupID.x) * TS;
  int tx = int(gl_LocalInvocationID.x);
  int ty = int(gl_LocalInvocationID.y);
  int lid = ty * 16 + tx;
  int abase = a_off + z * a_z;
  int bbase = b_off + ((z + b_z0) / b_zdiv) * b_z;

  float acc[RM][RM];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RM; ++j) acc[i][j] = 0.0;

  for (int k0 = 0; k0 < K; k0 += BK) {
    // TS·BK elements of each tile, 256 invocations: RM·… loads each.
    for (int e = lid; e < TS * BK; e += 256) {
      int r = e / BK, k = e % BK;
      int gr = row0 + r, gk = k0 + k;
      As[k][r] = (gr < M && gk < K) ? a[abase + gr * lda + gk] : 0.0;
    }
#ifdef WTYPE
    for (int e = lid; e < TS * (BK / 4); e += 256) {  // four values of one row of W each
      int col = e / (BK / 4), kq = (e % (BK / 4)) * 4;
      int gc = col0 + col, gk = k0 + kq;
      vec4 v = vec4(0.0);
      if (gc < N && gk < K) v = w_values4(w_scale16(uint(gc), uint(k0)), uint(gc), uint(gk));
      Bs[kq][col] = v.x;
      Bs[kq + 1][col] = v.y;
      Bs[kq + 2][col] = v.z;
      Bs[kq + 3][col] = v.w;
    }
#else
    if (b_trans != 0) {
      for (int e = lid; e < TS * BK; e += 256) {
        int col = e / BK, k = e % BK;
        int gc = col0 + col, gk = k0 + k;
        Bs[k][col] = (gc < N && gk < K) ? b[bbase + gc * ldb + gk] : 0.0;
      }
    } else {
      for (int e = lid; e < TS * BK; e += 256) {
        int k = e / TS, col = e % TS;
        int gc = col0 + col, gk = k0 + k;
        Bs[k][col] = (gc < N && gk < K) ? b[bbase + gk * ldb + gc] : 0.0;
      }
    }
#endif
    group_sync();
    for (int k = 0; k < BK; ++k) {
      float av[RM];
      float bv[RM];
      for (int i = 0; i < RM; ++i) av[i] = As[k][ty + 16 * i];
      for (int j = 0; j < RM; ++j) bv[j] = Bs[k][tx + 16 * j];
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RM; ++j) acc[i][j] += av[i] * bv[j];
    }
    group_sync();
  }

  int cbase = c_off + z * c_z;
  int biasbase = bias_off + z * bias_z;
  for (int i = 0; i < RM; ++i) {
    int r = row0 + ty + 16 * i;
    if (r >= M) continue;
    for (int j = 0; j < RM; ++j) {
      int col = col0 + tx + 16 * j;
      if (col >= N) continue;
      float v = acc[i][j];
#ifdef WTYPE
      v *= alpha;
#endif
      if (has_bias != 0) v += bias[biasbase + col];
      int idx = cbase + r * ldc + col;
      if (accumulate != 0) v = c[idx] + v;
      c[idx] = v;
    }
  }
}
