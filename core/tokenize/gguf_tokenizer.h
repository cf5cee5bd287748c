// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*), run through the same
// classes as a Hugging Face tokenizer.json: the metadata is turned into the tokenizer.json
// that Hugging Face's converters write for that family, and HfTokenizer runs it. So a GGUF
// file encodes text exactly as the Hugging Face checkpoint it was converted from.
//
//   tokenizer.ggml.model "gpt2"  byte-level BPE: tokens + merges ("a b", rank order);
//                                tokenizer.ggml.pre names the pre-tokenizer regex
//                                (gguf_pre_tokenizer_names() lists the known names).
//   tokenizer.ggml.model "llama" SentencePiece-style BPE: tokens + scores; the merges are
//                                derived from the scores as Hugging Face's converter does
//                                (a merged piece's score orders its merges), "▁" for spaces,
//                                byte fallback to <0xNN> tokens.
//   tokenizer.ggml.model "gemma4" Gemma 4's: tokens + merges (rank order), "▁" for spaces
//                                with no prefix space, runs of newlines split from the
//                                rest first, byte fallback to <0xNN> tokens.
// Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. Unknown and
// control tokens become special added tokens, user-defined ones plain added tokens: both are
// matched in the raw text before the model, as Hugging Face does.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/tokenize/tokenizer.h"

namespace attnviz {

// The tokenizer.ggml.* metadata as plain data. Arrays are checked (by the GGUF reader) to
// agree in length with `tokens`.
struct GgufTokenizerData {
  std::string model;                // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
  std::string pre;                  // tokenizer.ggml.pre: names the pre-tokenizer regex ("" when absent)
  std::vector<std::string> tokens;  // id → piece
  std::vector<float> scores;        // id → score (empty when absent)
  std::vector<int32_t>
      token_type;  // id → type (1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte); empty when absent
  std::vector<std::string> merges;                             // "a b" BPE merges in rank order (empty when absent)
  int64_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // -1 when absent
  // tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix; -1 when absent (the
  // family's default applies, as llama.cpp's: BOS for "llama" and for "gpt2" with Llama 3's
  // pre-tokenizer, none for other "gpt2"; a space prefix for "llama").
  int add_bos = -1, add_eos = -1, add_space_prefix = -1;
};

// The token types of tokenizer.ggml.token_type.
enum GgufTokenType : int32_t {
  kGgufNormal = 1,
  kGgufUnknown = 2,
  kGgufControl = 3,
  kGgufUser = 4,
  kGgufUnused = 5,
  kGgufByte = 6
};

// The equivalent Hugging Face tokenizer.json. Throws attnviz::Error starting with `name`
// for a tokenizer model or pre-tokenizer name attnviz does not know, or data it cannot use.
nlohmann::json gguf_tokenizer_json(const GgufTokenizerData& t, const std::string& name);
// Why attnviz cannot run this tokenizer (an unknown tokenizer.ggml.model or .pre), or "".
std::string gguf_tokenizer_unsupported(const GgufTokenizerData& t);
// HfTokenizer over gguf_tokenizer_json(t, name).
std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufTokenizerData& t, const std::string& name);
// The tokenizer.ggml.pre names that gguf_tokenizer_json understands.
std::vector<std::string> gguf_pre_tokenizer_names();

}  // namespace attnviz
