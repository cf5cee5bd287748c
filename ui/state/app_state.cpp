#include "ui/state/app_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace attnviz::ui {

ModelDims ModelDims::of(const ModelConfig& c) {
  ModelDims m{c.n_layer, c.n_head, c.n_kv_head, c.head_size, c.n_ctx, {}};
  if (c.any_linear())
    for (int l = 0; l < c.n_layer; ++l) m.layer_heads.push_back(c.heads_at(l));
  return m;
}

namespace {
int clamp_index(int v, int n) { return n <= 0 ? 0 : std::clamp(v, 0, n - 1); }
int wrap_index(int v, int n) { return n <= 0 ? 0 : ((v % n) + n) % n; }
}  // namespace

void clamp_selection(AppState& s, const ModelDims& m) {
  s.layer = clamp_index(s.layer, m.n_layer);
  if (m.layer_heads.empty() || m.heads_at(s.layer) > 0) s.head = clamp_index(s.head, m.heads_at(s.layer));
  s.kv_group = clamp_index(s.kv_group, m.n_kv_head);
  if (m.n_ctx > 0 && (s.block_size < 1 || s.block_size > m.n_ctx)) s.block_size = m.n_ctx;
  s.top_k = std::max(1, s.top_k);
  s.temperature = std::clamp(s.temperature, 0.f, 5.f);
  if (s.hovered_token < -1) s.hovered_token = -1;
}

void step_layer(AppState& s, const ModelDims& m, int delta) {
  s.layer = wrap_index(s.layer + delta, m.n_layer);
  if (m.heads_at(s.layer) > 0) s.head = clamp_index(s.head, m.heads_at(s.layer));
}

void step_head(AppState& s, const ModelDims& m, int delta) {
  if (m.layer_heads.empty() || m.heads_at(s.layer) > 0) s.head = wrap_index(s.head + delta, m.heads_at(s.layer));
  if (m.n_head > 0 && m.n_kv_head > 0 && s.head < m.n_head) s.kv_group = kv_head_of(s.head, m.n_head, m.n_kv_head);
}

namespace {
const std::vector<Stage> kStageTabs = {Stage::Scores, Stage::Scaled, Stage::Capped, Stage::Masked, Stage::Probs,
                                       Stage::Implicit, Stage::Q,    Stage::K,      Stage::V,      Stage::Out};
}  // namespace

const std::vector<Stage>& stage_tab_order() { return kStageTabs; }

std::vector<Stage> stage_tabs(bool capped, Mixer mixer) {
  std::vector<Stage> out;
  if (mixer == Mixer::ShortConv) return out;
  const bool linear = mixer == Mixer::GatedDeltaNet;
  for (Stage st : kStageTabs) {
    const bool has = linear ? st == Stage::Implicit || !stage_is_square(st)
                            : st != Stage::Implicit && (capped || st != Stage::Capped);
    if (has) out.push_back(st);
  }
  return out;
}

void step_stage(AppState& s, int delta, bool capped, Mixer mixer) {
  fit_stage(s, capped, mixer);
  const std::vector<Stage> order = stage_tabs(capped, mixer);
  const int n = static_cast<int>(order.size());
  if (n == 0) return;
  const int at = static_cast<int>(std::find(order.begin(), order.end(), s.stage) - order.begin());
  s.stage = order[wrap_index(at + delta, n)];
}

void fit_stage(AppState& s, bool capped, Mixer mixer) {
  if (mixer == Mixer::ShortConv) return;  // nothing to show: the stage stays for the next layer
  if (mixer == Mixer::GatedDeltaNet) {
    if (stage_is_square(s.stage)) s.stage = Stage::Implicit;
    return;
  }
  if (s.stage == Stage::Implicit) s.stage = Stage::Probs;
  if (s.stage == Stage::Capped && !capped) s.stage = Stage::Masked;
}

SeenKeys seen_keys(int i, int window) {
  SeenKeys k;
  k.last = std::max(0, i);
  k.first = window_first(k.last, window);
  k.local = window > 0;
  k.window = std::max(0, window);
  return k;
}

bool scale_is_inv_sqrt_d(const ModelConfig& c, int l) {
  const double want = 1.0 / std::sqrt(static_cast<double>(c.head_size_at(l)));
  return std::abs(static_cast<double>(c.layer(l).scale) - want) <= 1e-4 * want;
}

std::string stage_title(Stage st, const ModelConfig& c, int l) {
  if (st != Stage::Scaled || l < 0 || l >= c.n_layer || scale_is_inv_sqrt_d(c, l)) return stage_label(st);
  char buf[48];
  std::snprintf(buf, sizeof buf, "scaled \xC3\x97%.4g", static_cast<double>(c.layer(l).scale));
  return buf;
}

std::string layer_kind(const LayerSpec& spec) {
  if (spec.mixer == Mixer::GatedDeltaNet) return "linear attention";
  if (spec.mixer == Mixer::ShortConv) return "short convolution";
  std::string s = spec.window > 0 ? "local W=" + std::to_string(spec.window) : "global";
  if (!spec.rope) s += " no RoPE";
  if (spec.kv_source >= 0) s += ", K and V of layer " + std::to_string(spec.kv_source);
  return s;
}

std::string shown_title(const ModelConfig& c, int layer, int head, Stage st, bool rollout) {
  const std::string l = "layer " + std::to_string(layer), h = " \xC2\xB7 head " + std::to_string(head) + " \xC2\xB7 ";
  if (rollout) return l + " \xC2\xB7 rollout";
  if (layer < 0 || layer >= c.n_layer) return l + h + stage_label(st);
  const LayerSpec spec = c.layer(layer);
  if (spec.mixer == Mixer::ShortConv) return l + " \xC2\xB7 short convolution: no heads";
  if (spec.mixer == Mixer::GatedDeltaNet) return l + h + "linear attention \xC2\xB7 " + stage_label(st);
  return l + h + stage_title(st, c, layer);
}

int64_t kv_entries(int64_t T, int window) { return window > 0 ? std::min<int64_t>(T, window) : T; }

int64_t kv_cache_bytes_layers(const ModelConfig& c, int64_t T, int64_t kv_heads, int64_t bytes_per_value,
                              bool shared_keep_own) {
  int64_t b = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerSpec spec = c.layer(l);
    if (spec.mixer != Mixer::Softmax || (spec.kv_source >= 0 && !shared_keep_own)) continue;
    b += 2 * kv_tensor_bytes(kv_entries(T, spec.window), kv_heads < 0 ? c.kv_heads_at(l) : kv_heads, c.head_size_at(l),
                             bytes_per_value);
  }
  return b;
}

int64_t layer_state_values(const ModelConfig& c, int l) {
  switch (c.layer(l).mixer) {
    case Mixer::GatedDeltaNet:
      return int64_t{c.linear.v_heads} * c.linear.k_dim * c.linear.v_dim +
             int64_t{c.linear.conv_kernel - 1} * c.linear.conv_channels();
    case Mixer::ShortConv: return int64_t{c.short_conv_kernel - 1} * c.n_embd;
    case Mixer::Softmax: return 0;
  }
  return 0;
}

int64_t recurrent_state_bytes(const ModelConfig& c, int64_t bytes_per_value) {
  int64_t n = 0;  // values
  for (int l = 0; l < c.n_layer; ++l) n += layer_state_values(c, l);
  return n * bytes_per_value;
}

CellNumbers cell_numbers(const LayerTrace& lt, const float* srow, int i, int j) {
  CellNumbers n;
  n.score = srow[j];
  n.scaled = n.score * lt.scale;
  n.capped = softcap_value(n.scaled, lt.softcap);
  n.future = causally_masked(i, j);
  n.outside = outside_window(i, j, lt.window);
  n.masked = lt.masked_at(i, j);
  n.first = window_first(i, lt.window);
  float mx = -std::numeric_limits<float>::infinity();
  for (int k = n.first; k <= i; ++k) mx = std::max(mx, softcap_value(srow[k] * lt.scale, lt.softcap));
  n.row_max = mx;
  for (int k = n.first; k <= i; ++k) n.row_sum += std::exp(static_cast<double>(softcap_value(srow[k] * lt.scale, lt.softcap) - mx));
  n.exp = n.masked ? 0.0 : std::exp(static_cast<double>(n.capped - mx));
  return n;
}


bool stage_is_square(Stage s) { return LayerTrace::matrix(s); }
bool stage_is_signed(Stage s) { return s != Stage::Probs; }
bool stage_is_kv(Stage s) { return s == Stage::K || s == Stage::V; }

WindowInfo window_info(int total_tokens, int block_size) {
  WindowInfo w;
  w.total = std::max(0, total_tokens);
  w.block_size = std::max(1, block_size);
  w.dropped = std::max(0, w.total - w.block_size);
  w.T = w.total - w.dropped;
  return w;
}

std::string token_text(const Model* m, int id) {
  if (m && m->tokenizer && id >= 0 && id < m->tokenizer->vocab_size()) return m->tokenizer->piece(id);
  return "<" + std::to_string(id) + ">";
}

std::vector<TokenLabel> label_tokens(const Model& m, const std::vector<int>& ids) {
  if (m.tokenizer) return token_labels(*m.tokenizer, ids);
  std::vector<TokenLabel> out(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) out[k].text = token_text(&m, ids[k]);
  return out;
}

std::string chip_label_at(const std::vector<TokenLabel>& labels, size_t k, const Model* m, int id) {
  return chip_label(k < labels.size() ? labels[k].text : token_text(m, id));
}

std::string chip_label_in_window(const std::vector<TokenLabel>& labels, const Trace& tr, int pos, const Model* m) {
  const int id = tr.tokens[static_cast<size_t>(pos)];
  const bool covers = labels.size() == static_cast<size_t>(tr.dropped) + tr.tokens.size();
  return chip_label_at(labels, covers ? static_cast<size_t>(tr.dropped + pos) : labels.size(), m, id);
}

std::string chip_label(const std::string& piece) {
  if (piece.empty()) return "\xE2\x88\x85";  // ∅
  std::string out;
  for (unsigned char c : piece) {
    if (c == ' ') out += "\xE2\x90\xA3";          // ␣
    else if (c == '\n') out += "\xE2\x86\xB5";    // ↵
    else if (c == '\t') out += "\xE2\x87\xA5";    // ⇥
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

int group_size(int n_head, int n_kv_head) { return n_kv_head > 0 ? std::max(1, n_head / n_kv_head) : 1; }
int kv_head_of(int h, int n_head, int n_kv_head) { return h / group_size(n_head, n_kv_head); }

std::vector<int> query_heads_of(int kv, int n_head, int n_kv_head) {
  std::vector<int> hs;
  for (int h = 0; h < n_head; ++h)
    if (kv_head_of(h, n_head, n_kv_head) == kv) hs.push_back(h);
  return hs;
}

int64_t kv_tensor_bytes(int64_t seq, int64_t kv_heads, int64_t head_size, int64_t bytes_per_value) {
  return seq * kv_heads * head_size * bytes_per_value;
}

int64_t kv_cache_bytes(int64_t seq, int64_t kv_heads, int64_t head_size, int64_t n_layer, int64_t bytes_per_value) {
  return 2 * n_layer * kv_tensor_bytes(seq, kv_heads, head_size, bytes_per_value);
}

void remember_model(std::vector<std::string>& recent, const std::string& spec) {
  if (spec.empty()) return;
  recent.erase(std::remove(recent.begin(), recent.end(), spec), recent.end());
  recent.insert(recent.begin(), spec);
  if (recent.size() > kMaxRecentModels) recent.resize(kMaxRecentModels);
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1e6) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else if (b < 1e9) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  return buf;
}


namespace {
// softmax(logits / temperature) in double; temperature ≤ 0 → one-hot argmax.
std::vector<double> softmax_t(const float* logits, int V, float temperature) {
  std::vector<double> p(static_cast<size_t>(std::max(0, V)), 0.0);
  if (V <= 0) return p;
  const int arg = static_cast<int>(std::max_element(logits, logits + V) - logits);
  if (!(temperature > 0.f)) {
    p[arg] = 1.0;
    return p;
  }
  const double mx = logits[arg];
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  for (auto& x : p) x /= sum;
  return p;
}
}  // namespace

std::vector<TokenProb> top_k_probs(const float* logits, int V, float temperature, int k) {
  const std::vector<double> p = softmax_t(logits, V, temperature);
  std::vector<int> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::clamp(k, 0, V);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return p[a] > p[b] ||
           (p[a] == p[b] && a < b);
  });
  std::vector<TokenProb> out;
  for (int i = 0; i < k; ++i) out.push_back({idx[i], static_cast<float>(p[static_cast<size_t>(idx[i])])});
  return out;
}

std::vector<TokenShift> compare_top_k(const float* ablated, const float* clean, int V, float temperature, int k) {
  const std::vector<double> pc = softmax_t(clean, V, temperature);
  std::vector<TokenShift> out;
  for (const TokenProb& tp : top_k_probs(ablated, V, temperature, k))
    out.push_back({tp.id, tp.p, static_cast<float>(pc[static_cast<size_t>(tp.id)])});
  return out;
}

void clamp_ablation(AppState& s, const ModelDims& m) {
  if (!m.layer_heads.empty()) {  // a hybrid: the engine does not ablate yet (the head grid says so)
    s.ablation.heads.clear();
    return;
  }
  for (const auto& [l, h] : s.ablation.heads)
    if (l >= m.n_layer || h >= m.heads_at(l)) {
      s.ablation.heads.clear();
      return;
    }
}

int sample_token(const float* logits, int V, float temperature, double u) {
  const std::vector<double> p = softmax_t(logits, V, temperature);
  double acc = 0.0;
  for (int i = 0; i < V; ++i) {
    acc += p[i];
    if (u < acc) return i;
  }
  // Rounding left u ≥ the total: the last token with any mass.
  for (int i = V - 1; i >= 0; --i)
    if (p[i] > 0.0) return i;
  return 0;
}

const char* compare_view_label(CompareView v) {
  switch (v) {
    case CompareView::A: return "A";
    case CompareView::B: return "B";
    case CompareView::Difference: break;
  }
  return "A \xE2\x88\x92 B";
}

std::vector<float> aligned_attention(CompareView v, const float* a, int ta, const float* b, int tb) {
  const int n = std::max(0, std::min(ta, tb));
  std::vector<float> out(static_cast<size_t>(n) * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float* ra = a + static_cast<size_t>(i) * static_cast<size_t>(ta);  // row i of A's (ta, ta)
    const float* rb = b + static_cast<size_t>(i) * static_cast<size_t>(tb);  // row i of B's (tb, tb)
    float* o = out.data() + static_cast<size_t>(i) * static_cast<size_t>(n);
    for (int j = 0; j < n; ++j) o[j] = v == CompareView::A ? ra[j] : v == CompareView::B ? rb[j] : ra[j] - rb[j];
  }
  return out;
}

int first_difference(const std::vector<int>& a, const std::vector<int>& b) {
  return static_cast<int>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())),
                                        b.begin())
                              .first -
                          a.begin());
}

std::string alignment_note(int ta, int tb) {
  if (ta == tb) return "";
  return "A has " + std::to_string(ta) + " tokens, B " + std::to_string(tb) + ": the first " +
         std::to_string(std::min(ta, tb)) + " positions are compared (aligned from the start)";
}

}  // namespace attnviz::ui
