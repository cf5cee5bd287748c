#include "core/engine/head_scores.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace attnviz {

std::vector<HeadScore> score_heads(const Trace& t) {
  std::vector<HeadScore> out;
  const int T = t.T();
  // For each row i, the positions j+1 (< i) just after earlier occurrences of tokens[i].
  std::vector<std::vector<int>> targets(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i)
    for (int j = 0; j + 1 < i; ++j)
      if (t.tokens[j] == t.tokens[i]) targets[i].push_back(j + 1);
  for (size_t l = 0; l < t.layers.size(); ++l) {
    const Tensor& P = t.layers[l].probs;  // (H, T, T)
    for (int h = 0; h < static_cast<int>(P.dim(0)); ++h) {
      HeadScore s;
      s.layer = static_cast<int>(l);
      s.head = h;
      double prev = 0, first = 0, self = 0, ind = 0, entropy = 0, distance = 0;
      int rows = 0, ind_rows = 0;
      for (int i = 1; i < T; ++i) {
        prev += P.at(h, i, i - 1);
        first += P.at(h, i, 0);
        self += P.at(h, i, i);
        for (int j = 0; j <= i; ++j) {
          const double p = P.at(h, i, j);
          if (p > 0) entropy -= p * std::log2(p);
          distance += p * (i - j);
        }
        ++rows;
        if (!targets[i].empty()) {
          double w = 0;
          for (int j : targets[i]) w += P.at(h, i, j);
          ind += w;
          ++ind_rows;
        }
      }
      if (rows) {
        s.previous_token = static_cast<float>(prev / rows);
        s.first_token = static_cast<float>(first / rows);
        s.self = static_cast<float>(self / rows);
        s.entropy_bits = static_cast<float>(entropy / rows);
        s.mean_distance = static_cast<float>(distance / rows);
      }
      s.induction = ind_rows ? static_cast<float>(ind / ind_rows) : -1.f;
      out.push_back(s);
    }
  }
  return out;
}

std::string head_label(const HeadScore& s, float threshold) {
  const std::pair<float, const char*> c[] = {{s.previous_token, "previous-token"},
                                              {s.induction, "induction"},
                                              {s.first_token, "first-token"},
                                              {s.self, "self"}};
  const auto* best = std::max_element(std::begin(c), std::end(c),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
  return best->first >= threshold ? best->second : "";
}

std::vector<int> repeated_random_tokens(const Tokenizer* tok, int vocab_size, int len, uint64_t seed) {
  // Preferred: ASCII letters and single non-ASCII characters (CJK, ...); then any visible
  // ASCII when that gives too few; then every id.
  std::vector<int> pool, visible;
  for (int id = 0; id < vocab_size; ++id) {
    if (tok) {
      if (id >= tok->vocab_size()) break;
      const std::string p = tok->piece(id);
      const auto c = p.empty() ? 0 : static_cast<unsigned char>(p[0]);
      const bool letter = p.size() == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
      const bool visible_ascii = p.size() == 1 && c > 0x20 && c < 0x7f;
      const bool multibyte_char = p.size() > 1 && p.size() <= 4 && c >= 0xc0;  // one non-ASCII code point
      if (letter || multibyte_char) pool.push_back(id);
      if (visible_ascii || multibyte_char) visible.push_back(id);
      continue;
    }
    pool.push_back(id);
  }
  if (static_cast<int>(pool.size()) < len && visible.size() > pool.size()) pool = visible;
  if (pool.empty())
    for (int id = 0; id < vocab_size; ++id) pool.push_back(id);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(std::min(pool.size(), static_cast<size_t>(std::max(1, len))));
  std::vector<int> ids = pool;
  ids.insert(ids.end(), pool.begin(), pool.end());
  return ids;
}

}  // namespace attnviz
