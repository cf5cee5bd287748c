#include "core/tokenize/tokenizer.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string s;
  for (int id : ids) s += piece(id);
  return s;
}

std::string display_piece(const std::string& piece) {
  std::string out;
  for (char ch : piece) {
    if (ch == '\n') out += "\\n";
    else if (ch == '\t') out += "\\t";
    else if (ch == ' ') out += "\u2423";
    else if (static_cast<unsigned char>(ch) < 0x20) out += "?";
    else out += ch;
  }
  return out;
}

namespace {
// What is wrong with the bytes at text[i] (not valid UTF-8), for the message.
std::string utf8_problem(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
  if (c >= 0x80 && c <= 0xBF) return "a continuation byte where a character should begin";
  if (c == 0xC0 || c == 0xC1 || (c == 0xE0 && next < 0xA0) || (c == 0xF0 && next < 0x90 && next >= 0x80))
    return "an overlong encoding";
  if (c == 0xED && next >= 0xA0) return "a UTF-16 surrogate";
  if (c >= 0xF5 || (c == 0xF4 && next >= 0x90)) return "a code point above U+10FFFF";
  return "a truncated or broken sequence";
}
}  // namespace

size_t utf8_valid_len(std::string_view text, size_t i) {
  // Strict UTF-8 (RFC 3629, the Unicode standard's table 3-7): the second byte's range
  // depends on the lead byte, which refuses overlong forms (C0, C1, E0 80-9F, F0 80-8F),
  // UTF-16 surrogates (ED A0-BF) and code points above U+10FFFF (F4 90-BF, F5-FF).
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  if (len == 0 || i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if (k == 1 ? b < lo || b > hi : (b >> 6) != 0x2) return 0;
  }
  return len;
}

size_t utf8_char_len(std::string_view text, size_t i) {
  const size_t len = utf8_valid_len(text, i);
  if (len == 0)
    throw Error("the text is not valid UTF-8 at byte " + std::to_string(i) + " (" + utf8_problem(text, i) + ")" +
                "\n  HINT: save the text as UTF-8.");
  return len;
}

void utf8_validate(std::string_view text) {
  for (size_t i = 0; i < text.size();) i += utf8_char_len(text, i);
}

std::vector<std::string> utf8_split(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = utf8_char_len(text, i);
    out.emplace_back(text.substr(i, len));
    i += len;
  }
  return out;
}

namespace {

// "U+4E2D" for a UTF-8 encoded code point.
std::string codepoint_name(const std::string& ch) {
  uint32_t cp = 0;
  const auto c0 = static_cast<unsigned char>(ch[0]);
  if (ch.size() == 1) cp = c0;
  else cp = c0 & (0xff >> (ch.size() + 1));
  for (size_t k = 1; k < ch.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(ch[k]) & 0x3f);
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

std::string printable(const std::string& ch) {
  if (ch == "\n") return "\\n";
  if (ch == "\t") return "\\t";
  if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 0x20) return "?";
  return ch;
}

}  // namespace

CharTokenizer::CharTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
  for (size_t i = 0; i < pieces_.size(); ++i) ids_.emplace(pieces_[i], static_cast<int>(i));
}

std::vector<int> CharTokenizer::encode(std::string_view text) const {
  utf8_validate(text);  // the whole text first: invalid UTF-8 is named before any unknown character
  std::vector<int> ids;
  std::string ch;  // one character at a time (no vector of every character: 4 bytes per id, not 40)
  for (size_t at = 0, i = 0; at < text.size(); ++i) {
    ch.assign(text.substr(at, utf8_char_len(text, at)));
    at += ch.size();
    auto it = ids_.find(ch);
    if (it == ids_.end())
      throw Error("character '" + printable(ch) + "' (" + codepoint_name(ch) + ") at position " +
                  std::to_string(i) + " is not in the model's vocabulary of " + std::to_string(pieces_.size()) +
                  " characters\n  HINT: remove or replace it, or pass token ids with --tokens.");
    ids.push_back(it->second);
  }
  return ids;
}

std::string CharTokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) return "<" + std::to_string(id) + ">";
  return pieces_[id];
}

std::string CharTokenizer::to_json() const {
  nlohmann::json j;
  j["type"] = "char";
  j["vocab"] = pieces_;
  return j.dump(1);
}

std::string tokenizer_file_in(const std::string& dir) {
  for (const char* name : {"/tokenizer.json", "/tokenizer.model"}) {
    struct stat st {};  // exists (whatever it is: the reader refuses what is not a regular file)
    if (stat((dir + name).c_str(), &st) == 0) return dir + name;
  }
  return "";
}

void check_tokenizer_fits(const Tokenizer& t, int embedding_rows, const std::string& file) {
  if (t.vocab_size() > embedding_rows)
    throw Error(file + " has ids up to " + std::to_string(t.vocab_size() - 1) + " but config.json says vocab_size " +
                std::to_string(embedding_rows) + " (the embedding table has rows 0 … " + std::to_string(embedding_rows - 1) +
                ")\n  HINT: the tokenizer belongs to another model; use the tokenizer that came with this checkpoint.");
}

}  // namespace attnviz
