// Error, warning and note output (core/error.h format_message): the bytes as a message that
// quotes input. Whatever they hold, what is printed must be safe for a terminal: no control
// byte but the newline, no C1 control, well-formed UTF-8, every line after the first
// indented (none can pass for an "error:" line of its own), and a bounded length. A
// violation aborts, which the fuzzer and the corpus replay report.
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

// The length of the well-formed UTF-8 sequence at s[i], or 0 (checked independently of
// format_message's own decoder, byte ranges as in the Unicode standard's table 3-7).
size_t sequence_length(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  auto in = [&](size_t k, unsigned char lo, unsigned char hi) {
    return i + k < s.size() && static_cast<unsigned char>(s[i + k]) >= lo && static_cast<unsigned char>(s[i + k]) <= hi;
  };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

}  // namespace

ATTNVIZ_FUZZ_TARGET(error_message) {
  const std::string_view message(reinterpret_cast<const char*>(data), size);
  const std::string out = attnviz::format_message("error", message);
  // "error: ", at most the limit plus one escaped sequence (4 bytes as \xNN each), the cut
  // note and the newline.
  if (out.rfind("error: ", 0) != 0 || out.back() != '\n') std::abort();
  if (out.size() > 7 + attnviz::kMaxPrintedMessageBytes + 16 + 64) std::abort();
  for (size_t i = 0; i < out.size();) {
    const unsigned char c = static_cast<unsigned char>(out[i]);
    if (c == '\n') {
      if (i + 1 < out.size() && out[i + 1] != ' ') std::abort();  // a line that starts at column 0
      ++i;
      continue;
    }
    const size_t n = sequence_length(out, i);
    if (n == 0 || c < 0x20 || c == 0x7F) std::abort();
    if (n == 2 && c == 0xC2 && static_cast<unsigned char>(out[i + 1]) < 0xA0) std::abort();  // C1
    i += n;
  }
}
