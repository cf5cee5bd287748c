#include "ui/panels/head_scan_panel.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/model/paths.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {
const char* const kMetricLabels[] = {"previous token", "induction", "first token", "self", "entropy (bits)",
                                     "mean distance"};
}  // namespace

std::string shipped_corpus() {
  for (const std::string& d : data_dirs()) {
    const std::filesystem::path p = std::filesystem::path(d) / "assets" / "corpus" / "en-prose.txt";
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

void HeadScanPanel::start(FrameContext& ctx) {
  ScanOptions o;
  o.window = window_;
  o.top = 8;
  job_.start(ctx.snap.model, corpus_, o);
  scanned_model_ = ctx.model;
  example_error_.clear();
}

void HeadScanPanel::draw_content(FrameContext& ctx) {
  plot_rect_ = ImVec4(0, 0, 0, 0);
  if (!corpus_[0]) {
    const std::string def = shipped_corpus();
    std::snprintf(corpus_, sizeof corpus_, "%s", def.c_str());
  }
  if (!ctx.model) {
    ImGui::TextDisabled("no model");
    return;
  }
  if (pending_start_) {
    pending_start_ = false;
    if (!start_corpus_.empty()) std::snprintf(corpus_, sizeof corpus_, "%s", start_corpus_.c_str());
    start(ctx);
  }
  const float fs = ImGui::GetFontSize();
  const ScanJob::Status st = job_.status();
  ImGui::SetNextItemWidth(std::max(fs * 10.f, ImGui::GetContentRegionAvail().x - fs * 16.f));
  ImGui::InputTextWithHint("##corpus", "a UTF-8 text file", corpus_, sizeof corpus_);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(fs * 4.f);
  ImGui::InputInt("window", &window_, 0);
  window_ = std::clamp(window_, 0, 1 << 20);
  ImGui::SameLine();
  if (st.running) {
    if (ImGui::Button("Cancel")) job_.cancel();
  } else if (ImGui::Button("Scan")) {
    start(ctx);
  }
  ImGui::SameLine();
  help_marker("Runs the model over the corpus in windows (window 0: min(256, block size) tokens; no overlap) and "
              "averages each head's scores over all of them, each window weighted by its queries: the same scores "
              "as the Head statistics panel gives for one text, now over many. The corpus that ships with attnviz "
              "is English prose written for it, text the built-in models never saw. Finished scans are kept beside "
              "the settings and reopen at once; a cancelled one keeps nothing.");
  if (st.running) {
    const ScanProgress& p = st.progress;
    const float f = p.bytes_total > 0 ? static_cast<float>(p.bytes_read) / static_cast<float>(p.bytes_total) : 0.f;
    char over[96];
    std::snprintf(over, sizeof over, "%d windows, %lld tokens", p.windows, static_cast<long long>(p.tokens));
    ImGui::ProgressBar(f, ImVec2(-1, 0), over);
  }
  if (!st.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.4f, 0.4f, 1.f));
    ImGui::TextWrapped("%s", st.error.c_str());
    ImGui::PopStyleColor();
  }
  if (!st.result) {
    if (!st.running && st.error.empty()) ImGui::TextDisabled("press Scan to score every head over the corpus");
    return;
  }
  if (scanned_model_ && scanned_model_ != ctx.model) {
    ImGui::TextDisabled("the model changed: scan again");
    return;
  }
  const ScanResult& r = *st.result;
  ImGui::TextDisabled("%d windows of %d tokens, %lld tokens%s", r.windows, r.window, static_cast<long long>(r.tokens),
                      st.from_cache ? " (kept from an earlier scan)" : "");
  ImGui::SetNextItemWidth(fs * 8.f);
  ImGui::Combo("x", &x_metric_, kMetricLabels, IM_ARRAYSIZE(kMetricLabels));
  ImGui::SameLine();
  ImGui::SetNextItemWidth(fs * 8.f);
  ImGui::Combo("y", &y_metric_, kMetricLabels, IM_ARRAYSIZE(kMetricLabels));
  draw_plot(ctx, r);
  draw_examples(ctx, r);
}

void HeadScanPanel::draw_plot(FrameContext& ctx, const ScanResult& r) {
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float side = std::max(fs * 8.f, std::min(avail.x - fs * 3.f, avail.y * 0.62f));
  const ImVec2 o = ImGui::GetCursorScreenPos() + ImVec2(fs * 2.5f, fs * 0.3f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  // Axis ranges: weights 0 … 1; entropy and distance 0 … their largest value.
  const auto range = [&](int m) {
    if (m < 4) return 1.0;
    double mx = 1e-9;
    for (const ScanHead& h : r.heads) mx = std::max(mx, h.metrics[static_cast<size_t>(m)]);
    return mx * 1.05;
  };
  const double rx = range(x_metric_), ry = range(y_metric_);
  dl->AddRect(o, o + ImVec2(side, side), dim);
  for (int k = 1; k < 4; ++k) {
    dl->AddLine(o + ImVec2(side * k / 4.f, 0), o + ImVec2(side * k / 4.f, side), IM_COL32(80, 80, 80, 120));
    dl->AddLine(o + ImVec2(0, side * k / 4.f), o + ImVec2(side, side * k / 4.f), IM_COL32(80, 80, 80, 120));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", rx);
  dl->AddText(o + ImVec2(side - ImGui::CalcTextSize(buf).x, side + 2), dim, buf);
  std::snprintf(buf, sizeof buf, "%.2g", ry);
  dl->AddText(o + ImVec2(-ImGui::CalcTextSize(buf).x - 3, 0), dim, buf);
  dl->AddText(o + ImVec2(-fs * 1.2f, side - fs), dim, "0");
  dl->AddText(o + ImVec2(side * 0.5f - ImGui::CalcTextSize(kMetricLabels[x_metric_]).x * 0.5f, side + 2), dim, kMetricLabels[x_metric_]);
  dl->AddText(o + ImVec2(4, 2), dim, kMetricLabels[y_metric_]);
  const int L = ctx.model->config.n_layer;
  const ImVec2 mp = ImGui::GetIO().MousePos;
  const ScanHead* hovered = nullptr;
  float best = fs * 0.6f;
  const auto at = [&](const ScanHead& h) {
    const double x = std::max(0.0, h.metrics[static_cast<size_t>(x_metric_)]), y = std::max(0.0, h.metrics[static_cast<size_t>(y_metric_)]);
    return o + ImVec2(static_cast<float>(x / rx) * side, side - static_cast<float>(y / ry) * side);
  };
  for (const ScanHead& h : r.heads) {
    const ImVec2 p = at(h);
    const bool sel = h.layer == ctx.state.layer && h.head == ctx.state.head;
    dl->AddCircleFilled(p, sel ? fs * 0.42f : fs * 0.3f, group_color(h.layer, L));
    if (sel) dl->AddCircle(p, fs * 0.55f, IM_COL32(255, 255, 255, 255), 0, 2.f);
    const float d = std::hypot(mp.x - p.x, mp.y - p.y);
    if (ImGui::IsWindowHovered() && d < best) best = d, hovered = &h;
  }
  // Layer legend.
  for (int l = 0; l < L && l < 24; ++l) {
    const ImVec2 p = o + ImVec2(side + fs * 0.8f, l * fs * 1.1f);
    dl->AddCircleFilled(p + ImVec2(fs * 0.3f, fs * 0.5f), fs * 0.3f, group_color(l, L));
    dl->AddText(p + ImVec2(fs * 0.8f, 0), dim, ("L" + std::to_string(l)).c_str());
  }
  if (hovered) {
    ImGui::SetTooltip("L%dH%d %s\nprev %.3f  ind %.3f  first %.3f  self %.3f\nentropy %.2f bits, distance %.1f\nclick "
                      "to select it and list its examples",
                      hovered->layer, hovered->head, scan_head_label(*hovered).c_str(), hovered->metrics[0],
                      hovered->metrics[1], hovered->metrics[2], hovered->metrics[3], hovered->metrics[4], hovered->metrics[5]);
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
      ctx.state.layer = hovered->layer, ctx.state.head = hovered->head;
      ctx.state.kv_group = ctx.model->config.kv_head_of(hovered->head);
    }
  }
  plot_rect_ = ImVec4(o.x, o.y, side, side);
  ImGui::Dummy(ImVec2(side + fs * 6.f, side + fs * 1.6f));
}

void HeadScanPanel::draw_examples(FrameContext& ctx, const ScanResult& r) {
  const ScanHead* sel = nullptr;
  for (const ScanHead& h : r.heads)
    if (h.layer == ctx.state.layer && h.head == ctx.state.head) sel = &h;
  if (!sel) {
    ImGui::TextDisabled("select a softmax head to list its examples");
    return;
  }
  const std::string label = scan_head_label(*sel);
  ImGui::Text("L%dH%d%s%s: its strongest attention to a key other than the first (click one to load its window)",
              sel->layer, sel->head, label.empty() ? "" : " ", label.c_str());
  if (!example_error_.empty()) ImGui::TextColored(ImVec4(1.f, 0.4f, 0.4f, 1.f), "%s", example_error_.c_str());
  ScanOptions o;
  o.window = r.window;
  o.stride = r.stride;
  o.top = 8;
  const std::string corpus = job_.status().corpus;
  if (snippets_for_ != &r || snippets_layer_ != sel->layer || snippets_head_ != sel->head) {
    snippets_.clear();
    for (const ScanExample& e : sel->top) {
      std::string text;
      try {  // "…before[key]between[query]": the key and the query in brackets
        const std::vector<int> ids = scan_window(*ctx.model, r.window, corpus, o, e.window);
        const auto piece = [&](int a, int b) {  // tokens [a, b) of the window, as text
          std::string t;
          for (int i = std::max(a, r.prefix); i < b; ++i) t += ctx.model->tokenizer->piece(ids[static_cast<size_t>(i)]);
          return t;
        };
        const int gap = e.query - e.key - 1;
        text = "\xE2\x80\xA6" + piece(e.key - 12, e.key) + "[" + piece(e.key, e.key + 1) + "]" +
               (gap > 24 ? piece(e.key + 1, e.key + 9) + "\xE2\x80\xA6" + piece(e.query - 8, e.query) : piece(e.key + 1, e.query)) +
               (e.query > e.key ? "[" + piece(e.query, e.query + 1) + "]" : "");
        for (char& ch : text)
          if (ch == '\n' || ch == '\t') ch = ' ';
      } catch (const std::exception&) {
        text = "(the corpus changed: scan again)";
      }
      snippets_.push_back(text);
    }
    snippets_for_ = &r, snippets_layer_ = sel->layer, snippets_head_ = sel->head;
  }
  for (size_t k = 0; k < sel->top.size(); ++k) {
    const ScanExample& e = sel->top[k];
    char head[96];
    std::snprintf(head, sizeof head, "%.3f  w%d q%d\xE2\x86\x92k%d  ", e.weight, e.window, e.query, e.key);
    const std::string label = head + (k < snippets_.size() ? snippets_[k] : std::string()) + "##ex" + std::to_string(k);
    if (ImGui::Selectable(label.c_str())) {
      try {
        const std::vector<int> ids = scan_window(*ctx.model, r.window, corpus, o, e.window);
        const std::vector<int> body(ids.begin() + r.prefix, ids.end());  // the prefix comes back with the encoding
        ctx.state.text = ctx.model->tokenizer->decode(body);
        ctx.state.layer = sel->layer;
        ctx.state.head = sel->head;
        ctx.state.query = e.query;
        ctx.state.key = e.key;
        example_error_.clear();
      } catch (const std::exception& ex) {
        example_error_ = ex.what();
      }
    }
  }
}

}  // namespace attnviz::ui
