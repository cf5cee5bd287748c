// Normalizers: Unicode normal forms through utf8proc, Lowercase, Prepend and Replace.
// Input and output are UTF-8 strings (the input already checked to be valid).
#include <utf8proc.h>

#include <cstdlib>

#include "core/error.h"
#include "core/limits.h"
#include "core/tokenize/hf_tokenizer.h"

namespace attnviz::hf {
namespace {

std::string unicode_map(const std::string& s, int options, const std::string& where) {
  if (s.empty()) return s;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) throw Error(where + ": Unicode normalization failed: " + utf8proc_errmsg(n));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string lowercase(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  utf8proc_ssize_t i = 0;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  const auto n = static_cast<utf8proc_ssize_t>(s.size());
  while (i < n) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &cp);
    if (len <= 0) throw Error("invalid UTF-8 at byte " + std::to_string(i));
    utf8proc_uint8_t buf[4];
    const utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(m));
    i += len;
  }
  return out;
}

// Refuses a result of `bytes` bytes when it exceeds kMaxNormalizedBytes.
void check_growth(const std::string& where, double bytes) {
  if (bytes > static_cast<double>(kMaxNormalizedBytes))
    throw Error(where + ": the text would grow to " + format_bytes(bytes) + ", more than the " +
                format_bytes(static_cast<double>(kMaxNormalizedBytes)) +
                " attnviz allows\n  HINT: the replacement is too long for this text; use a shorter text or fix the file.");
}

}  // namespace

std::string replace_all(const Pattern& p, const std::string& s, const std::string& with, const std::string& where) {
  const std::vector<Span> hits = p.find_all(s);
  if (hits.empty()) return s;
  double size = static_cast<double>(s.size());
  for (const Span& h : hits) size += static_cast<double>(with.size()) - static_cast<double>(h.end - h.begin);
  check_growth(where, size);
  std::string out;
  size_t prev = 0;
  for (const Span& h : hits) {
    out.append(s, prev, h.begin - prev);
    out += with;
    prev = h.end;
  }
  out.append(s, prev, std::string::npos);
  return out;
}

std::string normalize(const std::vector<Normalizer>& steps, std::string s) {
  for (const Normalizer& n : steps) {
    switch (n.kind) {
      case Normalizer::NFC: s = unicode_map(s, UTF8PROC_COMPOSE, n.where); break;
      case Normalizer::NFD: s = unicode_map(s, UTF8PROC_DECOMPOSE, n.where); break;
      case Normalizer::NFKC: s = unicode_map(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, n.where); break;
      case Normalizer::NFKD: s = unicode_map(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, n.where); break;
      case Normalizer::Lowercase: s = lowercase(s); break;
      case Normalizer::Prepend:
        check_growth(n.where, static_cast<double>(s.size()) + static_cast<double>(n.text.size()));
        if (!s.empty()) s = n.text + s;  // Hugging Face prepends to non-empty text only
        break;
      case Normalizer::Replace: s = replace_all(n.pattern, s, n.text, n.where); break;
    }
  }
  return s;
}

}  // namespace attnviz::hf
