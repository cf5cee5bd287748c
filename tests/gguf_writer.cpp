#include "tests/gguf_writer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/tokenize/hf_tokenizer.h"

namespace attnviz::test {

GgufTokenizerData small_byte_level_tokenizer(int vocab) {
  GgufTokenizerData t;
  t.model = "gpt2";
  t.pre = "default";
  // Ids 0-255: the byte characters of GPT-2's table (byte b at id b); then merges making
  // "Ġt", "he", "Ġthe", "Ġa"; placeholders "<id>"; the last id is <|endoftext|> (control).
  for (int b = 0; b < 256; ++b) t.tokens.push_back(hf::bytes_to_unicode(std::string(1, static_cast<char>(b))));
  const std::vector<std::string> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "\xC4\xA0 a"};
  for (const std::string& m : merges) {
    t.merges.push_back(m);
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    t.tokens.push_back(merged);
  }
  while (static_cast<int>(t.tokens.size()) < vocab - 1) t.tokens.push_back("<" + std::to_string(t.tokens.size()) + ">");
  t.tokens.push_back("<|endoftext|>");
  t.token_type.assign(t.tokens.size(), kGgufNormal);
  t.token_type.back() = kGgufControl;
  for (size_t i = 0; i < t.tokens.size(); ++i) t.scores.push_back(-static_cast<float>(i));
  t.bos_id = t.eos_id = static_cast<int64_t>(t.tokens.size()) - 1;
  t.add_bos = 0;
  return t;
}

std::string write_gguf_model_pair(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& dir,
                                  bool with_hf, bool with_tokenizer, const GgufTokenizerData* tokenizer,
                                  bool split_gate_up) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  GgufTokenizerData small;
  if (!tokenizer && with_tokenizer) {
    small = small_byte_level_tokenizer(c.vocab_size);
    tokenizer = &small;
  }
  const std::string path = dir + "/model.gguf";
  write_gguf_model(c, type, seed, path, tokenizer, with_hf ? dir + "/hf" : "", split_gate_up);
  // The same tokenizer as the Hugging Face tokenizer.json it stands for.
  if (with_hf && tokenizer) std::ofstream(dir + "/hf/tokenizer.json") << gguf_tokenizer_json(*tokenizer, "test").dump() << "\n";
  return path;
}

}  // namespace attnviz::test
