// A SentencePiece tokenizer.model (protobuf): loaded as attnviz loads a model's tokenizer
// file, then run on a few texts (valid and not UTF-8) and the ids decoded and labelled.
#include "core/error.h"
#include "core/tokenize/labels.h"
#include "core/tokenize/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(tokenizer_model) {
  const std::string path = attnviz::fuzz::write_scratch_file("tokenizer.model", data, size);
  if (path.empty()) return;
  try {
    const auto tok = attnviz::load_tokenizer_file(path);
    for (const char* text : {"Hello world, 123!", "a  b\n\tc \xE4\xB8\x96\xE7\x95\x8C", "", "bad \xED\xA0\x80"}) {
      try {
        const std::vector<int> ids = tok->encode(text);
        (void)tok->decode(ids);
        (void)attnviz::token_labels(*tok, ids);
      } catch (const attnviz::Error&) {
      }
    }
    for (int id : {-1, 0, 1, tok->vocab_size() - 1, tok->vocab_size()}) (void)tok->piece(id);
  } catch (const attnviz::Error&) {
  }
}
