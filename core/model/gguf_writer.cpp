#include "core/model/gguf_writer.h"
#include "core/model/gguf_families.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/families/family.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "core/tokenize/hf_tokenizer.h"

namespace attnviz {

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
uint64_t pad(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
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
void GgufWriter::set_bools(const std::string& k, const std::vector<bool>& v) {
  std::string p = le32(7) + le64(v.size());
  for (bool x : v) p += std::string(1, x ? 1 : 0);
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
  Tensor t{name, {}, static_cast<uint32_t>(type), std::move(bytes), 0, {}};
  t.nbytes = t.bytes.size();
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) t.ne.push_back(static_cast<uint64_t>(*it));
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor_generated(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                                      uint64_t nbytes, std::function<std::string()> make) {
  Tensor t{name, {}, static_cast<uint32_t>(type), {}, nbytes, std::move(make)};
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) t.ne.push_back(static_cast<uint64_t>(*it));
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_f32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  add_tensor(name, shape, GgmlType::F32,
             std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

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
    offset = pad(offset + t.nbytes, alignment);
  }
  h.resize(pad(h.size(), alignment), '\0');
  return h;
}

std::string GgufWriter::bytes() const {
  std::string out = header();
  for (const auto& t : tensors_) {
    out += t.make ? t.make() : t.bytes;
    out.resize(pad(out.size(), alignment), '\0');
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  // Streamed to a temporary file beside `path`, renamed over it when complete; on any
  // failure (a full disk, a file-size limit) the temporary file goes and nothing is left.
  const std::string tmp = path + ".tmp-attnviz";
  const auto fail = [&](int err) {
    std::remove(tmp.c_str());
    std::string m = "cannot write '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(err) + " (nothing was written)";
    if (err == EFBIG) m += "\n  HINT: the file is larger than the file-size limit allows (ulimit -f); raise the limit.";
    if (err == ENOSPC) m += "\n  HINT: the disk is full; free some space or choose another --out path.";
    return Error(m);
  };
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) throw Error("cannot write '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(errno));
  const auto put = [fp](const void* d, size_t n) { return n == 0 || std::fwrite(d, 1, n, fp) == n; };
  bool ok = true;
  errno = 0;
  try {
    const std::string h = header();
    ok = put(h.data(), h.size());
    const std::string zeros(alignment, '\0');
    for (size_t i = 0; ok && i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      const std::string made = t.make ? t.make() : std::string();
      const std::string& b = t.make ? made : t.bytes;
      if (b.size() != t.nbytes) throw std::logic_error("GgufWriter: tensor '" + t.name + "' has an unexpected size");
      ok = put(b.data(), b.size()) && put(zeros.data(), pad(b.size(), alignment) - b.size());
    }
  } catch (...) {
    std::fclose(fp);
    std::remove(tmp.c_str());
    throw;
  }
  int err = ok ? 0 : errno;
  const bool closed = std::fclose(fp) == 0;
  if (ok && !closed) err = errno;
  if (!ok || !closed) throw fail(err ? err : EIO);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw fail(errno);
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

// ---- quantizers ------------------------------------------------------------------------

namespace {

float half_value(uint16_t h) {  // the float an fp16 field holds (through the reader's own decoder)
  const uint8_t b[2] = {static_cast<uint8_t>(h & 0xff), static_cast<uint8_t>(h >> 8)};
  float v;
  dequantize(GgmlType::F16, b, 1, &v);
  return v;
}
void put16(std::string& out, size_t at, uint16_t v) {
  out[at] = static_cast<char>(v & 0xff);
  out[at + 1] = static_cast<char>(v >> 8);
}
// The value of largest magnitude in x[0, n), with its sign.
float signed_max(const float* x, int n) {
  float m = 0.f;
  for (int i = 0; i < n; ++i)
    if (std::abs(x[i]) > std::abs(m)) m = x[i];
  return m;
}

void quantize_q8_0(const float* x, uint8_t* b) {  // 32 values → 34 bytes
  float amax = 0.f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[i]));
  const uint16_t dh = float_to_half(amax / 127.f);
  const float d = half_value(dh);
  b[0] = static_cast<uint8_t>(dh & 0xff), b[1] = static_cast<uint8_t>(dh >> 8);
  for (int i = 0; i < 32; ++i) {
    const int q = d == 0.f ? 0 : static_cast<int>(std::lround(x[i] / d));
    b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127, 127)));
  }
}

// Q4_0 (bits 4, offset 8) and Q5_0 (bits 5, offset 16): d = signed max / −offset.
void quantize_q_0(const float* x, uint8_t* b, int bits) {
  const int off = 1 << (bits - 1), top = (1 << bits) - 1;
  const uint16_t dh = float_to_half(signed_max(x, 32) / static_cast<float>(-off));
  const float d = half_value(dh);
  b[0] = static_cast<uint8_t>(dh & 0xff), b[1] = static_cast<uint8_t>(dh >> 8);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = d == 0.f ? off : std::clamp(static_cast<int>(std::lround(x[i] / d)) + off, 0, top);
  uint8_t* qs = b + 2;
  if (bits == 5) {
    uint32_t qh = 0;
    for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
    for (int i = 0; i < 4; ++i) b[2 + i] = static_cast<uint8_t>((qh >> (8 * i)) & 0xff);
    qs = b + 6;
  }
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 0xf) | ((q[i + 16] & 0xf) << 4));
}

// Q4_K: 8 sub-blocks of 32 values, each x ≈ d·sc·q − dmin·m with 6-bit sc, m and 4-bit q.
void quantize_q4_k(const float* x, uint8_t* b) {  // 256 values → 144 bytes
  float scale[8], minv[8];
  for (int s = 0; s < 8; ++s) {
    float lo = 0.f, hi = -INFINITY;
    for (int i = 0; i < 32; ++i) lo = std::min(lo, x[32 * s + i]), hi = std::max(hi, x[32 * s + i]);
    scale[s] = (hi - lo) / 15.f;
    minv[s] = -lo;
  }
  const float smax = *std::max_element(scale, scale + 8), mmax = *std::max_element(minv, minv + 8);
  const uint16_t dh = float_to_half(smax / 63.f), mh = float_to_half(mmax / 63.f);
  const float d = half_value(dh), dmin = half_value(mh);
  int sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d == 0.f ? 0 : std::clamp(static_cast<int>(std::lround(scale[s] / d)), 0, 63);
    m[s] = dmin == 0.f ? 0 : std::clamp(static_cast<int>(std::lround(minv[s] / dmin)), 0, 63);
    // The rounded scale must still reach the sub-block's largest value.
    if (d != 0.f && sc[s] < 63 && d * sc[s] * 15.f - dmin * m[s] < (scale[s] * 15.f - minv[s]) - 1e-12f) ++sc[s];
  }
  std::memset(b, 0, 144);
  b[0] = static_cast<uint8_t>(dh & 0xff), b[1] = static_cast<uint8_t>(dh >> 8);
  b[2] = static_cast<uint8_t>(mh & 0xff), b[3] = static_cast<uint8_t>(mh >> 8);
  uint8_t* scales = b + 4;
  for (int j = 0; j < 4; ++j) scales[j] = static_cast<uint8_t>(sc[j]), scales[j + 4] = static_cast<uint8_t>(m[j]);
  for (int j = 4; j < 8; ++j) {
    scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xf) | ((m[j] & 0xf) << 4));
    scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    scales[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
  int q[256];
  for (int s = 0; s < 8; ++s) {
    const float step = d * static_cast<float>(sc[s]), offset = dmin * static_cast<float>(m[s]);
    for (int i = 0; i < 32; ++i)
      q[32 * s + i] = step == 0.f ? 0 : std::clamp(static_cast<int>(std::lround((x[32 * s + i] + offset) / step)), 0, 15);
  }
  uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

// MXFP4: the exponent e making the largest magnitude at most 12·2^(e − 128) (the largest
// code's worth), then each value's nearest code: the magnitudes 0, 1, 2, 3, 4, 6, 8, 12 (in
// steps of the scale) split at their midpoints, ties to the smaller; the sign in bit 3.
void quantize_mxfp4(const float* x, uint8_t* b) {  // 32 values → 17 bytes
  float amax = 0.f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[i]));
  int e = 0;
  while (e < 254 && 12.f * mxfp4_half_scale(static_cast<uint8_t>(e)) < amax) ++e;
  const float d = mxfp4_half_scale(static_cast<uint8_t>(e));
  b[0] = static_cast<uint8_t>(e);
  constexpr float kMid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.f, 7.f, 10.f};  // between codes n and n + 1
  uint8_t code[32];
  for (int i = 0; i < 32; ++i) {
    const float v = std::abs(x[i]) / d;
    int n = 0;
    while (n < 7 && v > kMid[n]) ++n;
    code[i] = static_cast<uint8_t>(n | (x[i] < 0.f && n > 0 ? 8 : 0));
  }
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(code[j] | (code[j + 16] << 4));
}

}  // namespace

bool can_quantize(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q8_0 ||
         t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::Q4_K || t == GgmlType::MXFP4;
}

std::string quantize(GgmlType type, const float* x, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (!can_quantize(type) || n % info.block_elems != 0) throw std::logic_error("quantize: unsupported type or size");
  std::string out(static_cast<size_t>(n / info.block_elems * info.block_bytes), '\0');
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  switch (type) {
    case GgmlType::F32: std::memcpy(o, x, static_cast<size_t>(n) * 4); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) put16(out, 2 * static_cast<size_t>(i), float_to_half(x[i]));
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {  // round to nearest even (values are finite here)
        uint32_t bits;
        std::memcpy(&bits, &x[i], 4);
        bits += 0x7fff + ((bits >> 16) & 1);
        put16(out, 2 * static_cast<size_t>(i), static_cast<uint16_t>(bits >> 16));
      }
      break;
    case GgmlType::Q8_0:
      for (int64_t k = 0; k < n / 32; ++k) quantize_q8_0(x + 32 * k, o + 34 * k);
      break;
    case GgmlType::Q4_0:
      for (int64_t k = 0; k < n / 32; ++k) quantize_q_0(x + 32 * k, o + 18 * k, 4);
      break;
    case GgmlType::Q5_0:
      for (int64_t k = 0; k < n / 32; ++k) quantize_q_0(x + 32 * k, o + 22 * k, 5);
      break;
    case GgmlType::Q4_K:
      for (int64_t k = 0; k < n / 256; ++k) quantize_q4_k(x + 256 * k, o + 144 * k);
      break;
    case GgmlType::MXFP4:
      for (int64_t k = 0; k < n / 32; ++k) quantize_mxfp4(x + 32 * k, o + 17 * k);
      break;
    default: break;
  }
  return out;
}

GgmlType gguf_write_type(const std::string& name) {
  std::string list;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                     GgmlType::Q4_K, GgmlType::MXFP4}) {
    std::string n = ggml_type_info(t).name, u = name;
    std::transform(u.begin(), u.end(), u.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    if (n == u) return t;
    list += (list.empty() ? "" : ", ") + n;
  }
  throw Error("--gguf type '" + excerpt(name) + "' cannot be written\n  HINT: one of " + list + ".", ErrorKind::Usage);
}

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

GgufTokenizerData char_gguf_tokenizer(int vocab) {
  GgufTokenizerData t;
  t.model = "gpt2";
  t.pre = "default";
  std::vector<std::string> pieces;
  pieces.push_back("\n");
  for (char ch = ' '; ch <= '~'; ++ch) pieces.emplace_back(1, ch);
  pieces.resize(std::min<size_t>(pieces.size(), static_cast<size_t>(vocab)));
  for (const std::string& p : pieces) t.tokens.push_back(hf::bytes_to_unicode(p));
  while (t.tokens.size() < static_cast<size_t>(vocab)) t.tokens.push_back("<" + std::to_string(t.tokens.size()) + ">");
  // A byte-level BPE needs merges: one that no text can reach, of two placeholder pieces
  // (never produced from characters) into a third (so a vocabulary of at least 99 ids keeps
  // every character at its id; a smaller one gives its last three ids to these).
  if (vocab >= 3) {
    const size_t n = t.tokens.size(), a = std::max<size_t>(n - 3, std::min<size_t>(n - 3, 96));
    const size_t first = n >= 99 ? 96 : a;
    t.tokens[first] = "<a>", t.tokens[first + 1] = "<b>", t.tokens[first + 2] = "<a><b>";
    t.merges.push_back("<a> <b>");
  }
  t.token_type.assign(t.tokens.size(), kGgufNormal);
  t.add_bos = 0;
  return t;
}

std::string gguf_arch_of(const ModelConfig& c) { return family_info(family_of(c)).gguf_arch; }

// ---- a random model -------------------------------------------------------------------

namespace {

// llama.cpp's converter permutes the q/k rows of some families (FamilyTraits::gguf_permuted_qk:
// rotary pairs (i, i + d/2) made adjacent: GGUF row (h, i, half) holds Hugging Face row
// (h, half, i)); the others keep HF's order.
bool permutes_qk(const ModelConfig& c) { return family_traits(family_of(c)).gguf_permuted_qk; }

// HF rows from GGUF rows (the inverse of the converter's permutation).
std::vector<float> hf_rows(const std::vector<float>& g, int heads, int d, int64_t in) {
  std::vector<float> out(g.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < d / 2; ++i)
      for (int half = 0; half < 2; ++half) {
        const int64_t src = (static_cast<int64_t>(h) * d / 2 + i) * 2 + half;    // (h, i, half)
        const int64_t dst = (static_cast<int64_t>(h) * 2 + half) * (d / 2) + i;  // (h, half, i)
        std::copy_n(g.begin() + src * in, in, out.begin() + dst * in);
      }
  return out;
}

std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) t[static_cast<size_t>(k * rows + r)] = v[static_cast<size_t>(r * cols + k)];
  return t;
}

// A Qwen3.5 linear layer's tensor of value heads in llama.cpp's tiled order (the file's:
// value head j reads key head j mod Hk) → Hugging Face's grouped order (head g·r + v reads
// key head g, r = Hv/Hk; the file's head v·Hk + g). `v` is (rows, cols) row-major; the
// value-head axis is the rows (of width dv, after the q | k channels of in_proj_qkv and the
// convolution), or for out_proj the columns. Other tensors come back as they are.
std::vector<float> grouped_value_heads(const ModelConfig& c, Slot s, const std::vector<float>& v, int64_t cols) {
  const LinearAttnDims& ld = c.linear;
  if (ld.v_heads == ld.k_heads || ld.k_heads == 0) return v;
  int64_t first = 0, block = ld.v_dim;  // where the value heads start on their axis, and each one's width
  switch (s) {
    case Slot::LinQkv: case Slot::LinConv: first = 2 * ld.key_width(); break;
    case Slot::LinZ: case Slot::LinOut: break;
    case Slot::LinB: case Slot::LinA: case Slot::LinDtBias: case Slot::LinALog: block = 1; break;
    default: return v;
  }
  const int r = ld.v_heads / ld.k_heads;
  std::vector<float> out = v;
  const int64_t rows = static_cast<int64_t>(v.size()) / cols;
  for (int g = 0; g < ld.k_heads; ++g)
    for (int u = 0; u < r; ++u) {
      const int64_t hf = g * r + u, file = static_cast<int64_t>(u) * ld.k_heads + g;
      for (int64_t e = 0; e < block; ++e) {
        if (s == Slot::LinOut) {  // columns
          for (int64_t row = 0; row < rows; ++row)
            out[static_cast<size_t>(row * cols + first + hf * block + e)] = v[static_cast<size_t>(row * cols + first + file * block + e)];
        } else {
          std::copy_n(v.begin() + (first + file * block + e) * cols, cols, out.begin() + (first + hf * block + e) * cols);
        }
      }
    }
  return out;
}

// The type a (rows, cols) weight is stored as: `type`, or llama.cpp's fallback where rows
// are not whole blocks of it.
GgmlType storage_type(GgmlType type, int64_t cols) {
  GgmlType t = type;
  if (cols % ggml_type_info(t).block_elems != 0) {
    switch (t) {
      case GgmlType::Q4_K: t = GgmlType::Q5_0; break;
      case GgmlType::Q5_K: t = GgmlType::Q5_1; break;
      case GgmlType::Q6_K: t = GgmlType::Q8_0; break;
      default: t = GgmlType::Q4_0; break;
    }
    if (cols % ggml_type_info(t).block_elems != 0) t = GgmlType::F16;
  }
  return t;
}

// Collects a model's tensors as GGUF (and, with_hf, as the Hugging Face twin).
struct PairWriter {
  GgmlType type;
  std::mt19937_64 rng;
  GgufWriter gguf;
  SafetensorsWriter hf;
  bool with_hf;

  // Values of a (rows, cols) weight: N(mean, sd) where the type has a quantizer, else the
  // random stored bytes' values. Stored as storage_type(); returns the stored values (after
  // dequantization) when with_hf, else nothing (the tensor is made while writing).
  std::vector<float> weight(const std::string& name, int64_t rows, int64_t cols, float sd, float mean = 0.f) {
    return weight_shaped(name, {rows, cols}, sd, mean);
  }
  // The same for a tensor of any rank (E experts' matrices (E, out, in)): rows of its last axis.
  // `as_f32`: stored as F32 whatever the type (llama.cpp's quantizer leaves a router so).
  std::vector<float> weight_shaped(const std::string& name, const std::vector<int64_t>& shape, float sd, float mean = 0.f,
                                   bool as_f32 = false) {
    const int64_t cols = shape.back();
    const GgmlType t = as_f32 ? GgmlType::F32 : storage_type(type, cols);
    const int64_t n = checked_product(shape, "tensor '" + name + "'");
    const uint64_t seed = rng();
    auto make = [t, n, seed, sd, mean] {
      if (!can_quantize(t)) return random_tensor_bytes(t, n, seed);
      std::mt19937_64 r(seed);
      std::normal_distribution<float> dist(mean, sd);
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = dist(r);
      return quantize(t, v.data(), n);
    };
    const GgmlTypeInfo& info = ggml_type_info(t);
    if (!with_hf) {
      gguf.add_tensor_generated(name, shape, t, static_cast<uint64_t>(n / info.block_elems * info.block_bytes), make);
      return {};
    }
    std::string b = make();
    std::vector<float> v(static_cast<size_t>(n));
    dequantize(t, reinterpret_cast<const uint8_t*>(b.data()), n, v.data());
    gguf.add_tensor(name, shape, t, std::move(b));
    return v;
  }
  // A 1-D F32 tensor: N(base, 0.1²).
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
};

// GPT-OSS's experts as GGUF holds them (gate, up (E, I, C) and down (E, C, I) stacked, their
// (E, out) biases), and as the Hugging Face twin does: gate_up_proj (E, C, 2I) with gate in
// the even columns and up in the odd ones, its bias (E, 2I) interleaved alike, down_proj
// (E, I, C). The twin's gate | up pair is written once both halves are drawn.
struct GptOssTwin {
  const ModelConfig& c;
  PairWriter& w;
  std::vector<float> gate, gate_b;  // the halves drawn first, until their partner comes
  GptOssTwin(const ModelConfig& config, PairWriter& writer) : c(config), w(writer) {}

  // Writes t when it is one of the experts' tensors (true), else leaves it (false).
  bool write(const DecoderTensor& t, const std::string& name) {
    const int64_t E = c.experts.count, C = c.n_embd, I = c.n_inner;
    const float s_in = 1.f / std::sqrt(static_cast<float>(C)), s_hid = 1.f / std::sqrt(static_cast<float>(I));
    const std::string hf = "model.layers." + std::to_string(t.layer) + ".mlp.experts.";
    std::vector<float> v;
    switch (t.slot) {
      case Slot::ExpGate: case Slot::ExpUp:
        v = w.weight_shaped(name, t.shape, s_in);
        break;
      case Slot::ExpDown:
        v = w.weight_shaped(name, t.shape, s_hid);
        break;
      case Slot::ExpGateBias: case Slot::ExpUpBias: case Slot::ExpDownBias: {
        std::normal_distribution<float> normal(0.f, t.slot == Slot::ExpDownBias ? 0.02f : 0.1f);
        v.resize(static_cast<size_t>(t.shape[0] * t.shape[1]));
        for (auto& x : v) x = normal(w.rng);
        w.gguf.add_f32(name, t.shape, v);
        break;
      }
      default: return false;
    }
    if (!w.with_hf) return true;
    switch (t.slot) {
      case Slot::ExpGate: gate = std::move(v); break;
      case Slot::ExpGateBias: gate_b = std::move(v); break;
      case Slot::ExpUp: {  // gate_up[e][c][2i] = gate[e][i][c], [2i + 1] = up[e][i][c]
        std::vector<float> gu(static_cast<size_t>(E * C * 2 * I));
        for (int64_t e = 0; e < E; ++e)
          for (int64_t i = 0; i < I; ++i)
            for (int64_t k = 0; k < C; ++k) {
              const size_t src = static_cast<size_t>((e * I + i) * C + k), dst = static_cast<size_t>((e * C + k) * 2 * I + 2 * i);
              gu[dst] = gate[src], gu[dst + 1] = v[src];
            }
        w.to_hf(hf + "gate_up_proj", {E, C, 2 * I}, gu);
        break;
      }
      case Slot::ExpUpBias: {
        std::vector<float> b(static_cast<size_t>(E * 2 * I));
        for (size_t k = 0; k < v.size(); ++k) b[2 * k] = gate_b[k], b[2 * k + 1] = v[k];
        w.to_hf(hf + "gate_up_proj_bias", {E, 2 * I}, b);
        break;
      }
      case Slot::ExpDown: {  // (E, C, I) (out, in) → (E, I, C) (in, out)
        std::vector<float> d(v.size());
        for (int64_t e = 0; e < E; ++e)
          for (int64_t k = 0; k < C; ++k)
            for (int64_t i = 0; i < I; ++i) d[static_cast<size_t>((e * I + i) * C + k)] = v[static_cast<size_t>((e * C + k) * I + i)];
        w.to_hf(hf + "down_proj", {E, I, C}, d);
        break;
      }
      default: w.to_hf(hf + "down_proj_bias", {E, C}, v); break;
    }
    return true;
  }
};

void write_metadata(const ModelConfig& c, const std::string& arch, GgufWriter& g, PairWriter& w) {
  const std::string a = arch + ".";
  const bool gpt2 = c.arch == Arch::Gpt2;
  const FamilyTraits t = family_traits(family_of(c));
  g.set_string("general.architecture", arch);
  g.set_string("general.name", "attnviz random model (random weights)");
  g.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layer));
  g.set_u32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
  g.set_u32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  g.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_inner));
  g.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  if (gpt2) {
    g.set_f32(a + "attention.layer_norm_epsilon", c.norm_eps);
    return;
  }
  g.set_u32(a + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (!t.gguf_write)
    g.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_head));
  else if (t.gguf_write(c, a, g))
    return;  // the family's own keys (families/), and all of them
  g.set_f32(a + "rope.freq_base", c.rope_theta);
  g.set_f32(a + "attention.layer_norm_rms_epsilon", c.norm_eps);
  g.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.rotary()));
  g.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_size));
  g.set_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_size));
  const RopeScaling& rs = c.rope_scaling;
  const int rot = c.rotary();
  if (rs.type == "linear") {
    g.set_string(a + "rope.scaling.type", "linear");
    g.set_f32(a + "rope.scaling.factor", rs.factor);
  } else if (rs.type == "llama3" || rs.type == "factors") {
    // As a converter stores Llama 3's scaling: one divisor per frequency, 1 for short
    // wavelengths, `factor` for long ones, 1 / ((1 − s)/factor + s) between, where s
    // goes from 0 to 1 as old_ctx / wavelength goes from low_freq_factor to high_freq_factor.
    std::vector<float> div(static_cast<size_t>(rot / 2));
    for (size_t i = 0; i < div.size(); ++i) {
      if (rs.type == "factors") {
        div[i] = rs.freq_factors.at(i);
        continue;
      }
      const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * static_cast<double>(i) / rot);
      const double wavelen = 2 * 3.14159265358979323846 / freq, old_ctx = rs.original_max_position;
      if (wavelen < old_ctx / rs.high_freq_factor) div[i] = 1.f;
      else if (wavelen > old_ctx / rs.low_freq_factor) div[i] = rs.factor;
      else {
        const double sm = (old_ctx / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        div[i] = static_cast<float>(1.0 / ((1 - sm) / rs.factor + sm));
      }
    }
    g.add_f32("rope_freqs.weight", {rot / 2}, div);
  } else if (rs.type == "longrope") {
    // Phi-3's converter: the two factor lists as tensors, the attention factor and the
    // original context as metadata (context_length is max_position_embeddings).
    g.add_f32("rope_factors_long.weight", {rot / 2}, rs.long_factor);
    g.add_f32("rope_factors_short.weight", {rot / 2}, rs.freq_factors);
    g.set_f32(a + "rope.scaling.attn_factor", rs.mscale);
    g.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(rs.original_max_position));
  } else if (rs.type == "yarn") {
    // llama.cpp's keys. Its attention factor is 0.1·ln(factor) + 1 (no yarn_log_multiplier
    // written) times rope.scaling.attn_factor, so that key carries the rest of the model's.
    g.set_string(a + "rope.scaling.type", "yarn");
    g.set_f32(a + "rope.scaling.factor", rs.factor);
    g.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(rs.original_max_position));
    g.set_f32(a + "rope.scaling.yarn_beta_fast", rs.beta_fast);
    g.set_f32(a + "rope.scaling.yarn_beta_slow", rs.beta_slow);
    const double own = rs.factor > 1.f ? 0.1 * std::log(static_cast<double>(rs.factor)) + 1.0 : 1.0;
    g.set_f32(a + "rope.scaling.attn_factor", static_cast<float>(rs.mscale / own));
  }
  if (c.attn_temp_beta != 0.f) g.set_f32(a + "attention.temperature_scale", c.attn_temp_beta);
  if (t.gguf_rope_sections) {  // multi-axis RoPE's sections (llama.cpp requires them; one text position on every axis)
    const int half = c.rotary() / 2, third = half / 3;
    g.set_i32s(a + "rope.dimension_sections", {half - 2 * third, third, third, 0});
  }
  if (t.gguf_write_tail) t.gguf_write_tail(c, a, g);
  (void)w;

  int first_softmax = 0;  // a hybrid's scale and caps are its softmax layers'
  while (first_softmax + 1 < c.n_layer && c.layer(first_softmax).mixer != Mixer::Softmax) ++first_softmax;
  const LayerSpec first = c.layer(first_softmax);
  if (first.softcap > 0) g.set_f32(a + "attn_logit_softcapping", first.softcap);
  if (c.final_softcap > 0) g.set_f32(a + "final_logit_softcapping", c.final_softcap);
  // llama.cpp's granite converter writes attention.scale (attention_multiplier); for Gemma it
  // derives 1/√d from the shapes, so attnviz writes the key only where the scale differs.
  if (t.multipliers || first.scale != 1.f / std::sqrt(static_cast<float>(c.head_size)))
    g.set_f32(a + "attention.scale", first.scale);
  if (t.multipliers) {
    g.set_f32(a + "embedding_scale", c.emb_scale);
    g.set_f32(a + "residual_scale", c.residual_scale);
    g.set_f32(a + "logit_scale", 1.f / c.logit_scale);  // llama.cpp divides the logits by it
  }
  // Windows: the size, and which layers are local where the family's rule does not say it.
  std::vector<bool> local(static_cast<size_t>(c.n_layer));
  int W = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    local[static_cast<size_t>(l)] = c.layer(l).window > 0;
    W = std::max(W, c.layer(l).window);
  }
  if (W > 0) {
    g.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(W));
    const int period = t.gguf_local_period;  // 0: every layer local
    bool rule = true;
    for (int l = 0; l < c.n_layer; ++l) rule = rule && local[static_cast<size_t>(l)] == (period == 0 || (l + 1) % period != 0);
    if (!rule) g.set_bools(a + "attention.sliding_window_pattern", local);
    else if (t.per_type_rope)
      g.set_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(period));
    if (t.per_type_rope)  // Gemma 3's local layers' own base
      for (int l = 0; l < c.n_layer; ++l)
        if (local[static_cast<size_t>(l)]) {
          g.set_f32(a + "rope.freq_base_swa", c.layer(l).rope_theta);
          break;
        }
  }
  // SmolLM3's layers without RoPE: llama.cpp fixes every 4th; another pattern goes into
  // an attnviz key (1 = RoPE, as Hugging Face's no_rope_layers).
  if (t.no_rope_layers) {
    std::vector<int32_t> nr;
    bool rule = true;
    for (int l = 0; l < c.n_layer; ++l) {
      nr.push_back(c.layer(l).rope ? 1 : 0);
      rule = rule && c.layer(l).rope == ((l + 1) % 4 != 0);
    }
    if (!rule) g.set_i32s(a + "no_rope_layers", nr);
  }
}

}  // namespace

void write_gguf_model(const ModelConfig& c, GgmlType type, uint64_t seed, const std::string& path,
                      const GgufTokenizerData* tokenizer, const std::string& hf_dir, bool split_gate_up) {
  const bool with_hf = !hf_dir.empty();
  PairWriter w{type, std::mt19937_64(seed), {}, {}, with_hf};
  GgufWriter& g = w.gguf;
  const std::string arch = gguf_arch_of(c);
  const bool gpt2 = c.arch == Arch::Gpt2;
  write_metadata(c, arch, g, w);
  if (tokenizer) set_tokenizer(g, *tokenizer);

  const int64_t C = c.n_embd, I = c.n_inner, V = c.vocab_size, d = c.head_size;
  const float s_in = 1.f / std::sqrt(static_cast<float>(C)), s_hid = 1.f / std::sqrt(static_cast<float>(I));
  if (gpt2) {
    w.to_hf("wte.weight", {V, C}, w.weight("token_embd.weight", V, C, 0.5f));
    w.to_hf("wpe.weight", {c.n_ctx, C}, w.weight("position_embd.weight", c.n_ctx, C, 0.3f));
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".", h = "h." + std::to_string(l) + ".";
      auto hf_t = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v) {
        if (with_hf) w.to_hf(name, {cols, rows}, transposed(v, rows, cols));  // Conv1D (in, out)
      };
      w.to_hf(h + "ln_1.weight", {C}, w.vector(b + "attn_norm.weight", C, 1.f));
      w.to_hf(h + "ln_1.bias", {C}, w.vector(b + "attn_norm.bias", C, 0.f));
      hf_t(h + "attn.c_attn.weight", 3 * C, C, w.weight(b + "attn_qkv.weight", 3 * C, C, 1.5f * s_in));
      w.to_hf(h + "attn.c_attn.bias", {3 * C}, w.vector(b + "attn_qkv.bias", 3 * C, 0.f));
      hf_t(h + "attn.c_proj.weight", C, C, w.weight(b + "attn_output.weight", C, C, s_in));
      w.to_hf(h + "attn.c_proj.bias", {C}, w.vector(b + "attn_output.bias", C, 0.f));
      w.to_hf(h + "ln_2.weight", {C}, w.vector(b + "ffn_norm.weight", C, 1.f));
      w.to_hf(h + "ln_2.bias", {C}, w.vector(b + "ffn_norm.bias", C, 0.f));
      hf_t(h + "mlp.c_fc.weight", I, C, w.weight(b + "ffn_up.weight", I, C, s_in));
      w.to_hf(h + "mlp.c_fc.bias", {I}, w.vector(b + "ffn_up.bias", I, 0.f));
      hf_t(h + "mlp.c_proj.weight", C, I, w.weight(b + "ffn_down.weight", C, I, s_hid));
      w.to_hf(h + "mlp.c_proj.bias", {C}, w.vector(b + "ffn_down.bias", C, 0.f));
    }
    w.to_hf("ln_f.weight", {C}, w.vector("output_norm.weight", C, 1.f));
    w.to_hf("ln_f.bias", {C}, w.vector("output_norm.bias", C, 0.f));
  } else {
    const bool permuted = permutes_qk(c);
    const float s_o = 1.f / std::sqrt(static_cast<float>(c.n_head * d));
    if (c.short_conv_bias)
      throw Error("llama.cpp's lfm2 has no biases in its short convolutions: a model with conv_bias is not written "
                  "as GGUF",
                  ErrorKind::Usage);
    GptOssTwin experts(c, w);
    for (const DecoderTensor& t : gguf_decoder_tensors(c)) {
      const std::string name = gguf_tensor_name(c, t.slot, t.layer);
      const int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 0;
      if (experts.write(t, name)) continue;
      if (t.slot == Slot::ExpGateUpHalves && split_gate_up) {  // gate and up apart; the twin's gate_up_proj joins them
        const int64_t E = t.shape[0], Ie = t.shape[1] / 2, Cin = t.shape[2];
        const std::string p = "blk." + std::to_string(t.layer) + ".";
        const std::vector<float> gate = w.weight_shaped(p + "ffn_gate_exps.weight", {E, Ie, Cin}, s_in);
        const std::vector<float> up = w.weight_shaped(p + "ffn_up_exps.weight", {E, Ie, Cin}, s_in);
        if (with_hf) {
          std::vector<float> joined(static_cast<size_t>(E * 2 * Ie * Cin));
          for (int64_t e = 0; e < E; ++e) {  // expert e: its I_e gate rows, then its I_e up rows
            const int64_t n = Ie * Cin;
            std::copy_n(gate.begin() + e * n, n, joined.begin() + e * 2 * n);
            std::copy_n(up.begin() + e * n, n, joined.begin() + e * 2 * n + n);
          }
          w.to_hf(t.name, t.shape, joined);
        }
        continue;
      }
      if (t.slot == Slot::ExpGateUpHalves || t.slot == Slot::ExpDownRows) {  // Gemma 4's (E, out, in), as Hugging Face's
        const float sd = t.slot == Slot::ExpDownRows ? 1.f / std::sqrt(static_cast<float>(t.shape[2])) : s_in;
        w.to_hf(t.name, t.shape, w.weight_shaped(name, t.shape, sd));
        continue;
      }
      if (t.shape.size() == 3) {  // a convolution kernel (channels, 1, K): float32 (channels, K), as llama.cpp keeps it
        std::normal_distribution<float> normal(0.f, 0.4f);
        std::vector<float> v(static_cast<size_t>(rows * t.shape[2]));
        for (auto& x : v) x = normal(w.rng);
        g.add_f32(name, {rows, t.shape[2]}, v);
        w.to_hf(t.name, t.shape, grouped_value_heads(c, t.slot, v, t.shape[2]));
        continue;
      }
      if (t.slot == Slot::LinALog) {  // the file holds −exp(A_log); the directory A_log
        std::normal_distribution<float> normal(0.f, 0.1f);
        std::vector<float> a_log(static_cast<size_t>(rows)), rate(static_cast<size_t>(rows));
        for (size_t i = 0; i < a_log.size(); ++i) a_log[i] = normal(w.rng), rate[i] = -std::exp(a_log[i]);
        g.add_f32(name, {rows}, rate);
        w.to_hf(t.name, t.shape, grouped_value_heads(c, t.slot, a_log, 1));
        continue;
      }
      if (t.shape.size() == 1) {
        if (slot_is_norm(t.slot)) {
          // Held as applied in GGUF (Gemma: 1 + w folded in by the converter); HF Gemma stores w.
          auto v = w.vector(name, rows, 1.f);
          if (c.norm_plus_one)
            for (auto& x : v) x -= 1.f;
          w.to_hf(t.name, t.shape, v);
          continue;
        }
        const bool scale = t.slot == Slot::LayerScalar || t.slot == Slot::RouterScale || t.slot == Slot::ExpertScale;
        auto v = w.vector(name, rows, scale ? 1.f : 0.f);  // Gemma 4's scales near 1
        if (permuted && (t.slot == Slot::Bq || t.slot == Slot::Bk))
          v = hf_rows(v, t.slot == Slot::Bq ? c.n_head : c.n_kv_head, static_cast<int>(d), 1);
        w.to_hf(t.name, t.shape, grouped_value_heads(c, t.slot, v, 1));
        continue;
      }
      float sd = s_in;
      switch (t.slot) {
        case Slot::TokEmb: sd = 0.5f; break;
        case Slot::Wq: case Slot::Wk: case Slot::Wqkv: sd = 1.5f * s_in; break;
        case Slot::Wo: sd = s_o; break;
        case Slot::Wdown: sd = s_hid; break;
        default: break;
      }
      // llama.cpp never quantizes a router (ffn_gate_inp): its files hold it as float32.
      auto v = w.weight_shaped(name, {rows, cols}, sd, 0.f, t.slot == Slot::Router);
      if (with_hf && permuted && (t.slot == Slot::Wq || t.slot == Slot::Wk))
        v = hf_rows(v, t.slot == Slot::Wq ? c.n_head : c.n_kv_head, static_cast<int>(d), cols);
      if (with_hf) v = grouped_value_heads(c, t.slot, v, cols);
      w.to_hf(t.name, t.shape, v);
    }
  }

  g.write(path);
  if (with_hf) {
    std::filesystem::create_directories(hf_dir);
    ModelConfig twin = c;
    if (family_traits(family_of(c)).gguf_yarn_truncate)
      twin.rope_scaling.truncate = true;  // what llama.cpp (and attnviz) reads from the file
    write_file_atomic(hf_dir + "/config.json", config_to_json(twin).dump(2) + "\n");
    w.hf.write(hf_dir + "/model.safetensors");
  }
}

std::string write_random_gguf(const ModelConfig& c, uint64_t seed, const std::string& dir, GgmlType type) {
  const GgufTokenizerData tok = char_gguf_tokenizer(c.vocab_size);
  // Written in a folder beside DIR and moved in when complete: a failure leaves nothing.
  write_dir_atomic(dir, [&](const std::string& tmp) { write_gguf_model(c, type, seed, tmp + "/model.gguf", &tok); });
  return dir + "/model.gguf";
}

}  // namespace attnviz
