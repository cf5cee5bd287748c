#include "core/engine/importance.h"

#include <algorithm>
#include <cmath>

namespace attnviz {

double next_token_loss(const float* row, int V, int target) {
  double mx = row[0];
  for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
  return mx + std::log(s) - row[target];
}

double mean_next_token_loss(const Trace& t) {
  const int T = t.T();
  if (T < 2) return 0;
  const int V = static_cast<int>(t.logits.dim(1));
  double sum = 0;
  for (int i = 0; i + 1 < T; ++i) sum += next_token_loss(t.logits.data.data() + static_cast<size_t>(i) * V, V, t.tokens[i + 1]);
  return sum / (T - 1);
}

ImportanceGrid head_importance(Engine& engine, const std::vector<int>& ids, const std::function<bool(int, int)>& progress) {
  const Ablation saved = engine.ablation();
  const int L = engine.model().config.n_layer, H = engine.model().config.n_head, total = 1 + 2 * L * H;
  ImportanceGrid g;
  struct Restore {  // the caller's ablation back, also when a pass throws
    Engine& e;
    const Ablation& a;
    ~Restore() { e.set_ablation(a); }
  } restore{engine, saved};
  engine.set_ablation({});
  const Trace& clean = engine.run(ids);
  g.base_loss = mean_next_token_loss(clean);
  g.targets = std::max(0, clean.T() - 1);
  int done = 1;
  if (progress && !progress(done, total)) return g;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      HeadImportance hi;
      hi.layer = l, hi.head = h;
      for (AblationMode mode : {AblationMode::Zero, AblationMode::Mean}) {
        engine.set_ablation(Ablation{mode, {{l, h}}});
        const double loss = mean_next_token_loss(engine.run(ids)) - g.base_loss;
        (mode == AblationMode::Zero ? hi.zero : hi.mean) = loss;
        ++done;
        if (progress && !progress(done, total)) return g;
      }
      g.heads.push_back(hi);
    }
  g.complete = true;
  return g;
}

}  // namespace attnviz
