#include "core/engine/per_layer_input.h"

#include <cmath>

#include "core/engine/stored_product.h"

namespace attnviz {

Mat per_layer_embeddings(const Model& m, const std::vector<int>& tokens, int p) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int n = static_cast<int>(tokens.size()) - p, C = c.n_embd, LP = c.n_layer * c.ple_dim;
  Mat e(n, C), proj, tab = Mat::Zero(n, LP);
  for (int r = 0; r < n; ++r) {
    w.tok_emb.table_row(tokens[static_cast<size_t>(p + r)], &e(r, 0));
    if (tokens[static_cast<size_t>(p + r)] < c.ple_vocab) w.ple_table.table_row(tokens[static_cast<size_t>(p + r)], &tab(r, 0));
  }
  e *= c.emb_scale;
  linear(e, w.ple_model_proj, Vec(), proj);  // (n, L·P)
  proj *= static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
  rms_norm_heads(proj, c.n_layer, c.ple_dim, w.ple_norm, c.norm_eps);
  return (proj + tab * static_cast<float>(std::sqrt(static_cast<double>(c.ple_dim)))) * static_cast<float>(std::sqrt(0.5));
}

}  // namespace attnviz
