// Text → token ids. A small interface so a BPE tokenizer can be added later; the built-in
// models use CharTokenizer: one token per UTF-8 code point.
//
// File format (tokenizer.json in the model directory):
//   {"type": "char", "vocab": ["\n", " ", "a", ...]}    // id = index in "vocab"
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attnviz {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws attnviz::Error naming the first character that has no token.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // The text of one token (for labels); "<id>" style text for ids it cannot show.
  virtual std::string piece(int id) const = 0;
  virtual int vocab_size() const = 0;
  std::string decode(const std::vector<int>& ids) const;
};

class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(std::vector<std::string> pieces);  // pieces[id]
  std::vector<int> encode(std::string_view text) const override;
  std::string piece(int id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  const std::vector<std::string>& pieces() const { return pieces_; }
  std::string to_json() const;

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

// Reads DIR/tokenizer.json; returns nullptr when the directory has none.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace attnviz
