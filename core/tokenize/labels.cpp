#include "core/tokenize/labels.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace attnviz {

std::string hex_bytes(const std::string& bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02X", static_cast<unsigned char>(bytes[i]));
    if (i) out += ' ';
    out += buf;
  }
  return out;
}

std::vector<TokenLabel> token_labels(const Tokenizer& tok, const std::vector<int>& ids) {
  std::vector<TokenLabel> out(ids.size());
  // Runs of non-special tokens are read as one byte stream; a special token ends a run.
  size_t k = 0;
  while (k < ids.size()) {
    if (tok.is_special(ids[k])) {
      out[k].text = out[k].bytes = tok.token_bytes(ids[k]);
      ++k;
      continue;
    }
    size_t end = k;
    std::string stream;
    std::vector<size_t> start;  // start[t - k]: where token t's bytes begin in `stream`
    for (; end < ids.size() && !tok.is_special(ids[end]); ++end) {
      start.push_back(stream.size());
      out[end].bytes = tok.token_bytes(ids[end]);
      stream += out[end].bytes;
    }
    start.push_back(stream.size());
    size_t owner = 0;  // index into start: the token holding byte i
    for (size_t i = 0; i < stream.size();) {
      while (start[owner + 1] <= i) ++owner;
      size_t n = utf8_valid_len(stream, i);
      const bool valid = n > 0;
      if (!valid) n = 1;
      TokenLabel& lab = out[k + owner];
      if (valid) {
        lab.text.append(stream, i, n);
        for (size_t t = owner + 1; start[t] < i + n; ++t)
          if (start[t + 1] > start[t]) out[k + t].continues = true;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(stream[i]));
        lab.text += buf;
      }
      i += n;
    }
    for (size_t t = k; t < end; ++t)
      if (out[t].text.empty() && out[t].continues) out[t].text = "\xE2\x80\xA6";  // …
    k = end;
  }
  return out;
}

void for_each_label_chunk(const Tokenizer& tok, const std::vector<int>& ids, size_t chunk,
                          const std::function<void(size_t first, const std::vector<TokenLabel>& labels)>& fn) {
  // A cut before token e leaves every label as it is when token e's bytes start with a
  // byte that begins a character (or e is special, which ends a run anyway).
  auto clean_cut = [&](size_t e) {
    if (tok.is_special(ids[e])) return true;
    const std::string b = tok.token_bytes(ids[e]);
    return !b.empty() && (static_cast<unsigned char>(b[0]) & 0xC0) != 0x80;
  };
  for (size_t b = 0; b < ids.size();) {
    size_t e = std::min(ids.size(), b + std::max<size_t>(chunk, 1));
    while (e < ids.size() && !clean_cut(e)) ++e;
    fn(b, token_labels(tok, std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(b), ids.begin() + static_cast<std::ptrdiff_t>(e))));
    b = e;
  }
}

}  // namespace attnviz
