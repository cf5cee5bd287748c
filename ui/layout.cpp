#include "ui/layout.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace attnviz::ui {

namespace {
// Share of a region's length a panel asks for, relative to its neighbours.
float tile_weight(const std::string& title) {
  if (title == "Caption") return 1.3f;
  if (title == "Model") return 0.7f;
  if (title == "Tokens & context window") return 0.9f;
  if (title == "Training") return 4.5f;
  if (title == "Guided lesson") return 2.f;
  if (title == "All heads (softmax)") return 1.5f;
  if (title == "Experts" || title == "Why this score" || title == "Circuits" || title == "Head scan") return 2.5f;
  return 1.f;
}

constexpr ImGuiWindowFlags kTileFlags =
    ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
    ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollbar |
    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_NoBackground;  // never overlapped: the clear colour shows
}  // namespace

void Layout::apply_preset(LayoutPreset p, const Panel* keep_open) {
  state_ = preset_layout(p);
  const std::vector<std::string> opens = preset_opens(p);
  for (Panel* panel : panels_)
    if (panel != keep_open) *panel->p_open() = std::find(opens.begin(), opens.end(), panel->title()) != opens.end();
}

void Layout::draw(FrameContext& ctx, const Metrics& m) {
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  // The panels of each region, open ones only, in drawing order.
  std::vector<Panel*> by_region[kRegionCount];
  for (Panel* p : panels_) {
    p->mark_hidden();
    if (p->open()) by_region[static_cast<int>(region_of(state_, p->title()))].push_back(p);
  }
  LayoutInput in;
  in.width = d.x;
  in.height = d.y;
  in.top = m.top;
  in.bottom = m.bottom;
  in.gap = std::max(4.f, std::round(ImGui::GetFontSize() * 0.35f));
  in.has_left = !by_region[static_cast<int>(Region::Left)].empty();
  in.has_right = !by_region[static_cast<int>(Region::Right)].empty();
  in.has_bottom = !by_region[static_cast<int>(Region::Bottom)].empty();
  in.floor = std::round(0.5f * std::min(d.x, d.y));
  in.min_region = std::round(ImGui::GetFontSize() * 6.f);
  LayoutState s = state_;
  if (m.min_left > 0.f && !s.left_dragged) s.left = std::max(s.left, m.min_left / std::max(1.f, d.x));
  input_ = in;
  geom_ = compute_layout(s, in);
  if (m.left_bottom > 0.f) {  // the left column stops above what is under it (the status bar)
    LayoutRect& l = geom_.region[static_cast<int>(Region::Left)];
    l.h = std::max(0.f, m.left_bottom - l.y);
    geom_.splitter_left.h = l.h;
  }

  cut_.clear();
  for (int r = 0; r < kRegionCount; ++r) {
    const std::vector<Panel*>& ps = by_region[r];
    const LayoutRect rect = geom_.region[r];
    if (ps.empty() || rect.empty()) continue;
    // Bottom tiles left to right, the others top to bottom; the center tabs all it holds.
    const bool across = static_cast<Region>(r) == Region::Bottom;
    const float extent = across ? rect.w : rect.h;
    std::vector<float> weights;
    int max_tiles = 0;  // Training or the lesson open: the panels after them share one tile, as tabs
    for (const Panel* p : ps) {
      weights.push_back(tile_weight(p->title()));
      if (p->title() == "Training" || p->title() == "Guided lesson") max_tiles = static_cast<int>(weights.size()) + 1;
    }
    const float min_tile = static_cast<Region>(r) == Region::Center ? 1e9f : across ? m.min_tile_w : m.min_tile_h;
    const std::vector<Tile> tiles = tile_region(weights, extent, min_tile, in.gap, max_tiles);
    for (size_t t = 0; t < tiles.size(); ++t) {
      const Tile& tile = tiles[t];
      LayoutRect tr = rect;
      if (across)
        tr.x += tile.offset, tr.w = tile.extent;
      else
        tr.y += tile.offset, tr.h = tile.extent;
      draw_tile(ctx, m, static_cast<Region>(r), static_cast<int>(t),
                std::vector<Panel*>(ps.begin() + tile.first, ps.begin() + tile.first + tile.count), tr);
    }
  }
  for (const Panel* p : panels_) was_open_[p] = p->open();
  draw_splitter("##split.left", geom_.splitter_left, true, 0);
  draw_splitter("##split.right", geom_.splitter_right, true, 1);
  draw_splitter("##split.bottom", geom_.splitter_bottom, false, 2);
}

void Layout::draw_tile(FrameContext& ctx, const Metrics& m, Region r, int index, const std::vector<Panel*>& panels,
                       LayoutRect rect) {
  const std::string id = std::string("##tile.") + region_name(r) + "." + std::to_string(index);
  ImGui::SetNextWindowPos(ImVec2(rect.x, rect.y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(rect.w, rect.h), ImGuiCond_Always);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding,
                      ImVec2(ImGui::GetStyle().WindowPadding.x * 0.5f, ImGui::GetStyle().WindowPadding.y * 0.5f));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowBorderSize, 0.f);
  const bool visible = ImGui::Begin(id.c_str(), nullptr, kTileFlags);
  ImGui::PopStyleVar(2);
  if (visible) {
    const auto body = [&](Panel* p) {
      p->draw_in_tile(ctx, ImGui::GetContentRegionAvail());
      if (!p->cut().empty()) cut_[p->title()] = p->cut();
      if (m.after_panel) m.after_panel(p);
    };
    // The heatmap alone in the center: no tab, all the room to the matrix.
    if (r == Region::Center && panels.size() == 1) {
      body(panels[0]);
    } else if (ImGui::BeginTabBar("tabs", ImGuiTabBarFlags_Reorderable | ImGuiTabBarFlags_FittingPolicyScroll)) {
      for (Panel* p : panels) {
        const bool just_opened = !was_open_[p];
        const ImGuiTabItemFlags f = just_opened ? ImGuiTabItemFlags_SetSelected : 0;
        const bool selected = ImGui::BeginTabItem(p->title().c_str(), p->p_open(), f);
        tab_menu(p);
        if (selected) {
          body(p);
          ImGui::EndTabItem();
        }
      }
      ImGui::EndTabBar();
    }
  }
  ImGui::End();
}

void Layout::tab_menu(Panel* p) {
  if (!ImGui::BeginPopupContextItem()) return;
  ImGui::TextDisabled("move to");
  const Region here = region_of(state_, p->title());
  for (Region r : {Region::Left, Region::Right, Region::Bottom, Region::Center})
    if (ImGui::MenuItem(region_name(r), nullptr, r == here, r != here)) state_.moved[p->title()] = r;
  ImGui::Separator();
  if (ImGui::MenuItem("Close")) *p->p_open() = false;
  ImGui::EndPopup();
}

void Layout::draw_splitter(const char* id, LayoutRect rect, bool vertical, int which) {
  if (rect.empty()) return;
  ImGui::SetNextWindowPos(ImVec2(rect.x, rect.y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(rect.w, rect.h), ImGuiCond_Always);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowMinSize, ImVec2(1, 1));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowBorderSize, 0.f);
  ImGui::Begin(id, nullptr, kTileFlags | ImGuiWindowFlags_NoFocusOnAppearing);
  ImGui::PopStyleVar(3);
  ImGui::InvisibleButton("grip", ImVec2(rect.w, rect.h));
  const bool hot = ImGui::IsItemHovered() || ImGui::IsItemActive();
  if (hot) ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (ImGui::IsItemActivated()) grab_offset_ = vertical ? mouse.x - rect.x : mouse.y - rect.y, dragging_ = which;
  if (ImGui::IsItemActive() && dragging_ == which) {
    if (which == 0) drag_left(state_, input_, mouse.x - grab_offset_);
    if (which == 1) drag_right(state_, input_, mouse.x - grab_offset_);
    if (which == 2) drag_bottom(state_, input_, mouse.y - grab_offset_);
  }
  if (ImGui::IsItemDeactivated()) dragging_ = -1;
  // A thin line in the middle, brighter under the mouse.
  const ImU32 col = ImGui::GetColorU32(hot ? ImGuiCol_SeparatorActive : ImGuiCol_Separator);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (vertical)
    dl->AddLine(ImVec2(rect.x + rect.w * 0.5f, rect.y), ImVec2(rect.x + rect.w * 0.5f, rect.y + rect.h), col,
                hot ? 2.f : 1.f);
  else
    dl->AddLine(ImVec2(rect.x, rect.y + rect.h * 0.5f), ImVec2(rect.x + rect.w, rect.y + rect.h * 0.5f), col,
                hot ? 2.f : 1.f);
  ImGui::End();
}

std::string Layout::sidecar_json(float sx, float sy) const {
  auto rect = [&](const LayoutRect& r) {
    return nlohmann::json::array(
        {std::lround(r.x * sx), std::lround(r.y * sy), std::lround(r.w * sx), std::lround(r.h * sy)});
  };
  nlohmann::json j;
  j["preset"] = preset_name(state_.preset);
  j["fractions"] = {{"left", state_.left}, {"right", state_.right}, {"bottom", state_.bottom}};
  for (int r = 0; r < kRegionCount; ++r) j["regions"][region_name(static_cast<Region>(r))] = rect(geom_.region[r]);
  j["splitters"] = {{"left", rect(geom_.splitter_left)},
                    {"right", rect(geom_.splitter_right)},
                    {"bottom", rect(geom_.splitter_bottom)}};
  nlohmann::json places = nlohmann::json::object();
  for (const Panel* p : panels_)
    if (p->open()) places[p->title()] = region_name(region_of(state_, p->title()));
  j["places"] = places;
  j["cut"] = cut_;
  return j.dump();
}

}  // namespace attnviz::ui
