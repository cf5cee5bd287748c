#include "core/engine/score_attribution.h"

#include <cmath>
#include <string>

#include "core/engine/ops.h"
#include "core/engine/stored_product.h"
#include "core/error.h"

namespace attnviz {

namespace {

std::string range(int n) { return "0 … " + std::to_string(n - 1); }

// The parts of the stream entering the layer at one row through its input norm, frozen at
// that row: (P, C). The last row (the bias part) also gets the norm's own bias.
Mat frozen_input_norm(const ModelConfig& c, const LayerWeights& lw, const LayerTrace& lt, int row, const Mat& parts) {
  if (!lw.norm1_w.size()) return parts;  // OLMo 2: no norm before attention
  const int C = c.n_embd;
  const Eigen::Map<const Vec> x(lt.resid.data.data() + static_cast<size_t>(row) * C, C);  // the recorded stream
  const bool layer_norm = c.arch == Arch::Gpt2;
  double mean = 0, var = 0;
  if (layer_norm) mean = static_cast<double>(x.sum()) / C;
  for (int e = 0; e < C; ++e) var += (x[e] - mean) * (x[e] - mean);
  const float s = static_cast<float>(1.0 / std::sqrt(var / C + static_cast<double>(c.norm_eps)));
  Mat n(parts.rows(), C);
  for (Eigen::Index r = 0; r < parts.rows(); ++r) {
    const float mu = layer_norm ? parts.row(r).mean() : 0.f;  // the mean subtraction, part by part
    n.row(r) = (parts.row(r).array() - mu).matrix().cwiseProduct(lw.norm1_w) * s;
  }
  if (lw.norm1_b.size()) n.row(n.rows() - 1) += lw.norm1_b;
  return n;
}

// QK-norm frozen at the row: its scale taken from the whole projection (the sum of the
// parts), then applied to each part. X (P, heads·d).
void frozen_qk_norm(const ModelConfig& c, Mat& X, int heads, const Vec& w) {
  if (c.qk_norm == QkNorm::None || !w.size()) return;
  const bool whole = c.qk_norm == QkNorm::Whole;
  const int d = c.head_size, segs = whole ? 1 : heads, len = whole ? heads * d : d;
  const Vec total = X.colwise().sum();
  for (int g = 0; g < segs; ++g) {
    const double ss = static_cast<double>(total.segment(g * len, len).squaredNorm());
    const float s = static_cast<float>(1.0 / std::sqrt(ss / len + static_cast<double>(c.norm_eps)));
    for (Eigen::Index r = 0; r < X.rows(); ++r)
      X.row(r).segment(g * len, len) = X.row(r).segment(g * len, len).cwiseProduct(w) * s;
  }
}

// One head's side (P, d): the parts through the projection (its bias with the bias part),
// frozen QK-norm, and RoPE at the row's position.
Mat head_side(const ModelConfig& c, const LayerSpec& spec, const std::vector<double>& inv_freq, const Mat& normed,
              const Weight& W, const Vec& b, int heads, const Vec& qk_w, int head, int pos, bool is_query) {
  const int d = c.head_size;
  Mat X;
  linear(normed, W, Vec(), X);  // (P, heads·d)
  if (b.size()) X.row(X.rows() - 1) += b;
  frozen_qk_norm(c, X, heads, qk_w);
  Mat side = X.middleCols(static_cast<Eigen::Index>(head) * d, d);  // (P, d)
  if (spec.rope) {
    Mat r(1, d);
    for (Eigen::Index p = 0; p < side.rows(); ++p) {
      r = side.row(p);
      rope_inplace(r, 1, d, pos, inv_freq, spec.rope_scaling.mscale);
      side.row(p) = r;
    }
  }
  if (is_query) side *= c.query_temperature(pos);  // Ministral 3's query temperature (1 before its length)
  return side;
}

}  // namespace

ScoreAttribution score_attribution(const Model& m, const Trace& tr, int layer, int head, int query, int key) {
  const ModelConfig& c = m.config;
  c.require_uniform_layers("splitting a score into what wrote the query and the key (qk)");
  const int L = c.n_layer, T = tr.T();
  if (layer < 0 || layer >= L)
    throw Error("layer " + std::to_string(layer) + " does not exist (the model has " + std::to_string(L) + " layers: " +
                    range(L) + ")",
                ErrorKind::Usage);
  const LayerSpec spec = c.layer(layer);
  if (spec.mixer != Mixer::Softmax) {
    std::string softmax_layers;
    for (int l = 0; l < L; ++l)
      if (c.layer(l).mixer == Mixer::Softmax) softmax_layers += (softmax_layers.empty() ? "" : ", ") + std::to_string(l);
    throw Error("layer " + std::to_string(layer) + " is a " +
                    (spec.mixer == Mixer::GatedDeltaNet
                         ? std::string("linear-attention (gated delta rule) layer: its A[i,j] is not a softmax score, so there "
                                       "is no q·k score to split")
                         : std::string("short-convolution layer: it mixes tokens through a fixed filter, with no q·k score "
                                       "to split")) +
                    "; the softmax layers are " +
                    (softmax_layers.empty() ? std::string("none") : softmax_layers),
                ErrorKind::Usage);
  }
  if (head < 0 || head >= c.n_head)
    throw Error("head " + std::to_string(head) + " does not exist (layer " + std::to_string(layer) + " has " +
                    std::to_string(c.n_head) + " heads: " + range(c.n_head) + ")",
                ErrorKind::Usage);
  if (query < 0 || query >= T)
    throw Error("query " + std::to_string(query) + " is outside the text (" + std::to_string(T) + " tokens: " + range(T) + ")",
                ErrorKind::Usage);
  if (key < 0 || key > query)
    throw Error("key " + std::to_string(key) + (key > query ? " is after the query: the causal mask hides it" : " does not exist") +
                    " (query " + std::to_string(query) + " sees keys 0 … " + std::to_string(query) + ")",
                ErrorKind::Usage);
  if (spec.window > 0 && key <= query - spec.window)
    throw Error("key " + std::to_string(key) + " is outside layer " + std::to_string(layer) + "'s sliding window of " +
                    std::to_string(spec.window) + " tokens (query " + std::to_string(query) + " sees keys " +
                    std::to_string(query - spec.window + 1) + " … " + std::to_string(query) + ")",
                ErrorKind::Usage);

  const LayerWeights& lw = m.weights.layers[static_cast<size_t>(layer)];
  const LayerTrace& lt = tr.layers[static_cast<size_t>(layer)];
  const StreamParts qp = stream_parts(m, tr, layer, query), kp = stream_parts(m, tr, layer, key);
  const std::vector<double> inv = spec.rope ? rope_inv_freq(c, layer, T) : std::vector<double>{};
  const Mat Q = head_side(c, spec, inv, frozen_input_norm(c, lw, lt, query, qp.rows), lw.wq, lw.bq, c.n_head, lw.q_norm,
                          head, query, /*is_query=*/true);  // (P, d)
  const Mat K = head_side(c, spec, inv, frozen_input_norm(c, lw, lt, key, kp.rows), lw.wk, lw.bk, c.n_kv_head, lw.k_norm,
                          c.kv_head_of(head), key, /*is_query=*/false);  // (P, d)

  ScoreAttribution a;
  a.layer = layer;
  a.head = head;
  a.query = query;
  a.key = key;
  a.score = lt.value(Stage::Scaled, head, query, key);
  a.parts = qp.parts;
  const size_t P = a.parts.size();
  a.terms.assign(P * P, 0.0);
  a.query_side.assign(P, 0.0);
  a.key_side.assign(P, 0.0);
  const double scale = spec.scale;
  for (size_t x = 0; x < P; ++x)
    for (size_t y = 0; y < P; ++y) {
      double s = 0;
      for (int e = 0; e < c.head_size; ++e)
        s += static_cast<double>(Q(static_cast<Eigen::Index>(x), e)) * K(static_cast<Eigen::Index>(y), e);
      s *= scale;
      a.terms[x * P + y] = s;
      a.query_side[x] += s;
      a.key_side[y] += s;
      a.sum += s;
    }
  return a;
}

}  // namespace attnviz
