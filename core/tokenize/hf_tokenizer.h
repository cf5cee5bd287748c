// Hugging Face `tokenizer.json` (the `tokenizers` library's format), read and run in C++.
//
// Contract: HfTokenizer::encode_with(text, add_special) gives the ids that Hugging Face's
// `Tokenizer.encode(text, add_special_tokens=add_special)` gives for the same file.
//
// The pipeline, as Hugging Face runs it:
//   text ──split on added tokens (not normalized ones, on the raw text)──▶ sections
//        ──normalize each section──▶ split on the normalized added tokens
//        ──pre-tokenize each remaining section──▶ pre-tokens (strings)
//        ──model (BPE) per pre-token──▶ ids ──post-process (BOS/EOS)──▶ ids
//   ids ──decoders──▶ text
//
// Supported parts (anything else is an Error naming the file, the part and the type):
//   model:          BPE (merges "a b" or ["a","b"]; byte_fallback, unk_token, fuse_unk,
//                   ignore_merges, continuing_subword_prefix, end_of_word_suffix)
//   normalizer:     NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Prepend, Replace, Sequence
//   pre_tokenizer:  ByteLevel, Split (Regex / String; every behavior; invert), Digits,
//                   Metaspace, Sequence
//   post_processor: TemplateProcessing, ByteLevel, Sequence
//   decoder:        ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence
// Regexes are PCRE2 (UTF, Unicode properties, JIT); Hugging Face uses Oniguruma, whose
// syntax for the patterns these files use (\p{L}, \p{N}, \s, (?!\S), (?i:...)) is the same.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenize/tokenizer.h"

namespace attnviz {
namespace hf {

// Length of the UTF-8 sequence that starts with byte c (1 for stray bytes).
inline size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1; }

// Byte ranges [begin, end) into a string.
struct Span {
  size_t begin, end;
};

// A compiled regex (PCRE2, UTF-8 with Unicode properties). Throws Error naming `where`
// when the pattern does not compile. Safe to use from several threads at once.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every non-overlapping match in `s`, left to right; an empty match moves the search on
  // by one character. `s` is checked to be strict UTF-8 first (PCRE2 is run without its
  // own check, which would be undefined behaviour on invalid input); errors name `where`.
  std::vector<Span> find_all(std::string_view s) const;

 private:
  void* code_;  // pcre2_code_8*
  std::string where_;
};

// A Split/Replace "pattern": {"String": s} (literal) or {"Regex": r}.
struct Pattern {
  std::string literal;           // when re is null
  std::shared_ptr<Regex> re;
  std::vector<Span> find_all(std::string_view s) const;
};

// Every match of `p` in `s` replaced by `with`; a result larger than kMaxNormalizedBytes is
// refused (an Error starting with `where`) before it is built. Normalizers and decoders.
std::string replace_all(const Pattern& p, const std::string& s, const std::string& with, const std::string& where);

// --- normalizers (normalize.cpp) -----------------------------------------------------
struct Normalizer {
  enum Kind { NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace } kind;
  std::string text;     // Prepend: what is prepended; Replace: the replacement
  Pattern pattern;      // Replace
  std::string where;    // "FILE: normalizer..." for errors
};
// Applies the steps in order (a Sequence is flattened into `steps` when read). A step that
// would make the text larger than kMaxNormalizedBytes is refused (an Error naming it)
// before the larger text is built.
std::string normalize(const std::vector<Normalizer>& steps, std::string s);

// --- pre-tokenizers (pre_tokenize.cpp) -------------------------------------------------
// How the pieces around a match are cut (Hugging Face's SplitDelimiterBehavior).
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreTokenizer {
  enum Kind { ByteLevel, Split, Digits, Metaspace } kind;
  // ByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
  // Split (ByteLevel with use_regex uses GPT-2's pattern here)
  Pattern pattern;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  // Digits
  bool individual_digits = false;
  // Metaspace
  std::string replacement = "\xE2\x96\x81";  // ▁
  enum Prepend { Always, Never, First } prepend_scheme = Always;
  bool split = true;
};

// One pre-token: its text and whether it begins at offset 0 of the original text (what
// Metaspace's prepend_scheme "first" looks at).
struct PreToken {
  std::string text;
  bool at_start = false;
};
// Runs the steps in order over `pieces` (each step over every piece); empty pieces drop.
void pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<PreToken>& pieces);

// Incremental re-tokenization rests on these two. A first step "cuts independently" when
// it cuts a string into pieces by a regex whose matches and gaps become the pieces
// (ByteLevel with use_regex; Split, Isolated, not inverted): then cutting s from a piece
// boundary b gives the same pieces after b as cutting all of s, as long as the regex looks
// at most one piece past a match (true of GPT-2's, Llama 3's and Qwen's patterns: no
// look-behind, look-ahead of one character).
bool cuts_independently(const PreTokenizer& st);
// The pieces such a step cuts s[from, end) into, as spans of s (ByteLevel: before the
// byte mapping, which the caller applies per piece).
std::vector<Span> first_cut(const PreTokenizer& st, std::string_view s, size_t from);

// GPT-2's byte ↔ character table: byte b is shown as code point byte_to_cp(b).
uint32_t byte_to_cp(unsigned char b);
// Code point → byte, or -1 when the code point is not in the table.
int cp_to_byte(uint32_t cp);
// Every byte of s as its table character (UTF-8).
std::string bytes_to_unicode(std::string_view s);

// --- BPE model (bpe.cpp) ---------------------------------------------------------------
struct Bpe {
  std::unordered_map<std::string, int> vocab;  // token → id
  // (left id, right id) → (rank, merged id); rank = index in "merges".
  std::unordered_map<uint64_t, std::pair<int, int>> merges;
  int unk_id = -1;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
  int byte_ids[256];  // id of "<0xNN>" (byte fallback), -1 when absent
};
// Appends the ids of one pre-token to `out`.
void bpe_encode(const Bpe& m, std::string_view word, std::vector<int>& out);

// --- post-processors and decoders (hf_tokenizer.cpp) -------------------------------------
struct TemplatePiece {
  bool special;  // a special token's ids, else the sequence itself ("A")
  std::vector<int> ids;
};

struct Decoder {
  enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  Pattern pattern;            // Replace
  std::string text;           // Replace: replacement; Strip: content; Metaspace: replacement
  int start = 0, stop = 0;    // Strip
  bool prepend = true;        // Metaspace: drop the leading space of the first token
  std::string where;          // "FILE: decoder..." for errors
};

// An added token ("added_tokens"): matched in the text before the model runs.
struct AddedToken {
  std::string content;
  int id = 0;
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

}  // namespace hf

struct HfAddedIndex;

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;
  // Reads a parsed tokenizer.json; `name` (the file path) starts every error message.
  HfTokenizer(const nlohmann::json& j, const std::string& name);

  std::vector<int> encode(std::string_view text) const override { return encode_with(text, true); }
  std::vector<int> encode_with(std::string_view text, bool add_special) const override;
  // Incremental when the first pre-tokenizer cuts independently (hf::cuts_independently):
  // GPT-2, Llama 3, Qwen and other byte-level BPE files. The text up to the first changed
  // byte keeps its ids, except the last two pieces before it, which are cut again; an edit
  // before the last added token, or one that makes or breaks an added token, runs in full.
  std::vector<int> encode_incremental(std::string_view text, bool add_special, EncodeCache& cache) const override;
  bool supports_incremental() const override;
  std::string piece(int id) const override;
  std::string token_bytes(int id) const override;
  bool is_special(int id) const override;
  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  std::string decode(const std::vector<int>& ids) const override;
  std::string kind() const override { return "bpe"; }
  // The vocabulary entry of `id` as written in the file ("Ġthe", "▁the", "<0x0A>").
  const std::string& raw_token(int id) const;


 private:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens, bool for_label) const;
  // The whole pipeline without post-processing; fills `cache` (when given) for the next
  // incremental call.
  std::vector<int> encode_full(std::string_view text, EncodeCache* cache) const;
  // Cuts x[from, end) with the first pre-tokenizer, runs the others and BPE per piece,
  // appending ids (and, when given, each piece's begin in x and first id index).
  void encode_tail(const std::string& x, size_t from, bool at_start, std::vector<int>& ids,
                   std::vector<size_t>* piece_begin, std::vector<size_t>* piece_ids) const;
  // The section as the first pre-tokenizer sees it (ByteLevel's prefix space added).
  std::string first_step_input(std::string normalized) const;
  std::vector<int> add_special_tokens(std::vector<int> ids) const;
  std::string compute_token_bytes(int id) const;

  std::string name_;
  hf::Bpe bpe_;
  std::vector<std::string> id_to_token_;  // id → token text as in the file ("" for holes)
  std::vector<char> special_;             // id → is a special added token
  std::vector<std::string> bytes_;        // id → token_bytes(id)
  std::vector<hf::AddedToken> added_;
  std::vector<hf::Normalizer> normalizers_;
  std::vector<hf::PreTokenizer> pre_tokenizers_;
  std::vector<std::vector<hf::TemplatePiece>> templates_;  // applied in order when adding special tokens
  std::shared_ptr<HfAddedIndex> index_;                      // matchers over added_
  std::vector<hf::Decoder> decoders_;
};

// SentencePiece `tokenizer.model` (protobuf) through libsentencepiece; adds BOS as
// Hugging Face's Llama tokenizer does (add_bos_token = true).
class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;
  std::vector<int> encode(std::string_view text) const override { return encode_with(text, true); }
  std::vector<int> encode_with(std::string_view text, bool add_special) const override;
  std::string piece(int id) const override;
  std::string token_bytes(int id) const override;
  bool is_special(int id) const override;
  int vocab_size() const override;
  std::string decode(const std::vector<int>& ids) const override;
  std::string kind() const override { return "sentencepiece"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnviz
