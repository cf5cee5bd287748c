#include "core/engine/head_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <Eigen/Core>

namespace attnviz {

std::vector<std::vector<int>> induction_targets(const std::vector<int>& tokens, int from) {
  const int T = static_cast<int>(tokens.size());
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(0, T - from)));
  std::unordered_map<int, std::vector<int>> seen;  // token → its positions j, in order
  for (int i = 0; i < T; ++i) {
    if (i >= from)
      if (auto it = seen.find(tokens[i]); it != seen.end())
        for (int j : it->second)
          if (j + 1 < i) out[i - from].push_back(j + 1);
    seen[tokens[i]].push_back(i);
  }
  return out;
}

void row_stats(const float* p, int i, const std::vector<int>& targets, float* out) {
  // Vectorised (a forward pass calls this for every row of every head): Eigen's SIMD log.
  // The terms go to an aligned buffer before they are summed, so that the sums do not depend
  // on where the row lies (a full trace's row and a compact pass's block row give the same).
  const Eigen::Map<const Eigen::ArrayXf> P(p, i + 1);
  thread_local Eigen::ArrayXf terms;
  // p·log p with p = 0 → 0: log of max(p, FLT_MIN) keeps it finite, and stays vectorised
  // (a select around the log makes Eigen call the scalar logf per element).
  terms = P * P.max(std::numeric_limits<float>::min()).log();
  const float entropy = -terms.sum() / std::log(2.f);
  terms = P * Eigen::ArrayXf::LinSpaced(i + 1, static_cast<float>(i), 0.f);  // P[j]·(i − j)
  const float distance = terms.sum();
  out[kPrevious] = i >= 1 ? p[i - 1] : 0.f;
  out[kFirst] = p[0];
  out[kSelf] = p[i];
  out[kEntropyBits] = static_cast<float>(entropy);
  out[kDistance] = static_cast<float>(distance);
  double ind = 0;
  for (int t : targets) ind += p[t];
  out[kInduction] = targets.empty() ? NAN : static_cast<float>(ind);
}

int thumb_bucket(int T) {
  int b = 1;
  while (thumb_cells(T, b) > kThumbCells) b *= 2;
  return b;
}

void thumb_add_row(const float* p, int i, int bucket, int n, float* thumb) {
  float* row = thumb + static_cast<int64_t>(i / bucket) * n;
  for (int J = 0, j0 = 0; j0 <= i; ++J, j0 += bucket)  // cell J: keys [j0, j0 + bucket) ∩ [0, i]
    row[J] = std::max(row[J], Eigen::Map<const Eigen::ArrayXf>(p + j0, std::min(bucket, i + 1 - j0)).maxCoeff());
}

int thumb_keep(const float* old, int bucket_old, int n_old, int old_T, int from, int bucket, int n, float* out) {
  std::fill(out, out + static_cast<int64_t>(n) * n, 0.f);
  // Old cells merge into new ones only when the new bucket is a multiple of the old.
  if (!old || bucket_old <= 0 || bucket % bucket_old != 0) return 0;
  const int f = bucket / bucket_old;
  // New bucket rows made of kept rows only: all of them when nothing old is replaced.
  const int rows_kept = old_T <= from ? std::min(n, (from + bucket - 1) / bucket) : from / bucket;
  if (old_T <= from) from = std::min(from, rows_kept * bucket);
  if (f == 1) {  // the same buckets (typing without crossing a doubling): rows copied, as the loop below would
    const int cols = std::min(n_old, n);
    for (int I = 0; I < std::min(rows_kept, n_old); ++I) {
      const float* src = old + static_cast<int64_t>(I) * n_old;
      float* dst = out + static_cast<int64_t>(I) * n;
      for (int b = 0; b < cols; ++b) dst[b] = std::max(0.f, src[b]);
    }
    return std::min(from, rows_kept * bucket);
  }
  for (int I = 0; I < rows_kept; ++I)
    for (int a = I * f; a < std::min((I + 1) * f, n_old); ++a)
      for (int b = 0; b < n_old && b / f < n; ++b) {
        float& cell = out[static_cast<int64_t>(I) * n + b / f];
        cell = std::max(cell, old[static_cast<int64_t>(a) * n_old + b]);
      }
  return std::min(from, rows_kept * bucket);
}

}  // namespace attnviz
