#include "ui/draw/imgui_util.h"

#include <algorithm>
#include <cmath>

#include "core/engine/trace.h"

namespace attnviz::ui {

ImU32 group_color(int g, int n, float alpha) {
  float r, gg, b;
  const float hue = n > 0 ? std::fmod(0.08f + static_cast<float>(g) / static_cast<float>(n), 1.f) : 0.f;
  ImGui::ColorConvertHSVtoRGB(hue, 0.75f, 0.95f, r, gg, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, gg, b, alpha));
}

ImU32 chip_color(int id) {
  float r, g, b;
  const float hue = std::fmod(0.13f + static_cast<float>(id) * 0.618034f, 1.f);
  ImGui::ColorConvertHSVtoRGB(hue, 0.35f, 0.95f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 1.f));
}

void draw_ablated_mark(ImDrawList* dl, ImVec2 a, ImVec2 b, float thickness) {
  const ImU32 red = IM_COL32(235, 50, 50, 230);
  dl->AddRect(a, b, red, 0.f, 0, thickness);
  dl->AddLine(a, b, red, thickness);
  dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y), red, thickness);
}

ImU32 role_color(const std::string& role, uint8_t alpha) {
  if (role == "system") return IM_COL32(190, 140, 255, alpha);
  if (role == "user") return IM_COL32(90, 170, 255, alpha);
  if (role == "assistant") return IM_COL32(110, 220, 130, alpha);
  return IM_COL32(200, 200, 200, alpha);
}

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void text_centered(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ImU32 col, const std::string& s) {
  const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
  const ImVec2 at{std::floor((p0.x + p1.x - ts.x) * 0.5f), std::floor((p0.y + p1.y - ts.y) * 0.5f)};
  dl->PushClipRect(p0, p1, true);
  dl->AddText(at, col, s.c_str());
  dl->PopClipRect();
}

void value_bar(ImDrawList* dl, ImVec2 a, ImVec2 b, double v, double range) {
  const float mid = std::round((a.x + b.x) * 0.5f), half = (b.x - a.x) * 0.5f;
  const float w = static_cast<float>(std::clamp(v / range, -1.0, 1.0)) * half;
  const Rgb8 c = colormap_rgb(Colormap::Diverging, v > 0 ? 0.9f : 0.1f);
  dl->AddRectFilled(ImVec2(std::min(mid, mid + w), a.y + 1), ImVec2(std::max(mid, mid + w), b.y - 1), to_u32(c));
  dl->AddLine(ImVec2(mid, a.y), ImVec2(mid, b.y), ImGui::GetColorU32(ImGuiCol_TextDisabled));
}
void error_line(const std::string& e) {
  if (e.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.4f, 0.4f, 1.f));
  ImGui::TextWrapped("%s", e.c_str());
  ImGui::PopStyleColor();
}

}  // namespace attnviz::ui
