#include "ui/panels/model_browser_panel.h"

#include <imgui_stdlib.h>

#include <cstdlib>
#include <filesystem>

#include "ui/state/app_state.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace fs = std::filesystem;

ModelBrowserPanel::ModelBrowserPanel(ModelLoader& loader) : Panel("Open model", /*open*/ false), loader_(loader) {
  const char* home = std::getenv("HOME");
  cwd_ = home && *home ? home : "/";
}

void ModelBrowserPanel::open_now() {
  *p_open() = true;
  listing_.refresh();
}

void ModelBrowserPanel::set_error(const std::string& spec, const std::string& error) {
  error_spec_ = spec;
  error_ = error;
}

void ModelBrowserPanel::request_open(FrameContext& ctx, const std::string& spec) {
  ctx.state.open_request = spec;
  error_.clear();
  error_spec_.clear();
}

void ModelBrowserPanel::select(const StoredModel& m) {
  if (m.path == selected_path_) return;
  selected_path_ = m.path;
  selected_spec_ = store_entry_spec(m);
  selected_name_ = m.name;
  selected_opens_ = m.opens;
  selected_reason_ = m.reason;
  // The header of one model (a GGUF file's metadata or config.json): read once per selection.
  details_ = m.opens ? model_details(m.path) : ModelDetails{};
}

void ModelBrowserPanel::draw_content(FrameContext& ctx) {
  const float fs = ImGui::GetFontSize();
  draw_loading();

  // --- the stores
  ImGui::SetNextItemWidth(fs * 18.f);
  ImGui::InputTextWithHint("##filter", "filter: name, source, architecture, quantization", &filter_);
  ImGui::SameLine();
  if (ImGui::Button("Refresh")) listing_.refresh();
  ImGui::SameLine();
  const auto models = listing_.models();
  if (listing_.running()) ImGui::TextDisabled("reading the model stores…");
  else if (models) ImGui::TextDisabled("%zu found in the Ollama, Hugging Face, LM Studio and llama.cpp stores", models->size());
  if (models) {
    if (models->empty())
      ImGui::TextWrapped("No model store was found (Ollama's ~/.ollama/models, the Hugging Face cache "
                         "~/.cache/huggingface/hub, LM Studio's ~/.lmstudio/models, ~/.cache/llama.cpp). "
                         "Open a file or folder below.");
    else
      draw_table(ctx, *models);
  }
  ImGui::Separator();
  draw_selected(ctx);
  ImGui::Separator();
  draw_files(ctx);
}

void ModelBrowserPanel::draw_loading() {
  const ModelLoader::Progress p = loader_.progress();
  if (p.running) {
    ImGui::Text("Loading %s (%.1f s)", p.spec.c_str(), p.seconds);
    const float frac = p.total ? static_cast<float>(static_cast<double>(p.done) / static_cast<double>(p.total)) : 0.f;
    const std::string over = p.total ? format_bytes(static_cast<int64_t>(p.done)) + " of " + format_bytes(static_cast<int64_t>(p.total))
                                     : std::string("reading the header");
    ImGui::ProgressBar(frac, ImVec2(-ImGui::GetFontSize() * 6.f, 0.f), over.c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) loader_.cancel();
    ImGui::TextDisabled("The model shown keeps running until this one is ready.");
    ImGui::Separator();
  }
  if (!error_.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.45f, 0.4f, 1.f));
    ImGui::TextWrapped("Could not open %s:\n%s", error_spec_.c_str(), error_.c_str());
    ImGui::PopStyleColor();
    ImGui::Separator();
  }
}

void ModelBrowserPanel::draw_table(FrameContext& ctx, const std::vector<StoredModel>& models) {
  const float fs = ImGui::GetFontSize();
  const float h = std::max(fs * 6.f, ImGui::GetContentRegionAvail().y - fs * 15.f);
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("stores", 6, flags, ImVec2(0.f, h))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("model", ImGuiTableColumnFlags_WidthStretch, 4.f);
  ImGui::TableSetupColumn("source", ImGuiTableColumnFlags_WidthStretch, 1.f);
  ImGui::TableSetupColumn("architecture", ImGuiTableColumnFlags_WidthStretch, 1.4f);
  ImGui::TableSetupColumn("type", ImGuiTableColumnFlags_WidthStretch, 1.f);
  ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthStretch, 1.f);
  ImGui::TableSetupColumn("opens", ImGuiTableColumnFlags_WidthStretch, 3.f);
  ImGui::TableHeadersRow();
  // The first model that opens is selected when nothing is, so its shape shows at once.
  if (selected_path_.empty())
    for (const StoredModel& m : models)
      if (m.opens && store_entry_matches(m, filter_)) {
        select(m);
        break;
      }
  for (const StoredModel& m : models) {
    if (!store_entry_matches(m, filter_)) continue;
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::PushID(m.path.c_str());
    if (!m.opens) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    const bool picked = ImGui::Selectable(m.name.c_str(), m.path == selected_path_,
                                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("%s%s%s", m.path.c_str(), m.opens ? "" : "\ndoes not open: ", m.reason.c_str());
    if (picked) {
      select(m);
      if (m.opens && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) request_open(ctx, store_entry_spec(m));
    }
    ImGui::TableSetColumnIndex(1);
    ImGui::TextUnformatted(m.source.c_str());
    ImGui::TableSetColumnIndex(2);
    ImGui::TextUnformatted(m.architecture.c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::TextUnformatted(m.file_type.c_str());
    ImGui::TableSetColumnIndex(4);
    if (m.bytes) ImGui::TextUnformatted(format_bytes(static_cast<int64_t>(m.bytes)).c_str());
    ImGui::TableSetColumnIndex(5);
    ImGui::TextUnformatted(m.opens ? "yes" : ("no: " + m.reason).c_str());
    if (!m.opens) ImGui::PopStyleColor();
    ImGui::PopID();
  }
  ImGui::EndTable();
}

void ModelBrowserPanel::draw_selected(FrameContext& ctx) {
  if (selected_path_.empty()) {
    ImGui::TextDisabled("Select a model to see its shape; double-click one to open it.");
    return;
  }
  ImGui::Text("%s", selected_name_.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("%s", selected_path_.c_str());
  if (!selected_opens_) {
    ImGui::TextDisabled("does not open: %s", selected_reason_.c_str());
    return;
  }
  if (!details_.error.empty()) {
    error_line(details_.error);
  } else {
    ImGui::TextUnformatted(details_.shape.c_str());
    if (!details_.features.empty()) ImGui::TextWrapped("%s", details_.features.c_str());
    ImGui::TextDisabled("%s", details_.params.c_str());
  }
  const bool current = ctx.state.model_spec == selected_spec_;
  if (ImGui::Button(current ? "Open again" : "Open")) request_open(ctx, selected_spec_);
  ImGui::SameLine();
  ImGui::TextDisabled("as %s", selected_spec_.c_str());
}

void ModelBrowserPanel::draw_files(FrameContext& ctx) {
  const float fs = ImGui::GetFontSize();
  ImGui::SetNextItemWidth(-fs * 4.f);
  const bool enter = ImGui::InputTextWithHint("##path", "any other path: a model folder (config.json) or FILE.gguf", &path_,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Open##path") || enter) && !path_.empty()) request_open(ctx, path_);
  if (!ImGui::CollapsingHeader("Browse files")) return;
  if (cwd_ != listed_cwd_) {
    files_ = list_folder(cwd_, &files_error_);
    std::error_code ec;
    cwd_is_model_ = fs::is_regular_file(fs::path(cwd_) / "config.json", ec);
    listed_cwd_ = cwd_;
  }
  if (ImGui::SmallButton("up")) cwd_ = fs::path(cwd_).parent_path().string();
  ImGui::SameLine();
  ImGui::TextUnformatted(cwd_.c_str());
  if (cwd_is_model_) {
    ImGui::SameLine();
    if (ImGui::SmallButton("Open this model folder")) request_open(ctx, cwd_);
  }
  if (!files_error_.empty()) error_line(files_error_);
  if (!ImGui::BeginChild("files", ImVec2(0.f, std::max(fs * 5.f, ImGui::GetContentRegionAvail().y)))) {
    ImGui::EndChild();
    return;
  }
  std::string enter_dir;
  for (const FolderEntry& f : files_) {
    const std::string label = f.dir ? f.name + "/" + (f.model_dir ? "   (model folder)" : "")
                                    : f.name + "   " + format_bytes(static_cast<int64_t>(f.bytes));
    if (ImGui::Selectable(label.c_str(), false)) {
      const std::string full = (fs::path(cwd_) / f.name).string();
      if (f.dir) enter_dir = full;  // a model folder opens from inside ("Open this model folder")
      else request_open(ctx, full);  // a .gguf file
    }
  }
  if (files_.empty() && files_error_.empty()) ImGui::TextDisabled("no folders or .gguf files here");
  ImGui::EndChild();
  if (!enter_dir.empty()) cwd_ = enter_dir;
}

}  // namespace attnviz::ui
