#include "core/model/stored_rows.h"

#include "core/error.h"

#include <cmath>
#include <cstring>

namespace attnviz {

StoredRows StoredRows::slice(int64_t r0, int64_t n) const {
  StoredRows s = *this;
  s.data = data + r0 * row_bytes;
  s.rows = n;
  return s;
}

void StoredRows::decode_row(int64_t r, float* dst) const { dequantize(type, data + r * row_bytes, cols, dst); }

void StoredRows::decode_rows(int64_t r0, int64_t n, float* dst, int64_t ld) const {
  for (int64_t r = 0; r < n; ++r) decode_row(r0 + r, dst + r * ld);
}

namespace {
bool finite_half(const uint8_t* p) { return ((p[1] & 0x7C) != 0x7C); }        // exponent not all ones
bool finite_bf16(const uint8_t* p) { return ((p[1] & 0x7F) != 0x7F) || !(p[0] & 0x80); }
}  // namespace

int64_t count_non_finite(const StoredRows& w, int64_t* first) {
  const GgmlTypeInfo& t = ggml_type_info(w.type);
  const std::vector<int> scales = ggml_scale_fields(w.type);  // fp16 fields checked per block
  int64_t bad = 0, at = -1;
  const int64_t per_row = w.cols / t.block_elems;
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = w.data + r * w.row_bytes;
    for (int64_t i = 0; i < per_row; ++i) {
      const uint8_t* p = row + i * t.block_bytes;
      bool ok;
      switch (w.type) {
        case GgmlType::F32: {
          float v;
          std::memcpy(&v, p, 4);
          ok = std::isfinite(v);
          break;
        }
        case GgmlType::F16: ok = finite_half(p); break;
        case GgmlType::BF16: ok = finite_bf16(p); break;
        default:
          ok = true;
          for (int f : scales) ok = ok && finite_half(p + f);
      }
      if (!ok && bad++ == 0) at = r * per_row + i;
    }
  }
  if (first) *first = at;
  return bad;
}

int64_t stored_row_bytes(GgmlType type, int64_t cols, const std::string& what) {
  const GgmlTypeInfo& t = ggml_type_info(type);
  if (!t.supported())
    throw Error(what + ": element type " + t.name + " cannot be used by attnviz's products (supported: " +
                supported_ggml_types() + ")");
  if (cols % t.block_elems)
    throw Error(what + ": rows of " + std::to_string(cols) + " values are not whole blocks of " +
                std::to_string(t.block_elems) + " (" + t.name + ")");
  return cols / t.block_elems * t.block_bytes;
}

}  // namespace attnviz
