// A GGUF file's own tokenizer (tokenizer.ggml.*) gives Hugging Face's ids.
//
// The test turns each real tokenizer.json of tests/data/tokenizers/ into GGUF tokenizer
// metadata the way llama.cpp's converter stores it (tokens by id, token types, "a b" merges
// for byte-level BPE; scores and no merges for SentencePiece), written into a GGUF file or
// used as plain data, and checks the ids against the ids Hugging Face's own library gives for
// the original file (expected.json, expected-extra.json). For SentencePiece this checks that
// the merges derived from the scores reproduce the file's own merges.
#include <gtest/gtest.h>

#include <cstdio>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "core/tokenize/gguf_tokenizer.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using nlohmann::json;
const std::string kData = ATTNVIZ_TOKENIZER_TEST_DATA;

using test::read_json;

// A Hugging Face tokenizer.json as llama.cpp's converter would store it in a GGUF file.
GgufTokenizerData from_hf(const json& j, const std::string& model, const std::string& pre) {
  GgufTokenizerData t;
  t.model = model;
  t.pre = pre;
  const json& m = j.at("model");
  size_t n = 0;
  for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it) n = std::max(n, it.value().get<size_t>() + 1);
  for (const json& a : j.at("added_tokens")) n = std::max(n, a.at("id").get<size_t>() + 1);
  t.tokens.assign(n, "");
  t.token_type.assign(n, kGgufNormal);
  for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it) {
    const size_t id = it.value().get<size_t>();
    t.tokens[id] = it.key();
    if (it.key().size() == 6 && it.key().rfind("<0x", 0) == 0) t.token_type[id] = kGgufByte;
  }
  for (const json& a : j.at("added_tokens")) {
    const size_t id = a.at("id").get<size_t>();
    t.tokens[id] = a.at("content").get<std::string>();
    t.token_type[id] = a.at("special").get<bool>() ? kGgufControl : kGgufUser;
  }
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    t.unk_id = m.at("vocab").at(m["unk_token"].get<std::string>()).get<int64_t>();
    t.token_type[static_cast<size_t>(t.unk_id)] = kGgufUnknown;
  }
  std::vector<std::string> merges;
  for (const json& mg : m.at("merges"))
    merges.push_back(mg.is_string() ? mg.get<std::string>()
                                    : mg[0].get<std::string>() + " " + mg[1].get<std::string>());
  if (model == "llama") {
    // SentencePiece keeps scores, not merges: the piece made by the file's r-th merge first
    // gets score -r (tokenizer.model's scores order the merges the same way); pieces no
    // merge makes score below all of them.
    t.scores.assign(n, 0.f);
    for (size_t i = 0; i < n; ++i) t.scores[i] = -static_cast<float>(merges.size() + i);
    for (size_t r = merges.size(); r-- > 0;) {
      std::string merged = merges[r];
      merged.erase(merged.find(' '), 1);
      t.scores[m.at("vocab").at(merged).get<size_t>()] = -static_cast<float>(r);
    }
    t.bos_id = m.at("vocab").at("<s>").get<int64_t>();
    t.eos_id = m.at("vocab").at("</s>").get<int64_t>();
  } else {
    t.merges = merges;
  }
  return t;
}

// Every text against Hugging Face's ids for `family` in `expected` (key "ids", or
// "ids_no_special" when `key` says so).
void expect_ids(const Tokenizer& tok, const json& texts, const json& expected, const std::string& family,
                const std::string& key = "ids") {
  ASSERT_EQ(expected.at(family).size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(tok.encode(text), expected[family][i].at(key).get<std::vector<int>>())
        << family << " on " << json(text).dump();
  }
}

// A GGUF model whose metadata holds `t`, loaded through load_model.
std::shared_ptr<const Model> gguf_model_with(const GgufTokenizerData& t, const std::string& tag) {
  ModelConfig c = test::small_config("llama", 1, 32, 2, 1, static_cast<int>(t.tokens.size()), 16);
  c.n_inner = 32;
  const std::string path = test::write_gguf_model_pair(c, GgmlType::F32, 3, test::temp_dir(tag), false, true, &t);
  return load_model(path);
}

TEST(GgufTokenizer, Gpt2FromAGgufFileMatchesHuggingFace) {
  const auto m = gguf_model_with(from_hf(read_json(kData + "/gpt2.tokenizer.json"), "gpt2", "gpt-2"), "gguf-gpt2-tok");
  ASSERT_TRUE(m->tokenizer);
  EXPECT_TRUE(m->warnings.empty());
  expect_ids(*m->tokenizer, read_json(kData + "/texts.json"), read_json(kData + "/expected.json"), "gpt2");
  // Labels as for tokenizer.json: "Ġworld" reads " world".
  EXPECT_EQ(m->tokenizer->token_bytes(995), " world");
  // attnviz-cli tokenize reads the file's tokenizer without loading the weights.
  std::ostringstream o, e;
  const char* argv[] = {"attnviz-cli", "tokenize", "--model", m->dir.c_str(), "--text", "Hello world!", "--json"};
  ASSERT_EQ(run_cli(7, argv, o, e), 0) << e.str();
  const json j = json::parse(o.str());
  EXPECT_EQ(j.at("ids").get<std::vector<int>>(), (std::vector<int>{15496, 995, 0}));
  EXPECT_EQ(j.at("pieces")[1].get<std::string>(), "\xE2\x90\xA3world");  // ␣world
}

TEST(GgufTokenizer, SentencePieceMergesFromScoresMatchHuggingFace) {
  const GgufTokenizerData t = from_hf(read_json(kData + "/spm32k.tokenizer.json"), "llama", "");
  const auto m = gguf_model_with(t, "gguf-spm-tok");
  ASSERT_TRUE(m->tokenizer);
  expect_ids(*m->tokenizer, read_json(kData + "/texts.json"), read_json(kData + "/expected.json"), "spm32k");
  // The same file with add_bos_token = false gives the ids without special tokens.
  GgufTokenizerData no_bos = t;
  no_bos.add_bos = 0;
  const json extra = read_json(kData + "/expected-extra.json");
  expect_ids(*make_gguf_tokenizer(no_bos, "spm32k"), extra.at("texts"), extra, "spm32k", "ids_no_special");
}

TEST(GgufTokenizer, Qwen3ByteLevelWithNfcMatchesHuggingFace) {
  const auto tok =
      make_gguf_tokenizer(from_hf(read_json(kData + "/qwen3-12k.tokenizer.json"), "gpt2", "qwen2"), "qwen3");
  const json extra = read_json(kData + "/expected-extra.json");
  expect_ids(*tok, extra.at("texts"), extra, "qwen3-12k");
}

TEST(GgufTokenizer, EveryKnownPreTokenizerNameBuilds) {
  GgufTokenizerData t = test::small_byte_level_tokenizer(300);
  for (const std::string& pre : gguf_pre_tokenizer_names()) {
    t.pre = pre;
    EXPECT_EQ(gguf_tokenizer_unsupported(t), "") << pre;
    EXPECT_FALSE(make_gguf_tokenizer(t, pre)->encode("the 2024 theater").empty()) << pre;
  }
}

// The hybrids' names, as llama.cpp's converter writes them: "qwen35" is Qwen2's regex with
// combining marks kept with their letter, "lfm2" Llama 3's (digits in groups of up to
// three, BOS). A small byte-level vocabulary with one merge across the mark, "q" + byte
// 0xCC (the first of U+0301's two bytes; "q" + U+0301 has no composed form, so NFC leaves
// it): Qwen3.5 keeps "q" and the mark in one piece, so the merge applies; Qwen2 cuts after
// "q" (the mark goes with "!"), so it cannot.
TEST(GgufTokenizer, HybridPreTokenizersSplitAsTheirFamilies) {
  GgufTokenizerData t = test::small_byte_level_tokenizer(300);
  const std::string q = hf::bytes_to_unicode("q"), cc = hf::bytes_to_unicode("\xCC");
  const int merged = 280;  // a placeholder id becomes "q" + 0xCC
  t.tokens[merged] = q + cc;
  t.merges.push_back(q + " " + cc);
  const std::string text = "q\xCC\x81!";
  t.pre = "qwen35";
  const std::vector<int> with = make_gguf_tokenizer(t, "qwen35")->encode(text);
  t.pre = "qwen2";
  const std::vector<int> without = make_gguf_tokenizer(t, "qwen2")->encode(text);
  EXPECT_EQ(with, (std::vector<int>{merged, 0x81, '!'}));
  EXPECT_EQ(without, (std::vector<int>{'q', 0xCC, 0x81, '!'}));
  // LFM2: Llama 3's digits and BOS; Qwen2 splits every digit.
  t = test::small_byte_level_tokenizer(300);
  t.add_bos = -1;
  t.pre = "lfm2";
  const std::vector<int> lfm = make_gguf_tokenizer(t, "lfm2")->encode("2024");
  t.pre = "llama-bpe";
  EXPECT_EQ(lfm, make_gguf_tokenizer(t, "l3")->encode("2024"));
  EXPECT_EQ(lfm.front(), 299);  // BOS, as llama.cpp adds for "lfm2"
}

// A vocabulary-only GGUF file (tokenizer metadata, no tensors) works as --tokenizer.
TEST(GgufTokenizer, VocabularyOnlyFileIsATokenizer) {
  test::GgufWriter w;
  test::set_tokenizer(w, from_hf(read_json(kData + "/gpt2.tokenizer.json"), "gpt2", "gpt-2"));
  const std::string path = test::temp_dir("vocab-only") + "/gpt2-vocab.gguf";
  w.write(path);
  std::ostringstream o, e;
  const char* argv[] = {"attnviz-cli", "tokenize", "--tokenizer", path.c_str(), "--text", "Hello world!", "--json"};
  ASSERT_EQ(run_cli(7, argv, o, e), 0) << e.str();
  EXPECT_EQ(json::parse(o.str()).at("ids").get<std::vector<int>>(), (std::vector<int>{15496, 995, 0}));
}

// llama.cpp's defaults when tokenizer.ggml.add_bos_token is absent: BOS for Llama 3's
// pre-tokenizer, none for GPT-2's; the key, when there, wins.
TEST(GgufTokenizer, BosDefaultsFollowTheFamily) {
  GgufTokenizerData t = test::small_byte_level_tokenizer(300);
  t.add_bos = -1;
  t.pre = "llama-bpe";
  EXPECT_EQ(make_gguf_tokenizer(t, "l3")->encode("the"), (std::vector<int>{299, 't', 257}));
  t.pre = "gpt-2";
  EXPECT_EQ(make_gguf_tokenizer(t, "g2")->encode("the"), (std::vector<int>{'t', 257}));
  t.add_bos = 1;
  EXPECT_EQ(make_gguf_tokenizer(t, "g2")->encode("the"), (std::vector<int>{299, 't', 257}));
  t.pre = "llama-bpe";
  t.add_bos = 0;
  EXPECT_EQ(make_gguf_tokenizer(t, "l3")->encode("the"), (std::vector<int>{'t', 257}));
}

// A tokenizer kind or pre-tokenizer attnviz does not run: the model still opens (ids work),
// `info` says why, and --text is refused with the reason and a hint.
TEST(GgufTokenizer, UnknownKindsOpenTheModelButRefuseText) {
  const std::pair<std::string, std::string> cases[] = {{"bert", "default"}, {"gpt2", "made-up-pre"}};
  for (const auto& [model, pre] : cases) {
    GgufTokenizerData t = test::small_byte_level_tokenizer(300);
    t.model = model;
    t.pre = pre;
    const auto m = gguf_model_with(t, "gguf-unknown-tok");
    EXPECT_FALSE(m->tokenizer) << model;
    ASSERT_EQ(m->warnings.size(), 1u);
    EXPECT_NE(m->warnings[0].find(model == "bert" ? "tokenizer.ggml.model 'bert'" : "tokenizer.ggml.pre 'made-up-pre'"),
              std::string::npos)
        << m->warnings[0];
    const std::string path = m->dir;
    std::ostringstream o, e;
    const char* argv[] = {"attnviz-cli", "tokenize", "--model", path.c_str(), "--text", "the"};
    EXPECT_EQ(run_cli(6, argv, o, e), 1);
    EXPECT_NE(e.str().find(m->no_tokenizer_reason), std::string::npos) << e.str();
    EXPECT_NE(e.str().find("--tokens"), std::string::npos) << e.str();
  }
}

// Gemma 4's kind ("gemma4", as llama.cpp runs it): spaces become ▁ with no prefix space, the
// file's merges apply in rank order, runs of newlines are split from the rest first, and a
// character without a piece falls back to its UTF-8 bytes. A hand-made vocabulary; the ids
// below are worked out by hand from those rules.
TEST(GgufTokenizer, Gemma4KindAsLlamaCppRunsIt) {
  GgufTokenizerData t;
  t.model = "gemma4";
  t.pre = "gemma4";
  for (const char* s : {"<pad>", "<eos>", "<bos>", "<unk>"}) t.tokens.push_back(s);
  t.token_type = {kGgufControl, kGgufControl, kGgufControl, kGgufUnknown};
  for (int b = 0; b < 256; ++b) {  // ids 4 … 259: <0x00> … <0xFF>
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    t.tokens.push_back(name);
    t.token_type.push_back(kGgufByte);
  }
  for (const char* s : {"\xE2\x96\x81", "t", "h", "e", "th", "the", "\xE2\x96\x81the", "\n", "\n\n", "c", "a", "ca",
                        "\xE2\x96\x81" "ca"}) {  // ids 260 … 272
    t.tokens.push_back(s);
    t.token_type.push_back(kGgufNormal);
  }
  t.merges = {"t h", "th e", "\xE2\x96\x81 the", "\n \n", "c a", "\xE2\x96\x81 ca"};
  t.bos_id = 2, t.eos_id = 1, t.unk_id = 3, t.pad_id = 0;
  t.add_bos = 1;
  EXPECT_EQ(gguf_tokenizer_unsupported(t), "");
  const auto tok = make_gguf_tokenizer(t, "gemma4");
  // "the cat" → the ▁ca t; "\n\n" one piece; "the ñ" → the ▁ then ñ's bytes C3 B1.
  EXPECT_EQ(tok->encode("the cat\n\nthe \xC3\xB1"), (std::vector<int>{2, 265, 272, 261, 268, 265, 260, 4 + 0xC3, 4 + 0xB1}));
  EXPECT_EQ(tok->encode("the"), (std::vector<int>{2, 265}));  // no prefix space (llama's kind would give ▁the)
  EXPECT_EQ(tok->encode(" the"), (std::vector<int>{2, 266}));
  EXPECT_EQ(tok->decode({265, 272, 261, 268, 265, 260, 4 + 0xC3, 4 + 0xB1}), "the cat\n\nthe \xC3\xB1");
}

// Broken metadata is an error naming the file: a merge naming a token the vocabulary lacks.
TEST(GgufTokenizer, AMergeOfUnknownTokensIsAnError) {
  GgufTokenizerData t = test::small_byte_level_tokenizer(300);
  t.merges.push_back("nosuch token");
  try {
    gguf_model_with(t, "gguf-bad-merge");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GGUF file '"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nosuch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnviz
