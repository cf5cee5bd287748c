#include "core/engine/head_scores.h"

#include "core/engine/head_summary.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace attnviz {

const HeadScore* find_score(const std::vector<HeadScore>& scores, int layer, int head) {
  const auto it = std::lower_bound(scores.begin(), scores.end(), std::make_pair(layer, head),
                                   [](const HeadScore& s, const std::pair<int, int>& k) {
                                     return std::make_pair(s.layer, s.head) < k;
                                   });
  return it != scores.end() && it->layer == layer && it->head == head ? &*it : nullptr;
}

std::vector<HeadScore> score_heads(const Trace& t) {
  const int T = t.T();
  std::vector<std::pair<int, int>> heads;  // (layer, head), layer-major
  bool all_have = true;
  for (size_t l = 0; l < t.layers.size(); ++l) {
    const LayerTrace& lt = t.layers[l];
    if (lt.mixer != Mixer::Softmax) continue;
    all_have = all_have && lt.row_stats.shape == std::vector<int64_t>{lt.heads(), T, kRowStats};
    for (int h = 0; h < static_cast<int>(lt.heads()); ++h) heads.emplace_back(static_cast<int>(l), h);
  }
  // Made only when a layer lacks row_stats.
  const std::vector<std::vector<int>> targets = all_have ? std::vector<std::vector<int>>() : induction_targets(t.tokens, 0);
  std::vector<HeadScore> out(heads.size());
  // Heads are independent: over the cores when there are many rows (every head's sums are
  // the same whichever thread adds them).
  const bool split = static_cast<int64_t>(heads.size()) * T >= (int64_t{1} << 16);
#pragma omp parallel if (split)
  {
    std::vector<float> scratch, computed;
#pragma omp for schedule(static)
    for (size_t k = 0; k < heads.size(); ++k) {
      const auto [l, h] = heads[k];
      const LayerTrace& lt = t.layers[static_cast<size_t>(l)];
      const bool have = lt.row_stats.shape == std::vector<int64_t>{lt.heads(), T, kRowStats};
      // (T, kRowStats): the backend's, or computed here from the head's probs.
      if (!have) {
        computed.resize(static_cast<size_t>(T) * kRowStats);
        const float* P = lt.head_values(Stage::Probs, h, scratch);  // (T, T)
        for (int i = 0; i < T; ++i) row_stats(P + static_cast<int64_t>(i) * T, i, targets[i], &computed[i * kRowStats]);
      }
      const float* rs = have ? lt.row_stats.head(h) : computed.data();
      const int64_t ld = have ? lt.row_stats.ld() : static_cast<int64_t>(kRowStats);
      double sum[kRowStats] = {};
      int rows = 0, ind_rows = 0;
      for (int i = 1; i < T; ++i) {
        const float* r = rs + i * ld;
        for (int k2 = 0; k2 < kInduction; ++k2) sum[k2] += r[k2];
        ++rows;
        if (!std::isnan(r[kInduction])) sum[kInduction] += r[kInduction], ++ind_rows;
      }
      HeadScore& s = out[k];
      s.layer = l;
      s.head = h;
      if (rows) {
        s.previous_token = static_cast<float>(sum[kPrevious] / rows);
        s.first_token = static_cast<float>(sum[kFirst] / rows);
        s.self = static_cast<float>(sum[kSelf] / rows);
        s.entropy_bits = static_cast<float>(sum[kEntropyBits] / rows);
        s.mean_distance = static_cast<float>(sum[kDistance] / rows);
      }
      s.induction = ind_rows ? static_cast<float>(sum[kInduction] / ind_rows) : -1.f;
      if (!lt.sink.shape.empty() && T > 1) {
        double m = 0;
        for (int i = 1; i < T; ++i) m += lt.sink.data[static_cast<size_t>(static_cast<int64_t>(h) * T + i)];
        s.sink_mass = static_cast<float>(m / (T - 1));
      }
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
