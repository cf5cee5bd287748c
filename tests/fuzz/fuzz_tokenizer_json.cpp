// A tokenizer.json as Hugging Face's `tokenizers` writes it: parsed, built (every model,
// normalizer, pre-tokenizer, post-processor and decoder attnviz reads), then run on a few
// texts, incrementally too, and the ids decoded and labelled. Read through the one JSON
// reader, as the loader reads it (core/json_reader.h).
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(tokenizer_json) {
  nlohmann::json j;
  try {
    j = attnviz::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  } catch (const attnviz::Error&) {
    return;  // not JSON, a NUL byte, too deep: the loader reports these
  }
  try {
    const attnviz::HfTokenizer tok(j, "tokenizer.json");
    attnviz::EncodeCache cache;
    for (const char* text : {"Hello world, 123!", "Hello world, 1234!!", "a  b\n\tc \xE4\xB8\x96\xE7\x95\x8C", ""}) {
      const std::vector<int> ids = tok.encode(text);
      if (tok.encode_incremental(text, true, cache) != ids) __builtin_trap();  // incremental must equal whole
      (void)tok.decode(ids);
      (void)attnviz::token_labels(tok, ids);
    }
  } catch (const attnviz::Error&) {
  }
}
