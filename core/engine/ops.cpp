#include "core/engine/ops.h"

#include "core/aligned.h"
#include "core/engine/mask.h"

#include <omp.h>

#if defined(ATTNVIZ_BLAS_OPENBLAS)
#include <cblas.h>  // OpenBLAS's (libopenblas-openmp-dev)
#elif defined(ATTNVIZ_BLAS_BLIS)
#include <blis.h>  // BLIS's, with its CBLAS layer (libblis-openmp-dev)
#endif

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
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

void rms_norm_heads(Mat& x, int heads, int d, const Vec& w, float eps) {
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (int h = 0; h < heads; ++h) {
      auto seg = x.row(r).segment(static_cast<Eigen::Index>(h) * d, d);
      const float inv = 1.f / std::sqrt(seg.squaredNorm() / static_cast<float>(d) + eps);
      if (w.size()) seg = (seg.array() * inv * w.array()).matrix();
      else seg *= inv;  // a norm without a weight (Gemma 4's V-norm)
    }
}

void mlp_activation(const ModelConfig& c, Mat& gate, const Mat& up) {
  if (c.arch == Arch::Gpt2) return gelu_tanh_inplace(gate);
  if (c.mlp == MlpKind::SwiGLU) return swiglu_inplace(gate, up);
  gelu_tanh_inplace(gate);
  if (c.mlp == MlpKind::GeGLU) gate.array() *= up.array();
}

void finish_logits(const ModelConfig& c, float* logits, int64_t n) {
  if (const float cap = c.final_softcap; cap > 0)
    for (int64_t i = 0; i < n; ++i) logits[i] = softcap_value(logits[i], cap);
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

// linear's and linear_bt's products of more than 4 rows go to the library chosen at
// configure time (ATTNVIZ_BLAS): Eigen, or a BLAS through cblas_sgemm on the same row-major
// storage. On the 2-core Zen 5, OpenBLAS's Skylake-X kernels ran the GPT-2-small and
// Qwen2.5-0.5B products at 430-465 GFLOP/s against Eigen's 275-350, and the (256, 768) ·
// (768, 50257)ᵀ logits at 380 against 195 (bench/bench_blas.cpp).
#if defined(ATTNVIZ_BLAS_OPENBLAS) || defined(ATTNVIZ_BLAS_BLIS)
#define ATTNVIZ_BLAS_GEMM 1

#if defined(ATTNVIZ_BLAS_OPENBLAS)
// Only in OpenBLAS built with DYNAMIC_ARCH (Debian's): forget the kernels chosen when the
// library was loaded, and choose again (reading OPENBLAS_CORETYPE).
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
#endif

namespace {
bool cpu_has_avx512() {
  __builtin_cpu_init();  // this runs before main(), maybe before libgcc has looked at the CPU
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

// The kernels, chosen once before main(), before any product: on a CPU with AVX-512, the
// libraries' Skylake-X kernels, whatever they would take themselves. Debian's OpenBLAS
// 0.3.21 detects Zen 4/5 as Cooperlake (the same sgemm kernels), but OPENBLAS_CORETYPE
// overrides its detection, and the development machine's environment carries
// OPENBLAS_CORETYPE=Haswell (AVX2: about half the speed); BLIS 0.9.0 knows no CPU after Zen 3
// and falls back to its generic C kernels. Elsewhere the libraries choose for themselves.
// The variable is set only while the library reads it, then put back as it was.
class BlasKernels {
 public:
  BlasKernels() {
    if (!cpu_has_avx512()) return;
#if defined(ATTNVIZ_BLAS_OPENBLAS)
    // OpenBLAS read OPENBLAS_CORETYPE when it was loaded, before this runs: choose again.
    const std::string core = openblas_get_corename();
    if (gotoblas_dynamic_quit && gotoblas_dynamic_init && core != "SkylakeX" && core != "Cooperlake" &&
        core != "SapphireRapids") {
      const Env env("OPENBLAS_CORETYPE", "SkylakeX");
      gotoblas_dynamic_quit();
      gotoblas_dynamic_init();
    }
#else
    // BLIS reads BLIS_ARCH_TYPE (an arch_t number, not a name: a name reads as 0) in bli_init,
    // which it would otherwise run at its first call.
    const Env env("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(BLIS_ARCH_SKX)).c_str());
    bli_init();
#endif
  }

 private:
  // An environment variable set for the scope, then restored (or removed).
  class Env {
   public:
    Env(const char* name, const char* value) : name_(name) {
      if (const char* old = std::getenv(name)) old_ = old, had_ = true;
      setenv(name, value, 1);
    }
    ~Env() {
      if (had_) setenv(name_, old_.c_str(), 1);
      else unsetenv(name_);
    }
    Env(const Env&) = delete;
    Env& operator=(const Env&) = delete;

   private:
    const char* name_;
    std::string old_;
    bool had_ = false;
  };
};
const BlasKernels blas_kernels;

// Both libraries keep one thread count of their own: follow OpenMP's, which the CPU backend
// lowers to 1 for small passes (ThreadScope). Inside a parallel region both run one thread.
void blas_threads() {
  if (omp_in_parallel()) return;
  const int n = omp_get_max_threads();
#if defined(ATTNVIZ_BLAS_OPENBLAS)
  if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
#else
  if (bli_thread_get_num_threads() != n) bli_thread_set_num_threads(n);
#endif
}

// A few rows (appending a token) stay on Eigen: cblas_sgemm ran (1, 896) · (896, 4864) at a
// fifth of the speed of the column split, and Eigen's single-threaded product is as fast for
// the small ones. So an append computes exactly what it did before.
// (Empty products stay there too: a BLAS refuses a leading dimension of 0.)
bool blas_rows(Eigen::Index rows) { return rows > 4; }

// y (M, N), rows ldy apart = x (M, K) · W for W (K, N) row-major, or (transposed) x · Wᵀ for
// W (N, K): `w` points at W's first element, its rows ldw apart (a block of rows of a
// larger matrix works: the unembedding a vocabulary block at a time).
void blas_gemm(const Mat& x, const float* w, Eigen::Index ldw, Eigen::Index N, bool transposed, float* y,
               Eigen::Index ldy) {
  const int M = static_cast<int>(x.rows()), K = static_cast<int>(x.cols());
  blas_threads();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans, M, static_cast<int>(N), K, 1.f,
              x.data(), K, w, static_cast<int>(ldw), 0.f, y, static_cast<int>(ldy));
}
}  // namespace
#endif

void linear(const Mat& x, const Mat& w, const Vec& b, Mat& y) {
  if (split_for_bandwidth(x.rows(), w.size())) {
    const int N = static_cast<int>(w.cols());
    y.resize(x.rows(), N);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < N; c += 256) y.middleCols(c, std::min(256, N - c)).noalias() = x * w.middleCols(c, std::min(256, N - c));
#ifdef ATTNVIZ_BLAS_GEMM
  } else if (blas_rows(x.rows()) && x.cols() && w.cols()) {
    eigen_assert(x.cols() == w.rows());
    y.resize(x.rows(), w.cols());
    blas_gemm(x, w.data(), w.cols(), w.cols(), false, y.data(), y.cols());
#endif
  } else {
    y.noalias() = x * w;
  }
  if (b.size()) y.rowwise() += b;
}

void linear_bt(const Mat& x, const Mat& wt, Eigen::Ref<Mat> y, Eigen::Index r0, Eigen::Index n) {
  if (n < 0) n = wt.rows() - r0;
  const auto w = wt.middleRows(r0, n);  // (n, C)
  if (split_for_bandwidth(x.rows(), w.size())) {
    const int N = static_cast<int>(n);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r += 1024) y.middleCols(r, std::min(1024, N - r)).noalias() = x * w.middleRows(r, std::min(1024, N - r)).transpose();
#ifdef ATTNVIZ_BLAS_GEMM
  } else if (blas_rows(x.rows()) && x.cols() && n) {
    eigen_assert(x.cols() == wt.cols() && y.rows() == x.rows() && y.cols() == n);
    blas_gemm(x, w.data(), wt.cols(), n, true, y.data(), y.outerStride());
#endif
  } else {
    y.noalias() = x * w.transpose();
  }
}

void gemm_bt(const float* x, int64_t M, int64_t K, int64_t ldx, const float* w, int64_t N, int64_t ldw, float* y,
             int64_t ldy) {
  if (M == 0 || N == 0) return;
#ifdef ATTNVIZ_BLAS_GEMM
  if (blas_rows(M) && K) {
    blas_threads();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                1.f, x, static_cast<int>(ldx), w, static_cast<int>(ldw), 0.f, y, static_cast<int>(ldy));
    return;
  }
#endif
  using Stride = Eigen::OuterStride<>;
  const Eigen::Map<const Mat, 0, Stride> X(x, M, K, Stride(ldx)), W(w, N, K, Stride(ldw));
  Eigen::Map<Mat, 0, Stride> Y(y, M, N, Stride(ldy));
  Y.noalias() = X * W.transpose();
}

std::string blas_kernels() {
#if defined(ATTNVIZ_BLAS_OPENBLAS)
  return openblas_get_corename();
#elif defined(ATTNVIZ_BLAS_BLIS)
  return bli_arch_string(bli_arch_query_id());
#else
  return "";
#endif
}

const char* blas_name() {
#if defined(ATTNVIZ_BLAS_OPENBLAS)
  return "openblas";
#elif defined(ATTNVIZ_BLAS_BLIS)
  return "blis";
#else
  return "eigen";
#endif
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

void rope_inplace(Mat& x, int heads, int d, int pos0, const std::vector<double>& inv_freq_d, float mscale) {
  const int half = static_cast<int>(inv_freq_d.size());  // rot / 2
  std::vector<float> inv_freq(inv_freq_d.begin(), inv_freq_d.end());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double pos = static_cast<double>(pos0 + r);
    for (int i = 0; i < half; ++i) {
      const double a = pos * inv_freq[i];
      const float c = static_cast<float>(std::cos(a)) * mscale, s = static_cast<float>(std::sin(a)) * mscale;
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
  softmax_window_row(masked, len, 0, last, probs);
}

void softmax_window_row(const float* masked, int len, int first, int last, float* probs, const float* sink,
                        float* sink_p) {
  // Vectorised through Eigen (its exp is a SIMD polynomial, within a few ulp of std::exp).
  // The exp runs over whole SIMD packets, in an aligned buffer of its own, padded with −inf
  // (exp → 0) up to a multiple of the packet size: Eigen would take a remainder, and on
  // the row in place the elements before the first aligned one, through the scalar expf,
  // which is slower (6 % of the tiny model's forward pass) and rounds differently. So every
  // element goes through the same exp wherever the row lies and however long it is (a
  // compact trace recomputes rows elsewhere and at a later T; see LayerTrace).
  constexpr int kPacket = 16;
  const int n = last + 1 - first;
  const int padded = (n + kPacket - 1) / kPacket * kPacket;
  const Eigen::Map<const Eigen::ArrayXf> x(masked + first, n);
  const float mx = sink ? std::max(x.maxCoeff(), *sink) : x.maxCoeff();  // a max is the same in any order
  thread_local Eigen::ArrayXf buf;
  if (buf.size() < padded) buf.resize(std::max<Eigen::Index>(padded, 2 * buf.size()));
  auto e = buf.head(padded);
  e.head(n) = x - mx;
  e.tail(padded - n).setConstant(-INFINITY);
  e = e.exp();
  // From element 0 of an aligned buffer: always the same order; the sink's term last.
  const float e_sink = sink ? std::exp(*sink - mx) : 0.f;
  const float inv = 1.f / (e.head(n).sum() + e_sink);
  if (sink_p) *sink_p = e_sink * inv;
  Eigen::Map<Eigen::ArrayXf>(probs + first, n) = e.head(n) * inv;  // masked may be probs (in place): read above
  std::fill(probs, probs + first, 0.f);         // exactly 0 where masked: outside the window
  std::fill(probs + last + 1, probs + len, 0.f);  // and after the diagonal
}

int attention_row_block(int T) { return std::max(8, std::min(128, (64 * 1024) / std::max(T, 1))); }

namespace {

// 16 floats in one vector register (a zmm with AVX-512; two ymm or four xmm elsewhere).
typedef float V16 __attribute__((vector_size(64)));
V16 load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

#if defined(__AVX__)
namespace {
// Kᵀ rows [k0, k0 + 8) × columns [j0, j0 + 8) from K rows [j0, j0 + 8) × columns [k0, k0 + 8),
// in registers: pairs interleaved, then quads, then the 128-bit halves exchanged.
inline void transpose8x8(const float* src, Eigen::Index lds, float* dst, Eigen::Index ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
}  // namespace
#endif

void keys_transposed(ConstRowsRef K, Mat& out) {
  const Eigen::Index T = K.rows(), d = K.cols();
  out.resize(d, T);
  // In 16 × 16 tiles: reading K row by row and writing Kᵀ column by column both stay in cache.
  // With AVX each tile's whole 8 × 8 blocks move through registers (appending a token
  // transposes every layer's keys: 14.7 M values for the Llama-3.2-3B shape at T = 512).
  constexpr Eigen::Index kTile = 16;
  for (Eigen::Index j0 = 0; j0 < T; j0 += kTile)
    for (Eigen::Index k0 = 0; k0 < d; k0 += kTile) {
      const Eigen::Index j1 = std::min(j0 + kTile, T), k1 = std::min(k0 + kTile, d);
#if defined(__AVX__)
      if (j1 - j0 == kTile && k1 - k0 == kTile) {
        for (Eigen::Index j = j0; j < j1; j += 8)
          for (Eigen::Index k = k0; k < k1; k += 8)
            transpose8x8(K.data() + j * K.outerStride() + k, K.outerStride(), out.data() + k * out.cols() + j, out.cols());
        continue;
      }
#endif
      for (Eigen::Index j = j0; j < j1; ++j)
        for (Eigen::Index k = k0; k < k1; ++k) out(k, j) = K(j, k);
    }
}

Mat keys_transposed(ConstRowsRef K) {
  Mat out;
  keys_transposed(K, out);
  return out;
}

namespace {
// R rows (1 ≤ R ≤ 4) of S: qr[r] the query of row r, S's row r at s + r·lds. Tiles of R × 64
// keys, then of R × 16, the last < 16 keys from `tail` (the keys [T16, T) zero-padded to 16).
template <int R>
void scores_tile_rows(const float* const* qr, const float* kt, int64_t ldk, int d, int T, const float* tail,
                      float* s, int64_t lds) {
  const int T16 = T / 16 * 16;
  int j0 = 0;
  for (; j0 + 64 <= T; j0 += 64) {
    V16 c[R][4] = {};
    for (int k = 0; k < d; ++k) {
      const float* kr = kt + k * ldk + j0;
      const V16 b[4] = {load16(kr), load16(kr + 16), load16(kr + 32), load16(kr + 48)};
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const V16 a = V16{} + qr[r][k];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) c[r][v] = c[r][v] + a * b[v];
      }
    }
    for (int r = 0; r < R; ++r) std::memcpy(s + r * lds + j0, c[r], sizeof c[r]);
  }
  for (; j0 < T; j0 += 16) {
    const bool last = j0 == T16;  // the padded block
    const float* base = last ? tail : kt + j0;
    const int64_t ld = last ? 16 : ldk;
    V16 c[R] = {};
    for (int k = 0; k < d; ++k) {
      const V16 b = load16(base + k * ld);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) c[r] = c[r] + (V16{} + qr[r][k]) * b;
    }
    for (int r = 0; r < R; ++r) {
      float out[16];
      std::memcpy(out, &c[r], sizeof out);
      std::copy_n(out, std::min(16, T - j0), s + r * lds + j0);
    }
  }
}
}  // namespace

void scores_rows(const float* q, int64_t ldq, const float* kt, int64_t ldk, int rows, int d, int T, float* s,
                 int64_t lds) {
  // A 4 × 64 tile of S in 16 registers; per k, four 16-key vectors of Kᵀ and four broadcast
  // queries make 16 multiply-adds. Past the last whole 64 keys, 16 keys per vector; the
  // last < 16 keys are copied into a zero-padded 16-key block first. So every element is
  // the same vector-lane chain acc = acc + q[k]·kᵀ[k] over k in order, whatever the shape
  // (a scalar loop for the remainder would round differently where the compiler fuses the
  // vector multiply-add). The last tile of rows takes as many rows as are left (an appended
  // token: one), with the same chain per element.
  const int T16 = T / 16 * 16;
  FloatBuf tail(T16 < T ? static_cast<size_t>(d) * 16 : 0, 0.f);  // (d, 16): keys [T16, T)
  for (int k = 0; k < d && T16 < T; ++k) std::copy_n(kt + k * ldk + T16, T - T16, &tail[static_cast<size_t>(k) * 16]);
  for (int r0 = 0; r0 < rows; r0 += 4) {
    const float* qr[4];
    const int nr = std::min(4, rows - r0);
    for (int r = 0; r < nr; ++r) qr[r] = q + (r0 + r) * ldq;
    float* sr = s + r0 * lds;
    switch (nr) {
      case 1: scores_tile_rows<1>(qr, kt, ldk, d, T, tail.data(), sr, lds); break;
      case 2: scores_tile_rows<2>(qr, kt, ldk, d, T, tail.data(), sr, lds); break;
      case 3: scores_tile_rows<3>(qr, kt, ldk, d, T, tail.data(), sr, lds); break;
      default: scores_tile_rows<4>(qr, kt, ldk, d, T, tail.data(), sr, lds); break;
    }
  }
}

void attention_block(ConstRowsRef Q, ConstRowsRef Kt, const AttnRule& rule, int r0, RowsRef S, RowsRef P,
                     float* sink_p) {
  const int rb = static_cast<int>(S.rows()), T = static_cast<int>(S.cols()), d = static_cast<int>(Kt.rows());
  scores_rows(Q.data() + r0 * Q.outerStride(), Q.outerStride(), Kt.data(), Kt.outerStride(), rb, d, T, S.data(),
              S.outerStride());  // (rb, T)
  for (int r = 0; r < rb; ++r) {
    const int i = r0 + r, first = window_first(i, rule.window);  // keys [first, i] are seen
    P.row(r).head(i + 1) = S.row(r).head(i + 1) * rule.scale;  // the visible part of `masked`
    if (rule.softcap > 0)
      for (int j = first; j <= i; ++j) P(r, j) = softcap_value(P(r, j), rule.softcap);
    softmax_window_row(&P(r, 0), T, first, i, &P(r, 0), rule.sink, sink_p ? sink_p + r : nullptr);  // in place; zeroes j > i and j < first
  }
}

}  // namespace attnviz
