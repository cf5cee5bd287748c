// Export: PNG pixels carry the colormap's colours for the recorded values (masked cells in
// the masked grey), SVG has one <rect> per cell with the value and the token labels, CSV
// and NPY round-trip to the recorded float32 values exactly, and failures leave no file.
#include <gtest/gtest.h>
#include <stb/stb_image.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/export.h"
#include "core/model/safetensors.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

class Export : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto c = test::small_config("llama", 2, 32, 4, 2, 12, 32);
    const std::string dir = test::make_model_dir(c, 21, "export");
    // A Chinese vocabulary, so labels must render CJK.
    std::vector<std::string> pieces = {"春", "江", "花", "月", "夜", "潮", "水", "连", "海", "平", " ", "a"};
    write_file_atomic(dir + "/tokenizer.json", CharTokenizer(pieces).to_json());
    engine_ = new Engine(load_model(dir), make_cpu_backend());
    engine_->run_text("春江潮水连海平");
  }
  static const Trace& trace() { return engine_->trace(); }
  static const Model& model() { return engine_->model(); }
  // One matrix: `stage` of (layer, head), −1 for all of them.
  static ExportOptions one(Stage stage, int layer, int head, int cell_px = 24) {
    ExportOptions o;
    o.stage = stage;
    o.layer = layer;
    o.head = head;
    o.cell_px = cell_px;
    return o;
  }
  std::string dir_ = test::temp_dir("export-out");
  static Engine* engine_;
};
Engine* Export::engine_ = nullptr;

std::map<uint32_t, int> colour_counts(const std::string& png) {
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(png.data()), static_cast<int>(png.size()),
                                            &w, &h, &n, 3);
  std::map<uint32_t, int> counts;
  if (!px) return counts;
  for (int i = 0; i < w * h; ++i) counts[(px[3 * i] << 16) | (px[3 * i + 1] << 8) | px[3 * i + 2]]++;
  stbi_image_free(px);
  return counts;
}
uint32_t key(Rgb8 c) { return (c.r << 16) | (c.g << 8) | c.b; }

TEST_F(Export, PngCellsHaveTheColormapColoursOfTheirValues) {
  const ExportOptions o = one(Stage::Probs, 1, 2, 30);
  const std::string path = dir_ + "/p.png";
  export_to_file(trace(), model(), o, path);
  const auto counts = colour_counts(test::read_file(path));
  ASSERT_FALSE(counts.empty()) << "not a decodable PNG";
  const Tensor& probs = trace().layers[1].probs;
  const int T = trace().T();
  int masked = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      if (j > i) {
        ++masked;
        continue;
      }
      const Rgb8 want = value_rgb(Colormap::Viridis, probs.at(2, i, j), {0.f, 1.f, true});
      const auto it = counts.find(key(want));
      ASSERT_NE(it, counts.end()) << "cell (" << i << "," << j << ") colour missing";
      EXPECT_GE(it->second, 30 * 30 * 9 / 10) << "cell (" << i << "," << j << ")";
    }
  // every masked cell, plus the legend swatch, in the masked grey
  EXPECT_GE(counts.at(key(masked_rgb())), masked * 30 * 30);
  EXPECT_LT(counts.at(key(masked_rgb())), masked * 30 * 30 + 2000);
}

TEST_F(Export, SignedStageUsesSymmetricDivergingRange) {
  const ExportOptions o = one(Stage::Scores, 0, 0, 20);
  const auto views = select_views(trace(), model(), o);
  const ValueRange r = export_range(views, Colormap::Diverging);
  EXPECT_FLOAT_EQ(r.lo, -r.hi);
  const auto counts = colour_counts(render_export(trace(), model(), o, ExportFormat::Png));
  const Tensor& s = trace().layers[0].scores;
  for (int i = 0; i < trace().T(); ++i)
    for (int j = 0; j < trace().T(); ++j)
      EXPECT_TRUE(counts.count(key(value_rgb(Colormap::Diverging, s.at(0, i, j), r)))) << i << "," << j;
}

TEST_F(Export, SvgHasOneRectPerCellWithValueAndColourAndCjkLabels) {
  const ExportOptions o = one(Stage::Masked, 0, 3);
  const std::string path = dir_ + "/m.svg";
  export_to_file(trace(), model(), o, path);
  const std::string svg = test::read_file(path);
  ASSERT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  const std::regex cell(R"rx(<rect class="cell" [^>]*fill="(#[0-9a-f]{6})" data-row="(\d+)" data-col="(\d+)" data-value="([^"]+)")rx");
  const auto views = select_views(trace(), model(), o);
  const ValueRange r = export_range(views, Colormap::Diverging);
  int cells = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it, ++cells) {
    const int i = std::stoi((*it)[2]), j = std::stoi((*it)[3]);
    const float want = trace().layers[0].value(Stage::Masked, 3, i, j);
    const std::string v = (*it)[4];
    if (j > i) {
      EXPECT_EQ(v, "-inf");
      EXPECT_EQ((*it)[1], "#808080");
    } else {
      EXPECT_EQ(std::strtof(v.c_str(), nullptr), want);
      const Rgb8 c = value_rgb(Colormap::Diverging, want, r);
      char hex[8];
      std::snprintf(hex, sizeof hex, "#%02x%02x%02x", c.r, c.g, c.b);
      EXPECT_EQ((*it)[1], hex);
    }
  }
  EXPECT_EQ(cells, trace().T() * trace().T());
  EXPECT_NE(svg.find(">春</text>"), std::string::npos);
  EXPECT_NE(svg.find(">平</text>"), std::string::npos);
  // balanced tags: every <text> and every cell <rect> is closed
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (size_t p = svg.find(needle); p != std::string::npos; p = svg.find(needle, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<text "), count("</text>"));
  EXPECT_EQ(count("<rect class=\"cell\""), count("</rect>"));
  EXPECT_EQ(count("<svg "), count("</svg>"));
}

TEST_F(Export, CsvRoundTripsToTheRecordedValues) {
  const ExportOptions o = one(Stage::Masked, 1, 1);
  const std::string path = dir_ + "/m.csv";
  export_to_file(trace(), model(), o, path);
  std::istringstream in(test::read_file(path));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "query \\ key,0:春,1:江,2:潮,3:水,4:连,5:海,6:平");  // positions keep repeated tokens apart
  const Tensor m = trace().layers[1].materialize(Stage::Masked);
  for (int i = 0; i < trace().T(); ++i) {
    ASSERT_TRUE(std::getline(in, line));
    std::istringstream row(line);
    std::string cell;
    std::getline(row, cell, ',');
    EXPECT_EQ(cell.rfind(std::to_string(i) + ":", 0), 0u) << cell;
    for (int j = 0; j < trace().T(); ++j) {
      ASSERT_TRUE(std::getline(row, cell, ','));
      if (j > i) EXPECT_EQ(cell, "-inf");
      else EXPECT_EQ(std::strtof(cell.c_str(), nullptr), m.at(1, i, j)) << i << "," << j;
    }
  }
  EXPECT_FALSE(std::getline(in, line));
}

TEST_F(Export, NpyIsTheExactMatrixAndGridsStack) {
  const ExportOptions o = one(Stage::Q, -1, -1);
  const std::string bytes = render_export(trace(), model(), o, ExportFormat::Npy);
  ASSERT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  const std::string header = bytes.substr(10, hlen);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(header.find("'shape': (2, 4, 7, 8)"), std::string::npos) << header;  // (L, H, T, d)
  const size_t n = 2 * 4 * 7 * 8;
  ASSERT_EQ(bytes.size(), 10 + hlen + n * 4);
  std::vector<float> got(n);
  std::memcpy(got.data(), bytes.data() + 10 + hlen, n * 4);
  size_t k = 0;
  for (int l = 0; l < 2; ++l)
    for (size_t e = 0; e < trace().layers[l].q.data.size(); ++e) EXPECT_EQ(got[k++], trace().layers[l].q.data[e]);
  const std::string single = render_export(trace(), model(), one(Stage::Q, 1, 0), ExportFormat::Npy);
  EXPECT_NE(single.find("'shape': (7, 8)"), std::string::npos);
}

TEST_F(Export, GridPngHoldsEveryTile) {
  ExportOptions o;
  o.layer = -1;
  o.head = -1;
  o.cell_px = 12;
  const std::string png = render_export(trace(), model(), o, ExportFormat::Png);
  int w = 0, h = 0, n = 0;
  ASSERT_TRUE(stbi_info_from_memory(reinterpret_cast<const unsigned char*>(png.data()), static_cast<int>(png.size()), &w, &h, &n));
  EXPECT_GT(w, 4 * 7 * 12);  // 4 heads side by side
  EXPECT_GT(h, 2 * 7 * 12);  // 2 layers stacked
  // masked cells of all 8 tiles
  EXPECT_GE(colour_counts(png)[key(masked_rgb())], 8 * 21 * 12 * 12);
}

TEST_F(Export, BadRequestsAreClearErrorsAndLeaveNoFile) {
  ExportOptions o;
  EXPECT_THROW(export_to_file(trace(), model(), o, dir_ + "/x.jpg"), Error);
  o.layer = -1;
  try {
    export_to_file(trace(), model(), o, dir_ + "/grid.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one matrix"), std::string::npos);
  }
  o.layer = 2;
  EXPECT_THROW(select_views(trace(), model(), o), Error);
  o.layer = 0;
  o.stage = Stage::K;
  o.head = 2;  // only 2 KV heads
  EXPECT_THROW(select_views(trace(), model(), o), Error);
  o.head = 0;
  try {
    export_to_file(trace(), model(), o, "/no/such/dir/k.png");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/no/such/dir/k.png'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "no partial or temporary file left";
}

}  // namespace
}  // namespace attnviz
