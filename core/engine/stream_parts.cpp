#include "core/engine/stream_parts.h"

#include <cmath>
#include <string>

#include "core/engine/delta_rule.h"
#include "core/engine/experts.h"
#include "core/engine/ops.h"
#include "core/engine/stored_product.h"
#include "core/error.h"
#include "core/model/mixer.h"

namespace attnviz {

std::string part_name(const StreamPart& p) {
  switch (p.kind) {
    case PartKind::Embed: return "embed";
    case PartKind::Pos: return "pos";
    case PartKind::Head: return "L" + std::to_string(p.layer) + "H" + std::to_string(p.head);
    case PartKind::Mlp: return "L" + std::to_string(p.layer) + ".mlp";
    case PartKind::Conv: return "L" + std::to_string(p.layer) + ".conv";
    case PartKind::Bias: return "bias";
  }
  return "?";
}

void head_blocks(const ModelConfig& c, const LayerWeights& lw, const LayerTrace& lt, int i, Mat& blocks, Mat& mult) {
  const int heads = static_cast<int>(lt.out.dim(0)), w = static_cast<int>(lt.out.dim(2));
  mult.setOnes(heads, w);
  if (lt.mixer == Mixer::GatedDeltaNet) {
    Mat h, z;
    const Mat x = Eigen::Map<const Mat>(lt.resid.data.data() + static_cast<size_t>(i) * c.n_embd, 1, c.n_embd);
    norm(c, x, lw.norm1_w, lw.norm1_b, h);
    linear(h, lw.lin_z, Vec(), z);  // (1, Hv·dv)
    for (int j = 0; j < heads; ++j) {
      double ss = 0;
      for (int e = 0; e < w; ++e) ss += static_cast<double>(lt.out.at(j, i, e)) * lt.out.at(j, i, e);
      const double r = 1.0 / std::sqrt(ss / w + static_cast<double>(c.norm_eps));  // as the pass computes it
      for (int e = 0; e < w; ++e) {
        const float zz = z(0, j * w + e);
        mult(j, e) = static_cast<float>(r) * lw.lin_norm[e] * (zz / (1.f + std::exp(-zz)));
      }
    }
  } else if (!lt.gate.shape.empty()) {
    for (int h = 0; h < heads; ++h)
      for (int e = 0; e < w; ++e) mult(h, e) = lt.gate.at(h, i, e);
  }
  blocks.setZero(heads, static_cast<Eigen::Index>(heads) * w);
  for (int h = 0; h < heads; ++h)
    for (int e = 0; e < w; ++e) blocks(h, h * w + e) = lt.out.at(h, i, e) * mult(h, e);
}

Mat short_conv_row(const ModelConfig& c, const LayerWeights& lw, const LayerTrace& lt, int i) {
  const int C = c.n_embd, K = c.short_conv_kernel, r0 = std::max(0, i - (K - 1)), n = i - r0 + 1;
  Mat h, bcx;
  const Mat x = Eigen::Map<const Mat>(lt.resid.data.data(), lt.resid.dim(0), C).middleRows(r0, n);
  norm(c, x, lw.norm1_w, lw.norm1_b, h);
  linear(h, lw.sc_in, lw.sc_in_b, bcx);  // (n, 3C) B | C | x
  const Mat u = bcx.leftCols(C).cwiseProduct(bcx.rightCols(C));  // (n, C) B ⊙ x
  Mat conv(1, C);
  causal_conv(u.data(), u.outerStride(), n, C, lw.sc_taps.data(), K, n - 1, conv.data(), conv.outerStride(),
              lw.sc_taps_b.size() ? lw.sc_taps_b.data() : nullptr, /*silu=*/false);
  Mat y = bcx.block(n - 1, C, 1, C).cwiseProduct(conv), out;
  linear(y, lw.sc_out, Vec(), out);  // (1, C) without the bias
  return out;
}

namespace {

const char* const kNeedsStream =
    " the residual stream and the head outputs, which this trace does not hold (run on the CPU backend)";

// A branch's parts Y (k, C) and its bias b (C) after a post-norm frozen at the row: the
// norm's scale s = 1/rms(ΣY + b) (what the pass normed), each part ← s·w ⊙ part.
void freeze_post_norm(const ModelConfig& c, const Vec& post_w, Mat& Y, Vec& b) {
  if (!post_w.size()) return;
  const Vec total = Y.colwise().sum() + b;
  const double s = 1.0 / std::sqrt(static_cast<double>(total.squaredNorm()) / total.size() + static_cast<double>(c.norm_eps));
  for (Eigen::Index r = 0; r < Y.rows(); ++r) Y.row(r) = Y.row(r).cwiseProduct(post_w) * static_cast<float>(s);
  b = b.cwiseProduct(post_w) * static_cast<float>(s);
}

}  // namespace

StreamParts stream_parts(const Model& m, const Trace& tr, int layer, int i) {
  const ModelConfig& c = m.config;
  c.require_uniform_layers("splitting the residual stream into its parts");
  const ModelWeights& w = m.weights;
  const int L = c.n_layer, C = c.n_embd, T = tr.T();
  if (layer < 0 || layer > L)
    throw Error("layer " + std::to_string(layer) + " does not exist (0 … " + std::to_string(L) + ")", ErrorKind::Usage);
  if (i < 0 || i >= T)
    throw Error("position " + std::to_string(i) + " is outside the text (" + std::to_string(T) + " tokens: 0 … " +
                    std::to_string(T - 1) + ")",
                ErrorKind::Usage);
  if (static_cast<int>(tr.layers.size()) != L) throw Error(std::string("the split needs") + kNeedsStream);
  for (int l = 0; l < layer; ++l) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    const std::vector<int64_t> out_shape = mixer_out_shape(c, l, T);  // empty: no head outputs
    if (lt.resid.shape != std::vector<int64_t>{T, C} || (!out_shape.empty() && lt.out.shape != out_shape))
      throw Error(std::string("the split needs") + kNeedsStream);
  }

  StreamParts sp;
  std::vector<Mat> blocks_out;  // the rows, gathered
  const auto push = [&](PartKind k, int l, int h, const Eigen::Ref<const Mat>& row) {
    sp.parts.push_back({k, l, h});
    blocks_out.push_back(row);
  };
  Mat emb(1, C);
  w.tok_emb.table_row(tr.tokens[static_cast<size_t>(i)], emb.data());
  if (c.emb_scale != 1.f) emb *= c.emb_scale;
  push(PartKind::Embed, -1, -1, emb);
  if (c.arch == Arch::Gpt2) push(PartKind::Pos, -1, -1, w.pos_emb.row(i));

  const float rs = c.residual_scale;
  Vec bias = Vec::Zero(C);
  Mat blocks, mult, Y, hm, gate, up, down;
  for (int l = 0; l < layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    Mat mid = Eigen::Map<const Mat>(lt.resid.data.data() + static_cast<size_t>(i) * C, 1, C);  // (1, C)
    Vec bb;
    const bool conv = lt.mixer == Mixer::ShortConv;
    if (conv) {  // one part: the convolution's output (no heads)
      Y = short_conv_row(c, lw, lt, i);
      bb = lw.sc_out_b.size() ? lw.sc_out_b : Vec::Zero(C);
    } else {
      head_blocks(c, lw, lt, i, blocks, mult);
      linear(blocks, lt.mixer == Mixer::GatedDeltaNet ? lw.lin_out : lw.wo, Vec(), Y);  // (heads, C)
      bb = lw.bo.size() ? lw.bo : Vec::Zero(C);
    }
    freeze_post_norm(c, lw.post_attn_norm, Y, bb);
    Y *= rs;
    bb *= rs;
    for (Eigen::Index h = 0; h < Y.rows(); ++h) {
      push(conv ? PartKind::Conv : PartKind::Head, l, conv ? -1 : static_cast<int>(h), Y.row(h));
      mid += Y.row(h);
    }
    mid += bb;
    bias += bb;
    // The MLP recomputed on the stream the layer gave it.
    const Mat* in = &mid;
    if (lw.norm2_w.size()) {
      norm(c, mid, lw.norm2_w, lw.norm2_b, hm);
      in = &hm;
    }
    Vec bd = lw.b_down.size() ? lw.b_down : Vec::Zero(C);
    if (c.experts.count) {  // GPT-OSS: the experts' output, their biases in it (they differ per expert)
      experts_branch(c, lw, *in, 0, nullptr, down);  // (1, C)
    } else {
      linear(*in, lw.w_fc, lw.b_fc, gate);  // (1, I)
      if (!lw.w_up.empty()) linear(*in, lw.w_up, Vec(), up);
      mlp_activation(c, gate, up);
      linear(gate, lw.w_down, Vec(), down);  // (1, C), without b_down
    }
    freeze_post_norm(c, lw.post_mlp_norm, down, bd);
    push(PartKind::Mlp, l, -1, down * rs);
    bias += bd * rs;
  }
  push(PartKind::Bias, -1, -1, bias);
  sp.rows.resize(static_cast<Eigen::Index>(blocks_out.size()), C);
  for (size_t r = 0; r < blocks_out.size(); ++r) sp.rows.row(static_cast<Eigen::Index>(r)) = blocks_out[r];
  return sp;
}

}  // namespace attnviz
