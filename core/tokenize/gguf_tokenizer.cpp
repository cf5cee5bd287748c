// GGUF tokenizer metadata → the equivalent Hugging Face tokenizer.json → HfTokenizer.
#include "core/tokenize/gguf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "core/limits.h"
#include "core/tokenize/hf_tokenizer.h"

namespace attnviz {

using nlohmann::json;

namespace {

// Regexes of the byte-level pre-tokenizers, by tokenizer.ggml.pre. The patterns are those
// of each family's tokenizer.json (which llama.cpp's converter names by these strings).
const std::string kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5's: Qwen2's with combining marks (\p{M}) kept with the letters before them.
const std::string kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json split_isolated(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

struct PreSpec {
  json pre_tokenizer;
  json normalizer;  // null when none
  bool ignore_merges = false;
  bool add_bos = false;  // the family's default when tokenizer.ggml.add_bos_token is absent
};

// The pre-tokenizer (and normalizer) of a byte-level BPE family, by tokenizer.ggml.pre.
// The names and the regex each stands for are llama.cpp's (src/llama-vocab.cpp), written as
// the family's tokenizer.json writes them.
bool byte_level_family(const std::string& pre, PreSpec& out) {
  auto one_of = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (pre == n) return true;
    return false;
  };
  if (pre.empty() || one_of({"default", "gpt-2", "gpt2", "olmo", "phi-2", "jais", "mpt"})) {
    // GPT-2's regex. (For a missing or "default" name llama.cpp falls back to a regex of its
    // own; such files name no family, and GPT-2's is the byte-level BPE tokenizer.json default.)
    out.pre_tokenizer = byte_level(true);
    return true;
  }
  if (one_of({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone"})) {
    // Every digit on its own, then GPT-2's byte-level regex.
    out.pre_tokenizer = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
    return true;
  }
  if (one_of({"llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral", "lfm2"})) {
    out.pre_tokenizer = {{"type", "Sequence"},
                         {"pretokenizers", json::array({split_isolated(kLlama3), byte_level(false)})}};
    out.ignore_merges = true;  // a piece that is a token is taken whole
    out.add_bos = true;        // BOS unless add_bos_token says otherwise
    return true;
  }
  if (one_of({"dbrx", "smaug-bpe"})) {
    out.pre_tokenizer = {{"type", "Sequence"},
                         {"pretokenizers", json::array({split_isolated(kLlama3), byte_level(false)})}};
    return true;
  }
  if (one_of({"qwen2", "deepseek-r1-qwen", "qwen35"})) {
    out.pre_tokenizer = {{"type", "Sequence"},
                         {"pretokenizers", json::array({split_isolated(pre == "qwen35" ? kQwen35 : kQwen2), byte_level(false)})}};
    out.normalizer = {{"type", "NFC"}};
    return true;
  }
  return false;
}

// The vocabulary sorted, as an implicit trie: the pieces that start with a given prefix
// are one contiguous range, narrowed by one binary search per further byte. So every
// prefix of a piece that is itself a piece is found in one walk along it,
// O(length · log n), without copying a substring per boundary (a walk over the reversed
// pieces finds the suffixes the same way).
class SortedPieces {
 public:
  // `pieces`: id → piece (reversed when `reversed`), `ids`: the ids to index.
  SortedPieces(std::vector<std::string> pieces, std::vector<int> ids) : pieces_(std::move(pieces)), ids_(std::move(ids)) {
    std::sort(ids_.begin(), ids_.end(), [&](int a, int b) { return piece(a) < piece(b); });
  }
  // found[d] = the id of the piece equal to s[0, d), or -1 (d = 1 ... s.size()).
  void prefixes(const std::string& s, std::vector<int>& found) const {
    found.assign(s.size() + 1, -1);
    size_t lo = 0, hi = ids_.size();
    for (size_t d = 0; d < s.size() && lo < hi; ++d) {
      // In [lo, hi) every piece starts with s[0, d); order them by their byte d (none first).
      auto rank = [&](size_t k) { return piece(ids_[k]).size() > d ? static_cast<unsigned char>(piece(ids_[k])[d]) : -1; };
      const int c = static_cast<unsigned char>(s[d]);
      lo = first_at_least(lo, hi, rank, c);
      hi = first_at_least(lo, hi, rank, c + 1);
      if (lo < hi && piece(ids_[lo]).size() == d + 1) found[d + 1] = ids_[lo];
    }
  }

 private:
  const std::string& piece(int id) const { return pieces_[static_cast<size_t>(id)]; }
  template <class Rank>
  static size_t first_at_least(size_t lo, size_t hi, const Rank& rank, int c) {
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (rank(mid) < c) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  std::vector<std::string> pieces_;
  std::vector<int> ids_;
};

// SentencePiece BPE merges from the scores, as Hugging Face's SentencePiece converter makes
// them: every split of a piece into two pieces of the vocabulary is a merge; merges are
// ordered by the merged piece's score (highest first, ties by id), and one piece's splits by
// the ids of their left and right parts. The merges are refused when they would be more
// than a tokenizer.json attnviz reads could hold (kMaxJsonBytes of piece text).
json merges_from_scores(const GgufTokenizerData& t, const std::unordered_map<std::string, int>& id_of,
                        const std::string& where) {
  const size_t n = t.tokens.size();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (!t.scores.empty())
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return t.scores[static_cast<size_t>(a)] > t.scores[static_cast<size_t>(b)]; });
  std::vector<int> first_ids;
  first_ids.reserve(id_of.size());
  for (const auto& [piece, id] : id_of) first_ids.push_back(id);
  std::vector<std::string> reversed(t.tokens.size());
  for (int id : first_ids) reversed[static_cast<size_t>(id)].assign(t.tokens[static_cast<size_t>(id)].rbegin(), t.tokens[static_cast<size_t>(id)].rend());
  const SortedPieces forward(t.tokens, first_ids), backward(std::move(reversed), first_ids);
  json merges = json::array();
  std::vector<std::pair<int, int>> splits;
  std::vector<int> left, right;
  std::string rev;
  int64_t bytes = 0;
  for (int id : order) {
    if (!t.token_type.empty() &&
        (t.token_type[static_cast<size_t>(id)] == kGgufByte || t.token_type[static_cast<size_t>(id)] == kGgufUnused))
      continue;
    const std::string& piece = t.tokens[static_cast<size_t>(id)];
    forward.prefixes(piece, left);  // left[a]: the piece piece[0, a)
    rev.assign(piece.rbegin(), piece.rend());
    backward.prefixes(rev, right);  // right[b]: the piece piece[size - b, size)
    splits.clear();
    for (size_t at = 1; at < piece.size(); ++at) {
      if ((static_cast<unsigned char>(piece[at]) & 0xC0) == 0x80) continue;  // not a character boundary
      if (left[at] >= 0 && right[piece.size() - at] >= 0) splits.emplace_back(left[at], right[piece.size() - at]);
    }
    std::sort(splits.begin(), splits.end());
    bytes += static_cast<int64_t>(splits.size() * piece.size());
    if (bytes > kMaxJsonBytes || merges.size() + splits.size() > static_cast<size_t>(kMaxDim))
      throw Error(where + "tokens: the merges derived from the scores exceed what attnviz reads (" +
                  std::to_string(kMaxDim) + " merges, " + format_bytes(static_cast<double>(kMaxJsonBytes)) +
                  " of text)\n  HINT: the vocabulary is damaged or hostile (pieces made of many smaller pieces).");
    for (auto [l, r] : splits)
      merges.push_back(json::array({t.tokens[static_cast<size_t>(l)], t.tokens[static_cast<size_t>(r)]}));
  }
  return merges;
}

// TemplateProcessing with BOS and/or EOS around the sequence; null when neither is added.
json bos_eos_template(const GgufTokenizerData& t, bool bos, bool eos) {
  bos = bos && t.bos_id >= 0;
  eos = eos && t.eos_id >= 0;
  if (!bos && !eos) return nullptr;
  json single = json::array(), special = json::object();
  auto add_special = [&](int64_t id) {
    const std::string& s = t.tokens[static_cast<size_t>(id)];
    single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
    special[s] = {{"id", s}, {"ids", {id}}, {"tokens", {s}}};
  };
  if (bos) add_special(t.bos_id);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos) add_special(t.eos_id);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", special}};
}

}  // namespace

std::vector<std::string> gguf_pre_tokenizer_names() {
  return {"default",         "gpt-2",     "gpt2",    "olmo",      "phi-2",     "jais",      "mpt",
          "smollm",          "starcoder", "refact",  "command-r", "codeshell", "exaone",    "llama3",
          "llama-bpe",       "llama-v3",  "falcon3", "pixtral",   "dbrx",      "smaug-bpe", "qwen2",
          "deepseek-r1-qwen", "qwen35",   "lfm2"};
}

std::string gguf_tokenizer_unsupported(const GgufTokenizerData& t) {
  PreSpec spec;
  if (t.model != "gpt2" && t.model != "llama" && t.model != "gemma4")
    return "tokenizer.ggml.model '" + excerpt(t.model, 40) +
           "' is a tokenizer kind attnviz does not read (it reads gpt2, byte-level BPE; llama, SentencePiece; and "
           "gemma4)";
  if (t.model == "gpt2" && !byte_level_family(t.pre, spec)) {
    std::string known;
    for (const std::string& n : gguf_pre_tokenizer_names()) known += (known.empty() ? "" : ", ") + n;
    return "tokenizer.ggml.pre '" + excerpt(t.pre, 40) + "' names a pre-tokenizer attnviz does not know (it knows " +
           known + ")";
  }
  return "";
}

json gguf_tokenizer_json(const GgufTokenizerData& t, const std::string& name) {
  if (const std::string why = gguf_tokenizer_unsupported(t); !why.empty())
    throw Error(name + ": " + why + "\n  HINT: pass token ids with --tokens 1,2,3.");
  const std::string where = name + ": tokenizer.ggml.";
  // Gemma 4's ("gemma4", as llama.cpp runs it): SentencePiece-like pieces (spaces as ▁, no
  // prefix space, <0xXX> byte fallback) merged by the file's merges, the text split first
  // into runs of newlines and runs of the rest.
  const bool gemma4 = t.model == "gemma4";
  const bool spm = t.model == "llama" || gemma4;
  PreSpec spec;
  if (!spm) byte_level_family(t.pre, spec);
  if ((!spm || gemma4) && t.merges.empty() && t.tokens.size() > 256)
    throw Error(where + "merges is missing or empty, but a BPE tokenizer of this kind needs its merges");

  // Vocabulary: the first id of each piece (some files repeat a piece; later copies stay holes).
  std::unordered_map<std::string, int> id_of;
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    const int id = static_cast<int>(i);
    const int32_t type = t.token_type.empty() ? kGgufNormal : t.token_type[i];
    if (!id_of.emplace(t.tokens[i], id).second) continue;
    vocab[t.tokens[i]] = id;
    if (type == kGgufControl || type == kGgufUnknown || type == kGgufUser)
      added.push_back({{"id", id},
                       {"content", t.tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type != kGgufUser}});
  }
  json model = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"dropout", nullptr}};
  json j = {{"version", "1.0"}, {"added_tokens", std::move(added)}};
  if (spm) {
    model["merges"] = gemma4 ? json(t.merges) : merges_from_scores(t, id_of, where);
    model["byte_fallback"] = true;
    model["fuse_unk"] = true;
    if (t.unk_id >= 0) model["unk_token"] = t.tokens[static_cast<size_t>(t.unk_id)];
    const bool prefix = !gemma4 && t.add_space_prefix != 0;  // llama.cpp's default: a space prefix (not Gemma 4's)
    json norm = json::array();
    if (prefix) norm.push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    j["pre_tokenizer"] = gemma4 ? json{{"type", "Split"},
                                       {"pattern", {{"Regex", "[^\n]+|[\n]+"}}},
                                       {"behavior", "Isolated"},
                                       {"invert", false}}
                                : json(nullptr);
    json dec = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                            {{"type", "ByteFallback"}},
                            {{"type", "Fuse"}}});
    if (prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
    j["post_processor"] = bos_eos_template(t, t.add_bos != 0, t.add_eos == 1);
  } else {
    model["merges"] = t.merges;
    model["ignore_merges"] = spec.ignore_merges;
    j["normalizer"] = spec.normalizer;
    j["pre_tokenizer"] = spec.pre_tokenizer;
    j["decoder"] = byte_level(true);
    json post = bos_eos_template(t, t.add_bos == 1 || (t.add_bos == -1 && spec.add_bos), t.add_eos == 1);
    j["post_processor"] = post.is_null() ? byte_level(true) : post;
  }
  j["model"] = std::move(model);
  return j;
}

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufTokenizerData& t, const std::string& name) {
  return std::make_unique<HfTokenizer>(gguf_tokenizer_json(t, name), name);
}

}  // namespace attnviz
