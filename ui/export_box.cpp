#include "ui/export_box.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace attnviz::ui {

ExportBox::ExportBox(std::string default_path) {
  std::strncpy(path_, default_path.c_str(), sizeof path_ - 1);
}

void ExportBox::draw(const FrameContext& ctx, const ExportOptions& what) {
  ImGui::PushID(this);
  ImGui::AlignTextToFramePadding();
  ImGui::TextDisabled("export");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 16.f);
  ImGui::InputText("##path", path_, sizeof path_);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the extension picks the format: .png .svg .csv (one matrix) .npy");
  ImGui::SameLine();
  if (ImGui::Button("save") && ctx.has_trace()) {
    try {
      const std::string note = export_to_file(ctx.trace, *ctx.model, what, path_);
      std::error_code ec;
      const auto abs = std::filesystem::absolute(path_, ec);
      message_ = "wrote " + (ec ? std::string(path_) : abs.string()) + (note.empty() ? "" : " (" + note + ")");
      failed_ = false;
    } catch (const Error& e) {
      message_ = e.what();
      failed_ = true;
    }
  }
  if (!message_.empty()) {
    ImGui::SameLine();
    if (failed_) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.35f, 1.f), "%s", message_.c_str());
    else ImGui::TextDisabled("%s", message_.c_str());
  }
  ImGui::PopID();
}

}  // namespace attnviz::ui
