// Hugging Face tokenizer.json and labels: ids against the ids Hugging Face's own library
// gives (tests/data/tokenizers/, see its README), bad files, readable labels.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"
#include "test_util.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = ATTNVIZ_TOKENIZER_TEST_DATA;

using test::read_json;

// A tokenizer of variants.json: its base file with the listed keys set.
json variant_json(const std::string& name) {
  static const json variants = read_json(kData + "/variants.json");
  const json& v = variants.at(name);
  json j = read_json(kData + "/" + v.at("base").get<std::string>());
  for (auto it = v.at("set").begin(); it != v.at("set").end(); ++it) {
    json* node = &j;
    std::string key = it.key();
    for (size_t dot; (dot = key.find('.')) != std::string::npos; key = key.substr(dot + 1)) node = &(*node)[key.substr(0, dot)];
    (*node)[key] = it.value();
  }
  return j;
}

const HfTokenizer& variant(const std::string& name) {
  static std::map<std::string, std::unique_ptr<HfTokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<HfTokenizer>(variant_json(name), name);
  return *slot;
}

std::string show(const std::string& s) { return json(s).dump(); }

// --- the shared vectors: the three families, every text, id for id -------------------------

TEST(HfTokenizer, SharedFamiliesMatchHuggingFace) {
  const json texts = read_json(kData + "/texts.json");
  const json expected = read_json(kData + "/expected.json");
  for (const std::string family : {"gpt2", "spm32k"}) {
    const HfTokenizer& tok = variant(family);
    ASSERT_EQ(expected.at(family).size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].get<std::string>();
      EXPECT_EQ(tok.encode(text), expected[family][i].at("ids").get<std::vector<int>>()) << family << " on " << show(text);
    }
  }
}

// The full Qwen3 file (11 MB) is not in the repository; its vectors run when
// ATTNVIZ_SHARED_TOKENIZERS names a folder holding qwen3.tokenizer.json and expected.json.
TEST(HfTokenizer, FullQwen3WhenAvailable) {
  const char* dir = std::getenv("ATTNVIZ_SHARED_TOKENIZERS");
  if (!dir || !fs::exists(std::string(dir) + "/qwen3.tokenizer.json")) GTEST_SKIP() << "ATTNVIZ_SHARED_TOKENIZERS not set";
  const json texts = read_json(std::string(dir) + "/texts.json");
  const json expected = read_json(std::string(dir) + "/expected.json");
  const HfTokenizer tok(read_json(std::string(dir) + "/qwen3.tokenizer.json"), "qwen3");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(tok.encode(text), expected["qwen3"][i].at("ids").get<std::vector<int>>()) << "qwen3 on " << show(text);
  }
}

// Every variant (the three families, a reduced Qwen3, and variants that exercise the other
// normalizers, pre-tokenizers, split behaviours, unknown tokens, templates and added-token
// options) on the shared texts and our own: ids with and without special tokens, and the
// decoded text.
TEST(HfTokenizer, VariantsMatchHuggingFace) {
  const json expected = read_json(kData + "/expected-extra.json");
  const json& texts = expected.at("texts");
  int checked = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    if (it.key() == "texts") continue;
    const HfTokenizer& tok = variant(it.key());
    ASSERT_EQ(it.value().size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].get<std::string>();
      const json& e = it.value()[i];
      const std::vector<int> ids = e.at("ids").get<std::vector<int>>();
      EXPECT_EQ(tok.encode_with(text, true), ids) << it.key() << " on " << show(text);
      EXPECT_EQ(tok.encode_with(text, false), e.at("ids_no_special").get<std::vector<int>>()) << it.key() << " on " << show(text);
      EXPECT_EQ(show(tok.decode(ids)), show(e.at("decoded").get<std::string>())) << it.key() << " decoding " << show(text);
      ++checked;
    }
  }
  EXPECT_GE(checked, 12 * 37);
}

TEST(HfTokenizer, InvalidUtf8NamesByteOffset) {
  try {
    variant("gpt2").encode(std::string("ok \xE4\xB8", 5));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

// --- incremental re-tokenization ------------------------------------------------------------

// Types every text character by character (with a backspace and an edit in the middle now
// and then) through one EncodeCache: every step must give the whole-text ids, and the last
// step Hugging Face's.
TEST(HfTokenizer, IncrementalEqualsFullWhileTyping) {
  const json expected = read_json(kData + "/expected-extra.json");
  const json& texts = expected.at("texts");
  for (const std::string name : {"gpt2", "qwen3-12k", "gpt2-prefix-space-lower", "gpt2-added-strip", "spm32k"}) {
    const HfTokenizer& tok = variant(name);
    EXPECT_EQ(tok.supports_incremental(), name != "spm32k") << name;
    EncodeCache cache;
    std::string typed;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<std::string> chars = utf8_split(texts[i].get<std::string>());
      for (size_t c = 0; c < chars.size(); ++c) {
        typed += chars[c];
        ASSERT_EQ(tok.encode_incremental(typed, true, cache), tok.encode_with(typed, true)) << name << " typing " << show(typed);
        if (c % 7 == 3) {  // backspace, then type it again
          typed.resize(typed.size() - chars[c].size());
          ASSERT_EQ(tok.encode_incremental(typed, true, cache), tok.encode_with(typed, true)) << name << " after backspace " << show(typed);
          typed += chars[c];
        }
        if (c % 11 == 5 && typed.size() > 8) {  // an edit in the middle
          std::string edited = typed;
          edited.insert(edited.size() / 2 - (edited.size() / 2) % 1, " x");
          try {
            utf8_validate(edited);
          } catch (const Error&) {
            continue;
          }
          ASSERT_EQ(tok.encode_incremental(edited, true, cache), tok.encode_with(edited, true)) << name << " editing " << show(edited);
        }
      }
      // Each text alone, typed into a fresh box, ends at Hugging Face's ids.
      EncodeCache fresh;
      std::string alone;
      for (const std::string& ch : chars) tok.encode_incremental(alone += ch, true, fresh);
      EXPECT_EQ(tok.encode_incremental(alone, true, fresh), expected[name][i].at("ids").get<std::vector<int>>()) << name << " on " << show(alone);
      typed += "\n";
    }
  }
}

TEST(HfTokenizer, IncrementalRetokenizesOnlyTheEnd) {
  const HfTokenizer& g = variant("gpt2");
  std::string text;
  while (g.encode(text).size() < 4000) text += "The quick brown fox jumps over the lazy dog, again and again. ";
  EncodeCache cache;
  g.encode_incremental(text, true, cache);
  EXPECT_EQ(cache.retokenized_bytes, text.size());
  for (const char* key : {"W", "o", "r", "d", " "}) {
    text += key;
    EXPECT_EQ(g.encode_incremental(text, true, cache), g.encode(text));
    EXPECT_LT(cache.retokenized_bytes, 16u) << "after '" << key << "'";
  }
}

// --- bad files: a clear error naming the file and the part ---------------------------------

// A small valid tokenizer.json to break in one place at a time.
json tiny() {
  return json::parse(R"({
    "added_tokens": [{"id": 5, "content": "<s>", "special": true, "normalized": false}],
    "normalizer": null, "post_processor": null, "decoder": {"type": "ByteLevel"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, "<s>": 5},
              "merges": ["a b", ["Ġ", "ab"]]}})");
}

void expect_error(const json& j, const std::vector<std::string>& words) {
  try {
    HfTokenizer t(j, "dir/tokenizer.json");
    ADD_FAILURE() << "no error for " << j.dump();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_NE(m.find("dir/tokenizer.json"), std::string::npos) << m;
    for (const std::string& w : words) EXPECT_NE(m.find(w), std::string::npos) << "'" << w << "' not in: " << m;
  }
}

TEST(HfTokenizer, TinyFileWorksBothMergeForms) {
  HfTokenizer t(tiny(), "tiny");
  EXPECT_EQ(t.encode("ab ab<s>b"), (std::vector<int>{2, 4, 5, 1}));
  EXPECT_EQ(t.decode({2, 4, 5, 1}), "ab ab<s>b");
}

// ignore_merges: a pre-token that is a whole vocabulary entry is one token, even where the
// merges would not build it. Ids from Hugging Face on this file (both settings).
TEST(HfTokenizer, IgnoreMergesTakesWholeWords) {
  json j = json::parse(R"({"normalizer": null, "post_processor": null, "added_tokens": [],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "ignore_merges": true, "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "Ġ": 6},
              "merges": ["a b", "b c"]}})");
  EXPECT_EQ(HfTokenizer(j, "t").encode("abc abcc"), (std::vector<int>{5, 6, 3, 2, 2}));
  j["model"]["ignore_merges"] = false;
  EXPECT_EQ(HfTokenizer(j, "t").encode("abc abcc"), (std::vector<int>{3, 2, 6, 3, 2, 2}));
}

TEST(HfTokenizer, BadFilesNameFileAndPart) {
  // Each case: a JSON pointer into tiny(), the value put there, what the message must name.
  struct Case {
    const char* where;
    json value;
    std::vector<std::string> expect;
  };
  const Case cases[] = {
      {"/model/type", "Unigram", {"model", "Unigram"}},
      {"/normalizer", {{"type", "BertNormalizer"}}, {"normalizer", "BertNormalizer"}},
      {"/pre_tokenizer", {{"type", "Whitespace"}}, {"pre_tokenizer", "Whitespace"}},
      {"/decoder", {{"type", "WordPiece"}}, {"decoder", "WordPiece"}},
      {"/post_processor", {{"type", "RobertaProcessing"}}, {"post_processor", "RobertaProcessing"}},
      {"/model/merges", json::array({"a c"}), {"merges[0]", "\"c\""}},
      {"/model/merges", json::array({"b a"}), {"merges[0]", "\"ba\""}},
      {"/model/vocab/c", 1, {"id 1", "\"b\"", "\"c\""}},
      {"/pre_tokenizer",
       json::parse(R"({"type": "Split", "pattern": {"Regex": "(\\p{L}+"}, "behavior": "Isolated"})"),
       {"pre_tokenizer", "regex", "(\\p{L}+"}},
      {"/model/unk_token", "<unk>", {"unk_token", "<unk>"}},
  };
  for (const Case& c : cases) {
    json j = tiny();
    j[json::json_pointer(c.where)] = c.value;
    expect_error(j, c.expect);
  }
}

TEST(HfTokenizer, LoadTokenizerPicksTheFile) {
  const std::string d = test::temp_dir("tokfile");
  EXPECT_EQ(load_tokenizer(d), nullptr);
  {
    std::ofstream(d + "/tokenizer.json") << "{ not json";
  }
  try {
    load_tokenizer(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json: not valid JSON"), std::string::npos) << e.what();
  }
  std::ofstream(d + "/tokenizer.json") << tiny().dump();
  auto t = load_tokenizer(d);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->encode("ab"), (std::vector<int>{2}));
  EXPECT_NE(dynamic_cast<const HfTokenizer*>(t.get()), nullptr);
  fs::remove(d + "/tokenizer.json");
  std::ofstream(d + "/tokenizer.model") << "this is not a protobuf";
  EXPECT_THROW(load_tokenizer(d), Error);
}

// --- SentencePiece tokenizer.model --------------------------------------------------------

// A small BPE model trained here with SentencePiece's own trainer (byte fallback on). Its
// ids must be SentencePiece's own, after BOS (Hugging Face's Llama tokenizer does the same).
TEST(SentencePiece, TokenizerModelGivesSentencePieceIdsAfterBos) {
  const std::string dir = test::temp_dir("spm");
  std::string corpus;
  const json texts = read_json(kData + "/texts.json");
  for (int r = 0; r < 20; ++r)
    for (const auto& t : texts) corpus += t.get<std::string>() + "\n";
  test::write_bytes(dir + "/corpus.txt", corpus);
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + dir + "/corpus.txt --model_prefix=" + dir + "/tokenizer --vocab_size=700 --model_type=bpe "
      "--byte_fallback=true --character_coverage=0.99 --minloglevel=2");
  ASSERT_TRUE(st.ok()) << st.ToString();
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(dir + "/tokenizer.model").ok());
  auto tok = load_tokenizer(dir);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), "sentencepiece");
  for (const std::string text : {"Hello world! The quick brown fox.", "春江潮水 龘 unseen", ""}) {
    std::vector<int> want = sp.EncodeAsIds(text);
    want.insert(want.begin(), sp.bos_id());
    EXPECT_EQ(tok->encode(text), want) << text;
    EXPECT_EQ(tok->encode_with(text, false), std::vector<int>(want.begin() + 1, want.end())) << text;
    EXPECT_EQ(tok->decode(tok->encode_with(text, false)), text);
  }
  // Labels: ▁ as a space; 龘 (not in the vocabulary) as byte tokens, whole then "…".
  const std::vector<int> ids = tok->encode_with("a 龘", false);
  const auto labels = token_labels(*tok, ids);
  std::string joined;
  for (const TokenLabel& l : labels) joined += l.text + "|";
  EXPECT_NE(joined.find("龘|\xE2\x80\xA6|\xE2\x80\xA6|"), std::string::npos) << joined;
  EXPECT_EQ(labels[0].text.substr(0, 1), " ") << joined;
  std::ofstream(dir + "/tokenizer.model", std::ios::trunc) << "not a protobuf";
  EXPECT_THROW(load_tokenizer(dir), Error);
}

// --- labels --------------------------------------------------------------------------------

std::vector<std::string> label_texts(const Tokenizer& t, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (const TokenLabel& l : token_labels(t, ids)) out.push_back(l.text);
  return out;
}

TEST(TokenLabels, ByteLevelSpacesAndSplitCharacters) {
  const HfTokenizer& g = variant("gpt2");
  // "Ġworld" is " world"; 龘 is split over two byte-level tokens: whole on the first, … after.
  const std::vector<int> ids = g.encode("hello world 龘");
  ASSERT_EQ(ids, (std::vector<int>{31373, 995, 220, 11737, 246}));  // hello Ġworld Ġ é¾ ĺ (Hugging Face)
  const auto labels = token_labels(g, ids);
  EXPECT_EQ(labels[0].text, "hello");
  EXPECT_EQ(labels[1].text, " world");
  EXPECT_EQ(labels[2].text, " ");
  EXPECT_EQ(labels[3].text, "龘");
  EXPECT_EQ(labels[4].text, "\xE2\x80\xA6");
  EXPECT_TRUE(labels[4].continues);
  EXPECT_EQ(hex_bytes(labels[3].bytes), "E9 BE");
  EXPECT_EQ(hex_bytes(labels[4].bytes), "98");
  EXPECT_EQ(g.piece(ids[1]), " world");
  EXPECT_EQ(g.piece(ids[4]), "<0x98>");  // alone, a byte cannot be shown as a character
  EXPECT_EQ(display_piece(labels[1].text), "\u2423world");
}

TEST(TokenLabels, SentencePieceMetaspaceAndByteFallback) {
  const HfTokenizer& s = variant("spm32k");
  const std::vector<int> ids = s.encode("Hi \U00020000");  // <s> ▁Hi ▁ <0xF0> <0xA0> <0x80> <0x80>
  const auto texts = label_texts(s, ids);
  ASSERT_EQ(texts.size(), 7u) << json(texts).dump();
  EXPECT_EQ(texts[0], "<s>");
  EXPECT_EQ(texts[1], " Hi");
  EXPECT_EQ(texts[2], " ");
  EXPECT_EQ(texts[3], "\U00020000");
  EXPECT_EQ(texts[4], "\xE2\x80\xA6");
  EXPECT_EQ(texts[6], "\xE2\x80\xA6");
}

TEST(TokenLabels, NeverInvalidUtf8) {
  const HfTokenizer& g = variant("gpt2");
  // A lone continuation token, and a character cut off at the end.
  const std::vector<int> split = g.encode("龘");
  ASSERT_EQ(split.size(), 2u);
  for (const std::vector<int>& ids : {std::vector<int>{split[1]}, std::vector<int>{split[0]}}) {
    for (const TokenLabel& l : token_labels(g, ids)) EXPECT_NO_THROW(utf8_validate(l.text)) << show(l.text);
  }
  EXPECT_EQ(label_texts(g, {split[0]})[0], "<0xE9><0xBE>");
}

TEST(TokenLabels, CharTokenizerLabelsArePieces) {
  CharTokenizer t({"春", " ", "a"});
  EXPECT_EQ(label_texts(t, {0, 1, 2}), (std::vector<std::string>{"春", " ", "a"}));
}

}  // namespace
}  // namespace attnviz
