#include "ui/state/lesson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "ui/state/app_state.h"
#include "core/model/paths.h"

namespace attnviz::ui {

namespace fs = std::filesystem;

const std::vector<std::string>& lesson_show_kinds() {
  static const std::vector<std::string> k = {"qk",         "dot", "scale",  "mask",     "exp", "softmax",
                                             "weighted_v", "sink", "gqa", "window", "local_window", "kv_cache", "memory",
                                             "none"};
  return k;
}

const std::vector<std::string>& lesson_placeholders() {
  static const std::vector<std::string> p = {"layer",
                                             "head",
                                             "kv_head",
                                             "i",
                                             "j",
                                             "d",
                                             "sqrt_d",
                                             "score",
                                             "scaled",
                                             "row_max",
                                             "row_sum",
                                             "weight",
                                             "masked_count",
                                             "n_head",
                                             "n_kv_head",
                                             "group",
                                             "shared_heads",
                                             "T",
                                             "block_size",
                                             "dropped",
                                             "n_layer",
                                             "kv_cache_floats",
                                             "kv_cache_bytes",
                                             "window",
                                             "first_key",
                                             "seen_count",
                                             "outside_count",
                                             "total",
                                             "kv_layers",
                                             "memory_layer",
                                             "state_floats",
                                             "state_bytes",
                                             "layer_kv_floats",
                                             "layer_kv_bytes",
                                             "a_row_sum",
                                             "a_row_min",
                                             "a_negative",
                                             "first_weight",
                                             "sink_logit",
                                             "sink_weight",
                                             "tokens_weight"};
  return p;
}

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// The value of one placeholder ("" for an unknown name).
std::string placeholder_value(const std::string& name, const RowNumbers& n) {
  if (name == "layer") return std::to_string(n.layer);
  if (name == "head") return std::to_string(n.head);
  if (name == "kv_head") return std::to_string(n.kv_head);
  if (name == "i") return std::to_string(n.i);
  if (name == "j") return std::to_string(n.j);
  if (name == "d") return std::to_string(n.d);
  if (name == "sqrt_d") return num(n.sqrt_d);
  if (name == "score") return num(n.score);
  if (name == "scaled") return num(n.scaled);
  if (name == "row_max") return num(n.row_max);
  if (name == "row_sum") return num(n.row_sum);
  if (name == "weight") return num(n.weights.empty() ? 0.0 : n.weights[static_cast<size_t>(n.j)]);
  if (name == "masked_count") return std::to_string(n.masked_count);
  if (name == "n_head") return std::to_string(n.n_head);
  if (name == "n_kv_head") return std::to_string(n.n_kv_head);
  if (name == "group") return std::to_string(n.group);
  if (name == "shared_heads") {
    std::string s;
    for (int h : n.shared_heads) s += (s.empty() ? "" : ", ") + std::to_string(h);
    return s;
  }
  if (name == "T") return std::to_string(n.T);
  if (name == "block_size") return std::to_string(n.block_size);
  if (name == "dropped") return std::to_string(n.dropped);
  if (name == "n_layer") return std::to_string(n.n_layer);
  if (name == "kv_cache_floats") return std::to_string(n.kv_cache_floats);
  if (name == "kv_cache_bytes") return std::to_string(n.kv_cache_floats * 4);
  if (name == "window") return n.window > 0 ? std::to_string(n.window) : "\xE2\x88\x9E";  // ∞: a global layer
  if (name == "first_key") return std::to_string(n.first_key);
  if (name == "seen_count") return std::to_string(n.i - n.first_key + 1);
  if (name == "outside_count") return std::to_string(n.outside_count);
  if (name == "total") return std::to_string(n.dropped + n.T);
  if (name == "kv_layers") return std::to_string(n.kv_layers);
  if (name == "memory_layer") return n.memory_layer >= 0 ? std::to_string(n.memory_layer) : "\xE2\x80\x94";  // —: none
  if (name == "state_floats") return std::to_string(n.state_floats);
  if (name == "state_bytes") return std::to_string(n.state_floats * 4);
  if (name == "layer_kv_floats") return std::to_string(n.layer_kv_floats);
  if (name == "layer_kv_bytes") return std::to_string(n.layer_kv_floats * 4);
  if (name == "a_row_sum") return num(n.a_row_sum);
  if (name == "a_row_min") return num(n.a_row_min);
  if (name == "a_negative") return std::to_string(n.a_negative);
  if (name == "first_weight") return num(n.first_weight);
  if (name == "sink_logit") return num(n.sink_logit);
  if (name == "sink_weight") return num(n.sink_weight);
  if (name == "tokens_weight") return num(1.0 - n.sink_weight);
  return "";
}

// Every {name} in `text`, in order.
std::vector<std::string> placeholders_in(const std::string& text) {
  std::vector<std::string> names;
  for (size_t a = text.find('{'); a != std::string::npos; a = text.find('{', a + 1)) {
    const size_t b = text.find('}', a);
    if (b == std::string::npos) break;
    names.push_back(text.substr(a + 1, b - a - 1));
  }
  return names;
}

}  // namespace

Lesson load_lesson(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "lesson file", "", 1 << 20);
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array() || j["steps"].empty())
    throw Error(path + ": expected {\"language\": …, \"steps\": [ … ]} with at least one step");
  Lesson l;
  l.language = j.value("language", fs::path(path).stem().string());
  const auto& kinds = lesson_show_kinds();
  const auto& known = lesson_placeholders();
  for (size_t k = 0; k < j["steps"].size(); ++k) {
    const nlohmann::json& s = j["steps"][k];
    const std::string where = path + ": step " + std::to_string(k + 1);
    if (!s.is_object()) throw Error(where + " is not an object");
    auto field = [&](const char* key) {
      if (!s.contains(key) || !s[key].is_string() || s[key].get<std::string>().empty())
        throw Error(where + (s.contains("id") && s["id"].is_string() ? " (" + s["id"].get<std::string>() + ")" : "") +
                    ": \"" + key + "\" must be a non-empty string");
      return s[key].get<std::string>();
    };
    LessonStep st;
    st.id = field("id");
    const std::string at = where + " (" + st.id + ")";
    st.title = field("title");
    st.body = field("body");
    if (s.contains("body_sink")) st.body_sink = field("body_sink");
    const std::string stage = s.value("stage", std::string("probs"));
    if (!stage_from_name(stage, &st.stage))
      throw Error(at + ": unknown stage '" + excerpt(stage, 40) + "' (q, k, v, scores, scaled, masked, probs, out)");
    st.show = s.value("show", std::string("none"));
    if (std::find(kinds.begin(), kinds.end(), st.show) == kinds.end())
      throw Error(at + ": unknown \"show\" '" + excerpt(st.show, 40) + "'");
    for (const std::string& p : placeholders_in(st.title + st.body + st.body_sink))
      if (std::find(known.begin(), known.end(), p) == known.end())
        throw Error(at + ": unknown placeholder {" + excerpt(p, 40) + "}");
    for (const LessonStep& prev : l.steps)
      if (prev.id == st.id) throw Error(at + ": the id '" + st.id + "' is used twice");
    l.steps.push_back(std::move(st));
  }
  return l;
}

std::vector<std::string> lesson_files() {
  std::vector<std::string> files, names;
  for (const std::string& d : data_dirs()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(d) / "assets" / "lesson", ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("lesson.", 0) == 0 && e.path().extension() == ".json" &&
          std::find(names.begin(), names.end(), n) == names.end()) {
        names.push_back(n);
        files.push_back(e.path().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string lesson_file(const std::string& code) {
  for (const std::string& f : lesson_files())
    if (fs::path(f).filename().string() == "lesson." + code + ".json") return f;
  return "";
}

RowNumbers row_numbers(const Trace& tr, const ModelConfig& c, int layer, int head, int i, int j) {
  if (layer < 0 || layer >= static_cast<int>(tr.layers.size()) || head < 0 || head >= c.n_head || i < 0 ||
      i >= tr.T() || j < 0 || j > i)
    throw Error("lesson: layer " + std::to_string(layer) + ", head " + std::to_string(head) + ", row " +
                std::to_string(i) + ", key " + std::to_string(j) +
                " is outside the trace (T = " + std::to_string(tr.T()) + "; the key must be at most the row)");
  const LayerTrace& lt = tr.layers[static_cast<size_t>(layer)];
  if (lt.mixer != Mixer::Softmax)
    throw Error("lesson: layer " + std::to_string(layer) + " is a " + layer_kind(c.layer(layer)) +
                " layer; the steps explain softmax attention (choose a full-attention layer)");
  RowNumbers n;
  // The layer's own head size and KV heads (Gemma 4's global layers have larger, fewer ones).
  n.layer = layer, n.head = head, n.i = i, n.j = j, n.d = c.head_size_at(layer);
  n.n_head = c.n_head, n.n_kv_head = c.kv_heads_at(layer), n.group = c.n_head / n.n_kv_head;
  n.kv_head = head / n.group;
  for (int h = 0; h < c.n_head; ++h)
    if (h / n.group == n.kv_head) n.shared_heads.push_back(h);
  n.T = tr.T(), n.block_size = tr.block_size, n.dropped = tr.dropped, n.n_layer = static_cast<int>(tr.layers.size());
  n.sqrt_d = std::sqrt(static_cast<double>(n.d));
  // The layer's scale as the backend applied it: exactly 1/√d when that is what it is.
  n.scale = std::abs(static_cast<double>(lt.scale) * n.sqrt_d - 1.0) < 1e-6 ? 1.0 / n.sqrt_d : lt.scale;
  n.softcap = lt.softcap;
  n.window = lt.window;
  n.first_key = window_first(i, lt.window);
  n.outside_count = n.first_key;
  for (int x = 0; x < n.d; ++x) {
    n.q_i.push_back(lt.q.at(head, i, x));
    n.k_j.push_back(lt.k.at(n.kv_head, j, x));
  }
  // Row i: q_i · k_j' × scale for every key j' ≤ i, soft-capped where the layer does (the
  // keys after i are masked to −inf, and on a local layer those before its window).
  const double inf = std::numeric_limits<double>::infinity();
  for (int jj = 0; jj <= i; ++jj) {
    double dot = 0.0;
    for (int x = 0; x < n.d; ++x) dot += static_cast<double>(lt.q.at(head, i, x)) * lt.k.at(n.kv_head, jj, x);
    if (jj == j) n.score = dot, n.scaled = dot * n.scale;
    const double capped = n.softcap > 0 ? n.softcap * std::tanh(dot * n.scale / n.softcap) : dot * n.scale;
    n.scaled_row.push_back(jj < n.first_key ? -inf : capped);
  }
  n.masked_count = n.T - 1 - i;
  n.row_max = *std::max_element(n.scaled_row.begin(), n.scaled_row.end());
  // GPT-OSS: the head's learned sink is one more logit in the softmax, then dropped.
  n.has_sink = static_cast<size_t>(head) < lt.sinks.size();
  if (n.has_sink) {
    n.sink_logit = lt.sinks[static_cast<size_t>(head)];
    n.row_max = std::max(n.row_max, n.sink_logit);
  }
  for (double s : n.scaled_row) n.exp_row.push_back(s == -inf ? 0.0 : std::exp(s - n.row_max));
  for (double e : n.exp_row) n.row_sum += e;
  if (n.has_sink) n.row_sum += std::exp(n.sink_logit - n.row_max);
  for (double e : n.exp_row) n.weights.push_back(e / n.row_sum);
  if (n.has_sink) n.sink_weight = std::exp(n.sink_logit - n.row_max) / n.row_sum;
  n.first_weight = n.weights[static_cast<size_t>(n.first_key)];
  n.out_i.assign(static_cast<size_t>(n.d), 0.0);
  for (int jj = 0; jj <= i; ++jj)
    for (int x = 0; x < n.d; ++x)
      n.out_i[static_cast<size_t>(x)] += n.weights[static_cast<size_t>(jj)] * lt.v.at(n.kv_head, jj, x);
  int n_softmax = 0;  // a hybrid's other layers keep no K and V
  for (int l = 0; l < n.n_layer; ++l) n_softmax += c.layer(l).mixer == Mixer::Softmax;
  n.layer_kv_floats = 2LL * n.T * n.n_kv_head * n.d;
  n.kv_cache_floats = n_softmax * n.layer_kv_floats;
  n.kv_layers = n_softmax;
  // Memory that does not grow: the first layer whose state is fixed, and on a linear-attention
  // layer row i of A for value head head mod Hv (its sum, its smallest entry, its negatives).
  for (int l = 0; l < n.n_layer && n.memory_layer < 0; ++l)
    if (c.layer(l).mixer != Mixer::Softmax) n.memory_layer = l;
  if (n.memory_layer >= 0) {
    n.state_floats = layer_state_values(c, n.memory_layer);
    const LayerTrace& ml = tr.layers[static_cast<size_t>(n.memory_layer)];
    if (ml.mixer == Mixer::GatedDeltaNet && ml.heads() > 0) {
      std::vector<float> scratch;
      const float* a = ml.row_values(Stage::Implicit, head % ml.heads(), i, scratch);  // (T)
      n.a_row_min = a[0];
      for (int s = 0; s <= i; ++s) {
        n.a_row_sum += a[s];
        n.a_row_min = std::min(n.a_row_min, static_cast<double>(a[s]));
        n.a_negative += a[s] < 0.f;
      }
    }
  }
  return n;
}

std::string fill_placeholders(const std::string& text, const RowNumbers& n) {
  std::string out;
  size_t at = 0;
  for (size_t a = text.find('{'); a != std::string::npos; a = text.find('{', at)) {
    const size_t b = text.find('}', a);
    if (b == std::string::npos) break;
    out += text.substr(at, a - at);
    const std::string name = text.substr(a + 1, b - a - 1), v = placeholder_value(name, n);
    out += v.empty() ? text.substr(a, b - a + 1) : v;
    at = b + 1;
  }
  return out + text.substr(at);
}

}  // namespace attnviz::ui
