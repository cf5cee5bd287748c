// Small helpers for ImGui code in ui/: ImVec2 arithmetic, colours, text with a tooltip.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/export/colormap.h"

namespace attnviz::ui {

inline ImVec2 operator+(ImVec2 a, ImVec2 b) { return {a.x + b.x, a.y + b.y}; }
inline ImVec2 operator-(ImVec2 a, ImVec2 b) { return {a.x - b.x, a.y - b.y}; }
inline ImVec2 operator*(ImVec2 a, float s) { return {a.x * s, a.y * s}; }

inline ImU32 to_u32(Rgb8 c, uint8_t a = 255) { return IM_COL32(c.r, c.g, c.b, a); }

// An error message in red, wrapped to the panel's width; nothing when e is empty.
void error_line(const std::string& e);

// A distinct, readable colour for KV group g (of n): hues spread round the circle.
ImU32 group_color(int g, int n, float alpha = 1.f);
// A chip colour for token id `id`: light, so dark text stays readable; the same id always
// gets the same colour.
ImU32 chip_color(int id);

// The window's colours: the hidden cells in kOutsideWindowRgb (ui/state/window_paint.h),
// the band a local layer sees framed in window_color().
inline ImU32 window_color(uint8_t a = 255) { return IM_COL32(0, 230, 170, a); }

// "(?)" with a wrapped tooltip.
void help_marker(const char* text);

// The colour of a chat role in the token strip, the heatmap and the chat editor: system
// violet, user blue, assistant green, any other grey.
ImU32 role_color(const std::string& role, uint8_t alpha = 255);

// The mark of an ablated head on its box [a, b]: a red frame and a red cross.
void draw_ablated_mark(ImDrawList* dl, ImVec2 a, ImVec2 b, float thickness);

// A bar from the centre of [a, b] towards the right (v > 0, red) or the left (blue), its
// length v / range of the half width.
void value_bar(ImDrawList* dl, ImVec2 a, ImVec2 b, double v, double range);

// Text centred in [p0, p1] on a draw list (clipped to the box).
void text_centered(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ImU32 col, const std::string& s);

}  // namespace attnviz::ui
