// load_tokenizer and load_tokenizer_file (declared in tokenizer.h): a tokenizer.json
// (character-level or Hugging Face's) or a SentencePiece tokenizer.model. Apart from
// tokenizer.cpp, so that the tokenizer module does not include the kinds built on it.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  const std::string path = tokenizer_file_in(dir);
  if (path.empty()) return nullptr;
  return load_tokenizer_file(path);
}

bool tokenizer_file_is_sentencepiece(const std::string& path) {
  // A .model file that does not start like JSON: SentencePiece's protobuf.
  if (path.size() < 6 || path.compare(path.size() - 6, 6, ".model") != 0) return false;
  const std::string text = read_regular_file(path, kMaxJsonBytes, "tokenizer file");
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first == std::string::npos || text[first] != '{';
}

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  // Non-blocking, bounded, regular files only; for JSON no NUL (the parser would stop
  // there and accept the rest).
  const bool spm = tokenizer_file_is_sentencepiece(path);
  const std::string text = read_regular_file(path, kMaxJsonBytes, "tokenizer file", /*allow_nul=*/spm);
  if (spm) return std::make_unique<SentencePieceTokenizer>(path);
  const nlohmann::json j =
      parse_json(text, excerpt(path, kPathExcerptBytes),
                 "\n  HINT: a tokenizer.json is a JSON object; a SentencePiece model is named tokenizer.model.");
  // (A "type" that is not a string is not a char tokenizer; HfTokenizer names what is wrong.)
  if (j.is_object() && j.contains("type") && j["type"].is_string() && j["type"] == "char" && j.contains("vocab") &&
      j["vocab"].is_array()) {
    std::vector<std::string> pieces;
    for (const auto& p : j["vocab"]) {
      if (!p.is_string()) throw Error(path + ": every vocab entry must be a string, found " + json_excerpt(p));
      pieces.push_back(p.get<std::string>());
    }
    return std::make_unique<CharTokenizer>(std::move(pieces));
  }
  return std::make_unique<HfTokenizer>(j, path);
}

}  // namespace attnviz
