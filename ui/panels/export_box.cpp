#include "ui/panels/export_box.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace attnviz::ui {

ExportBox::ExportBox(std::string default_path, std::string hint, bool message_below)
    : hint_(std::move(hint)), message_below_(message_below) {
  std::strncpy(path_, default_path.c_str(), sizeof path_ - 1);
}

void ExportBox::draw(const FrameContext& ctx, const ExportOptions& what) {
  draw([&](const std::string& path) {
    if (!ctx.has_trace()) throw Error("nothing to export yet: no result");
    return export_to_file(ctx.trace, *ctx.model, what, path);
  });
}

void ExportBox::draw(const std::function<std::string(const std::string& path)>& write) {
  ImGui::PushID(this);
  ImGui::AlignTextToFramePadding();
  ImGui::TextDisabled("export");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 16.f);
  ImGui::InputText("##path", path_, sizeof path_);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", hint_.c_str());
  ImGui::SameLine();
  if (ImGui::Button("save")) {
    const std::string path = path_;
    try {
      const std::string note = write(path);
      std::error_code ec;
      const auto abs = std::filesystem::absolute(path, ec);
      message_ = "wrote " + (ec ? path : abs.string()) + (note.empty() ? "" : " (" + note + ")");
      failed_ = false;
    } catch (const Error& e) {
      message_ = e.what();
      failed_ = true;
    } catch (const std::exception& e) {  // out of memory for a huge image, …: said, never a crash
      message_ = "could not export " + path + ": " + e.what();
      failed_ = true;
    }
  }
  if (!message_.empty()) {
    if (message_below_) ImGui::PushTextWrapPos(0.f);  // under the row, wrapped: a long path or error stays readable
    else ImGui::SameLine();
    if (failed_) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.35f, 1.f), "%s", message_.c_str());
    else ImGui::TextDisabled("%s", message_.c_str());
    if (message_below_) ImGui::PopTextWrapPos();
  }
  ImGui::PopID();
}

}  // namespace attnviz::ui
