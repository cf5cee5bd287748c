// weights.glsl — a weight matrix kept on the device in a compact type and decoded where it
// is read (spliced into gemm.comp, gemv.comp and embed.comp when the loader defines WTYPE).
//
// The matrix is N rows of K values, as the model file stores them: for a linear layer the
// rows are Wᵀ (one per output), for a table (tok_emb, lm_head) one per token. It lies in the
// uint array `w` (binding 1) as core/gpu/gl_ops.cpp (pack_rows) lays it out:
//
//   WTYPE       row r (w_row uints from r·w_row)                 fp16 scales region (from w_sc)
//   1 F16       K values as fp16, two per uint, rows padded to 16 —
//   2 BF16      K values as bf16, likewise                       —
//   3 Q8_0      per block of 32: q[32] int8 (8 uints)            block b of row r: d at r·w_nb + b
//   4 Q4_0      per block of 32: qs[16] (4 uints)                likewise
//   5 Q4_K      the 144-byte blocks as the file has them         — (d, dmin inside the block)
//   6 Q6_K      per block of 256: ql[128] qh[64] scales[16] (52) d at r·w_nb + b
//   7 Q4_1      the 20-byte blocks: d, m, qs[16] (5 uints)       —
//   8 Q5_0      per block of 32: qh:u32, qs[16] (5 uints)        d at r·w_nb + b
//   9 Q5_1      the 24-byte blocks: d, m, qh, qs[16] (6 uints)   —
//  10 Q5_K      the 176-byte blocks as the file has them         —
//
// (w_nb: blocks per row.) Q8_0, Q4_0 and Q6_K blocks are not multiples of 4 bytes, so the
// fp16 scale d of each block moves to an array of its own after the rows; the bytes are the
// file's otherwise and the total is the same. Every value decodes to the float that
// dequantize() (core/model/gguf_quant.cpp) gives: value = s·q − m with (s, m) the scale
// and the min of its group of 16 (w_scale16) and q the integer quant (w_quant4), computed
// `precise` so no compiler fuses the multiply and the subtract (Q4_1, Q5_1: d·q + m is
// d·q − (−m), the same rounding).
// Q2_K and Q3_K have no decoder here: the backend holds them as float32.

#define WT_F16 1
#define WT_BF16 2
#define WT_Q8_0 3
#define WT_Q4_0 4
#define WT_Q4_K 5
#define WT_Q6_K 6
#define WT_Q4_1 7
#define WT_Q5_0 8
#define WT_Q5_1 9
#define WT_Q5_K 10

layout(std430, binding = 1) readonly buffer BufW { uint w[]; };

uniform int w_row;  // uints per row
uniform int w_nb;   // blocks per row
uniform int w_sc;   // uint index of the fp16 scales region

// Byte i (0..3) of a uint, and the i-th fp16 of the scales region.
uint byte_of(uint u, uint i) { return (u >> (8u * i)) & 0xFFu; }
float scale_half(uint i) { return unpackHalf2x16(w[uint(w_sc) + (i >> 1u)] >> ((i & 1u) * 16u)).x; }

#if WTYPE == WT_F16 || WTYPE == WT_BF16
#define W_PLAIN 1  // values as they are: no scale, no min
vec2 w_scale16(uint row, uint k) { return vec2(1.0, 0.0); }
vec4 w_quant4(uint row, uint k) {
  uint i = row * uint(w_row) + (k >> 1u);
  uint a = w[i], b = w[i + 1u];
#if WTYPE == WT_F16
  return vec4(unpackHalf2x16(a), unpackHalf2x16(b));
#else
  return vec4(uintBitsToFloat(a << 16u), uintBitsToFloat(a & 0xFFFF0000u), uintBitsToFloat(b << 16u),
              uintBitsToFloat(b & 0xFFFF0000u));
#endif
}

#elif WTYPE == WT_Q8_0
vec2 w_scale16(uint row, uint k) { return vec2(scale_half(row * uint(w_nb) + (k >> 5u)), 0.0); }
vec4 w_quant4(uint row, uint k) {
  int u = int(w[row * uint(w_row) + (k >> 2u)]);
  return vec4(bitfieldExtract(u, 0, 8), bitfieldExtract(u, 8, 8), bitfieldExtract(u, 16, 8), bitfieldExtract(u, 24, 8));
}

#elif WTYPE == WT_Q4_0
vec2 w_scale16(uint row, uint k) { return vec2(scale_half(row * uint(w_nb) + (k >> 5u)), 0.0); }
// Element j of a block: j < 16 the low nibble of qs[j], j ≥ 16 the high nibble of qs[j − 16].
vec4 w_quant4(uint row, uint k) {
  uint j = k & 31u;
  uint u = w[row * uint(w_row) + (k >> 5u) * 4u + ((j & 15u) >> 2u)] >> ((j >> 4u) * 4u);
  return vec4(ivec4(u & 15u, (u >> 8u) & 15u, (u >> 16u) & 15u, (u >> 24u) & 15u) - 8);
}

#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
// Q4_K block (36 uints): d, dmin @0; scales[12] @4; qs[128] @16. Q5_K block (44 uints): the
// same with qh[32] @16 and qs[128] @48. Sub-block s (32 values) has scale d·sc_s and min
// dmin·m_s, the six-bit pairs of scale_min_k4 in gguf_quant.cpp.
#if WTYPE == WT_Q4_K
#define KB 36u
#define QS 4u
#else
#define KB 44u
#define QS 12u
#endif
vec2 w_scale16(uint row, uint k) {
  uint bb = row * uint(w_row) + (k >> 8u) * KB;
  uint s = (k & 255u) >> 5u;
  vec2 dm = unpackHalf2x16(w[bb]);
  uint q0 = w[bb + 1u], q1 = w[bb + 2u], q2 = w[bb + 3u];  // scales bytes 0-3, 4-7, 8-11
  uint sc, m;
  if (s < 4u) {
    sc = byte_of(q0, s) & 63u;
    m = byte_of(q1, s) & 63u;
  } else {
    uint hi = byte_of(q2, s - 4u);          // byte s + 4
    sc = (hi & 15u) | ((byte_of(q0, s - 4u) >> 6u) << 4u);
    m = (hi >> 4u) | ((byte_of(q1, s - 4u) >> 6u) << 4u);
  }
  return vec2(dm.x * float(sc), dm.y * float(m));
}
// Chunk c = j / 64 reads qs[32c .. 32c + 32): its first 32 values the low nibbles, the next
// 32 the high ones. Q5_K: value l of sub-block s adds 16 when bit s of qh[l] is set.
vec4 w_quant4(uint row, uint k) {
  uint bb = row * uint(w_row) + (k >> 8u) * KB, j = k & 255u;
  uint u = w[bb + QS + (j >> 6u) * 8u + ((j & 31u) >> 2u)] >> (((j >> 5u) & 1u) * 4u);
  uvec4 q = uvec4(u & 15u, (u >> 8u) & 15u, (u >> 16u) & 15u, (u >> 24u) & 15u);
#if WTYPE == WT_Q5_K
  uint h = w[bb + 4u + ((j & 31u) >> 2u)] >> (j >> 5u);
  q |= uvec4(h & 1u, (h >> 8u) & 1u, (h >> 16u) & 1u, (h >> 24u) & 1u) << 4u;
#endif
  return vec4(q);
}

#elif WTYPE == WT_Q6_K
// Block (52 uints): ql[128] @0, qh[64] @32, scales[16] int8 @48; d in the scales region.
// Value j = 128h + 32kk + l: low 4 bits from ql[64h + 32(kk & 1) + l] (kk ≥ 2: the high
// nibble), high 2 bits from qh[32h + l] at bit 2kk; minus 32; times d·scales[8h + l/16 + 2kk].
vec2 w_scale16(uint row, uint k) {
  uint b = k >> 8u, j = k & 255u;
  uint h = j >> 7u, kk = (j >> 5u) & 3u, l = j & 31u;
  uint si = 8u * h + (l >> 4u) + 2u * kk;
  int sc = bitfieldExtract(int(w[row * uint(w_row) + b * 52u + 48u + (si >> 2u)]), int(8u * (si & 3u)), 8);
  return vec2(scale_half(row * uint(w_nb) + b) * float(sc), 0.0);
}
vec4 w_quant4(uint row, uint k) {
  uint bb = row * uint(w_row) + (k >> 8u) * 52u, j = k & 255u;
  uint h = j >> 7u, kk = (j >> 5u) & 3u, l = j & 31u;
  uint lo = w[bb + ((64u * h + 32u * (kk & 1u) + l) >> 2u)] >> ((kk >> 1u) * 4u);
  uint hi = w[bb + 32u + ((32u * h + l) >> 2u)] >> (2u * kk);
  uvec4 q = uvec4(lo & 15u, (lo >> 8u) & 15u, (lo >> 16u) & 15u, (lo >> 24u) & 15u) |
            (uvec4(hi & 3u, (hi >> 8u) & 3u, (hi >> 16u) & 3u, (hi >> 24u) & 3u) << 4u);
  return vec4(ivec4(q) - 32);
}

#elif WTYPE == WT_Q4_1 || WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
// 32-value blocks of 5 (Q4_1, Q5_0) or 6 (Q5_1) uints; qs as Q4_0's; Q5_0 and Q5_1 add a
// fifth bit: bit j of qh for value j.
#if WTYPE == WT_Q5_1
#define WB 6u
#else
#define WB 5u
#endif
vec2 w_scale16(uint row, uint k) {
#if WTYPE == WT_Q5_0
  return vec2(scale_half(row * uint(w_nb) + (k >> 5u)), 0.0);
#else
  vec2 dm = unpackHalf2x16(w[row * uint(w_row) + (k >> 5u) * WB]);
  return vec2(dm.x, -dm.y);
#endif
}
vec4 w_quant4(uint row, uint k) {
  uint bb = row * uint(w_row) + (k >> 5u) * WB, j = k & 31u;
  uint u = w[bb + WB - 4u + ((j & 15u) >> 2u)] >> ((j >> 4u) * 4u);
  uvec4 q = uvec4(u & 15u, (u >> 8u) & 15u, (u >> 16u) & 15u, (u >> 24u) & 15u);
#if WTYPE == WT_Q4_1
  return vec4(q);
#else
  uint h = w[bb + WB - 5u] >> j;
  q |= uvec4(h & 1u, (h >> 1u) & 1u, (h >> 2u) & 1u, (h >> 3u) & 1u) << 4u;
#if WTYPE == WT_Q5_0
  return vec4(ivec4(q) - 16);
#else
  return vec4(q);
#endif
#endif
}

#else
#error "WTYPE must be one of WT_F16 … WT_Q5_K"
#endif

// Values k … k+3 of row `row` (k a multiple of 4) given their group's (scale, min).
vec4 w_values4(vec2 sm, uint row, uint k) {
#ifdef W_PLAIN
  return w_quant4(row, k);
#else
  precise vec4 v = sm.x * w_quant4(row, k) - sm.y;
  return v;
#endif
}

// One value (the embedding lookup).
float w_value(uint row, uint k) {
  vec4 v = w_values4(w_scale16(row, k & ~15u), row, k & ~3u);
  return v[k & 3u];
}
