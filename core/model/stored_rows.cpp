#include "core/model/stored_rows.h"

#include "core/error.h"

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
