#include "core/model/model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/families/family.h"
#include "core/model/pages.h"

namespace attnviz {

void warn_if_not_finite(const std::string& name, const float* v, int64_t n, std::vector<std::string>& warnings) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(v[i]);
  if (bad)
    warnings.push_back("tensor '" + excerpt(name) + "' holds " + std::to_string(bad) + " NaN or infinite value" +
                       (bad == 1 ? "" : "s") + " (of " + std::to_string(n) + "); its outputs will be NaN");
}

Weight Weight::columns(int64_t c0, int64_t n) const {
  Weight w;
  if (is_stored()) {
    if (row_of_col) throw std::logic_error("Weight::columns of a reordered matrix");
    w.stored = stored.slice(c0, n);
  } else {
    w.f32 = f32.middleCols(c0, n);
  }
  return w;
}

Mat Weight::table_f32() const {
  if (!is_stored()) return f32;
  Mat m(stored.rows, stored.cols);
  stored.decode_rows(0, stored.rows, m.data(), stored.cols);
  return m;
}

Mat Weight::linear_f32() const {
  if (!is_stored()) return f32;
  const int64_t out = stored.rows, in = stored.cols;
  Mat m(in, out);
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t c = 0; c < out; ++c) {
    stored.decode_row(row_of_col ? (*row_of_col)[static_cast<size_t>(c)] : c, row.data());
    m.col(c) = Eigen::Map<const Eigen::VectorXf>(row.data(), in);
  }
  return m;
}

void Weight::table_row(int64_t r, float* dst) const {
  if (is_stored()) stored.decode_row(r, dst);
  else std::copy_n(&f32(r, 0), f32.cols(), dst);
}

namespace {
// Calls f(name, weight) for every matrix of the model.
template <class F>
void each_matrix(ModelWeights& w, F f) {
  f(w.tok_emb, true);
  f(w.lm_head, true);
  f(w.ple_table, true);
  f(w.ple_model_proj, false);
  for (auto& l : w.layers) {
    f(l.ple_gate, false);
    f(l.ple_proj, false);
    for (Weight* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_fc, &l.w_up, &l.w_down, &l.w_gate, &l.lin_qkv, &l.lin_z, &l.lin_b,
                      &l.lin_a, &l.lin_out, &l.sc_in, &l.sc_out, &l.router})
      f(*m, false);
    for (auto* experts : {&l.ex_gate, &l.ex_up, &l.ex_down})
      for (Weight& m : *experts) f(m, false);
  }
}
}  // namespace

bool ModelWeights::any_stored() const {
  bool any = false;
  each_matrix(const_cast<ModelWeights&>(*this), [&](Weight& m, bool) { any = any || m.is_stored(); });
  return any;
}

std::vector<GgmlType> ModelWeights::stored_types() const {
  std::vector<GgmlType> types;
  each_matrix(const_cast<ModelWeights&>(*this), [&](Weight& m, bool) {
    if (m.is_stored() && std::find(types.begin(), types.end(), m.stored.type) == types.end())
      types.push_back(m.stored.type);
  });
  return types;
}

void ModelWeights::to_f32() {
  each_matrix(*this, [](Weight& m, bool table) {
    if (!m.is_stored()) return;
    Weight f(table ? m.table_f32() : m.linear_f32());
    m = std::move(f);
  });
}

std::vector<WeightSpan> weight_spans(const ModelWeights& w, bool one_token_pass) {
  std::vector<WeightSpan> out;
  auto add = [&](const auto& m) {
    if (m.size()) out.push_back({m.data(), static_cast<long long>(m.size() * sizeof(float)), static_cast<long long>(m.size())});
  };
  auto add_w = [&](const Weight& m) {
    if (m.is_stored()) out.push_back({m.stored.data, m.stored.bytes(), m.numel()});
    else add(m.f32);
  };
  if (!one_token_pass || w.lm_head.empty()) add_w(w.tok_emb);
  if (!one_token_pass) add(w.pos_emb);
  for (const auto& l : w.layers) {
    add(l.norm1_w), add(l.norm1_b), add_w(l.wq), add_w(l.wk), add_w(l.wv), add(l.bq), add(l.bk), add(l.bv);
    add_w(l.wo), add(l.bo), add(l.norm2_w), add(l.norm2_b), add_w(l.w_fc), add(l.b_fc), add_w(l.w_up);
    add_w(l.w_down), add(l.b_down), add(l.q_norm), add(l.k_norm), add(l.post_attn_norm), add(l.post_mlp_norm);
    add_w(l.w_gate), add_w(l.lin_qkv), add_w(l.lin_z), add_w(l.lin_b), add_w(l.lin_a), add(l.lin_conv);
    add(l.lin_dt_bias), add(l.lin_decay_rate), add(l.lin_norm), add_w(l.lin_out);
    add_w(l.sc_in), add(l.sc_in_b), add(l.sc_taps), add(l.sc_taps_b), add_w(l.sc_out), add(l.sc_out_b);
    add(l.sinks), add_w(l.router), add(l.router_b), add(l.ex_gate_b), add(l.ex_up_b), add(l.ex_down_b);
    for (const auto* experts : {&l.ex_gate, &l.ex_up, &l.ex_down})
      for (const Weight& m : *experts) add_w(m);
    add_w(l.ple_gate), add_w(l.ple_proj), add(l.ple_post_norm);
    add(l.router_scale), add(l.expert_scale), add(l.norm2_experts), add(l.post_mlp_norm_dense), add(l.post_mlp_norm_experts);
  }
  add(w.normf_w), add(w.normf_b), add_w(w.lm_head);
  if (!one_token_pass) add_w(w.ple_table);
  add_w(w.ple_model_proj), add(w.ple_norm);
  return out;
}

long long Model::parameter_count() const {
  long long n = 0;
  for (const WeightSpan& s : weight_spans(weights)) n += s.numel;
  return n;
}

void Model::check_files() const {
  for (const auto& f : files) f->check_size();
}

long long Model::weight_bytes() const {
  long long n = 0;
  for (const WeightSpan& s : weight_spans(weights)) n += s.bytes;
  return n;
}

std::vector<std::pair<std::string, long long>> Model::held_types() const {
  std::map<std::string, long long> bytes;
  long long all = 0;
  for (const WeightSpan& s : weight_spans(weights)) all += s.bytes;
  each_matrix(const_cast<ModelWeights&>(weights), [&](Weight& m, bool) {
    if (m.is_stored()) bytes[m.type_name()] += m.bytes();
  });
  long long stored = 0;
  for (const auto& [k, v] : bytes) stored += v;
  if (all > stored) bytes["F32"] += all - stored;
  std::vector<std::pair<std::string, long long>> out(bytes.begin(), bytes.end());
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return out;
}

std::map<std::string, int> Model::held_tensor_counts() const {
  std::map<std::string, int> n;
  int stored = 0;
  each_matrix(const_cast<ModelWeights&>(weights), [&](Weight& m, bool) {
    if (m.is_stored()) ++n[m.type_name()], ++stored;
  });
  const int all = static_cast<int>(weight_spans(weights).size());
  if (all > stored) n["F32"] += all - stored;
  return n;
}

std::string Model::held_types_str() const {
  std::string s;
  for (const auto& [type, bytes] : held_types()) s += (s.empty() ? "" : ", ") + type + " " + format_bytes(static_cast<double>(bytes));
  return s;
}

std::string Model::stored_types_str() const {
  std::string s;
  for (size_t i = 0; i < stored_types.size(); ++i)
    s += (i ? ", " : "") + stored_types[i].first + " " + std::to_string(stored_types[i].second) + (i ? "" : " tensors");
  return s;
}

void Model::set_stored_types(const std::map<std::string, int>& counts) {
  stored_types.assign(counts.begin(), counts.end());
  std::stable_sort(stored_types.begin(), stored_types.end(), [](auto& a, auto& b) { return a.second > b.second; });
}


void place_decoder_tensor(const ModelConfig& c, const DecoderTensor& t, Weight m, Vec v, ModelWeights& w) {
  const int Hd = c.n_head * c.head_size, KVd = c.n_kv_head * c.head_size, I = c.n_inner;
  LayerWeights* l = t.layer >= 0 ? &w.layers.at(static_cast<size_t>(t.layer)) : nullptr;
  switch (t.slot) {
    case Slot::TokEmb: w.tok_emb = std::move(m); break;
    case Slot::LmHead: w.lm_head = std::move(m); break;
    case Slot::NormF: w.normf_w = std::move(v); break;
    case Slot::Norm1: l->norm1_w = std::move(v); break;
    case Slot::Norm2: l->norm2_w = std::move(v); break;
    case Slot::QNorm: l->q_norm = std::move(v); break;
    case Slot::KNorm: l->k_norm = std::move(v); break;
    case Slot::PostAttnNorm: l->post_attn_norm = std::move(v); break;
    case Slot::PostMlpNorm: l->post_mlp_norm = std::move(v); break;
    case Slot::Bq: l->bq = std::move(v); break;
    case Slot::Bk: l->bk = std::move(v); break;
    case Slot::Bv: l->bv = std::move(v); break;
    case Slot::Bo: l->bo = std::move(v); break;
    case Slot::Wq: l->wq = std::move(m); break;
    case Slot::Wk: l->wk = std::move(m); break;
    case Slot::Wv: l->wv = std::move(m); break;
    case Slot::Wo: l->wo = std::move(m); break;
    case Slot::Wfc: l->w_fc = std::move(m); break;
    case Slot::Wup: l->w_up = std::move(m); break;
    case Slot::Wdown: l->w_down = std::move(m); break;
    case Slot::Wqkv:  // (C, Hd + 2·KVd): q columns, then k, then v
      l->wq = m.columns(0, Hd), l->wk = m.columns(Hd, KVd), l->wv = m.columns(Hd + KVd, KVd);
      break;
    case Slot::WgateUp:  // (C, 2·I): gate columns, then up
      l->w_fc = m.columns(0, I), l->w_up = m.columns(I, I);
      break;
    case Slot::WqGate: {  // (C, 2·H·d): head h's q in columns [2hd, 2hd + d), its gate in [2hd + d, 2(h+1)d)
      const Mat f = m.linear_f32();
      const int d = c.head_size;
      Mat q(f.rows(), Hd), g(f.rows(), Hd);
      for (int h = 0; h < c.n_head; ++h) {
        q.middleCols(h * d, d) = f.middleCols(2 * h * d, d);
        g.middleCols(h * d, d) = f.middleCols(2 * h * d + d, d);
      }
      l->wq = Weight(std::move(q)), l->w_gate = Weight(std::move(g));
      break;
    }
    case Slot::LinQkv: l->lin_qkv = std::move(m); break;
    case Slot::LinZ: l->lin_z = std::move(m); break;
    case Slot::LinB: l->lin_b = std::move(m); break;
    case Slot::LinA: l->lin_a = std::move(m); break;
    case Slot::LinOut: l->lin_out = std::move(m); break;
    case Slot::LinConv: l->lin_conv = std::move(v); break;
    case Slot::LinDtBias:
    case Slot::LinALog:  // each head's decay: a NaN or ∞ here would make its whole memory NaN
      for (Eigen::Index i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
          throw Error("tensor '" + excerpt(t.name) + "' holds " + std::to_string(v[i]) + " at " + std::to_string(i) +
                      "; a linear-attention layer's " + (t.slot == Slot::LinALog ? "A_log" : "dt_bias") +
                      " must be finite\n  HINT: the checkpoint is damaged; re-download it.");
      if (t.slot == Slot::LinALog) v = -v.array().exp();  // −exp(A_log): the rate the backend multiplies by
      (t.slot == Slot::LinALog ? l->lin_decay_rate : l->lin_dt_bias) = std::move(v);
      break;
    case Slot::LinNorm: l->lin_norm = std::move(v); break;
    case Slot::ConvIn: l->sc_in = std::move(m); break;
    case Slot::ConvInBias: l->sc_in_b = std::move(v); break;
    case Slot::ConvTaps: l->sc_taps = std::move(v); break;
    case Slot::ConvTapsBias: l->sc_taps_b = std::move(v); break;
    case Slot::ConvOut: l->sc_out = std::move(m); break;
    case Slot::ConvOutBias: l->sc_out_b = std::move(v); break;
    case Slot::Sinks:  // a NaN or ∞ sink logit would make every row of its head NaN
      for (Eigen::Index i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
          throw Error("tensor '" + excerpt(t.name) + "' holds " + std::to_string(v[i]) + " at " + std::to_string(i) +
                      "; an attention sink logit must be finite\n  HINT: the checkpoint is damaged; re-download it.");
      l->sinks = std::move(v);
      break;
    case Slot::Router: l->router = std::move(m); break;
    case Slot::RouterBias: l->router_b = std::move(v); break;
    case Slot::ExpGateUp: {  // (E, C, 2I) flat: expert e's (C, 2I), gate in even columns, up in odd ones
      const int E = c.experts.count, C = c.n_embd;
      l->ex_gate.assign(static_cast<size_t>(E), Weight()), l->ex_up.assign(static_cast<size_t>(E), Weight());
      for (int e = 0; e < E; ++e) {
        const Eigen::Map<const Mat> gu(v.data() + static_cast<int64_t>(e) * C * 2 * I, C, 2 * I);
        Mat g(C, I), u(C, I);
        for (int j = 0; j < I; ++j) g.col(j) = gu.col(2 * j), u.col(j) = gu.col(2 * j + 1);
        l->ex_gate[static_cast<size_t>(e)] = Weight(std::move(g)), l->ex_up[static_cast<size_t>(e)] = Weight(std::move(u));
      }
      break;
    }
    case Slot::ExpGateUpBias: {  // (E, 2I): interleaved like the columns above
      const int E = c.experts.count;
      l->ex_gate_b.resize(static_cast<Eigen::Index>(E) * I), l->ex_up_b.resize(static_cast<Eigen::Index>(E) * I);
      for (int64_t k = 0; k < static_cast<int64_t>(E) * I; ++k) l->ex_gate_b[k] = v[2 * k], l->ex_up_b[k] = v[2 * k + 1];
      break;
    }
    case Slot::ExpDown: {  // (E, I, C) flat: expert e's (I, C)
      const int E = c.experts.count, C = c.n_embd;
      l->ex_down.assign(static_cast<size_t>(E), Weight());
      for (int e = 0; e < E; ++e)
        l->ex_down[static_cast<size_t>(e)] = Weight(Mat(Eigen::Map<const Mat>(v.data() + static_cast<int64_t>(e) * I * C, I, C)));
      break;
    }
    case Slot::ExpDownBias: l->ex_down_b = std::move(v); break;
    case Slot::ExpGateBias: l->ex_gate_b = std::move(v); break;
    case Slot::ExpUpBias: l->ex_up_b = std::move(v); break;
    case Slot::ExpGateUpHalves: {  // (E, 2·I_e, C) flat: expert e's nn.Linear rows, gate then up
      const int E = c.experts.count, C = c.n_embd, Ie = c.experts.width;
      l->ex_gate.assign(static_cast<size_t>(E), Weight()), l->ex_up.assign(static_cast<size_t>(E), Weight());
      for (int e = 0; e < E; ++e) {
        const Eigen::Map<const Mat> gu(v.data() + static_cast<int64_t>(e) * 2 * Ie * C, 2 * Ie, C);  // (2·I_e, C)
        l->ex_gate[static_cast<size_t>(e)] = Weight(Mat(gu.topRows(Ie).transpose()));     // (C, I_e)
        l->ex_up[static_cast<size_t>(e)] = Weight(Mat(gu.bottomRows(Ie).transpose()));    // (C, I_e)
      }
      break;
    }
    case Slot::ExpDownRows: {  // (E, C, I_e) flat: expert e's nn.Linear (C, I_e) rows
      const int E = c.experts.count, C = c.n_embd, Ie = c.experts.width;
      l->ex_down.assign(static_cast<size_t>(E), Weight());
      for (int e = 0; e < E; ++e)
        l->ex_down[static_cast<size_t>(e)] =
            Weight(Mat(Eigen::Map<const Mat>(v.data() + static_cast<int64_t>(e) * C * Ie, C, Ie).transpose()));  // (I_e, C)
      break;
    }
    case Slot::RouterScale: l->router_scale = std::move(v); break;
    case Slot::ExpertScale: l->expert_scale = std::move(v); break;
    case Slot::Norm2Experts: l->norm2_experts = std::move(v); break;
    case Slot::PostMlpNormDense: l->post_mlp_norm_dense = std::move(v); break;
    case Slot::PostMlpNormExperts: l->post_mlp_norm_experts = std::move(v); break;
    case Slot::PleTable: w.ple_table = std::move(m); break;
    case Slot::PleModelProj: w.ple_model_proj = std::move(m); break;
    case Slot::PleNorm: w.ple_norm = std::move(v); break;
    case Slot::PleGate: l->ple_gate = std::move(m); break;
    case Slot::PleProj: l->ple_proj = std::move(m); break;
    case Slot::PlePostNorm: l->ple_post_norm = std::move(v); break;
    case Slot::LayerScalar:
      if (v.size() != 1 || !std::isfinite(v[0]))
        throw Error("tensor '" + excerpt(t.name) + "' must hold one finite number (the layer's scalar)");
      l->layer_scalar = v[0];
      break;
    case Slot::ExpGate: case Slot::ExpUp:  // stacked matrices: the GGUF loader places them itself
      throw Error("internal: tensor '" + excerpt(t.name) + "' holds E experts' matrices and is not placed as one");
  }
}

bool slot_is_flat(Slot s) {
  return s == Slot::LinConv || s == Slot::ConvTaps || s == Slot::ExpGateUp || s == Slot::ExpGateUpBias ||
         s == Slot::ExpDown || s == Slot::ExpDownBias || s == Slot::ExpGateBias || s == Slot::ExpUpBias ||
         s == Slot::ExpGateUpHalves || s == Slot::ExpDownRows;
}

bool slot_is_norm(Slot s) {
  return s == Slot::NormF || s == Slot::Norm1 || s == Slot::Norm2 || s == Slot::QNorm || s == Slot::KNorm ||
         s == Slot::PostAttnNorm || s == Slot::PostMlpNorm || s == Slot::PleNorm || s == Slot::PlePostNorm ||
         s == Slot::Norm2Experts || s == Slot::PostMlpNormDense || s == Slot::PostMlpNormExperts;
}

namespace {

// The list of every family without one of its own (FamilyTraits::hf_tensors).
std::vector<DecoderTensor> shared_decoder_tensors(const ModelConfig& c, const std::string& prefix,
                                                  const std::string& lm_head) {
  const int64_t C = c.n_embd, I = c.n_inner, d = c.head_size, Hd = c.n_head * d, KVd = c.n_kv_head * d;
  std::vector<DecoderTensor> out;
  out.push_back({prefix + "embed_tokens.weight", {c.vocab_size, C}, -1, Slot::TokEmb});
  const bool gemma = c.norm_place == NormPlace::Sandwich;
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    auto add = [&](const std::string& name, std::vector<int64_t> shape, Slot slot) { out.push_back({p + name, std::move(shape), i, slot}); };
    if (c.norm_place != NormPlace::Post) add("input_layernorm.weight", {C}, Slot::Norm1);
    if (c.layer(i).mixer == Mixer::GatedDeltaNet) {  // Qwen3.5's linear_attn
      const LinearAttnDims& ld = c.linear;
      const int64_t Ch = ld.conv_channels(), Hv = ld.v_heads, Vd = ld.value_width();
      add("linear_attn.in_proj_qkv.weight", {Ch, C}, Slot::LinQkv);
      add("linear_attn.in_proj_z.weight", {Vd, C}, Slot::LinZ);
      add("linear_attn.in_proj_b.weight", {Hv, C}, Slot::LinB);
      add("linear_attn.in_proj_a.weight", {Hv, C}, Slot::LinA);
      add("linear_attn.conv1d.weight", {Ch, 1, ld.conv_kernel}, Slot::LinConv);
      add("linear_attn.dt_bias", {Hv}, Slot::LinDtBias);
      add("linear_attn.A_log", {Hv}, Slot::LinALog);
      add("linear_attn.norm.weight", {ld.v_dim}, Slot::LinNorm);
      add("linear_attn.out_proj.weight", {C, Vd}, Slot::LinOut);
      add("post_attention_layernorm.weight", {C}, Slot::Norm2);
      add("mlp.gate_proj.weight", {I, C}, Slot::Wfc);
      add("mlp.up_proj.weight", {I, C}, Slot::Wup);
      add("mlp.down_proj.weight", {C, I}, Slot::Wdown);
      continue;
    }
    if (c.attn_gate) {
      add("self_attn.q_proj.weight", {2 * Hd, C}, Slot::WqGate);
      add("self_attn.k_proj.weight", {KVd, C}, Slot::Wk);
      add("self_attn.v_proj.weight", {KVd, C}, Slot::Wv);
    } else if (c.fused_qkv) {
      add("self_attn.qkv_proj.weight", {Hd + 2 * KVd, C}, Slot::Wqkv);
    } else {
      add("self_attn.q_proj.weight", {Hd, C}, Slot::Wq);
      add("self_attn.k_proj.weight", {KVd, C}, Slot::Wk);
      add("self_attn.v_proj.weight", {KVd, C}, Slot::Wv);
    }
    if (c.qkv_bias) {
      add("self_attn.q_proj.bias", {Hd}, Slot::Bq);
      add("self_attn.k_proj.bias", {KVd}, Slot::Bk);
      add("self_attn.v_proj.bias", {KVd}, Slot::Bv);
    }
    if (c.qk_norm != QkNorm::None) {
      const bool whole = c.qk_norm == QkNorm::Whole;
      add("self_attn.q_norm.weight", {whole ? Hd : d}, Slot::QNorm);
      add("self_attn.k_norm.weight", {whole ? KVd : d}, Slot::KNorm);
    }
    add("self_attn.o_proj.weight", {C, Hd}, Slot::Wo);
    if (c.o_bias) add("self_attn.o_proj.bias", {C}, Slot::Bo);
    // post_attention_layernorm: the norm before the MLP in llama's block, after attention in Gemma's and OLMo 2's.
    add("post_attention_layernorm.weight", {C}, c.norm_place == NormPlace::Pre ? Slot::Norm2 : Slot::PostAttnNorm);
    if (gemma) add("pre_feedforward_layernorm.weight", {C}, Slot::Norm2);
    if (c.attn_sinks) add("self_attn.sinks", {c.n_head}, Slot::Sinks);
    if (c.experts.count) {  // GPT-OSS: a router and E experts' stacked (in, out) matrices
      const int64_t E = c.experts.count;
      add("mlp.router.weight", {E, C}, Slot::Router);
      add("mlp.router.bias", {E}, Slot::RouterBias);
      add("mlp.experts.gate_up_proj", {E, C, 2 * I}, Slot::ExpGateUp);
      add("mlp.experts.gate_up_proj_bias", {E, 2 * I}, Slot::ExpGateUpBias);
      add("mlp.experts.down_proj", {E, I, C}, Slot::ExpDown);
      add("mlp.experts.down_proj_bias", {E, C}, Slot::ExpDownBias);
      continue;
    }
    if (c.fused_qkv) {
      add("mlp.gate_up_proj.weight", {2 * I, C}, Slot::WgateUp);
    } else {
      add("mlp.gate_proj.weight", {I, C}, Slot::Wfc);
      add("mlp.up_proj.weight", {I, C}, Slot::Wup);
    }
    add("mlp.down_proj.weight", {C, I}, Slot::Wdown);
    if (c.norm_place != NormPlace::Pre) add("post_feedforward_layernorm.weight", {C}, Slot::PostMlpNorm);
  }
  out.push_back({prefix + "norm.weight", {C}, -1, Slot::NormF});
  if (!c.tie_embeddings) out.push_back({lm_head, {c.vocab_size, C}, -1, Slot::LmHead});
  return out;
}

}  // namespace

std::vector<DecoderTensor> decoder_tensors(const ModelConfig& c, const std::string& prefix,
                                           const std::string& lm_head) {
  const FamilyTraits t = family_traits(family_of(c));
  return t.hf_tensors ? t.hf_tensors(c, prefix, lm_head) : shared_decoder_tensors(c, prefix, lm_head);
}

std::string gguf_tensor_name(const ModelConfig& c, Slot s, int layer) {
  const FamilyTraits t = family_traits(family_of(c));
  const std::string own = t.gguf_name ? t.gguf_name(s, layer) : std::string();
  return own.empty() ? gguf_tensor_name(s, layer) : own;
}

std::vector<DecoderTensor> gguf_decoder_tensors(const ModelConfig& c) {
  const FamilyTraits t = family_traits(family_of(c));
  return t.gguf_tensors ? t.gguf_tensors(c) : decoder_tensors(c);
}

std::string gguf_tensor_name(Slot s, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (s) {
    case Slot::TokEmb: return "token_embd.weight";
    case Slot::NormF: return "output_norm.weight";
    case Slot::LmHead: return "output.weight";
    case Slot::Norm1: return p + "attn_norm.weight";
    case Slot::Wq: return p + "attn_q.weight";
    case Slot::Wk: return p + "attn_k.weight";
    case Slot::Wv: return p + "attn_v.weight";
    case Slot::Bq: return p + "attn_q.bias";
    case Slot::Bk: return p + "attn_k.bias";
    case Slot::Bv: return p + "attn_v.bias";
    case Slot::Wqkv: return p + "attn_qkv.weight";
    case Slot::Wo: return p + "attn_output.weight";
    case Slot::Bo: return p + "attn_output.bias";
    case Slot::QNorm: return p + "attn_q_norm.weight";
    case Slot::KNorm: return p + "attn_k_norm.weight";
    case Slot::PostAttnNorm: return p + "post_attention_norm.weight";
    case Slot::Norm2: return p + "ffn_norm.weight";
    case Slot::Wfc: return p + "ffn_gate.weight";
    case Slot::Wup: return p + "ffn_up.weight";
    case Slot::WgateUp: return p + "ffn_up.weight";  // phi3: gate | up in one ffn_up
    case Slot::Wdown: return p + "ffn_down.weight";
    case Slot::PostMlpNorm: return p + "post_ffw_norm.weight";
    default: break;  // the hybrids' own tensors: gguf_tensor_name(config, …)
  }
  return "";
}

void read_gpt2_body(const ModelConfig& c, Gpt2Format format, const std::function<Vec(const std::string&, int)>& vec,
                    const std::function<Weight(const std::string&, int, int)>& mat, ModelWeights& w) {
  // The parts of a block in the order they are read, in each format's names.
  enum Part { Norm1, Norm1Bias, Qkv, QkvBias, Out, OutBias, Norm2, Norm2Bias, Up, UpBias, Down, DownBias, kParts };
  static const char* const kHf[kParts] = {
      "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
      "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  static const char* const kGguf[kParts] = {
      "attn_norm.weight", "attn_norm.bias", "attn_qkv.weight", "attn_qkv.bias", "attn_output.weight", "attn_output.bias",
      "ffn_norm.weight",  "ffn_norm.bias",  "ffn_up.weight",   "ffn_up.bias",   "ffn_down.weight",    "ffn_down.bias"};
  const bool hf = format == Gpt2Format::HuggingFace;
  const char* const* names = hf ? kHf : kGguf;
  const int C = c.n_embd, I = c.n_inner, C3 = checked_dim(3, C, "c_attn width");
  w.layers.clear();
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = (hf ? "h." : "blk.") + std::to_string(i) + ".";
    auto v = [&](Part part, int n) { return vec(p + names[part], n); };
    auto m = [&](Part part, int in, int o) { return mat(p + names[part], in, o); };
    LayerWeights l;
    l.norm1_w = v(Norm1, C);
    l.norm1_b = v(Norm1Bias, C);
    const Weight qkv = m(Qkv, C, C3);  // (C, 3C)
    const Vec qkv_b = v(QkvBias, C3);  // (3C)
    l.wq = qkv.columns(0, C);
    l.wk = qkv.columns(C, C);
    l.wv = qkv.columns(2 * C, C);
    l.bq = qkv_b.segment(0, C);
    l.bk = qkv_b.segment(C, C);
    l.bv = qkv_b.segment(2 * C, C);
    l.wo = m(Out, C, C);
    l.bo = v(OutBias, C);
    l.norm2_w = v(Norm2, C);
    l.norm2_b = v(Norm2Bias, C);
    l.w_fc = m(Up, C, I);
    l.b_fc = v(UpBias, I);
    l.w_down = m(Down, I, C);
    l.b_down = v(DownBias, C);
    w.layers.push_back(std::move(l));
  }
  const std::string final_norm = hf ? "ln_f." : "output_norm.";
  w.normf_w = vec(final_norm + "weight", C);
  w.normf_b = vec(final_norm + "bias", C);
}


}  // namespace attnviz
