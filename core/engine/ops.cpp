#include "core/engine/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnviz {

void layer_norm(const Mat& x, const Vec& w, const Vec& b, float eps, Mat& y) {
  y.resize(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const float mean = x.row(r).mean();
    const float var = (x.row(r).array() - mean).square().mean();
    const float inv = 1.f / std::sqrt(var + eps);
    y.row(r) = ((x.row(r).array() - mean) * inv * w.array() + b.array()).matrix();
  }
}

void rms_norm(const Mat& x, const Vec& w, float eps, Mat& y) {
  y.resize(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const float inv = 1.f / std::sqrt(x.row(r).squaredNorm() / static_cast<float>(x.cols()) + eps);
    y.row(r) = (x.row(r).array() * inv * w.array()).matrix();
  }
}

void norm(const ModelConfig& c, const Mat& x, const Vec& w, const Vec& b, Mat& y) {
  if (c.arch == Arch::Gpt2) layer_norm(x, w, b, c.norm_eps, y);
  else rms_norm(x, w, c.norm_eps, y);
}

namespace {
// A product of a few rows (appending a token) with a large matrix is a matrix-vector
// product: Eigen runs it on one thread, and it is bound by reading the matrix. Splitting
// the output columns over the threads reads the matrix with all of them.
bool split_for_bandwidth(Eigen::Index rows, Eigen::Index weights) {
  return rows <= 4 && weights >= (1 << 20) && omp_get_max_threads() > 1 && !omp_in_parallel();
}
}  // namespace

void linear(const Mat& x, const Mat& w, const Vec& b, Mat& y) {
  if (split_for_bandwidth(x.rows(), w.size())) {
    const int N = static_cast<int>(w.cols());
    y.resize(x.rows(), N);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < N; c += 256) y.middleCols(c, std::min(256, N - c)).noalias() = x * w.middleCols(c, std::min(256, N - c));
  } else {
    y.noalias() = x * w;
  }
  if (b.size()) y.rowwise() += b;
}

void linear_bt(const Mat& x, const Mat& wt, Eigen::Ref<Mat> y) {
  if (split_for_bandwidth(x.rows(), wt.size())) {
    const int N = static_cast<int>(wt.rows());
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r += 1024) y.middleCols(r, std::min(1024, N - r)).noalias() = x * wt.middleRows(r, std::min(1024, N - r)).transpose();
  } else {
    y.noalias() = x * wt.transpose();
  }
}

// Both through Eigen's array functions, which are vectorised (a scalar std::exp per element
// was 7 % of the tiny model's forward pass).
void gelu_tanh_inplace(Mat& x) {
  const float k = std::sqrt(2.f / static_cast<float>(M_PI));
  auto v = x.array();
  v = 0.5f * v * (1.f + (k * (v + 0.044715f * v.cube())).tanh());
}

void swiglu_inplace(Mat& gate, const Mat& up) {
  auto g = gate.array();
  g = g / (1.f + (-g).exp()) * up.array();
}

void rope_inplace(Mat& x, int heads, int d, int pos0, float theta) {
  const int half = d / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / d));
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double pos = static_cast<double>(pos0 + r);
    for (int i = 0; i < half; ++i) {
      const double a = pos * inv_freq[i];
      const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      for (int h = 0; h < heads; ++h) {
        float* p = &x(r, h * d);
        const float x1 = p[i], x2 = p[i + half];
        p[i] = x1 * c - x2 * s;
        p[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

void softmax_causal_row(const float* masked, int len, int last, float* probs) {
  // Vectorised through Eigen (its exp is a SIMD polynomial, within a few ulp of std::exp).
  // The exp runs over whole SIMD packets, in an aligned buffer of its own, padded with −inf
  // (exp → 0) up to a multiple of the packet size: Eigen would take a remainder, and on
  // the row in place the elements before the first aligned one, through the scalar expf,
  // which is slower (6 % of the tiny model's forward pass) and rounds differently. So every
  // element goes through the same exp wherever the row lies and however long it is (a
  // compact trace recomputes rows elsewhere and at a later T; see LayerTrace).
  constexpr int kPacket = 16;
  const int n = last + 1;
  const int padded = (n + kPacket - 1) / kPacket * kPacket;
  const Eigen::Map<const Eigen::ArrayXf> x(masked, n);
  const float mx = x.maxCoeff();  // a max is the same in any order
  thread_local Eigen::ArrayXf buf;
  if (buf.size() < padded) buf.resize(std::max<Eigen::Index>(padded, 2 * buf.size()));
  auto e = buf.head(padded);
  e.head(n) = x - mx;
  e.tail(padded - n).setConstant(-INFINITY);
  e = e.exp();
  const float inv = 1.f / e.head(n).sum();  // from element 0 of an aligned buffer: always the same order
  Eigen::Map<Eigen::ArrayXf>(probs, n) = e.head(n) * inv;  // masked may be probs (in place): read above
  std::fill(probs + n, probs + len, 0.f);  // exactly 0 where masked
}

int attention_row_block(int T) { return std::max(8, std::min(128, (64 * 1024) / std::max(T, 1))); }

void scores_rows(const float* q, int64_t ldq, const float* kt, int64_t ldk, int rows, int d, int T, float* s,
                 int64_t lds) {
  // Four query rows share each load of a row of Kᵀ; keys in chunks that stay in L1.
  constexpr int kRows = 4, kChunk = 256;
  for (int r0 = 0; r0 < rows; r0 += kRows) {
    const int nr = std::min(kRows, rows - r0);
    for (int j0 = 0; j0 < T; j0 += kChunk) {
      const int nj = std::min(kChunk, T - j0);
      float acc[kRows][kChunk];
      for (int r = 0; r < nr; ++r) std::fill_n(acc[r], nj, 0.f);
      for (int k = 0; k < d; ++k) {
        const float* kr = kt + k * ldk + j0;
        for (int r = 0; r < nr; ++r) {
          const float a = q[(r0 + r) * ldq + k];
          for (int j = 0; j < nj; ++j) acc[r][j] += a * kr[j];
        }
      }
      for (int r = 0; r < nr; ++r) std::copy_n(acc[r], nj, s + (r0 + r) * lds + j0);
    }
  }
}

void attention_block(ConstRowsRef Q, ConstRowsRef Kt, float scale, int r0, RowsRef S, RowsRef P) {
  const int rb = static_cast<int>(S.rows()), T = static_cast<int>(Kt.cols()), d = static_cast<int>(Kt.rows());
  scores_rows(Q.data() + r0 * Q.outerStride(), Q.outerStride(), Kt.data(), Kt.outerStride(), rb, d, T, S.data(),
              S.outerStride());  // (rb, T)
  for (int r = 0; r < rb; ++r) {
    const int i = r0 + r;
    P.row(r).head(i + 1) = S.row(r).head(i + 1) * scale;  // the visible part of `masked`
    softmax_causal_row(&P(r, 0), T, i, &P(r, 0));         // in place; zeroes j > i
  }
}

}  // namespace attnviz
