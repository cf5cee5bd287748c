#include "core/engine/ablation.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace attnviz {

const char* ablation_mode_name(AblationMode m) { return m == AblationMode::Mean ? "mean" : "zero"; }

bool Ablation::has(int layer, int head) const {
  return std::binary_search(heads.begin(), heads.end(), std::make_pair(layer, head));
}

bool Ablation::has_layer(int layer) const {
  return std::any_of(heads.begin(), heads.end(), [layer](const auto& lh) { return lh.first == layer; });
}

int Ablation::first_layer(int n_layer) const { return heads.empty() ? n_layer : heads.front().first; }

void Ablation::toggle(int layer, int head) {
  const auto key = std::make_pair(layer, head);
  const auto it = std::lower_bound(heads.begin(), heads.end(), key);
  if (it != heads.end() && *it == key) heads.erase(it);
  else heads.insert(it, key);
}

std::string Ablation::to_string() const {
  std::string s;
  for (const auto& [l, h] : heads) s += (s.empty() ? "" : ",") + std::to_string(l) + ":" + std::to_string(h);
  return s;
}

AblationMode parse_ablation_mode(const std::string& mode) {
  if (mode == "zero") return AblationMode::Zero;
  if (mode == "mean") return AblationMode::Mean;
  throw Error("--ablate-mode: '" + mode + "' is not a mode\n  HINT: use zero or mean.", ErrorKind::Usage);
}

namespace {

// A non-negative decimal integer, the whole of `s`; −1 otherwise.
int parse_index(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  return std::stoi(s);
}

}  // namespace

Ablation parse_ablation(const std::string& list, const std::string& mode, const ModelConfig& c) {
  Ablation a;
  a.mode = parse_ablation_mode(mode);
  if (list.empty()) return a;
  const std::string hint = "\n  HINT: give layer:head pairs separated by commas, e.g. --ablate 0:1,1:4 (layers 0 … " +
                           std::to_string(c.n_layer - 1) + ", heads 0 … " + std::to_string(c.n_head - 1) + ").";
  std::stringstream ss(list);
  std::string item;
  std::vector<std::pair<int, int>> seen;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    const int l = colon == std::string::npos ? -1 : parse_index(item.substr(0, colon));
    const int h = colon == std::string::npos ? -1 : parse_index(item.substr(colon + 1));
    if (l < 0 || h < 0) throw Error("--ablate: '" + item + "' is not layer:head" + hint, ErrorKind::Usage);
    if (l >= c.n_layer || h >= c.n_head)
      throw Error("--ablate: " + item + " is out of range: the model has " + std::to_string(c.n_layer) + " layers of " +
                      std::to_string(c.n_head) + " heads" + hint,
                  ErrorKind::Usage);
    if (std::find(seen.begin(), seen.end(), std::make_pair(l, h)) != seen.end())
      throw Error("--ablate: " + item + " is listed twice" + hint, ErrorKind::Usage);
    seen.emplace_back(l, h);
  }
  if (seen.empty() || list.back() == ',') throw Error("--ablate: '" + list + "' is not a list" + hint, ErrorKind::Usage);
  std::sort(seen.begin(), seen.end());
  a.heads = std::move(seen);
  return a;
}

void ablate_head_output(AblationMode mode, float* O, int T, int d, int ld, int from, const float* source) {
  if (source) {
    for (int i = from; i < T; ++i) std::copy_n(source + static_cast<size_t>(i) * d, d, O + static_cast<size_t>(i) * ld);
    return;
  }
  std::vector<double> mean(static_cast<size_t>(d), 0.0);  // (d)
  if (mode == AblationMode::Mean)
    for (int t = 0; t < T; ++t)
      for (int e = 0; e < d; ++e) mean[e] += O[static_cast<size_t>(t) * ld + e] / static_cast<double>(T);
  for (int i = from; i < T; ++i)
    for (int e = 0; e < d; ++e) O[static_cast<size_t>(i) * ld + e] = static_cast<float>(mean[e]);
}

void check_ablation_source(const Ablation& a, int T, int n_layer, int n_head, int d) {
  if (!a.source || a.heads.empty()) return;
  const HeadOutputs& s = *a.source;
  bool fits = s.T == T && s.d == d && static_cast<int>(s.out.size()) == n_layer && s.d_of.empty();
  for (const auto& o : s.out) fits = fits && static_cast<int64_t>(o.size()) == int64_t{n_head} * T * d;
  if (!fits)
    throw Error("the head outputs to patch in were recorded for " + std::to_string(s.T) + " tokens, the run has " +
                std::to_string(T) + " (or another model)");
}

void check_ablation_source(const Ablation& a, int T, const ModelConfig& c) {
  if (!c.per_layer_attention()) return check_ablation_source(a, T, c.n_layer, c.n_head, c.head_size);
  if (!a.source || a.heads.empty()) return;
  const HeadOutputs& s = *a.source;
  bool fits = s.T == T && static_cast<int>(s.out.size()) == c.n_layer && static_cast<int>(s.d_of.size()) == c.n_layer;
  for (int l = 0; fits && l < c.n_layer; ++l)
    fits = s.d_of[static_cast<size_t>(l)] == c.head_size_at(l) &&
           static_cast<int64_t>(s.out[static_cast<size_t>(l)].size()) == int64_t{c.n_head} * T * c.head_size_at(l);
  if (!fits)
    throw Error("the head outputs to patch in do not fit this run of " + std::to_string(T) +
                " tokens (recorded for another window or model)");
}

}  // namespace attnviz
