// The GGUF writer for the tests: core/model/gguf_writer.h (GgufWriter, the encoders,
// random stored data, set_tokenizer) under attnviz::test, plus a small byte-level tokenizer
// and a random model written both as a GGUF file and as the equivalent Hugging Face directory.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/config.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"

namespace attnviz::test {

using attnviz::float_to_half;
using attnviz::gguf_str;
using attnviz::GgufWriter;
using attnviz::le32;
using attnviz::le64;
using attnviz::random_tensor_bytes;
using attnviz::set_tokenizer;

// A small byte-level BPE tokenizer of `vocab` (>= 261) ids: GPT-2's 256 byte characters
// (byte b at id b), merges making "Ġt", "he", "Ġthe", "Ġa", placeholders, and
// <|endoftext|> (control, BOS and EOS, not added) at the last id.
GgufTokenizerData small_byte_level_tokenizer(int vocab);

// A random model for `c` written as DIR/model.gguf (core's write_gguf_model: llama.cpp's
// names, metadata and conventions, 2-D weights stored as `type` or its fallback, a small
// byte-level tokenizer in the metadata when `with_tokenizer`: `tokenizer`, else
// small_byte_level_tokenizer) and as DIR/hf/ (config.json + model.safetensors, float32, +
// tokenizer.json) holding exactly the GGUF weights after dequantization, in Hugging Face's
// names and layout. Returns DIR/model.gguf.
std::string write_gguf_model_pair(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& dir,
                                  bool with_hf = true, bool with_tokenizer = true,
                                  const GgufTokenizerData* tokenizer = nullptr, bool split_gate_up = false);

}  // namespace attnviz::test
