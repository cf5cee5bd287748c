// Tokenizer throughput and the per-keystroke cost of re-tokenizing.
//
//   attnviz_bench_tokenizer                                  everything
//   attnviz_bench_tokenizer --benchmark_filter=Throughput    1 MB of English and of Chinese (MB/s)
//   attnviz_bench_tokenizer --benchmark_filter=Keystroke     one key typed at the end of a 4000-token text
//
// The texts are generated (deterministic) so the bench needs no corpus: English from a
// list of common words with punctuation and line breaks, Chinese from the characters of
// the built-in poems-zh vocabulary with Chinese punctuation. ATTNVIZ_BENCH_TEXT_DIR=DIR
// writes them to DIR/english.txt and DIR/chinese.txt, so another tokenizer (Hugging Face's,
// bench/hf_tokenizer_bench.js) can be timed on the same bytes.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"

namespace attnviz {
namespace {

const std::string kSource = ATTNVIZ_SOURCE_DIR;

const HfTokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<HfTokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const std::string path = kSource + "/tests/data/tokenizers/" + name + ".tokenizer.json";
    std::ifstream in(path);
    slot = std::make_unique<HfTokenizer>(nlohmann::json::parse(in), path);
  }
  return *slot;
}

void maybe_write(const std::string& name, const std::string& text) {
  if (const char* dir = std::getenv("ATTNVIZ_BENCH_TEXT_DIR")) std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << text;
}

const std::string& english(size_t bytes) {
  static std::map<size_t, std::string> texts;
  std::string& t = texts[bytes];
  if (!t.empty()) return t;
  static const char* words[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
      "he", "I", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
      "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who",
      "so", "no", "attention", "model", "token", "window", "matrix", "weights", "query", "key", "value", "softmax",
      "layer", "head", "transformer", "sequence", "position", "learning", "however", "because", "between", "through",
      "another", "different", "important", "example", "question", "government", "children", "something", "nothing",
      "everything", "although", "especially", "understanding", "information", "development", "environment", "don't",
      "it's", "we're", "they've", "1984", "2024", "3.14", "42", "100,000"};
  std::mt19937 rng(7);
  const size_t n = sizeof words / sizeof words[0];
  bool cap = true;
  while (t.size() < bytes) {
    std::string w = words[rng() % n];
    if (cap && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
    t += w;
    cap = false;
    const unsigned r = rng() % 100;
    if (r < 6) t += ", ";
    else if (r < 11) t += ". ", cap = true;
    else if (r < 12) t += ".\n\n", cap = true;
    else t += " ";
  }
  t.resize(bytes);
  while (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0x80) t.pop_back();
  return t;
}

const std::string& chinese(size_t bytes) {
  static std::map<size_t, std::string> texts;
  std::string& t = texts[bytes];
  if (!t.empty()) return t;
  std::ifstream in(kSource + "/assets/models/poems-zh/tokenizer.json");
  const nlohmann::json vocab = nlohmann::json::parse(in).at("vocab");
  std::vector<std::string> chars;
  for (const auto& p : vocab)
    if (p.get<std::string>().size() == 3) chars.push_back(p.get<std::string>());  // CJK characters
  std::mt19937 rng(11);
  int since = 0;
  while (t.size() < bytes) {
    t += chars[rng() % chars.size()];
    if (++since == 7) {
      t += (rng() % 2) ? "，" : "。";
      since = 0;
    }
    if (rng() % 200 == 0) t += "\n";
  }
  while (t.size() > bytes) t.resize(t.size() - 3);
  return t;
}

// Bytes per second over 1 MB.
void Throughput(benchmark::State& state, const std::string& tok_name, bool zh) {
  const HfTokenizer& tok = tokenizer(tok_name);
  const std::string& text = zh ? chinese(1 << 20) : english(1 << 20);
  maybe_write(zh ? "chinese.txt" : "english.txt", text);
  size_t n = 0;
  for (auto _ : state) {
    const std::vector<int> ids = tok.encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

// One key typed at the end of a 4000-token text: the whole text again (full) or through
// EncodeCache (incremental), as the GUI does on every keystroke.
void Keystroke(benchmark::State& state, const std::string& tok_name, bool incremental) {
  const HfTokenizer& tok = tokenizer(tok_name);
  std::string base = english(64 << 10);
  size_t cut = base.size() * 4000 / tok.encode(base).size() + 256;
  while (tok.encode(base.substr(0, cut)).size() > 4000) cut -= 64;
  base.resize(cut);
  EncodeCache cache;
  tok.encode_incremental(base, true, cache);
  const char keys[] = "word ";
  size_t k = 0;
  std::string text = base;
  for (auto _ : state) {
    text += keys[k++ % 5];
    if (text.size() > base.size() + 400) text = base;  // stays near 4000 tokens
    const std::vector<int> out = incremental ? tok.encode_incremental(text, true, cache) : tok.encode(text);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens"] = static_cast<double>(tok.encode(base).size());
}

// Readable labels of a 4000-token text (the GUI computes them once per result).
void Labels(benchmark::State& state) {
  const HfTokenizer& tok = tokenizer("gpt2");
  std::string text = english(32 << 10);
  std::vector<int> ids = tok.encode(text);
  ids.resize(std::min<size_t>(ids.size(), 4000));
  for (auto _ : state) benchmark::DoNotOptimize(token_labels(tok, ids).data());
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(Labels)->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(Throughput, gpt2_english, std::string("gpt2"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Throughput, gpt2_chinese, std::string("gpt2"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Throughput, spm32k_english, std::string("spm32k"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Throughput, spm32k_chinese, std::string("spm32k"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Throughput, qwen3_12k_english, std::string("qwen3-12k"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Throughput, qwen3_12k_chinese, std::string("qwen3-12k"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Keystroke, gpt2_full, std::string("gpt2"), false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Keystroke, gpt2_incremental, std::string("gpt2"), true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Keystroke, spm32k_full, std::string("spm32k"), false)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace attnviz

BENCHMARK_MAIN();
