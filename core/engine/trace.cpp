#include "core/engine/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/engine/delta_rule.h"
#include "core/engine/head_summary.h"
#include "core/engine/ops.h"
#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

int64_t Tensor::numel() const { return checked_product(shape, "a trace tensor"); }

namespace {

// Zeroes what resize_keep does not keep: for each of `heads` (rows, cols) blocks at `hs`
// apart with rows `ld` apart, the columns [kc, cols) of rows [0, kr) and all of rows [kr, rows).
void zero_outside(float* d, int64_t heads, int64_t hs, int64_t ld, int64_t rows, int64_t cols, int64_t kr, int64_t kc) {
  for (int64_t h = 0; h < heads; ++h) {
    float* b = d + h * hs;
    if (kc < cols)
      for (int64_t i = 0; i < kr; ++i) std::fill(b + i * ld + kc, b + i * ld + cols, 0.f);
    for (int64_t i = kr; i < rows; ++i) std::fill(b + i * ld, b + i * ld + cols, 0.f);
  }
}

// Room to grow: a quarter more, rounded up to 16 floats (64 bytes).
int64_t with_room(int64_t n) { return (n + n / 4 + 15) / 16 * 16; }

}  // namespace

int64_t Tensor::row_capacity() const {
  if (shape.size() == 2) return shape[1] > 0 ? static_cast<int64_t>(data.capacity()) / shape[1] : 0;
  if (shape.size() == 3) return data.empty() ? 0 : head_stride() / ld();
  return 0;
}

void Tensor::reserve_rows(int64_t rows) {
  if (shape.size() == 2) {
    data.reserve(static_cast<size_t>(rows * shape[1]));
    return;
  }
  if (shape.size() != 3 || data.empty() || head_stride() / ld() >= rows) return;
  const int64_t heads = shape[0], ld_now = ld();
  FloatBuf fresh(static_cast<size_t>(heads * rows * ld_now), 0.f);
  for (int64_t h = 0; h < heads; ++h)
    std::copy_n(head(h), shape[1] * ld_now, fresh.data() + h * rows * ld_now);
  data = std::move(fresh);
  row_pitch = ld_now;
  head_pitch = rows * ld_now;
}

const float* Tensor::head_dense(int64_t h, std::vector<float>& scratch) const {
  const int64_t rows = dim(1), cols = dim(2);
  if (ld() == cols) return head(h);
  scratch.resize(rows * cols);
  for (int64_t i = 0; i < rows; ++i) std::copy_n(head(h) + i * ld(), cols, scratch.data() + i * cols);
  return scratch.data();
}

Tensor Tensor::dense_copy() const {
  if (dense()) return Tensor{shape, data};
  Tensor t{shape, FloatBuf(static_cast<size_t>(numel()))};
  std::vector<float> scratch;
  for (int64_t h = 0; h < dim(0); ++h) {
    const float* src = head_dense(h, scratch);
    std::copy_n(src, dim(1) * dim(2), t.head(h));
  }
  return t;
}

void Tensor::resize_keep(std::vector<int64_t> new_shape, int64_t keep_rows, int64_t keep_cols) {
  if (new_shape == shape) return;  // same layout: the kept block is already in place
  if (new_shape.size() != 3) {
    // 2-D (rows, cols), always dense: when whole rows are kept they stay where they are.
    const int64_t rows = new_shape[0], cols = new_shape[1];
    const bool was_2d = shape.size() == 2 && !data.empty();
    const int64_t kr = was_2d ? std::max<int64_t>(0, std::min({keep_rows, shape[0], rows})) : 0;
    const int64_t kc = was_2d ? std::max<int64_t>(0, std::min({keep_cols, shape[1], cols})) : 0;
    if (was_2d && shape[1] == cols && kc == cols) {
      data.resize(rows * cols);
      std::fill(data.begin() + kr * cols, data.end(), 0.f);
    } else {
      FloatBuf fresh(static_cast<size_t>(rows * cols), 0.f);
      for (int64_t i = 0; i < kr; ++i) std::copy_n(data.data() + i * shape[1], kc, fresh.data() + i * cols);
      data = std::move(fresh);
    }
    shape = std::move(new_shape);
    return;
  }
  const int64_t heads = new_shape[0], rows = new_shape[1], cols = new_shape[2];
  const bool compatible = !data.empty() && shape.size() == 3 && shape[0] == heads;
  const int64_t old_rows = compatible ? shape[1] : 0, old_cols = compatible ? shape[2] : 0;
  const int64_t kr = std::max<int64_t>(0, std::min({keep_rows, old_rows, rows}));
  const int64_t kc = std::max<int64_t>(0, std::min({keep_cols, old_cols, cols}));
  if (kr == 0 || kc == 0) {  // nothing kept: a dense layout, in the old buffer when it fits
    const size_t n = static_cast<size_t>(heads * rows * cols);
    if (n > data.capacity() || n < data.capacity() / 4) FloatBuf().swap(data);
    data.assign(n, 0.f);
    shape = std::move(new_shape);
    row_pitch = head_pitch = 0;
    return;
  }
  const int64_t ld_now = ld(), cap_rows = head_stride() / ld_now;
  const size_t needed = static_cast<size_t>(heads * rows * cols);
  if (cols <= ld_now && rows <= cap_rows && needed >= data.size() / 4) {
    // Fits: nothing moves; zero what is new.
    row_pitch = ld_now;
    head_pitch = head_stride();
    shape = std::move(new_shape);
    zero_outside(data.data(), heads, head_pitch, row_pitch, rows, cols, kr, kc);
    return;
  }
  // Grows past the storage (or shrinks far below it): one move into a new buffer, with
  // room in the dimensions that grew.
  const int64_t ld_new = cols > old_cols ? with_room(cols) : cols;
  const int64_t rows_new = rows > old_rows ? with_room(rows) : rows;
  FloatBuf fresh(static_cast<size_t>(heads * rows_new * ld_new), 0.f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < kr; ++i)
      std::copy_n(data.data() + h * head_stride() + i * ld_now, kc, fresh.data() + (h * rows_new + i) * ld_new);
  data = std::move(fresh);
  shape = std::move(new_shape);
  row_pitch = ld_new;
  head_pitch = rows_new * ld_new;
}

bool stage_from_name(const std::string& name, Stage* out) {
  for (int i = 0; i < kStageCount; ++i)
    if (name == stage_name(static_cast<Stage>(i))) {
      *out = static_cast<Stage>(i);
      return true;
    }
  return false;
}

const char* stage_label(Stage s) {
  switch (s) {
    case Stage::Scores: return "scores q\xC2\xB7k\xE1\xB5\x80";      // q·kᵀ
    case Stage::Scaled: return "scaled /\xE2\x88\x9A" "d";            // /√d
    case Stage::Capped: return "soft-capped";
    case Stage::Masked: return "masked";
    case Stage::Probs: return "softmax";
    case Stage::Q: return "Q";
    case Stage::K: return "K";
    case Stage::V: return "V";
    case Stage::Out: return "head output";
    case Stage::Implicit: return "implicit A";
  }
  return "?";
}

const char* stage_name(Stage s) {
  static const char* names[kStageCount] = {"q", "k", "v", "scores", "scaled", "capped", "masked", "probs", "out", "implicit"};
  return names[static_cast<int>(s)];
}

const Tensor* LayerTrace::stored(Stage s) const {
  switch (s) {
    case Stage::Q: return &q;
    case Stage::K: return &k;
    case Stage::V: return &v;
    case Stage::Scores: return compact ? nullptr : &scores;
    case Stage::Probs: return compact ? nullptr : &probs;
    case Stage::Out: return &out;
    case Stage::Implicit: return compact || mixer != Mixer::GatedDeltaNet ? nullptr : &implicit;
    case Stage::Scaled:
    case Stage::Capped:
    case Stage::Masked: return nullptr;
  }
  return nullptr;
}
Tensor* LayerTrace::stored(Stage s) { return const_cast<Tensor*>(static_cast<const LayerTrace*>(this)->stored(s)); }

std::vector<int64_t> LayerTrace::shape(Stage s) const {
  if (matrix(s)) return {heads(), T(), T()};
  return stored(s)->shape;
}

namespace {
using ConstMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;

// Head h's keys, transposed for the kernel: (d, T + padding).
Mat head_keys_transposed(const LayerTrace& lt, int64_t h) {
  const int64_t g = h / (lt.heads() / lt.k.dim(0));  // query head h reads KV head g
  return keys_transposed(ConstMap(lt.k.head(g), lt.T(), lt.k.dim(2), Eigen::OuterStride<>(lt.k.ld())));
}

// attention_rows with head h's keys already transposed (Kt).
void attention_rows_kt(const LayerTrace& lt, int64_t h, const Mat& Kt, int64_t r0, int64_t rb, float* S, float* P) {
  using Out = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  const int64_t n = lt.T(), d = lt.q.dim(2);
  const ConstMap Q(lt.q.head(h), n, d, Eigen::OuterStride<>(lt.q.ld()));
  Mat s_tmp, p_tmp;
  if (!S) s_tmp.resize(rb, n);
  if (!P) p_tmp.resize(rb, n);
  Out Sm(S ? S : s_tmp.data(), rb, n, Eigen::OuterStride<>(n)), Pm(P ? P : p_tmp.data(), rb, n, Eigen::OuterStride<>(n));
  attention_block(Q, Kt, AttnRule{lt.scale, lt.softcap, lt.window, lt.sink_logit(h)}, static_cast<int>(r0), Sm, Pm);
}

}  // namespace

void LayerTrace::attention_rows(int64_t h, int64_t r0, int64_t rb, float* S, float* P) const {
  attention_rows_kt(*this, h, head_keys_transposed(*this, h), r0, rb, S, P);
}

namespace {

// Element (i, j) of a derived stage s from its score: scaled, capped (soft-capped where
// the layer caps, else the scaled value), masked (−inf where the layer's mask hides it).
float derive_value(const LayerTrace& lt, Stage s, int64_t i, int64_t j, float score) {
  if (s == Stage::Masked && lt.masked_at(i, j)) return -INFINITY;
  const float x = score * lt.scale;  // the same product as attention_block's
  return s == Stage::Scaled ? x : softcap_value(x, lt.softcap);
}

// Rows [r0, r0 + rows) of a head of stage s (a matrix stage) into dst (rows, T), from the
// stored matrices or, compact, through the kernel.
void matrix_rows(const LayerTrace& lt, Stage s, int64_t h, int64_t r0, int64_t rows, float* dst) {
  const int64_t T = lt.T();
  if (s == Stage::Implicit) {  // a linear layer's A: stored, or swept row by row from q, k, β and g
    if (lt.mixer != Mixer::GatedDeltaNet) throw Error("only a linear-attention layer has an implicit matrix");
    if (!lt.compact) {
      for (int64_t i = 0; i < rows; ++i) std::copy_n(lt.implicit.head(h) + (r0 + i) * lt.implicit.ld(), T, dst + i * T);
      return;
    }
    std::vector<float> kq, kk;  // dense copies only where q and k are stored with different pitches
    const float* q = lt.q.head(h);
    const float* k = lt.k.head(h);
    int64_t ldk = lt.q.ld();
    if (lt.k.ld() != ldk) {
      q = lt.q.head_dense(h, kq);
      k = lt.k.head_dense(h, kk);
      ldk = lt.q.dim(2);
    }
    delta_rule_rows(q, k, ldk, lt.beta.data.data() + h * lt.beta.dim(1), lt.decay.data.data() + h * lt.decay.dim(1),
                    static_cast<int>(T), static_cast<int>(lt.q.dim(2)), static_cast<int>(r0), static_cast<int>(r0 + rows),
                    dst, T);
    return;
  }
  if (lt.compact) {
    // Block by block as the forward pass does, so a head costs (B, T) of extra memory.
    const int64_t B = attention_row_block(static_cast<int>(T));
    FloatBuf other(static_cast<size_t>(std::min(B, rows) * T));
    const Mat Kt = head_keys_transposed(lt, h);  // once for every block
    for (int64_t a = r0; a < r0 + rows; a += B) {
      const int64_t rb = std::min(B, r0 + rows - a);
      float* at = dst + (a - r0) * T;
      if (s == Stage::Probs)
        attention_rows_kt(lt, h, Kt, a, rb, nullptr, at);
      else
        attention_rows_kt(lt, h, Kt, a, rb, at, s == Stage::Scores ? nullptr : other.data());
    }
  } else {
    const Tensor& src = s == Stage::Probs ? lt.probs : lt.scores;
    for (int64_t i = 0; i < rows; ++i) std::copy_n(src.head(h) + (r0 + i) * src.ld(), T, dst + i * T);
  }
  if (!LayerTrace::derived(s)) return;
  for (int64_t i = 0; i < rows; ++i)  // scaled, capped, masked from the scores
    for (int64_t j = 0; j < T; ++j) dst[i * T + j] = derive_value(lt, s, r0 + i, j, dst[i * T + j]);
}

}  // namespace

const float* LayerTrace::head_values(Stage s, int64_t h, std::vector<float>& scratch) const {
  if ((mixer != Mixer::Softmax || s == Stage::Implicit) && !has(s))
    throw Error(std::string("this layer has no ") + stage_name(s) + " stage (it is not softmax attention)");
  if (const Tensor* t = stored(s)) return t->head_dense(h, scratch);
  scratch.resize(static_cast<size_t>(T() * T()));
  matrix_rows(*this, s, h, 0, T(), scratch.data());
  return scratch.data();
}

const float* LayerTrace::update_head_values(Stage s, int64_t h, int64_t old_T, int64_t kept,
                                            std::vector<float>& values, int64_t* ld, int64_t* computed) const {
  const int64_t n = T(), L = *ld;
  kept = std::min({kept, old_T, n});
  if ((s != Stage::Probs && s != Stage::Masked && s != Stage::Implicit) || kept <= 0 || L < old_T || values.size() < static_cast<size_t>(old_T * L)) {
    *ld = n;
    if (computed) *computed = n;
    return head_values(s, h, values);
  }
  if (computed) *computed = n - kept;
  const float future = s == Stage::Masked ? -INFINITY : 0.f;
  if (n > L) {  // past the pitch: the kept rows move once, to a pitch with a quarter more room
    const int64_t L2 = n + n / 4 + 16;
    std::vector<float> fresh;
    fresh.reserve(static_cast<size_t>(L2 * L2));
    fresh.resize(static_cast<size_t>(n * L2));
    for (int64_t i = 0; i < kept; ++i) {
      std::copy_n(values.begin() + i * L, old_T, fresh.begin() + i * L2);
      std::fill(fresh.begin() + i * L2 + old_T, fresh.begin() + i * L2 + n, future);
    }
    values.swap(fresh);
    *ld = L2;
  } else {
    values.resize(static_cast<size_t>(n * L));
    for (int64_t i = 0; i < kept && n > old_T; ++i) std::fill(values.begin() + i * L + old_T, values.begin() + i * L + n, future);
  }
  const int64_t P = *ld;
  std::vector<float> rows(static_cast<size_t>((n - kept) * n));  // (n − kept, n), stored or computed, then at the pitch
  matrix_rows(*this, s, h, kept, n - kept, rows.data());
  for (int64_t i = kept; i < n; ++i) std::copy_n(rows.data() + (i - kept) * n, n, values.data() + i * P);
  return values.data();
}

const float* LayerTrace::row_values(Stage s, int64_t h, int64_t i, std::vector<float>& scratch) const {
  if (const Tensor* t = stored(s)) return t->head(h) + i * t->ld();
  scratch.resize(static_cast<size_t>(T()));
  matrix_rows(*this, s, h, i, 1, scratch.data());
  return scratch.data();
}

float LayerTrace::value(Stage s, int64_t h, int64_t i, int64_t j) const {
  if (const Tensor* t = stored(s)) return t->at(h, i, j);
  if (derived(s) && !compact) return derive_value(*this, s, i, j, scores.at(h, i, j));
  std::vector<float> row;
  return row_values(s, h, i, row)[j];
}

Tensor LayerTrace::materialize(Stage s) const {
  if ((mixer != Mixer::Softmax || s == Stage::Implicit) && !has(s)) return Tensor{};  // another kind of layer's stage
  if (const Tensor* t = stored(s)) return t->dense_copy();
  Tensor t;
  t.shape = shape(s);
  t.data.resize(static_cast<size_t>(t.numel()));
  for (int64_t h = 0; h < t.dim(0); ++h) matrix_rows(*this, s, h, 0, T(), t.head(h));
  return t;
}

size_t Trace::bytes() const {
  size_t n = logits.data.size() + row_loss.size() + final_hidden.data.size() + final_resid.data.size();
  for (const auto& l : layers)
    for (int s = 0; s < kStageCount; ++s)
      if (const Tensor* t = l.stored(static_cast<Stage>(s))) n += t->data.size();
  for (const auto& l : layers) n += l.resid.data.size() + l.row_stats.data.size() + l.thumbs.data.size();
  for (const auto& l : layers)  // Qwen3.5's gate, a linear layer's β, g and its memory's snapshots (A is a stage)
    n += l.gate.data.size() + l.beta.data.size() + l.decay.data.size() + l.state_snaps.size() + l.state_final.size() +
         l.sink.data.size() + l.router.data.size() + l.experts.data.size() + l.expert_weights.data.size();
  return n * sizeof(float);
}

double Trace::estimate_bytes(int64_t L, int64_t H, int64_t KV, int64_t d, int64_t C, int64_t V, int64_t T,
                             bool compact, bool all_logits) {
  const double t = static_cast<double>(T);
  // Per layer: q, out (H·T·d), k, v (KV·T·d), resid (T·C), row stats, thumbnails; scores
  // and probs (H·T·T) unless compact. Then the logits (T·V).
  double per_layer = (2.0 * H + 2.0 * KV) * t * d + t * C + H * t * kRowStats + H * double(kThumbCells) * kThumbCells;
  if (!compact) per_layer += 2.0 * H * t * t;
  // The logits: every row, or the last row and a chunk of rows being reduced to losses;
  // and the final hidden state and the stream before the final norm.
  const double logit_rows = all_logits ? t : 1.0 + std::min(t, 64.0);
  return 4.0 * (static_cast<double>(L) * per_layer + logit_rows * static_cast<double>(V) + t * (2.0 * C + 1.0));
}

namespace {

// dst = src where dst already holds src's values in rows [0, r) (axis 0 of a 2-D tensor,
// axis 1 of a 3-D one), except, for a square (H, T, T) matrix, in their columns [r, T).
void copy_rows(Tensor& dst, const Tensor& src, int64_t r) {
  const size_t rank = src.shape.size();
  bool same = r > 0 && (rank == 2 || rank == 3) && dst.shape.size() == rank && !dst.data.empty() && !src.data.empty();
  const bool square = same && rank == 3 && src.dim(1) == src.dim(2) && dst.dim(1) == dst.dim(2);
  if (same && rank == 3) same = dst.dim(0) == src.dim(0) && (square || dst.dim(2) == src.dim(2));
  if (same && rank == 2) same = dst.dim(1) == src.dim(1);
  if (!same) {
    dst = src;
    return;
  }
  const int64_t rows = src.dim(static_cast<int>(rank) - 2), cols = src.shape.back();
  const int64_t kr = std::min({r, rows, dst.dim(static_cast<int>(rank) - 2)});
  const int64_t kc = square ? kr : cols;  // columns of rows [0, kr) that are already right
  dst.resize_keep(src.shape, kr, kc);
  const int64_t heads = rank == 3 ? src.dim(0) : 1;
  for (int64_t h = 0; h < heads; ++h) {
    const float* s = rank == 3 ? src.head(h) : src.data.data();
    float* d = rank == 3 ? dst.head(h) : dst.data.data();
    const int64_t sld = rank == 3 ? src.ld() : cols, dld = rank == 3 ? dst.ld() : cols;
    for (int64_t i = kc < cols ? 0 : kr; i < rows; ++i) {
      const int64_t c0 = i < kr ? kc : 0;
      std::copy(s + i * sld + c0, s + i * sld + cols, d + i * dld + c0);
    }
  }
}

}  // namespace

// copy_changed names every field: one added to Trace or LayerTrace must be copied there
// too (then update these sizes, those of 64-bit libstdc++).
#if defined(__GLIBCXX__)
static_assert(sizeof(void*) != 8 || (sizeof(LayerTrace) == 1192 && sizeof(Trace) == 440),
              "a field was added to LayerTrace or Trace: copy it in copy_changed");
#endif

void reserve_trace_rows(Trace& t, int64_t need, int64_t grant) {
  if (!t.compact) return;
  auto room = [&](Tensor& x) {
    if (x.row_capacity() < need) x.reserve_rows(std::max(need, grant));
  };
  for (LayerTrace& lt : t.layers)
    for (Tensor* x : {&lt.q, &lt.k, &lt.v, &lt.out, &lt.row_stats, &lt.resid}) room(*x);
  room(t.final_hidden);
  room(t.final_resid);
}

namespace {
// dst = src, keeping the room to grow src's 2-D tensors have (a vector's copy gets only its
// size): a copy of a trace that is being typed into would otherwise move them on the next key.
void assign_keeping_room(Trace& dst, const Trace& src) {
  dst.layers.resize(src.layers.size());
  for (size_t l = 0; l < src.layers.size(); ++l)
    dst.layers[l].resid.data.reserve(src.layers[l].resid.data.capacity());
  dst.final_hidden.data.reserve(src.final_hidden.data.capacity());
  dst.final_resid.data.reserve(src.final_resid.data.capacity());
  dst = src;  // element by element: the vectors above keep their capacity
}
}  // namespace

void copy_changed(Trace& dst, const Trace& src, int64_t from_row, int from_layer) {
  if (dst.layers.size() != src.layers.size() || from_row <= 0) {
    assign_keeping_room(dst, src);
    return;
  }
  const int L = static_cast<int>(src.layers.size());
  for (int l = 0; l < L; ++l) {
    LayerTrace& d = dst.layers[static_cast<size_t>(l)];
    const LayerTrace& s = src.layers[static_cast<size_t>(l)];
    const int64_t r = l >= from_layer ? 0 : from_row;
    for (auto m : {&LayerTrace::q, &LayerTrace::k, &LayerTrace::v, &LayerTrace::scores, &LayerTrace::probs,
                   &LayerTrace::out, &LayerTrace::resid, &LayerTrace::row_stats})
      copy_rows(d.*m, s.*m, r);
    for (auto m : {&LayerTrace::gate, &LayerTrace::implicit}) copy_rows(d.*m, s.*m, r);
    for (auto m : {&LayerTrace::router, &LayerTrace::experts, &LayerTrace::expert_weights}) copy_rows(d.*m, s.*m, r);
    d.sinks = s.sinks;
    d.sink = s.sink;  // (H, T): small
    d.beta = s.beta;  // (Hv, T): small
    d.decay = s.decay;
    d.state_snaps = s.state_snaps;
    d.state_final = s.state_final;
    d.state_rows = s.state_rows;
    d.mixer = s.mixer;
    d.thumbs = s.thumbs;  // (H, n, n) pooled over the whole window: small, and any row moves it
    d.thumb_bucket = s.thumb_bucket;
    d.scale = s.scale;
    d.softcap = s.softcap;
    d.window = s.window;
    d.compact = s.compact;
  }
  const int64_t r = from_layer < L ? 0 : from_row;  // the final rows follow every layer
  copy_rows(dst.final_hidden, src.final_hidden, r);
  copy_rows(dst.final_resid, src.final_resid, r);
  if (src.logits_from == 0 && dst.logits_from == 0) copy_rows(dst.logits, src.logits, r);
  else dst.logits = src.logits;  // the last rows only
  dst.model = src.model;
  dst.backend = src.backend;
  dst.arith = src.arith;
  dst.block_size = src.block_size;
  dst.dropped = src.dropped;
  dst.tokens = src.tokens;
  dst.logits_from = src.logits_from;
  dst.row_loss = src.row_loss;
  dst.all_logits = src.all_logits;
  dst.hidden_only = src.hidden_only;
  dst.ablation = src.ablation;
  dst.compact = src.compact;
  dst.summaries = src.summaries;
}

void layout_trace(const ModelConfig& c, int T, int p, int max_threads, Trace& tr) {
  const int64_t H = c.n_head;
  struct Job {
    Tensor* t;
    std::vector<int64_t> shape;
    int64_t keep_cols;
  };
  std::vector<Job> jobs;
  double bytes = 0;
  // A small (heads, T) tensor: rows [0, p) of each head kept, the rest 0.
  auto keep_head_rows = [&](Tensor& t, int64_t heads) {
    Tensor fresh{{heads, T}, FloatBuf(static_cast<size_t>(heads * T), 0.f)};
    if (p > 0 && t.shape.size() == 2 && t.dim(0) == heads && t.dim(1) >= p)
      for (int64_t h = 0; h < heads; ++h)
        std::copy(t.data.begin() + h * t.dim(1), t.data.begin() + h * t.dim(1) + p, fresh.data.begin() + h * T);
    t = std::move(fresh);
  };
  for (size_t l = 0; l < tr.layers.size(); ++l) {
    LayerTrace& lt = tr.layers[l];
    lt.compact = tr.compact;
    lt.mixer = c.layer(static_cast<int>(l)).mixer;
    if (c.experts.count) {  // GPT-OSS: the router's logits and each token's chosen experts
      jobs.push_back({&lt.router, {T, c.experts.count}, c.experts.count});
      jobs.push_back({&lt.experts, {T, c.experts.top_k}, c.experts.top_k});
      jobs.push_back({&lt.expert_weights, {T, c.experts.top_k}, c.experts.top_k});
    }
    if (c.attn_sinks && lt.mixer == Mixer::Softmax) keep_head_rows(lt.sink, H);
    else lt.sink = Tensor{};
    if (lt.mixer == Mixer::ShortConv) {  // only what enters the layer (its convolution reads it back)
      jobs.push_back({&lt.resid, {T, c.n_embd}, c.n_embd});
      for (Tensor* t : {&lt.q, &lt.k, &lt.v, &lt.out, &lt.scores, &lt.probs, &lt.row_stats, &lt.thumbs, &lt.gate, &lt.beta,
                        &lt.decay, &lt.implicit})
        *t = Tensor{};
      continue;
    }
    if (lt.mixer == Mixer::GatedDeltaNet) {  // q, k, v, out, β, g, A and the memory's snapshots
      const LinearAttnDims& ld = c.linear;
      const int64_t Hv = ld.v_heads, dk = ld.k_dim, dv = ld.v_dim;
      jobs.push_back({&lt.q, {Hv, T, dk}, dk});
      jobs.push_back({&lt.k, {Hv, T, dk}, dk});
      jobs.push_back({&lt.v, {Hv, T, dv}, dv});
      jobs.push_back({&lt.out, {Hv, T, dv}, dv});
      jobs.push_back({&lt.resid, {T, c.n_embd}, c.n_embd});
      if (lt.compact)  // A's rows are swept from q, k, β and g when asked for (Stage::Implicit)
        lt.implicit = Tensor{};
      else
        jobs.push_back({&lt.implicit, {Hv, T, T}, p});
      keep_head_rows(lt.beta, Hv);  // (Hv, T)
      keep_head_rows(lt.decay, Hv);
      lt.state_snaps.resize(static_cast<size_t>(T / kStateEvery * Hv * dk * dv));  // the first ones stay
      for (Tensor* t : {&lt.scores, &lt.probs, &lt.row_stats, &lt.gate}) *t = Tensor{};  // thumbs: gated_delta_layer
      bytes += ((lt.compact ? 0.0 : Hv * T * T) + 2.0 * Hv * T * (dk + dv)) * sizeof(float);
      continue;
    }
    const int64_t KV = c.kv_heads_at(static_cast<int>(l)), d = c.head_size_at(static_cast<int>(l));  // Gemma 4's differ by layer
    if (c.attn_gate) jobs.push_back({&lt.gate, {H, T, d}, d});
    jobs.push_back({&lt.q, {H, T, d}, d});
    jobs.push_back({&lt.k, {KV, T, d}, d});
    jobs.push_back({&lt.v, {KV, T, d}, d});
    jobs.push_back({&lt.out, {H, T, d}, d});
    jobs.push_back({&lt.resid, {T, c.n_embd}, c.n_embd});
    if (tr.summaries) jobs.push_back({&lt.row_stats, {H, T, kRowStats}, kRowStats});
    else lt.row_stats = Tensor{};
    for (Tensor* t : {&lt.scores, &lt.probs}) {
      if (lt.compact)
        *t = Tensor{};
      else
        jobs.push_back({t, {H, T, T}, p});
    }
    bytes += (lt.compact ? 0.0 : 2.0 * H * T * T + 2.0 * (H + KV) * T * d) * sizeof(float);
  }
  jobs.push_back({&tr.final_hidden, {T, c.n_embd}, c.n_embd});
  jobs.push_back({&tr.final_resid, {T, c.n_embd}, c.n_embd});
  if (tr.all_logits) jobs.push_back({&tr.logits, {T, c.vocab_size}, c.vocab_size});
  const int threads = bytes > 64e6 ? max_threads : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].t->resize_keep(std::move(jobs[i].shape), p, jobs[i].keep_cols);
}

}  // namespace attnviz
