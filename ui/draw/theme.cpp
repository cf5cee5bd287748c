#include "ui/draw/theme.h"

#include <imgui.h>

namespace attnviz::ui {

void apply_theme(bool presentation, float scale) {
  ImGuiStyle& st = ImGui::GetStyle();
  st = ImGuiStyle();
  if (!presentation) {
    ImGui::StyleColorsDark(&st);
    st.WindowRounding = 4.f;
    st.FrameRounding = 3.f;
    st.GrabRounding = 3.f;
    st.TabRounding = 3.f;
    st.WindowBorderSize = 1.f;
    st.Colors[ImGuiCol_WindowBg] = ImVec4(0.09f, 0.10f, 0.12f, 1.f);
    st.Colors[ImGuiCol_TitleBgActive] = ImVec4(0.16f, 0.29f, 0.48f, 1.f);
  } else {
    ImGui::StyleColorsDark(&st);
    ImVec4* c = st.Colors;
    const ImVec4 black(0, 0, 0, 1), white(1, 1, 1, 1), yellow(1.f, 0.9f, 0.f, 1.f), grey(0.25f, 0.25f, 0.25f, 1.f);
    c[ImGuiCol_Text] = white;
    c[ImGuiCol_TextDisabled] = ImVec4(0.8f, 0.8f, 0.8f, 1.f);
    c[ImGuiCol_WindowBg] = black;
    c[ImGuiCol_ChildBg] = black;
    c[ImGuiCol_PopupBg] = black;
    c[ImGuiCol_MenuBarBg] = black;
    c[ImGuiCol_Border] = white;
    c[ImGuiCol_FrameBg] = grey;
    c[ImGuiCol_FrameBgHovered] = ImVec4(0.35f, 0.35f, 0.35f, 1.f);
    c[ImGuiCol_FrameBgActive] = ImVec4(0.45f, 0.45f, 0.45f, 1.f);
    c[ImGuiCol_TitleBg] = black;
    c[ImGuiCol_TitleBgActive] = ImVec4(0.f, 0.2f, 0.6f, 1.f);
    c[ImGuiCol_Button] = ImVec4(0.f, 0.25f, 0.7f, 1.f);
    c[ImGuiCol_ButtonHovered] = ImVec4(0.f, 0.35f, 0.9f, 1.f);
    c[ImGuiCol_ButtonActive] = yellow;
    c[ImGuiCol_Tab] = grey;
    c[ImGuiCol_TabHovered] = ImVec4(0.f, 0.35f, 0.9f, 1.f);
    c[ImGuiCol_TabActive] = ImVec4(0.f, 0.3f, 0.8f, 1.f);
    c[ImGuiCol_CheckMark] = yellow;
    c[ImGuiCol_SliderGrab] = yellow;
    c[ImGuiCol_SliderGrabActive] = white;
    c[ImGuiCol_Header] = ImVec4(0.f, 0.3f, 0.8f, 1.f);
    c[ImGuiCol_PlotHistogram] = yellow;
    st.WindowBorderSize = 2.f;
    st.FrameBorderSize = 1.f;
    st.WindowRounding = 0.f;
    st.FrameRounding = 0.f;
  }
  st.ScaleAllSizes(scale);
}

}  // namespace attnviz::ui
