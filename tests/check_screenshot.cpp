// Checks an `attnviz --screenshot` PNG from its pixels. The GUI writes F.png.json beside
// F.png with the on-screen rectangles (framebuffer pixels) of the heatmap, the token strip
// and the head grid; this program verifies that those regions were really drawn:
//   heatmap    ≥ 85 % of its pixels are colormap (or masked) colours, ≥ 24 distinct colours
//   head grid  ≥ 50 % colormap pixels, ≥ 8 distinct colours (unless folded away while presenting)
//   tokens     ≥ 8 distinct colours (chips + text), the most common colour < 70 %
//   the window ≥ 64 distinct colours overall
// It also runs the same checks on a blank image of the same size and fails if THOSE pass,
// so a checker that accepts anything is caught.
//
//   check_screenshot SHOT.png [--expect-error]     (reads SHOT.png.json)
#include <stb_image.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/export/colormap.h"

using attnviz::Rgb8;

namespace {

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;  // RGB
  Rgb8 at(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)) * 3;
    return {px[i], px[i + 1], px[i + 2]};
  }
};

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};

struct Stats {
  long pixels = 0;
  long colormap_pixels = 0;
  size_t distinct = 0;
  double top_share = 0.0;  // share of the most common colour
};

// Every colour the heatmaps can show: 3 colormaps × 1024 samples + the masked grey.
std::vector<Rgb8> palette() {
  std::vector<Rgb8> p;
  for (int k = 0; k < attnviz::kColormapCount; ++k)
    for (int i = 0; i <= 1024; ++i) p.push_back(attnviz::colormap_rgb(static_cast<attnviz::Colormap>(k), i / 1024.f));
  p.push_back(attnviz::masked_rgb());
  return p;
}

bool near_palette(Rgb8 c, const std::vector<Rgb8>& pal) {
  for (const Rgb8& q : pal) {
    const int dr = int(c.r) - q.r, dg = int(c.g) - q.g, db = int(c.b) - q.b;
    if (dr * dr + dg * dg + db * db <= 6 * 6 * 3) return true;
  }
  return false;
}

Stats stats(const Image& im, Rect r, const std::vector<Rgb8>& pal) {
  Stats s;
  std::unordered_map<uint32_t, long> count;
  std::unordered_map<uint32_t, bool> in_pal;
  for (int y = std::max(0, r.y); y < std::min(im.h, r.y + r.h); ++y)
    for (int x = std::max(0, r.x); x < std::min(im.w, r.x + r.w); ++x) {
      const Rgb8 c = im.at(x, y);
      const uint32_t key = (uint32_t(c.r) << 16) | (uint32_t(c.g) << 8) | c.b;
      ++count[key];
      ++s.pixels;
      auto it = in_pal.find(key);
      if (it == in_pal.end()) it = in_pal.emplace(key, near_palette(c, pal)).first;
      if (it->second) ++s.colormap_pixels;
    }
  s.distinct = count.size();
  long top = 0;
  for (auto& kv : count) top = std::max(top, kv.second);
  s.top_share = s.pixels ? double(top) / double(s.pixels) : 1.0;
  return s;
}

Rect rect_of(const nlohmann::json& j, const char* name) {
  const auto& a = j.at("rects").at(name);
  return {a.at(0).get<int>(), a.at(1).get<int>(), a.at(2).get<int>(), a.at(3).get<int>()};
}

// Returns the failures ("" when the image passes).
std::string check(const Image& im, const nlohmann::json& j, bool verbose) {
  const auto pal = palette();
  std::ostringstream fail;
  auto report = [&](const char* name, Rect r, const Stats& s) {
    if (verbose)
      std::printf("  %-11s rect (%d, %d, %d, %d): %ld px, %.1f %% colormap, %zu distinct colours, top colour %.1f %%\n", name,
                  r.x, r.y, r.w, r.h, s.pixels, s.pixels ? 100.0 * double(s.colormap_pixels) / double(s.pixels) : 0.0,
                  s.distinct, 100.0 * s.top_share);
  };
  const Rect hm = rect_of(j, "heatmap"), ts = rect_of(j, "token_strip"), hg = rect_of(j, "head_grid");
  if (hm.w < 32 || hm.h < 32) fail << "heatmap rectangle too small or missing; ";
  if (ts.w < 32 || ts.h < 8) fail << "token strip rectangle too small or missing; ";
  const Stats a = stats(im, hm, pal), b = stats(im, ts, pal), c = stats(im, hg, pal), all = stats(im, {0, 0, im.w, im.h}, pal);
  report("heatmap", hm, a);
  report("token strip", ts, b);
  report("head grid", hg, c);
  report("window", {0, 0, im.w, im.h}, all);
  if (a.pixels == 0 || double(a.colormap_pixels) < 0.85 * double(a.pixels)) fail << "heatmap is not mostly colormap colours; ";
  if (a.distinct < 24) fail << "heatmap has only " << a.distinct << " distinct colours; ";
  // Presenting, the head grid is folded away (the sidecar says so with an empty rectangle).
  const bool grid_folded = j.value("presentation", false) && hg.w == 0;
  if (!grid_folded) {
    if (c.pixels == 0 || double(c.colormap_pixels) < 0.5 * double(c.pixels)) fail << "head grid is not mostly colormap colours; ";
    if (c.distinct < 8) fail << "head grid has only " << c.distinct << " distinct colours; ";
  }
  if (b.distinct < 8) fail << "token strip has only " << b.distinct << " distinct colours; ";
  if (b.top_share > 0.7) fail << "token strip is mostly one colour; ";
  if (all.distinct < 64) fail << "the window has only " << all.distinct << " distinct colours; ";
  return fail.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: check_screenshot SHOT.png [--expect-error]\n");
    return 2;
  }
  const std::string png = argv[1];
  const bool expect_error = argc > 2 && std::string(argv[2]) == "--expect-error";
  Image im;
  int n = 0;
  unsigned char* data = stbi_load(png.c_str(), &im.w, &im.h, &n, 3);
  if (!data) {
    std::fprintf(stderr, "not ok: cannot read %s\n", png.c_str());
    return 1;
  }
  im.px.assign(data, data + static_cast<size_t>(im.w) * static_cast<size_t>(im.h) * 3);
  stbi_image_free(data);
  std::ifstream in(png + ".json");
  if (!in) {
    std::fprintf(stderr, "not ok: no sidecar %s.json\n", png.c_str());
    return 1;
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not ok: %s.json: %s\n", png.c_str(), e.what());
    return 1;
  }
  int rc = 0;
  std::printf("%s: %dx%d, model %s\n", png.c_str(), im.w, im.h, j.value("model", "?").c_str());
  if (im.w < 800 || im.h < 500) {
    std::printf("not ok: the window is %dx%d, expected the normal size\n", im.w, im.h);
    rc = 1;
  }
  const std::string failures = check(im, j, true);
  if (!failures.empty()) {
    std::printf("not ok: %s\n", failures.c_str());
    rc = 1;
  }
  const std::string err = j.value("error", "");
  if (expect_error && err.empty()) {
    std::printf("not ok: expected an error message in the UI, got none\n");
    rc = 1;
  }
  if (!expect_error && !err.empty()) {
    std::printf("not ok: the UI shows an error: %s\n", err.c_str());
    rc = 1;
  }
  // The checker must reject a blank window with the same rectangles.
  Image blank = im;
  std::fill(blank.px.begin(), blank.px.end(), static_cast<unsigned char>(30));
  if (check(blank, j, false).empty()) {
    std::printf("not ok: the checker accepts a blank image\n");
    rc = 1;
  }
  std::printf(rc == 0 ? "ok\n" : "FAILED\n");
  return rc;
}
