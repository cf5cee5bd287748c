// A weight matrix used where its file stores it: a GGUF tensor of any supported type
// (F32, F16, BF16, Q8_0, Q4_0 … Q6_K) or an F16/BF16 safetensors tensor, read through the
// file's read-only mapping, never converted to float32 as a whole.
//
// The matrix is `rows` rows of `cols` values, each row `row_bytes` bytes of whole blocks of
// `type` (core/model/gguf_quant.h), rows back to back from `data`. For a linear layer
// y = x · W (W (in, out), attnviz's layout) the file holds Wᵀ: rows = out, cols = in, which is
// what a matrix–vector product wants (each output is one row · x). For an embedding table
// (V, C) the rows are the tokens, as in attnviz's layout.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/model/gguf_quant.h"

namespace attnviz {

struct StoredRows {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;  // row 0's first block; nullptr: none
  int64_t rows = 0, cols = 0;     // cols a multiple of the type's block_elems
  int64_t row_bytes = 0;          // cols / block_elems · block_bytes
  std::shared_ptr<const void> keep;  // holds the mapping (and so `data`) valid
  // Where the bytes came from, for messages: "model.gguf: blk.3.attn_q.weight".
  std::string origin;

  bool empty() const { return data == nullptr || rows == 0; }
  int64_t bytes() const { return rows * row_bytes; }
  // Rows [r0, r0 + n) as a matrix of their own (same mapping): phi3's fused q | k | v, a block
  // of the vocabulary.
  StoredRows slice(int64_t r0, int64_t n) const;
  // Row r as float32 into dst[0, cols): the values `dequantize` gives.
  void decode_row(int64_t r, float* dst) const;
  // Rows [r0, r0 + n) as float32 into dst (n, cols) row-major, rows ld floats apart.
  void decode_rows(int64_t r0, int64_t n, float* dst, int64_t ld) const;
};

// Values that are NaN or infinite. Block types: the blocks whose scale (d, and the min or
// dmin where the type has one) is; float types (F32, F16, BF16): the values. `first` gets
// the first one's index (block or value), −1 when there is none.
int64_t count_non_finite(const StoredRows& w, int64_t* first = nullptr);

// The row layout of `type` for rows of `cols` values: row_bytes, or an Error naming `what`
// when cols is not a whole number of blocks or the type cannot be used in place.
int64_t stored_row_bytes(GgmlType type, int64_t cols, const std::string& what);

}  // namespace attnviz
