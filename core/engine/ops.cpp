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
  // The exp runs over whole SIMD packets: the row is padded with −inf (exp → 0) up to a
  // multiple of the packet size, since Eigen would do the remainder with a scalar expf
  // (6 % of the tiny model's forward pass, for rows averaging 128 entries).
  using ArrC = Eigen::Map<const Eigen::ArrayXf>;
  using Arr = Eigen::Map<Eigen::ArrayXf>;
  constexpr int kPacket = 16;
  const int n = last + 1;
  const int padded = std::min(len, (n + kPacket - 1) / kPacket * kPacket);
  const float mx = ArrC(masked, n).maxCoeff();
  Arr p(probs, padded);
  p.head(n) = ArrC(masked, n) - mx;  // masked may be probs (in place): element by element
  p.tail(padded - n).setConstant(-INFINITY);
  p = p.exp();
  p.tail(padded - n).setZero();  // exactly 0 where masked, whatever exp(−inf) rounds to
  p.head(n) *= 1.f / p.head(n).sum();
  if (len > padded) Arr(probs + padded, len - padded).setZero();
}

}  // namespace attnviz
