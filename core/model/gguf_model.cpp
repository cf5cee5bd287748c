#include "core/model/gguf_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/gguf.h"

namespace attnviz {

namespace {

// (rows, cols) row-major → (cols, rows), copied in 64 × 64 tiles so that reads and writes
// both stay in cache (a plain strided copy of a 0.5B model's weights takes seconds).
Mat transposed(const float* src, int64_t rows, int64_t cols) {
  Mat w(cols, rows);
  constexpr int64_t B = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const int64_t r1 = std::min(r0 + B, rows), c1 = std::min(c0 + B, cols);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) w(c, r) = src[r * cols + c];
    }
  return w;
}

// Fetches tensors by llama.cpp name, checking shapes against the metadata.
class GgufTensors {
 public:
  // `warnings` gets one line per tensor holding NaN or infinite values (as for safetensors).
  GgufTensors(const GgufFile& f, std::vector<std::string>* warnings) : f_(f), warnings_(warnings) {}

  bool has(const std::string& name) const { return f_.find(name) != nullptr; }

  // `shape` in row-major order, e.g. (out, in) for a linear weight.
  std::vector<float> get(const std::string& name, std::vector<int64_t> shape) const {
    const GgufTensorInfo& t = info(name, std::move(shape));
    auto v = f_.read_f32(t);
    f_.release(t);
    check_finite(name, v.data(), static_cast<int64_t>(v.size()));
    return v;
  }
  // The tensor's info, after checking that it exists with exactly `shape`.
  const GgufTensorInfo& info(const std::string& name, std::vector<int64_t> shape) const {
    const GgufTensorInfo* t = f_.find(name);
    if (!t)
      throw Error("GGUF file '" + f_.path() + "': missing tensor '" + name + "' (expected shape " +
                  shape_str_of(shape) + ")\n  HINT: the file does not match its metadata, or uses names attnviz does not know.");
    if (t->shape() != shape)
      throw Error("GGUF file '" + f_.path() + "': tensor '" + name + "' has shape " + shape_str_of(t->shape()) +
                  ", expected " + shape_str_of(shape) + " from the metadata");
    return *t;
  }
  Mat mat(const std::string& name, int rows, int cols) const {  // stored (rows, cols), kept as is
    const GgufTensorInfo& t = info(name, {rows, cols});
    Mat w(rows, cols);
    dequantize(t.type, f_.data(t), t.numel, w.data());
    f_.release(t);
    check_finite(name, w.data(), w.size());
    return w;
  }
  Mat linear(const std::string& name, int out, int in) const {  // stored (out, in) → (in, out)
    const auto v = get(name, {out, in});
    return transposed(v.data(), out, in);
  }
  // A llama attn_q / attn_k weight: stored (heads·d, in) with the rows of every head in
  // llama.cpp's order; returns (in, heads·d) in Hugging Face's order. Within a head, HF row
  // half·d/2 + i (half 0 or 1, i < d/2) is stored at row 2i + half.
  Mat linear_unpermuted(const std::string& name, int heads, int d, int in) const {
    auto v = get(name, {static_cast<int64_t>(heads) * d, in});
    Mat w(in, heads * d);
    for (int h = 0; h < heads; ++h)
      for (int half = 0; half < 2; ++half)
        for (int i = 0; i < d / 2; ++i) {
          const int64_t hf = static_cast<int64_t>(h) * d + half * (d / 2) + i, stored = static_cast<int64_t>(h) * d + 2 * i + half;
          w.col(hf) = Eigen::Map<const Vec>(v.data() + stored * in, in).transpose();
        }
    return w;
  }
  Vec vec(const std::string& name, int n) const {
    auto v = get(name, {n});
    return Eigen::Map<Vec>(v.data(), n);
  }
  // A llama q/k bias, reordered like linear_unpermuted's rows.
  Vec vec_unpermuted(const std::string& name, int heads, int d) const {
    const Vec s = vec(name, heads * d);
    Vec v(heads * d);
    for (int h = 0; h < heads; ++h)
      for (int half = 0; half < 2; ++half)
        for (int i = 0; i < d / 2; ++i) v(h * d + half * (d / 2) + i) = s(h * d + 2 * i + half);
    return v;
  }

 private:
  void check_finite(const std::string& name, const float* v, int64_t n) const {
    if (warnings_) warn_if_not_finite(name, v, n, *warnings_);
  }
  const GgufFile& f_;
  std::vector<std::string>* warnings_;
};

// RoPE scaling as llama.cpp stores it: rope.scaling.type "linear" with rope.scaling.factor
// (every frequency divided by it), or a rope_freqs tensor of d/2 divisors, one per
// frequency (what converters write for Llama 3.1/3.2's "llama3" scaling). Other types
// (yarn, longrope) and both at once are refused.
void read_rope_scaling(const GgufFile& f, const std::string& a, const std::string& where, ModelConfig& c) {
  ModelConfig::RopeScaling& s = c.rope_scaling;
  const std::string type = f.find_key(a + "rope.scaling.type") ? f.get_string(a + "rope.scaling.type") : "none";
  if (type == "linear") {
    s.type = "linear";
    s.factor = static_cast<float>(f.get_float(a + "rope.scaling.factor", 0.0));
    if (!(s.factor >= 1.f) || !std::isfinite(s.factor))
      throw Error(where + "'" + a + "rope.scaling.factor' must be a number of at least 1 for linear RoPE scaling, found " +
                  std::to_string(s.factor));
  } else if (type != "none") {
    throw Error(where + "'" + a + "rope.scaling.type' \"" + excerpt(type) +
                "\" is not supported\n  HINT: attnviz reads \"linear\" and Llama 3's per-frequency factors (rope_freqs).");
  }
  const GgufTensorInfo* t = f.find("rope_freqs.weight");
  if (!t) return;
  if (!s.type.empty()) throw Error(where + "both linear RoPE scaling and a rope_freqs tensor: not supported together");
  const int half = c.head_size / 2;
  if (t->shape() != std::vector<int64_t>{half})
    throw Error(where + "tensor 'rope_freqs.weight' has shape " + shape_str_of(t->shape()) + ", expected (" +
                std::to_string(half) + ") (half the head size)");
  s.freq_factors = f.read_f32(*t);
  for (float x : s.freq_factors)
    if (!(x > 0.f) || !std::isfinite(x))
      throw Error(where + "tensor 'rope_freqs.weight' holds " + std::to_string(x) + "; RoPE factors must be positive numbers");
  s.type = "factors";
}

// A positive metadata integer that fits an int.
int positive(const GgufFile& f, const std::string& key, int64_t fallback = -1) {
  const int64_t v = fallback < 0 ? f.get_int(key) : f.get_int(key, fallback);
  if (v <= 0 || v > kMaxDim)
    throw Error("GGUF file '" + f.path() + "': metadata '" + key + "' = " + std::to_string(v) +
                " must be a positive integer up to " + std::to_string(kMaxDim));
  return static_cast<int>(v);
}

ModelConfig gguf_config(const GgufFile& f, const std::string& arch) {
  const std::string where = "GGUF file '" + f.path() + "': ";
  const std::string a = arch + ".";
  ModelConfig c;
  c.model_type = arch;
  c.arch = arch == "gpt2" ? Arch::Gpt2 : Arch::Llama;
  c.n_layer = positive(f, a + "block_count");
  c.n_embd = positive(f, a + "embedding_length");
  c.n_head = positive(f, a + "attention.head_count");
  c.n_kv_head = c.arch == Arch::Gpt2 ? c.n_head : positive(f, a + "attention.head_count_kv", c.n_head);
  c.n_inner = positive(f, a + "feed_forward_length");
  c.n_ctx = positive(f, a + "context_length");
  // The vocabulary: {arch}.vocab_size when given, else the token embedding's rows.
  if (f.find_key(a + "vocab_size")) {
    c.vocab_size = positive(f, a + "vocab_size");
  } else {
    const GgufTensorInfo* e = f.find("token_embd.weight");
    if (!e || e->ne.size() != 2 || e->ne[1] <= 0 || e->ne[1] > INT_MAX)
      throw Error(where + "missing tensor 'token_embd.weight' (V, C) that gives the vocabulary size");
    c.vocab_size = static_cast<int>(e->ne[1]);
  }
  if (c.arch == Arch::Gpt2) {
    c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_epsilon", 1e-5));
    if (c.n_embd % c.n_head != 0)
      throw Error(where + "'" + a + "embedding_length' " + std::to_string(c.n_embd) + " is not divisible by '" + a +
                  "attention.head_count' " + std::to_string(c.n_head));
    c.head_size = c.n_embd / c.n_head;
    c.tie_embeddings = !f.find("output.weight");
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    return c;
  }
  c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_theta = static_cast<float>(f.get_float(a + "rope.freq_base", 10000.0));
  if (!std::isfinite(c.rope_theta) || !(c.rope_theta > 0.f))
    throw Error(where + "'" + a + "rope.freq_base' must be a positive number, found " + std::to_string(c.rope_theta));
  if (f.find_key(a + "attention.key_length")) {
    c.head_size = positive(f, a + "attention.key_length");
  } else {
    if (c.n_embd % c.n_head != 0)
      throw Error(where + "'" + a + "embedding_length' " + std::to_string(c.n_embd) + " is not divisible by '" + a +
                  "attention.head_count' " + std::to_string(c.n_head));
    c.head_size = c.n_embd / c.n_head;
  }
  if (f.find_key(a + "attention.value_length") && positive(f, a + "attention.value_length") != c.head_size)
    throw Error(where + "'" + a + "attention.value_length' differs from the key length " +
                std::to_string(c.head_size) + "; attnviz needs one head size");
  if (f.find_key(a + "rope.dimension_count") && positive(f, a + "rope.dimension_count") != c.head_size)
    throw Error(where + "'" + a + "rope.dimension_count' " + std::to_string(f.get_int(a + "rope.dimension_count")) +
                " is not the head size " + std::to_string(c.head_size) + "; partial RoPE is not supported");
  if (c.head_size % 2 != 0) throw Error(where + "head size " + std::to_string(c.head_size) + " must be even for RoPE");
  read_rope_scaling(f, a, where, c);
  if (c.n_head % c.n_kv_head != 0)
    throw Error(where + "'" + a + "attention.head_count' " + std::to_string(c.n_head) + " is not a multiple of '" + a +
                "attention.head_count_kv' " + std::to_string(c.n_kv_head));
  c.tie_embeddings = !f.find("output.weight");
  c.qkv_bias = arch == "qwen2" || f.find("blk.0.attn_q.bias");
  c.o_bias = f.find("blk.0.attn_output.bias") != nullptr;
  if (f.find("blk.0.ffn_up.bias")) throw Error(where + "MLP biases ('blk.0.ffn_up.bias') are not supported yet");
  return c;
}

void load_gpt2(const ModelConfig& c, const GgufTensors& s, ModelWeights& w) {
  const int C = c.n_embd, I = c.n_inner;
  w.tok_emb = s.mat("token_embd.weight", c.vocab_size, C);
  w.pos_emb = s.mat("position_embd.weight", c.n_ctx, C);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.norm1_w = s.vec(p + "attn_norm.weight", C);
    l.norm1_b = s.vec(p + "attn_norm.bias", C);
    split_packed_qkv(s.linear(p + "attn_qkv.weight", 3 * C, C), s.vec(p + "attn_qkv.bias", 3 * C), l);
    l.wo = s.linear(p + "attn_output.weight", C, C);
    l.bo = s.vec(p + "attn_output.bias", C);
    l.norm2_w = s.vec(p + "ffn_norm.weight", C);
    l.norm2_b = s.vec(p + "ffn_norm.bias", C);
    l.w_fc = s.linear(p + "ffn_up.weight", I, C);
    l.b_fc = s.vec(p + "ffn_up.bias", I);
    l.w_down = s.linear(p + "ffn_down.weight", C, I);
    l.b_down = s.vec(p + "ffn_down.bias", C);
    w.layers.push_back(std::move(l));
  }
  w.normf_w = s.vec("output_norm.weight", C);
  w.normf_b = s.vec("output_norm.bias", C);
  if (!c.tie_embeddings) w.lm_head = s.mat("output.weight", c.vocab_size, C);
}

void load_llama(const ModelConfig& c, const GgufTensors& s, ModelWeights& w) {
  const int C = c.n_embd, I = c.n_inner, d = c.head_size, H = c.n_head, KV = c.n_kv_head;
  // llama.cpp's converter reorders Q/K rows for llama only; qwen2 keeps HF's order.
  const bool permuted = c.model_type == "llama";
  w.tok_emb = s.mat("token_embd.weight", c.vocab_size, C);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.norm1_w = s.vec(p + "attn_norm.weight", C);
    if (permuted) {
      l.wq = s.linear_unpermuted(p + "attn_q.weight", H, d, C);
      l.wk = s.linear_unpermuted(p + "attn_k.weight", KV, d, C);
    } else {
      l.wq = s.linear(p + "attn_q.weight", H * d, C);
      l.wk = s.linear(p + "attn_k.weight", KV * d, C);
    }
    l.wv = s.linear(p + "attn_v.weight", KV * d, C);
    if (c.qkv_bias) {
      l.bq = permuted ? s.vec_unpermuted(p + "attn_q.bias", H, d) : s.vec(p + "attn_q.bias", H * d);
      l.bk = permuted ? s.vec_unpermuted(p + "attn_k.bias", KV, d) : s.vec(p + "attn_k.bias", KV * d);
      l.bv = s.vec(p + "attn_v.bias", KV * d);
    }
    l.wo = s.linear(p + "attn_output.weight", C, H * d);
    if (c.o_bias) l.bo = s.vec(p + "attn_output.bias", C);
    l.norm2_w = s.vec(p + "ffn_norm.weight", C);
    l.w_fc = s.linear(p + "ffn_gate.weight", I, C);
    l.w_up = s.linear(p + "ffn_up.weight", I, C);
    l.w_down = s.linear(p + "ffn_down.weight", C, I);
    w.layers.push_back(std::move(l));
  }
  w.normf_w = s.vec("output_norm.weight", C);
  if (!c.tie_embeddings) w.lm_head = s.mat("output.weight", c.vocab_size, C);
}

}  // namespace

void load_gguf_model(const GgufFile& f, Model& m) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "gpt2")
    throw Error("GGUF file '" + f.path() + "': unknown architecture '" + arch +
                "' (metadata 'general.architecture')\n  HINT: attnviz reads GGUF models of architecture llama, qwen2 "
                "and gpt2.");
  m.config = gguf_config(f, arch);
  if (!std::isfinite(m.config.norm_eps) || !(m.config.norm_eps > 0.f))
    throw Error("GGUF file '" + f.path() + "': the norm epsilon must be a positive number, found " +
                std::to_string(m.config.norm_eps));
  // The weights are held as float32: refuse before converting when they cannot fit.
  check_memory(4.0 * static_cast<double>(parameter_counts(m.config).total()), "the model in '" + excerpt(f.path(), kPathExcerptBytes) + "'",
               "use a smaller model, or free memory.");
  const GgufTensors s(f, &m.warnings);
  if (m.config.arch == Arch::Gpt2) load_gpt2(m.config, s, m.weights);
  else load_llama(m.config, s, m.weights);
  m.format = "gguf";
  std::map<std::string, int> counts;
  for (const auto& t : f.tensors()) ++counts[ggml_type_info(t.type).name];
  m.set_stored_types(counts);
  m.gguf_tokenizer = read_gguf_tokenizer(f);
  if (m.gguf_tokenizer && static_cast<int64_t>(m.gguf_tokenizer->tokens.size()) > m.config.vocab_size)
    throw Error("GGUF file '" + f.path() + "': 'tokenizer.ggml.tokens' has " +
                std::to_string(m.gguf_tokenizer->tokens.size()) + " tokens but the model's vocabulary is " +
                std::to_string(m.config.vocab_size));
  if (m.gguf_tokenizer) {
    m.no_tokenizer_reason = gguf_tokenizer_unsupported(*m.gguf_tokenizer);
    if (m.no_tokenizer_reason.empty()) m.tokenizer = make_gguf_tokenizer(*m.gguf_tokenizer, "GGUF file '" + f.path() + "'");
    else m.warnings.push_back("the file's tokenizer is not used: " + m.no_tokenizer_reason);
  }
}

}  // namespace attnviz
