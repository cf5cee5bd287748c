// The GGUF reader and model loader: metadata of every type, tensor infos, alignment, the
// tokenizer metadata, and every kind of broken file giving a clear error (exit code 1)
// naming the key or tensor, never a crash or a huge allocation.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <sstream>

#include "app/cli.h"
#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::GgufWriter;
using test::le32;
using test::le64;

std::string write(const GgufWriter& w, const std::string& tag) {
  const std::string p = test::temp_dir(tag) + "/m.gguf";
  w.write(p);
  return p;
}
std::string write_bytes(const std::string& bytes, const std::string& tag) {
  const std::string p = test::temp_dir(tag) + "/m.gguf";
  test::write_bytes(p, bytes);
  return p;
}

// The message of the attnviz::Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1) << e.what();
    return e.what();
  }
  return "";
}

ModelConfig llama_config() {
  ModelConfig c = test::small_config("llama", 2, 64, 4, 2, 300, 32);
  c.n_inner = 96;
  return c;
}

// A small valid llama GGUF (F32 and Q8_0 weights) as a writer, for the broken variants.
GgufWriter tiny_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.context_length", 16);
  w.set_u32("llama.embedding_length", 32);
  w.set_u32("llama.feed_forward_length", 32);
  w.set_u32("llama.attention.head_count", 2);
  w.set_u32("llama.attention.head_count_kv", 1);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  const int C = 32, V = 8;
  auto t = [&](const std::string& n, std::vector<int64_t> shape, GgmlType type) {
    int64_t numel = 1;
    for (auto d : shape) numel *= d;
    w.add_tensor(n, shape, type, test::random_tensor_bytes(type, numel, numel));
  };
  t("token_embd.weight", {V, C}, GgmlType::Q8_0);
  t("blk.0.attn_norm.weight", {C}, GgmlType::F32);
  t("blk.0.attn_q.weight", {C, C}, GgmlType::Q8_0);
  t("blk.0.attn_k.weight", {C / 2, C}, GgmlType::F16);
  t("blk.0.attn_v.weight", {C / 2, C}, GgmlType::F32);
  t("blk.0.attn_output.weight", {C, C}, GgmlType::Q4_0);
  t("blk.0.ffn_norm.weight", {C}, GgmlType::F32);
  t("blk.0.ffn_gate.weight", {C, C}, GgmlType::Q5_1);
  t("blk.0.ffn_up.weight", {C, C}, GgmlType::Q4_1);
  t("blk.0.ffn_down.weight", {C, C}, GgmlType::Q5_0);
  t("output_norm.weight", {C}, GgmlType::F32);
  return w;
}

TEST(Gguf, ReadsMetadataOfEveryType) {
  GgufWriter w;
  w.version = 2;
  w.set_raw("u8", 0, std::string(1, '\xfe'));
  w.set_raw("i8", 1, std::string(1, '\xfe'));
  w.set_raw("u16", 2, std::string("\x34\x12", 2));
  w.set_raw("i16", 3, std::string("\xfe\xff", 2));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -5);
  w.set_f32("f32", 0.25f);
  w.set_bool("bool", true);
  w.set_string("string", "héllo");
  w.set_u64("u64", 1ull << 40);
  w.set_raw("i64", 11, le64(static_cast<uint64_t>(-7)));
  w.set_raw("f64", 12, le64(0x3FF8000000000000ull));  // 1.5
  w.set_strings("strs", {"a", "", "ccc"});
  w.set_f32s("floats", {1.f, -2.f});
  w.set_raw("u8s", 9, le32(0) + le64(3) + std::string("\x01\x02\xff", 3));
  const auto f = GgufFile::open(write(w, "kv"));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_int("u8"), 254);
  EXPECT_EQ(f.get_int("i8"), -2);
  EXPECT_EQ(f.get_int("u16"), 0x1234);
  EXPECT_EQ(f.get_int("i16"), -2);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -5);
  EXPECT_EQ(f.get_float("f32", 0), 0.25);
  EXPECT_TRUE(f.get_bool("bool", false));
  EXPECT_EQ(f.get_string("string"), "héllo");
  EXPECT_EQ(f.get_int("u64"), 1ll << 40);
  EXPECT_EQ(f.get_int("i64"), -7);
  EXPECT_EQ(f.get_float("f64", 0), 1.5);
  EXPECT_EQ(f.find_key("strs")->strings, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.find_key("floats")->floats, (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(f.find_key("u8s")->ints, (std::vector<int64_t>{1, 2, 255}));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_NE(error_of([&] { f.get_string("u32"); }).find("'u32' must be a string"), std::string::npos);
  EXPECT_NE(error_of([&] { f.get_int("nope"); }).find("missing metadata key 'nope'"), std::string::npos);
}

TEST(Gguf, TensorInfosAlignmentAndData) {
  GgufWriter w;
  w.alignment = 64;
  w.set_u32("general.alignment", 64);
  w.add_f32("a", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.add_f32("b", {5}, {7, 8, 9, 10, 11});
  const auto f = GgufFile::open(write(w, "align"));
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* a = f.find("a");
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.read_f32(*a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.find("b")->offset, 64u);
  EXPECT_EQ(f.read_f32(*f.find("b")), (std::vector<float>{7, 8, 9, 10, 11}));
  EXPECT_EQ(f.data(*f.find("b")) - f.data(*a), 64);
}

TEST(Gguf, LoadsASmallMixedTypeModel) {
  const auto m = load_model(write(tiny_writer(), "tiny"));
  EXPECT_EQ(m->format, "gguf");
  EXPECT_EQ(m->config.model_type, "llama");
  EXPECT_EQ(m->config.n_head, 2);
  EXPECT_EQ(m->config.n_kv_head, 1);
  EXPECT_EQ(m->config.vocab_size, 8);  // from token_embd's rows
  EXPECT_TRUE(m->config.tie_embeddings);
  EXPECT_EQ(m->stored_types_str(), "F32 4 tensors, Q8_0 2, F16 1, Q4_0 1, Q4_1 1, Q5_0 1, Q5_1 1");
  // In place: the quantized tensors take their blocks' bytes, fewer than 4 per value.
  EXPECT_LT(m->weight_bytes(), m->parameter_count() * 4);
  LoadOptions f32;
  f32.weights = WeightsMode::F32;
  EXPECT_EQ(load_model(write(tiny_writer(), "tiny-f32"), f32)->weight_bytes(), m->parameter_count() * 4);
}

TEST(Gguf, DumpRunsOnTokensAndSaysWhyTextCannotWithoutATokenizer) {
  const std::string p = write(tiny_writer(), "cli");
  const std::string out = test::temp_dir("cli-out") + "/d.safetensors";
  std::ostringstream o, e;
  const char* ok[] = {"attnviz-cli", "dump", "--model", p.c_str(), "--tokens", "1,2,7", "--out", out.c_str()};
  EXPECT_EQ(run_cli(8, ok, o, e), 0) << e.str();
  const char* text[] = {"attnviz-cli", "dump", "--model", p.c_str(), "--text", "hi", "--out", out.c_str()};
  EXPECT_EQ(run_cli(8, text, o, e), 1);
  EXPECT_NE(e.str().find("the GGUF file has no tokenizer (tokenizer.ggml.tokens)"), std::string::npos) << e.str();
  const char* info[] = {"attnviz-cli", "info", "--model", p.c_str()};
  EXPECT_EQ(run_cli(4, info, o, e), 0);
  EXPECT_NE(o.str().find("weights     gguf: F32 4 tensors, Q8_0 2, F16 1"), std::string::npos) << o.str();
}

TEST(Gguf, ReadsTheTokenizerMetadata) {
  const std::string p = test::write_gguf_model_pair(llama_config(), GgmlType::F32, 1, test::temp_dir("tok"), false);
  const auto m = load_model(p);
  ASSERT_TRUE(m->gguf_tokenizer);
  const GgufTokenizerData& t = *m->gguf_tokenizer;
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "default");
  ASSERT_EQ(t.tokens.size(), 300u);
  EXPECT_EQ(t.tokens[65], "A");
  EXPECT_EQ(t.tokens[298], "<298>");
  EXPECT_EQ(t.tokens[299], "<|endoftext|>");
  EXPECT_EQ(t.token_type[299], 3);
  EXPECT_EQ(t.scores[3], -3.f);
  EXPECT_EQ(t.token_type[10], 1);
  EXPECT_EQ(t.bos_id, 299);
  EXPECT_EQ(t.add_bos, 0);
  EXPECT_EQ(t.add_space_prefix, -1);  // absent
}

// Values the safetensors path checks are checked here too: a non-positive RoPE base or
// epsilon is an error naming the key; NaN or infinite weights load with a warning naming
// the tensor.
TEST(Gguf, BadValuesAreRefusedAndNonFiniteWeightsWarn) {
  GgufWriter w = tiny_writer();
  w.set_f32("llama.rope.freq_base", -1.f);
  EXPECT_NE(error_of([&] { load_model(write(w, "theta")); }).find("'llama.rope.freq_base' must be a positive number"),
            std::string::npos);
  w = tiny_writer();
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 0.f);
  EXPECT_NE(error_of([&] { load_model(write(w, "eps")); }).find("norm epsilon must be a positive number"), std::string::npos);
  w = tiny_writer();
  w.set_u32("llama.embedding_length", 1u << 30);
  EXPECT_NE(error_of([&] { load_model(write(w, "dim")); }).find("must be a positive integer up to 16777216"),
            std::string::npos);
  w = tiny_writer();
  w.remove_tensor("blk.0.attn_norm.weight");
  std::vector<float> norm(32, 1.f);
  norm[3] = std::nanf("");
  w.add_f32("blk.0.attn_norm.weight", {32}, norm);
  const auto m = load_model(write(w, "nan"));
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("tensor 'blk.0.attn_norm.weight' holds 1 NaN or infinite value"), std::string::npos)
      << m->warnings[0];
}

// --- bad input: each a clear Error naming what is wrong.

struct BadCase {
  const char* name;
  std::function<std::string()> make;  // returns the file's path
  const char* expect;                 // fragment of the message
};

std::string tiny_bytes() { return tiny_writer().bytes(); }

// A case made by editing the tiny model's writer before it writes the file.
std::function<std::string()> edited(std::function<void(GgufWriter&)> edit) {
  return [edit] {
    GgufWriter w = tiny_writer();
    edit(w);
    return write(w, "bad");
  };
}

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> v;
  v.push_back({"missing file", [] { return test::temp_dir("bad") + "/none.gguf"; }, "cannot open '"});
  v.push_back({"empty file", [] { return write_bytes("", "bad"); }, "truncated: the magic"});
  v.push_back({"wrong magic", edited([](GgufWriter& w) { w.magic = "GGML"; }),
               "wrong magic \"GGML\""});
  v.push_back({"version 1", edited([](GgufWriter& w) { w.version = 1; }),
               "unsupported GGUF version 1"});
  v.push_back({"version 4", edited([](GgufWriter& w) { w.version = 4; }),
               "unsupported GGUF version 4"});
  v.push_back({"truncated header", [] { return write_bytes(tiny_bytes().substr(0, 20), "bad"); }, "truncated"});
  v.push_back({"truncated in the metadata", [] { return write_bytes(tiny_bytes().substr(0, 300), "bad"); }, "truncated: metadata"});
  v.push_back({"truncated in the tensor infos",
               [] { return write_bytes(tiny_bytes().substr(0, tiny_writer().header().size() - 40), "bad"); },
               "truncated: tensor 'output_norm.weight'"});
  v.push_back({"truncated data", [] { const auto b = tiny_bytes(); return write_bytes(b.substr(0, b.size() - 100), "bad"); },
               "tensor 'output_norm.weight'"});
  v.push_back({"tensor past the end",
               edited([](GgufWriter& w) { w.offset_override["blk.0.ffn_norm.weight"] = 1u << 20; }),
               "tensor 'blk.0.ffn_norm.weight' (128 bytes at data offset 1048576) runs past the end"});
  v.push_back({"overlapping tensors",
               edited([](GgufWriter& w) { w.offset_override["blk.0.attn_q.weight"] = 0; }),
               "'blk.0.attn_q.weight' overlap"});
  v.push_back({"misaligned offset",
               edited([](GgufWriter& w) { w.offset_override["blk.0.attn_q.weight"] = 33; }),
               "tensor 'blk.0.attn_q.weight': offset 33 is not a multiple of the alignment 32"});
  v.push_back({"element count overflows",
               edited([](GgufWriter& w) { w.ne_override["blk.0.attn_v.weight"] = {1ull << 32, 1ull << 32}; }),
               "tensor 'blk.0.attn_v.weight': the element count of its shape overflows"});
  v.push_back({"shape past int64",
               edited([](GgufWriter& w) { w.ne_override["blk.0.attn_v.weight"] = {~0ull}; }),
               "tensor 'blk.0.attn_v.weight': the element count of its shape overflows"});
  v.push_back({"five dimensions",
               edited([](GgufWriter& w) { w.ne_override["blk.0.attn_v.weight"] = {1, 1, 1, 1, 1}; }),
               "tensor 'blk.0.attn_v.weight': 5 dimensions"});
  v.push_back({"huge tensor count", [] {
                 std::string b = tiny_bytes();
                 const std::string n = le64(1ull << 60);
                 b.replace(8, 8, n);
                 return write_bytes(b.substr(0, 1024), "bad");
               }, "tensor count 1152921504606846976 is larger than the file could hold"});
  v.push_back({"huge metadata count", [] {
                 std::string b = tiny_bytes();
                 b.replace(16, 8, le64(~0ull));
                 return write_bytes(b.substr(0, 1024), "bad");
               }, "metadata count 18446744073709551615 is larger than the file could hold"});
  v.push_back({"huge array", edited([](GgufWriter& w) {
                 w.set_raw("tokenizer.ggml.scores", 9, le32(6) + le64(1ull << 61));
               }), "metadata 'tokenizer.ggml.scores': array length 2305843009213693952 is larger than the file could hold"});
  v.push_back({"string longer than the file", edited([](GgufWriter& w) {
                 w.set_raw("general.name", 8, le64(1ull << 40) + "abc");
               }), "metadata 'general.name': string length 1099511627776 is longer than the"});
  v.push_back({"key longer than the file", [] {
                 std::string b = tiny_bytes();
                 b.replace(24, 8, le64(1ull << 50));
                 return write_bytes(b, "bad");
               }, "metadata key #0: string length 1125899906842624"});
  v.push_back({"unknown value type", edited([](GgufWriter& w) { w.set_raw("x.y", 13, ""); }),
               "metadata 'x.y': unknown value type 13"});
  v.push_back({"nested array", edited([](GgufWriter& w) { w.set_raw("x.y", 9, le32(9) + le64(1)); }),
               "metadata 'x.y': nested arrays are not supported"});
  v.push_back({"duplicate key", [] {
                 const std::string h = "GGUF" + le32(3) + le64(0) + le64(2) + test::gguf_str("k") + le32(4) + le32(1) +
                                       test::gguf_str("k") + le32(4) + le32(2);
                 return write_bytes(h, "bad");
               }, "metadata key 'k' appears twice"});
  v.push_back({"duplicate tensor", edited([](GgufWriter& w) {
                 w.add_f32("output_norm.weight", {32}, std::vector<float>(32, 1.f));
               }), "tensor 'output_norm.weight' appears twice"});
  v.push_back({"unknown tensor type",
               edited([](GgufWriter& w) { w.type_override["blk.0.attn_v.weight"] = 77; }),
               "tensor 'blk.0.attn_v.weight': unknown tensor type 77"});
  v.push_back({"unsupported tensor type",
               edited([](GgufWriter& w) { w.type_override["blk.0.attn_v.weight"] = 23; }),
               "tensor 'blk.0.attn_v.weight': tensor type IQ4_XS is not supported"});
  v.push_back({"rows not whole blocks", edited([](GgufWriter& w) {
                 w.add_tensor("odd", {2, 16}, GgmlType::Q8_0, std::string(68, '\0'));
               }), "tensor 'odd': rows of 16 values are not whole Q8_0 blocks of 32"});
  v.push_back({"bad alignment", edited([](GgufWriter& w) { w.set_u32("general.alignment", 24); }),
               "'general.alignment' = 24 is not a power of two"});
  v.push_back({"unknown architecture", edited([](GgufWriter& w) { w.set_string("general.architecture", "mamba"); }),
               "unknown architecture 'mamba'"});
  v.push_back({"no architecture", edited([](GgufWriter& w) { w.remove("general.architecture"); }),
               "missing metadata key 'general.architecture'"});
  v.push_back({"missing key", edited([](GgufWriter& w) { w.remove("llama.block_count"); }),
               "missing metadata key 'llama.block_count'"});
  // A small file claiming 2^24 layers once had the loader list 2^24 layers' tensors (GBs)
  // before finding the first one missing.
  v.push_back({"millions of layers", edited([](GgufWriter& w) { w.set_u32("llama.block_count", 1u << 24); }),
               "metadata 'llama.block_count' is 16777216: more layers than attnviz accepts (1024)"});
  v.push_back({"key of the wrong type", edited([](GgufWriter& w) { w.set_string("llama.embedding_length", "32"); }),
               "metadata 'llama.embedding_length' must be an integer, found string"});
  v.push_back({"zero heads", edited([](GgufWriter& w) { w.set_u32("llama.attention.head_count", 0); }),
               "'llama.attention.head_count' = 0 must be a positive integer"});
  v.push_back({"rope scaling", edited([](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "dynamic"); }),
               "'llama.rope.scaling.type' \"dynamic\" is not supported"});
  v.push_back({"rope frequency factors of the wrong length", edited([](GgufWriter& w) {
                 w.add_f32("rope_freqs.weight", {3}, std::vector<float>(3, 1.f));
               }), "tensor 'rope_freqs.weight' has shape (3), expected (8) (half the rotary dims"});
  v.push_back({"a zero rope frequency factor", edited([](GgufWriter& w) {
                 std::vector<float> f(8, 1.f);
                 f[5] = 0.f;
                 w.add_f32("rope_freqs.weight", {8}, f);
               }), "RoPE factors must be positive numbers"});
  v.push_back({"linear rope scaling below 1", edited([](GgufWriter& w) {
                 w.set_string("llama.rope.scaling.type", "linear");
                 w.set_f32("llama.rope.scaling.factor", 0.5f);
               }), "'llama.rope.scaling.factor' must be a number of at least 1"});
  v.push_back({"linear rope scaling and factors at once", edited([](GgufWriter& w) {
                 w.set_string("llama.rope.scaling.type", "linear");
                 w.set_f32("llama.rope.scaling.factor", 2.f);
                 w.add_f32("rope_freqs.weight", {8}, std::vector<float>(8, 1.f));
               }), "not supported together"});
  v.push_back({"missing tensor", edited([](GgufWriter& w) {
                 w.set_u32("llama.block_count", 2);
               }), "missing tensor 'blk.1.attn_norm.weight'"});
  v.push_back({"wrong shape", edited([](GgufWriter& w) { w.set_u32("llama.feed_forward_length", 64); }),
               "tensor 'blk.0.ffn_gate.weight' has shape (32, 32), expected (64, 32)"});
  v.push_back({"tokenizer arrays disagree", edited([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "gpt2");
                 w.set_strings("tokenizer.ggml.tokens", {"a", "b", "c"});
                 w.set_f32s("tokenizer.ggml.scores", {0.f, 1.f});
               }), "'tokenizer.ggml.scores' has 2 entries but 'tokenizer.ggml.tokens' has 3"});
  v.push_back({"token types disagree", edited([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "llama");
                 w.set_strings("tokenizer.ggml.tokens", {"a", "b", "c"});
                 w.set_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1});
               }), "'tokenizer.ggml.token_type' has 4 entries but 'tokenizer.ggml.tokens' has 3"});
  v.push_back({"bos id outside the vocabulary", edited([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "llama");
                 w.set_strings("tokenizer.ggml.tokens", {"a", "b"});
                 w.set_u32("tokenizer.ggml.bos_token_id", 2);
               }), "'tokenizer.ggml.bos_token_id' = 2 is not a token id"});
  v.push_back({"more tokens than the model's vocabulary", edited([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "gpt2");
                 w.set_strings("tokenizer.ggml.tokens", std::vector<std::string>(9, "x"));
               }), "'tokenizer.ggml.tokens' has 9 tokens but the model's vocabulary is 8"});
  return v;
}

TEST(Gguf, BadInputIsAClearError) {
  for (const auto& c : bad_cases()) {
    const std::string path = c.make();
    const std::string msg = error_of([&] { load_model(path); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": got \"" << msg << "\"";
  }
}

TEST(Gguf, BadInputExitsOneFromTheCli) {
  for (const auto& c : bad_cases()) {
    const std::string path = c.make();
    const char* argv[] = {"attnviz-cli", "info", "--model", path.c_str()};
    std::ostringstream out, err;
    EXPECT_EQ(run_cli(4, argv, out, err), 1) << c.name;
    EXPECT_NE(err.str().find(c.expect), std::string::npos) << c.name << ": " << err.str();
  }
}

// A 1 KB file that claims 2^60 tensors or 2^61 array entries is refused quickly; nothing is
// reserved for the claimed counts (a reservation that size would throw bad_alloc or take
// seconds, not give the Error).
TEST(Gguf, SmallFileNeverAllocatesForItsClaims) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& c : bad_cases()) {
    const std::string name = c.name;
    if (name.rfind("huge", 0) != 0 && name.find("longer than") == std::string::npos) continue;
    const std::string path = c.make();
    EXPECT_NE(error_of([&] { GgufFile::open(path); }).find("than the"), std::string::npos) << name;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

// Random damage to a valid file: every outcome is a loaded model or an attnviz::Error.
TEST(Gguf, FuzzedFilesNeverCrash) {
  const std::string good = tiny_bytes();
  std::mt19937 rng(11);
  const std::string dir = test::temp_dir("fuzz");
  int loaded = 0, refused = 0;
  for (int i = 0; i < 600; ++i) {
    std::string b = good;
    const size_t header = tiny_writer().header().size();
    if (i % 3 == 0) {
      b.resize(rng() % b.size());  // truncation at any point
    } else if (i % 3 == 1) {
      // A random 64-bit value over any 8 header bytes: counts, lengths, dims, offsets.
      const uint64_t v = (static_cast<uint64_t>(rng()) << 32 | rng()) >> (rng() % 64);
      b.replace(rng() % (header - 8), 8, le64(v));
    } else {
      const int flips = 1 + rng() % 8;
      for (int k = 0; k < flips; ++k) b[rng() % header] = static_cast<char>(rng() & 0xff);  // damage the header
    }
    const std::string p = dir + "/f" + std::to_string(i) + ".gguf";
    test::write_bytes(p, b);
    try {
      load_model(p);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 600);
  EXPECT_GT(refused, 300);
  EXPECT_GT(loaded, 0);  // some damage leaves a loadable file (e.g. in metadata values)
}

}  // namespace
}  // namespace attnviz
