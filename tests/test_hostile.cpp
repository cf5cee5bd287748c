// Hostile input: every malformed file, flag or text gives an error (exit 1 or 2) with a
// message naming the problem; nothing crashes, blocks, runs away with memory or leaves a
// file behind. One test per problem found when attnviz was first tried that way.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/font_files.h"
#include "core/limits.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;

using Result = CliResult;
using test::cli;

using test::has;

// A safetensors file whose JSON header is `header` (its length in front) and 4 data bytes;
// returns the message SafetensorsFile::open throws, or "accepted".
std::string safetensors_error(const std::string& tag, const std::string& header) {
  const std::string dir = test::temp_dir(tag);
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  test::write_bytes(dir + "/x.safetensors", bytes + header + std::string(4, '\0'));
  try {
    SafetensorsFile::open(dir + "/x.safetensors");
    return "accepted";
  } catch (const Error& e) {
    return e.what();
  }
}

// A copy of a small random llama model whose config.json `edit` may change.
std::string model_with_config(const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, tag);
  nlohmann::json j = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  edit(j);
  test::write_bytes(dir + "/config.json", j.dump());
  return dir;
}

std::string error_of_load(const std::string& dir) { return test::load_error(dir); }

// --- sizes

TEST(Sizes, CheckedProductRefusesOverflowAndNegatives) {
  EXPECT_EQ(checked_product({3, 4, 5}, "x"), 60);
  EXPECT_EQ(checked_product({}, "x"), 1);
  EXPECT_EQ(checked_product({0, INT64_MAX, INT64_MAX}, "x"), 0);
  EXPECT_THROW(checked_product({int64_t{1} << 32, int64_t{1} << 32}, "x"), Error);
  EXPECT_THROW(checked_product({-1, 2}, "x"), Error);
  EXPECT_EQ(checked_dim(4, 1000, "x"), 4000);
  EXPECT_THROW(checked_dim(kMaxDim, 2, "x"), Error);
}

TEST(Sizes, HugeHeadCountIsRefusedNotNarrowed) {
  // 2^32 heads once became 0 after narrowing to int, and divided by zero.
  const std::string dir = model_with_config("heads32", [](nlohmann::json& j) { j["num_attention_heads"] = 1ULL << 32; });
  const std::string e = error_of_load(dir);
  EXPECT_TRUE(has(e, "num_attention_heads")) << e;
  EXPECT_TRUE(has(e, "16777216")) << e;
}

TEST(Sizes, EveryDimensionIsRangeChecked) {
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                          "max_position_embeddings", "num_key_value_heads", "head_dim"}) {
    const std::string dir = model_with_config(std::string("dim-") + key, [&](nlohmann::json& j) { j[key] = 1LL << 40; });
    EXPECT_TRUE(has(error_of_load(dir), key)) << key << ": " << error_of_load(dir);
  }
}

TEST(Sizes, LayerCountIsBounded) {
  // A dimension in range (2^24) but no model's layer count: refused before any per-layer
  // table or tensor list is sized by it; one past the limit names its value.
  const std::string e = error_of_load(model_with_config("layers24", [](nlohmann::json& j) { j["num_hidden_layers"] = 1 << 24; }));
  EXPECT_TRUE(has(e, "\"num_hidden_layers\" is 16777216: more layers than attnviz accepts (1024)")) << e;
  const std::string e2 = error_of_load(model_with_config("layers1025", [](nlohmann::json& j) { j["num_hidden_layers"] = 1025; }));
  EXPECT_TRUE(has(e2, "is 1025: more layers")) << e2;
}

TEST(Sizes, HeadWidthProductIsChecked) {
  // Each value is in range; their product (2^14 heads x 2^12 head_dim) is not a dimension.
  const std::string dir = model_with_config("hd", [](nlohmann::json& j) {
    j["num_attention_heads"] = 1 << 14, j["num_key_value_heads"] = 1 << 14, j["head_dim"] = 1 << 12;
  });
  EXPECT_TRUE(has(error_of_load(dir), "exceeds the largest dimension")) << error_of_load(dir);
}

TEST(Sizes, Gpt2WideModelDefaultInnerIsChecked) {
  nlohmann::json j = {{"model_type", "gpt2"}, {"vocab_size", 10}, {"n_layer", 1}, {"n_embd", 1 << 23},
                      {"n_head", 1}, {"n_positions", 8}};
  try {
    parse_config(j, "c");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "n_inner")) << e.what();
  }
}

// --- memory estimated before allocating

TEST(Memory, HugeModelIsRefusedWithTheEstimate) {
  const std::string dir = model_with_config("hugemodel", [](nlohmann::json& j) {
    j["vocab_size"] = 1 << 24, j["hidden_size"] = 1 << 20, j["num_attention_heads"] = 1 << 10,
    j["num_key_value_heads"] = 1 << 10, j.erase("head_dim");
  });
  const std::string e = error_of_load(dir);
  EXPECT_TRUE(has(e, "needs about")) << e;
  EXPECT_TRUE(has(e, "HINT")) << e;
}

TEST(Memory, HugeRandomModelIsRefusedAndLeavesNoDirectory) {
  const std::string out = test::temp_dir("hugerandom") + "/new";
  const auto r = cli({"random", "--preset", "tiny", "--embd", "8000000", "--vocab", "16000000", "--out", out});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "needs about")) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Memory, RandomModelOverTheLimitLeavesNoDirectory) {
  const std::string out = test::temp_dir("limitrandom") + "/new";
  setenv("ATTNVIZ_MAX_MEMORY_MB", "1", 1);
  const auto r = cli({"random", "--preset", "tiny", "--vocab", "100000", "--out", out});
  unsetenv("ATTNVIZ_MAX_MEMORY_MB");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Memory, LargeTraceIsRefusedBeforeTheForwardPass) {
  ModelConfig c = test::small_config("llama", 12, 64, 16, 4, 96, 4096);
  setenv("ATTNVIZ_MAX_MEMORY_MB", "100", 1);
  EXPECT_NO_THROW(check_trace_memory(c, 64));
  try {
    check_trace_memory(c, 4096);  // 12 layers x 2 x 16 heads x 4096² floats ≈ 26 GB
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "4096 tokens")) << e.what();
    EXPECT_TRUE(has(e.what(), "--block-size")) << e.what();
  }
  unsetenv("ATTNVIZ_MAX_MEMORY_MB");
}

// --- messages quote short excerpts only

TEST(Messages, ExcerptIsShortAndPrintable) {
  const std::string e = excerpt(std::string(10000, 'x') + "\n");
  EXPECT_LT(e.size(), 100u);
  EXPECT_TRUE(has(e, "10001 bytes"));
  EXPECT_EQ(excerpt(std::string("a\nb\0c", 5)), "a\\x0Ab\\x00c");
  // cut inside a multi-byte character: the partial character is dropped
  const std::string cjk = excerpt(std::string(47, 'a') + "中文");
  EXPECT_EQ(cjk.substr(0, 47), std::string(47, 'a'));
  EXPECT_EQ(cjk.substr(47, 3), "…");
}

TEST(Messages, DeeplyNestedConfigValueDoesNotOverflowTheStack) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "deep");
  std::string s = test::read_file(dir + "/config.json");
  const size_t at = s.find("\"vocab_size\": 96");
  ASSERT_NE(at, std::string::npos);
  s.replace(at, 16, "\"vocab_size\": " + std::string(200000, '[') + std::string(200000, ']'));
  test::write_bytes(dir + "/config.json", s);
  const std::string e = error_of_load(dir);
  EXPECT_TRUE(has(e, "vocab_size")) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);
}

TEST(Messages, DeeplyNestedDtypeDoesNotOverflowTheStack) {
  const std::string msg = safetensors_error("deepdtype", "{\"a\":{\"dtype\":" + std::string(200000, '[') +
                                                             std::string(200000, ']') + ",\"shape\":[1],\"data_offsets\":[0,4]}}");
  // Refused by the JSON reader's depth limit before the header is walked (core/json_reader.h).
  EXPECT_TRUE(has(msg, "header: JSON nested more than 256 levels deep")) << msg.substr(0, 300);
  EXPECT_TRUE(has(msg, "under \"a\" → \"dtype\" → [0]")) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 600u);
}

// --- files: regular only, never blocking, bounded

// Integers read from files are range-checked before they are narrowed, and the error names
// the key, the value and the range.
TEST(Sizes, IntegersAreRangeCheckedBeforeNarrowing) {
  EXPECT_EQ(checked_int(7, 0, 9, "k"), 7);
  for (int64_t v : {int64_t{1} << 32, (int64_t{1} << 32) + 1, int64_t{1} << 31, int64_t{-1}}) {
    try {
      checked_int(v, 0, 100, "metadata 'k'");
      ADD_FAILURE() << v << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "metadata 'k' = " + std::to_string(v) + " must be an integer from 0 to 100");
    }
  }
  EXPECT_EQ(json_int(nlohmann::json(5), 1, 9, "\"n\""), 5);
  for (const nlohmann::json& j : {nlohmann::json(uint64_t{1} << 32), nlohmann::json(~uint64_t{0}),
                                  nlohmann::json(int64_t{-5}), nlohmann::json("5"), nlohmann::json(1.5)})
    EXPECT_THROW(json_int(j, 1, 9, "\"n\""), Error) << j.dump();
}

// A GGUF tokenizer's token types held as 64-bit integers: 2^32 + 3 is not type 3 (control).
TEST(Sizes, GgufTokenTypesAreRangeChecked) {
  const std::string dir = test::temp_dir("hostile-token-type");
  GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.set_string("tokenizer.ggml.model", "llama");
  g.set_strings("tokenizer.ggml.tokens", {"a", "b"});
  std::string payload;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) payload += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(10, 4);  // element type U64
  put(2, 8);   // two elements
  put(1, 8);
  put((uint64_t{1} << 32) + 3, 8);
  g.set_raw("tokenizer.ggml.token_type", 9, payload);  // an ARRAY
  g.write(dir + "/t.gguf");
  try {
    read_gguf_tokenizer(GgufFile::open(dir + "/t.gguf"));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tokenizer.ggml.token_type'[1] = 4294967299 must be an integer from"),
              std::string::npos)
        << e.what();
  }
}

TEST(Files, FifoInPlaceOfAModelFileIsRefusedWithoutBlocking) {
  for (const std::string name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "fifo-" + name);
    fs::remove(dir + "/" + name);
    ASSERT_EQ(mkfifo((dir + "/" + name).c_str(), 0600), 0);
    EXPECT_TRUE(has(error_of_load(dir), "not a regular file")) << name << ": " << error_of_load(dir);
  }
}

TEST(Files, TextFileMustBeRegularAndBounded) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "textfile");
  auto r = cli({"eval", "--model", dir, "--text-file", "/dev/zero"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "not a regular file")) << r.err;
  const std::string big = dir + "/big.txt";
  {
    std::ofstream f(big);
    f.seekp(kMaxTextBytes);
    f.put('a');  // a sparse file one byte over the cap
  }
  r = cli({"eval", "--model", dir, "--text-file", big});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "more than the")) << r.err;
}

TEST(Files, JunkAfterConfigJsonIsRefused) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "junk");
  const std::string good = test::read_file(dir + "/config.json");
  test::write_bytes(dir + "/config.json", good + std::string("\0junk", 5));
  EXPECT_TRUE(has(error_of_load(dir), "NUL byte")) << error_of_load(dir);
  test::write_bytes(dir + "/config.json", good + "junk");
  EXPECT_TRUE(has(error_of_load(dir), "not valid JSON")) << error_of_load(dir);
}

TEST(Files, NulInSafetensorsHeaderIsRefused) {
  const std::string msg = safetensors_error(
      "nulheader", std::string("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}") +
                       std::string("\0junk!!!", 8));
  EXPECT_TRUE(has(msg, "NUL")) << msg;
}

// --- values

TEST(Values, NegativeOrZeroRopeThetaAndEpsAreRefused) {
  for (const char* key : {"rope_theta", "rms_norm_eps"})
    for (double v : {-1.0, 0.0}) {
      const std::string dir = model_with_config("neg", [&](nlohmann::json& j) { j[key] = v; });
      EXPECT_TRUE(has(error_of_load(dir), std::string(key) + "\" must be a positive")) << error_of_load(dir);
    }
  const std::string dir = model_with_config("hugeeps", [&](nlohmann::json& j) { j["rms_norm_eps"] = 1e300; });
  EXPECT_TRUE(has(error_of_load(dir), "finite")) << error_of_load(dir);
}

TEST(Values, NanWeightsGiveAWarningNamingTheTensor) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "nan");
  // Rewrite one tensor with a NaN and an infinity.
  const auto f = SafetensorsFile::open(dir + "/model.safetensors");
  SafetensorsWriter w;
  std::vector<std::vector<float>> keep;
  for (const auto& t : f.tensors()) {
    keep.push_back(f.read_f32(t));
    if (t.name == "model.layers.0.mlp.up_proj.weight") keep.back()[3] = NAN, keep.back()[5] = INFINITY;
    w.add_f32(t.name, t.shape, keep.back().data());
  }
  w.write(dir + "/model2.safetensors");
  fs::rename(dir + "/model2.safetensors", dir + "/model.safetensors");
  const auto m = load_model(dir);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_TRUE(has(m->warnings[0], "model.layers.0.mlp.up_proj.weight")) << m->warnings[0];
  EXPECT_TRUE(has(m->warnings[0], "2 NaN or infinite values")) << m->warnings[0];
  const auto info = cli({"info", "--model", dir});
  EXPECT_EQ(info.code, 0);
  EXPECT_TRUE(has(info.err, "warning: tensor 'model.layers.0.mlp.up_proj.weight'")) << info.err;
  const auto dump = cli({"dump", "--model", dir, "--tokens", "1,2", "--out", dir + "/d.safetensors"});
  EXPECT_TRUE(has(dump.err, "warning: tensor 'model.layers.0.mlp.up_proj.weight'")) << dump.err;
}

// --- fontconfig: a lookup leaves nothing allocated (LeakSanitizer fails this otherwise)

TEST(Fonts, LookupReleasesFontconfig) {
  const FontFile a = find_label_font();
  const FontFile b = find_label_font();
  EXPECT_EQ(a.path, b.path);
}

// --- flags

TEST(Flags, EvalStrideReachingTheWindowIsRefused) {
  // The stride once reached the block size and eval read logits outside the trace.
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "eval");
  test::write_bytes(dir + "/t.txt", "hello world, a text long enough for several windows of eight tokens");
  auto r = cli({"eval", "--model", dir, "--text-file", dir + "/t.txt", "--block-size", "8", "--stride", "8"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "--stride 8 must be smaller than the block size (8)")) << r.err;
  r = cli({"eval", "--model", dir, "--text-file", dir + "/t.txt", "--block-size", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "block size of at least 2")) << r.err;
  // The largest stride allowed scores every token once.
  r = cli({"eval", "--model", dir, "--text-file", dir + "/t.txt", "--block-size", "8", "--stride", "7", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"].get<int>(), 66);  // every token but the first
}

TEST(Flags, BlockSizeZeroIsRefused) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 96, 16), 5, "bs0");
  const std::string out = test::temp_dir("bs0out") + "/d.safetensors";
  const auto r = cli({"dump", "--model", dir, "--tokens", "1,2", "--block-size", "0", "--out", out});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "--block-size")) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Flags, BuiltinNameCannotEscapeTheAssetsFolder) {
  for (const char* spec : {"builtin:../..", "builtin:../models/poems-zh", "builtin:/etc", "builtin:", "builtin:a/b"}) {
    const auto r = cli({"info", "--model", spec});
    EXPECT_EQ(r.code, 2) << spec << ": " << r.err;
    EXPECT_TRUE(has(r.err, "is not a built-in model name")) << spec << ": " << r.err;
  }
}

}  // namespace
}  // namespace attnviz
