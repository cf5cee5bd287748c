// ui/text_view: the text view's logic without ImGui. The weights a query gives each token
// (one head, the mean or max over a layer's heads or over every layer) from a compact trace
// (rows recomputed) against loops over the full matrices of the same run; the marks
// (causal, window, block_size crop) against the rules written out; the cache; wrapping;
// and the exports: the HTML file parsed back token by token, a PNG, bad paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/painter.h"
#include "test_util.h"
#include "ui/state/text_view.h"

namespace attnviz::ui {
namespace {

namespace fs = std::filesystem;

ModelConfig mistral(int window) {  // every layer local with `window`: 3 layers, 4 heads over 2 KV heads
  nlohmann::json j = {{"model_type", "mistral"},     {"vocab_size", 97},          {"hidden_size", 64},
                      {"intermediate_size", 96},     {"num_hidden_layers", 3},    {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},    {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},       {"tie_word_embeddings", false}, {"sliding_window", window}};
  return parse_config(j, "text view test config");
}

// The same run twice: every (T, T) matrix kept, and compact (rows recomputed on request).
struct Runs {
  std::shared_ptr<const Model> model;
  Engine keep, compact;
  Trace full, small;
  Runs(const ModelConfig& c, const std::string& tag, const std::vector<int>& ids, int block_size)
      : model(load_model(test::make_model_dir(c, 11, tag))),
        keep(model, make_cpu_backend()),
        compact(model, make_cpu_backend()) {
    keep.set_matrices(Engine::Matrices::kKeep);
    compact.set_matrices(Engine::Matrices::kRecompute);
    keep.set_block_size(block_size);
    compact.set_block_size(block_size);
    full = keep.run(ids);
    small = compact.run(ids);
  }
};

// The mode's weights written out over the full matrices: which (layer, head) pairs, then the
// mean (in double) or the max of probs(h, q, j).
std::vector<double> expected_weights(const Trace& full, int layer, int head, int q, TextViewMode mode) {
  const int T = full.T();
  std::vector<std::pair<int, int>> heads;
  for (int l = 0; l < static_cast<int>(full.layers.size()); ++l)
    for (int h = 0; h < full.layers[l].heads(); ++h) {
      const bool take = mode == TextViewMode::Head             ? (l == layer && h == head)
                        : mode == TextViewMode::LayerMean || mode == TextViewMode::LayerMax ? l == layer
                                                                                             : true;
      if (take) heads.emplace_back(l, h);
    }
  const bool max = mode == TextViewMode::LayerMax || mode == TextViewMode::AllMax;
  std::vector<double> w(static_cast<size_t>(T), 0.0);
  for (auto [l, h] : heads)
    for (int j = 0; j < T; ++j) {
      const double p = full.layers[l].probs.at(h, q, j);
      w[j] = max ? std::max(w[j], p) : w[j] + p / static_cast<double>(heads.size());
    }
  return w;
}

// The marks as the rules say: cropped, after the query, before the window [q − W + 1, q].
TokenMark expected_mark(int k, int dropped, int q, int W) {
  if (k < dropped) return TokenMark::Dropped;
  const int j = k - dropped;
  if (j > q) return TokenMark::Future;
  if (W > 0 && j < q - W + 1) return TokenMark::OutsideWindow;
  return TokenMark::Key;
}

void expect_shading(const Runs& r, int layer, int head, int q, TextViewMode mode, int W, const std::string& what) {
  const Trace& t = r.small;
  std::vector<float> row, scratch;
  query_weights(t, layer, head, q, mode, row, scratch);
  const std::vector<double> want = expected_weights(r.full, layer, head, q, mode);
  ASSERT_EQ(row.size(), want.size()) << what;
  for (size_t j = 0; j < want.size(); ++j) ASSERT_NEAR(row[j], want[j], 1e-6) << what << " key " << j;
  const TextShading sh = shade_tokens(row.data(), t.T(), q, t.dropped, marked_window(t, layer, mode));
  ASSERT_EQ(static_cast<int>(sh.tokens.size()), t.dropped + t.T()) << what;
  EXPECT_EQ(sh.window, W) << what;
  double mx = 0;
  for (int j = std::max(0, q - (W > 0 ? W : q + 1) + 1); j <= q; ++j) mx = std::max(mx, want[j]);
  EXPECT_NEAR(sh.max_weight, mx, 1e-6) << what;
  for (int k = 0; k < static_cast<int>(sh.tokens.size()); ++k) {
    const TokenShade& s = sh.tokens[k];
    const TokenMark m = expected_mark(k, t.dropped, q, W);
    ASSERT_EQ(static_cast<int>(s.mark), static_cast<int>(m)) << what << " token " << k;
    if (m == TokenMark::Key) {
      EXPECT_NEAR(s.weight, want[k - t.dropped], 1e-6) << what << " token " << k;
      EXPECT_NEAR(s.shade, want[k - t.dropped] / mx, 1e-5) << what << " token " << k;
    } else {
      EXPECT_EQ(s.weight, 0.f);
      EXPECT_EQ(s.shade, 0.f);
    }
  }
  // The strongest keys, strongest first, all of them seen by the query.
  ASSERT_FALSE(sh.top_keys.empty()) << what;
  EXPECT_NEAR(want[sh.top_keys[0]], mx, 1e-6) << what;
  for (size_t i = 1; i < sh.top_keys.size(); ++i) EXPECT_GE(want[sh.top_keys[i - 1]] + 1e-7, want[sh.top_keys[i]]) << what;
}

const TextViewMode kModes[] = {TextViewMode::Head, TextViewMode::LayerMean, TextViewMode::LayerMax, TextViewMode::AllMean,
                               TextViewMode::AllMax};

TEST(TextView, WeightsAndMarksOnLocalLayersWithACrop) {
  // 30 tokens into block_size 24: 6 cropped; window 5 on every layer.
  const Runs r(mistral(5), "text_view_local", test::random_ids(30, 97, 3), 24);
  ASSERT_EQ(r.small.dropped, 6);
  ASSERT_TRUE(r.small.layers[0].compact);
  ASSERT_FALSE(r.full.layers[0].compact);
  for (TextViewMode mode : kModes)
    for (int q : {0, 3, 4, 11, 23})
      expect_shading(r, 1, 2, q, mode, 5, std::string(text_view_mode_label(mode)) + " q=" + std::to_string(q));
}

TEST(TextView, WeightsOnGlobalLayers) {
  const Runs r(test::small_config("llama", 2, 64, 4, 2, 97, 128), "text_view_global", test::random_ids(17, 97, 4), 128);
  ASSERT_EQ(r.small.dropped, 0);
  for (TextViewMode mode : kModes)
    for (int q : {0, 9, 16}) expect_shading(r, 0, 3, q, mode, 0, std::string(text_view_mode_label(mode)) + " global");
}

TEST(TextView, WindowMarkedOverEveryLayer) {
  Trace t;
  t.tokens = {1, 2, 3};
  t.layers.resize(2);
  t.layers[0].window = 3;
  t.layers[1].window = 5;
  EXPECT_EQ(marked_window(t, 0, TextViewMode::Head), 3);
  EXPECT_EQ(marked_window(t, 1, TextViewMode::LayerMax), 5);
  EXPECT_EQ(marked_window(t, 0, TextViewMode::AllMean), 5);  // no layer reaches before the widest window
  t.layers[1].window = 0;
  EXPECT_EQ(marked_window(t, 0, TextViewMode::Head), 3);
  EXPECT_EQ(marked_window(t, 0, TextViewMode::AllMax), 0);  // a global layer sees every earlier key
}

TEST(TextView, QueryClampedIntoTheWindow) {
  EXPECT_EQ(clamp_query(-1, 10), 9);  // none chosen: the last token
  EXPECT_EQ(clamp_query(4, 10), 4);
  EXPECT_EQ(clamp_query(10, 10), 9);  // past the end (the text got shorter): the last
  EXPECT_EQ(clamp_query(100000, 10), 9);
  EXPECT_EQ(clamp_query(3, 0), -1);   // no tokens: no query
  // shade_tokens with no query marks everything as unseen, without reading the weights.
  const TextShading sh = shade_tokens(nullptr, 4, -1, 2, 0);
  ASSERT_EQ(sh.tokens.size(), 6u);
  EXPECT_EQ(sh.query, -1);
  EXPECT_TRUE(sh.top_keys.empty());
  EXPECT_EQ(sh.tokens[1].mark, TokenMark::Dropped);
  EXPECT_EQ(sh.tokens[2].mark, TokenMark::Future);
}

TEST(TextView, CacheComputesOncePerKey) {
  const Runs r(mistral(4), "text_view_cache", test::random_ids(12, 97, 5), 64);
  TextShadingCache cache;
  const TextShading& a = cache.get(r.small, 1, 0, 0, 5, TextViewMode::Head);
  EXPECT_EQ(cache.computed(), 1);
  const float w = a.tokens[5].weight;
  cache.get(r.small, 1, 0, 0, 5, TextViewMode::Head);
  EXPECT_EQ(cache.computed(), 1) << "the same key must not recompute";
  cache.get(r.small, 2, 0, 0, 5, TextViewMode::Head);    // a new trace
  cache.get(r.small, 2, 1, 0, 5, TextViewMode::Head);    // another layer
  cache.get(r.small, 2, 1, 3, 5, TextViewMode::Head);    // another head
  cache.get(r.small, 2, 1, 3, 7, TextViewMode::Head);    // another query
  cache.get(r.small, 2, 1, 3, 7, TextViewMode::AllMax);  // another mode
  EXPECT_EQ(cache.computed(), 6);
  EXPECT_EQ(cache.get(r.small, 3, 0, 0, 5, TextViewMode::Head).tokens[5].weight, w);
}

TEST(TextView, DocumentPieces) {
  EXPECT_EQ(doc_piece(" the").text, " the");  // spaces stay spaces in a document
  EXPECT_FALSE(doc_piece(" the").line_break);
  const DocPiece nl = doc_piece(".\n");
  EXPECT_EQ(nl.text, ".\xE2\x86\xB5");  // ↵, and the line ends
  EXPECT_TRUE(nl.line_break);
  EXPECT_EQ(doc_piece("\t").text, "\xE2\x87\xA5");
  EXPECT_EQ(doc_piece("").text, "\xE2\x88\x85");
  EXPECT_EQ(doc_piece("\x01").text, "\\x01");
  EXPECT_EQ(doc_piece("\xE7\x8C\xAB").text, "\xE7\x8C\xAB");  // 猫 whole
  // Labels where given, the tokenizer's text (or "<id>") past them.
  const std::vector<DocPiece> p = doc_pieces({TokenLabel{"a", "a", false}}, {5, 6}, nullptr);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].text, "a");
  EXPECT_EQ(p[1].text, "<6>");
}

TEST(TextView, Wrapping) {
  // widths 30 each, lines 100 wide: three tokens a line; a break after token 4; a token
  // wider than a line alone on its line.
  std::vector<DocPiece> pieces(9);
  pieces[4].line_break = true;
  std::vector<float> w(9, 30.f);
  w[6] = 250.f;
  const TextLayout lay = wrap_tokens(w, pieces, 100.f);
  EXPECT_EQ(lay.line_start, (std::vector<int>{0, 3, 5, 6, 7, 9}));
  EXPECT_EQ(lay.line_of, (std::vector<int>{0, 0, 0, 1, 1, 2, 3, 4, 4}));
  EXPECT_FLOAT_EQ(lay.x[2], 60.f);
  EXPECT_FLOAT_EQ(lay.x[4], 30.f);
  EXPECT_FLOAT_EQ(lay.x[7], 0.f);
  EXPECT_EQ(token_on_next_line(lay, 1, +1), 4);  // middle 45 lies in token 4 [30, 60)
  EXPECT_EQ(token_on_next_line(lay, 4, -1), 1);
  EXPECT_EQ(token_on_next_line(lay, 2, +1), 4);  // middle 75: past the line's end, its last token
  EXPECT_EQ(token_on_next_line(lay, 1, -1), 1);  // the first line: stays
  EXPECT_EQ(token_on_next_line(lay, 8, +1), 8);  // the last line: stays
  EXPECT_EQ(wrap_tokens({}, {}, 100.f).lines(), 0);
}

TEST(TextView, ShadeColours) {
  const Rgb8 bg{10, 20, 30};
  EXPECT_EQ(shade_rgb(0.f, bg), bg);
  EXPECT_EQ(shade_rgb(1.f, bg), kTextViewHighlight);
  EXPECT_EQ(shade_rgb(7.f, bg), kTextViewHighlight);  // clamped
  const Rgb8 mid = shade_rgb(0.5f, bg);
  EXPECT_EQ(mid.r, static_cast<uint8_t>(std::lround(10 + (255 - 10) * 0.5)));
}

// Shares against the target: the negative colour, as far from bg as the shade's size.
TEST(TextView, SignedShadeColours) {
  const Rgb8 bg{10, 20, 30};
  EXPECT_EQ(shade_rgb(-1.f, bg), kTextViewNegative);
  EXPECT_EQ(shade_rgb(-7.f, bg), kTextViewNegative);  // clamped
  const Rgb8 mid = shade_rgb(-0.5f, bg);
  EXPECT_EQ(mid.b, static_cast<uint8_t>(std::lround(30 + (255 - 30) * 0.5)));
  EXPECT_NE(kTextViewNegative, kTextViewHighlight);
}

// The logit attribution's key shares as the modes take them (one head; the sum over the
// layer's heads for both layer modes; over every head for both "all" modes), written out
// over KeyAttribution's (L, H, T) array; then the signed shading: share / max |share| over
// the keys the query sees, the strongest by |share| first, the marks as for weights.
TEST(TextView, KeySharesAndSignedShading) {
  const Runs r(mistral(5), "text_view_shares", test::random_ids(30, 97, 4), 24);
  const Trace& t = r.small;
  const int q = 17;
  const KeyAttribution a = key_attribution(*r.model, t, q, {predicted_token(*r.model, t, q)});
  ASSERT_EQ(a.T, t.T());
  for (TextViewMode mode : kModes) {
    std::vector<float> got;
    key_shares(a, 1, 2, mode, got);
    ASSERT_EQ(got.size(), static_cast<size_t>(t.T()));
    const bool all = mode == TextViewMode::AllMean || mode == TextViewMode::AllMax;
    for (int j = 0; j < t.T(); ++j) {
      double want = 0;
      for (int l = 0; l < a.L; ++l)
        for (int h = 0; h < a.H; ++h)
          if (mode == TextViewMode::Head ? (l == 1 && h == 2) : all || l == 1) want += a.head(l, h)[j];
      ASSERT_NEAR(got[j], want, 1e-6 * (1 + std::abs(want))) << text_view_mode_label(mode, true) << " key " << j;
    }
    const TextShading sh = shade_tokens(got.data(), t.T(), q, t.dropped, marked_window(t, 1, mode), 3, true);
    EXPECT_TRUE(sh.signed_shares);
    double mx = 0;
    for (int j = q - 5 + 1; j <= q; ++j) mx = std::max(mx, std::abs(static_cast<double>(got[j])));
    ASSERT_GT(mx, 0.0);
    EXPECT_NEAR(sh.max_weight, mx, 1e-6 * mx);
    int negative = 0;
    for (int k = 0; k < static_cast<int>(sh.tokens.size()); ++k) {
      const TokenShade& s = sh.tokens[k];
      ASSERT_EQ(static_cast<int>(s.mark), static_cast<int>(expected_mark(k, t.dropped, q, 5))) << k;
      if (s.mark != TokenMark::Key) continue;
      EXPECT_NEAR(s.shade, got[k - t.dropped] / mx, 1e-5) << k;
      negative += s.shade < 0.f;
    }
    ASSERT_FALSE(sh.top_keys.empty());
    EXPECT_NEAR(std::abs(got[sh.top_keys[0]]), mx, 1e-6 * mx);
    for (size_t i = 1; i < sh.top_keys.size(); ++i)
      EXPECT_GE(std::abs(got[sh.top_keys[i - 1]]), std::abs(got[sh.top_keys[i]]));
    if (mode == TextViewMode::AllMean) EXPECT_GT(negative, 0) << "random weights: some keys push against the target";
  }
  // The exports say what the shades are.
  TextViewDoc doc;
  std::vector<float> got;
  key_shares(a, 1, 2, TextViewMode::AllMean, got);
  doc.shading = shade_tokens(got.data(), t.T(), q, t.dropped, marked_window(t, 1, TextViewMode::AllMean), 3, true);
  doc.pieces = doc_pieces({}, std::vector<int>(static_cast<size_t>(t.dropped) + t.tokens.size(), 5), r.model.get());
  doc.title = "shares";
  const std::string html = render_text_view_html(doc);
  EXPECT_NE(html.find("share of the logit"), std::string::npos);
  const auto lowest = std::min_element(doc.shading.tokens.begin(), doc.shading.tokens.end(),
                                      [](const TokenShade& x, const TokenShade& y) { return x.shade < y.shade; });
  ASSERT_LT(lowest->shade, 0.f);
  EXPECT_NE(html.find("background: " + hex_rgb(shade_rgb(lowest->shade, Rgb8{255, 255, 255}))), std::string::npos)
      << "the key most against the target, in blue";
}

std::string unescape(std::string s) {
  const std::pair<const char*, const char*> ents[] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (auto [e, c] : ents)
    for (size_t at; (at = s.find(e)) != std::string::npos;) s.replace(at, std::string(e).size(), c);
  return s;
}

TextViewDoc doc_of(const Runs& r, int q, TextViewMode mode, std::vector<int>* all_ids) {
  TextViewDoc doc;
  // The cropped tokens too: the ids before the window, as the worker's all_ids holds them.
  all_ids->assign(static_cast<size_t>(r.small.dropped), 7);
  all_ids->insert(all_ids->end(), r.small.tokens.begin(), r.small.tokens.end());
  std::vector<TokenLabel> labels;
  for (size_t k = 0; k < all_ids->size(); ++k)  // text that needs escaping, and a line break
    labels.push_back(TokenLabel{k % 5 == 1 ? " <b>&\"'" : k % 7 == 3 ? "x\n" : "t" + std::to_string(k), "", false});
  doc.pieces = doc_pieces(labels, *all_ids, r.model.get());
  std::vector<float> row, scratch;
  query_weights(r.small, 1, 2, q, mode, row, scratch);
  doc.shading = shade_tokens(row.data(), r.small.T(), q, r.small.dropped, marked_window(r.small, 1, mode));
  doc.title = text_view_title("builtin:<test>", 1, 2, mode, q, doc.pieces[static_cast<size_t>(r.small.dropped + q)].text);
  return doc;
}

TEST(TextView, HtmlExportHasEveryTokenAndItsWeight) {
  const Runs r(mistral(6), "text_view_html", test::random_ids(30, 97, 8), 20);
  const std::string dir = test::temp_dir("text_view_html");
  for (TextViewMode mode : {TextViewMode::Head, TextViewMode::AllMean}) {
    std::vector<int> ids;
    const int q = 13;
    const TextViewDoc doc = doc_of(r, q, mode, &ids);
    const std::string path = dir + "/view.html";
    EXPECT_EQ(write_text_view(doc, path), "");
    const std::string html = test::read_file(path);
    // The title line names the model, layer, head and query, escaped.
    EXPECT_NE(html.find("<title>builtin:&lt;test&gt; \xC2\xB7 "), std::string::npos);
    EXPECT_NE(html.find(mode == TextViewMode::Head ? "layer 1 \xC2\xB7 head 2 \xC2\xB7 query 13" : "mean of all layers and heads \xC2\xB7 query 13"),
              std::string::npos);
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("http"), std::string::npos) << "self-contained: nothing fetched";
    const std::regex span(R"re(<span class="([a-z ]+)" data-k="(\d+)"(?: data-pos="(\d+)" data-weight="([^"]+)")?[^>]*>([^<]*)</span>)re");
    size_t n = 0, queries = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), span); it != std::sregex_iterator(); ++it, ++n) {
      const std::smatch& m = *it;
      const size_t k = std::stoul(m[2]);
      ASSERT_EQ(k, n) << "tokens in order";
      EXPECT_EQ(unescape(m[5]), doc.pieces[k].text) << "token " << k;
      const TokenShade& s = doc.shading.tokens[k];
      const std::string cls = m[1];
      EXPECT_EQ(cls.find("key") == 0, s.mark == TokenMark::Key) << cls;
      EXPECT_EQ(cls.find("dropped") == 0, s.mark == TokenMark::Dropped) << cls;
      EXPECT_EQ(cls.find("outside") == 0, s.mark == TokenMark::OutsideWindow) << cls;
      EXPECT_EQ(cls.find("future") == 0, s.mark == TokenMark::Future) << cls;
      queries += cls.find("query") != std::string::npos;
      if (s.mark == TokenMark::Dropped) {
        EXPECT_FALSE(m[3].matched);
        continue;
      }
      ASSERT_TRUE(m[4].matched) << "token " << k;
      EXPECT_EQ(std::stoi(m[3]), static_cast<int>(k) - r.small.dropped);
      EXPECT_EQ(std::stof(m[4]), s.weight) << "token " << k << ": the weight written exactly";
    }
    EXPECT_EQ(n, doc.pieces.size()) << "one span per token";
    EXPECT_EQ(queries, 1u);
  }
}

TEST(TextView, PngExport) {
  const Runs r(mistral(6), "text_view_png", test::random_ids(40, 97, 9), 32);
  std::vector<int> ids;
  const TextViewDoc doc = doc_of(r, 20, TextViewMode::LayerMax, &ids);
  const std::string path = test::temp_dir("text_view_png") + "/view.png";
  write_text_view(doc, path);
  const std::string png = test::read_file(path);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

// The SVG: one group per token, in order, with its class and exact weight like the HTML's
// spans; its text escaped; a key's box in its shade; the page as tall as the PNG's (the
// same layout).
TEST(TextView, SvgExportHasEveryTokenAndTheLayoutOfThePng) {
  const Runs r(mistral(6), "text_view_svg", test::random_ids(40, 97, 10), 32);
  std::vector<int> ids;
  const TextViewDoc doc = doc_of(r, 22, TextViewMode::Head, &ids);
  const std::string dir = test::temp_dir("text_view_svg");
  EXPECT_EQ(write_text_view(doc, dir + "/view.svg"), "");
  const std::string svg = test::read_file(dir + "/view.svg");
  ASSERT_EQ(svg.rfind("<?xml", 0), 0u);
  const std::regex group(R"re(<g class="([a-z ]+)" data-k="(\d+)"(?: data-pos="(-?\d+)" data-weight="([^"]+)")?>\n((?:<rect[^>]*/>\n)*)(?:<text[^>]*>([^<]*)</text>\n)?</g>)re");
  size_t n = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), group); it != std::sregex_iterator(); ++it, ++n) {
    const std::smatch& m = *it;
    const size_t k = std::stoul(m[2]);
    ASSERT_EQ(k, n) << "tokens in order";
    const TokenShade& s = doc.shading.tokens[k];
    const std::string cls = m[1];
    EXPECT_EQ(cls.find("key") == 0, s.mark == TokenMark::Key) << cls;
    EXPECT_EQ(cls.find("dropped") == 0, s.mark == TokenMark::Dropped) << cls;
    EXPECT_EQ(cls.find("query") != std::string::npos, static_cast<int>(k) - r.small.dropped == doc.shading.query);
    const std::string piece = doc.pieces[k].text;
    if (piece.find_first_not_of(' ') != std::string::npos) {
      EXPECT_EQ(unescape(m[6]), piece) << "token " << k;
    }
    if (s.mark == TokenMark::Dropped) {
      EXPECT_FALSE(m[4].matched);
      continue;
    }
    ASSERT_TRUE(m[4].matched) << "token " << k;
    EXPECT_EQ(std::stof(m[4]), s.weight) << "token " << k << ": the weight written exactly";
    if (s.mark == TokenMark::Key && s.shade > 0.05f) {
      const Rgb8 c = shade_rgb(s.shade, Rgb8{255, 255, 255});
      char want[8];
      std::snprintf(want, sizeof want, "#%02x%02x%02x", c.r, c.g, c.b);
      EXPECT_NE(std::string(m[5]).find(std::string("fill=\"") + want + "\""), std::string::npos) << "token " << k << ": " << m[5];
    }
  }
  EXPECT_EQ(n, doc.pieces.size()) << "one group per token";
  // The PNG's height, from its IHDR chunk (big-endian at byte 20), equals the SVG's.
  const std::string png = render_text_view_png(doc, 1000, nullptr);
  ASSERT_GT(png.size(), 24u);
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(png[i])); };
  const uint32_t png_h = b(20) << 24 | b(21) << 16 | b(22) << 8 | b(23);
  EXPECT_NE(svg.find(" height=\"" + std::to_string(png_h) + "\""), std::string::npos) << "PNG height " << png_h;
}

TEST(TextView, BadPathsSayWhatWentWrong) {
  const Runs r(mistral(6), "text_view_bad", test::random_ids(10, 97, 2), 32);
  std::vector<int> ids;
  const TextViewDoc doc = doc_of(r, 4, TextViewMode::Head, &ids);
  const std::string dir = test::temp_dir("text_view_bad");
  const std::string missing = dir + "/no/such/folder/view.html";
  try {
    write_text_view(doc, missing);
    FAIL() << "wrote into a folder that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(missing));
  // A folder where the file should go; then another extension (a usage error).
  fs::create_directories(dir + "/taken.html");
  EXPECT_THROW(write_text_view(doc, dir + "/taken.html"), Error);
  try {
    write_text_view(doc, dir + "/view.pdf");
    FAIL() << "wrote a .pdf";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind, ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find(".html"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir + "/taken.html"));
  EXPECT_FALSE(fs::exists(dir + "/view.pdf"));
}

}  // namespace
}  // namespace attnviz::ui
