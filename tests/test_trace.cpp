// Tensor::resize_keep against a plain model of what it must do: after every reshape the
// kept block [0, keep_rows) × [0, keep_cols) of every head has its old values and every
// other cell of the new shape is 0 (an unchanged shape keeps everything), whatever the
// storage layout; appending one row and
// column at a time moves nothing once the tensor has room (the data pointer stays).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/engine/ops.h"
#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {
namespace {

// Fills every cell of the logical shape with a distinct value; returns them dense.
std::vector<float> fill(Tensor& t, float base) {
  std::vector<float> dense;
  for (int64_t h = 0; h < t.dim(0); ++h)
    for (int64_t i = 0; i < t.dim(1); ++i)
      for (int64_t j = 0; j < t.dim(2); ++j) dense.push_back(t.at(h, i, j) = base + static_cast<float>(dense.size()));
  return dense;
}

void expect_kept(const Tensor& t, const std::vector<int64_t>& old_shape, const std::vector<float>& old, int64_t kr,
                 int64_t kc, const std::string& what) {
  for (int64_t h = 0; h < t.dim(0); ++h)
    for (int64_t i = 0; i < t.dim(1); ++i)
      for (int64_t j = 0; j < t.dim(2); ++j) {
        const bool kept = i < kr && j < kc;
        const float want = kept ? old[static_cast<size_t>((h * old_shape[1] + i) * old_shape[2] + j)] : 0.f;
        ASSERT_EQ(t.at(h, i, j), want) << what << " at " << h << "," << i << "," << j;
      }
  // The dense copy and head_dense agree with at().
  const Tensor d = t.dense_copy();
  ASSERT_TRUE(d.dense());
  std::vector<float> scratch;
  for (int64_t h = 0; h < t.dim(0); ++h) {
    const float* hd = t.head_dense(h, scratch);
    for (int64_t i = 0; i < t.dim(1); ++i)
      for (int64_t j = 0; j < t.dim(2); ++j) {
        ASSERT_EQ(d.at(h, i, j), t.at(h, i, j)) << what;
        ASSERT_EQ(hd[i * t.dim(2) + j], t.at(h, i, j)) << what;
      }
  }
}

TEST(Tensor, AppendingTokensKeepsValuesAndStopsMovingOnceThereIsRoom) {
  Tensor t;
  t.resize_keep({3, 5, 5}, 0, 0);
  EXPECT_TRUE(t.dense());
  std::vector<float> vals = fill(t, 1.f);
  std::vector<int64_t> shape = t.shape;
  int moves = 0;
  for (int64_t T = 6; T <= 40; ++T) {  // append one token: (T-1, T-1) → (T, T), keep all
    const float* before = t.data.data();
    t.resize_keep({3, T, T}, T - 1, T - 1);
    moves += t.data.data() != before;
    expect_kept(t, shape, vals, T - 1, T - 1, "append to " + std::to_string(T));
    vals = fill(t, static_cast<float>(T) * 1000.f);
    shape = t.shape;
  }
  EXPECT_LE(moves, 12) << "35 appends should move the data only when it outgrows its room";
  // Shrink (the window drops the last token), then grow back: no move.
  const float* before = t.data.data();
  t.resize_keep({3, 39, 39}, 39, 39);
  expect_kept(t, shape, vals, 39, 39, "shrink");
  vals = fill(t, 7.f);
  shape = t.shape;
  t.resize_keep({3, 40, 40}, 39, 39);
  expect_kept(t, shape, vals, 39, 39, "grow back");
  EXPECT_EQ(t.data.data(), before);
}

TEST(Tensor, RandomReshapesMatchThePlainModel) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dim(1, 20), coin(0, 3);
  Tensor t;
  t.resize_keep({2, 4, 6}, 0, 0);
  std::vector<float> vals = fill(t, 0.5f);
  std::vector<int64_t> shape = t.shape;
  for (int step = 0; step < 300; ++step) {
    const int64_t rows = dim(rng), cols = coin(rng) == 0 ? shape[2] : dim(rng);
    const int64_t keep_r = std::uniform_int_distribution<int64_t>(0, rows)(rng);
    const int64_t keep_c = std::uniform_int_distribution<int64_t>(0, cols)(rng);
    t.resize_keep({2, rows, cols}, keep_r, keep_c);
    int64_t kr = std::min({keep_r, shape[1], rows}), kc = std::min({keep_c, shape[2], cols});
    if (kr == 0 || kc == 0) kr = kc = 0;
    if (rows == shape[1] && cols == shape[2]) kr = rows, kc = cols;  // same shape: everything stays
    expect_kept(t, shape, vals, kr, kc, "step " + std::to_string(step));
    vals = fill(t, static_cast<float>(step));
    shape = t.shape;
  }
}

TEST(Tensor, TwoDimensionalRowsGrowInPlaceOfTheirValues) {
  Tensor t;
  t.resize_keep({3, 4}, 0, 0);
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i + 1);
  t.resize_keep({5, 4}, 3, 4);
  ASSERT_EQ(t.data.size(), 20u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(t.data[i], static_cast<float>(i + 1));
  for (size_t i = 12; i < 20; ++i) EXPECT_EQ(t.data[i], 0.f);
  t.resize_keep({2, 3}, 2, 2);  // fewer columns: rows re-laid out, the rest zero
  EXPECT_EQ(t.data, (FloatBuf{1, 2, 0, 5, 6, 0}));
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {

bool on_64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// Every tensor's storage starts on a 64-byte boundary (core/aligned.h), through every way
// resize_keep re-lays it out, whatever the heap handed out before; Eigen's too.
TEST(Tensor, StorageIs64ByteAligned) {
  std::vector<std::unique_ptr<char[]>> litter;  // odd-sized blocks between the tensors
  Tensor t;
  for (int64_t n : {1, 3, 7, 17, 33, 100, 5, 260}) {
    litter.emplace_back(new char[static_cast<size_t>(n) * 3 + 1]);
    t.resize_keep({3, n, n + 1}, n / 2, n / 2);
    EXPECT_TRUE(on_64(t.data.data())) << "3-D " << n;
    Tensor m;
    m.resize_keep({n, n + 3}, 0, 0);
    EXPECT_TRUE(on_64(m.data.data())) << "2-D " << n;
    const Tensor d = t.dense_copy();
    EXPECT_TRUE(on_64(d.data.data())) << "dense copy " << n;
    Mat e(n, n + 1);
    EXPECT_TRUE(on_64(e.data())) << "Eigen " << n;
  }
  EXPECT_EQ(EIGEN_MAX_ALIGN_BYTES, 64);
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {

// keys_transposed in tiles against Eigen's transpose, exactly: shapes that are not whole
// tiles, rows further apart than their length, `out` reused from another shape, and a head
// of many whole tiles (the 8 × 8 register transposes where the build has AVX).
TEST(KeysTransposed, EqualsTheTranspose) {
  Mat out(3, 5);
  for (auto [T, d, ld] : {std::tuple<int, int, int>{37, 24, 30}, {16, 16, 16}, {1, 64, 64}, {129, 7, 9}, {517, 128, 136}}) {
    Mat store = Mat::Random(T, ld);
    const ConstRowsRef K(Eigen::Map<const Mat, 0, Eigen::OuterStride<>>(store.data(), T, d, Eigen::OuterStride<>(ld)));
    const Mat want = K.transpose();
    keys_transposed(K, out);
    ASSERT_EQ(out.rows(), d);
    ASSERT_EQ(out.cols(), T);
    EXPECT_TRUE(out == want) << T << " x " << d;
    EXPECT_TRUE(keys_transposed(K) == want) << T << " x " << d;
  }
}

// scores_rows: a row's scores are the same bits however many rows are computed with it (an
// appended token alone, or every row of a full pass), and each is q·kᵀ within float
// rounding of a double-precision sum (the tolerance: 1e-5 of Σ|q_k·k_k|).
TEST(ScoresRows, EachRowIsTheSameAloneOrInATileAndIsTheDotProduct) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto [rows, d, T] : {std::tuple<int, int, int>{9, 64, 131}, {5, 256, 64}, {7, 40, 15}, {4, 128, 200}, {1, 512, 77}}) {
    const int64_t ldq = d + 3, ldk = T + 5, lds = T + 2;
    std::vector<float> q(static_cast<size_t>(rows) * ldq), kt(static_cast<size_t>(d) * ldk);
    for (float& v : q) v = nd(rng);
    for (float& v : kt) v = nd(rng);
    std::vector<float> all(static_cast<size_t>(rows) * lds, -1.f);
    scores_rows(q.data(), ldq, kt.data(), ldk, rows, d, T, all.data(), lds);
    for (int i = 0; i < rows; ++i) {
      std::vector<float> one(static_cast<size_t>(T) + 1, -7.f);
      scores_rows(q.data() + i * ldq, ldq, kt.data(), ldk, 1, d, T, one.data(), T + 1);
      EXPECT_EQ(one[static_cast<size_t>(T)], -7.f) << "wrote past T";
      for (int j = 0; j < T; ++j) {
        ASSERT_EQ(one[static_cast<size_t>(j)], all[static_cast<size_t>(i) * lds + j])
            << "row " << i << " key " << j << " of " << rows << " x " << T << " d " << d;
        double ref = 0, mag = 0;
        for (int k = 0; k < d; ++k) {
          const double t = double(q[static_cast<size_t>(i) * ldq + k]) * kt[static_cast<size_t>(k) * ldk + j];
          ref += t, mag += std::fabs(t);
        }
        ASSERT_NEAR(all[static_cast<size_t>(i) * lds + j], ref, 1e-5 * mag) << "row " << i << " key " << j;
      }
    }
  }
}

}  // namespace
}  // namespace attnviz
