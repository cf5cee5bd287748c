#include "ui/panels/model_panel.h"

#include <cstdio>
#include <iterator>
#include <utility>

#include "core/engine/int8_product.h"
#include "core/engine/stored_product.h"
#include "core/limits.h"
#include "ui/draw/fonts.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {
std::string count_str(int64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", static_cast<double>(n) / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", static_cast<double>(n) / 1e6);
  else if (n >= 10000) std::snprintf(buf, sizeof buf, "%.1f k", static_cast<double>(n) / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}
}  // namespace

void draw_model_panel(FrameContext& ctx) {
  if (!ctx.model) {
    ImGui::TextDisabled("no model loaded");
    return;
  }
  const Model& m = *ctx.model;
  const ModelConfig& c = m.config;
  if (ctx.snap.random_weights)
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), "RANDOM WEIGHTS: patterns are not learned");
  ImGui::TextWrapped("%s", m.name.c_str());
  ImGui::Text("%s (%s) \xC2\xB7 %s parameters", c.model_type.c_str(), c.block_kind().c_str(),
              count_str(m.parameter_count()).c_str());
  // What the architecture does beyond llama's (QK-norm, soft-cap, windows, layers without
  // RoPE …), and what loading decided.
  const std::string features = c.features();
  if (!features.empty()) {
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f), "%s", features.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::IsItemHovered() && c.any_local())
      ImGui::SetTooltip("a local layer of window W: query i sees only keys [i \xE2\x88\x92 W + 1, i], every token keeps "
                        "its absolute position; global layers see [0, i]. block_size is a different thing: it crops the "
                        "text to its last block_size tokens, and positions restart at 0.");
  }
  for (const std::string& note : c.notes) {
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextDisabled("note: %s", note.c_str());
    ImGui::PopTextWrapPos();
  }
  // What the file stored, and how the weights are held in memory (in place or float32).
  ImGui::TextWrapped("%s: %s", m.format.c_str(), m.stored_types_str().c_str());
  ImGui::TextWrapped("in memory: %s (%s)%s", format_bytes(static_cast<double>(m.weight_bytes())).c_str(),
                     m.held_types_str().c_str(),
                     m.weights.any_stored() ? ", read where the file stores them" : "");
  if (ImGui::IsItemHovered() && m.weights.any_stored())
    ImGui::SetTooltip("The matrices stay in the file's memory map in their own types and are decoded block by block "
                      "inside each product (%s kernels); activations and every recorded matrix are float32. "
                      "attnviz-cli --weights f32 converts them instead.",
                      stored_kernel_name());
  if (m.weights.any_stored()) {  // the arithmetic of the last run's products (Compute menu)
    const bool int8 = ctx.snap.trace && ctx.snap.trace->arith == "int8";
    ImGui::TextWrapped("products: %s", int8 ? "int8, llama.cpp's arithmetic (activations rounded to 8 bits per block)"
                                            : "float32, exact");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(int8 ? "Integer dot products with the quantized weights (%s kernels) when appending, float32\n"
                               "products of the same rounded activations on a full pass. Compute menu: float32."
                             : "Each weight decoded to float32 (%s kernels). Compute menu: int8, llama.cpp's "
                               "arithmetic, faster typing.",
                        int8 ? int8_kernel_name() : stored_kernel_name());
  }
  ImGui::Text("head_size = n_embd / n_head = %d / %d = %d", c.n_embd, c.n_head, c.n_embd / std::max(1, c.n_head));
  if (c.head_size != c.n_embd / std::max(1, c.n_head)) ImGui::TextDisabled("(this config sets head_dim = %d)", c.head_size);

  if (ImGui::BeginTable("cfg", 4, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
    const std::pair<const char*, int> cells[] = {  // two per row
        {"vocab V", c.vocab_size}, {"layers L", c.n_layer},        {"n_embd C", c.n_embd},
        {"context", c.n_ctx},      {"n_head H", c.n_head},         {"n_kv_head", c.n_kv_head},
        {"head_size d", c.head_size}, {"MLP hidden", c.n_inner}};
    for (size_t i = 0; i < std::size(cells); ++i) {
      if (i % 2 == 0) ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", cells[i].first);
      ImGui::TableNextColumn();
      ImGui::Text("%d", cells[i].second);
    }
    ImGui::EndTable();
  }

  const ParamCounts p = parameter_counts(c);
  const double total = static_cast<double>(std::max<int64_t>(1, p.total()));
  if (ImGui::BeginTable("params", 3, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders)) {
    ImGui::TableSetupColumn("part");
    ImGui::TableSetupColumn("parameters");
    ImGui::TableSetupColumn("share");
    ImGui::TableHeadersRow();
    const std::pair<const char*, int64_t> parts[] = {
        {"token embedding (V \xC3\x97 C)", p.token_embedding}, {"position embedding", p.position_embedding},
        {"attention W_q W_k W_v W_o", p.attention},             {"MLP", p.mlp},
        {"norms", p.norms},                                    {"lm_head (untied)", p.lm_head},
        {"total", p.total()}};
    for (const auto& [name, n] : parts) {
      if (n == 0) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(name);
      ImGui::TableNextColumn();
      ImGui::Text("%s", count_str(n).c_str());
      ImGui::TableNextColumn();
      ImGui::ProgressBar(static_cast<float>(static_cast<double>(n) / total), ImVec2(-1, 0));
    }
    ImGui::EndTable();
  }
  ImGui::TextDisabled("%s", ctx.fonts.note.c_str());
}

}  // namespace attnviz::ui
