// A small GGUF writer for the tests (the layout is described in core/model/gguf.h), and a
// random model written both as a GGUF file with llama.cpp's names and as the equivalent
// Hugging Face directory.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/gguf.h"

namespace attnviz::test {

// float32 → IEEE half, rounding to nearest even.
uint16_t float_to_half(float f);

class GgufWriter {
 public:
  // Header fields, changeable to write broken files.
  std::string magic = "GGUF";
  uint32_t version = 3;
  uint64_t alignment = 32;  // where the data starts and tensors are placed; written as general.alignment only via set_u32

  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  // A key whose value type and encoded payload are given as is.
  void set_raw(const std::string& key, uint32_t type, const std::string& payload);
  void remove(const std::string& key);
  void remove_tensor(const std::string& name);

  // `shape` in row-major order (rows, cols); stored reversed as ne. `bytes` already encoded.
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, std::string bytes);
  void add_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values);
  // Changes what the tensor info of `name` says (after add_tensor), to write broken files.
  std::map<std::string, uint64_t> offset_override;
  std::map<std::string, uint32_t> type_override;
  std::map<std::string, std::vector<uint64_t>> ne_override;

  std::string header() const;  // everything before the data section, padded to the alignment
  std::string bytes() const;   // the whole file
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string bytes;
  };
  std::vector<std::pair<std::string, std::string>> kv_;  // key → type + payload, in order
  std::vector<Tensor> tensors_;
  void put(const std::string& key, uint32_t type, std::string payload);
};

// Encoding helpers (little-endian).
std::string le32(uint32_t v);
std::string le64(uint64_t v);
std::string gguf_str(const std::string& s);  // u64 length + bytes

// Random stored data for `n` values of `type` (a whole number of blocks): F32/F16/BF16 from
// N(0, 0.05²); quantized types as random bytes with their fp16 scale fields set to sizes
// that keep the values within about ±0.2.
std::string random_tensor_bytes(GgmlType type, int64_t n, uint64_t seed);

// Writes t as tokenizer.ggml.* metadata (ids and add_* flags only where set).
void set_tokenizer(GgufWriter& g, const GgufTokenizerData& t);
// A small byte-level BPE tokenizer of `vocab` (>= 261) ids: GPT-2's 256 byte characters
// (byte b at id b), merges making "Ġt", "he", "Ġthe", "Ġa", placeholders, and
// <|endoftext|> (control, BOS and EOS, not added) at the last id.
GgufTokenizerData small_byte_level_tokenizer(int vocab);

// A random model for `c` written as DIR/model.gguf (2-D weights stored as `type`, or as
// a fallback type where rows are not whole blocks of it, see PairWriter::weight; 1-D
// norms and biases as F32, llama.cpp's names, metadata and Q/K row order, a small byte-level
// tokenizer in the metadata when `with_tokenizer`: `tokenizer`, else small_byte_level_tokenizer) and as DIR/hf/ (config.json +
// model.safetensors, float32) holding exactly the GGUF weights after dequantization, in
// Hugging Face's names and layout. Returns DIR/model.gguf.
std::string write_gguf_model_pair(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& dir,
                                  bool with_hf = true, bool with_tokenizer = true,
                                  const GgufTokenizerData* tokenizer = nullptr);

}  // namespace attnviz::test
