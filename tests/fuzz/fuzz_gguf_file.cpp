// A whole GGUF file: opened like a model file (header, metadata, tensor infos, data ranges),
// its tokenizer metadata turned into a tokenizer and run on a few texts, and the model loaded
// (every tensor dequantized). A 64 kB input must never make attnviz allocate gigabytes: the
// reader checks every count and size against the file first.
#include <cstdio>

#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(gguf_file) {
  const std::string path = attnviz::fuzz::write_scratch_file("input.gguf", data, size);
  if (path.empty()) return;
  try {
    const attnviz::GgufFile g = attnviz::GgufFile::open(path);
    if (const auto t = attnviz::read_gguf_tokenizer(g); t && attnviz::gguf_tokenizer_unsupported(*t).empty()) {
      const auto tok = attnviz::make_gguf_tokenizer(*t, "fuzz");
      for (const char* text : {"Hello world, 123!", "a  b\n\tc", "\xE4\xB8\x96\xE7\x95\x8C <|endoftext|>"}) {
        const std::vector<int> ids = tok->encode(text);
        (void)tok->decode(ids);
      }
    }
  } catch (const attnviz::Error&) {
  }
  try {
    (void)attnviz::load_model(path);
  } catch (const attnviz::Error&) {
  }
}
