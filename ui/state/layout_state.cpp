#include "ui/state/layout_state.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace attnviz::ui {

namespace {
const char* const kRegionNames[kRegionCount] = {"left", "center", "right", "bottom"};
const char* const kPresetNames[] = {"explore", "research", "classroom"};

// Each preset's home for every panel (by title); a title not listed lives on the left.
struct Home {
  const char* title;
  Region explore, research, classroom;
};
constexpr Region L = Region::Left, C = Region::Center, R = Region::Right, B = Region::Bottom;
const Home kHomes[] = {
    {"Attention heatmap", C, C, C},
    {"Caption", L, L, L},
    {"Guided lesson", L, L, L},
    {"Text & model", L, L, L},
    {"Tokens & context window", L, L, L},
    {"Next token", L, L, L},
    {"Model", L, L, L},
    {"Head statistics", L, L, L},
    {"Training", L, L, L},
    {"All heads (softmax)", R, L, R},
    {"Head importance", R, L, R},
    {"GQA & KV cache", R, L, R},
    {"Experts", R, L, R},
    {"Why this score", R, R, R},
    {"Circuits", R, R, R},
    {"Head scan", R, R, R},
    {"Text view", B, R, B},
    {"Logit lens", B, R, B},
    {"Direct logit attribution", B, R, B},
    {"Compare prompts", B, R, B},
    {"Activation patching", B, R, B},
};

std::string lowered_name(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

const char* region_name(Region r) { return kRegionNames[static_cast<int>(r)]; }

bool region_from_name(const std::string& name, Region* r) {
  for (int i = 0; i < kRegionCount; ++i)
    if (lowered_name(name) == kRegionNames[i]) return *r = static_cast<Region>(i), true;
  return false;
}

const char* preset_name(LayoutPreset p) { return kPresetNames[static_cast<int>(p)]; }

bool preset_from_name(const std::string& name, LayoutPreset* p) {
  for (int i = 0; i < 3; ++i)
    if (lowered_name(name) == kPresetNames[i]) return *p = static_cast<LayoutPreset>(i), true;
  return false;
}

bool LayoutState::operator==(const LayoutState& o) const {
  return preset == o.preset && left == o.left && right == o.right && bottom == o.bottom &&
         left_dragged == o.left_dragged && right_dragged == o.right_dragged && bottom_dragged == o.bottom_dragged &&
         moved == o.moved;
}

LayoutState preset_layout(LayoutPreset p) {
  LayoutState s;
  s.preset = p;
  switch (p) {
    case LayoutPreset::Explore: s.left = 0.22f, s.right = 0.22f, s.bottom = 0.30f; break;
    case LayoutPreset::Research: s.left = 0.19f, s.right = 0.31f, s.bottom = 0.30f; break;
    case LayoutPreset::Classroom: s.left = 0.30f, s.right = 0.22f, s.bottom = 0.30f; break;
  }
  return s;
}

Region region_of(const LayoutState& s, const std::string& title) {
  if (auto it = s.moved.find(title); it != s.moved.end()) return it->second;
  for (const Home& h : kHomes)
    if (title == h.title)
      return s.preset == LayoutPreset::Explore    ? h.explore
             : s.preset == LayoutPreset::Research ? h.research
                                                  : h.classroom;
  return Region::Left;
}

std::vector<std::string> preset_opens(LayoutPreset p) {
  switch (p) {
    case LayoutPreset::Explore:
      return {"Text & model",    "Tokens & context window", "Attention heatmap", "Next token",    "Model",
              "Head statistics", "All heads (softmax)",     "Head importance",   "GQA & KV cache"};
    case LayoutPreset::Research:
      return {"Text & model", "Tokens & context window",  "Attention heatmap", "All heads (softmax)", "Text view",
              "Logit lens",   "Direct logit attribution", "Compare prompts"};
    case LayoutPreset::Classroom: return {"Attention heatmap", "Caption", "Text & model", "Tokens & context window"};
  }
  return {};
}

std::vector<std::string> preset_allows(LayoutPreset p) {
  if (p == LayoutPreset::Classroom) return preset_opens(p);
  return {};
}

LayoutGeometry compute_layout(const LayoutState& s, const LayoutInput& in) {
  LayoutGeometry g;
  const float W = in.width, top = in.top, H = std::max(0.f, in.bottom - in.top), gap = in.gap;
  if (W <= 0.f || H <= 0.f) return g;
  // Widths: the side columns' fractions, then the floor takes back what the center lacks
  // from the columns the user did not size (the right one first, then the left).
  float lw = in.has_left ? std::round(W * s.left) : 0.f;
  float rw = in.has_right ? std::round(W * s.right) : 0.f;
  // A side keeps at least min_region and leaves the others theirs (as the drags clamp).
  const auto clamp_side = [&](float w) {
    return std::clamp(w, in.min_region, std::max(in.min_region, W - 2.f * in.min_region));
  };
  if (in.has_left) lw = clamp_side(lw);
  if (in.has_right) rw = clamp_side(rw);
  const auto gaps_x = [&] { return (in.has_left ? gap : 0.f) + (in.has_right ? gap : 0.f); };
  float cw = W - lw - rw - gaps_x();
  if (cw < in.floor) {
    float need = in.floor - cw;
    if (in.has_right && !s.right_dragged) {
      const float take = std::min(need, rw - in.min_region);
      rw -= take, need -= take;
    }
    if (need > 0.f && in.has_left && !s.left_dragged) {
      const float take = std::min(need, lw - in.min_region);
      lw -= take, need -= take;
    }
    cw = W - lw - rw - gaps_x();
  }
  if (cw < in.min_region) {  // both sides dragged wide: the center keeps min_region, the right gives first
    const float need = in.min_region - cw;
    const float from_r = in.has_right ? std::min(need, std::max(0.f, rw - in.min_region)) : 0.f;
    rw -= from_r;
    lw -= in.has_left ? std::min(need - from_r, std::max(0.f, lw - in.min_region)) : 0.f;
    cw = W - lw - rw - gaps_x();
  }
  // Heights: the bottom strip's fraction of the body, the floor likewise.
  float bh = in.has_bottom ? std::round(H * s.bottom) : 0.f;
  if (in.has_bottom) bh = std::clamp(bh, in.min_region, std::max(in.min_region, H - in.min_region - gap));
  float ch = H - bh - (in.has_bottom ? gap : 0.f);
  if (in.has_bottom && ch < in.floor && !s.bottom_dragged) {
    bh = std::max(in.min_region, bh - (in.floor - ch));
    ch = H - bh - gap;
  }
  const float cx = lw + (in.has_left ? gap : 0.f);
  if (in.has_left) {
    g.region[static_cast<int>(Region::Left)] = {0.f, top, lw, H};
    g.splitter_left = {lw, top, gap, H};
  }
  g.region[static_cast<int>(Region::Center)] = {cx, top, cw, ch};
  if (in.has_right) {
    g.region[static_cast<int>(Region::Right)] = {W - rw, top, rw, ch};
    g.splitter_right = {cx + cw, top, gap, ch};
  }
  if (in.has_bottom) {
    g.region[static_cast<int>(Region::Bottom)] = {cx, top + ch + gap, W - cx, bh};
    g.splitter_bottom = {cx, top + ch, W - cx, gap};
  }
  return g;
}

namespace {
float body_h(const LayoutInput& in) { return std::max(1.f, in.bottom - in.top); }
}  // namespace

void drag_left(LayoutState& s, const LayoutInput& in, float x) {
  const float hi = std::max(in.min_region, in.width - in.min_region * 2.f);
  s.left = std::clamp(x, in.min_region, hi) / std::max(1.f, in.width);
  s.left_dragged = true;
}

void drag_right(LayoutState& s, const LayoutInput& in, float x) {
  const float w = in.width - x - in.gap;  // the right column starts after the splitter
  const float hi = std::max(in.min_region, in.width - in.min_region * 2.f);
  s.right = std::clamp(w, in.min_region, hi) / std::max(1.f, in.width);
  s.right_dragged = true;
}

void drag_bottom(LayoutState& s, const LayoutInput& in, float y) {
  const float h = in.bottom - y - in.gap;
  const float hi = std::max(in.min_region, body_h(in) - in.min_region);
  s.bottom = std::clamp(h, in.min_region, hi) / body_h(in);
  s.bottom_dragged = true;
}

std::vector<Tile> tile_region(const std::vector<float>& weights, float extent, float min_tile, float gap, int max_tiles) {
  std::vector<Tile> tiles;
  const int n = static_cast<int>(weights.size());
  if (n == 0 || extent <= 0.f) return tiles;
  const int fit = std::max(1, static_cast<int>(std::floor((extent + gap) / std::max(1.f, min_tile + gap))));
  const int k = std::min(max_tiles > 0 ? std::min(n, max_tiles) : n, fit);
  std::vector<float> w(static_cast<size_t>(k), 0.f);
  for (int i = 0; i < n; ++i) {
    const size_t t = static_cast<size_t>(std::min(i, k - 1));
    w[t] = std::max(w[t], std::max(0.05f, weights[static_cast<size_t>(i)]));
  }
  float total = 0.f;
  for (float x : w) total += x;
  const float room = extent - gap * static_cast<float>(k - 1);
  float at = 0.f;
  for (int t = 0; t < k; ++t) {
    Tile tile;
    tile.first = t;
    tile.count = t == k - 1 ? n - t : 1;
    tile.offset = at;
    tile.extent = t == k - 1 ? extent - at : std::round(room * w[static_cast<size_t>(t)] / total);
    at += tile.extent + gap;
    tiles.push_back(tile);
  }
  return tiles;
}

}  // namespace attnviz::ui
