// Text → tokens: the bytes as typed text through the built-in models' character
// tokenizers (poems-zh, fortunes-en), and as a --tokens list.
#include <memory>
#include <string_view>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/model/paths.h"
#include "core/tokenize/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
const std::vector<std::unique_ptr<attnviz::Tokenizer>>& tokenizers() {
  static const auto t = [] {
    std::vector<std::unique_ptr<attnviz::Tokenizer>> out;
    for (const char* name : {"builtin:poems-zh", "builtin:fortunes-en"}) {
      try {
        if (auto tok = attnviz::load_tokenizer(attnviz::resolve_model_dir(name))) out.push_back(std::move(tok));
      } catch (const attnviz::Error&) {
      }
    }
    std::vector<std::string> ascii;
    for (char c = ' '; c <= '~'; ++c) ascii.emplace_back(1, c);
    out.push_back(std::make_unique<attnviz::CharTokenizer>(ascii));
    return out;
  }();
  return t;
}
}  // namespace

ATTNVIZ_FUZZ_TARGET(text_tokens) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)attnviz::excerpt(text);
  try {
    (void)attnviz::utf8_split(text);
  } catch (const attnviz::Error&) {
  }
  for (const auto& tok : tokenizers()) {
    try {
      const std::vector<int> ids = tok->encode(text);
      if (tok->decode(ids) != text) __builtin_trap();  // a character tokenizer round-trips
      for (int id : ids) (void)attnviz::display_piece(tok->piece(id));
    } catch (const attnviz::Error&) {
    }
  }
  try {
    (void)attnviz::parse_token_list(text);
  } catch (const attnviz::Error&) {
  }
}
