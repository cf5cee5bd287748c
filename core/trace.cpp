#include "core/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace attnviz {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace {

// Zeroes what resize_keep does not keep: for each of `heads` (rows, cols) blocks, the
// columns [kc, cols) of rows [0, kr) and all of rows [kr, rows).
void zero_outside(float* d, int64_t heads, int64_t rows, int64_t cols, int64_t kr, int64_t kc) {
  for (int64_t h = 0; h < heads; ++h) {
    float* b = d + h * rows * cols;
    if (kc < cols)
      for (int64_t i = 0; i < kr; ++i) std::fill(b + i * cols + kc, b + (i + 1) * cols, 0.f);
    std::fill(b + kr * cols, b + rows * cols, 0.f);
  }
}

}  // namespace

// The kept block moves inside the same buffer when the rows and columns both grow (rows
// are moved back to front) or both shrink (front to back): one read and one write of the
// kept values, no allocation and no page faults, no zero-filling of what gets kept. The
// buffer keeps spare capacity (never touched, so never resident) for the next growth, the
// common case of appending one token at a time. Only what is not kept is zeroed.
void Tensor::resize_keep(std::vector<int64_t> new_shape, int64_t keep_rows, int64_t keep_cols) {
  if (new_shape == shape) return;  // same layout: the kept block is already in place
  const bool three = new_shape.size() == 3;
  const int64_t heads = three ? new_shape[0] : 1;
  const int64_t rows = new_shape[three ? 1 : 0], cols = new_shape[three ? 2 : 1];
  const size_t n_new = static_cast<size_t>(heads * rows * cols);
  const bool compatible = !data.empty() && shape.size() == new_shape.size() && (!three || shape[0] == heads);
  const int64_t old_rows = compatible ? shape[three ? 1 : 0] : 0, old_cols = compatible ? shape[three ? 2 : 1] : 0;
  const int64_t kr = std::max<int64_t>(0, std::min({keep_rows, old_rows, rows}));
  const int64_t kc = std::max<int64_t>(0, std::min({keep_cols, old_cols, cols}));
  const bool grow = rows >= old_rows && cols >= old_cols, shrink = rows <= old_rows && cols <= old_cols;
  const bool nothing_kept = kr == 0 || kc == 0;
  // A buffer far larger than needed is given back rather than kept around.
  const bool oversized = n_new < data.capacity() / 4;

  if (!nothing_kept && (grow || shrink) && !oversized && (shrink || n_new <= data.capacity())) {
    float* d = nullptr;
    if (grow) {
      data.resize(n_new);  // within capacity: no reallocation, zero-fills only the tail
      d = data.data();
      for (int64_t h = heads - 1; h >= 0; --h)
        for (int64_t i = kr - 1; i >= 0; --i) {
          float* dst = d + (h * rows + i) * cols;
          const float* src = d + (h * old_rows + i) * old_cols;
          if (dst != src) std::memmove(dst, src, static_cast<size_t>(kc) * sizeof(float));
        }
    } else {
      d = data.data();
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < kr; ++i) {
          float* dst = d + (h * rows + i) * cols;
          const float* src = d + (h * old_rows + i) * old_cols;
          if (dst != src) std::memmove(dst, src, static_cast<size_t>(kc) * sizeof(float));
        }
      data.resize(n_new);
      d = data.data();
    }
    zero_outside(d, heads, rows, cols, kr, kc);
    shape = std::move(new_shape);
    return;
  }

  if (nothing_kept && !oversized && n_new <= data.capacity()) {  // reuse the buffer as it is
    data.resize(n_new);
    std::fill(data.begin(), data.end(), 0.f);
    shape = std::move(new_shape);
    return;
  }

  // A new buffer: exactly the size the first time, with room to grow by about a quarter
  // in rows and columns when an existing tensor grows (appending tokens).
  std::vector<float> fresh;
  if (compatible && grow && !nothing_kept) fresh.reserve(n_new + n_new / 2);
  fresh.resize(n_new, 0.f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < kr; ++i)
      std::memcpy(&fresh[static_cast<size_t>((h * rows + i) * cols)],
                  &data[static_cast<size_t>((h * old_rows + i) * old_cols)], static_cast<size_t>(kc) * sizeof(float));
  shape = std::move(new_shape);
  data = std::move(fresh);
}

const char* stage_name(Stage s) {
  static const char* names[kStageCount] = {"q", "k", "v", "scores", "scaled", "masked", "probs", "out"};
  return names[static_cast<int>(s)];
}

const Tensor* LayerTrace::stored(Stage s) const {
  switch (s) {
    case Stage::Q: return &q;
    case Stage::K: return &k;
    case Stage::V: return &v;
    case Stage::Scores: return &scores;
    case Stage::Probs: return &probs;
    case Stage::Out: return &out;
    case Stage::Scaled:
    case Stage::Masked: return nullptr;
  }
  return nullptr;
}
Tensor* LayerTrace::stored(Stage s) { return const_cast<Tensor*>(static_cast<const LayerTrace*>(this)->stored(s)); }

std::vector<int64_t> LayerTrace::shape(Stage s) const { return derived(s) ? scores.shape : stored(s)->shape; }

namespace {

// Row-major (rows, cols) head of scaled or masked, from the scores.
void derive_head(const LayerTrace& lt, Stage s, int64_t h, float* dst) {
  const int64_t rows = lt.scores.dim(1), cols = lt.scores.dim(2);
  const float* src = lt.scores.head(h);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[i * cols + j] = s == Stage::Masked && causally_masked(i, j) ? -INFINITY : src[i * cols + j] * lt.scale;
}

}  // namespace

const float* LayerTrace::head_values(Stage s, int64_t h, std::vector<float>& scratch) const {
  if (!derived(s)) return stored(s)->head(h);
  scratch.resize(static_cast<size_t>(scores.dim(1) * scores.dim(2)));
  derive_head(*this, s, h, scratch.data());
  return scratch.data();
}

float LayerTrace::value(Stage s, int64_t h, int64_t i, int64_t j) const {
  if (!derived(s)) return stored(s)->at(h, i, j);
  if (s == Stage::Masked && causally_masked(i, j)) return -INFINITY;
  return scores.at(h, i, j) * scale;
}

Tensor LayerTrace::materialize(Stage s) const {
  if (!derived(s)) return *stored(s);
  Tensor t;
  t.shape = scores.shape;
  t.data.resize(scores.data.size());
  for (int64_t h = 0; h < (scores.shape.empty() ? 0 : scores.dim(0)); ++h) derive_head(*this, s, h, t.head(h));
  return t;
}

size_t Trace::bytes() const {
  size_t n = logits.data.size();
  for (const auto& l : layers)
    for (int s = 0; s < kStageCount; ++s)
      if (const Tensor* t = l.stored(static_cast<Stage>(s))) n += t->data.size();
  return n * sizeof(float);
}

}  // namespace attnviz
