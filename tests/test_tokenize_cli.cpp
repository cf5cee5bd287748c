// attnviz-cli with real tokenizers, in-process: `tokenize` prints Hugging Face's ids and
// readable pieces; `random --tokenizer` writes a model whose --text works in dump, export
// and eval; bad tokenizer files and bad text give clear errors and leave no output file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "core/model/safetensors.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = ATTNVIZ_TOKENIZER_TEST_DATA;

using Result = CliResult;
using test::cli;

TEST(TokenizeCli, JsonIdsArePinnedAndPiecesReadable) {
  // Ids from Hugging Face (tests/data/tokenizers/expected.json, spm32k, "  two leading spaces").
  const Result r = cli({"tokenize", "--tokenizer", kData + "/spm32k.tokenizer.json", "--text", "  two leading spaces", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const json expected = json::parse(std::ifstream(kData + "/expected.json"));
  EXPECT_EQ(j.at("ids"), expected["spm32k"][9]["ids"]);
  ASSERT_EQ(j.at("pieces").size(), j.at("ids").size());
  EXPECT_EQ(j["pieces"][0], "<s>");
  for (const auto& p : j["pieces"]) EXPECT_EQ(p.get<std::string>().find("\xE2\x96\x81"), std::string::npos) << p;  // no raw ▁

  const Result n = cli({"tokenize", "--tokenizer", kData + "/spm32k.tokenizer.json", "--text", "hi", "--no-special", "--json"});
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_NE(json::parse(n.out)["ids"][0], 1);  // no BOS

  // GPT-2: a CJK character over two byte tokens shows whole, then "…"; never mojibake.
  const Result g = cli({"tokenize", "--tokenizer", kData + "/gpt2.tokenizer.json", "--text", "a 龘", "--json"});
  ASSERT_EQ(g.code, 0) << g.err;
  const json gj = json::parse(g.out);
  EXPECT_EQ(gj["ids"], json({64, 220, 11737, 246}));  // Hugging Face
  EXPECT_EQ(gj["pieces"], json({"a", "\u2423", "龘", "\u2026"}));
}

TEST(TokenizeCli, TextFileIsReadByteForByte) {
  const std::string dir = test::temp_dir("tok-file");
  test::write_bytes(dir + "/t.txt", "Hello world!\n");
  const Result r = cli({"tokenize", "--tokenizer", kData + "/gpt2.tokenizer.json", "--text-file", dir + "/t.txt", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ids"], json({15496, 995, 0, 198}));  // Hello Ġworld ! Ċ
  test::write_bytes(dir + "/bad.txt", std::string("ab\xC3", 3));
  const Result b = cli({"tokenize", "--tokenizer", kData + "/gpt2.tokenizer.json", "--text-file", dir + "/bad.txt"});
  EXPECT_EQ(b.code, 1);
  EXPECT_NE(b.err.find("byte 2"), std::string::npos) << b.err;
}

TEST(TokenizeCli, UsageAndBadFiles) {
  EXPECT_EQ(cli({"tokenize", "--text", "x"}).code, 2);
  EXPECT_EQ(cli({"tokenize", "--tokenizer", kData + "/gpt2.tokenizer.json"}).code, 2);
  const std::string dir = test::temp_dir("tok-bad");
  test::write_bytes(dir + "/tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
  const Result r = cli({"tokenize", "--tokenizer", dir + "/tokenizer.json", "--text", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(dir + "/tokenizer.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("WordPiece"), std::string::npos) << r.err;
}

TEST(TokenizeCli, RandomPresetWithTokenizerRunsText) {
  const std::string dir = test::temp_dir("tok-random") + "/m";
  // GPT-2's 50257 ids do not fit SmolLM2's 49152 rows: refused before anything is written.
  Result r = cli({"random", "--preset", "smollm2-135m", "--layers", "1", "--tokenizer", kData + "/gpt2.tokenizer.json",
                  "--out", dir});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("vocab_size 49152"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir));
  // The real shape, cut to one narrow layer to stay quick; the real vocabulary size.
  r = cli({"random", "--preset", "smollm2-135m", "--layers", "1", "--embd", "64", "--heads", "4", "--kv-heads", "2",
           "--tokenizer", kData + "/spm32k.tokenizer.json", "--out", dir});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/tokenizer.json"));
  const json cfg = json::parse(std::ifstream(dir + "/config.json"));
  EXPECT_EQ(cfg["vocab_size"], 49152);
  const std::string out = test::temp_dir("tok-random-out") + "/d.safetensors";
  r = cli({"dump", "--model", dir, "--text", "Hi \U00020000", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto f = SafetensorsFile::open(out);
  ASSERT_NE(f.find("tokens"), nullptr);
  EXPECT_EQ(f.read_i32(*f.find("tokens")), (std::vector<int32_t>{1, 15359, 28705, 243, 163, 131, 131}));  // Hugging Face
  const json expected = json::parse(std::ifstream(kData + "/expected.json"));
  const json texts = json::parse(std::ifstream(kData + "/texts.json"));
  test::write_bytes(dir + "/../t.txt", texts[0].get<std::string>());
  r = cli({"eval", "--model", dir, "--text-file", dir + "/../t.txt", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["tokens"], expected["spm32k"][0]["ids"].size() - 1);  // every token after the first is scored
  const Result tk = cli({"tokenize", "--model", dir, "--text", "Hello", "--json"});
  ASSERT_EQ(tk.code, 0) << tk.err;
  EXPECT_EQ(json::parse(tk.out)["ids"], json({1, 22557}));
}

}  // namespace
}  // namespace attnviz
