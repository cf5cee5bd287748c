// Tensor element types of GGUF files (ggml's type ids) and their conversion to float32.
//
// A quantized tensor is a sequence of blocks; one block holds `block_elems` consecutive
// values of a row in `block_bytes` bytes. Rows (the innermost dimension) are whole blocks.
// "fp16" below is IEEE half precision, little-endian, like every multi-byte field.
//
//   type  elems bytes  layout of one block                              value of element j
//   F32      1    4    float32
//   F16      1    2    fp16
//   BF16     1    2    bfloat16 (the upper half of a float32)
//   Q8_0    32   34    d:fp16, q[32]:int8                               d·q[j]
//   Q4_0    32   18    d:fp16, qs[16]: j<16 low nibble of qs[j],        d·(n−8)
//                                      j≥16 high nibble of qs[j−16]
//   Q4_1    32   20    d:fp16, m:fp16, qs[16] as Q4_0                   d·n + m
//   Q5_0    32   22    d:fp16, qh:u32 (bit j = 5th bit of element j),   d·((n | h<<4) − 16)
//                      qs[16] as Q4_0
//   Q5_1    32   24    d:fp16, m:fp16, qh:u32, qs[16]                   d·(n | h<<4) + m
//   Q2_K   256   84    scales[16] (low nibble scale, high nibble min), qs[64], d:fp16, dmin:fp16
//   Q3_K   256  110    hmask[32], qs[64], scales[12] (16 six-bit values), d:fp16
//   Q4_K   256  144    d:fp16, dmin:fp16, scales[12] (8 six-bit scales + 8 six-bit mins), qs[128]
//   Q5_K   256  176    d:fp16, dmin:fp16, scales[12], qh[32], qs[128]
//   Q6_K   256  210    ql[128], qh[64], scales[16]:int8, d:fp16
// The K types' element formulas are spelled out next to their decoders in gguf_quant.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

// ggml's type ids as stored in GGUF tensor infos.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30, MXFP4 = 39,
};

// MXFP4 (ggml's, for GPT-OSS's experts): blocks of 32 values, an E8M0 exponent byte e and 16
// bytes of 4-bit E2M1 codes (element j < 16 the low nibble of qs[j], j ≥ 16 the high one).
// Code n is worth kMxfp4Values[n] (the E2M1 values doubled: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// their negatives, × 2) times mxfp4_half_scale(e) = 2^(e − 128) (half of 2^(e − 127)), as
// ggml computes it (e = 255 is 2^127, not NaN). Every product is exact in float32.
inline constexpr float kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float d;
  __builtin_memcpy(&d, &bits, 4);
  return d;
}

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;     // "Q4_K"
  int block_elems;      // values per block (0 for types attnviz does not read)
  int block_bytes;      // bytes per block (0 for types attnviz does not read)
  bool supported() const { return block_elems > 0; }  // attnviz can convert it to float32
};

// The type with ggml id `id`: the supported ones above, and the known others (IQ*, Q8_1,
// Q8_K, integer types, ...) with supported() false so messages can name them.
// nullptr for ids ggml does not define.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType t);

// The byte offsets inside one block of `t`'s fp16 scale fields (d, and the min m or dmin
// where the type has one), from the table above; empty for F32, F16 and BF16.
std::vector<int> ggml_scale_fields(GgmlType t);

// "F32, F16, BF16, Q8_0, ..." — the supported types, for messages and the README.
std::string supported_ggml_types();

// Converts `n` values (a whole number of blocks) of type `type` starting at `src` into
// dst[0..n). `type` must be supported (std::logic_error otherwise) and n a multiple of its
// block_elems (the caller checks; this function does not read past n / block_elems blocks).
void dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst);

}  // namespace attnviz
