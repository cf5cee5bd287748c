#include "tests/gguf_writer.h"

#include "core/tokenize/hf_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "core/model/gguf_quant.h"
#include "core/model/safetensors.h"

namespace attnviz::test {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {  // subnormal half (or zero)
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: still right
  return static_cast<uint16_t>(sign | h);
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string gguf_str(const std::string& s) { return le64(s.size()) + s; }

namespace {
std::string f32_bytes(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return le32(b);
}
}  // namespace

void GgufWriter::put(const std::string& key, uint32_t type, std::string payload) {
  remove(key);
  kv_.emplace_back(key, le32(type) + payload);
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) { put(k, 4, le32(v)); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { put(k, 5, le32(static_cast<uint32_t>(v))); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { put(k, 10, le64(v)); }
void GgufWriter::set_f32(const std::string& k, float v) { put(k, 6, f32_bytes(v)); }
void GgufWriter::set_bool(const std::string& k, bool v) { put(k, 7, std::string(1, v ? 1 : 0)); }
void GgufWriter::set_string(const std::string& k, const std::string& v) { put(k, 8, gguf_str(v)); }
void GgufWriter::set_strings(const std::string& k, const std::vector<std::string>& v) {
  std::string p = le32(8) + le64(v.size());
  for (const auto& s : v) p += gguf_str(s);
  put(k, 9, p);
}
void GgufWriter::set_f32s(const std::string& k, const std::vector<float>& v) {
  std::string p = le32(6) + le64(v.size());
  for (float x : v) p += f32_bytes(x);
  put(k, 9, p);
}
void GgufWriter::set_i32s(const std::string& k, const std::vector<int32_t>& v) {
  std::string p = le32(5) + le64(v.size());
  for (int32_t x : v) p += le32(static_cast<uint32_t>(x));
  put(k, 9, p);
}
void GgufWriter::set_raw(const std::string& k, uint32_t type, const std::string& payload) { put(k, type, payload); }
void GgufWriter::remove_tensor(const std::string& name) {
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), [&](const Tensor& t) { return t.name == name; }),
                 tensors_.end());
}

void GgufWriter::remove(const std::string& key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it)
    if (it->first == key) {
      kv_.erase(it);
      return;
    }
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, std::string bytes) {
  Tensor t{name, {}, static_cast<uint32_t>(type), std::move(bytes)};
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) t.ne.push_back(static_cast<uint64_t>(*it));
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  add_tensor(name, shape, GgmlType::F32,
             std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

namespace {
uint64_t pad(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
}  // namespace

std::string GgufWriter::header() const {
  std::string h = magic + le32(version) + le64(tensors_.size()) + le64(kv_.size());
  for (const auto& [k, v] : kv_) h += gguf_str(k) + v;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    const auto ne = ne_override.count(t.name) ? ne_override.at(t.name) : t.ne;
    h += gguf_str(t.name) + le32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) h += le64(d);
    h += le32(type_override.count(t.name) ? type_override.at(t.name) : t.type);
    h += le64(offset_override.count(t.name) ? offset_override.at(t.name) : offset);
    offset = pad(offset + t.bytes.size(), alignment);
  }
  h.resize(pad(h.size(), alignment), '\0');
  return h;
}

std::string GgufWriter::bytes() const {
  std::string out = header();
  for (const auto& t : tensors_) {
    out += t.bytes;
    out.resize(pad(out.size(), alignment), '\0');
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  const std::string h = header();
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  const std::string zeros(alignment, '\0');
  for (const auto& t : tensors_) {
    f.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    f.write(zeros.data(), static_cast<std::streamsize>(pad(t.bytes.size(), alignment) - t.bytes.size()));
  }
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string random_tensor_bytes(GgmlType type, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.05f);
  const GgmlTypeInfo& info = ggml_type_info(type);
  std::string out(static_cast<size_t>(n / info.block_elems * info.block_bytes), '\0');
  auto put16 = [&](size_t at, uint16_t v) {
    out[at] = static_cast<char>(v & 0xff);
    out[at + 1] = static_cast<char>(v >> 8);
  };
  if (type == GgmlType::F32) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      std::memcpy(&out[4 * i], &v, 4);
    }
    return out;
  }
  if (type == GgmlType::F16 || type == GgmlType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      put16(2 * i, type == GgmlType::F16 ? float_to_half(v) : static_cast<uint16_t>(bits >> 16));
    }
    return out;
  }
  // Quantized: random bytes, then the fp16 fields (offset in the block, value).
  for (auto& c : out) c = static_cast<char>(rng() & 0xff);
  std::vector<std::pair<int, float>> fields;
  switch (type) {
    case GgmlType::Q8_0: fields = {{0, 0.2f / 127}}; break;
    case GgmlType::Q4_0: fields = {{0, 0.2f / 8}}; break;
    case GgmlType::Q4_1: fields = {{0, 0.4f / 15}, {2, -0.2f}}; break;
    case GgmlType::Q5_0: fields = {{0, 0.2f / 16}}; break;
    case GgmlType::Q5_1: fields = {{0, 0.4f / 31}, {2, -0.2f}}; break;
    case GgmlType::Q2_K: fields = {{80, 0.4f / 45}, {82, 0.2f / 15}}; break;
    case GgmlType::Q3_K: fields = {{108, 0.2f / 128}}; break;
    case GgmlType::Q4_K: fields = {{0, 0.4f / 945}, {2, 0.2f / 63}}; break;
    case GgmlType::Q5_K: fields = {{0, 0.4f / 1953}, {2, 0.2f / 63}}; break;
    case GgmlType::Q6_K: fields = {{208, 0.2f / 4096}}; break;
    default: throw std::logic_error("random_tensor_bytes: unexpected type");
  }
  for (size_t b = 0; b < out.size(); b += info.block_bytes)
    for (const auto& [at, v] : fields) put16(b + at, float_to_half(v));
  return out;
}

namespace {

// Collects a model's tensors in both forms.
struct PairWriter {
  const ModelConfig& c;
  GgmlType type;
  std::mt19937_64 rng;
  GgufWriter gguf;
  SafetensorsWriter hf;
  bool with_hf;

  std::vector<float> dequantized(const std::string& bytes, GgmlType t, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    dequantize(t, reinterpret_cast<const uint8_t*>(bytes.data()), n, v.data());
    return v;
  }

  // A weight stored in GGUF as (rows, cols) of `type`; returns its float32 values. Rows
  // that are not whole blocks of `type` fall back to a 32-element type, as llama.cpp's
  // quantizer does (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0; for Q2_K / Q3_K llama.cpp
  // takes IQ4_NL, which attnviz does not read, so Q4_0 here), and F16 when rows are not
  // whole 32-element blocks either.
  std::vector<float> weight(const std::string& name, int64_t rows, int64_t cols) {
    GgmlType t = type;
    if (cols % ggml_type_info(t).block_elems != 0) {
      switch (t) {
        case GgmlType::Q4_K: t = GgmlType::Q5_0; break;
        case GgmlType::Q5_K: t = GgmlType::Q5_1; break;
        case GgmlType::Q6_K: t = GgmlType::Q8_0; break;
        default: t = GgmlType::Q4_0; break;
      }
      if (cols % ggml_type_info(t).block_elems != 0) t = GgmlType::F16;  // not even 32-element blocks
    }
    std::string b = random_tensor_bytes(t, rows * cols, rng());
    auto v = dequantized(b, t, rows * cols);
    gguf.add_tensor(name, {rows, cols}, t, std::move(b));
    return v;
  }
  // A 1-D F32 tensor: `base` + N(0, 0.1²).
  std::vector<float> vector(const std::string& name, int64_t n, float base) {
    std::normal_distribution<float> normal(0.f, 0.1f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = base + normal(rng);
    gguf.add_f32(name, {n}, v);
    return v;
  }
  void to_hf(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    if (with_hf) hf.add_f32(name, std::move(shape), v.data());
  }
  // (rows, cols) → (cols, rows), for GPT-2's Conv1D weights.
  static std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
    std::vector<float> t(v.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) t[k * rows + r] = v[r * cols + k];
    return t;
  }
  // llama.cpp's converter permutes HF q/k rows per head as
  //   w.reshape(heads, 2, d/2, in).swapaxes(1, 2).reshape(heads·d, in),
  // so GGUF row (h, i, half) holds HF row (h, half, i). This undoes it: HF from GGUF rows.
  static std::vector<float> hf_rows(const std::vector<float>& g, int heads, int d, int64_t in) {
    std::vector<float> out(g.size());
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < d / 2; ++i)
        for (int half = 0; half < 2; ++half) {
          const int64_t src = (static_cast<int64_t>(h) * d / 2 + i) * 2 + half;       // (h, i, half)
          const int64_t dst = (static_cast<int64_t>(h) * 2 + half) * (d / 2) + i;     // (h, half, i)
          std::copy_n(g.begin() + src * in, in, out.begin() + dst * in);
        }
    return out;
  }
};

}  // namespace

void set_tokenizer(GgufWriter& g, const GgufTokenizerData& t) {
  g.set_string("tokenizer.ggml.model", t.model);
  if (!t.pre.empty()) g.set_string("tokenizer.ggml.pre", t.pre);
  g.set_strings("tokenizer.ggml.tokens", t.tokens);
  if (!t.token_type.empty()) g.set_i32s("tokenizer.ggml.token_type", t.token_type);
  if (!t.scores.empty()) g.set_f32s("tokenizer.ggml.scores", t.scores);
  if (!t.merges.empty() || t.model == "gpt2") g.set_strings("tokenizer.ggml.merges", t.merges);
  const std::pair<const char*, int64_t> ids[] = {{"tokenizer.ggml.bos_token_id", t.bos_id},
                                                 {"tokenizer.ggml.eos_token_id", t.eos_id},
                                                 {"tokenizer.ggml.unknown_token_id", t.unk_id},
                                                 {"tokenizer.ggml.padding_token_id", t.pad_id}};
  for (const auto& [key, id] : ids)
    if (id >= 0) g.set_u32(key, static_cast<uint32_t>(id));
  const std::pair<const char*, int> flags[] = {{"tokenizer.ggml.add_bos_token", t.add_bos},
                                               {"tokenizer.ggml.add_eos_token", t.add_eos},
                                               {"tokenizer.ggml.add_space_prefix", t.add_space_prefix}};
  for (const auto& [key, v] : flags)
    if (v >= 0) g.set_bool(key, v != 0);
}

GgufTokenizerData small_byte_level_tokenizer(int vocab) {
  GgufTokenizerData t;
  t.model = "gpt2";
  t.pre = "default";
  // Ids 0-255: the byte characters of GPT-2's table (byte b at id b); then merges making
  // "Ġt", "he", "Ġthe", "Ġa"; placeholders "<id>"; the last id is <|endoftext|> (control).
  for (int b = 0; b < 256; ++b) t.tokens.push_back(hf::bytes_to_unicode(std::string(1, static_cast<char>(b))));
  const std::vector<std::string> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "\xC4\xA0 a"};
  for (const std::string& m : merges) {
    t.merges.push_back(m);
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    t.tokens.push_back(merged);
  }
  while (static_cast<int>(t.tokens.size()) < vocab - 1) t.tokens.push_back("<" + std::to_string(t.tokens.size()) + ">");
  t.tokens.push_back("<|endoftext|>");
  t.token_type.assign(t.tokens.size(), kGgufNormal);
  t.token_type.back() = kGgufControl;
  for (size_t i = 0; i < t.tokens.size(); ++i) t.scores.push_back(-static_cast<float>(i));
  t.bos_id = t.eos_id = static_cast<int64_t>(t.tokens.size()) - 1;
  t.add_bos = 0;
  return t;
}

std::string write_gguf_model_pair(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& dir,
                                  bool with_hf, bool with_tokenizer, const GgufTokenizerData* tokenizer) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  PairWriter w{c, type, std::mt19937_64(seed), {}, {}, with_hf};
  GgufWriter& g = w.gguf;
  const std::string a = c.model_type + ".";
  const bool gpt2 = c.arch == Arch::Gpt2;
  g.set_string("general.architecture", c.model_type);
  g.set_string("general.name", "attnviz test model");
  g.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layer));
  g.set_u32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
  g.set_u32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  g.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_inner));
  g.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  if (gpt2) {
    g.set_f32(a + "attention.layer_norm_epsilon", c.norm_eps);
  } else {
    g.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_head));
    g.set_f32(a + "rope.freq_base", c.rope_theta);
    g.set_f32(a + "attention.layer_norm_rms_epsilon", c.norm_eps);
    g.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.head_size));
    if (c.head_size * c.n_head != c.n_embd) g.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_size));
    const ModelConfig::RopeScaling& rs = c.rope_scaling;
    if (rs.type == "linear") {
      g.set_string(a + "rope.scaling.type", "linear");
      g.set_f32(a + "rope.scaling.factor", rs.factor);
    } else if (rs.type == "llama3") {
      // As a converter stores Llama 3's scaling: one divisor per frequency, 1 for short
      // wavelengths, `factor` for long ones, 1 / ((1 − s)/factor + s) between, where s
      // goes from 0 to 1 as old_ctx / wavelength goes from low_freq_factor to high_freq_factor.
      std::vector<float> div(static_cast<size_t>(c.head_size / 2));
      for (size_t i = 0; i < div.size(); ++i) {
        const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * static_cast<double>(i) / c.head_size);
        const double wavelen = 2 * 3.14159265358979323846 / freq, old_ctx = rs.original_max_position;
        if (wavelen < old_ctx / rs.high_freq_factor) div[i] = 1.f;
        else if (wavelen > old_ctx / rs.low_freq_factor) div[i] = rs.factor;
        else {
          const double sm = (old_ctx / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
          div[i] = static_cast<float>(1.0 / ((1 - sm) / rs.factor + sm));
        }
      }
      g.add_f32("rope_freqs.weight", {c.head_size / 2}, div);
    }
  }
  if (tokenizer) set_tokenizer(g, *tokenizer);
  else if (with_tokenizer) set_tokenizer(g, small_byte_level_tokenizer(c.vocab_size));

  const int64_t C = c.n_embd, I = c.n_inner, V = c.vocab_size, d = c.head_size;
  const int64_t Hd = c.n_head * d, KVd = c.n_kv_head * d;
  const std::string hp = gpt2 ? "" : "model.";
  w.to_hf(gpt2 ? "wte.weight" : "model.embed_tokens.weight", {V, C}, w.weight("token_embd.weight", V, C));
  if (gpt2) w.to_hf("wpe.weight", {c.n_ctx, C}, w.weight("position_embd.weight", c.n_ctx, C));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (gpt2) {
      const std::string h = "h." + std::to_string(l) + ".";
      w.to_hf(h + "ln_1.weight", {C}, w.vector(b + "attn_norm.weight", C, 1.f));
      w.to_hf(h + "ln_1.bias", {C}, w.vector(b + "attn_norm.bias", C, 0.f));
      w.to_hf(h + "attn.c_attn.weight", {C, 3 * C}, PairWriter::transposed(w.weight(b + "attn_qkv.weight", 3 * C, C), 3 * C, C));
      w.to_hf(h + "attn.c_attn.bias", {3 * C}, w.vector(b + "attn_qkv.bias", 3 * C, 0.f));
      w.to_hf(h + "attn.c_proj.weight", {C, C}, PairWriter::transposed(w.weight(b + "attn_output.weight", C, C), C, C));
      w.to_hf(h + "attn.c_proj.bias", {C}, w.vector(b + "attn_output.bias", C, 0.f));
      w.to_hf(h + "ln_2.weight", {C}, w.vector(b + "ffn_norm.weight", C, 1.f));
      w.to_hf(h + "ln_2.bias", {C}, w.vector(b + "ffn_norm.bias", C, 0.f));
      w.to_hf(h + "mlp.c_fc.weight", {C, I}, PairWriter::transposed(w.weight(b + "ffn_up.weight", I, C), I, C));
      w.to_hf(h + "mlp.c_fc.bias", {I}, w.vector(b + "ffn_up.bias", I, 0.f));
      w.to_hf(h + "mlp.c_proj.weight", {I, C}, PairWriter::transposed(w.weight(b + "ffn_down.weight", C, I), C, I));
      w.to_hf(h + "mlp.c_proj.bias", {C}, w.vector(b + "ffn_down.bias", C, 0.f));
      continue;
    }
    const std::string h = "model.layers." + std::to_string(l) + ".";
    const bool permuted = c.model_type == "llama";
    w.to_hf(h + "input_layernorm.weight", {C}, w.vector(b + "attn_norm.weight", C, 1.f));
    auto q = w.weight(b + "attn_q.weight", Hd, C);
    auto k = w.weight(b + "attn_k.weight", KVd, C);
    w.to_hf(h + "self_attn.q_proj.weight", {Hd, C}, permuted ? PairWriter::hf_rows(q, c.n_head, d, C) : q);
    w.to_hf(h + "self_attn.k_proj.weight", {KVd, C}, permuted ? PairWriter::hf_rows(k, c.n_kv_head, d, C) : k);
    w.to_hf(h + "self_attn.v_proj.weight", {KVd, C}, w.weight(b + "attn_v.weight", KVd, C));
    if (c.qkv_bias) {
      auto bq = w.vector(b + "attn_q.bias", Hd, 0.f);
      auto bk = w.vector(b + "attn_k.bias", KVd, 0.f);
      w.to_hf(h + "self_attn.q_proj.bias", {Hd}, permuted ? PairWriter::hf_rows(bq, c.n_head, d, 1) : bq);
      w.to_hf(h + "self_attn.k_proj.bias", {KVd}, permuted ? PairWriter::hf_rows(bk, c.n_kv_head, d, 1) : bk);
      w.to_hf(h + "self_attn.v_proj.bias", {KVd}, w.vector(b + "attn_v.bias", KVd, 0.f));
    }
    w.to_hf(h + "self_attn.o_proj.weight", {C, Hd}, w.weight(b + "attn_output.weight", C, Hd));
    w.to_hf(h + "post_attention_layernorm.weight", {C}, w.vector(b + "ffn_norm.weight", C, 1.f));
    w.to_hf(h + "mlp.gate_proj.weight", {I, C}, w.weight(b + "ffn_gate.weight", I, C));
    w.to_hf(h + "mlp.up_proj.weight", {I, C}, w.weight(b + "ffn_up.weight", I, C));
    w.to_hf(h + "mlp.down_proj.weight", {C, I}, w.weight(b + "ffn_down.weight", C, I));
  }
  w.to_hf(hp + (gpt2 ? "ln_f.weight" : "norm.weight"), {C}, w.vector("output_norm.weight", C, 1.f));
  if (gpt2) w.to_hf("ln_f.bias", {C}, w.vector("output_norm.bias", C, 0.f));
  if (!c.tie_embeddings && !gpt2) w.to_hf("lm_head.weight", {V, C}, w.weight("output.weight", V, C));

  const std::string path = dir + "/model.gguf";
  g.write(path);
  if (with_hf) {
    fs::create_directories(dir + "/hf");
    std::ofstream(dir + "/hf/config.json") << config_to_json(c).dump(2) << "\n";
    w.hf.write(dir + "/hf/model.safetensors");
    // The same tokenizer as the Hugging Face tokenizer.json it stands for.
    if (tokenizer || with_tokenizer)
      std::ofstream(dir + "/hf/tokenizer.json")
          << gguf_tokenizer_json(tokenizer ? *tokenizer : small_byte_level_tokenizer(c.vocab_size), "test").dump() << "\n";
  }
  return path;
}

}  // namespace attnviz::test
