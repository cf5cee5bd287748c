#include "ui/panels/head_stats_panel.h"

#include <algorithm>

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {

// The table's columns after "head": what each shows, its field, its tooltip.
struct Column {
  const char* name;
  float HeadScore::*field;
  const char* help;
};
const Column kColumns[] = {
    {"entropy", &HeadScore::entropy_bits, "mean entropy of the attention rows, bits (0 = one key per row)"},
    {"dist", &HeadScore::mean_distance, "mean distance looked back, \xCE\xA3 p\xC2\xB7(i \xE2\x88\x92 j), tokens"},
    {"1st tok", &HeadScore::first_token, "mean weight on the first token (not the learned sink: a token of the text)"},
    {"diag", &HeadScore::self, "mean weight on the diagonal (the token itself)"},
    {"prev", &HeadScore::previous_token, "mean weight on the previous token"},
    {"ind", &HeadScore::induction, "induction: weight on the token after an earlier occurrence of the current one"},
    // Last: shown for models with learned sinks only (GPT-OSS).
    {"learned sink", &HeadScore::sink_mass,
     "mean probability a row gives the head's learned sink: an extra softmax column that is dropped, so the row's "
     "weights over the tokens sum to 1 \xE2\x88\x92 this"},
};
constexpr int kColumnCount = static_cast<int>(sizeof kColumns / sizeof kColumns[0]);

}  // namespace

void HeadStatsPanel::sort_rows(int column, bool ascending) {
  std::stable_sort(rows_.begin(), rows_.end(), [&](const HeadScore& a, const HeadScore& b) {
    const auto key = [&](const HeadScore& s) -> float {
      return column == 0 ? static_cast<float>(s.layer * 10000 + s.head) : s.*kColumns[column - 1].field;
    };
    return ascending ? key(a) < key(b) : key(a) > key(b);
  });
}

void HeadStatsPanel::draw_content(FrameContext& ctx) {
  AppState& s = ctx.state;
  const bool fresh = serial_ != ctx.snap.trace_serial;
  if (fresh) {
    rows_ = ctx.head_scores();
    serial_ = ctx.snap.trace_serial;
  }
  // Scrolls both ways (a model with learned sinks has a ninth column), the header row and
  // the head column stay.
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  const bool sinks = std::any_of(rows_.begin(), rows_.end(), [](const HeadScore& r) { return r.sink_mass >= 0; });
  const int ncols = kColumnCount - (sinks ? 0 : 1);
  if (!ImGui::BeginTable(sinks ? "stats_sinks" : "stats", ncols + 1, flags)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("head", ImGuiTableColumnFlags_DefaultSort);
  for (int i = 0; i < ncols; ++i) ImGui::TableSetupColumn(kColumns[i].name, ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int i = 0; i <= ncols; ++i) {
    ImGui::TableSetColumnIndex(i);
    ImGui::TableHeader(ImGui::TableGetColumnName(i));
    if (i > 0 && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kColumns[i - 1].help);
  }
  if (ImGuiTableSortSpecs* spec = ImGui::TableGetSortSpecs(); spec && spec->SpecsCount > 0 && (spec->SpecsDirty || fresh)) {
    sort_rows(spec->Specs[0].ColumnIndex, spec->Specs[0].SortDirection == ImGuiSortDirection_Ascending);
    spec->SpecsDirty = false;
  }
  for (const HeadScore& r : rows_) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool ablated = s.ablation.has(r.layer, r.head);
    char name[32];
    std::snprintf(name, sizeof name, "L%d h%d%s", r.layer, r.head, ablated ? " \xE2\x9C\x95" : "");
    if (ablated) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.35f, 0.35f, 1.f));
    if (ImGui::Selectable(name, r.layer == s.layer && r.head == s.head, ImGuiSelectableFlags_SpanAllColumns)) {
      s.layer = r.layer, s.head = r.head;
      s.kv_group = ctx.model->config.kv_head_of(r.head);
    }
    if (ablated) ImGui::PopStyleColor();
    if (ImGui::IsItemClicked(ImGuiMouseButton_Right)) s.ablation.toggle(r.layer, r.head);
    for (int i = 0; i < ncols; ++i) {
      const Column& c = kColumns[i];
      ImGui::TableNextColumn();
      const float v = r.*c.field;
      if ((c.field == &HeadScore::induction || c.field == &HeadScore::sink_mass) && v < 0) ImGui::TextDisabled("-");
      else ImGui::Text(c.field == &HeadScore::mean_distance ? "%.2f" : "%.3f", v);
    }
  }
  ImGui::EndTable();
}

}  // namespace attnviz::ui
