#include "core/gpu/gl_ops.h"

#include <epoxy/gl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/engine/head_summary.h"
#include "core/error.h"

namespace attnviz {

// ---- GlBuffer -------------------------------------------------------------------------

GlBuffer::~GlBuffer() {
  if (id_) glDeleteBuffers(1, &id_);
}

GlBuffer& GlBuffer::operator=(GlBuffer&& o) noexcept {
  if (this != &o) {
    if (id_) glDeleteBuffers(1, &id_);
    id_ = o.id_, bytes_ = o.bytes_;
    o.id_ = 0, o.bytes_ = 0;
  }
  return *this;
}

void GlBuffer::ensure(size_t bytes, long long limit, const char* what) {
  bytes = std::max<size_t>(bytes, 16);
  if (bytes <= bytes_) return;
  if (static_cast<long long>(bytes) > limit)
    throw Error(std::string("the GPU backend needs a ") + std::to_string(bytes >> 20) + " MiB storage buffer for " +
                what + ", more than this device allows in one (" + std::to_string(limit >> 20) +
                " MiB)\n  HINT: use a shorter window (--block-size) or the CPU backend.");
  // A buffer that grows again grows by half as much again (within the limit), so that a
  // size that creeps up (the (T, T) attention scratch while typing: one more row and column
  // per key) is allocated a few times, not at every step: allocating a few hundred MB can
  // cost a GPU driver far more than a lazy mmap costs llvmpipe. Where the larger size does
  // not fit, the size asked for.
  const size_t grown = bytes_ > 0 ? std::max(bytes, static_cast<size_t>(std::min<long long>(
                                                         limit, static_cast<long long>(bytes_ + bytes_ / 2))))
                                  : bytes;
  if (!id_) glGenBuffers(1, &id_);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(grown), nullptr, GL_DYNAMIC_DRAW);
  GLenum e = glGetError();
  if (e == GL_OUT_OF_MEMORY && grown > bytes) {
    glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(bytes), nullptr, GL_DYNAMIC_DRAW);
    e = glGetError();
  } else {
    bytes = grown;
  }
  if (e == GL_OUT_OF_MEMORY)
    throw Error(std::string("the GPU ran out of memory allocating ") + std::to_string(bytes >> 20) + " MiB for " + what);
  bytes_ = bytes;
}

void GlBuffer::upload(const void* data, size_t bytes, size_t offset) {
  if (!bytes) return;
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glBufferSubData(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), data);
}

void GlBuffer::read(void* dst, size_t bytes, size_t offset) const {
  if (!bytes) return;
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes), dst);
}

const float* GlBuffer::map(size_t bytes, size_t offset) const {
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  const void* p = glMapBufferRange(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset),
                                   static_cast<GLsizeiptr>(std::max<size_t>(bytes, 4)), GL_MAP_READ_BIT);
  if (!p) throw Error("cannot map a GPU buffer for reading (GL error " + std::to_string(glGetError()) + ")");
  return static_cast<const float*>(p);
}

void GlBuffer::unmap() const {
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glUnmapBuffer(GL_SHADER_STORAGE_BUFFER);
}

// ---- weights on the device --------------------------------------------------------------

const char* gl_wtype_name(GlWType t) {
  switch (t) {
    case GlWType::F32: return "F32";
    case GlWType::F16: return "F16";
    case GlWType::BF16: return "BF16";
    case GlWType::Q8_0: return "Q8_0";
    case GlWType::Q4_0: return "Q4_0";
    case GlWType::Q4_K: return "Q4_K";
    case GlWType::Q6_K: return "Q6_K";
    case GlWType::Q4_1: return "Q4_1";
    case GlWType::Q5_0: return "Q5_0";
    case GlWType::Q5_1: return "Q5_1";
    case GlWType::Q5_K: return "Q5_K";
  }
  return "?";
}

GlWType gl_device_type(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return GlWType::F16;
    case GgmlType::BF16: return GlWType::BF16;
    case GgmlType::Q8_0: return GlWType::Q8_0;
    case GgmlType::Q4_0: return GlWType::Q4_0;
    case GgmlType::Q4_K: return GlWType::Q4_K;
    case GgmlType::Q6_K: return GlWType::Q6_K;
    case GgmlType::Q4_1: return GlWType::Q4_1;
    case GgmlType::Q5_0: return GlWType::Q5_0;
    case GgmlType::Q5_1: return GlWType::Q5_1;
    case GgmlType::Q5_K: return GlWType::Q5_K;
    default: return GlWType::F32;  // F32 itself; Q2_K, Q3_K: decoded on the host
  }
}

namespace {

GgmlType ggml_of(GlWType t) {
  switch (t) {
    case GlWType::F16: return GgmlType::F16;
    case GlWType::BF16: return GgmlType::BF16;
    case GlWType::Q8_0: return GgmlType::Q8_0;
    case GlWType::Q4_0: return GgmlType::Q4_0;
    case GlWType::Q4_K: return GgmlType::Q4_K;
    case GlWType::Q6_K: return GgmlType::Q6_K;
    case GlWType::Q4_1: return GgmlType::Q4_1;
    case GlWType::Q5_0: return GgmlType::Q5_0;
    case GlWType::Q5_1: return GgmlType::Q5_1;
    case GlWType::Q5_K: return GgmlType::Q5_K;
    default: return GgmlType::F32;
  }
}

// The layout of shaders/weights.glsl: per row `row_u32` uints; per block `qoff`, `qbytes`:
// the bytes of the block that go to the row, `doff` where its fp16 d lies (−1: it stays in
// the block); values of the float types padded to whole 16s.
struct Packing {
  int row_u32 = 0, nb = 0;
  int qoff = 0, qbytes = 0, doff = -1;
};

Packing packing(GlWType t, int64_t K) {
  Packing p;
  switch (t) {
    case GlWType::F16:
    case GlWType::BF16: p.row_u32 = static_cast<int>((K + 15) / 16 * 8); break;
    case GlWType::Q8_0: p.nb = static_cast<int>(K / 32), p.qoff = 2, p.qbytes = 32, p.doff = 0; break;
    case GlWType::Q4_0: p.nb = static_cast<int>(K / 32), p.qoff = 2, p.qbytes = 16, p.doff = 0; break;
    case GlWType::Q4_K: p.nb = static_cast<int>(K / 256), p.qoff = 0, p.qbytes = 144; break;
    case GlWType::Q6_K: p.nb = static_cast<int>(K / 256), p.qoff = 0, p.qbytes = 208, p.doff = 208; break;
    case GlWType::Q4_1: p.nb = static_cast<int>(K / 32), p.qoff = 0, p.qbytes = 20; break;
    case GlWType::Q5_0: p.nb = static_cast<int>(K / 32), p.qoff = 2, p.qbytes = 20, p.doff = 0; break;
    case GlWType::Q5_1: p.nb = static_cast<int>(K / 32), p.qoff = 0, p.qbytes = 24; break;
    case GlWType::Q5_K: p.nb = static_cast<int>(K / 256), p.qoff = 0, p.qbytes = 176; break;
    case GlWType::F32: throw std::logic_error("packing: float32 is not a compact type");
  }
  if (p.nb) p.row_u32 = p.nb * p.qbytes / 4;
  return p;
}

}  // namespace

void gl_upload_rows(GlWeight& out, GlWType t, const std::vector<GlRowSource>& src, long long limit, const char* what) {
  if (src.empty()) throw std::logic_error("gl_upload_rows: no rows");
  const int64_t K = src[0].rows->cols;
  int64_t N = 0;
  for (const GlRowSource& s : src) {
    if (s.rows->cols != K || s.rows->type != ggml_of(t))
      throw std::logic_error("gl_upload_rows: parts of different widths or types");
    N += s.n;
  }
  const Packing p = packing(t, K);
  const int64_t words = N * p.row_u32, scales = p.doff >= 0 ? N * p.nb : 0;
  const int64_t total = words + (scales + 1) / 2;
  if (total * 4 > limit)
    throw Error(std::string("the GPU backend needs a ") + std::to_string((total * 4) >> 20) +
                " MiB storage buffer for " + what + ", more than this device allows in one (" +
                std::to_string(limit >> 20) + " MiB)\n  HINT: use the CPU backend.");
  std::vector<uint32_t> buf(static_cast<size_t>(total), 0u);
  auto* bytes = reinterpret_cast<uint8_t*>(buf.data());
  uint16_t* d = reinterpret_cast<uint16_t*>(buf.data() + words);  // the fp16 scales region
  int64_t row = 0;
  for (const GlRowSource& s : src) {
    const StoredRows& w = *s.rows;
    const int bb = ggml_type_info(w.type).block_bytes;
    for (int64_t i = 0; i < s.n; ++i, ++row) {
      const int64_t r = s.order ? s.order[s.r0 + i] : s.r0 + i;
      if (r < 0 || r >= w.rows) throw std::logic_error("gl_upload_rows: row out of range");
      const uint8_t* from = w.data + r * w.row_bytes;
      uint8_t* to = bytes + row * p.row_u32 * 4;
      if (!p.nb) {  // F16 / BF16: the values, then zeros to the padded width
        std::memcpy(to, from, static_cast<size_t>(w.row_bytes));
        continue;
      }
      for (int b = 0; b < p.nb; ++b) {
        const uint8_t* blk = from + static_cast<int64_t>(b) * bb;
        std::memcpy(to + static_cast<int64_t>(b) * p.qbytes, blk + p.qoff, static_cast<size_t>(p.qbytes));
        if (p.doff >= 0) std::memcpy(d + row * p.nb + b, blk + p.doff, 2);  // little-endian fp16, as in the file
      }
    }
  }
  out.type = t;
  out.rows_are_outputs = true;
  out.N = static_cast<int>(N), out.K = static_cast<int>(K);
  out.row_u32 = p.row_u32, out.nb = p.nb, out.sc_u32 = static_cast<int>(words);
  out.buf.ensure(buf.size() * 4, limit, what);
  out.buf.upload(buf.data(), buf.size() * 4);
}

void gl_upload_f32(GlWeight& out, const Mat& m, bool rows_are_outputs, long long limit, const char* what) {
  out.type = GlWType::F32;
  out.rows_are_outputs = rows_are_outputs;
  out.N = static_cast<int>(rows_are_outputs ? m.rows() : m.cols());
  out.K = static_cast<int>(rows_are_outputs ? m.cols() : m.rows());
  out.row_u32 = out.nb = out.sc_u32 = 0;
  out.buf.ensure(sizeof(float) * static_cast<size_t>(m.size()), limit, what);
  out.buf.upload(m.data(), sizeof(float) * static_cast<size_t>(m.size()));
}

// ---- GlKernels ------------------------------------------------------------------------

namespace {

// Tuning for a software rasterizer (Mesa's llvmpipe) or a real GPU. On llvmpipe every
// barrier costs a switch between the work group's coroutines, so doing more per barrier
// pays: 128×128 tiles (8×8 results per invocation) for large products, about 2× faster
// at GPT-2 sizes, and the few-rows kernel instead of 16×16 tiles for narrow ones. On
// hardware, 64×64 and 16×16 tiles keep more work groups busy at our sizes.
// Env ATTNVIZ_GL_TUNING=software|hardware overrides the detection (tests use both).
bool software_tuning(const GlContext& ctx) {
  if (const char* v = std::getenv("ATTNVIZ_GL_TUNING"); v && *v) return std::string(v) == "software";
  return ctx.renderer().find("llvmpipe") != std::string::npos || ctx.renderer().find("softpipe") != std::string::npos;
}

unsigned groups(int n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

void bind(int binding, const GlBuffer& b) { glBindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(binding), b.id()); }

}  // namespace

GlKernels::GlKernels(const GlContext& ctx, const ShaderSources& src)
    : ctx_(ctx),
      src_(src),
      software_(software_tuning(ctx)),
      embed_(src, "embed.comp"),
      norm_(src, "norm.comp"),
      gemm_big_(src, "gemm.comp", "#define RM 4\n"),
      gemm_huge_(src, "gemm.comp", "#define RM 8\n"),
      gemm_small_(src, "gemm.comp", "#define RM 1\n"),
      gemv1_(src, "gemv.comp", "#define MR 1\n"),
      gemv4_(src, "gemv.comp", "#define MR 4\n"),
      rope_(src, "rope.comp"),
      softmax_(src, "attn_softmax.comp"),
      gelu_(src, "gelu.comp"),
      swiglu_(src, "swiglu.comp"),
      ablate_(src, "ablate_head.comp"),
      qk_norm_(src, "qk_norm.comp"),
      softcap_(src, "softcap.comp") {
  dummy_.ensure(16, limit(), "a placeholder");
  if (const char* v = std::getenv("ATTNVIZ_GL_PROFILE")) profile_ = *v && *v != '0';
}

void GlKernels::dispatch(const GlProgram& prog, unsigned gx, unsigned gy, unsigned gz) {
  const unsigned most = static_cast<unsigned>(ctx_.max_group_count());
  if (gx > most || gy > most || gz > most)
    throw Error("a GPU dispatch of " + std::to_string(gx) + "×" + std::to_string(gy) + "×" + std::to_string(gz) +
                " work groups exceeds this device's limit of " + std::to_string(most) + " per dimension");
  const auto t0 = std::chrono::steady_clock::now();
  if (gx && gy && gz) glDispatchCompute(gx, gy, gz);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT | GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT);
  if (profile_) {
    glFinish();
    std::string label = prog.name() + (&prog == &gemm_small_  ? " 16×16"
                                       : &prog == &gemm_big_  ? " 64×64"
                                       : &prog == &gemm_huge_ ? " 128×128"
                                       : &prog == &gemv1_     ? " 1 row"
                                       : &prog == &gemv4_     ? " 4 rows"
                                                              : "");
    for (const auto& [key, wp] : wprogs_)
      if (&wp == &prog) label = key;  // "gemv.comp Q4_K #define MR 1"
    while (!label.empty() && label.back() == '\n') label.pop_back();
    auto& e = profile_ms_[label];
    e.first += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    e.second += 1;
  }
}

std::string GlKernels::profile_take() {
  std::string out;
  char line[160];
  for (const auto& [name, e] : profile_ms_) {
    std::snprintf(line, sizeof line, "  %-28s %6d dispatches %10.3f ms\n", name.c_str(), e.second, e.first);
    out += line;
  }
  profile_ms_.clear();
  return out;
}

void GlKernels::embed(const GlBuffer& ids, int n, int C, const GlBuffer& tok, int v0, int vn, const GlBuffer* pos,
                      int pos0, GlBuffer& x, float scale) {
  embed_.use();
  embed_.set("n", n), embed_.set("C", C), embed_.set("v0", v0), embed_.set("vn", vn), embed_.set("scale", scale);
  embed_.set("pos0", pos0), embed_.set("use_pos", pos ? 1 : 0);
  bind(0, ids), bind(1, tok), bind(2, pos ? *pos : dummy_), bind(3, x);
  dispatch(embed_, groups(C, 64), static_cast<unsigned>(n), 1);
}

GlProgram& GlKernels::wprog(const char* file, GlWType t, const std::string& defines) {
  const std::string key = std::string(file) + " " + gl_wtype_name(t) + " " + defines;
  auto it = wprogs_.find(key);
  if (it == wprogs_.end()) {
    const std::string d = "#define WTYPE " + std::to_string(static_cast<int>(t)) + "\n" + defines;
    it = wprogs_.emplace(key, GlProgram(src_, file, d)).first;
  }
  return it->second;
}

GlProgram& GlKernels::prog(const char* file, const std::string& defines) {
  const std::string key = std::string(file) + " " + defines;
  auto it = wprogs_.find(key);
  if (it == wprogs_.end()) it = wprogs_.emplace(key, GlProgram(src_, file, defines)).first;
  return it->second;
}

void GlKernels::causal_conv(const GlBuffer& x, int ldx, int col0, int hist, int n, int Ch, const GlBuffer& w, int K,
                            const GlBuffer* bias, bool silu, GlBuffer& out) {
  GlProgram& p = prog("causal_conv.comp");
  p.use();
  p.set("n", n), p.set("Ch", Ch), p.set("K", K), p.set("hist", hist), p.set("ldx", ldx), p.set("col0", col0);
  p.set("has_bias", bias ? 1 : 0), p.set("act_silu", silu ? 1 : 0);
  bind(0, x), bind(1, w), bind(2, bias ? *bias : dummy_), bind(3, out);
  dispatch(p, groups(Ch, 64), static_cast<unsigned>(n), 1);
}

void GlKernels::l2_heads(GlBuffer& x, int n, int ld, int col0, int heads, int d, float scale) {
  GlProgram& p = prog("l2_heads.comp");
  p.use();
  p.set("ld", ld), p.set("col0", col0), p.set("d", d), p.set("scale", scale);
  bind(0, x);
  dispatch(p, static_cast<unsigned>(n), static_cast<unsigned>(heads), 1);
}

void GlKernels::delta_gates(GlBuffer& bg, int n, int Hv, const GlBuffer& neg_a, const GlBuffer& dt_bias) {
  GlProgram& p = prog("delta_gates.comp");
  p.use();
  p.set("n", n), p.set("Hv", Hv);
  bind(0, bg), bind(1, neg_a), bind(2, dt_bias);
  dispatch(p, groups(Hv, 64), static_cast<unsigned>(n), 1);
}

void GlKernels::delta_rule(const GlBuffer& conv, const LinearAttnDims& ld, const GlBuffer& bg, int n, int pos0,
                           GlBuffer& state, GlBuffer& o, GlBuffer& snaps, int snap_every) {
  GlProgram& p = prog("delta_rule.comp", "#define DK " + std::to_string(ld.k_dim) + "\n");
  p.use();
  p.set("n", n), p.set("ldc", ld.conv_channels()), p.set("Hv", ld.v_heads), p.set("Hk", ld.k_heads);
  p.set("dv", ld.v_dim), p.set("group", ld.v_tiled ? 1 : ld.group()), p.set("tiled", ld.v_tiled ? 1 : 0);
  p.set("pos0", pos0), p.set("snap_every", snap_every), p.set("snap0", pos0 / snap_every);
  bind(0, conv), bind(1, bg), bind(2, state), bind(3, o), bind(4, snaps.id() ? snaps : dummy_);
  dispatch(p, groups(ld.v_dim, 64), static_cast<unsigned>(ld.v_heads), 1);
}

void GlKernels::gated_rms(const GlBuffer& o, const GlBuffer& z, int n, int heads, int d, const GlBuffer& w, float eps,
                          GlBuffer& y) {
  GlProgram& p = prog("gated_rms.comp");
  p.use();
  p.set("heads", heads), p.set("d", d), p.set("eps", eps);
  bind(0, o), bind(1, z), bind(2, w), bind(3, y);
  dispatch(p, static_cast<unsigned>(n), static_cast<unsigned>(heads), 1);
}

void GlKernels::gate_mul(GlBuffer& gate, int n, int cols, const GlBuffer& att, GlBuffer& y) {
  GlProgram& p = prog("gate_mul.comp");
  p.use();
  p.set("n", n), p.set("cols", cols);
  bind(0, gate), bind(1, att), bind(2, y);
  dispatch(p, groups(cols, 64), static_cast<unsigned>(n), 1);
}

void GlKernels::mul(const GlBuffer& a, int lda, int ca, const GlBuffer& b, int ldb, int cb, int rows, int cols,
                    GlBuffer& out) {
  GlProgram& p = prog("mul.comp");
  p.use();
  p.set("rows", rows), p.set("cols", cols), p.set("lda", lda), p.set("ca", ca), p.set("ldb", ldb), p.set("cb", cb);
  bind(0, a), bind(1, b), bind(2, out);
  dispatch(p, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::copy_cols(const GlBuffer& src, int src_off, int lds, GlBuffer& dst, int dst_off, int ldd, int rows,
                          int cols) {
  GlProgram& p = prog("copy_cols.comp");
  p.use();
  p.set("rows", rows), p.set("cols", cols), p.set("src_off", src_off), p.set("lds", lds), p.set("dst_off", dst_off);
  p.set("ldd", ldd);
  bind(0, src), bind(1, dst);
  dispatch(p, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::scale(GlBuffer& x, int rows, int cols, int ld, float s) {
  GlProgram& p = prog("scale.comp");
  p.use();
  p.set("rows", rows), p.set("cols", cols), p.set("ld", ld), p.set("s", s);
  bind(0, x);
  dispatch(p, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::add(const GlBuffer& x, GlBuffer& y, int rows, int cols, int ld) {
  GlProgram& p = prog("axpy.comp");
  p.use();
  p.set("rows", rows), p.set("cols", cols), p.set("ld", ld);
  bind(0, x), bind(1, y);
  dispatch(p, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::embed(const GlBuffer& ids, int n, int C, const GlWeight& tok, int v0, int vn, const GlBuffer* pos,
                      int pos0, GlBuffer& x, float scale) {
  if (tok.type == GlWType::F32) return embed(ids, n, C, tok.buf, v0, vn, pos, pos0, x, scale);
  GlProgram& p = wprog("embed.comp", tok.type, "");
  p.use();
  p.set("n", n), p.set("C", C), p.set("v0", v0), p.set("vn", vn), p.set("scale", scale);
  p.set("pos0", pos0), p.set("use_pos", pos ? 1 : 0);
  p.set("w_row", tok.row_u32), p.set("w_nb", tok.nb), p.set("w_sc", tok.sc_u32);
  bind(0, ids), bind(1, tok.buf), bind(2, pos ? *pos : dummy_), bind(3, x);
  dispatch(p, groups(C, 64), static_cast<unsigned>(n), 1);
}

void GlKernels::norm(const GlBuffer& x, int n, int C, const GlBuffer& w, const GlBuffer* b, float eps, GlBuffer& y,
                     bool accumulate) {
  norm_.use();
  norm_.set("C", C), norm_.set("rms", b ? 0 : 1), norm_.set("eps", eps), norm_.set("accumulate", accumulate ? 1 : 0);
  bind(0, x), bind(1, w), bind(2, b ? *b : dummy_), bind(3, y);
  dispatch(norm_, static_cast<unsigned>(n), 1, 1);
}

void GlKernels::qk_norm(GlBuffer& x, int row0, int n, int ld, int col0, int heads, int d, const GlBuffer& w, float eps) {
  qk_norm_.use();
  qk_norm_.set("row0", row0), qk_norm_.set("ld", ld), qk_norm_.set("col0", col0), qk_norm_.set("d", d);
  qk_norm_.set("eps", eps);
  bind(0, x), bind(1, w);
  dispatch(qk_norm_, static_cast<unsigned>(n), static_cast<unsigned>(heads), 1);
}

void GlKernels::softcap(GlBuffer& x, int rows, int cols, int ld, float cap) {
  softcap_.use();
  softcap_.set("rows", rows), softcap_.set("cols", cols), softcap_.set("ld", ld), softcap_.set("cap", cap);
  bind(0, x);
  dispatch(softcap_, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::gemm(const GemmArgs& g0) {
  GemmArgs g = g0;
  const bool compact = g.w && g.w->type != GlWType::F32;
  if (g.w) {  // B is the weight: its N rows (or columns) of K values
    g.batch = 1, g.b_zdiv = 1, g.b_z0 = 0;
    g.b_trans = g.w->rows_are_outputs;
    g.b = {&g.w->buf, 0, g.b_trans ? g.w->K : g.w->N, 0};
    if (g.N != g.w->N || g.K != g.w->K) throw std::logic_error("gemm: the weight's shape differs from N, K");
  }
  if (g.M <= 0 || g.N <= 0 || g.batch <= 0) return;
  // Large tiles (64×64, 4×4 per invocation) when both sides fill them, else 16×16.
  // Few rows: gemv.comp. Else tiles of 16·RM square (RM×RM results per invocation):
  // RM = 8 for large products in software (software_tuning), 4 unless one side is narrow
  // (a head's d columns in a small model); narrow ones get 16×16 tiles on hardware and
  // gemv.comp in software.
  const bool huge = software_ && g.M >= 96 && g.N >= 96;
  const bool big = !huge && g.M >= 16 && g.N >= 32;
  const bool few = g.M <= 8 || (software_ && !huge && !big);
  const int ts = huge ? 128 : big ? 64 : 16;
  // One row through a compact weight on hardware: gemv_split.comp, a team of invocations
  // per row of W reading it together (gemv.comp's one row per invocation reads memory a
  // row apart: about 22 GB/s on an H200 for an append's products).
  const bool split = compact && g.M == 1 && !software_;
  GlProgram& p = !compact ? (few    ? (g.M == 1 ? gemv1_ : gemv4_)
                             : huge ? gemm_huge_
                             : big  ? gemm_big_
                                    : gemm_small_)
                 : split  ? wprog("gemv_split.comp", g.w->type, "")
                 : few    ? wprog("gemv.comp", g.w->type, g.M == 1 ? "#define MR 1\n" : "#define MR 4\n")
                          : wprog("gemm.comp", g.w->type, "#define RM " + std::to_string(ts / 16) + "\n");
  p.use();
  if (compact) {
    p.set("w_row", g.w->row_u32), p.set("w_nb", g.w->nb), p.set("w_sc", g.w->sc_u32);
    p.set("alpha", g.alpha);
  }
  p.set("M", g.M), p.set("N", g.N), p.set("K", g.K);
  p.set("a_off", g.a.off), p.set("lda", g.a.ld), p.set("a_z", g.a.zstride);
  p.set("b_off", g.b.off), p.set("ldb", g.b.ld), p.set("b_z", g.b.zstride);
  p.set("b_zdiv", std::max(1, g.b_zdiv)), p.set("b_z0", g.b_z0), p.set("b_trans", g.b_trans ? 1 : 0);
  p.set("c_off", g.c.off), p.set("ldc", g.c.ld), p.set("c_z", g.c.zstride);
  p.set("has_bias", g.bias.buf ? 1 : 0), p.set("bias_off", g.bias.off), p.set("bias_z", g.bias.zstride);
  p.set("accumulate", g.accumulate ? 1 : 0);
  bind(0, *g.a.buf), bind(1, *g.b.buf), bind(2, *g.c.buf), bind(3, g.bias.buf ? *g.bias.buf : dummy_);
  if (split) dispatch(p, groups(g.N, 8), 1, 1);  // 8 rows of W per work group (ROWS)
  else if (few) dispatch(p, groups(g.N, 64), groups(g.M, 4), static_cast<unsigned>(g.batch));
  else dispatch(p, groups(g.N, ts), groups(g.M, ts), static_cast<unsigned>(g.batch));
}

void GlKernels::rope(GlBuffer& x, int row0, int n, int ld, int col0, int heads, int d, int half_rot, int pos0,
                     const GlBuffer& table) {
  if (half_rot <= 0) return;
  rope_.use();
  rope_.set("n", n), rope_.set("row0", row0), rope_.set("ld", ld), rope_.set("col0", col0);
  rope_.set("heads", heads), rope_.set("d", d), rope_.set("half_rot", half_rot), rope_.set("pos0", pos0);
  bind(0, x), bind(1, table);
  dispatch(rope_, groups(heads * half_rot, 64), static_cast<unsigned>(n), 1);
}

void GlKernels::attn_softmax(const GlBuffer& scores, int heads, int T, int p, const AttnRule& rule, GlBuffer& probs,
                             const GlBuffer* sinks, int head0, GlBuffer* sink_p) {
  softmax_.use();
  softmax_.set("T", T), softmax_.set("p", p), softmax_.set("scale", rule.scale);
  softmax_.set("softcap", rule.softcap), softmax_.set("window", rule.window);
  softmax_.set("has_sinks", sinks ? 1 : 0), softmax_.set("head0", head0);
  bind(0, scores), bind(1, probs), bind(2, sinks ? *sinks : dummy_), bind(3, sink_p ? *sink_p : dummy_);
  dispatch(softmax_, static_cast<unsigned>(T), static_cast<unsigned>(heads), 1);
}

void GlKernels::gelu(GlBuffer& x, int rows, int cols, int ld) {
  gelu_.use();
  gelu_.set("rows", rows), gelu_.set("cols", cols), gelu_.set("ld", ld);
  bind(0, x);
  dispatch(gelu_, groups(cols, 64), static_cast<unsigned>(rows), 1);
}

void GlKernels::ablate_head(GlBuffer& x, int rows, int d, int ld, int col0, bool mean) {
  ablate_.use();
  ablate_.set("rows", rows), ablate_.set("d", d), ablate_.set("ld", ld), ablate_.set("col0", col0);
  ablate_.set("mean_mode", mean ? 1 : 0);
  bind(0, x);
  dispatch(ablate_, groups(d, 64), 1, 1);
}

void GlKernels::swiglu(const GlBuffer& gu, int rows, int I, GlBuffer& y, bool geglu) {
  swiglu_.use();
  swiglu_.set("rows", rows), swiglu_.set("I", I), swiglu_.set("geglu", geglu ? 1 : 0);
  bind(0, gu), bind(1, y);
  dispatch(swiglu_, groups(I, 64), static_cast<unsigned>(rows), 1);
}

// Timestamps (glQueryCounter) rather than GL_TIME_ELAPSED: Mesa's llvmpipe runs compute
// dispatches outside the query's scope and reports 0 elapsed, while its timestamps are
// right; on hardware the two measure the same.
void GlKernels::timer_begin() {
  if (!ctx_.has_timer_query() || timing_) return;
  if (queries_used_ + 2 > queries_.size()) {
    queries_.resize(queries_used_ + 2, 0);
    glGenQueries(2, &queries_[queries_used_]);
  }
  glQueryCounter(queries_[queries_used_++], GL_TIMESTAMP);
  timing_ = true;
}

void GlKernels::timer_end() {
  if (!timing_) return;
  glQueryCounter(queries_[queries_used_++], GL_TIMESTAMP);
  timing_ = false;
}

void GlKernels::timer_discard() {
  timing_ = false;
  queries_used_ = 0;
}

double GlKernels::timer_take_ms() {
  timer_end();
  if (!ctx_.has_timer_query()) return -1;
  GLuint64 total = 0;
  for (size_t i = 0; i + 1 < queries_used_; i += 2) {
    GLuint64 t0 = 0, t1 = 0;
    glGetQueryObjectui64v(queries_[i], GL_QUERY_RESULT, &t0);
    glGetQueryObjectui64v(queries_[i + 1], GL_QUERY_RESULT, &t1);
    if (t1 > t0) total += t1 - t0;
  }
  queries_used_ = 0;
  return static_cast<double>(total) / 1e6;
}

// ---- attention ------------------------------------------------------------------------

void gl_attention(GlKernels& k, int H, int KV, int d, const GlBuffer& qkv, int T, int p, const AttnRule& rule,
                  GlAttentionScratch& s, GlBuffer& att, LayerTrace& lt, const GlSummaryArgs& sum, const GlBuffer* sinks) {
  const int n = T - p, ld = (H + 2 * KV) * d, G = H / KV;
  const size_t tt = static_cast<size_t>(T) * static_cast<size_t>(T);
  // Heads per group: as many as fit one storage block.
  const long long per_head = static_cast<long long>(tt * sizeof(float));
  const int hg = static_cast<int>(std::max<long long>(1, std::min<long long>(H, k.limit() / per_head)));
  const size_t bytes = static_cast<size_t>(hg) * tt * sizeof(float);
  s.scores.ensure(bytes, k.limit(), "attention scores");
  s.probs.ensure(bytes, k.limit(), "attention weights");
  if (sinks) s.sink_p.ensure(sizeof(float) * static_cast<size_t>(H) * T, k.limit(), "the sinks' weights");
  lt.scale = rule.scale;  // the trace derives scaled, capped and masked from these
  lt.softcap = rule.softcap;
  lt.window = rule.window;
  const int it = static_cast<int>(tt);
  const bool summaries = sum.targets != nullptr;
  const int tb = lt.thumb_bucket, tn = summaries ? static_cast<int>(lt.thumbs.dim(1)) : 0;
  if (summaries) {  // thumbnail rows [redo, p) that the kept buckets lack: recomputed from q and k
    const int old_n = sum.old_thumbs.shape.empty() ? 0 : static_cast<int>(sum.old_thumbs.dim(1));
#pragma omp parallel for schedule(dynamic) if (p >= 32)
    for (int h = 0; h < H; ++h) {  // (a head's thumbnail is its own: heads in threads)
      std::vector<float> rows;
      float* thumb = lt.thumbs.head(h);
      for (int r0 = thumb_keep(old_n ? sum.old_thumbs.head(h) : nullptr, sum.old_bucket, old_n, sum.old_T, p, tb, tn, thumb);
           r0 < p;) {
        const int rb = std::min(64, p - r0);
        rows.resize(static_cast<size_t>(rb) * T);
        lt.attention_rows(h, r0, rb, nullptr, rows.data());
        for (int r = 0; r < rb; ++r) thumb_add_row(rows.data() + static_cast<size_t>(r) * T, r0 + r, tb, tn, thumb);
        r0 += rb;
      }
    }
  }
  for (int h0 = 0; h0 < H; h0 += hg) {
    const int nh = std::min(hg, H - h0);
    // scores of the new rows against all keys: q[p…T) · kᵀ
    GemmArgs g;
    g.M = n, g.N = T, g.K = d, g.batch = nh;
    g.a = {&qkv, p * ld + h0 * d, ld, d};
    g.b = {&qkv, H * d, ld, d};
    g.b_trans = true, g.b_zdiv = G, g.b_z0 = h0;
    g.c = {&s.scores, p * T, T, it};
    k.gemm(g);
    if (p > 0) {  // old queries against the new keys (above the diagonal, recorded all the same)
      GemmArgs c = g;
      c.M = p, c.N = n;
      c.a.off = h0 * d;
      c.b.off = p * ld + H * d;
      c.c.off = p;
      k.gemm(c);
    }
    k.attn_softmax(s.scores, nh, T, p, rule, s.probs, sinks, h0, sinks ? &s.sink_p : nullptr);
    // probs · v of the new rows, into their heads' columns of att (n, H·d)
    GemmArgs o;
    o.M = n, o.N = d, o.K = T, o.batch = nh;
    o.a = {&s.probs, p * T, T, it};
    o.b = {&qkv, (H + KV) * d, ld, d};
    o.b_zdiv = G, o.b_z0 = h0;
    o.c = {&att, h0 * d, H * d, d};
    k.gemm(o);

    k.timer_end();
    Tensor* dst[2] = {&lt.scores, &lt.probs};
    GlBuffer* src[2] = {&s.scores, &s.probs};
    // The new rows' summaries from probs rows [p, T) of each head: read alone when compact
    // (an append reads one row per head), else from the mapping the trace is copied from.
    // Rows are shared out by thumbnail row (rows i/tb = I to one thread), so that no two
    // threads fold into one cell; threads where the rows are more than a short append's
    // (serial, the likely cause of most of a full pass's host time on an H200 at T = 2048:
    // 6.5 s wall for 0.9 s of kernels). GpuForward.CompactTracesAndSummaries… runs both.
    auto summarize = [&](int hl, const float* P) {  // P: rows [p, T) of head h0 + hl, (n, T)
      const int h = h0 + hl;
      float* stats = lt.row_stats.head(h);
      float* thumb = lt.thumbs.head(h);
      const int64_t stats_ld = lt.row_stats.ld();
      const int I0 = p / tb, I1 = (T - 1) / tb + 1;
#pragma omp parallel for schedule(dynamic) if (static_cast<int64_t>(n) * T >= 2048)
      for (int I = I0; I < I1; ++I)
        for (int i = std::max(p, I * tb); i < std::min(T, (I + 1) * tb); ++i) {
          const float* row = P + static_cast<size_t>(i - p) * T;
          row_stats(row, i, (*sum.targets)[static_cast<size_t>(i - p)], stats + i * stats_ld);
          thumb_add_row(row, i, tb, tn, thumb);
        }
    };
    if (lt.compact) {
      if (summaries) {
        std::vector<float>& rows = s.rows;
        rows.resize(static_cast<size_t>(n) * T);
        for (int hl = 0; hl < nh; ++hl) {
          s.probs.read(rows.data(), sizeof(float) * rows.size(), sizeof(float) * (static_cast<size_t>(hl) * tt + static_cast<size_t>(p) * T));
          summarize(hl, rows.data());
        }
      }
      k.timer_begin();
      continue;
    }
    for (int t = 0; t < 2; ++t) {
      const float* m = src[t]->map(static_cast<size_t>(nh) * tt * sizeof(float));
      for (int hl = 0; hl < nh && t == 1 && summaries; ++hl) summarize(hl, m + static_cast<size_t>(hl) * tt + static_cast<size_t>(p) * T);
      for (int hl = 0; hl < nh; ++hl) {
        const float* from = m + static_cast<size_t>(hl) * tt;
        float* to = dst[t]->head(h0 + hl);
        const size_t ld = static_cast<size_t>(dst[t]->ld());  // rows of the trace tensor may have room to grow
        for (int i = p; i < T; ++i)
          std::memcpy(to + i * ld, from + static_cast<size_t>(i) * T, static_cast<size_t>(T) * sizeof(float));
        for (int i = 0; i < p; ++i)
          std::memcpy(to + i * ld + p, from + static_cast<size_t>(i) * T + p, static_cast<size_t>(n) * sizeof(float));
      }
      src[t]->unmap();
    }
    k.timer_begin();
  }
  if (sinks) {  // p_sink of the new rows, (H, T) rows [p, T) of each head
    k.timer_end();
    std::vector<float>& rows = s.rows;
    rows.resize(static_cast<size_t>(H) * T);
    s.sink_p.read(rows.data(), sizeof(float) * rows.size());
    for (int h = 0; h < H; ++h)
      std::copy(rows.begin() + static_cast<int64_t>(h) * T + p, rows.begin() + static_cast<int64_t>(h + 1) * T,
                lt.sink.data.begin() + static_cast<int64_t>(h) * T + p);
    k.timer_begin();
  }
}

std::vector<float> rope_table(int positions, const std::vector<double>& inv_freq_d, float mscale,
                              const ModelConfig* query_temperature) {
  const int half = static_cast<int>(inv_freq_d.size());
  const std::vector<float> inv_freq(inv_freq_d.begin(), inv_freq_d.end());  // rounded as rope_inplace does
  std::vector<float> t(static_cast<size_t>(positions) * static_cast<size_t>(half) * 2);
  for (int pos = 0; pos < positions; ++pos)
    for (int i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * inv_freq[i];
      const size_t at = (static_cast<size_t>(pos) * half + i) * 2;
      const float m = query_temperature ? mscale * query_temperature->query_temperature(pos) : mscale;
      t[at] = static_cast<float>(std::cos(a)) * m;
      t[at + 1] = static_cast<float>(std::sin(a)) * m;
    }
  return t;
}

// ---- GlHostOps ------------------------------------------------------------------------

namespace {

template <class M>
void put(GlBuffer& b, const M& m, long long limit) {
  b.ensure(static_cast<size_t>(m.size()) * sizeof(float), limit, "a test matrix");
  b.upload(m.data(), static_cast<size_t>(m.size()) * sizeof(float));
}

Mat get(const GlBuffer& b, Eigen::Index rows, Eigen::Index cols) {
  Mat m(rows, cols);
  b.read(m.data(), static_cast<size_t>(m.size()) * sizeof(float));
  return m;
}

}  // namespace

GlHostOps::GlHostOps(const ShaderSources& src) : ctx_(std::make_unique<GlContext>()) {
  GlContext::Current cur(*ctx_);
  k_ = std::make_unique<GlKernels>(*ctx_, src);
}

GlHostOps::~GlHostOps() {
  try {
    GlContext::Current cur(*ctx_);
    k_.reset();
  } catch (const std::exception&) {  // no context: the GL objects go with it
  }
}

Mat GlHostOps::embed(const Mat& tok, const Mat& pos, const std::vector<int>& ids, int pos0, float scale) {
  GlContext::Current cur(*ctx_);
  const int n = static_cast<int>(ids.size()), C = static_cast<int>(tok.cols());
  GlBuffer bi, bt, bp, bx;
  bi.ensure(ids.size() * sizeof(int), k_->limit(), "ids");
  bi.upload(ids.data(), ids.size() * sizeof(int));
  // Two chunks of vocabulary rows, to exercise the chunked path.
  const int V = static_cast<int>(tok.rows()), half = V / 2;
  if (pos.size()) put(bp, pos, k_->limit());
  bx.ensure(static_cast<size_t>(n) * C * sizeof(float), k_->limit(), "x");
  for (int v0 : {0, half}) {
    const int vn = v0 == 0 ? half : V - half;
    if (vn <= 0) continue;
    Mat chunk = tok.middleRows(v0, vn);
    put(bt, chunk, k_->limit());
    k_->embed(bi, n, C, bt, v0, vn, pos.size() ? &bp : nullptr, pos0, bx, scale);
  }
  return get(bx, n, C);
}

Mat GlHostOps::layer_norm(const Mat& x, const Vec& w, const Vec& b, float eps) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw, bb, by;
  put(bx, x, k_->limit()), put(bw, w, k_->limit()), put(bb, b, k_->limit());
  by.ensure(static_cast<size_t>(x.size()) * sizeof(float), k_->limit(), "y");
  k_->norm(bx, static_cast<int>(x.rows()), static_cast<int>(x.cols()), bw, &bb, eps, by);
  return get(by, x.rows(), x.cols());
}

Mat GlHostOps::rms_norm(const Mat& x, const Vec& w, float eps) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw, by;
  put(bx, x, k_->limit()), put(bw, w, k_->limit());
  by.ensure(static_cast<size_t>(x.size()) * sizeof(float), k_->limit(), "y");
  k_->norm(bx, static_cast<int>(x.rows()), static_cast<int>(x.cols()), bw, nullptr, eps, by);
  return get(by, x.rows(), x.cols());
}

Mat GlHostOps::rms_norm_add(const Mat& x, const Vec& w, float eps, const Mat& y) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw, by;
  put(bx, x, k_->limit()), put(bw, w, k_->limit()), put(by, y, k_->limit());
  k_->norm(bx, static_cast<int>(x.rows()), static_cast<int>(x.cols()), bw, nullptr, eps, by, true);
  return get(by, x.rows(), x.cols());
}

Mat GlHostOps::rms_norm_heads(const Mat& x, int heads, int d, const Vec& w, float eps) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw;
  put(bx, x, k_->limit()), put(bw, w, k_->limit());
  k_->qk_norm(bx, 0, static_cast<int>(x.rows()), static_cast<int>(x.cols()), 0, heads, d, bw, eps);
  return get(bx, x.rows(), x.cols());
}

Mat GlHostOps::softcap(const Mat& x, float cap) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx;
  put(bx, x, k_->limit());
  k_->softcap(bx, static_cast<int>(x.rows()), static_cast<int>(x.cols()), static_cast<int>(x.cols()), cap);
  return get(bx, x.rows(), x.cols());
}

Mat GlHostOps::linear(const Mat& x, const Mat& w, const Vec& b) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw, bb, by;
  put(bx, x, k_->limit()), put(bw, w, k_->limit());
  if (b.size()) put(bb, b, k_->limit());
  const int M = static_cast<int>(x.rows()), K = static_cast<int>(x.cols()), N = static_cast<int>(w.cols());
  by.ensure(static_cast<size_t>(M) * N * sizeof(float), k_->limit(), "y");
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = {&bx, 0, K, 0}, g.b = {&bw, 0, N, 0}, g.c = {&by, 0, N, 0};
  if (b.size()) g.bias = {&bb, 0, 0, 0};
  k_->gemm(g);
  return get(by, M, N);
}

Mat GlHostOps::linear_bt(const Mat& x, const Mat& wt) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bw, by;
  put(bx, x, k_->limit()), put(bw, wt, k_->limit());
  const int M = static_cast<int>(x.rows()), K = static_cast<int>(x.cols()), N = static_cast<int>(wt.rows());
  by.ensure(static_cast<size_t>(M) * N * sizeof(float), k_->limit(), "y");
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = {&bx, 0, K, 0}, g.b = {&bw, 0, K, 0}, g.c = {&by, 0, N, 0};
  g.b_trans = true;
  k_->gemm(g);
  return get(by, M, N);
}

namespace {

// A stored matrix on the device as the GL backend holds it: compact where it can be, else
// decoded to float32 (N, K) on the host.
void upload_stored(GlWeight& out, const StoredRows& w, long long limit) {
  const GlWType t = gl_device_type(w.type);
  if (t != GlWType::F32) return gl_upload_rows(out, t, {GlRowSource{&w, nullptr, 0, w.rows}}, limit, "a test matrix");
  Mat m(w.rows, w.cols);
  w.decode_rows(0, w.rows, m.data(), w.cols);
  gl_upload_f32(out, m, true, limit, "a test matrix");
}

}  // namespace

Mat GlHostOps::linear_stored(const Mat& x, const StoredRows& w, const Vec& b, float alpha) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bb, by;
  GlWeight gw;
  put(bx, x, k_->limit());
  upload_stored(gw, w, k_->limit());
  if (b.size()) put(bb, b, k_->limit());
  const int M = static_cast<int>(x.rows()), K = static_cast<int>(x.cols()), N = static_cast<int>(w.rows);
  by.ensure(static_cast<size_t>(M) * N * sizeof(float), k_->limit(), "y");
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = {&bx, 0, K, 0}, g.c = {&by, 0, N, 0};
  g.w = &gw, g.alpha = alpha;
  if (b.size()) g.bias = {&bb, 0, 0, 0};
  k_->gemm(g);
  return get(by, M, N);
}

Mat GlHostOps::embed_stored(const StoredRows& table, const std::vector<int>& ids) {
  GlContext::Current cur(*ctx_);
  const int n = static_cast<int>(ids.size()), C = static_cast<int>(table.cols), V = static_cast<int>(table.rows);
  GlBuffer bi, bx;
  GlWeight gw;
  bi.ensure(ids.size() * sizeof(int), k_->limit(), "ids");
  bi.upload(ids.data(), ids.size() * sizeof(int));
  upload_stored(gw, table, k_->limit());
  bx.ensure(static_cast<size_t>(n) * C * sizeof(float), k_->limit(), "x");
  k_->embed(bi, n, C, gw, 0, V, nullptr, 0, bx, 1.f);
  return get(bx, n, C);
}

Mat GlHostOps::gelu(const Mat& x) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx;
  put(bx, x, k_->limit());
  k_->gelu(bx, static_cast<int>(x.rows()), static_cast<int>(x.cols()), static_cast<int>(x.cols()));
  return get(bx, x.rows(), x.cols());
}

Mat GlHostOps::swiglu(const Mat& gate, const Mat& up, bool geglu) {
  GlContext::Current cur(*ctx_);
  Mat gu(gate.rows(), gate.cols() * 2);
  gu << gate, up;
  GlBuffer bgu, by;
  put(bgu, gu, k_->limit());
  by.ensure(static_cast<size_t>(gate.size()) * sizeof(float), k_->limit(), "y");
  k_->swiglu(bgu, static_cast<int>(gate.rows()), static_cast<int>(gate.cols()), by, geglu);
  return get(by, gate.rows(), gate.cols());
}

Mat GlHostOps::rope(const Mat& x, int heads, int d, int pos0, const std::vector<double>& inv_freq, float mscale) {
  GlContext::Current cur(*ctx_);
  GlBuffer bx, bt;
  put(bx, x, k_->limit());
  const std::vector<float> table = rope_table(pos0 + static_cast<int>(x.rows()), inv_freq, mscale);
  bt.ensure(table.size() * sizeof(float), k_->limit(), "rope table");
  bt.upload(table.data(), table.size() * sizeof(float));
  k_->rope(bx, 0, static_cast<int>(x.rows()), static_cast<int>(x.cols()), 0, heads, d,
           static_cast<int>(inv_freq.size()), pos0, bt);
  return get(bx, x.rows(), x.cols());
}

void GlHostOps::attention(const Tensor& q, const Tensor& kk, const Tensor& v, int p, LayerTrace& lt) {
  attention(q, kk, v, p, AttnRule{1.f / std::sqrt(static_cast<float>(q.dim(2))), 0.f, 0}, lt);
}

void GlHostOps::attention(const Tensor& q, const Tensor& kk, const Tensor& v, int p, const AttnRule& rule,
                          LayerTrace& lt) {
  GlContext::Current cur(*ctx_);
  const int H = static_cast<int>(q.dim(0)), T = static_cast<int>(q.dim(1)), d = static_cast<int>(q.dim(2));
  const int KV = static_cast<int>(kk.dim(0)), ld = (H + 2 * KV) * d, n = T - p;
  std::vector<float> rows(static_cast<size_t>(T) * ld);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < ld; ++c) {
      const int head = c / d, j = c % d;
      const float val = head < H ? q.at(head, t, j) : head < H + KV ? kk.at(head - H, t, j) : v.at(head - H - KV, t, j);
      rows[static_cast<size_t>(t) * ld + c] = val;
    }
  GlBuffer bqkv, batt;
  GlAttentionScratch s;
  bqkv.ensure(rows.size() * sizeof(float), k_->limit(), "qkv");
  bqkv.upload(rows.data(), rows.size() * sizeof(float));
  batt.ensure(static_cast<size_t>(n) * H * d * sizeof(float), k_->limit(), "att");
  gl_attention(*k_, H, KV, d, bqkv, T, p, rule, s, batt, lt);
  Mat att = get(batt, n, H * d);
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < d; ++j) lt.out.head(h)[static_cast<size_t>(p + r) * d + j] = att(r, h * d + j);
  k_->timer_take_ms();
}

}  // namespace attnviz
