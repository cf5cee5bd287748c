// A GGUF model and the same model as a Hugging Face directory give the same `dump`.
//
// The test writer stores a random model as GGUF (llama.cpp's names and metadata, Q/K rows in
// the converter's order for llama, 2-D weights in the type under test) and as a float32
// Hugging Face directory whose weights are the GGUF's dequantized values, laid out the
// Hugging Face way (nn.Linear (out, in), GPT-2 Conv1D (in, out), rotate-half Q/K rows).
// Both are dumped through attnviz-cli on the same token ids; every recorded tensor must
// agree: within 1e-5 relative for F32/F16/BF16, bit for bit for the quantized types (the
// weights in memory are then the same floats).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "app/cli.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

// Dumps `model` on `input` ("--tokens" ids by default, or "--text" and a text).
std::string dump(const std::string& model, const std::string& out,
                 std::pair<const char*, const char*> input = {"--tokens", "5,1,250,7,7,42,3,99,0,255,17"}) {
  const char* argv[] = {"attnviz-cli", "dump", "--model", model.c_str(), input.first, input.second, "--out", out.c_str()};
  std::ostringstream o, e;
  const int code = run_cli(8, argv, o, e);
  return code == 0 ? "" : e.str();
}

// "" when every tensor of `a` equals the one of `b` (bitwise when tol == 0, else within
// tol relative to b's largest magnitude); else the first difference.
std::string compare_dumps(const std::string& a_path, const std::string& b_path, double tol) {
  const auto a = SafetensorsFile::open(a_path), b = SafetensorsFile::open(b_path);
  if (a.tensors().size() != b.tensors().size()) return "tensor counts differ";
  for (const auto& t : b.tensors()) {
    const TensorInfo* u = a.find(t.name);
    if (!u || u->shape != t.shape) return t.name + ": missing or shape differs";
    if (t.dtype != DType::F32) {
      if (a.read_i32(*u) != b.read_i32(t)) return t.name + " differs";
      continue;
    }
    const auto x = a.read_f32(*u), y = b.read_f32(t);
    // Both sides NaN would compare equal bitwise; a random model's dump has none.
    for (size_t i = 0; i < x.size(); ++i)
      if (std::isnan(x[i]) || std::isnan(y[i])) return t.name + " holds NaN";
    if (t.name == "logits" && *std::max_element(y.begin(), y.end()) == *std::min_element(y.begin(), y.end()))
      return "logits are constant";
    if (tol == 0) {
      if (std::memcmp(x.data(), y.data(), x.size() * 4) != 0) return t.name + " is not bit-identical";
      continue;
    }
    double diff = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isinf(y[i]) || std::isinf(x[i])) {
        if (x[i] != y[i]) return t.name + ": -inf pattern differs";
        continue;
      }
      diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
      ref = std::max(ref, std::abs(static_cast<double>(y[i])));
    }
    if (!(diff <= tol * std::max(ref, 1e-6))) return t.name + ": relative error " + std::to_string(diff / ref);
  }
  return "";
}

ModelConfig config_for(const std::string& arch) {
  // Rows of 256 values so that every type, K-quants included, fits whole blocks.
  ModelConfig c = test::small_config(arch == "gpt2" ? "gpt2" : "llama", 2, 256, 4, arch == "gpt2" ? 4 : 2, 320, 16);
  c.model_type = arch;
  c.n_inner = 512;
  c.head_size = 64;
  c.rope_theta = arch == "qwen2" ? 1000000.f : 10000.f;
  c.qkv_bias = arch != "llama";
  c.tie_embeddings = arch != "llama";  // llama: a separate output.weight
  return c;
}

class GgufParity : public ::testing::TestWithParam<std::tuple<std::string, GgmlType>> {};

TEST_P(GgufParity, DumpEqualsTheHuggingFaceModel) {
  const auto [arch, type] = GetParam();
  const std::string dir = test::temp_dir("gguf-" + arch);
  const std::string gguf = test::write_gguf_model_pair(config_for(arch), type, 17, dir);
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "");
  ASSERT_EQ(dump(dir + "/hf", b), "");
  const bool float_type = type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
  EXPECT_EQ(compare_dumps(a, b, float_type ? 1e-5 : 0.0), "");
}

// Guards the test itself: had the loader left llama's Q/K rows in the converter's order, the
// dumps would differ. Here the GGUF Q rows of one head are swapped to show the check sees it.
TEST(GgufParityCheck, ADifferentRowOrderIsNoticed) {
  const std::string dir = test::temp_dir("gguf-perm");
  const std::string gguf = test::write_gguf_model_pair(config_for("llama"), GgmlType::F32, 17, dir);
  auto bytes = test::read_file(gguf);
  // Find blk.0.attn_q.weight's first row in the file and swap it with the second.
  const auto f = GgufFile::open(gguf);
  const GgufTensorInfo* q = f.find("blk.0.attn_q.weight");
  const size_t row = 256 * 4;
  const std::string first_row(reinterpret_cast<const char*>(f.data(*q)), row);
  const size_t pos = bytes.find(first_row);
  ASSERT_NE(pos, std::string::npos);
  std::swap_ranges(bytes.begin() + pos, bytes.begin() + pos + row, bytes.begin() + pos + row);
  test::write_bytes(gguf, bytes);
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "");
  ASSERT_EQ(dump(dir + "/hf", b), "");
  EXPECT_NE(compare_dumps(a, b, 1e-5), "");
}

// RoPE scaling as llama.cpp stores it against config.json's rope_scaling: "linear" as
// metadata, "llama3" as a rope_freqs tensor of per-frequency divisors (the writer computes
// them as a converter does; the loader divides by them; the Hugging Face side blends by
// the llama3 formula). With an original context of 64 tokens most frequencies of d = 64 are
// scaled, so ignoring the scaling changes q and k far beyond the tolerance: the last check.
TEST(GgufParityRope, ScaledRopeEqualsTheHuggingFaceModel) {
  for (const std::string type : {"linear", "llama3"}) {
    ModelConfig c = config_for("llama");
    c.rope_scaling.type = type;
    c.rope_scaling.factor = 8.f;
    c.rope_scaling.low_freq_factor = 1.f;
    c.rope_scaling.high_freq_factor = 4.f;
    c.rope_scaling.original_max_position = 64;
    const std::string dir = test::temp_dir("gguf-rope-" + type);
    const std::string gguf = test::write_gguf_model_pair(c, GgmlType::F32, 17, dir);
    const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors", u = dir + "/unscaled.safetensors";
    ASSERT_EQ(dump(gguf, a), "") << type;
    ASSERT_EQ(dump(dir + "/hf", b), "") << type;
    EXPECT_EQ(compare_dumps(a, b, 1e-5), "") << type;
    EXPECT_EQ(load_model(gguf)->config.rope_scaling.type, type == "linear" ? "linear" : "factors");
    // The same Hugging Face model without rope_scaling: q differs.
    c.rope_scaling = {};
    test::write_gguf_model_pair(c, GgmlType::F32, 17, dir + "/plain");
    ASSERT_EQ(dump(dir + "/plain/hf", u), "") << type;
    EXPECT_NE(compare_dumps(a, u, 1e-5), "") << type;
  }
}

// Text through the GGUF file's own tokenizer (tokenizer.ggml.*) and through the Hugging Face
// tokenizer.json beside the directory: the same ids (the dump's token tensor) and tensors.
TEST(GgufParityText, TextThroughTheFilesOwnTokenizer) {
  for (const std::string arch : {"llama", "qwen2", "gpt2"}) {
    const std::string dir = test::temp_dir("gguf-text-" + arch);
    const std::string gguf = test::write_gguf_model_pair(config_for(arch), GgmlType::Q8_0, 5, dir);
    const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
    const std::pair<const char*, const char*> text = {"--text", "the theater<|endoftext|> a"};
    ASSERT_EQ(dump(gguf, a, text), "") << arch;
    ASSERT_EQ(dump(dir + "/hf", b, text), "") << arch;
    EXPECT_EQ(compare_dumps(a, b, 0.0), "") << arch;
    // "the" → t, he; " theater" → Ġthe, a, t, e, r; <|endoftext|> is one control token; " a".
    const auto f = SafetensorsFile::open(a);
    const TensorInfo* ids = f.find("tokens");
    ASSERT_TRUE(ids) << arch;
    const std::vector<int32_t> got = f.read_i32(*ids);
    const int V = config_for(arch).vocab_size;
    EXPECT_EQ(got, (std::vector<int32_t>{'t', 257, 258, 'a', 't', 'e', 'r', V - 1, 259})) << arch;
  }
}

std::string name_of(const ::testing::TestParamInfo<GgufParity::ParamType>& i) {
  return std::get<0>(i.param) + "_" + ggml_type_info(std::get<1>(i.param)).name;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, GgufParity,
    ::testing::Combine(::testing::Values("llama", "qwen2", "gpt2"),
                       ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                         GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                                         GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K)),
    name_of);

}  // namespace
}  // namespace attnviz
