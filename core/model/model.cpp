#include "core/model/model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/gguf.h"
#include "core/model/gguf_model.h"
#include "core/model/paths.h"
#include "core/model/safetensors.h"

namespace attnviz {

void warn_if_not_finite(const std::string& name, const float* v, int64_t n, std::vector<std::string>& warnings) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(v[i]);
  if (bad)
    warnings.push_back("tensor '" + excerpt(name) + "' holds " + std::to_string(bad) + " NaN or infinite value" +
                       (bad == 1 ? "" : "s") + " (of " + std::to_string(n) + "); its outputs will be NaN");
}

std::vector<WeightSpan> weight_spans(const ModelWeights& w, bool one_token_pass) {
  std::vector<WeightSpan> out;
  auto add = [&](const auto& m) {
    if (m.size()) out.push_back({m.data(), static_cast<long long>(m.size())});
  };
  if (!one_token_pass || !w.lm_head.size()) add(w.tok_emb);
  if (!one_token_pass) add(w.pos_emb);
  for (const auto& l : w.layers) {
    add(l.norm1_w), add(l.norm1_b), add(l.wq), add(l.wk), add(l.wv), add(l.bq), add(l.bk), add(l.bv);
    add(l.wo), add(l.bo), add(l.norm2_w), add(l.norm2_b), add(l.w_fc), add(l.b_fc), add(l.w_up);
    add(l.w_down), add(l.b_down), add(l.q_norm), add(l.k_norm), add(l.post_attn_norm), add(l.post_mlp_norm);
  }
  add(w.normf_w), add(w.normf_b), add(w.lm_head);
  return out;
}

long long Model::parameter_count() const {
  long long n = 0;
  for (const WeightSpan& s : weight_spans(weights)) n += s.size;
  return n;
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

namespace {

// Fetches tensors by Hugging Face name, checking shapes, and remembers which were used.
class TensorSource {
 public:
  TensorSource(const SafetensorsSet& f, std::string prefix, std::vector<std::string>* warnings = nullptr)
      : f_(f), prefix_(std::move(prefix)), warnings_(warnings) {}

  // Reads `name` (prefix added) with exactly `shape`, as float32, into out (numel floats).
  void get_into(const std::string& name, const std::vector<int64_t>& shape, float* out) {
    const std::string full = prefix_ + name;
    const TensorInfo* t = f_.find(full);
    if (!t)
      throw Error(f_.path() + ": missing tensor '" + full + "' (expected shape " + shape_str_of(shape) +
                  ")\n  HINT: the checkpoint does not match its config.json, or uses names attnviz does not know.");
    if (t->shape != shape)
      throw Error(f_.path() + ": tensor '" + full + "' has shape " + shape_str_of(t->shape) + ", expected " +
                  shape_str_of(shape) + " from config.json");
    used_.insert(full);
    f_.read_f32_into(*t, out);
    if (warnings_) warn_if_not_finite(full, out, t->numel(), *warnings_);
  }
  bool has(const std::string& name) const { return f_.find(prefix_ + name) != nullptr; }

  // Straight into the matrix: a model's weights are held once while loading, plus the
  // one tensor being read (and, for mat_t, its copy before the transpose).
  Mat mat(const std::string& name, int rows, int cols) {  // stored (rows, cols) as is
    Mat m(rows, cols);
    get_into(name, {rows, cols}, m.data());
    return m;
  }
  Mat mat_t(const std::string& name, int out, int in) {  // nn.Linear (out, in) → (in, out)
    return mat(name, out, in).transpose();
  }
  Vec vec(const std::string& name, int n) {
    Vec v(n);
    get_into(name, {n}, v.data());
    return v;
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& t : f_.tensors())
      if (!used_.count(t.name)) out.push_back(t.name);
    return out;
  }

 private:
  const SafetensorsSet& f_;
  std::string prefix_;
  std::vector<std::string>* warnings_;
  std::set<std::string> used_;
};

void load_gpt2(const ModelConfig& c, const SafetensorsSet& f, ModelWeights& w, std::vector<std::string>& warnings) {
  const std::string prefix = f.find("transformer.wte.weight") ? "transformer." : "";
  TensorSource s(f, prefix, &warnings);
  const int C = c.n_embd, I = c.n_inner, C3 = checked_dim(3, C, "c_attn width");
  w.tok_emb = s.mat("wte.weight", c.vocab_size, C);
  w.pos_emb = s.mat("wpe.weight", c.n_ctx, C);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    LayerWeights l;
    l.norm1_w = s.vec(p + "ln_1.weight", C);
    l.norm1_b = s.vec(p + "ln_1.bias", C);
    split_packed_qkv(s.mat(p + "attn.c_attn.weight", C, C3), s.vec(p + "attn.c_attn.bias", C3), l);
    l.wo = s.mat(p + "attn.c_proj.weight", C, C);
    l.bo = s.vec(p + "attn.c_proj.bias", C);
    l.norm2_w = s.vec(p + "ln_2.weight", C);
    l.norm2_b = s.vec(p + "ln_2.bias", C);
    l.w_fc = s.mat(p + "mlp.c_fc.weight", C, I);
    l.b_fc = s.vec(p + "mlp.c_fc.bias", I);
    l.w_down = s.mat(p + "mlp.c_proj.weight", I, C);
    l.b_down = s.vec(p + "mlp.c_proj.bias", C);
    w.layers.push_back(std::move(l));
  }
  w.normf_w = s.vec("ln_f.weight", C);
  w.normf_b = s.vec("ln_f.bias", C);
  // lm_head is tied to wte; a stored copy (some exports keep one) must match its shape.
  if (f.find("lm_head.weight")) {
    TensorSource root(f, "", &warnings);
    w.lm_head = root.mat("lm_head.weight", c.vocab_size, C);
  }
}

// The text model's place in a checkpoint: "model." or, in Gemma 3's multimodal files,
// "language_model.model." (older) or "model.language_model." (newer); and its unembedding.
void text_model_names(const SafetensorsSet& f, std::string& prefix, std::string& lm_head) {
  prefix = "model.";
  lm_head = "lm_head.weight";
  if (f.find("language_model.model.embed_tokens.weight")) {
    prefix = "language_model.model.";
    lm_head = "language_model.lm_head.weight";
  } else if (f.find("model.language_model.embed_tokens.weight")) {
    prefix = "model.language_model.";
  }
}

void load_decoder(const ModelConfig& c, const SafetensorsSet& f, ModelWeights& w, std::vector<std::string>& warnings) {
  TensorSource s(f, "", &warnings);
  const int C = c.n_embd, I = c.n_inner, Hd = checked_dim(c.n_head, c.head_size, "query width"),
            KVd = checked_dim(c.n_kv_head, c.head_size, "key/value width");
  std::string prefix, lm_head;
  text_model_names(f, prefix, lm_head);
  if (!c.tie_embeddings && !f.find(lm_head))
    throw Error(f.path() + ": missing tensor '" + lm_head + "' (expected shape " + shape_str({c.vocab_size, C}) +
                ") and tie_word_embeddings is false");
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (const DecoderTensor& t : decoder_tensors(c, prefix, lm_head)) {
    LayerWeights* l = t.layer >= 0 ? &w.layers[static_cast<size_t>(t.layer)] : nullptr;
    const int rows = static_cast<int>(t.shape[0]), cols = t.shape.size() > 1 ? static_cast<int>(t.shape[1]) : 0;
    Vec v;
    if (t.shape.size() == 1) v = s.vec(t.name, rows);
    if (slot_is_norm(t.slot) && c.norm_plus_one) v.array() += 1.f;  // Gemma: x·(1 + w)
    switch (t.slot) {
      case Slot::TokEmb: w.tok_emb = s.mat(t.name, rows, cols); break;
      case Slot::LmHead: w.lm_head = s.mat(t.name, rows, cols); break;
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
      case Slot::Wq: l->wq = s.mat_t(t.name, rows, cols); break;
      case Slot::Wk: l->wk = s.mat_t(t.name, rows, cols); break;
      case Slot::Wv: l->wv = s.mat_t(t.name, rows, cols); break;
      case Slot::Wo: l->wo = s.mat_t(t.name, rows, cols); break;
      case Slot::Wfc: l->w_fc = s.mat_t(t.name, rows, cols); break;
      case Slot::Wup: l->w_up = s.mat_t(t.name, rows, cols); break;
      case Slot::Wdown: l->w_down = s.mat_t(t.name, rows, cols); break;
      case Slot::Wqkv: {  // (Hd + 2·KVd, C): q rows, then k, then v
        const Mat m = s.mat_t(t.name, rows, cols);  // (C, Hd + 2·KVd)
        l->wq = m.leftCols(Hd), l->wk = m.middleCols(Hd, KVd), l->wv = m.rightCols(KVd);
        break;
      }
      case Slot::WgateUp: {  // (2·I, C): gate rows, then up
        const Mat m = s.mat_t(t.name, rows, cols);  // (C, 2·I)
        l->w_fc = m.leftCols(I), l->w_up = m.rightCols(I);
        break;
      }
    }
  }
  const std::vector<std::string> unused = s.unused();
  size_t vision = 0;
  for (const std::string& n : unused) vision += n.rfind(prefix, 0) != 0 && n != lm_head;
  if (vision && prefix != "model.")
    warnings.push_back(std::to_string(vision) + " tensors outside the text model (the vision tower) are not used");
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool slot_is_norm(Slot s) {
  return s == Slot::NormF || s == Slot::Norm1 || s == Slot::Norm2 || s == Slot::QNorm || s == Slot::KNorm ||
         s == Slot::PostAttnNorm || s == Slot::PostMlpNorm;
}

std::vector<DecoderTensor> decoder_tensors(const ModelConfig& c, const std::string& prefix, const std::string& lm_head) {
  const int64_t C = c.n_embd, I = c.n_inner, d = c.head_size, Hd = c.n_head * d, KVd = c.n_kv_head * d;
  std::vector<DecoderTensor> out;
  out.push_back({prefix + "embed_tokens.weight", {c.vocab_size, C}, -1, Slot::TokEmb});
  const bool gemma = c.norm_place == NormPlace::Sandwich;
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    auto add = [&](const std::string& name, std::vector<int64_t> shape, Slot slot) { out.push_back({p + name, std::move(shape), i, slot}); };
    if (c.norm_place != NormPlace::Post) add("input_layernorm.weight", {C}, Slot::Norm1);
    if (c.fused_qkv) {
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
  }
  return "";
}

void split_packed_qkv(const Mat& qkv, const Vec& qkv_b, LayerWeights& l) {
  const Eigen::Index C = qkv.rows();
  l.wq = qkv.middleCols(0, C);
  l.wk = qkv.middleCols(C, C);
  l.wv = qkv.middleCols(2 * C, C);
  l.bq = qkv_b.segment(0, C);
  l.bk = qkv_b.segment(C, C);
  l.bv = qkv_b.segment(2 * C, C);
}

std::shared_ptr<const Model> load_model(const std::string& spec) {
  auto m = std::make_shared<Model>();
  m->name = spec;
  m->dir = resolve_model_dir(spec);
  if (!is_dir(m->dir) && looks_like_gguf(m->dir)) {
    load_gguf_model(GgufFile::open(m->dir), *m);
    return m;
  }
  if (!is_dir(m->dir))
    throw Error("model directory '" + m->dir + "' does not exist\n  HINT: pass a folder holding config.json and "
                "model.safetensors, a FILE.gguf, or builtin:NAME (attnviz-cli info --list shows them).");
  const std::string cfg_path = m->dir + "/config.json";
  struct stat st {};
  if (stat(cfg_path.c_str(), &st) != 0)
    throw Error("'" + excerpt(cfg_path, kPathExcerptBytes) + "' not found\n  HINT: a model directory needs config.json and model.safetensors.");
  // Read without blocking (a FIFO is refused), bounded, and with no NUL: the JSON parser
  // would stop at a NUL and silently accept whatever follows it.
  const std::string text = read_regular_file(cfg_path, kMaxJsonBytes, "config.json", false);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error(excerpt(cfg_path, kPathExcerptBytes) + ": not valid JSON: " + excerpt(e.what(), 200));
  }
  m->config = parse_config(j, cfg_path);
  // The weights are held as float32: refuse before allocating when they cannot fit.
  check_memory(4.0 * static_cast<double>(parameter_counts(m->config).total()), "the model in '" + excerpt(m->dir, kPathExcerptBytes) + "'",
               "use a smaller model, or free memory.");
  const auto f = SafetensorsSet::open_dir(m->dir);  // model.safetensors, or the shards of its index
  std::map<std::string, int> types;
  for (const auto& t : f.tensors()) ++types[dtype_name(t.dtype)];
  m->set_stored_types(types);
  if (m->config.arch == Arch::Gpt2) load_gpt2(m->config, f, m->weights, m->warnings);
  else load_decoder(m->config, f, m->weights, m->warnings);
  m->tokenizer = load_tokenizer(m->dir);
  if (m->tokenizer) check_tokenizer_fits(*m->tokenizer, m->config.vocab_size, tokenizer_file_in(m->dir));
  return m;
}

}  // namespace attnviz
