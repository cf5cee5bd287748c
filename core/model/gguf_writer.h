// Writing GGUF files (the layout is described in core/model/gguf.h): a small writer of
// metadata and tensors, quantizers for the common types, and a random model written with
// llama.cpp's architecture names, metadata keys, tensor names and conventions (Q/K rows
// permuted for the llama-style architectures, Gemma's norms stored with the +1 folded in),
// optionally beside the same weights as a float32 Hugging Face directory (the tests' twin).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/gguf_quant.h"
#include "core/tokenize/gguf_tokenizer.h"

namespace attnviz {

// float32 → IEEE half, rounding to nearest even.
uint16_t float_to_half(float f);

// Encoding helpers (little-endian).
std::string le32(uint32_t v);
std::string le64(uint64_t v);
std::string gguf_str(const std::string& s);  // u64 length + bytes

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
  void set_bools(const std::string& key, const std::vector<bool>& v);
  // A key whose value type and encoded payload are given as is.
  void set_raw(const std::string& key, uint32_t type, const std::string& payload);
  void remove(const std::string& key);
  void remove_tensor(const std::string& name);

  // `shape` in row-major order (rows, cols); stored reversed as ne. `bytes` already encoded.
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, std::string bytes);
  void add_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values);
  // A tensor of `nbytes` produced only while writing (a large model is never held whole).
  void add_tensor_generated(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, uint64_t nbytes,
                            std::function<std::string()> make);
  // Changes what the tensor info of `name` says (after add_tensor), to write broken files.
  std::map<std::string, uint64_t> offset_override;
  std::map<std::string, uint32_t> type_override;
  std::map<std::string, std::vector<uint64_t>> ne_override;

  std::string header() const;  // everything before the data section, padded to the alignment
  std::string bytes() const;   // the whole file
  void write(const std::string& path) const;  // throws attnviz::Error on I/O failure

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string bytes;
    uint64_t nbytes = 0;
    std::function<std::string()> make;  // set for generated tensors
  };
  std::vector<std::pair<std::string, std::string>> kv_;  // key → type + payload, in order
  std::vector<Tensor> tensors_;
  void put(const std::string& key, uint32_t type, std::string payload);
};

// Random stored data for `n` values of `type` (a whole number of blocks): F32/F16/BF16 from
// N(0, 0.05²); quantized types as random bytes with their fp16 scale fields set to sizes
// that keep the values within about ±0.2.
std::string random_tensor_bytes(GgmlType type, int64_t n, uint64_t seed);

// Whether quantize() can encode `type`: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, MXFP4.
bool can_quantize(GgmlType type);
// `n` values (a whole number of blocks) encoded as `type` (round to nearest; the K type with
// one pass of min/max scales, not llama.cpp's search, so within the type's step, not optimal).
std::string quantize(GgmlType type, const float* x, int64_t n);
// The type named `name` ("Q4_K", case as written) that quantize() can encode; Error (usage)
// listing them otherwise.
GgmlType gguf_write_type(const std::string& name);

// Writes t as tokenizer.ggml.* metadata (ids and add_* flags only where set).
void set_tokenizer(GgufWriter& g, const GgufTokenizerData& t);

// llama.cpp's general.architecture for a config's model_type ("gemma3_text" → "gemma3",
// "mistral" → "llama"; the others are spelled alike).
std::string gguf_arch_of(const ModelConfig& c);

// A random model for `c` as one GGUF file at `path`: llama.cpp's names, metadata and
// conventions; 2-D weights drawn as write_random_model draws them (N(0, σ) with σ by role)
// and stored as `type` where it has a quantizer (else random stored bytes of `type`), or,
// where rows are not whole blocks of `type`, as llama.cpp's quantizer falls back (Q4_K → Q5_0,
// Q5_K → Q5_1, Q6_K → Q8_0, others → Q4_0; F16 when rows are not whole 32-blocks either);
// 1-D norms and biases as F32. `tokenizer` goes into the metadata when not null. With
// `hf_dir`, the same weights after dequantization are also written there as config.json +
// model.safetensors (float32) in Hugging Face's names and layout (the loaders' twin).
// `split_gate_up`: Gemma 4's experts as ffn_gate_exps and ffn_up_exps, (E, I_e, C) each,
// instead of the fused ffn_gate_up_exps (E, 2·I_e, C), the other form a converter may write.
void write_gguf_model(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& path,
                      const GgufTokenizerData* tokenizer = nullptr, const std::string& hf_dir = "",
                      bool split_gate_up = false);

// The tokenizer of a random model (write_random_model's character tokenizer: "\n", the
// printable ASCII characters, then "<id>" placeholders up to `vocab`, at the same ids) as
// GGUF byte-level BPE metadata without merges, so every character is one token as before.
GgufTokenizerData char_gguf_tokenizer(int vocab);

// `attnviz-cli random --gguf TYPE`: DIR/model.gguf holding the random model `c` with the
// character tokenizer inside (creates DIR). Returns the file's path.
std::string write_random_gguf(const ModelConfig& c, uint64_t seed, const std::string& dir, GgmlType type);

}  // namespace attnviz
