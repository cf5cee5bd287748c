#include "core/engine/lens.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/engine/backend.h"
#include "core/engine/delta_rule.h"
#include "core/engine/engine.h"
#include "core/engine/ops.h"
#include "core/engine/stored_product.h"
#include "core/engine/stream_parts.h"
#include "core/error.h"
#include "core/model/mixer.h"

namespace attnviz {

namespace {

// Positions the lens multiplies by the unembedding together: a (rows, V) block of logits.
constexpr int kLensRows = 32;

const char* const kNeedsResid =
    " the residual stream, which this trace does not hold";

void check_position(const Trace& tr, int i) {
  if (i < 0 || i >= tr.T())
    throw Error("position " + std::to_string(i) + " is outside the text (" + std::to_string(tr.T()) +
                    " tokens: 0 … " + std::to_string(tr.T() - 1) + ")",
                ErrorKind::Usage);
}

// The residual stream after layer l at position i (C floats), or null when not recorded.
const float* stream_after(const ModelConfig& c, const Trace& tr, int l, int i) {
  const std::vector<int64_t> shape{tr.T(), c.n_embd};
  const Tensor& t = l + 1 < static_cast<int>(tr.layers.size()) ? tr.layers[static_cast<size_t>(l + 1)].resid
                                                                 : tr.final_resid;
  if (t.shape != shape) return nullptr;
  return t.data.data() + static_cast<size_t>(i) * c.n_embd;
}

}  // namespace

Mat lens_hidden(const Model& m, const Trace& tr, int layer, const std::vector<int>& positions) {
  const ModelConfig& c = m.config;
  const int L = static_cast<int>(tr.layers.size()), C = c.n_embd;
  if (layer < 0 || layer >= L)
    throw Error("layer " + std::to_string(layer) + " does not exist (the model has " + std::to_string(L) +
                    " layers: 0 … " + std::to_string(L - 1) + ")",
                ErrorKind::Usage);
  for (int i : positions) check_position(tr, i);
  const int n = static_cast<int>(positions.size());
  Mat h(n, C);
  if (layer == L - 1 && tr.final_hidden.shape == std::vector<int64_t>{tr.T(), C}) {  // the model's own
    for (int r = 0; r < n; ++r)
      h.row(r) = Eigen::Map<const Vec>(tr.final_hidden.data.data() + static_cast<size_t>(positions[r]) * C, C);
    return h;
  }
  Mat x(n, C);
  for (int r = 0; r < n; ++r) {
    const float* s = stream_after(c, tr, layer, positions[static_cast<size_t>(r)]);
    if (!s) throw Error(std::string("the logit lens needs") + kNeedsResid);
    x.row(r) = Eigen::Map<const Vec>(s, C);
  }
  norm(c, x, m.weights.normf_w, m.weights.normf_b, h);
  if (c.logit_scale != 1.f) h *= c.logit_scale;
  return h;
}

std::vector<LensCell> logit_lens(const Model& m, const Trace& tr, int layer, const std::vector<int>& positions,
                                 int top_k, const std::atomic<bool>* cancel) {
  const ModelConfig& c = m.config;
  const int V = c.vocab_size;
  if (top_k < 1) throw Error("--top must be at least 1", ErrorKind::Usage);
  const int K = std::min(top_k, V);
  std::vector<LensCell> cells(positions.size());
  std::vector<int> order(static_cast<size_t>(V));
  for (size_t b0 = 0; b0 < positions.size(); b0 += kLensRows) {
    if (cancel && cancel->load()) throw Cancelled();
    const std::vector<int> rows(positions.begin() + static_cast<std::ptrdiff_t>(b0),
                                positions.begin() + static_cast<std::ptrdiff_t>(std::min(positions.size(), b0 + kLensRows)));
    const Mat h = lens_hidden(m, tr, layer, rows);  // (n, C)
    Mat logits(h.rows(), V);
    linear_bt(h, m.weights.unembedding(), logits);  // (n, V)
    finish_logits(c, logits.data(), logits.size());
    for (Eigen::Index r = 0; r < logits.rows(); ++r) {
      const float* z = &logits(r, 0);
      const float mx = *std::max_element(z, z + V);
      double sum = 0;
      for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v]) - mx);
      const auto prob = [&](int v) { return static_cast<float>(std::exp(static_cast<double>(z[v]) - mx) / sum); };
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [z](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
      LensCell& cell = cells[b0 + static_cast<size_t>(r)];
      for (int k = 0; k < K; ++k) {
        cell.top_ids.push_back(order[static_cast<size_t>(k)]);
        cell.top_probs.push_back(prob(order[static_cast<size_t>(k)]));
      }
      const int i = rows[static_cast<size_t>(r)];
      if (i + 1 < tr.T()) {
        const int next = tr.tokens[static_cast<size_t>(i + 1)];
        cell.next_prob = prob(next);
        cell.next_rank = static_cast<int>(std::count_if(z, z + V, [&](float v) { return v > z[next]; }));
      }
    }
  }
  return cells;
}

int predicted_token(const Model& m, const Trace& tr, int position) {
  check_position(tr, position);
  std::vector<float> z;
  row_logits(m, tr, position, z);
  return static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
}

namespace {

// The direction a part of the residual stream is read along: g · part is its share of the
// logit of A (− B) at `position`, the final norm's scale frozen at the run's value.
struct LogitDirection {
  std::vector<double> u;  // (C) u_A − u_B, the unembedding rows
  std::vector<double> g;  // (C) logit_scale · s · w ⊙ u, centred for LayerNorm
  double logit = 0;       // the model's logit of A (or A − B)
  double norm_scale = 0;  // s
  double bias = 0;        // the final norm's bias along u (LayerNorm)
  double share(const float* p) const {
    double s = 0;
    for (size_t e = 0; e < g.size(); ++e) s += g[e] * p[e];
    return s;
  }
};

// Checks what the attribution needs (the position, the ids, a model whose logit is a sum
// of parts, the residual stream) and gives the direction; throws an Error saying why not.
LogitDirection logit_direction(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int L = c.n_layer, C = c.n_embd, V = c.vocab_size;
  check_position(tr, position);
  if (target_ids.empty() || target_ids.size() > 2)
    throw Error("the attribution takes one target id or two (A − B)", ErrorKind::Usage);
  for (int id : target_ids)
    if (id < 0 || id >= V)
      throw Error("target id " + std::to_string(id) + " is outside the vocabulary (0 … " + std::to_string(V - 1) + ")",
                  ErrorKind::Usage);
  for (const LayerWeights& lw : w.layers)
    if (lw.post_attn_norm.size() || lw.post_mlp_norm.size())
      throw Error("direct logit attribution is not available for " + c.model_type +
                  ": its blocks norm each attention and MLP output before adding it to the residual stream, so "
                  "no head's share of the logit is linear");
  if (c.final_softcap > 0)
    throw Error("direct logit attribution is not available for " + c.model_type +
                ": the model soft-caps its logits (c·tanh(x/c)), so the logit is not a sum of parts");
  const int i = position;
  const float* xf = stream_after(c, tr, L - 1, i);
  if (static_cast<int>(tr.layers.size()) != L || !xf) throw Error(std::string("the attribution needs") + kNeedsResid);
  for (int l = 0; l < L; ++l) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    const std::vector<int64_t> out_shape = mixer_out_shape(c, l, tr.T());  // empty: no head outputs
    if (lt.resid.shape != std::vector<int64_t>{tr.T(), C} || (!out_shape.empty() && lt.out.shape != out_shape))
      throw Error(std::string("the attribution needs") + kNeedsResid);
  }

  LogitDirection dir;
  std::vector<float> z;
  row_logits(m, tr, i, z);
  dir.logit = static_cast<double>(z[static_cast<size_t>(target_ids[0])]) -
              (target_ids.size() > 1 ? static_cast<double>(z[static_cast<size_t>(target_ids[1])]) : 0.0);

  // The direction u = u_A − u_B, and the frozen final norm.
  dir.u.assign(static_cast<size_t>(C), 0.0);
  std::vector<float> row(static_cast<size_t>(C));
  for (size_t t = 0; t < target_ids.size(); ++t) {
    w.unembedding().table_row(target_ids[t], row.data());
    for (int e = 0; e < C; ++e) dir.u[static_cast<size_t>(e)] += (t == 0 ? 1.0 : -1.0) * row[static_cast<size_t>(e)];
  }
  const bool layer_norm = c.arch == Arch::Gpt2;
  double mean = 0, var = 0;
  for (int e = 0; e < C; ++e) mean += xf[e];
  mean /= C;
  for (int e = 0; e < C; ++e) {
    const double v = layer_norm ? xf[e] - mean : xf[e];
    var += v * v;
  }
  var /= C;
  dir.norm_scale = 1.0 / std::sqrt(var + static_cast<double>(c.norm_eps));
  // g · part is a part's share: g = logit_scale · s · w ⊙ u, centred for LayerNorm (whose
  // mean subtraction then applies to every part alike).
  dir.g.resize(static_cast<size_t>(C));
  double g_mean = 0;
  for (int e = 0; e < C; ++e) {
    dir.g[static_cast<size_t>(e)] = c.logit_scale * dir.norm_scale * w.normf_w[e] * dir.u[static_cast<size_t>(e)];
    g_mean += dir.g[static_cast<size_t>(e)];
  }
  g_mean /= C;
  if (layer_norm)
    for (double& v : dir.g) v -= g_mean;
  if (w.normf_b.size())
    for (int e = 0; e < C; ++e) dir.bias += c.logit_scale * static_cast<double>(w.normf_b[e]) * dir.u[static_cast<size_t>(e)];
  return dir;
}

}  // namespace

Attribution direct_logit_attribution(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids) {
  const ModelConfig& c = m.config;
  const int L = c.n_layer;
  const LogitDirection dir = logit_direction(m, tr, position, target_ids);
  const int i = position;
  Attribution a;
  a.position = i;
  a.target_ids = target_ids;
  a.logit = dir.logit;
  a.norm_scale = dir.norm_scale;
  a.rest = dir.bias;

  // Every part of the final stream (its norms and gates frozen at the row), read along g.
  const StreamParts sp = stream_parts(m, tr, L, i);
  a.heads.assign(static_cast<size_t>(L), {});
  for (int l = 0; l < L; ++l)
    if (mixer_info(c.layer(l).mixer).head_outputs)
      a.heads[static_cast<size_t>(l)].assign(static_cast<size_t>(c.heads_at(l)), 0.0);
  a.mlp.assign(static_cast<size_t>(L), 0.0);
  a.conv.assign(static_cast<size_t>(L), 0.0);
  for (size_t r = 0; r < sp.parts.size(); ++r) {
    const StreamPart& p = sp.parts[r];
    const double v = dir.share(&sp.rows(static_cast<Eigen::Index>(r), 0));
    switch (p.kind) {
      case PartKind::Embed:
      case PartKind::Pos: a.embed += v; break;
      case PartKind::Head: a.heads[static_cast<size_t>(p.layer)][static_cast<size_t>(p.head)] = v; break;
      case PartKind::Mlp: a.mlp[static_cast<size_t>(p.layer)] = v; break;
      case PartKind::Conv: a.conv[static_cast<size_t>(p.layer)] = v; break;
      case PartKind::Bias: a.rest += v; break;
    }
  }
  a.sum = a.embed + a.rest;
  for (int l = 0; l < L; ++l) {
    a.sum += a.mlp[static_cast<size_t>(l)] + a.conv[static_cast<size_t>(l)];
    for (double v : a.heads[static_cast<size_t>(l)]) a.sum += v;
  }
  return a;
}

namespace {

// W·g for a linear weight W (in, out) and g (out): (in) values, the weight read as it is held
// (float32 W, or the file's rows of Wᵀ decoded one at a time).
std::vector<double> weight_times(const Weight& w, const std::vector<double>& g) {
  if (!w.is_stored()) {
    std::vector<double> r(static_cast<size_t>(w.f32.rows()), 0.0);
    for (Eigen::Index a = 0; a < w.f32.rows(); ++a)
      for (Eigen::Index c = 0; c < w.f32.cols(); ++c) r[static_cast<size_t>(a)] += w.f32(a, c) * g[static_cast<size_t>(c)];
    return r;
  }
  std::vector<double> r(static_cast<size_t>(w.stored.cols), 0.0);
  std::vector<float> row(static_cast<size_t>(w.stored.cols));
  for (int64_t c = 0; c < w.stored.rows; ++c) {  // stored row c: column c of W
    w.stored.decode_row(c, row.data());
    const double gc = g[static_cast<size_t>(c)];
    for (size_t a = 0; a < row.size(); ++a) r[a] += gc * row[a];
  }
  return r;
}

}  // namespace

KeyAttribution key_attribution(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids,
                               const std::atomic<bool>* cancel) {
  const ModelConfig& c = m.config;
  c.require_uniform_layers("attribution through the keys");
  const int L = c.n_layer;
  int H = 0;  // the most heads a layer has (a hybrid's linear layers may have more)
  for (int l = 0; l < L; ++l) H = std::max(H, c.heads_at(l));
  const LogitDirection dir = logit_direction(m, tr, position, target_ids);
  const int i = position, T = tr.T();
  KeyAttribution a;
  a.position = i;
  a.target_ids = target_ids;
  a.logit = dir.logit;
  a.L = L;
  a.H = H;
  a.T = T;
  a.shares.assign(static_cast<size_t>(L) * H * T, 0.f);
  a.replaced.assign(static_cast<size_t>(L) * H, 0);
  std::vector<float> scratch;
  std::vector<double> vr(static_cast<size_t>(T));
  Mat blocks, mult;
  for (int l = 0; l < L; ++l) {
    if (cancel && cancel->load()) throw Cancelled();
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    const LayerWeights& lw = m.weights.layers[static_cast<size_t>(l)];
    // A convolution layer carries no key through a head: its part is Attribution::conv alone.
    if (!mixer_info(lt.mixer).head_outputs) continue;
    const bool is_linear = lt.mixer == Mixer::GatedDeltaNet;
    const int heads = static_cast<int>(lt.out.dim(0)), d = static_cast<int>(lt.out.dim(2));
    const std::vector<double> r = weight_times(is_linear ? lw.lin_out : lw.wo, dir.g);  // (heads·d)
    head_blocks(c, lw, lt, i, blocks, mult);  // mult: the frozen gates and norm scales of row i
    for (int h = 0; h < heads; ++h) {
      if (tr.ablation.has(l, h)) {
        a.replaced[static_cast<size_t>(l) * H + h] = 1;
        continue;
      }
      const int kv = is_linear ? h : c.kv_head_of(l, h);  // a linear layer keeps v per value head
      const float* p = lt.row_values(is_linear ? Stage::Implicit : Stage::Probs, h, i, scratch);  // (T): a_i· or A[i,·]
      float* out = a.shares.data() + (static_cast<size_t>(l) * H + h) * T;
      for (int j = 0; j <= i; ++j) {
        if (p[j] == 0.f) continue;  // masked: outside the window
        double s = 0;
        for (int e = 0; e < d; ++e)
          s += static_cast<double>(lt.v.at(kv, j, e)) * mult(h, e) * r[static_cast<size_t>(h * d + e)];
        out[j] = static_cast<float>(static_cast<double>(p[j]) * s * c.residual_scale);
      }
    }
  }
  return a;
}

}  // namespace attnviz
