#include "core/model/gguf_model.h"
#include "core/model/gguf_families.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/families/family.h"
#include "core/model/gguf.h"

namespace attnviz {

int gguf_vocab_size(const GgufFile& f, const std::string& arch) {
  if (f.find_key(arch + ".vocab_size")) return gguf_positive(f, arch + ".vocab_size");
  const GgufTensorInfo* e = f.find("token_embd.weight");
  if (!e || e->ne.size() != 2 || e->ne[1] <= 0 || e->ne[1] > INT_MAX)
    throw Error("GGUF file '" + f.path() + "': missing tensor 'token_embd.weight' (V, C) that gives the vocabulary size");
  return static_cast<int>(e->ne[1]);
}

int gguf_positive(const GgufFile& f, const std::string& key, int64_t fallback) {
  if (fallback < 0 || f.find_key(key)) return f.get_int_in(key, 1, kMaxDim);
  return checked_int(fallback, 1, kMaxDim, "GGUF file '" + f.path() + "': metadata '" + key + "' (its default)");
}

float gguf_positive_float(const GgufFile& f, const std::string& key, float fallback, const char* what) {
  if (!f.find_key(key)) return fallback;
  const double v = f.get_float(key, fallback);
  if (!(v > 0.0) || !std::isfinite(v) || v > 3.4e38)
    throw Error("GGUF file '" + f.path() + "': metadata '" + key + "' = " + std::to_string(v) + " must be " + what);
  return static_cast<float>(v);
}

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
  // In WeightsMode::Stored, matrices stay in the file's mapping (stored(), table(), linear_w()).
  // `progress` (LoadOptions::progress; may be empty) hears of each tensor read.
  GgufTensors(const GgufFile& f, std::vector<std::string>* warnings, WeightsMode mode,
              std::function<void(uint64_t, uint64_t)> progress = {})
      : f_(f), warnings_(warnings), mode_(mode), progress_(std::move(progress)) {
    if (progress_)
      for (const auto& t : f_.tensors()) total_ += t.nbytes;
  }

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
    if (progress_) {  // every read goes through here once per tensor
      done_ += t->nbytes;
      progress_(std::min(done_, total_), total_);
    }
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
  // The matrix stored (rows, cols), used where it lies. A block whose scale is NaN or
  // infinite is an Error naming the tensor (a float tensor's non-finite values: a warning).
  Weight stored(const std::string& name, int rows, int cols) const {
    return stored_rows_of(info(name, {rows, cols}), name, rows, cols);
  }
  // The tensor t (already checked) as `rows` stored rows of `cols` values.
  Weight stored_rows_of(const GgufTensorInfo& t, const std::string& name, int64_t rows, int64_t cols) const {
    const std::string where = "GGUF file '" + f_.path() + "': tensor '" + name + "'";
    Weight w;
    w.stored = StoredRows{t.type, f_.data(t), rows, cols, stored_row_bytes(t.type, cols, where), f_.mapping(),
                          f_.path() + ": " + name};
    int64_t first = -1;
    const int64_t bad = count_non_finite(w.stored, &first);
    if (bad && ggml_type_info(t.type).block_elems > 1)
      throw Error(where + " has " + std::to_string(bad) + " block" + (bad == 1 ? "" : "s") + " of " +
                  ggml_type_info(t.type).name + " with a NaN or infinite scale (the first: block " +
                  std::to_string(first) + ")\n  HINT: the file is damaged; download or convert it again.");
    if (bad && warnings_)
      warnings_->push_back("tensor '" + excerpt(name) + "' holds " + std::to_string(bad) + " NaN or infinite value" +
                           (bad == 1 ? "" : "s") + " (of " + std::to_string(t.numel) + "); its outputs will be NaN");
    return w;
  }
  // An embedding table or unembedding (V, C): stored, or as float32.
  Weight table(const std::string& name, int rows, int cols) const {
    return mode_ == WeightsMode::Stored ? stored(name, rows, cols) : Weight(mat(name, rows, cols));
  }
  // A linear weight stored (out, in): kept so, or as float32 (in, out).
  Weight linear_w(const std::string& name, int out, int in) const {
    return mode_ == WeightsMode::Stored ? stored(name, out, in) : Weight(linear(name, out, in));
  }
  // A llama attn_q / attn_k weight: kept in llama.cpp's row order with the map back to
  // Hugging Face's (see linear_unpermuted), or as float32 in Hugging Face's order.
  Weight linear_unpermuted_w(const std::string& name, int heads, int d, int in) const {
    if (mode_ != WeightsMode::Stored) return linear_unpermuted(name, heads, d, in);
    Weight w = stored(name, heads * d, in);
    auto rows = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(heads) * d);
    for (int h = 0; h < heads; ++h)
      for (int half = 0; half < 2; ++half)
        for (int i = 0; i < d / 2; ++i) (*rows)[static_cast<size_t>(h * d + half * (d / 2) + i)] = h * d + 2 * i + half;
    w.row_of_col = std::move(rows);
    return w;
  }
  // E matrices stacked (E, out, in), as GGUF holds a layer's experts: one Weight (in, out)
  // per expert, kept in the file's rows (each expert's out rows) or decoded to float32.
  std::vector<Weight> stacked_w(const std::string& name, int E, int out, int in) const {
    std::vector<Weight> ws(static_cast<size_t>(E));
    if (mode_ != WeightsMode::Stored) {
      const auto v = get(name, {E, out, in});
      for (int e = 0; e < E; ++e) ws[static_cast<size_t>(e)] = Weight(transposed(v.data() + static_cast<int64_t>(e) * out * in, out, in));
      return ws;
    }
    const GgufTensorInfo& t = info(name, {E, out, in});
    const Weight all = stored_rows_of(t, name, static_cast<int64_t>(E) * out, in);
    for (int e = 0; e < E; ++e) ws[static_cast<size_t>(e)].stored = all.stored.slice(static_cast<int64_t>(e) * out, out);
    return ws;
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
  WeightsMode mode_;
  std::function<void(uint64_t, uint64_t)> progress_;
  uint64_t total_ = 0;         // bytes of the file's tensors
  mutable uint64_t done_ = 0;  // of those started
};


// A factor tensor of RoPE scaling (rope_freqs, rope_factors_long/short): (rot/2) positive numbers.
std::vector<float> rope_factor_tensor(const GgufFile& f, const GgufTensorInfo& t, int rot, const std::string& where) {
  const int half = rot / 2;
  if (t.shape() != std::vector<int64_t>{half})
    throw Error(where + "tensor '" + t.name + "' has shape " + shape_str_of(t.shape()) + ", expected (" +
                std::to_string(half) + ") (half the rotary dims, one factor per frequency)");
  std::vector<float> v = f.read_f32(t);
  for (float x : v)
    if (!(x > 0.f) || !std::isfinite(x))
      throw Error(where + "tensor '" + t.name + "' holds " + std::to_string(x) + "; RoPE factors must be positive numbers");
  return v;
}

// RoPE scaling as llama.cpp stores it: rope.scaling.type "linear" with rope.scaling.factor
// (every frequency divided by it); a rope_freqs tensor of rot/2 divisors, one per frequency
// (what converters write for Llama 3.1/3.2's "llama3" scaling); or Phi-3's longrope as the
// tensors rope_factors_short / rope_factors_long with rope.scaling.attn_factor and
// rope.scaling.original_context_length; or "yarn" with rope.scaling.factor,
// original_context_length, yarn_beta_fast/slow, yarn_log_multiplier and attn_factor (a
// further multiplier of the attention factor, as llama.cpp applies it).
// Other types and two at once are refused.
void read_rope_scaling(const GgufFile& f, const std::string& a, const std::string& where, ModelConfig& c) {
  ModelConfig::RopeScaling& s = c.rope_scaling;
  const int rot = c.rotary();
  const std::string type = f.find_key(a + "rope.scaling.type") ? f.get_string(a + "rope.scaling.type") : "none";
  const GgufTensorInfo* lng = f.find("rope_factors_long.weight");
  const GgufTensorInfo* sht = f.find("rope_factors_short.weight");
  if (type == "linear") {
    s.type = "linear";
    s.factor = static_cast<float>(f.get_float(a + "rope.scaling.factor", 0.0));
    if (!(s.factor >= 1.f) || !std::isfinite(s.factor))
      throw Error(where + "'" + a + "rope.scaling.factor' must be a number of at least 1 for linear RoPE scaling, found " +
                  std::to_string(s.factor));
  } else if (type == "yarn") {  // llama.cpp's keys for what Hugging Face's rope_parameters hold
    s.type = "yarn";
    s.factor = gguf_positive_float(f, a + "rope.scaling.factor", 0.f, "a YaRN factor of at least 1");
    if (!(s.factor >= 1.f))
      throw Error(where + "'" + a + "rope.scaling.factor' must be a number of at least 1 for YaRN, found " +
                  std::to_string(s.factor));
    s.original_max_position = gguf_positive(f, a + "rope.scaling.original_context_length");
    s.beta_fast = gguf_positive_float(f, a + "rope.scaling.yarn_beta_fast", 32.f);
    s.beta_slow = gguf_positive_float(f, a + "rope.scaling.yarn_beta_slow", 1.f);
    // The attention factor as llama.cpp makes it: mscale(factor, 1) / mscale(factor, log_mul)
    // with yarn_log_multiplier (Hugging Face's mscale_all_dim, mscale taken as 1), else
    // mscale(factor, 1) = 0.1·ln(factor) + 1; times rope.scaling.attn_factor (default 1).
    const auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    const double log_mul = f.get_float(a + "rope.scaling.yarn_log_multiplier", 0.0);
    const double af = log_mul != 0 ? mscale_of(s.factor, 1.0) / mscale_of(s.factor, log_mul) : mscale_of(s.factor, 1.0);
    s.mscale = static_cast<float>(af * gguf_positive_float(f, a + "rope.scaling.attn_factor", 1.f));
    // llama.cpp always rounds the correction dims outward; a file says nothing else.
    s.truncate = true;
  } else if (type != "none" && type != "longrope" && type != "su") {
    throw Error(where + "'" + a + "rope.scaling.type' \"" + excerpt(type) +
                "\" is not supported\n  HINT: attnviz reads \"linear\", \"yarn\", Llama 3's per-frequency factors (rope_freqs) "
                "and Phi-3's longrope (rope_factors_short/long).");
  }
  if (lng || sht) {
    if (!s.type.empty()) throw Error(where + "both linear RoPE scaling and longrope factors: not supported together");
    if (!lng || !sht)
      throw Error(where + "tensor '" + std::string(lng ? "rope_factors_short.weight" : "rope_factors_long.weight") +
                  "' is missing; longrope needs both factor lists");
    s.type = "longrope";
    s.freq_factors = rope_factor_tensor(f, *sht, rot, where);
    s.long_factor = rope_factor_tensor(f, *lng, rot, where);
    const std::string ok = a + "rope.scaling.original_context_length";
    s.original_max_position = f.find_key(ok) ? gguf_positive(f, ok) : c.n_ctx;
    s.factor = std::max(1.f, static_cast<float>(c.n_ctx) / static_cast<float>(s.original_max_position));
    const double orig = s.original_max_position;
    const double af = s.factor > 1.f ? std::sqrt(1.0 + std::log(static_cast<double>(s.factor)) / std::log(orig)) : 1.0;
    s.mscale = static_cast<float>(f.get_float(a + "rope.scaling.attn_factor", af));
    if (!(s.mscale > 0.f) || !std::isfinite(s.mscale))
      throw Error(where + "'" + a + "rope.scaling.attn_factor' must be a positive number, found " + std::to_string(s.mscale));
  } else if (type == "longrope" || type == "su") {
    throw Error(where + "'" + a + "rope.scaling.type' is \"" + type +
                "\" but the tensors 'rope_factors_short.weight' and 'rope_factors_long.weight' are missing");
  }
  const GgufTensorInfo* t = f.find("rope_freqs.weight");
  if (!t) return;
  if (!s.type.empty()) throw Error(where + "both " + s.type + " RoPE scaling and a rope_freqs tensor: not supported together");
  s.freq_factors = rope_factor_tensor(f, *t, rot, where);
  s.type = "factors";
}

// A positive finite float key, or `fallback` when absent.

// A per-layer metadata value: an array of L entries (bools or 0/1), or an integer that
// `from_int(l, v)` turns into layer l's flag.
template <class F>
std::vector<bool> per_layer_flags(const GgufFile& f, const std::string& key, int L, F from_int) {
  const GgufValue* v = f.find_key(key);
  std::vector<bool> out(static_cast<size_t>(L));
  const std::string where = "GGUF file '" + f.path() + "': metadata '" + key + "'";
  if (v->type == GgufValueType::ARRAY) {
    if (!v->strings.empty() || !v->floats.empty() || v->array_size() != static_cast<size_t>(L))
      throw Error(where + " must list " + std::to_string(L) + " entries of 0 or 1 (one per layer, block_count), found " +
                  std::to_string(v->array_size()) + (v->ints.empty() && v->array_size() ? " non-integers" : ""));
    for (int l = 0; l < L; ++l) {
      const int64_t e = v->ints[static_cast<size_t>(l)];
      if (e != 0 && e != 1) throw Error(where + "[" + std::to_string(l) + "] is " + std::to_string(e) + "; 0 or 1 expected");
      out[static_cast<size_t>(l)] = e == 1;
    }
    return out;
  }
  if (!v->is_int()) throw Error(where + " must be an integer or a per-layer array");
  for (int l = 0; l < L; ++l) out[static_cast<size_t>(l)] = from_int(l, v->i);
  return out;
}

// The llama-style architectures (and gpt2): the metadata llama.cpp's graphs read, with the
// family's traits (FamilyTraits: which keys it has, which rule its local layers follow).
ModelConfig gguf_config(const GgufFile& f, const std::string& arch, const FamilyInfo& family) {
  const std::string where = "GGUF file '" + f.path() + "': ";
  const std::string a = arch + ".";
  const FamilyTraits t = family_traits(family.family);
  ModelConfig c;
  // qwen3vl: Qwen3-VL's text model, Qwen3 with multi-axis RoPE (plain RoPE for text: see
  // families/qwen3_vl.cpp); its rope.dimension_sections are not needed.
  c.model_type = family.model_type;
  c.arch = t.gpt2 ? Arch::Gpt2 : Arch::Llama;
  c.n_layer = checked_layers(gguf_positive(f, a + "block_count"), where + "metadata '" + a + "block_count'");
  c.n_embd = gguf_positive(f, a + "embedding_length");
  c.n_head = gguf_positive(f, a + "attention.head_count");
  c.n_kv_head = c.arch == Arch::Gpt2 ? c.n_head : gguf_positive(f, a + "attention.head_count_kv", c.n_head);
  c.n_inner = gguf_positive(f, a + "feed_forward_length");
  c.n_ctx = gguf_positive(f, a + "context_length");
  c.vocab_size = gguf_vocab_size(f, arch);
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
  const bool gemma = t.gemma;
  const int L = c.n_layer;
  c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_theta = static_cast<float>(f.get_float(a + "rope.freq_base", 10000.0));
  if (!std::isfinite(c.rope_theta) || !(c.rope_theta > 0.f))
    throw Error(where + "'" + a + "rope.freq_base' must be a positive number, found " + std::to_string(c.rope_theta));
  if (f.find_key(a + "attention.key_length")) {
    c.head_size = gguf_positive(f, a + "attention.key_length");
  } else {
    if (c.n_embd % c.n_head != 0)
      throw Error(where + "'" + a + "embedding_length' " + std::to_string(c.n_embd) + " is not divisible by '" + a +
                  "attention.head_count' " + std::to_string(c.n_head));
    c.head_size = c.n_embd / c.n_head;
  }
  if (f.find_key(a + "attention.value_length") && gguf_positive(f, a + "attention.value_length") != c.head_size)
    throw Error(where + "'" + a + "attention.value_length' differs from the key length " +
                std::to_string(c.head_size) + "; attnviz needs one head size");
  if (c.head_size % 2 != 0) throw Error(where + "head size " + std::to_string(c.head_size) + " must be even for RoPE");
  // Partial RoPE (Phi-3/4-mini): rope.dimension_count < head size turns only the first dims.
  if (f.find_key(a + "rope.dimension_count")) {
    const int rot = gguf_positive(f, a + "rope.dimension_count");
    if (rot > c.head_size || rot % 2 != 0)
      throw Error(where + "'" + a + "rope.dimension_count' " + std::to_string(rot) +
                  " must be even and at most the head size " + std::to_string(c.head_size));
    // Fewer rotated dims than the head size is modelled for phi3 alone: its Hugging Face
    // twin (partial_rotary_factor) and llama.cpp both turn the pairs (i, i + rot/2) of the
    // first rot dims. For the other architectures no Hugging Face model has partial RoPE
    // to check against, and where llama.cpp's converter reorders q/k rows (llama, mistral,
    // granite, smollm3) llama.cpp turns other dims (the pairs (i, i + d/2)) than attnviz
    // would: refused instead of read wrong.
    if (rot < c.head_size && !t.partial_rope)
      throw Error(where + "'" + a + "rope.dimension_count' " + std::to_string(rot) + " is less than the head size " +
                  std::to_string(c.head_size) + ": partial RoPE is read for phi3 files only" +
                  "\n  HINT: a " + arch + " model rotates every dimension of a head; this file's metadata "
                  "does not match its architecture. Re-convert it with llama.cpp's converter.");
    c.rotary_dim = rot == c.head_size ? 0 : rot;
  }
  if (c.n_head % c.n_kv_head != 0)
    throw Error(where + "'" + a + "attention.head_count' " + std::to_string(c.n_head) + " is not a multiple of '" + a +
                "attention.head_count_kv' " + std::to_string(c.n_kv_head));
  checked_dim(c.n_head, c.head_size, where + "query width head_count x key_length");
  read_rope_scaling(f, a, where, c);
  if (t.gguf_read_traits) t.gguf_read_traits(f, c);  // the family's own keys (families/)
  c.tie_embeddings = !f.find("output.weight");
  c.qkv_bias = t.qkv_bias || f.find("blk.0.attn_q.bias");
  c.o_bias = f.find("blk.0.attn_output.bias") != nullptr;
  if (f.find("blk.0.ffn_up.bias")) throw Error(where + "MLP biases ('blk.0.ffn_up.bias') are not supported yet");

  // Family traits, as llama.cpp's graph for each architecture applies them.
  c.qk_norm = t.qk_norm;
  c.norm_place = t.norm_place;
  if (gemma) {
    c.norm_place = NormPlace::Sandwich;
    c.mlp = MlpKind::GeGLU;
    c.norm_plus_one = true;  // the converter stored 1 + w: held as is
    c.emb_scale = static_cast<float>(std::sqrt(static_cast<double>(c.n_embd)));  // implied by the architecture
  }
  if (t.partial_rope) c.fused_qkv = f.find("blk.0.attn_qkv.weight") != nullptr;
  if (t.multipliers) {
    c.emb_scale = gguf_positive_float(f, a + "embedding_scale", 1.f);
    c.residual_scale = gguf_positive_float(f, a + "residual_scale", 1.f);
    c.logit_scale = 1.f / gguf_positive_float(f, a + "logit_scale", 1.f);  // llama.cpp divides the logits by it
  }
  const char* cap = "a positive number (the soft-cap c in c*tanh(x/c))";
  c.final_softcap = gemma ? gguf_positive_float(f, a + "final_logit_softcapping", 0.f, cap) : 0.f;
  const float attn_softcap = t.gguf_attn_softcap ? gguf_positive_float(f, a + "attn_logit_softcapping", 0.f, cap) : 0.f;
  // The score scale: attention.scale where written (granite's attention_multiplier); else
  // 1/sqrt(d), except the 27B Gemmas, where llama.cpp (like their query_pre_attn_scalar)
  // takes n_embd / n_head.
  float scale = 1.f / std::sqrt(static_cast<float>(c.head_size));
  if (L == t.gguf_wide_scale_layers) scale = 1.f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  scale = gguf_positive_float(f, a + "attention.scale", scale);

  // Local layers: attention.sliding_window W, on the layers attention.sliding_window_pattern
  // names (an integer period p: layer l is local unless (l + 1) % p == 0, 0 = all; or one
  // bool per layer), else by the family's rule: Gemma 2 every other layer, Gemma 3 five of
  // six, the others (Mistral, Phi-3, Qwen) every layer, as their Hugging Face configs say.
  int window = 0;
  std::vector<bool> local(static_cast<size_t>(L), false);
  const std::string wk = a + "attention.sliding_window", pk = a + "attention.sliding_window_pattern";
  if (f.find_key(wk)) {
    const int64_t w = f.get_int(wk);
    if (w <= 0)
      throw Error(where + "metadata '" + wk + "' = " + std::to_string(w) + " must be a positive number of keys");
    window = static_cast<int>(std::min<int64_t>(w, kMaxDim));
    const int period = t.gguf_local_period;
    for (int l = 0; l < L; ++l) local[static_cast<size_t>(l)] = period == 0 || (l + 1) % period != 0;
    if (f.find_key(pk))
      local = per_layer_flags(f, pk, L, [&](int l, int64_t p) {
        if (p < 0)
          throw Error(where + "metadata '" + pk + "' = " + std::to_string(p) +
                      " must be a period of 0 (every layer local) or more");
        return p == 0 || (l + 1) % p != 0;
      });
  } else if (gemma) {
    throw Error(where + "missing metadata '" + wk + "' (Gemma's local layers need their window)");
  } else if (f.find_key(pk)) {
    throw Error(where + "metadata '" + pk + "' without '" + wk + "'");
  }
  // Gemma 3's local layers turn with rope.freq_base_swa (10000 by default) and no scaling.
  const float local_theta = t.per_type_rope ? gguf_positive_float(f, a + "rope.freq_base_swa", 10000.f) : c.rope_theta;

  // Layers without RoPE: SmolLM3's every 4th (fixed in llama.cpp), or attnviz's
  // smollm3.no_rope_layers (1 = RoPE, as Hugging Face's no_rope_layers).
  std::vector<bool> rope(static_cast<size_t>(L), true);
  if (t.no_rope_layers) {
    for (int l = 0; l < L; ++l) rope[static_cast<size_t>(l)] = (l + 1) % 4 != 0;
    if (f.find_key(a + "no_rope_layers"))
      rope = per_layer_flags(f, a + "no_rope_layers", L, [&](int, int64_t) -> bool {
        throw Error(where + "metadata '" + a + "no_rope_layers' must be a per-layer array");
      });
  }
  set_layer_specs(c, local, window, rope, local_theta, t.per_type_rope ? RopeScaling{} : c.rope_scaling, scale,
                  attn_softcap, t.per_type_rope);
  return c;
}

void load_gpt2(const ModelConfig& c, const GgufTensors& s, ModelWeights& w) {
  w.tok_emb = s.table("token_embd.weight", c.vocab_size, c.n_embd);
  w.pos_emb = s.mat("position_embd.weight", c.n_ctx, c.n_embd);
  read_gpt2_body(
      c, Gpt2Format::Gguf, [&](const std::string& n, int k) { return s.vec(n, k); },
      [&](const std::string& n, int in, int out) { return s.linear_w(n, out, in); }, w);
  if (!c.tie_embeddings) w.lm_head = s.table("output.weight", c.vocab_size, c.n_embd);
}


// Every llama-family architecture: the tensors decoder_tensors() lists for the config, under
// llama.cpp's names. Norm weights are taken as stored (Gemma's converter folded in the +1).
void load_llama(const ModelConfig& c, const GgufTensors& s, ModelWeights& w, const GgufFile& f) {
  const int C = c.n_embd, I = c.n_inner, d = c.head_size, H = c.n_head, KV = c.n_kv_head;
  const int Hd = H * d, KVd = KV * d;
  // llama.cpp's converter reorders q/k rows for the llama-style architectures only (their
  // graphs rotate adjacent pairs); qwen2/3, gemma, phi3 and olmo2 keep Hugging Face's order.
  const bool permuted = family_traits(family_of(c)).gguf_permuted_qk;
  const std::vector<DecoderTensor> list = gguf_decoder_tensors(c);
  // Fused tensors whose rows do not split are refused before anything is read.
  for (const DecoderTensor& t : list) {
    if (t.slot != Slot::Wqkv && t.slot != Slot::WgateUp) continue;
    const std::string name = gguf_tensor_name(c, t.slot, t.layer);
    const GgufTensorInfo* info = f.find(name);
    if (info && info->shape() != t.shape)
      throw Error("GGUF file '" + f.path() + "': tensor '" + name + "' has shape " + shape_str_of(info->shape()) +
                  ", whose rows do not split into " +
                  (t.slot == Slot::Wqkv ? "q | k | v (" + std::to_string(Hd) + " + 2 x " + std::to_string(KVd) + ")"
                                        : "gate | up (2 x " + std::to_string(I) + ")") +
                  " of width " + std::to_string(C) + "; expected " + shape_str_of(t.shape));
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  // place_decoder_tensor's errors (a value a tensor must not hold) under the file's tensor
  // name and the file's path.
  auto place_decoder_tensor = [&](const ModelConfig& cfg, const DecoderTensor& t, Weight m, Vec v, ModelWeights& out) {
    DecoderTensor named = t;
    named.name = gguf_tensor_name(cfg, t.slot, t.layer);
    try {
      attnviz::place_decoder_tensor(cfg, named, std::move(m), std::move(v), out);
    } catch (const Error& e) {
      throw Error("GGUF file '" + f.path() + "': " + e.what());
    }
  };
  for (const DecoderTensor& t : list) {
    const std::string name = gguf_tensor_name(c, t.slot, t.layer);
    if (t.optional && !f.find(name)) continue;  // its default stands (LayerWeights)
    const int rows = static_cast<int>(t.shape[0]), cols = t.shape.size() > 1 ? static_cast<int>(t.shape[1]) : 0;
    if (t.slot == Slot::ExpGateUpHalves || t.slot == Slot::ExpDownRows) {  // (E, out, in): Gemma 4's experts
      LayerWeights& lw = w.layers[static_cast<size_t>(t.layer)];
      const std::string p = "blk." + std::to_string(t.layer) + ".";
      if (t.slot == Slot::ExpGateUpHalves && !f.find(name) && f.find(p + "ffn_gate_exps.weight")) {
        // gate and up apart, (E, I_e, C) each, as another converter may write them
        const int E = static_cast<int>(t.shape[0]), Ie = c.experts.width, Cin = static_cast<int>(t.shape[2]);
        lw.ex_gate = s.stacked_w(p + "ffn_gate_exps.weight", E, Ie, Cin);
        lw.ex_up = s.stacked_w(p + "ffn_up_exps.weight", E, Ie, Cin);
        continue;
      }
      std::vector<Weight> st =
          s.stacked_w(name, static_cast<int>(t.shape[0]), static_cast<int>(t.shape[1]), static_cast<int>(t.shape[2]));
      if (t.slot == Slot::ExpDownRows) {
        lw.ex_down = std::move(st);
        continue;
      }
      const int Ie = c.experts.width;  // gate | up rows: each expert's first I_e output columns, then the next I_e
      lw.ex_gate.clear(), lw.ex_up.clear();
      for (const Weight& gu : st) lw.ex_gate.push_back(gu.columns(0, Ie)), lw.ex_up.push_back(gu.columns(Ie, Ie));
      continue;
    }
    if (t.slot == Slot::ExpGate || t.slot == Slot::ExpUp || t.slot == Slot::ExpDown) {  // (E, out, in): GPT-OSS's experts
      LayerWeights& lw = w.layers[static_cast<size_t>(t.layer)];
      auto& dst = t.slot == Slot::ExpGate ? lw.ex_gate : t.slot == Slot::ExpUp ? lw.ex_up : lw.ex_down;
      dst = s.stacked_w(name, static_cast<int>(t.shape[0]), static_cast<int>(t.shape[1]), static_cast<int>(t.shape[2]));
      continue;
    }
    if (t.shape.size() == 3) {  // a convolution kernel (channels, 1, K): stored squeezed, (channels, K)
      const std::vector<float> k = s.get(name, {t.shape[0], t.shape[2]});
      place_decoder_tensor(c, t, Weight(), Eigen::Map<const Vec>(k.data(), static_cast<Eigen::Index>(k.size())), w);
      continue;
    }
    if (slot_is_flat(t.slot)) {  // GPT-OSS's experts' biases (E, out): one flat vector
      const std::vector<float> flat = s.get(name, t.shape);
      place_decoder_tensor(c, t, Weight(), Eigen::Map<const Vec>(flat.data(), static_cast<Eigen::Index>(flat.size())), w);
      continue;
    }
    if (t.slot == Slot::LinALog) {  // ssm_a holds −exp(A_log), the rate the backend multiplies by
      const Vec a = s.vec(name, rows);
      for (Eigen::Index i = 0; i < a.size(); ++i)
        if (!(a[i] < 0.f) || !std::isfinite(a[i]))
          throw Error("GGUF file '" + f.path() + "': tensor '" + name + "' holds " + std::to_string(a[i]) + " at " +
                      std::to_string(i) + "; it is −exp(A_log), so every entry must be negative and finite\n  HINT: the "
                      "file is damaged, or was not written by llama.cpp's converter.");
      w.layers[static_cast<size_t>(t.layer)].lin_decay_rate = a;
      continue;
    }
    const bool q = t.slot == Slot::Wq || t.slot == Slot::Bq, k = t.slot == Slot::Wk || t.slot == Slot::Bk;
    Vec v;
    Weight m;
    if (t.shape.size() == 1) v = permuted && (q || k) ? s.vec_unpermuted(name, q ? H : KV, d) : s.vec(name, rows);
    else if (t.slot == Slot::TokEmb || t.slot == Slot::LmHead || t.slot == Slot::PleTable) m = s.table(name, rows, cols);  // (V, C)
    else if (permuted && (q || k)) m = s.linear_unpermuted_w(name, q ? H : KV, d, C);
    else m = s.linear_w(name, rows, cols);  // stored (out, in)
    place_decoder_tensor(c, t, std::move(m), std::move(v), w);
  }
}

}  // namespace

bool gguf_arch_supported(const std::string& arch) { return family_of_gguf_arch(arch) != nullptr; }

std::string gguf_supported_archs() { return known_gguf_archs(); }

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  const FamilyInfo* family = family_of_gguf_arch(arch);
  if (!family)
    throw Error("GGUF file '" + f.path() + "': unknown architecture '" + excerpt(arch) +
                "' (metadata 'general.architecture')\n  HINT: attnviz reads GGUF models of architecture " +
                gguf_supported_archs() + ".");
  const FamilyTraits t = family_traits(family->family);
  ModelConfig c = t.gguf_read ? t.gguf_read(f) : gguf_config(f, arch, *family);
  if (!std::isfinite(c.norm_eps) || !(c.norm_eps > 0.f))
    throw Error("GGUF file '" + f.path() + "': the norm epsilon must be a positive number, found " +
                std::to_string(c.norm_eps));
  return c;
}

void load_gguf_model(const GgufFile& f, Model& m, const LoadOptions& opt) {
  m.config = gguf_model_config(f);
  // Refuse before reading when the weights cannot fit: in place, the file's tensors (they
  // are all read); as float32, 4 bytes a parameter.
  double tensor_bytes = 0;
  for (const auto& t : f.tensors()) tensor_bytes += static_cast<double>(t.nbytes);
  const bool f32 = opt.weights == WeightsMode::F32;
  check_memory(f32 ? 4.0 * static_cast<double>(parameter_counts(m.config).total()) : tensor_bytes,
               "the model in '" + excerpt(f.path(), kPathExcerptBytes) + "'" + (f32 ? " as float32" : ""),
               f32 ? "drop --weights f32 to use the weights as the file stores them, or use a smaller model."
                   : "use a smaller model or a smaller quantization, or free memory.");
  const GgufTensors s(f, &m.warnings, opt.weights, opt.progress);
  if (m.config.arch == Arch::Gpt2) load_gpt2(m.config, s, m.weights);
  else load_llama(m.config, s, m.weights, f);
  m.format = "gguf";
  if (m.weights.any_stored()) m.files.push_back(f.mapping());
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
