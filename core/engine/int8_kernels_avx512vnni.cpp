// The int8 arithmetic's AVX-512 VNNI kernels (int8_kernels.h), on 512-bit vectors, for the
// CPUs with AVX-512 VNNI: Intel's servers since Cascade Lake, AMD's Zen 4 and later.
//   - The super-block types (Q4_K, Q5_K, Q6_K): 64 weights per step where the 256-bit kernels
//     (int8_kernels_x86.h) take 32. One vpdpwssd (int16 pairs times int16 scales, summed into
//     int32 and added) after each maddubs, the sub-block scales spread over the lanes by one
//     vpermw per step.
//   - The 32-element types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4): two blocks per vector, one
//     vpdpbusd (unsigned × signed bytes summed four at a time into int32), a fifth-bit mask
//     straight from the block's 32 bits, the sign of Q8_0's and MXFP4's weights moved onto the
//     activation by a masked subtraction (AVX-512 has no vpsignb).
// The integer sums are those of the other families (int8_kernels_x86.h: nothing saturates);
// the float sums over blocks run in 16 lanes here, so results equal the AVX2 family's up to
// float rounding, not bit for bit. The helpers (fp16 scales, Q4_K's scales and mins) are
// int8_kernels_x86.h's. Compiled with -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni (core/CMakeLists.txt); int8_product.cpp calls it only when the CPU has all of
// them.
#if defined(__x86_64__)
#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "int8_kernels_avx512vnni.cpp is compiled with -mavx512vnni -mavx512vl -mavx512bw (core/CMakeLists.txt)"
#endif
#include "core/engine/int8_kernels_x86.h"

namespace attnviz::int8 {
namespace {

inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i bytes64(int8_t v) { return _mm512_set1_epi8(v); }
// a in the low half, b in the high half.
inline __m512i join(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }
// int16 lanes 0…15 set to a, 16…31 to b.
inline __m512i halves16(int16_t a, int16_t b) { return join(_mm256_set1_epi16(a), _mm256_set1_epi16(b)); }

// Q4_K (144 bytes) and Q5_K (176): (d·sc_j)·n − dmin·m_j over sub-block j of 32. Chunk c's
// 32 bytes hold sub-block 2c in their low nibbles and 2c + 1 in their high ones: broadcast to
// both halves of a vector, the high half shifted by 4, they are the 64 weights 64c … 64c + 63,
// which meet the activation's 64 bytes from 64c.
template <bool kFive, int M>
void q45k_512(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  constexpr int BB = kFive ? 176 : 144, QS = kFive ? 48 : 16;
  const int64_t K = x.K, nb = K / 256, ng = K / 32;
  const __m512i nib_shift = halves16(0, 4);
  // Chunk c: int16 lanes 0…15 name sub-block 2c, 16…31 sub-block 2c + 1 (the scale to pick,
  // and for Q5_K the bit of the high-bit bytes to shift down).
  const __m512i sub[4] = {halves16(0, 1), halves16(2, 3), halves16(4, 5), halves16(6, 7)};
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m512 acc[M];
    __m256 macc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), macc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * BB;
      prefetch_ahead<BB>(blk, row_bytes);  // prefetch_ahead.h
      const float d = h2f(blk), dmin = h2f(blk + 2);
      uint64_t sc8, mn8;
      scales_mins_k4(blk + 4, &sc8, &mn8);
      const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
      const __m256i mn32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mn8)));
      __m512i isum[M];
      for (int i = 0; i < M; ++i) isum[i] = _mm512_setzero_si512();
      __m512i hv = _mm512_setzero_si512();
      if constexpr (kFive) hv = _mm512_broadcast_i64x4(load32(blk + 16));
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_broadcast_i64x4(load32(blk + QS + 32 * c));
        __m512i w = _mm512_and_si512(_mm512_srlv_epi16(v, nib_shift), bytes64(15));
        if constexpr (kFive)
          w = _mm512_or_si512(w, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hv, sub[c]), bytes64(1)), 4));
        const __m512i scale = _mm512_permutexvar_epi16(sub[c], sc16);
        for (int i = 0; i < M; ++i)
          isum[i] =
              _mm512_dpwssd_epi32(isum[i], _mm512_maddubs_epi16(w, load64(x.q + i * K + b * 256 + 64 * c)), scale);
      }
      for (int i = 0; i < M; ++i) {
        const float dx = x.d[i * nb + b];
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(d * dx), _mm512_cvtepi32_ps(isum[i]), acc[i]);
        const __m256i ms = _mm256_mullo_epi32(mn32, load32(x.sums + i * ng + 8 * b));  // m_j·Σq_j
        macc[i] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * dx), _mm256_cvtepi32_ps(ms), macc[i]);
      }
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = _mm512_reduce_add_ps(acc[i]) + hsum(macc[i]);
  }
}

// Q6_K (210 bytes): d·sc_g·(n6 − 32) over groups g of 16, n6 unsigned and the offset −32·Σ_g
// sc_g·(Σq over g) from sums16, as the 256-bit kernel does. Half h's 128 weights are two
// vectors of 64: the low nibbles of its 64 ql bytes with the high bits' pairs 0 and 1
// (weights 128h … 128h + 63), then the high nibbles with pairs 2 and 3 (the next 64).
template <int M>
void q6k_512(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  const int64_t K = x.K, nb = K / 256;
  // Vector p of half h covers groups 8h + 4p … 8h + 4p + 3, eight int16 lanes each.
  __m512i pick[2][2];
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 2; ++p) {
      alignas(64) int16_t idx[32];
      for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(8 * h + 4 * p + l / 8);
      pick[h][p] = _mm512_load_si512(idx);
    }
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * 210;
      prefetch_ahead<210>(blk, row_bytes);
      const float d = h2f(blk + 208);
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
      const __m512i sc = _mm512_zextsi256_si512(sc16);
      __m512i isum[M];
      for (int i = 0; i < M; ++i) {  // the offset: −32·Σ_g sc_g·sums16_g
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load32(x.sums16 + i * (K / 16) + 16 * b)), 5);
        isum[i] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off));
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i a = load32(blk + 64 * h), c = load32(blk + 64 * h + 32), hh = load32(blk + 128 + 32 * h);
        const __m512i lo = join(a, c);
        const __m512i hi = join(hh, _mm256_srli_epi16(hh, 2));
        const __m512i w01 =
            _mm512_or_si512(_mm512_and_si512(lo, bytes64(15)), _mm512_slli_epi16(_mm512_and_si512(hi, bytes64(3)), 4));
        const __m512i w23 =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), bytes64(15)), _mm512_and_si512(hi, bytes64(48)));
        const __m512i s01 = _mm512_permutexvar_epi16(pick[h][0], sc), s23 = _mm512_permutexvar_epi16(pick[h][1], sc);
        for (int i = 0; i < M; ++i) {
          const int8_t* q = x.q + i * K + b * 256 + 128 * h;
          isum[i] = _mm512_dpwssd_epi32(isum[i], _mm512_maddubs_epi16(w01, load64(q)), s01);
          isum[i] = _mm512_dpwssd_epi32(isum[i], _mm512_maddubs_epi16(w23, load64(q + 64)), s23);
        }
      }
      for (int i = 0; i < M; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(d * x.d[i * nb + b]), _mm512_cvtepi32_ps(isum[i]), acc[i]);
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = _mm512_reduce_add_ps(acc[i]);
  }
}

// --- The 32-element types, two blocks per 512-bit vector: 128-bit lanes 0 and 1 hold block
// b's weights 0…15 and 16…31, lanes 2 and 3 block b + 1's, against the activation's 64 bytes
// from 32b. Each block's int32 sums stay in its own eight lanes, scaled there by d·d_x.

struct Pair32 {
  __m512i w;      // unsigned bytes, or |w| for the signed types
  __mmask64 neg;  // the signed types: the bytes whose w < 0 (their sign goes onto the activation)
  __m128 d, m;    // lanes 0 and 1: the two blocks' scales and mins (m: the types with a min)
};

// 16 bytes of nibbles from each of two blocks as their 64 values (the layout above).
inline __m512i nibbles2(const uint8_t* p0, const uint8_t* p1) {
  const __m256i both =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)), 1);
  const __m512i lanes = _mm512_shuffle_i64x2(_mm512_castsi256_si512(both), _mm512_castsi256_si512(both), 0x50);
  const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                         0x0004000400040004, 0, 0);  // int16 lanes: 0, 4, 0, 4 per 128 bits
  return _mm512_and_si512(_mm512_srlv_epi16(lanes, shift), bytes64(15));
}
// Two blocks' fifth bits (32 each, bit j for value j) as 16 in those bytes.
inline __m512i fifth_bits2(const uint8_t* h0, const uint8_t* h1) {
  uint32_t a, b;
  std::memcpy(&a, h0, 4);
  std::memcpy(&b, h1, 4);
  return _mm512_maskz_mov_epi8(_cvtu64_mask64(a | (static_cast<uint64_t>(b) << 32)), bytes64(16));
}
// p[0] and p[1] in lanes 0 and 1 (movq: no alignment asked, unlike _mm_load_sd's double).
inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m128 two(float a, float b) { return _mm_setr_ps(a, b, 0.f, 0.f); }

template <GgmlType T>
inline Pair32 unpack32x2(const uint8_t* b0, const uint8_t* b1) {
  Pair32 u;
  u.neg = 0;
  u.m = _mm_setzero_ps();
  if constexpr (T == GgmlType::Q8_0) {
    const __m512i w = join(load32(b0 + 2), load32(b1 + 2));
    u.neg = _mm512_movepi8_mask(w);
    u.w = _mm512_abs_epi8(w);
    u.d = two(h2f(b0), h2f(b1));
  } else if constexpr (T == GgmlType::MXFP4) {  // codes looked up as the doubled E2M1 values, signed
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
    const __m512i w = _mm512_shuffle_epi8(table, nibbles2(b0 + 1, b1 + 1));
    u.neg = _mm512_movepi8_mask(w);
    u.w = _mm512_abs_epi8(w);
    u.d = two(mxfp4_half_scale(b0[0]), mxfp4_half_scale(b1[0]));
  } else if constexpr (T == GgmlType::Q4_0) {
    u.d = two(h2f(b0), h2f(b1));
    u.m = _mm_mul_ps(_mm_set1_ps(-8.f), u.d);
    u.w = nibbles2(b0 + 2, b1 + 2);
  } else if constexpr (T == GgmlType::Q4_1) {
    u.d = two(h2f(b0), h2f(b1));
    u.m = two(h2f(b0 + 2), h2f(b1 + 2));
    u.w = nibbles2(b0 + 4, b1 + 4);
  } else if constexpr (T == GgmlType::Q5_0) {
    u.d = two(h2f(b0), h2f(b1));
    u.m = _mm_mul_ps(_mm_set1_ps(-16.f), u.d);
    u.w = _mm512_or_si512(nibbles2(b0 + 6, b1 + 6), fifth_bits2(b0 + 2, b1 + 2));
  } else {  // Q5_1
    u.d = two(h2f(b0), h2f(b1));
    u.m = two(h2f(b0 + 2), h2f(b1 + 2));
    u.w = _mm512_or_si512(nibbles2(b0 + 8, b1 + 8), fifth_bits2(b0 + 4, b1 + 4));
  }
  return u;
}

// Weight blocks b and b + 1 of a row against activation row i; with kLast only block b (an
// odd block count's last): the second half of the pair is block b again, its activation
// bytes and scale read as zeros.
template <GgmlType T, bool kLast>
inline void pair_step(const Pair32& u, const ActRows& x, int64_t i, int64_t b, int64_t nb, __m512& acc, __m128& macc) {
  const int8_t* q = x.q + i * x.K + 32 * b;
  __m512i qv = kLast ? _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q) : load64(q);
  if constexpr (kSigned32<T>) qv = _mm512_mask_sub_epi8(qv, u.neg, _mm512_setzero_si512(), qv);
  const float* dx = x.d + i * nb + b;
  const __m128 dx2 = kLast ? _mm_load_ss(dx) : load2(dx);
  const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(_mm_mul_ps(u.d, dx2)));
  acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u.w, qv)), acc);
  if constexpr (!kSigned32<T>) {
    const float* ds = x.dsums + i * nb + b;
    const __m128 ds2 = kLast ? _mm_load_ss(ds) : load2(ds);
    macc = _mm_fmadd_ps(u.m, ds2, macc);
  }
}

template <GgmlType T, int BB, int M>
void matvec32x2(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  const int64_t nb = x.K / 32;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m512 acc[M];
    __m128 macc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), macc[i] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      prefetch_ahead<2 * BB>(row + b * BB, row_bytes);
      const Pair32 u = unpack32x2<T>(row + b * BB, row + (b + 1) * BB);
      for (int i = 0; i < M; ++i) pair_step<T, false>(u, x, i, b, nb, acc[i], macc[i]);
    }
    if (b < nb) {
      const Pair32 u = unpack32x2<T>(row + b * BB, row + b * BB);
      for (int i = 0; i < M; ++i) pair_step<T, true>(u, x, i, b, nb, acc[i], macc[i]);
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = _mm512_reduce_add_ps(acc[i]) + hsum(_mm256_zextps128_ps256(macc[i]));
  }
}

template <int M>
void matvec512_m(GgmlType type, const uint8_t* rows, int64_t rb, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  switch (type) {
    case GgmlType::Q4_K: return q45k_512<false, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_K: return q45k_512<true, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q6_K: return q6k_512<M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q8_0: return matvec32x2<GgmlType::Q8_0, 34, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q4_0: return matvec32x2<GgmlType::Q4_0, 18, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q4_1: return matvec32x2<GgmlType::Q4_1, 20, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_0: return matvec32x2<GgmlType::Q5_0, 22, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_1: return matvec32x2<GgmlType::Q5_1, 24, M>(rows, rb, n, x, y, ldy);
    case GgmlType::MXFP4: return matvec32x2<GgmlType::MXFP4, 17, M>(rows, rb, n, x, y, ldy);
    default: return;
  }
}

void matvec512(GgmlType type, const uint8_t* rows, int64_t rb, int64_t n, const ActRows& x, int M, float* y,
               int64_t ldy) {
  switch (M) {
    case 1: return matvec512_m<1>(type, rows, rb, n, x, y, ldy);
    case 2: return matvec512_m<2>(type, rows, rb, n, x, y, ldy);
    case 3: return matvec512_m<3>(type, rows, rb, n, x, y, ldy);
    default: return matvec512_m<4>(type, rows, rb, n, x, y, ldy);
  }
}

const Kernels kAvx512Vnni = {"avx512vnni", matvec512};

}  // namespace

const Kernels& avx512vnni_kernels() { return kAvx512Vnni; }

}  // namespace attnviz::int8
#endif  // __x86_64__
