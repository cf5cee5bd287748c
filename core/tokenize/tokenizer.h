// Text → token ids. The built-in models use CharTokenizer: one token per UTF-8 code point;
// real checkpoints use HfTokenizer (Hugging Face tokenizer.json) or SentencePieceTokenizer
// (tokenizer.model), both in hf_tokenizer.h.
//
// Character tokenizer file format (tokenizer.json in the model directory):
//   {"type": "char", "vocab": ["\n", " ", "a", ...]}    // id = index in "vocab"
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attnviz {

// What Tokenizer::encode_incremental keeps between calls (one per text box). Plain data;
// a cache made for one tokenizer is simply rebuilt when used with another.
struct EncodeCache {
  const void* owner = nullptr;      // the tokenizer that filled it
  std::string text;                 // the last text
  std::vector<int> ids;             // its ids before BOS/EOS were added
  size_t tail_begin = 0;            // byte in `text` where its last section (after the last added token) begins
  std::string tail;                 // that section as the first pre-tokenizer saw it (normalized)
  std::vector<size_t> piece_begin;  // where each first-step piece begins in `tail`
  std::vector<size_t> piece_ids;    // index in `ids` of each piece's first id
  bool valid = false;
  size_t retokenized_bytes = 0;     // last call: bytes of (normalized) text tokenized again
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws attnviz::Error naming the first character that has no token.
  // Ids as Hugging Face's encode(text, add_special_tokens=true) gives them.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // add_special = false: no BOS/EOS added (the text's own special tokens still match).
  virtual std::vector<int> encode_with(std::string_view text, bool add_special) const {
    (void)add_special;
    return encode(text);
  }
  // Same ids as encode_with, re-tokenizing only from the pre-token an edit touched when the
  // tokenizer allows it (supports_incremental); otherwise the whole text.
  virtual std::vector<int> encode_incremental(std::string_view text, bool add_special, EncodeCache& cache) const {
    cache.retokenized_bytes = text.size();
    return encode_with(text, add_special);
  }
  virtual bool supports_incremental() const { return false; }
  // The text of one token (for labels), valid UTF-8; "<id>" style text for ids it cannot
  // show. A token holding part of a character shows its bytes as <0xNN>.
  virtual std::string piece(int id) const = 0;
  // The bytes one token adds to the decoded text (spaces as spaces, byte tokens as their
  // byte; possibly part of a UTF-8 character). For labels; see token_labels.
  virtual std::string token_bytes(int id) const { return piece(id); }
  // A special token (BOS, EOS, <|endoftext|>, ...): labels show it as written.
  virtual bool is_special(int id) const {
    (void)id;
    return false;
  }
  virtual int vocab_size() const = 0;
  virtual std::string decode(const std::vector<int>& ids) const;
  // "char", "bpe" (Hugging Face tokenizer.json) or "sentencepiece" (tokenizer.model).
  virtual std::string kind() const = 0;
};

class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(std::vector<std::string> pieces);  // pieces[id]
  std::vector<int> encode(std::string_view text) const override;
  std::string piece(int id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  const std::vector<std::string>& pieces() const { return pieces_; }
  std::string to_json() const;
  std::string kind() const override { return "char"; }

 private:
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int> ids_;
};

// A token's text made visible for labels: "\n" → "\\n", "\t" → "\\t", " " → "␣",
// other control characters → "?".
std::string display_piece(const std::string& piece);

// Splits UTF-8 into code points (each as its bytes). Throws on invalid UTF-8, naming the
// byte offset.
std::vector<std::string> utf8_split(std::string_view text);
// The byte length of the UTF-8 character at text[i], or 0 when the bytes there are not one
// in strict UTF-8 (overlong forms, UTF-16 surrogates, code points above U+10FFFF, stray or
// truncated sequences).
size_t utf8_valid_len(std::string_view text, size_t i);
// The byte length of the UTF-8 character at text[i]; throws like utf8_split when the bytes
// there are not one.
size_t utf8_char_len(std::string_view text, size_t i);
// Throws like utf8_split when `text` is not valid UTF-8.
void utf8_validate(std::string_view text);

// Reads DIR/tokenizer.json (a character tokenizer or a Hugging Face one), else
// DIR/tokenizer.model (SentencePiece); returns nullptr when the directory has neither.
// Errors name the file and the part that is wrong.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);
// True when `path` holds a SentencePiece model rather than JSON.
bool tokenizer_file_is_sentencepiece(const std::string& path);
// Reads one tokenizer file: a tokenizer.json (either kind) or a SentencePiece .model.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path);
// The file load_tokenizer(dir) reads ("" when there is none).
std::string tokenizer_file_in(const std::string& dir);
// An Error naming `file` when the tokenizer has ids at or past `embedding_rows` (the
// model's vocab_size): those ids would index past the embedding table.
void check_tokenizer_fits(const Tokenizer& t, int embedding_rows, const std::string& file);

}  // namespace attnviz
