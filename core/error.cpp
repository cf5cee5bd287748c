#include "core/error.h"

#include <cstdio>
#include <vector>

namespace attnviz {

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (1-4), or 0 when it is not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_sequence(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
    return 0;
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", c);
  out += buf;
}

}  // namespace

std::string format_message(const char* label, std::string_view message) {
  const size_t total = message.size();
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);  // no empty last lines
  std::string out = std::string(label) + ": ";
  const size_t start = out.size();
  size_t i = 0;
  while (i < message.size() && out.size() - start < kMaxPrintedMessageBytes) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if (c == '\n') {
      out += '\n';
      ++i;
      // Each further line starts indented, so that none can pass for a line of its own.
      if (i < message.size() && message[i] != ' ') out += "  ";
      continue;
    }
    const size_t n = utf8_sequence(message, i);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F))) {
      append_hex(out, c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(message[i + 1]) < 0xA0) {
      // a C1 control (U+0080-U+009F): CSI and the like in some terminals
      append_hex(out, c);
      append_hex(out, static_cast<unsigned char>(message[i + 1]));
      i += 2;
    } else {
      out.append(message.data() + i, n);
      i += n;
    }
  }
  if (i < message.size()) {
    if (out.back() == '\n') out += "  ";  // the cut came right after a newline: the note is indented too
    out += "… (" + std::to_string(total) + " bytes in all)";
  }
  return out + "\n";
}

std::string shape_str(const std::initializer_list<long long>& dims) {
  return shape_str_of(std::vector<long long>(dims));
}

}  // namespace attnviz
