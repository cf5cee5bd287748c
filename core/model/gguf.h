// A bounds-checked reader for GGUF files (llama.cpp's model format), versions 2 and 3.
// All integers are little-endian.
//
//   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count × (string key | u32 value_type | value)
//   tensor_count × (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset)
//   padding to general.alignment (u32 key, default 32) | data
//   string = u64 length | bytes;  array value = u32 element_type | u64 count | elements
//
// ne[0] is the innermost (contiguous) dimension: a matrix with ne = [cols, rows] is stored
// row by row, as (rows, cols) in row-major terms. Tensor offsets are relative to the start
// of the data and multiples of the alignment.
//
// Every count, length, shape and offset is checked against the file before it is used, and
// nothing is allocated for a count larger than the bytes left could hold, so a small broken
// file is a clear attnviz::Error (naming the key or tensor), never a crash or a huge
// allocation.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/gguf_quant.h"
#include "core/tokenize/gguf_tokenizer.h"

namespace attnviz {

class MappedFile;  // core/model/pages.h

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars: integers (and bools) in `i` (U64 values above INT64_MAX
// are rejected), floats in `f`, strings in `s`. Arrays: `array_type` says the elements'
// type and exactly one of `ints`, `floats`, `strings` holds them (nested arrays are
// rejected, as llama.cpp does).
struct GgufValue {
  GgufValueType type = GgufValueType::U32;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GgufValueType array_type = GgufValueType::U32;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  bool is_int() const;    // any integer type or BOOL
  bool is_float() const;  // F32 or F64
  size_t array_size() const { return ints.size() + floats.size() + strings.size(); }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] innermost
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel = 0;
  // ne reversed: the shape in row-major (PyTorch) order, e.g. (rows, cols).
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  // Maps and validates the whole file: header, metadata, tensor infos (types supported,
  // shapes without overflow, rows made of whole blocks, data inside the file, aligned and
  // not overlapping). Throws attnviz::Error naming the file and the problem.
  static GgufFile open(const std::string& path);
  // The header and the scalar metadata only: arrays are stepped over (checked, their
  // elements not kept: a 150k-token vocabulary costs no allocation) and the tensor infos are
  // not read (tensors() is empty), so a file whose tensors are damaged or of a type attnviz
  // does not read still gives its architecture and file type. The file is mapped, not read:
  // only the header's pages are touched (what `attnviz-cli models` reads of every model).
  static GgufFile open_metadata(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find_key(const std::string& key) const;        // nullptr when absent
  const GgufTensorInfo* find(const std::string& name) const;      // nullptr when absent
  // Typed metadata access; a missing key or a value of the wrong kind is an Error naming it.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  // An integer key narrowed to int after checking lo <= value <= hi (checked_int): a value
  // outside is an Error naming the file, the key, the value and the range. Every integer a
  // model's configuration takes from the metadata is read through these.
  int get_int_in(const std::string& key, int64_t lo, int64_t hi) const;
  int get_int_in(const std::string& key, int64_t lo, int64_t hi, int fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;

  const uint8_t* data(const GgufTensorInfo& t) const { return base_ + data_start_ + t.offset; }
  // The tensor's values as float32 (numel values, ne[0] fastest).
  std::vector<float> read_f32(const GgufTensorInfo& t) const;
  // Tells the kernel the tensor's bytes are no longer needed, so a model converted tensor by
  // tensor does not hold the whole mapped file in memory on top of its float32 weights.
  // The bytes stay readable (they are read back from the file if touched again).
  void release(const GgufTensorInfo& t) const;
  // The mapping the tensors' bytes lie in (weights used in place hold it).
  const std::shared_ptr<const MappedFile>& mapping() const { return map_; }

 private:
  // full: open (arrays kept, tensor infos read and checked); otherwise open_metadata.
  static GgufFile open(const std::string& path, bool full);
  std::string path_;
  std::shared_ptr<const MappedFile> map_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

// True when `path` ends in ".gguf" (whether or not it exists, so that a missing file is
// reported as a missing file), or is a regular file that starts with the GGUF magic.
bool looks_like_gguf(const std::string& path);

// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*) as plain data
// (core/tokenize/gguf_tokenizer.h turns it into a Tokenizer). nullptr when the file has no tokenizer.ggml.tokens; Error when what is there is inconsistent.
std::unique_ptr<GgufTokenizerData> read_gguf_tokenizer(const GgufFile& f);

}  // namespace attnviz
