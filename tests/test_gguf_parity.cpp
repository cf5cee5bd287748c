// A GGUF model and the same model as a Hugging Face directory give the same `dump`.
//
// The test writer stores a random model as GGUF (llama.cpp's names and metadata, Q/K rows in
// the converter's order for llama, 2-D weights in the type under test) and as a float32
// Hugging Face directory whose weights are the GGUF's dequantized values, laid out the
// Hugging Face way (nn.Linear (out, in), GPT-2 Conv1D (in, out), rotate-half Q/K rows).
// Both are dumped through attnviz-cli on the same token ids; every recorded tensor must
// agree within 1e-5 relative: the GGUF side reads its weights where they lie (the same
// values, summed in another order). With --weights f32 the GGUF side converts them to the
// same float32 matrices as the directory holds, and the quantized types agree bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "app/cli.h"
#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

// Dumps `model` on `input` ("--tokens" ids by default, or "--text" and a text).
std::string dump(const std::string& model, const std::string& out,
                 std::pair<const char*, const char*> input = {"--tokens", "5,1,250,7,7,42,3,99,0,255,17"},
                 std::pair<const char*, const char*> extra = {"--weights", "stored"}) {
  const char* argv[] = {"attnviz-cli", "dump",      "--model",    model.c_str(), input.first, input.second,
                        extra.first,   extra.second, "--out",      out.c_str()};
  std::ostringstream o, e;
  const int code = run_cli(10, argv, o, e);
  return code == 0 ? "" : e.str();
}

// "" when every tensor of `a` equals the one of `b` (bitwise when tol == 0, else within
// tol relative to b's largest magnitude); else the first difference. `a_head(name, h)`,
// when given, is the index along the first axis of a's tensor `name` that holds b's h (the
// same index otherwise).
using HeadMap = std::function<int64_t(const std::string&, int64_t)>;
std::string compare_dumps(const std::string& a_path, const std::string& b_path, double tol, const HeadMap& a_head = {}) {
  const auto a = SafetensorsFile::open(a_path), b = SafetensorsFile::open(b_path);
  if (a.tensors().size() != b.tensors().size()) return "tensor counts differ";
  for (const auto& t : b.tensors()) {
    const TensorInfo* u = a.find(t.name);
    if (!u || u->shape != t.shape) return t.name + ": missing or shape differs";
    if (t.dtype != DType::F32) {
      if (a.read_i32(*u) != b.read_i32(t)) return t.name + " differs";
      continue;
    }
    auto x = a.read_f32(*u);
    const auto y = b.read_f32(t);
    if (a_head && t.shape.size() >= 2 && t.name != "logits") {  // a's heads in b's order
      const auto mine = x;
      const int64_t heads = t.shape[0], per = static_cast<int64_t>(y.size()) / heads;
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(mine.begin() + a_head(t.name, h) * per, per, x.begin() + h * per);
    }
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
  EXPECT_EQ(compare_dumps(a, b, 1e-5), "");
  // The float32 path: the same floats in the same products.
  const std::string c = dir + "/gguf-f32.safetensors";
  ASSERT_EQ(dump(gguf, c, {"--tokens", "5,1,250,7,7,42,3,99,0,255,17"}, {"--weights", "f32"}), "");
  const bool float_type = type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
  EXPECT_EQ(compare_dumps(c, b, float_type ? 1e-5 : 0.0), "");
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
    EXPECT_EQ(compare_dumps(a, b, 1e-5), "") << arch;
    // "the" → t, he; " theater" → Ġthe, a, t, e, r; <|endoftext|> is one control token; " a".
    const auto f = SafetensorsFile::open(a);
    const TensorInfo* ids = f.find("tokens");
    ASSERT_TRUE(ids) << arch;
    const std::vector<int32_t> got = f.read_i32(*ids);
    const int V = config_for(arch).vocab_size;
    EXPECT_EQ(got, (std::vector<int32_t>{'t', 257, 258, 'a', 't', 'e', 'r', V - 1, 259})) << arch;
  }
}

// ---- the architectures after llama --------------------------------------------------
//
// Each family's small config is read from a Hugging Face config.json (parse_config), so the
// GGUF side and the Hugging Face side start from the same ModelConfig; the writer stores it
// with llama.cpp's names and conventions (q/k rows permuted for granite/smollm3/mistral,
// Gemma norms with the +1 folded in, phi3's fused attn_qkv and gate|up ffn_up, the window
// keys, longrope factor tensors, ...). The windows (3 to 5 keys) are shorter than the 11
// tokens dumped, so every local layer masks keys.
nlohmann::json family_json(const std::string& family) {
  nlohmann::json j = {{"vocab_size", 320}, {"num_hidden_layers", 3}, {"hidden_size", 256},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64},
                      {"intermediate_size", 512}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6},
                      {"tie_word_embeddings", false}};
  j["model_type"] = family;
  if (family == "qwen3") j["rope_theta"] = 1000000.0;
  if (family == "qwen3_vl_text") {  // Qwen3-VL's text model: multi-axis RoPE sections (plain RoPE for text)
    j["rope_theta"] = 5000000.0;
    j["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {12, 10, 10}}, {"mrope_interleaved", true}};
  }
  if (family == "gemma2") {
    j["sliding_window"] = 4, j["attn_logit_softcapping"] = 20.0, j["final_logit_softcapping"] = 15.0;
    j["query_pre_attn_scalar"] = 100, j["tie_word_embeddings"] = true;
  }
  if (family == "gemma3_text") {  // local, global, local: a pattern that is not 5:1 (a per-layer array)
    j["sliding_window"] = 4, j["rope_theta"] = 1000000.0, j["rope_local_base_freq"] = 10000.0;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  }
  if (family == "gemma3_5to1") {  // Gemma 3's own 5 local : 1 global rule, as an integer pattern
    j["model_type"] = "gemma3_text", j["num_hidden_layers"] = 6, j["sliding_window"] = 3;
  }
  if (family == "phi3") {  // 48 of 64 dims rotated; longrope with the long factors beyond 8 tokens
    j["partial_rotary_factor"] = 0.75, j["sliding_window"] = 5, j["original_max_position_embeddings"] = 8;
    std::vector<double> sf, lf;
    for (int i = 0; i < 24; ++i) sf.push_back(1.0 + 0.05 * i), lf.push_back(1.0 + 0.5 * i);
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", sf}, {"long_factor", lf}};
  }
  if (family == "smollm3") j["num_hidden_layers"] = 4;  // layer 3 without RoPE (every 4th)
  if (family == "smollm3_nope") {  // a pattern llama.cpp's fixed rule does not give
    j["model_type"] = "smollm3", j["no_rope_layers"] = {1, 0, 1};
  }
  if (family == "granite") {
    j["attention_multiplier"] = 0.05, j["embedding_multiplier"] = 12.0, j["residual_multiplier"] = 0.22;
    j["logits_scaling"] = 8.0;
  }
  if (family == "mistral") j["sliding_window"] = 4;
  if (family == "ministral3") {  // YaRN ×4 over 4 tokens and the query temperature stepping at 4, 8
    j["sliding_window"] = nullptr;
    j["rope_parameters"] = {{"rope_type", "yarn"},       {"rope_theta", 10000.0}, {"factor", 4.0},
                            {"original_max_position_embeddings", 4}, {"beta_fast", 8.0}, {"beta_slow", 1.0},
                            {"mscale", 1.0},             {"mscale_all_dim", 0.5}, {"llama_4_scaling_beta", 0.3}};
  }
  if (family == "qwen2") {  // layers from max_window_layers on are local
    j["use_sliding_window"] = true, j["sliding_window"] = 3, j["max_window_layers"] = 1;
  }
  return j;
}

class GgufFamily : public ::testing::TestWithParam<std::tuple<std::string, GgmlType>> {};

TEST_P(GgufFamily, DumpEqualsTheHuggingFaceModel) {
  const auto [family, type] = GetParam();
  const ModelConfig c = parse_config(family_json(family), family);
  const std::string dir = test::temp_dir("gguf-family-" + family);
  const std::string gguf = test::write_gguf_model_pair(c, type, 23, dir);
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "") << family;
  ASSERT_EQ(dump(dir + "/hf", b), "") << family;
  // The weights in memory are the same floats on both sides; the scales the two configs
  // spell differently (query_pre_attn_scalar against attention.scale, ...) may round apart
  // by an ulp, so 1e-5 relative for every type.
  EXPECT_EQ(compare_dumps(a, b, 1e-5), "") << family << " " << ggml_type_info(type).name;
  // What the GGUF loader decided is what the Hugging Face loader decided, layer by layer.
  const auto g = load_model(gguf), h = load_model(dir + "/hf");
  EXPECT_EQ(g->config.features(), h->config.features()) << family;
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerSpec x = g->config.layer(l), y = h->config.layer(l);
    EXPECT_EQ(x.window, y.window) << family << " layer " << l;
    EXPECT_EQ(x.rope, y.rope) << family << " layer " << l;
    EXPECT_FLOAT_EQ(x.rope_theta, y.rope_theta) << family << " layer " << l;
    EXPECT_EQ(x.rope_scaling.type, y.rope_scaling.type) << family << " layer " << l;
    EXPECT_FLOAT_EQ(x.scale, y.scale) << family << " layer " << l;
    EXPECT_FLOAT_EQ(x.softcap, y.softcap) << family << " layer " << l;
  }
  EXPECT_FLOAT_EQ(g->config.emb_scale, h->config.emb_scale);
  EXPECT_FLOAT_EQ(g->config.logit_scale, h->config.logit_scale);
  EXPECT_FLOAT_EQ(g->config.residual_scale, h->config.residual_scale);
  EXPECT_FLOAT_EQ(g->config.final_softcap, h->config.final_softcap);
  EXPECT_EQ(g->config.rotary(), h->config.rotary());
  EXPECT_FLOAT_EQ(g->config.attn_temp_beta, h->config.attn_temp_beta);
  EXPECT_EQ(g->config.attn_temp_length, h->config.attn_temp_length);
  EXPECT_FLOAT_EQ(g->config.rope_scaling.mscale, h->config.rope_scaling.mscale);
}

std::string family_name(const ::testing::TestParamInfo<GgufFamily::ParamType>& i) {
  return std::get<0>(i.param) + "_" + ggml_type_info(std::get<1>(i.param)).name;
}

INSTANTIATE_TEST_SUITE_P(
    Families, GgufFamily,
    ::testing::Combine(::testing::Values("qwen3", "gemma2", "gemma3_text", "gemma3_5to1", "phi3", "smollm3",
                                         "smollm3_nope", "olmo2", "granite", "mistral", "qwen2", "qwen3_vl_text",
                                         "ministral3"),
                       ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K)),
    family_name);

// ---- the hybrids ------------------------------------------------------------------
//
// Qwen3.5 with two key heads and four value heads (llama.cpp's converter tiles the value
// heads: the file's value head u·Hk + g is Hugging Face's g·r + u, r = Hv/Hk), layers
// linear, full, linear, linear (no interval rule: attention.recurrent_layers); LFM2 with
// conv, attention, conv, conv. Both written by attnviz's GGUF writer with llama.cpp's names
// and conventions (+1 folded into Qwen3.5's norms, ssm_a = −exp(A_log), squeezed float32
// kernels, LFM2's per-layer head_count_kv with 0 for a convolution), their Hugging Face twin
// holding the dequantized weights in Hugging Face's order.
nlohmann::json hybrid_json(const std::string& family) {
  nlohmann::json j = {{"vocab_size", 320}, {"num_hidden_layers", 4}, {"hidden_size", 256},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
                      {"model_type", family}};
  if (family == "qwen3_5_text") {
    j["head_dim"] = 64, j["intermediate_size"] = 512, j["rms_norm_eps"] = 1e-6, j["partial_rotary_factor"] = 0.25;
    j["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "linear_attention"};
    j["linear_num_key_heads"] = 2, j["linear_num_value_heads"] = 4, j["linear_key_head_dim"] = 32;
    j["linear_value_head_dim"] = 64, j["linear_conv_kernel_dim"] = 4, j["tie_word_embeddings"] = false;
  } else {
    j["block_ff_dim"] = 512, j["block_auto_adjust_ff_dim"] = false, j["conv_L_cache"] = 3;
    j["layer_types"] = {"conv", "full_attention", "conv", "conv"};
  }
  return j;
}

class GgufHybrid : public ::testing::TestWithParam<std::tuple<std::string, GgmlType>> {};

TEST_P(GgufHybrid, DumpEqualsTheHuggingFaceModelHeadForHead) {
  const auto [family, type] = GetParam();
  const ModelConfig c = parse_config(hybrid_json(family), family);
  const std::string dir = test::temp_dir("gguf-hybrid-" + family);
  const std::string gguf = test::write_gguf_model_pair(c, type, 29, dir);
  const auto g = load_model(gguf), h = load_model(dir + "/hf");
  ASSERT_EQ(g->config.features(), h->config.features());
  for (int l = 0; l < c.n_layer; ++l) ASSERT_EQ(g->config.layer(l).mixer, h->config.layer(l).mixer) << "layer " << l;
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "");
  ASSERT_EQ(dump(dir + "/hf", b), "");
  // The file's value head of Hugging Face's head j on a linear layer (the same head elsewhere).
  const int nk = c.linear.k_heads, r = nk ? c.linear.v_heads / nk : 1;
  auto file_head = [&](const std::string& name, int64_t j) -> int64_t {
    const auto dot = name.find('.', 7);
    if (name.rfind("layers.", 0) != 0 || dot == std::string::npos) return j;
    const int l = std::stoi(name.substr(7, dot - 7));
    if (c.layer(l).mixer != Mixer::GatedDeltaNet) return j;
    return (j % r) * nk + j / r;
  };
  // Both sides hold the same floats and multiply them in the same order: within 1e-5 of the
  // largest (Qwen3.5's −exp(A_log) is the same expf of the same float on both sides).
  EXPECT_EQ(compare_dumps(a, b, 1e-5, file_head), "") << family << " " << ggml_type_info(type).name;
  // The check sees a head order that is not the file's: read as grouped, the value heads of
  // a Qwen3.5 GGUF with Hv ≠ Hk pair with other key heads, and its dump differs.
  if (family == "qwen3_5_text") {
    const auto f = GgufFile::open(gguf);
    EXPECT_FALSE(f.find("blk.1.ssm_a") || f.find("blk.0.attn_q.weight"));  // full layer 1 has no ssm_*; layer 0 no attn_q
    EXPECT_TRUE(f.find("blk.0.ssm_a") && f.find("blk.1.attn_q.weight") && f.find("blk.0.ssm_dt.bias"));
    EXPECT_EQ(f.find("blk.1.attn_q.weight")->shape(), (std::vector<int64_t>{2 * 4 * 64, 256}));  // q | gate per head
    EXPECT_EQ(f.find("blk.0.ssm_conv1d.weight")->shape(), (std::vector<int64_t>{2 * 2 * 32 + 4 * 64, 4}));
    EXPECT_EQ(f.find("blk.0.ssm_conv1d.weight")->type, GgmlType::F32);
    EXPECT_LT(f.read_f32(*f.find("blk.0.ssm_a"))[0], 0.f);
    EXPECT_FALSE(f.find_key("qwen35.full_attention_interval"));
    EXPECT_TRUE(f.find_key("qwen35.attention.recurrent_layers"));
    EXPECT_TRUE(g->config.linear.v_tiled && !h->config.linear.v_tiled);
    EXPECT_EQ(g->config.linear.key_head(1), 1);  // tiled: value head 1 reads key head 1 mod 2
    EXPECT_EQ(h->config.linear.key_head(1), 0);  // grouped: 1 / 2
  } else {
    const auto f = GgufFile::open(gguf);
    const GgufValue* kv = f.find_key("lfm2.attention.head_count_kv");
    ASSERT_TRUE(kv);
    EXPECT_EQ(kv->ints, (std::vector<int64_t>{0, 2, 0, 0}));
    EXPECT_TRUE(f.find("token_embd_norm.weight") && !f.find("output_norm.weight"));
    EXPECT_EQ(f.find("blk.0.shortconv.conv.weight")->shape(), (std::vector<int64_t>{256, 3}));
  }
}

std::string hybrid_name(const ::testing::TestParamInfo<GgufHybrid::ParamType>& i) {
  return std::get<0>(i.param) + "_" + ggml_type_info(std::get<1>(i.param)).name;
}

INSTANTIATE_TEST_SUITE_P(Hybrids, GgufHybrid,
                         ::testing::Combine(::testing::Values("qwen3_5_text", "lfm2"),
                                            ::testing::Values(GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K)),
                         hybrid_name);

// GPT-OSS as llama.cpp's converter writes it ("gpt-oss"): sinks as attn_sinks, the norm
// before the experts as post_attention_norm, the router as ffn_gate_inp (+ bias) and each
// layer's experts as gate, up (E, I, C) and down (E, C, I) stacked with (E, out) biases,
// gate and up apart where Hugging Face interleaves their columns. A window layer, then a
// global one (llama.cpp's fixed pattern: even layers local); YaRN read as llama.cpp rounds it.
// The twin holds the dequantized weights in Hugging Face's layout; the GGUF side keeps every
// expert where the file stores it (MXFP4 in place).
nlohmann::json gpt_oss_json() {
  return {{"model_type", "gpt_oss"}, {"vocab_size", 320}, {"hidden_size", 256}, {"intermediate_size", 128},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64},
          {"num_local_experts", 4}, {"num_experts_per_tok", 2}, {"sliding_window", 4},
          {"layer_types", {"sliding_attention", "full_attention"}}, {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 150000},
          {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                            {"original_max_position_embeddings", 32}}},
          {"attention_bias", true}, {"swiglu_limit", 7.0}, {"tie_word_embeddings", false}};
}

class GgufGptOss : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GgufGptOss, DumpEqualsTheHuggingFaceModel) {
  const GgmlType type = GetParam();
  const ModelConfig c = parse_config(gpt_oss_json(), "gpt_oss");
  const std::string dir = test::temp_dir(std::string("gguf-gpt-oss-") + ggml_type_info(type).name);
  const std::string gguf = test::write_gguf_model_pair(c, type, 31, dir);
  {
    const auto f = GgufFile::open(gguf);
    EXPECT_EQ(f.get_string("general.architecture"), "gpt-oss");
    EXPECT_EQ(f.get_int("gpt-oss.expert_count"), 4);
    EXPECT_EQ(f.get_int("gpt-oss.expert_used_count"), 2);
    EXPECT_FALSE(f.find_key("gpt-oss.attention.sliding_window_pattern"));  // llama.cpp's rule holds
    EXPECT_EQ(f.find("blk.1.ffn_gate_exps.weight")->shape(), (std::vector<int64_t>{4, 128, 256}));
    EXPECT_EQ(f.find("blk.1.ffn_down_exps.weight")->shape(), (std::vector<int64_t>{4, 256, 128}));
    EXPECT_EQ(f.find("blk.1.ffn_up_exps.bias")->shape(), (std::vector<int64_t>{4, 128}));
    EXPECT_TRUE(f.find("blk.0.attn_sinks.weight") && f.find("blk.0.post_attention_norm.weight") &&
                f.find("blk.0.ffn_gate_inp.bias") && !f.find("blk.0.ffn_norm.weight"));
  }
  const auto g = load_model(gguf), h = load_model(dir + "/hf");
  ASSERT_EQ(g->config.model_type, "gpt_oss");
  EXPECT_EQ(g->config.features(), h->config.features());
  EXPECT_EQ(g->config.layer(0).window, 4);
  EXPECT_EQ(g->config.layer(1).window, 0);
  EXPECT_TRUE(g->config.attn_sinks);
  EXPECT_EQ(g->config.experts.count, 4);
  const Weight& e3 = g->weights.layers[1].ex_down[3];
  ASSERT_TRUE(e3.is_stored());  // in place, not converted
  EXPECT_EQ(e3.stored.type, type);
  EXPECT_EQ(e3.stored.rows, 256);
  // Expert 3's down rows are the file's last 256 rows of ffn_down_exps.
  std::vector<float> row(128), want(128);
  e3.stored.decode_row(5, row.data());
  const auto f = GgufFile::open(gguf);
  const auto all = f.read_f32(*f.find("blk.1.ffn_down_exps.weight"));
  std::copy_n(all.begin() + (3 * 256 + 5) * 128, 128, want.begin());
  EXPECT_EQ(row, want);
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "");
  ASSERT_EQ(dump(dir + "/hf", b), "");
  EXPECT_EQ(compare_dumps(a, b, 1e-5), "") << ggml_type_info(type).name;
  // The float32 path: the same floats in the same products.
  const std::string f32 = dir + "/gguf-f32.safetensors";
  ASSERT_EQ(dump(gguf, f32, {"--tokens", "5,1,250,7,7,42,3,99,0,255,17"}, {"--weights", "f32"}), "");
  EXPECT_EQ(compare_dumps(f32, b, type == GgmlType::F32 ? 1e-5 : 0.0), "") << ggml_type_info(type).name;
}

INSTANTIATE_TEST_SUITE_P(Types, GgufGptOss, ::testing::Values(GgmlType::F32, GgmlType::Q8_0, GgmlType::MXFP4),
                         [](const ::testing::TestParamInfo<GgmlType>& i) { return std::string(ggml_type_info(i.param).name); });

// Gemma 4 as llama.cpp's converter writes it ("gemma4"): key_length 128 on global layers and
// key_length_swa 64 on local ones, per-layer KV heads where V = K gives the global layers their
// own, feed_forward_length per layer (doubled on the KV-shared ones), the window pattern as
// bools, shared_kv_layers, the per-layer embeddings (per_layer_token_embd, per_layer_model_proj,
// blk.N.inp_gate / proj / post_norm), layer_output_scale, and rope_freqs (1 for the quarter
// of the global pairs that turn, 1e30 for the rest). Its dump equals the Hugging Face twin's.
nlohmann::json gemma4_json(bool k_eq_v, bool experts = false) {
  nlohmann::json j = {{"model_type", "gemma4_text"}, {"vocab_size", 320}, {"hidden_size", 256},
                      {"intermediate_size", 128}, {"num_hidden_layers", 5}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 64}, {"global_head_dim", 128},
                      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                                       "full_attention"}},
                      {"sliding_window", 4}, {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-6},
                      {"final_logit_softcapping", 30.0}, {"tie_word_embeddings", true},
                      {"hidden_activation", "gelu_pytorch_tanh"}};
  if (experts) {  // the 26B-A4B's: 4 experts of 64, 2 per token, beside the dense MLP
    j["enable_moe_block"] = true;
    j["num_experts"] = 4;
    j["top_k_experts"] = 2;
    j["moe_intermediate_size"] = 64;
  }
  if (k_eq_v) {
    j["attention_k_eq_v"] = true;
    j["num_global_key_value_heads"] = 1;
  } else {
    j["num_kv_shared_layers"] = 2;
    j["use_double_wide_mlp"] = true;
    j["hidden_size_per_layer_input"] = 32;
  }
  return j;
}

// variant 0: PLE, shared; 1: V = K; 2: + experts; 3: + experts with gate and up apart
class GgufGemma4 : public ::testing::TestWithParam<std::tuple<GgmlType, int>> {};

TEST_P(GgufGemma4, DumpEqualsTheHuggingFaceModel) {
  const auto [type, variant] = GetParam();
  const bool k_eq_v = variant > 0, experts = variant >= 2, split = variant == 3;
  const ModelConfig c = parse_config(gemma4_json(k_eq_v, experts), "gemma4");
  const std::string dir = test::temp_dir(std::string("gguf-gemma4-") + ggml_type_info(type).name + std::to_string(variant));
  const std::string gguf = test::write_gguf_model_pair(c, type, 17, dir, true, true, nullptr, split);
  {
    const auto f = GgufFile::open(gguf);
    EXPECT_EQ(f.get_string("general.architecture"), "gemma4");
    EXPECT_EQ(f.get_int("gemma4.attention.key_length"), 128);
    EXPECT_EQ(f.get_int("gemma4.attention.key_length_swa"), 64);
    EXPECT_EQ(f.find("rope_freqs.weight")->shape(), (std::vector<int64_t>{64}));
    EXPECT_EQ(f.find("blk.1.attn_q.weight")->shape(), (std::vector<int64_t>{512, 256}));
    EXPECT_EQ(f.find("blk.1.attn_v.weight") == nullptr, k_eq_v);
    EXPECT_EQ(f.find("per_layer_token_embd.weight") != nullptr, !k_eq_v);
    EXPECT_EQ(f.find("blk.3.attn_k.weight") == nullptr, !k_eq_v);  // a KV-shared layer has none
    EXPECT_TRUE(f.find("blk.4.layer_output_scale.weight"));
    EXPECT_EQ(f.find("blk.2.ffn_gate_up_exps.weight") != nullptr, experts && !split);
    EXPECT_EQ(f.find("blk.2.ffn_gate_exps.weight") != nullptr, split);
    if (split) {
      EXPECT_EQ(f.find("blk.2.ffn_gate_exps.weight")->shape(), (std::vector<int64_t>{4, 64, 256}));
      EXPECT_EQ(f.find("blk.2.ffn_up_exps.weight")->shape(), (std::vector<int64_t>{4, 64, 256}));
    } else if (experts) {
      EXPECT_EQ(f.find("blk.2.ffn_gate_up_exps.weight")->shape(), (std::vector<int64_t>{4, 128, 256}));
    }
    if (experts) {
      EXPECT_EQ(f.find("blk.2.ffn_down_exps.weight")->shape(), (std::vector<int64_t>{4, 256, 64}));
      EXPECT_TRUE(f.find("blk.2.ffn_gate_inp.scale") && f.find("blk.2.ffn_down_exps.scale") &&
                  f.find("blk.2.post_ffw_norm_2.weight"));
    }
  }
  const auto g = load_model(gguf), h = load_model(dir + "/hf");
  ASSERT_EQ(g->config.model_type, "gemma4_text");
  EXPECT_EQ(g->config.features(), h->config.features());
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(g->config.head_size_at(l), h->config.head_size_at(l)) << l;
    EXPECT_EQ(g->config.kv_heads_at(l), h->config.kv_heads_at(l)) << l;
    EXPECT_EQ(g->config.inner_at(l), h->config.inner_at(l)) << l;
    EXPECT_EQ(g->config.layer(l).kv_source, h->config.layer(l).kv_source) << l;
    EXPECT_EQ(g->config.layer(l).v_from_k, h->config.layer(l).v_from_k) << l;
    EXPECT_EQ(rope_inv_freq(g->config, l, 16), rope_inv_freq(h->config, l, 16)) << l;
  }
  EXPECT_EQ(g->config.ple_dim, k_eq_v ? 0 : 32);
  EXPECT_EQ(g->config.experts.count, experts ? 4 : 0);
  const std::string a = dir + "/gguf.safetensors", b = dir + "/hf.safetensors";
  ASSERT_EQ(dump(gguf, a), "");
  ASSERT_EQ(dump(dir + "/hf", b), "");
  EXPECT_EQ(compare_dumps(a, b, 1e-5), "") << ggml_type_info(type).name;
}

std::string gemma4_case_name(const ::testing::TestParamInfo<std::tuple<GgmlType, int>>& i) {
  static const char* const kNames[] = {"_ple_shared", "_k_eq_v", "_experts", "_experts_split"};
  return std::string(ggml_type_info(std::get<0>(i.param)).name) + kNames[std::get<1>(i.param)];
}

INSTANTIATE_TEST_SUITE_P(Types, GgufGemma4,
                         ::testing::Values(std::make_tuple(GgmlType::F32, 0), std::make_tuple(GgmlType::Q8_0, 0),
                                           std::make_tuple(GgmlType::F32, 1), std::make_tuple(GgmlType::F32, 2),
                                           std::make_tuple(GgmlType::Q8_0, 2), std::make_tuple(GgmlType::Q8_0, 3)),
                         gemma4_case_name);

// A GPT-OSS file whose tensors do not fit its metadata: each refused naming the file and the
// tensor. The file is written whole, then one header field or value is changed in place.
TEST(GgufGptOssBadInput, TensorsThatDoNotFitAreRefused) {
  const std::string dir = test::temp_dir("gguf-gpt-oss-bad");
  const ModelConfig c = parse_config(gpt_oss_json(), "gpt_oss");
  const std::string base = test::read_file(test::write_gguf_model_pair(c, GgmlType::MXFP4, 5, dir + "/base", false));
  // The header's (n_dims, ne...) of tensor `name`: where its first ne is.
  auto ne_at = [&](const std::string& name) {
    const size_t at = base.find(le64(name.size()) + name);
    EXPECT_NE(at, std::string::npos) << name;
    return at + 8 + name.size() + 4;
  };
  auto put64 = [](std::string& b, size_t at, uint64_t v) { b.replace(at, 8, le64(v)); };
  const std::vector<std::tuple<std::string, std::string, std::function<void(std::string&)>>> cases = {
      {"router of 3 experts", "tensor 'blk.0.ffn_gate_inp.weight' has shape (3, 256), expected (4, 256)",
       [&](std::string& b) { put64(b, ne_at("blk.0.ffn_gate_inp.weight") + 8, 3); }},
      {"sinks of the wrong length", "tensor 'blk.1.attn_sinks.weight' has shape (3), expected (4)",
       [&](std::string& b) { put64(b, ne_at("blk.1.attn_sinks.weight"), 3); }},
      {"experts of the wrong width", "tensor 'blk.0.ffn_up_exps.weight' has shape (4, 96, 256), expected (4, 128, 256)",
       [&](std::string& b) { put64(b, ne_at("blk.0.ffn_up_exps.weight") + 8, 96); }},
      {"MXFP4 rows not whole blocks", "tensor 'blk.1.ffn_down_exps.weight': rows of 120 values are not whole MXFP4 blocks",
       [&](std::string& b) { put64(b, ne_at("blk.1.ffn_down_exps.weight"), 120); }},
      {"a NaN sink", "tensor 'blk.1.attn_sinks.weight' holds nan at 2; an attention sink logit must be finite", [&](std::string& b) {
         const auto f = GgufFile::open(dir + "/base/model.gguf");
         const GgufTensorInfo* t = f.find("blk.1.attn_sinks.weight");
         const size_t at = b.find(std::string(reinterpret_cast<const char*>(f.data(*t)), 16));
         ASSERT_NE(at, std::string::npos);
         const float nan = NAN;
         std::memcpy(&b[at + 8], &nan, 4);
       }},
  };
  int i = 0;
  for (const auto& [what, expect, change] : cases) {
    std::string bytes = base;
    change(bytes);
    const std::string path = dir + "/bad" + std::to_string(i++) + ".gguf";
    test::write_bytes(path, bytes);
    const std::string err = test::load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << what << ": " << err;
    EXPECT_NE(err.find(expect), std::string::npos) << what << ": " << err;
  }
}

// A Qwen3.5 GGUF whose ssm_a (−exp(A_log)) holds a positive entry is refused, naming the tensor.
TEST(GgufHybridBadInput, APositiveDecayRateIsRefused) {
  const std::string dir = test::temp_dir("gguf-hybrid-bad");
  const std::string gguf = test::write_gguf_model_pair(parse_config(hybrid_json("qwen3_5_text"), "q"), GgmlType::F32, 3, dir,
                                                       /*with_hf=*/false);
  auto bytes = test::read_file(gguf);
  const auto f = GgufFile::open(gguf);
  const GgufTensorInfo* a = f.find("blk.2.ssm_a");
  ASSERT_TRUE(a);
  const std::string values(reinterpret_cast<const char*>(f.data(*a)), 16);
  const size_t pos = bytes.find(values);
  ASSERT_NE(pos, std::string::npos);
  const float plus = 0.5f;
  std::memcpy(&bytes[pos + 4], &plus, 4);
  test::write_bytes(gguf, bytes);
  try {
    load_model(gguf);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.2.ssm_a' holds 0.500000 at 1"), std::string::npos) << e.what();
  }
}

// The llama.cpp conventions themselves, on the file: Gemma's norms stored as 1 + w, q/k rows
// permuted for granite but not for qwen3, phi3's fused tensors, the window keys.
TEST(GgufFamilyLayout, LlamaCppConventionsInTheFile) {
  const std::string dir = test::temp_dir("gguf-layout");
  {
    const ModelConfig c = parse_config(family_json("gemma2"), "gemma2");
    const std::string gguf = test::write_gguf_model_pair(c, GgmlType::F32, 3, dir + "/gemma2");
    const auto f = GgufFile::open(gguf);
    EXPECT_EQ(f.get_string("general.architecture"), "gemma2");
    EXPECT_EQ(f.get_int("gemma2.attention.sliding_window"), 4);
    EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("gemma2.attn_logit_softcapping", 0)), 20.f);
    EXPECT_TRUE(f.find("blk.0.post_attention_norm.weight") && f.find("blk.0.post_ffw_norm.weight") &&
                f.find("blk.0.ffn_norm.weight"));
    const auto st = SafetensorsFile::open(dir + "/gemma2/hf/model.safetensors");
    const auto hf_w = st.read_f32(*st.find("model.layers.0.input_layernorm.weight"));
    const auto gg_w = f.read_f32(*f.find("blk.0.attn_norm.weight"));
    EXPECT_FLOAT_EQ(gg_w[0], hf_w[0] + 1.f);  // the converter's +1
  }
  {
    const ModelConfig c = parse_config(family_json("phi3"), "phi3");
    const auto f = GgufFile::open(test::write_gguf_model_pair(c, GgmlType::F32, 3, dir + "/phi3"));
    EXPECT_EQ(f.find("blk.0.attn_qkv.weight")->shape(), (std::vector<int64_t>{256 + 2 * 128, 256}));
    EXPECT_EQ(f.find("blk.0.ffn_up.weight")->shape(), (std::vector<int64_t>{2 * 512, 256}));
    EXPECT_FALSE(f.find("blk.0.ffn_gate.weight"));
    EXPECT_EQ(f.find("rope_factors_long.weight")->shape(), (std::vector<int64_t>{24}));
    EXPECT_EQ(f.get_int("phi3.rope.dimension_count"), 48);
  }
  for (const std::string fam : {"granite", "qwen3"}) {
    const ModelConfig c = parse_config(family_json(fam), fam);
    const std::string gguf = test::write_gguf_model_pair(c, GgmlType::F32, 3, dir + "/" + fam);
    const auto f = GgufFile::open(gguf);
    const auto st = SafetensorsFile::open(dir + "/" + fam + "/hf/model.safetensors");
    const auto hq = st.read_f32(*st.find("model.layers.0.self_attn.q_proj.weight"));
    const auto gq = f.read_f32(*f.find("blk.0.attn_q.weight"));
    // GGUF row 1 is HF row d/2 = 32 when permuted, HF row 1 when not.
    const size_t C = 256, hf_row = fam == "granite" ? 32 : 1;
    EXPECT_TRUE(std::equal(gq.begin() + C, gq.begin() + 2 * C, hq.begin() + hf_row * C)) << fam;
  }
}

// The quantizers `random --gguf` uses, against their own dequantization: Q8_0 within 1% of
// the values' RMS, Q5_0 within 6%, Q4_0 and Q4_K within 12%; F16/BF16 to their precision.
TEST(GgufQuantize, RoundTripWithinTheTypesStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> x(4096);
  for (auto& v : x) v = n(rng);
  const std::pair<GgmlType, double> cases[] = {{GgmlType::F32, 0.0},   {GgmlType::F16, 1e-3}, {GgmlType::BF16, 5e-3},
                                               {GgmlType::Q8_0, 0.01}, {GgmlType::Q5_0, 0.06}, {GgmlType::Q4_0, 0.12},
                                               {GgmlType::Q4_K, 0.12}, {GgmlType::MXFP4, 0.2}};
  for (const auto& [t, tol] : cases) {
    const std::string b = quantize(t, x.data(), 4096);
    ASSERT_EQ(b.size(), 4096u / ggml_type_info(t).block_elems * ggml_type_info(t).block_bytes);
    std::vector<float> y(4096);
    dequantize(t, reinterpret_cast<const uint8_t*>(b.data()), 4096, y.data());
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) err += (x[i] - y[i]) * (x[i] - y[i]), ref += x[i] * x[i];
    EXPECT_LE(std::sqrt(err / ref), tol) << ggml_type_info(t).name;
  }
}

// `random --preset P --gguf TYPE`: one model.gguf with the tokenizer inside, text works, and
// a quantized file holds the same model as the F32 one within the type's tolerance.
TEST(GgufRandomCli, WritesOneFileWithItsTokenizer) {
  const std::string dir = test::temp_dir("gguf-random-cli");
  for (const std::string type : {"F32", "Q8_0", "Q4_K"}) {
    const auto r = run_cli_captured({"random", "--preset", "tiny", "--out", dir + "/" + type, "--gguf", type});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/" + type + "/model.safetensors"));
    ASSERT_EQ(dump(dir + "/" + type + "/model.gguf", dir + "/" + type + ".safetensors", {"--text", "hello world"}), "");
  }
  const auto f32 = load_model(dir + "/F32/model.gguf"), q8 = load_model(dir + "/Q8_0/model.gguf");
  ASSERT_TRUE(f32->tokenizer);
  const Mat a = f32->weights.layers[0].wq.linear_f32();
  const Mat b = q8->weights.layers[0].wq.linear_f32();
  ASSERT_EQ(a.rows(), b.rows());
  EXPECT_LE((a - b).norm() / a.norm(), 0.01);
  const auto bad = run_cli_captured({"random", "--preset", "tiny", "--out", dir + "/bad", "--gguf", "Q3_K"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("Q4_K"), std::string::npos) << bad.err;
}

// Bad input: each a clear Error naming the file and the key or tensor, before the weights.
struct BadCase {
  std::string what, expect;
  std::function<void(test::GgufWriter&)> change;
};

test::GgufWriter tiny_meta(const std::string& arch) {
  test::GgufWriter g;
  const std::string a = arch + ".";
  g.set_string("general.architecture", arch);
  g.set_u32(a + "block_count", 2);
  g.set_u32(a + "context_length", 16);
  g.set_u32(a + "embedding_length", 8);
  g.set_u32(a + "feed_forward_length", 16);
  g.set_u32(a + "attention.head_count", 2);
  g.set_u32(a + "attention.head_count_kv", 1);
  g.set_u32(a + "attention.key_length", 4);
  g.set_u32(a + "vocab_size", 8);
  if (arch == "gemma2" || arch == "gemma3") g.set_u32(a + "attention.sliding_window", 4);
  if (arch == "qwen35") {  // 2 layers (linear, full), 2 value heads of 2 over 1 key head of 2
    g.set_u32(a + "rope.dimension_count", 2);
    g.set_u32(a + "ssm.conv_kernel", 4);
    g.set_u32(a + "ssm.state_size", 2);
    g.set_u32(a + "ssm.group_count", 1);
    g.set_u32(a + "ssm.time_step_rank", 2);
    g.set_u32(a + "ssm.inner_size", 4);
    g.set_u32(a + "full_attention_interval", 2);
  }
  if (arch == "lfm2") {  // a convolution layer, then attention
    g.set_i32s(a + "attention.head_count_kv", {0, 1});
    g.set_u32(a + "shortconv.l_cache", 3);
  }
  if (arch == "gpt-oss") {  // 4 experts, 2 per token, and layer 0's sinks (the traits look for them)
    g.set_u32(a + "expert_count", 4);
    g.set_u32(a + "expert_used_count", 2);
    g.add_f32("blk.0.attn_sinks.weight", {2}, {0.f, 0.f});
  }
  if (arch == "gemma4") {  // a local layer (head size 4), then a global one (8): the metadata parses
    g.set_u32(a + "attention.key_length", 8);
    g.set_u32(a + "attention.key_length_swa", 4);
    g.set_u32(a + "attention.sliding_window", 4);
    g.set_bools(a + "attention.sliding_window_pattern", {true, false});
    g.add_f32("rope_freqs.weight", {4}, {1.f, 1e30f, 1e30f, 1e30f});
  }
  return g;
}

TEST(GgufFamilyBadInput, ClearErrorsNamingTheKeyOrTensor) {
  const std::string dir = test::temp_dir("gguf-family-bad");
  const std::vector<std::pair<std::string, BadCase>> cases = {
      {"gemma3", {"unknown arch", "'general.architecture'", [](test::GgufWriter& g) { g.set_string("general.architecture", "gemma9"); }}},
      {"gemma3", {"pattern array too short", "'gemma3.attention.sliding_window_pattern' must list 2",
                  [](test::GgufWriter& g) { g.set_bools("gemma3.attention.sliding_window_pattern", {true}); }}},
      {"gemma3", {"negative pattern", "'gemma3.attention.sliding_window_pattern' = -1",
                  [](test::GgufWriter& g) { g.set_i32("gemma3.attention.sliding_window_pattern", -1); }}},
      {"gemma2", {"window 0", "'gemma2.attention.sliding_window' = 0",
                  [](test::GgufWriter& g) { g.set_u32("gemma2.attention.sliding_window", 0); }}},
      {"mistral", {"negative window", "'mistral.attention.sliding_window' = -3",
                   [](test::GgufWriter& g) { g.set_i32("mistral.attention.sliding_window", -3); }}},
      {"gemma2", {"no window", "missing metadata 'gemma2.attention.sliding_window'",
                  [](test::GgufWriter& g) { g.remove("gemma2.attention.sliding_window"); }}},
      {"gemma2", {"soft-cap 0", "'gemma2.attn_logit_softcapping'",
                  [](test::GgufWriter& g) { g.set_f32("gemma2.attn_logit_softcapping", 0.f); }}},
      {"gemma2", {"final soft-cap NaN", "'gemma2.final_logit_softcapping'",
                  [](test::GgufWriter& g) { g.set_f32("gemma2.final_logit_softcapping", NAN); }}},
      {"granite", {"logit scale negative", "'granite.logit_scale'",
                   [](test::GgufWriter& g) { g.set_f32("granite.logit_scale", -8.f); }}},
      {"smollm3", {"no_rope_layers wrong length", "'smollm3.no_rope_layers' must list 2",
                   [](test::GgufWriter& g) { g.set_i32s("smollm3.no_rope_layers", {1, 1, 0}); }}},
      {"phi3", {"odd rotary dims", "'phi3.rope.dimension_count' 3",
                [](test::GgufWriter& g) { g.set_u32("phi3.rope.dimension_count", 3); }}},
      {"phi3", {"factor list of the wrong length", "tensor 'rope_factors_short.weight' has shape (3)",
                [](test::GgufWriter& g) {
                  g.add_f32("rope_factors_short.weight", {3}, {1.f, 1.f, 1.f});
                  g.add_f32("rope_factors_long.weight", {2}, {1.f, 1.f});
                }}},
      {"phi3", {"one factor list", "'rope_factors_long.weight' is missing",
                [](test::GgufWriter& g) { g.add_f32("rope_factors_short.weight", {2}, {1.f, 1.f}); }}},
      {"phi3", {"fused rows that do not split", "tensor 'blk.0.attn_qkv.weight' has shape (17, 8), whose rows do not split",
                [](test::GgufWriter& g) { g.add_f32("blk.0.attn_qkv.weight", {17, 8}, std::vector<float>(17 * 8)); }}},
      {"qwen35", {"recurrent_layers of the wrong length", "'qwen35.attention.recurrent_layers' must list one 0 or 1 per layer (2",
                  [](test::GgufWriter& g) { g.set_bools("qwen35.attention.recurrent_layers", {true, false, true}); }}},
      {"qwen35", {"recurrent_layers entry 2", "'qwen35.attention.recurrent_layers' [1] is 2",
                  [](test::GgufWriter& g) { g.set_i32s("qwen35.attention.recurrent_layers", {1, 2}); }}},
      {"qwen35", {"inner size not whole heads", "'qwen35.ssm.inner_size' = 5 is not a multiple",
                  [](test::GgufWriter& g) { g.set_u32("qwen35.ssm.inner_size", 5); }}},
      {"qwen35", {"no ssm group count", "'qwen35.ssm.group_count'",
                  [](test::GgufWriter& g) { g.remove("qwen35.ssm.group_count"); }}},
      {"qwen35", {"every layer multi-token prediction", "'qwen35.nextn_predict_layers' = 2 must be",
                  [](test::GgufWriter& g) { g.set_u32("qwen35.nextn_predict_layers", 2); }}},
      {"qwen35", {"multi-token prediction layers 2^32", "'qwen35.nextn_predict_layers' = 4294967296 must be an integer from 0 to 1",
                  [](test::GgufWriter& g) { g.set_u64("qwen35.nextn_predict_layers", uint64_t{1} << 32); }}},
      {"llama", {"block count 2^32", "'llama.block_count' = 4294967296 must be a positive integer up to",
                 [](test::GgufWriter& g) { g.set_u64("llama.block_count", uint64_t{1} << 32); }}},
      {"qwen35", {"value heads over key heads", "is not a multiple of linear_num_key_heads",
                  [](test::GgufWriter& g) { g.set_u32("qwen35.ssm.group_count", 3), g.set_u32("qwen35.ssm.inner_size", 6),
                                            g.set_u32("qwen35.ssm.time_step_rank", 2); }}},
      {"lfm2", {"head_count_kv of the wrong length", "'lfm2.attention.head_count_kv' must list 2 integers",
                [](test::GgufWriter& g) { g.set_i32s("lfm2.attention.head_count_kv", {0}); }}},
      {"lfm2", {"two KV head counts", "'lfm2.attention.head_count_kv'[1] is 2",
                [](test::GgufWriter& g) { g.set_u32("lfm2.block_count", 2), g.set_i32s("lfm2.attention.head_count_kv", {1, 2}); }}},
      {"lfm2", {"no kernel length", "'lfm2.shortconv.l_cache'", [](test::GgufWriter& g) { g.remove("lfm2.shortconv.l_cache"); }}},
      {"gpt-oss", {"more experts per token than experts", "'gpt-oss.expert_used_count' 5 is more than the 4 experts",
                   [](test::GgufWriter& g) { g.set_u32("gpt-oss.expert_used_count", 5); }}},
      {"gpt-oss", {"no expert count", "'gpt-oss.expert_count'", [](test::GgufWriter& g) { g.remove("gpt-oss.expert_count"); }}},
      {"gemma4", {"no window pattern", "'gemma4.attention.sliding_window_pattern' must list 2 bools",
                  [](test::GgufWriter& g) { g.remove("gemma4.attention.sliding_window_pattern"); }}},
      {"gemma4", {"more experts per token than experts", "top_k_experts 9 is more than the 8 experts",
                  [](test::GgufWriter& g) {
                    g.set_u32("gemma4.expert_count", 8), g.set_u32("gemma4.expert_used_count", 9);
                    g.set_u32("gemma4.expert_feed_forward_length", 8);
                  }}},
      {"gemma4", {"head_count_kv of the wrong length", "'gemma4.attention.head_count_kv' must be a number or list 2",
                  [](test::GgufWriter& g) { g.set_i32s("gemma4.attention.head_count_kv", {1, 1, 1}); }}},
      {"gemma4", {"other KV heads on a global layer that has its own V", "'gemma4.attention.head_count_kv'[1] is 2, but a global",
                  [](test::GgufWriter& g) {
                    g.set_i32s("gemma4.attention.head_count_kv", {1, 2});
                    g.add_f32("blk.1.attn_v.weight", {16, 8}, std::vector<float>(16 * 8));
                  }}},
      {"gemma4", {"MLP widths that are not one doubled", "'gemma4.feed_forward_length'[1] is 24",
                  [](test::GgufWriter& g) { g.set_i32s("gemma4.feed_forward_length", {16, 24}); }}},
      {"gemma4", {"every layer shared", "'gemma4.attention.shared_kv_layers' = 2 must be an integer from 0 to 1",
                  [](test::GgufWriter& g) { g.set_u32("gemma4.attention.shared_kv_layers", 2); }}},
      // 64-bit values are range-checked before they are narrowed: 2^32 is not 0, 2^32 + 1 not 1,
      // 2^31 not -2^31.
      {"gemma4", {"shared layers 2^32", "'gemma4.attention.shared_kv_layers' = 4294967296 must be an integer from 0 to 1",
                  [](test::GgufWriter& g) { g.set_u64("gemma4.attention.shared_kv_layers", uint64_t{1} << 32); }}},
      {"gemma4", {"shared layers 2^32 + 1", "'gemma4.attention.shared_kv_layers' = 4294967297 must be",
                  [](test::GgufWriter& g) { g.set_u64("gemma4.attention.shared_kv_layers", (uint64_t{1} << 32) + 1); }}},
      {"gemma4", {"shared layers 2^31", "'gemma4.attention.shared_kv_layers' = 2147483648 must be",
                  [](test::GgufWriter& g) { g.set_u64("gemma4.attention.shared_kv_layers", uint64_t{1} << 31); }}},
      {"gemma4", {"per-layer input width 2^32", "'gemma4.embedding_length_per_layer_input' = 4294967296 must be",
                  [](test::GgufWriter& g) { g.set_u64("gemma4.embedding_length_per_layer_input", uint64_t{1} << 32); }}},
      {"gemma4", {"rope_freqs of the wrong length", "tensor 'rope_freqs.weight' has shape 3, expected (4)",
                  [](test::GgufWriter& g) { g.remove_tensor("rope_freqs.weight"), g.add_f32("rope_freqs.weight", {3}, {1.f, 1.f, 1.f}); }}},
      {"gemma4", {"rope_freqs not Gemma 4's", "tensor 'rope_freqs.weight' holds 2.000000 at 1",
                  [](test::GgufWriter& g) { g.remove_tensor("rope_freqs.weight"), g.add_f32("rope_freqs.weight", {4}, {1.f, 2.f, 1e30f, 1e30f}); }}},
      {"gemma4", {"value length unlike the key's", "'gemma4.attention.value_length' differs",
                  [](test::GgufWriter& g) { g.set_u32("gemma4.attention.value_length", 6); }}},
      {"gemma4", {"metadata that parses, no tensors", "missing tensor 'token_embd.weight'", [](test::GgufWriter&) {}}},
      {"gpt-oss", {"no sinks", "missing tensor 'blk.0.attn_sinks.weight'",
                   [](test::GgufWriter& g) { g.remove_tensor("blk.0.attn_sinks.weight"); }}},
  };
  // Partial RoPE (rope.dimension_count below the head size, 4 here) outside phi3: llama.cpp
  // turns other dims on the reordered families, and no Hugging Face twin has it elsewhere.
  auto all = cases;
  for (const std::string arch : {"llama", "mistral", "granite", "smollm3", "qwen2", "qwen3", "gemma3", "olmo2"})
    all.push_back({arch, {arch + " partial rope", "'" + arch + ".rope.dimension_count' 2 is less than the head size 4",
                          [arch](test::GgufWriter& g) { g.set_u32(arch + ".rope.dimension_count", 2); }}});
  int i = 0;
  for (const auto& [arch, bc] : all) {
    test::GgufWriter g = tiny_meta(arch);
    bc.change(g);
    const std::string path = dir + "/bad" + std::to_string(i++) + ".gguf";
    g.write(path);
    try {
      load_model(path);
      ADD_FAILURE() << bc.what << ": loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << bc.what << ": " << msg;
      EXPECT_NE(msg.find(bc.expect), std::string::npos) << bc.what << ": " << msg;
    }
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
