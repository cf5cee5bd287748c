// `attnviz-cli train --filmstrip L:H --text S --every N --filmstrip-out F`: the SVG's cells
// are the head's attention weights at each step, checked against the engine run on the
// initial weights (step 0) and on the final checkpoint; the PNG decodes with one tile per
// step side by side; bad filmstrip options are usage errors.
#include <gtest/gtest.h>

#include <tuple>
#include <stb/stb_image.h>

#include <filesystem>
#include <random>
#include <regex>
#include <sstream>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/train/train.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::cli;

class Filmstrip : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("filmstrip");
    std::string text;
    const char* words[] = {"cat", "dog", "bird", "fish"};
    std::mt19937 r(5);
    for (int i = 0; i < 200; ++i) text += std::string("a ") + words[r() % 4] + " sat. ";
    corpus_ = dir_ + "/corpus.txt";
    test::write_bytes(corpus_, text);
  }
  std::vector<std::string> train_args(const std::string& out_file) const {
    return {"train",
            "--corpus",
            corpus_,
            "--out",
            dir_ + "/ckpt",
            "--arch",
            "llama",
            "--layers",
            "2",
            "--embd",
            "16",
            "--heads",
            "2",
            "--block-size",
            "16",
            "--batch",
            "4",
            "--steps",
            "20",
            "--warmup",
            "2",
            "--eval-every",
            "10",
            "--seed",
            "3",
            "--quiet",
            "--filmstrip",
            "1:1",
            "--text",
            "a cat sat. a cat",
            "--every",
            "10",
            "--filmstrip-out",
            out_file};
  }
  // Layer 1 head 1's weights (T, T) on the filmstrip text, by the engine.
  std::vector<float> probs_of(std::shared_ptr<const Model> m) const {
    Engine e(m, make_cpu_backend());
    const Trace& t = e.run_text("a cat sat. a cat");
    const Tensor& p = t.layers[1].probs;  // (H, T, T), rows ld() apart
    std::vector<float> out;
    for (int64_t i = 0; i < p.dim(1); ++i)
      for (int64_t j = 0; j < p.dim(2); ++j) out.push_back(p.head(1)[i * p.ld() + j]);
    return out;
  }
  std::string dir_, corpus_;
};

TEST_F(Filmstrip, SvgCellsAreTheHeadsWeightsAtEachStep) {
  const auto r = cli(train_args(dir_ + "/f.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("filmstrip of layer 1 head 1 at 3 steps"), std::string::npos) << r.out;
  const std::string svg = test::read_file(dir_ + "/f.svg");
  for (const char* cap : {">step 0<", ">step 10<", ">step 20<"}) EXPECT_NE(svg.find(cap), std::string::npos) << cap;
  // Cells in document order: tile 0, then 1, then 2; a new tile starts at row 0, col 0 again.
  const std::regex cell("data-row=\"(\\d+)\" data-col=\"(\\d+)\" data-value=\"([^\"]+)\"");
  std::vector<std::vector<std::tuple<int, int, float>>> tiles;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it) {
    const int i = std::stoi((*it)[1]), j = std::stoi((*it)[2]);
    if ((i == 0 && j == 0) || tiles.empty()) tiles.emplace_back();
    tiles.back().emplace_back(i, j, std::stof((*it)[3]));
  }
  ASSERT_EQ(tiles.size(), 3u);
  const int T = 16;
  // Step 0: the seed's initial weights, made here from the options.
  TrainOptions o;  // as the run above was asked for: --arch llama --layers 2 --embd 16 --heads 2 --block-size 16 --seed 3
  o.arch = "llama";
  std::tie(o.layers, o.embd, o.heads, o.block_size) = std::make_tuple(2, 16, 2, 16);
  o.seed = 3;
  const Corpus corpus = load_corpus(corpus_, o.val_frac);
  auto init = std::make_shared<Model>();
  init->config = make_train_config(o, static_cast<int>(corpus.vocab.size()));
  init->weights = weights_from_params(init_params(init->config, o.seed));
  init->tokenizer = std::make_shared<const CharTokenizer>(corpus.vocab);
  // Step 20: the final checkpoint.
  const std::vector<std::vector<float>> expected = {probs_of(init), probs_of(load_model(dir_ + "/ckpt"))};
  for (int k : {0, 2}) {
    const auto& want = expected[k == 0 ? 0 : 1];
    int checked = 0;
    for (const auto& [i, j, v] : tiles[static_cast<size_t>(k)]) {
      if (j > i) continue;  // masked
      ASSERT_LT(i, T);
      EXPECT_NEAR(v, want[static_cast<size_t>(i) * T + j], 1e-6) << "tile " << k << " (" << i << "," << j << ")";
      ++checked;
    }
    EXPECT_EQ(checked, T * (T + 1) / 2) << "tile " << k;
  }
  // The weights changed between the first and the last frame.
  EXPECT_NE(std::get<2>(tiles[0][T + 0]), std::get<2>(tiles[2][T + 0]));
}

TEST_F(Filmstrip, PngDecodesWithOneTilePerStepSideBySide) {
  const auto r = cli(train_args(dir_ + "/f.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string png = test::read_file(dir_ + "/f.png");
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(png.data()),
                                            static_cast<int>(png.size()), &w, &h, &n, 3);
  ASSERT_TRUE(px) << stbi_failure_reason();
  // Three tiles of 16 cells of 12 pixels side by side: wider than three tiles' cells.
  EXPECT_GT(w, 3 * 16 * 12);
  EXPECT_GT(w, h);
  // The diagonal of causal attention: the first query's only key holds weight 1, drawn in
  // viridis' brightest colour (253, 231, 37) in every tile: at least 3 cells of 12x12.
  int yellow = 0;
  for (int k = 0; k < w * h; ++k)
    yellow += std::abs(px[3 * k] - 253) < 3 && std::abs(px[3 * k + 1] - 231) < 3 && std::abs(px[3 * k + 2] - 37) < 3;
  stbi_image_free(px);
  EXPECT_GE(yellow, 3 * 12 * 12);
}

TEST_F(Filmstrip, BadOptionsAreUsageErrors) {
  auto args = train_args(dir_ + "/f.png");
  auto with = [&](const std::string& flag, const std::string& value) {
    auto a = args;
    const auto it = std::find(a.begin(), a.end(), flag);
    *(it + 1) = value;
    return cli(a);
  };
  auto r = with("--filmstrip", "x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must be LAYER:HEAD"), std::string::npos) << r.err;
  r = with("--filmstrip", "2:0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the model has layers 0 … 1"), std::string::npos) << r.err;
  r = with("--text", "a CAT");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--text"), std::string::npos) << r.err;
  r = with("--filmstrip-out", dir_ + "/f.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(".png or .svg"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/f.png"));
  r = cli({"train", "--preset", "nope", "--out", dir_ + "/p"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown preset 'nope'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace attnviz
