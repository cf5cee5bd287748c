#include "core/export/dump.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "core/limits.h"

#include "core/model/safetensors.h"

namespace attnviz {

std::string dump_tensor_name(int layer, Stage s) {
  return "layers." + std::to_string(layer) + "." + stage_name(s);
}

std::string DumpSelection::to_string() const {
  auto join = [](const auto& v) {
    std::string s;
    for (const auto& x : v) {
      if (!s.empty()) s += ",";
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) s += x;
      else s += std::to_string(x);
    }
    return s.empty() ? std::string("all") : s;
  };
  return "layers=" + join(layers) + ";heads=" + join(heads) + ";stages=" + join(stages);
}

std::vector<int> parse_index_list(const std::string& list, int count, const std::string& what) {
  std::vector<int> out;
  if (list.empty()) return out;
  auto bad = [&](const std::string& why) {
    return Error(what + " '" + excerpt(list, 60) + "': " + why + " (comma-separated indices or ranges a-b, each in 0 … " +
                     std::to_string(count - 1) + ")",
                 ErrorKind::Usage);
  };
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    const size_t dash = item.find('-', 1);
    auto number = [&](const std::string& s) {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
        throw bad("'" + excerpt(s, 20) + "' is not an index");
      const int v = std::stoi(s);
      if (v >= count) throw bad(s + " is out of range");
      return v;
    };
    const int a = number(dash == std::string::npos ? item : item.substr(0, dash));
    const int b = dash == std::string::npos ? a : number(item.substr(dash + 1));
    if (b < a) throw bad("the range " + item + " runs backwards");
    for (int v = a; v <= b; ++v) {
      if (std::find(out.begin(), out.end(), v) != out.end()) throw bad(std::to_string(v) + " is listed twice");
      out.push_back(v);
    }
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> parse_stage_list(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (!list.empty() && at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    Stage st;
    const bool extra = name == "logits" || name == "resid" || name == "gate" || name == "beta" || name == "decay" ||
                       name == "sink" || name == "router" || name == "experts" || name == "expert_weights";
    if (!extra && !stage_from_name(name, &st))
      throw Error("--stages: unknown stage '" + excerpt(name, 30) +
                      "' (q, k, v, scores, scaled, capped, masked, probs, out, logits, resid; gate, beta, decay, "
                      "implicit, sink, router, experts, expert_weights on the layers that have them)",
                  ErrorKind::Usage);
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw Error("--stages: '" + name + "' is listed twice", ErrorKind::Usage);
    out.push_back(name);
    at = comma + 1;
  }
  return out;
}

namespace {
bool selected(const std::vector<std::string>& stages, const std::string& name) {
  return stages.empty() || std::find(stages.begin(), stages.end(), name) != stages.end();
}
}  // namespace

SafetensorsWriter dump_tensors(const Trace& tr, const std::vector<std::pair<std::string, const Tensor*>>& extra,
                               const DumpSelection& sel) {
  SafetensorsWriter w;
  const std::vector<int32_t> tokens(tr.tokens.begin(), tr.tokens.end());
  w.add_i32("tokens", {tr.T()}, tokens.data());
  std::vector<int> layers = sel.layers;
  if (layers.empty())
    for (size_t l = 0; l < tr.layers.size(); ++l) layers.push_back(static_cast<int>(l));
  // The residual stream only when listed: (T, C) per layer is not part of the default dump
  // (and a GPU trace does not hold it).
  const bool resid = !sel.stages.empty() && selected(sel.stages, "resid");
  if (resid) {  // checked before anything is written
    const std::vector<int64_t> shape{tr.T(), tr.final_resid.shape.size() == 2 ? tr.final_resid.dim(1) : 0};
    bool held = shape[1] > 0 && tr.final_resid.shape == shape;
    for (int l : layers) held = held && tr.layers[static_cast<size_t>(l)].resid.shape == shape;
    if (!held)
      throw Error("--stages resid: this trace has no residual stream");
  }
  for (int l : layers) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    for (int s = 0; s < kStageCount; ++s) {
      const Stage st = static_cast<Stage>(s);
      if (!lt.has(st) || !selected(sel.stages, stage_name(st))) continue;
      std::vector<int64_t> shape = lt.shape(st);
      // The heads written, in order: the selected query heads, or for k and v the KV heads they read.
      std::vector<int64_t> heads;
      if (!sel.heads.empty()) {
        const int64_t group = lt.q.dim(0) / std::max<int64_t>(1, lt.k.dim(0));
        const bool kv = st == Stage::K || st == Stage::V;
        for (int h : sel.heads) {
          if (h >= lt.heads())
            throw Error("--heads: head " + std::to_string(h) + " is out of range for layer " + std::to_string(l) + " (" +
                            std::to_string(lt.heads()) + " heads)",
                        ErrorKind::Usage);
          const int64_t x = kv ? h / group : h;
          if (std::find(heads.begin(), heads.end(), x) == heads.end()) heads.push_back(x);
        }
        shape[0] = static_cast<int64_t>(heads.size());
      }
      const Tensor* t = lt.stored(st);
      if (heads.empty() && t && t->dense()) {
        w.add_f32_ref(dump_tensor_name(l, st), t->shape, t->data.data());
        continue;
      }
      // Derived, stored with room to grow, or a head selection: written one head at a time.
      const int64_t per_head = shape[1] * shape[2];
      w.add_f32_generated(dump_tensor_name(l, st), shape, [&lt, st, per_head, heads](int64_t h, float* dst) {
        std::vector<float> scratch;
        const float* src = lt.head_values(st, heads.empty() ? h : heads[static_cast<size_t>(h)], scratch);
        std::copy(src, src + per_head, dst);
      });
    }
    // Qwen3.5's output gate σ(gate) (H, T, d); a linear layer's β and g (Hv, T) (its
    // implicit matrix A is a stage above). Head selections as for the stages above.
    // GPT-OSS's sink probability (H, T) likewise.
    const std::pair<const char*, const Tensor*> more[] = {
        {"gate", &lt.gate}, {"beta", &lt.beta}, {"decay", &lt.decay}, {"sink", &lt.sink}};
    for (const auto& [name, t] : more) {
      if (t->shape.empty() || !selected(sel.stages, name)) continue;
      std::vector<int64_t> shape = t->shape;
      std::vector<int64_t> heads(sel.heads.begin(), sel.heads.end());
      if (!heads.empty()) shape[0] = static_cast<int64_t>(heads.size());
      const int64_t per_head = t->shape.size() == 3 ? t->shape[1] * t->shape[2] : t->shape[1];
      const Tensor* src = t;
      w.add_f32_generated("layers." + std::to_string(l) + "." + name, shape, [src, per_head, heads](int64_t h, float* dst) {
        const int64_t hh = heads.empty() ? h : heads[static_cast<size_t>(h)];
        if (src->shape.size() == 2) {
          std::copy(src->data.data() + hh * per_head, src->data.data() + (hh + 1) * per_head, dst);
          return;
        }
        std::vector<float> scratch;
        const float* v = src->head_dense(hh, scratch);
        std::copy(v, v + per_head, dst);
      });
    }
    // GPT-OSS's experts, per token (whatever the head selection): the router's logits (T, E),
    // the chosen experts as int32 and their weights (T, K).
    if (!lt.router.shape.empty()) {
      const std::string p = "layers." + std::to_string(l) + ".";
      if (selected(sel.stages, "router")) w.add_f32_ref(p + "router", lt.router.shape, lt.router.data.data());
      if (selected(sel.stages, "experts")) {
        std::vector<int32_t> ids(lt.experts.data.begin(), lt.experts.data.end());
        w.add_i32(p + "experts", lt.experts.shape, ids.data());
      }
      if (selected(sel.stages, "expert_weights"))
        w.add_f32_ref(p + "expert_weights", lt.expert_weights.shape, lt.expert_weights.data.data());
    }
    if (resid) w.add_f32_ref("layers." + std::to_string(l) + ".resid", lt.resid.shape, lt.resid.data.data());  // (T, C)
  }
  if (resid) w.add_f32_ref("resid_final", tr.final_resid.shape, tr.final_resid.data.data());  // (T, C)
  if (selected(sel.stages, "logits")) w.add_f32_ref("logits", tr.logits.shape, tr.logits.data.data());
  for (const auto& [name, t] : extra) w.add_f32_ref(name, t->shape, t->data.data());
  if (!sel.empty()) w.set_metadata("selection", sel.to_string());
  w.set_metadata("model", tr.model);
  w.set_metadata("backend", tr.backend);
  w.set_metadata("arith", tr.arith);
  w.set_metadata("block_size", std::to_string(tr.block_size));
  w.set_metadata("dropped", std::to_string(tr.dropped));
  if (!tr.ablation.empty()) {  // the heads this run replaced, "L:H,..." and zero|mean
    w.set_metadata("ablate", tr.ablation.to_string());
    w.set_metadata("ablate_mode", ablation_mode_name(tr.ablation.mode));
  }
  w.set_metadata("n_layer", std::to_string(tr.layers.size()));
  w.set_metadata("format", "attnviz-dump-1");
  return w;
}

void write_dump(const Trace& tr, const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& extra,
                const DumpSelection& sel) {
  dump_tensors(tr, extra, sel).write(path);
}

}  // namespace attnviz
