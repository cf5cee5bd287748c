// Pre-tokenizers: cut normalized text into the pieces the model sees one at a time.
// Also the regex wrapper (PCRE2) and GPT-2's byte ↔ character table.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>

#include "core/error.h"
#include "core/limits.h"
#include "core/tokenize/hf_tokenizer.h"

namespace attnviz::hf {
namespace {

// A JIT stack per thread, larger than PCRE2's 32 KiB default, so long runs of spaces or
// letters do not exhaust it.
struct JitStack {
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  JitStack() {
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~JitStack() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(ctx);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local JitStack js;
  return js.ctx;
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : where_(where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": the regex does not compile at character " + std::to_string(off) + ": " +
                reinterpret_cast<const char*>(msg) + "\n  pattern: " + excerpt(pattern, 200));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<Span> Regex::find_all(std::string_view s) const {
  std::vector<Span> out;
  try {
    utf8_validate(s);
  } catch (const Error& e) {
    throw Error(where_ + ": " + e.what());
  }
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    const int rc = pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md, thread_match_context());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(where_ + ": the regex failed on a piece of " + std::to_string(s.size()) + " bytes at byte " +
                  std::to_string(start) + ": " + reinterpret_cast<const char*>(msg) +
                  "\n  HINT: the pattern backtracks too much on this text; shorten the text or fix the pattern.");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.push_back({ov[0], ov[1]});
    if (ov[1] == ov[0]) {
      if (ov[1] >= s.size()) break;
      start = ov[1] + utf8_len(static_cast<unsigned char>(s[ov[1]]));
    } else {
      start = ov[1];
    }
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<Span> Pattern::find_all(std::string_view s) const {
  if (re) return re->find_all(s);
  std::vector<Span> out;
  if (literal.empty()) return out;
  for (size_t p = s.find(literal); p != std::string_view::npos; p = s.find(literal, p + literal.size()))
    out.push_back({p, p + literal.size()});
  return out;
}

// --- byte-level table ---------------------------------------------------------------------

namespace {
struct ByteTable {
  uint32_t to_cp[256];
  std::vector<int> from_cp;  // indexed by code point < 512
  std::string utf8[256];     // to_cp as UTF-8
  ByteTable() : from_cp(512, -1) {
    uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : extra++;
      from_cp[to_cp[b]] = b;
      utf8proc_uint8_t buf[4];
      const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(to_cp[b]), buf);
      utf8[b].assign(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}
}  // namespace

uint32_t byte_to_cp(unsigned char b) { return byte_table().to_cp[b]; }
int cp_to_byte(uint32_t cp) { return cp < 512 ? byte_table().from_cp[cp] : -1; }

std::string bytes_to_unicode(std::string_view s) {
  const ByteTable& t = byte_table();
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) out += t.utf8[static_cast<unsigned char>(c)];
  return out;
}

// --- splitting ------------------------------------------------------------------------------

namespace {

const std::string& gpt2_pattern() {
  static const std::string p = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return p;
}

struct Cut {
  Span span;
  bool match;
};

// Hugging Face's NormalizedString::split: `hits` (sorted, non-overlapping) become a cover
// of the whole string as (span, is_match), then `b` decides where the hits go.
void split_piece(const PreToken& piece, const std::vector<Span>& hits, Behavior b, bool invert,
                 std::vector<PreToken>& out) {
  const std::string& s = piece.text;
  std::vector<Cut> cuts;
  size_t prev = 0;
  for (const Span& h : hits) {
    if (h.begin != prev) cuts.push_back({{prev, h.begin}, invert});
    cuts.push_back({h, !invert});
    prev = h.end;
  }
  if (prev != s.size()) cuts.push_back({{prev, s.size()}, invert});

  std::vector<Cut> kept;
  bool prev_match = false;
  switch (b) {
    case Behavior::Isolated: kept.swap(cuts); break;
    case Behavior::Removed:
      for (const Cut& c : cuts)
        if (!c.match) kept.push_back(c);
      break;
    case Behavior::MergedWithPrevious:
      for (const Cut& c : cuts) {
        if (c.match && !prev_match && !kept.empty()) kept.back().span.end = c.span.end;
        else kept.push_back(c);
        prev_match = c.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
        if (it->match && !prev_match && !kept.empty()) kept.back().span.begin = it->span.begin;
        else kept.push_back(*it);
        prev_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case Behavior::Contiguous:
      for (const Cut& c : cuts) {
        if (c.match == prev_match && !kept.empty()) kept.back().span.end = c.span.end;
        else kept.push_back(c);
        prev_match = c.match;
      }
      break;
  }
  for (const Cut& c : kept)
    if (c.span.end > c.span.begin)
      out.push_back({s.substr(c.span.begin, c.span.end - c.span.begin), piece.at_start && c.span.begin == 0});
}

// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(utf8proc_int32_t cp) {
  const auto cat = utf8proc_category(cp);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

// Every numeric character as its own hit.
std::vector<Span> numeric_chars(const std::string& s) {
  std::vector<Span> hits;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) n = 1;
    if (cp >= 0 && is_numeric(cp)) hits.push_back({i, i + static_cast<size_t>(n)});
    i += static_cast<size_t>(n);
  }
  return hits;
}

void replace_spaces(std::string& s, const std::string& with) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ') out += with;
    else out += c;
  }
  s.swap(out);
}

}  // namespace

const Pattern& gpt2_split_pattern() {
  static const Pattern gpt2{"", std::make_shared<Regex>(gpt2_pattern(), "ByteLevel")};
  return gpt2;
}

bool cuts_independently(const PreTokenizer& st) {
  return (st.kind == PreTokenizer::ByteLevel && st.use_regex) ||
         (st.kind == PreTokenizer::Split && st.behavior == Behavior::Isolated && !st.invert);
}

std::vector<Span> first_cut(const PreTokenizer& st, std::string_view s, size_t from) {
  const Pattern& p = st.kind == PreTokenizer::ByteLevel ? gpt2_split_pattern() : st.pattern;
  std::vector<Span> out;
  size_t prev = from;
  for (Span h : p.find_all(s.substr(from))) {
    h.begin += from;
    h.end += from;
    if (h.begin > prev) out.push_back({prev, h.begin});
    if (h.end > h.begin) out.push_back(h);
    prev = h.end;
  }
  if (prev < s.size()) out.push_back({prev, s.size()});
  return out;
}

void pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<PreToken>& pieces) {
  const Pattern& gpt2 = gpt2_split_pattern();
  for (const PreTokenizer& st : steps) {
    std::vector<PreToken> next;
    next.reserve(pieces.size() * 2);
    for (PreToken& piece : pieces) {
      switch (st.kind) {
        case PreTokenizer::ByteLevel: {
          if (st.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, 1, ' ');
          const size_t first = next.size();
          if (st.use_regex) split_piece(piece, gpt2.find_all(piece.text), Behavior::Isolated, false, next);
          else if (!piece.text.empty()) next.push_back(piece);
          for (size_t i = first; i < next.size(); ++i) next[i].text = bytes_to_unicode(next[i].text);
          break;
        }
        case PreTokenizer::Split:
          split_piece(piece, st.pattern.find_all(piece.text), st.behavior, st.invert, next);
          break;
        case PreTokenizer::Digits:
          split_piece(piece, numeric_chars(piece.text),
                      st.individual_digits ? Behavior::Isolated : Behavior::Contiguous, false, next);
          break;
        case PreTokenizer::Metaspace: {
          replace_spaces(piece.text, st.replacement);
          const bool starts = piece.text.compare(0, st.replacement.size(), st.replacement) == 0;
          if (!starts && (st.prepend_scheme == PreTokenizer::Always ||
                          (st.prepend_scheme == PreTokenizer::First && piece.at_start)))
            piece.text.insert(0, st.replacement);
          if (st.split) {
            const Pattern rep{st.replacement, nullptr};
            split_piece(piece, rep.find_all(piece.text), Behavior::MergedWithNext, false, next);
          } else if (!piece.text.empty()) {
            next.push_back(piece);
          }
          break;
        }
      }
    }
    pieces.swap(next);
  }
}

}  // namespace attnviz::hf
