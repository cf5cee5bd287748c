#include "core/export/export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/limits.h"
#include "core/export/image.h"
#include "core/export/painter.h"
#include "core/model/safetensors.h"
#include "core/tokenize/labels.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

namespace {

// What a layer without the stage asked for is, by its mixer (every kind has its case).
const char* mixer_stage_note(Mixer m) {
  switch (m) {
    case Mixer::Softmax: return "softmax layer";
    case Mixer::GatedDeltaNet: return "linear-attention layer: its matrix is 'implicit'";
    case Mixer::ShortConv: return "short-convolution layer, with no attention";
  }
  return "layer of another kind";
}

bool square_stage(Stage s) { return LayerTrace::matrix(s); }
bool kv_stage(Stage s) { return s == Stage::K || s == Stage::V; }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos && !s.empty() && s.front() != ' ' && s.back() != ' ') return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

// ------------------------------------------------------------------ layout

constexpr Rgb8 kBackground{255, 255, 255};
constexpr Rgb8 kInk{20, 20, 20};
constexpr Rgb8 kFaint{110, 110, 110};

struct Layout {
  int cell = 24;
  float label_px = 14, title_px = 18, tile_title_px = 14;
  int pad = 12;
  int row_label_w = 0, col_label_h = 0;  // room for the axis labels of one tile
  int tile_w = 0, tile_h = 0;            // one tile: its title, labels and cells
  int title_h = 0, colorbar_w = 0;
};

// Tiles carry titles when there are several, or a caption was given.
bool tiles_titled(const std::vector<MatrixView>& views) { return views.size() > 1 || !views.front().caption.empty(); }

Layout make_layout(Painter& p, const std::vector<MatrixView>& views, int cell) {
  Layout L;
  L.cell = cell;
  L.label_px = std::clamp(cell * 0.7f, 9.f, 22.f);
  L.tile_title_px = std::clamp(cell * 0.6f, 11.f, 20.f);
  L.title_px = L.tile_title_px * 1.3f;
  int max_row_label = 0;
  const MatrixView& v = views.front();
  for (const auto& s : v.row_labels) max_row_label = std::max(max_row_label, p.measure(s, L.label_px));
  L.row_label_w = max_row_label + L.pad;
  L.col_label_h = static_cast<int>(L.label_px * 1.4f) + 4;
  const int tile_title_h = tiles_titled(views) ? static_cast<int>(L.tile_title_px * 1.5f) : 0;
  L.tile_w = L.row_label_w + v.cols * cell + L.pad;
  L.tile_h = tile_title_h + L.col_label_h + v.rows * cell + L.pad;
  L.title_h = static_cast<int>(L.title_px * 1.8f) + L.pad;
  L.colorbar_w = 16 + 8 + std::max(p.measure("-0.000e+00", L.label_px), p.measure("masked (−inf)", L.label_px)) + L.pad;
  return L;
}

void draw_tile(Painter& p, const Layout& L, const MatrixView& v, int x, int y, bool titled, Colormap cm, ValueRange r) {
  if (titled) {
    std::string t = "L" + std::to_string(v.layer) + (kv_stage(v.stage) ? " KV" : " H") + std::to_string(v.head);
    if (v.kv_head >= 0) t += " · KV" + std::to_string(v.kv_head);
    if (!v.caption.empty()) t = v.caption;
    p.text(x + L.row_label_w, y, t, L.tile_title_px, kInk);
    y += static_cast<int>(L.tile_title_px * 1.5f);
  }
  const int gx = x + L.row_label_w, gy = y + L.col_label_h;
  if (square_stage(v.stage)) {  // which axis is which, in the corner left of the key labels
    const float px = L.label_px * 0.8f;
    const std::string caption = "query ↓ key →";
    if (p.measure(caption, px) < L.row_label_w - 4) p.text(gx - 4 - p.measure(caption, px), y + 2, caption, px, kFaint);
  }
  // column labels, thinned when they are wider than a cell
  int widest = 1;
  for (const auto& s : v.col_labels) widest = std::max(widest, p.measure(s, L.label_px));
  const int step = std::max(1, (widest + 2 + L.cell - 1) / L.cell);
  for (int j = 0; j < v.cols; j += step) {
    const int w = p.measure(v.col_labels[j], L.label_px);
    p.text(gx + j * L.cell + (L.cell - w) / 2, y + 2, v.col_labels[j], L.label_px, kInk);
  }
  const int rstep = L.cell >= static_cast<int>(L.label_px) ? 1 : (static_cast<int>(L.label_px) + L.cell - 1) / L.cell;
  for (int i = 0; i < v.rows; i += rstep) {
    const int w = p.measure(v.row_labels[i], L.label_px);
    p.text(gx - 6 - w, gy + i * L.cell + (L.cell - static_cast<int>(L.label_px)) / 2, v.row_labels[i], L.label_px, kInk);
  }
  for (int i = 0; i < v.rows; ++i)
    for (int j = 0; j < v.cols; ++j) {
      const float val = v.values[static_cast<size_t>(i) * v.cols + j];
      const bool masked = (std::isinf(val) && val < 0) || (v.causal_mask && causally_masked(i, j));
      p.cell(gx + j * L.cell, gy + i * L.cell, L.cell, L.cell, masked ? masked_rgb() : value_rgb(cm, val, r), i, j, val);
    }
}

// Draws the whole figure; returns its size.
void draw_figure(Painter& p, const Layout& L, const std::vector<MatrixView>& views, int tiles_per_row,
                 const std::string& title, Colormap cm, ValueRange r, bool any_masked) {
  p.text(L.pad, L.pad, title, L.title_px, kInk);
  const bool titled = tiles_titled(views);
  for (size_t k = 0; k < views.size(); ++k) {
    const int col = static_cast<int>(k) % tiles_per_row, row = static_cast<int>(k) / tiles_per_row;
    draw_tile(p, L, views[k], L.pad + col * L.tile_w, L.title_h + row * L.tile_h, titled, cm, r);
  }
  // colorbar: hi at the top, lo at the bottom
  const int bx = L.pad + tiles_per_row * L.tile_w + 4, by = L.title_h + L.col_label_h + (titled ? static_cast<int>(L.tile_title_px * 1.5f) : 0);
  const int bh = std::max(120, std::min(320, views.front().rows * L.cell));
  for (int i = 0; i < bh; ++i) p.rect(bx, by + i, 16, 1, colormap_rgb(cm, 1.f - static_cast<float>(i) / static_cast<float>(bh - 1)));
  p.text(bx + 22, by - static_cast<int>(L.label_px * 0.5f), short_float(r.hi), L.label_px, kInk);
  p.text(bx + 22, by + bh - static_cast<int>(L.label_px * 0.5f), short_float(r.lo), L.label_px, kInk);
  if (any_masked) {
    p.rect(bx, by + bh + 12, 16, 16, masked_rgb());
    p.text(bx + 22, by + bh + 12, "masked (−inf)", L.label_px, kFaint);
  }
}

std::string npy_bytes(const std::vector<MatrixView>& views, const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  for (const auto& v : views) out.append(reinterpret_cast<const char*>(v.values), static_cast<size_t>(v.rows) * v.cols * sizeof(float));
  return out;
}

}  // namespace

std::string MatrixView::name() const {
  return "layer " + std::to_string(layer) + (kv_stage(stage) ? " · KV head " : " · head ") + std::to_string(head) +
         " · " + stage_label(stage);
}

Stage parse_stage(const std::string& s) {
  Stage st;
  if (stage_from_name(s, &st)) return st;
  throw Error("unknown stage '" + excerpt(s) + "' (choose q, k, v, scores, scaled, masked, probs or out)", ErrorKind::Usage);
}

Colormap parse_colormap(const std::string& s) {
  for (int i = 0; i < kColormapCount; ++i)
    if (s == colormap_name(static_cast<Colormap>(i))) return static_cast<Colormap>(i);
  throw Error("unknown colormap '" + excerpt(s) + "' (choose viridis, magma or diverging)", ErrorKind::Usage);
}

ExportFormat format_of_path(const std::string& path) {
  const auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "png") return ExportFormat::Png;
  if (ext == "svg") return ExportFormat::Svg;
  if (ext == "csv") return ExportFormat::Csv;
  if (ext == "npy") return ExportFormat::Npy;
  throw Error("cannot tell the format of '" + excerpt(path, kPathExcerptBytes) + "': the file name must end in .png, .svg, .csv or .npy",
              ErrorKind::Usage);
}

std::vector<MatrixView> select_views(const Trace& tr, const Model& m, const ExportOptions& o) {
  const int L = static_cast<int>(tr.layers.size());
  if (L == 0 || tr.T() == 0) throw Error("nothing has been computed yet: there is no input");
  if (o.layer < -1 || o.layer >= L)
    throw Error("layer " + std::to_string(o.layer) + " is out of range: the model has layers 0 … " + std::to_string(L - 1),
                ErrorKind::Usage);
  // Heads of the stage in the layer asked for (a hybrid's linear layers have their own count;
  // with every layer asked for, the layers that have the stage).
  // (A softmax layer draws capped as its scaled scores where it does not soft-cap, as before.)
  auto has = [&](int l) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    return lt.mixer == Mixer::Softmax ? o.stage != Stage::Implicit : lt.has(o.stage);
  };
  if (o.layer >= 0 && !has(o.layer))
    throw Error("layer " + std::to_string(o.layer) + " has no " + stage_name(o.stage) + " stage (it is a " +
                    mixer_stage_note(m.config.layer(o.layer).mixer) + ")",
                ErrorKind::Usage);
  auto heads_in = [&](int l) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    return has(l) ? static_cast<int>(lt.shape(o.stage)[0]) : 0;
  };
  int heads = 0;
  for (int l = o.layer < 0 ? 0 : o.layer; l < (o.layer < 0 ? L : o.layer + 1); ++l) heads = std::max(heads, heads_in(l));
  if (heads == 0)
    throw Error(std::string("no layer of this model has a ") + stage_name(o.stage) + " stage", ErrorKind::Usage);
  if (o.head < -1 || o.head >= heads)
    throw Error("head " + std::to_string(o.head) + " is out of range: " + std::string(kv_stage(o.stage) ? "KV heads" : "heads") +
                    " are 0 … " + std::to_string(heads - 1),
                ErrorKind::Usage);
  std::vector<std::string> tokens;
  if (m.tokenizer)
    for (const TokenLabel& l : token_labels(*m.tokenizer, tr.tokens)) tokens.push_back(display_piece(l.text));
  else
    for (int id : tr.tokens) tokens.push_back(std::to_string(id));
  std::vector<MatrixView> views;
  for (int l = o.layer < 0 ? 0 : o.layer; l < (o.layer < 0 ? L : o.layer + 1); ++l)
    for (int h = o.head < 0 ? 0 : o.head; h < (o.head < 0 ? heads_in(l) : std::min(o.head + 1, heads_in(l))); ++h) {
      const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
      const std::vector<int64_t> shape = lt.shape(o.stage);
      MatrixView v;
      v.layer = l;
      v.head = h;
      v.stage = o.stage;
      v.rows = static_cast<int>(shape[1]);
      v.cols = static_cast<int>(shape[2]);
      auto scratch = std::make_shared<std::vector<float>>();
      v.values = lt.head_values(o.stage, h, *scratch);
      if (!scratch->empty()) v.derived = std::move(scratch);
      v.causal_mask = o.stage == Stage::Probs;
      if (!kv_stage(o.stage) && lt.mixer == Mixer::Softmax && m.config.kv_heads_at(l) < m.config.n_head)
        v.kv_head = m.config.kv_head_of(l, h);
      v.row_labels = tokens;
      if (square_stage(o.stage)) v.col_labels = tokens;
      else
        for (int j = 0; j < v.cols; ++j) v.col_labels.push_back(std::to_string(j));
      views.push_back(std::move(v));
    }
  return views;
}

ValueRange export_range(const std::vector<MatrixView>& views, Colormap c) {
  if (views.front().stage == Stage::Probs && !colormap_is_signed(c)) return {0.f, 1.f, true};
  ValueRange r{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), false};
  for (const auto& v : views) {
    const ValueRange one = colormap_is_signed(c) ? symmetric_range(v.values, static_cast<int64_t>(v.rows) * v.cols)
                                                 : finite_range(v.values, static_cast<int64_t>(v.rows) * v.cols);
    if (!one.any) continue;
    r.lo = std::min(r.lo, one.lo);
    r.hi = std::max(r.hi, one.hi);
    r.any = true;
  }
  if (!r.any) return {0.f, 1.f, false};
  return r;
}

std::string render_export(const Trace& tr, const Model& m, const ExportOptions& o, ExportFormat f) {
  const auto views = select_views(tr, m, o);
  if (f == ExportFormat::Npy) {
    const MatrixView& v = views.front();
    std::vector<int64_t> shape = {v.rows, v.cols};
    const int nl = o.layer < 0 ? static_cast<int>(tr.layers.size()) : 1;
    const int nh = static_cast<int>(views.size()) / nl;
    if (o.head < 0) shape.insert(shape.begin(), nh);
    if (o.layer < 0) shape.insert(shape.begin(), nl);
    return npy_bytes(views, shape);
  }
  if (f == ExportFormat::Csv) {
    if (views.size() != 1)
      throw Error("a CSV file holds one matrix: choose one --layer and one --head (or export a grid as .png, .svg or .npy)",
                  ErrorKind::Usage);
    const MatrixView& v = views.front();
    // Headers carry the position: "3:t", so a repeated token stays distinguishable.
    std::string out = csv_field(square_stage(v.stage) ? "query \\ key" : "token \\ dim");
    for (size_t c = 0; c < v.col_labels.size(); ++c)
      out += "," + csv_field(square_stage(v.stage) ? std::to_string(c) + ":" + v.col_labels[c] : v.col_labels[c]);
    out += "\n";
    for (int i = 0; i < v.rows; ++i) {
      out += csv_field(std::to_string(i) + ":" + v.row_labels[static_cast<size_t>(i)]);
      for (int j = 0; j < v.cols; ++j) out += "," + exact_float(v.values[static_cast<size_t>(i) * v.cols + j]);
      out += "\n";
    }
    return out;
  }
  const Colormap cm = o.colormap ? *o.colormap : (o.stage == Stage::Probs ? Colormap::Viridis : Colormap::Diverging);
  // one row of tiles per layer: every head of it side by side
  const int per_row = o.head < 0 ? static_cast<int>(views.size()) / (o.layer < 0 ? static_cast<int>(tr.layers.size()) : 1) : 1;
  const std::string title = m.name + " · " + (views.size() == 1 ? views.front().name()
                                                                 : std::string(stage_label(o.stage)) +
                                                                       (o.layer < 0 ? " · all layers" : " · layer " + std::to_string(o.layer)) +
                                                                       (o.head < 0 ? " · all heads" : " · head " + std::to_string(o.head)));
  return render_views(views, title, per_row, cm, o.cell_px, f);
}

std::string render_views(const std::vector<MatrixView>& views, const std::string& title, int per_row, Colormap cm,
                         int cell_px, ExportFormat f) {
  if (views.empty()) throw Error("nothing to draw: no matrices selected", ErrorKind::Usage);
  if (f != ExportFormat::Png && f != ExportFormat::Svg) throw Error("a figure is .png or .svg", ErrorKind::Usage);
  if (cell_px < 1 || cell_px > 256) throw Error("--cell must be 1 … 256 pixels", ErrorKind::Usage);
  const ValueRange r = export_range(views, cm);
  bool any_masked = false;
  for (const auto& v : views)
    for (int k = 0; k < v.rows * v.cols && !any_masked; ++k)
      any_masked = std::isinf(v.values[k]) || (v.causal_mask && causally_masked(k / v.cols, k % v.cols));
  TextRenderer text;
  const int tiles_x = std::max(1, per_row), tiles_y = (static_cast<int>(views.size()) + tiles_x - 1) / tiles_x;
  if (f == ExportFormat::Svg) {
    SvgPainter svg(text);
    const Layout L = make_layout(svg, views, cell_px);
    draw_figure(svg, L, views, tiles_x, title, cm, r, any_masked);
    const int W = 2 * L.pad + tiles_x * L.tile_w + L.colorbar_w, H = L.title_h + tiles_y * L.tile_h + L.pad + (any_masked ? 40 : 0);
    return svg.document(W, H, kBackground);
  }
  // PNG: measure with a throw-away painter, then draw on a canvas of the right size.
  Image probe(1, 1, kBackground);
  RasterPainter measure(probe, text);
  const Layout L = make_layout(measure, views, cell_px);
  const int W = 2 * L.pad + tiles_x * L.tile_w + L.colorbar_w;
  const int H = std::max(L.title_h + tiles_y * L.tile_h + L.pad, L.title_h + L.col_label_h + 320 + 60);
  if (static_cast<int64_t>(W) * H > 400'000'000LL)
    throw Error("the image would be " + std::to_string(W) + " x " + std::to_string(H) + " pixels; use a smaller --cell",
                ErrorKind::Usage);
  Image img(W, H, kBackground);
  RasterPainter paint(img, text);
  draw_figure(paint, L, views, tiles_x, title, cm, r, any_masked);
  return img.encode_png();
}

std::string export_to_file(const Trace& tr, const Model& m, const ExportOptions& o, const std::string& path) {
  const ExportFormat f = format_of_path(path);
  write_file_atomic(path, render_export(tr, m, o, f));
  if ((f == ExportFormat::Png) && !TextRenderer().ok())
    return "no font was found through fontconfig, so the image has no labels (install fonts-noto-cjk)";
  return "";
}

}  // namespace attnviz
