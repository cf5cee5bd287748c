// SentencePieceTokenizer: a tokenizer.model (SentencePiece protobuf) through Debian's
// libsentencepiece. Encoding adds BOS (when the model has one) as Hugging Face's Llama
// tokenizer does with add_bos_token = true.
#include <sentencepiece_processor.h>

#include <cstdio>

#include "core/error.h"
#include "core/limits.h"
#include "core/tokenize/hf_tokenizer.h"

namespace attnviz {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::string path;  // for errors
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  sentencepiece::util::Status st;
  try {
    st = impl_->sp.Load(path);
  } catch (const std::exception& e) {
    // libsentencepiece throws (its double-array trie builder) on some malformed models,
    // e.g. an empty piece in a unigram model, instead of returning a status.
    throw Error(path + ": not a usable SentencePiece model: " + excerpt(e.what(), 200) +
                "\n  HINT: tokenizer.model must be the protobuf file the model was trained with.");
  }
  if (!st.ok())
    throw Error(path + ": not a SentencePiece model: " + st.ToString() +
                "\n  HINT: tokenizer.model must be the protobuf file the model was trained with.");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int> SentencePieceTokenizer::encode_with(std::string_view text, bool add_special) const {
  utf8_validate(text);
  std::vector<int> ids;
  const auto st = impl_->sp.Encode(text, &ids);
  if (!st.ok()) throw Error(impl_->path + ": SentencePiece could not encode the text: " + st.ToString());
  if (add_special && impl_->sp.bos_id() >= 0) ids.insert(ids.begin(), impl_->sp.bos_id());
  return ids;
}

int SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

bool SentencePieceTokenizer::is_special(int id) const {
  return id >= 0 && id < vocab_size() && (impl_->sp.IsControl(id) || impl_->sp.IsUnknown(id));
}

std::string SentencePieceTokenizer::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string p = impl_->sp.IdToPiece(id);
  if (is_special(id)) return p;
  if (impl_->sp.IsByte(id) && p.size() == 6) {  // "<0xNN>"; anything else in a byte piece is shown as written
    unsigned v = 0;
    if (std::sscanf(p.c_str(), "<0x%2x>", &v) == 1 && v < 256) return std::string(1, static_cast<char>(v));
    return p;
  }
  std::string out;  // ▁ → space
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += p[i++];
    }
  }
  return out;
}

std::string SentencePieceTokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) return "<" + std::to_string(id) + ">";
  if (impl_->sp.IsByte(id)) return impl_->sp.IdToPiece(id);  // "<0xNN>": part of a character
  return token_bytes(id);
}

std::string SentencePieceTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  const auto st = impl_->sp.Decode(ids, &out);
  if (!st.ok()) throw Error(impl_->path + ": SentencePiece could not decode the ids: " + st.ToString());
  return out;
}

}  // namespace attnviz
