// Hostile tokenizer, GGUF, shard-index and text input: each class of problem found by
// trying such files (deep nesting, huge ids, parameters that loop, quadratic matching,
// overflowing byte counts, invalid UTF-8) is refused with an error naming the file and the
// part, or runs in linear time. The quadratic cases run inputs that the old code needed
// minutes to hours for; ctest's timeout is their generous limit (nothing is timed here).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/gguf.h"
#include "core/model/safetensors.h"
#include "core/tokenize/gguf_tokenizer.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using nlohmann::json;

using test::has;

// The message of the Error `f` throws, or "accepted".
template <class F>
std::string error_of(const F& f) {
  try {
    f();
    return "accepted";
  } catch (const Error& e) {
    return e.what();
  }
}

// A small byte-level-free BPE tokenizer.json: vocab a..z and space, no merges.
json small_tokenizer() {
  json vocab = json::object();
  int id = 0;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  vocab[" "] = id++;
  vocab["<"] = id++;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

// The message HfTokenizer gives for `text` (parsed here; nlohmann's parser is iterative),
// or "accepted".
std::string tokenizer_error(const std::string& text) {
  return error_of([&] { const HfTokenizer t(json::parse(text), "tok.json"); });
}
std::string tokenizer_error(const json& j) { return tokenizer_error(j.dump()); }

// tokenizer.json text whose `part` is a Sequence nested `depth` deep around `leaf`.
std::string nested(const std::string& part, const std::string& list_key, int depth, const std::string& leaf) {
  std::string s = small_tokenizer().dump();
  s.pop_back();  // the closing brace
  s += ",\"" + part + "\":";
  for (int i = 0; i < depth; ++i) s += "{\"type\":\"Sequence\",\"" + list_key + "\":[";
  s += leaf;
  for (int i = 0; i < depth; ++i) s += "]}";
  return s + "}";
}

// --- 1. nesting

TEST(HostileTokenizer, DeepSequencesAreRefusedWithoutRecursion) {
  const struct {
    const char *part, *key, *leaf;
  } parts[] = {{"normalizer", "normalizers", "{\"type\":\"NFC\"}"},
               {"pre_tokenizer", "pretokenizers", "{\"type\":\"Digits\"}"},
               {"decoder", "decoders", "{\"type\":\"Fuse\"}"},
               {"post_processor", "processors", "{\"type\":\"ByteLevel\"}"}};
  for (const auto& p : parts) {
    const std::string e = tokenizer_error(nested(p.part, p.key, 50000, p.leaf));
    EXPECT_TRUE(has(e, "tok.json: " + std::string(p.part))) << e;
    EXPECT_TRUE(has(e, "nested more than " + std::to_string(kMaxJsonNesting))) << e;
    // At the limit the file is read.
    EXPECT_EQ(tokenizer_error(nested(p.part, p.key, kMaxJsonNesting, p.leaf)), "accepted") << p.part;
  }
}

TEST(HostileTokenizer, DeepValuesAreNeverCopied) {
  for (const char* part : {"normalizer", "pre_tokenizer", "decoder", "post_processor"}) {
    std::string s = small_tokenizer().dump();
    s.pop_back();
    s += ",\"" + std::string(part) + "\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    const std::string e = tokenizer_error(s);
    EXPECT_TRUE(has(e, "tok.json: " + std::string(part))) << e.substr(0, 300);
    EXPECT_TRUE(has(e, "an array of 1 element")) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u);
  }
}

TEST(HostileTokenizer, JsonTypeErrorsNameTheFile) {
  const std::string path = test::temp_dir("typenum") + "/tokenizer.json";
  for (const char* text : {"{\"type\":5,\"vocab\":[]}", "{\"type\":\"char\",\"vocab\":[1]}",
                           "{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[[1,2]]}}"}) {
    test::write_bytes(path, text);
    const std::string e = error_of([&] { (void)load_tokenizer_file(path); });
    EXPECT_TRUE(has(e, path + ": ")) << text << ": " << e;
  }
}

// --- 2. ids

TEST(HostileTokenizer, HugeIdsAreRefusedBeforeAnythingIsSized) {
  json j = small_tokenizer();
  j["model"]["vocab"]["x"] = int64_t{1} << 30;
  std::string e = tokenizer_error(j);
  EXPECT_TRUE(has(e, "model.vocab[\"x\"]")) << e;
  EXPECT_TRUE(has(e, std::to_string(kMaxVocab - 1))) << e;

  // 2^40 once became 0 (token 0 turned into the BOS token).
  j = small_tokenizer();
  j["added_tokens"] = {{{"id", int64_t{1} << 40}, {"content", "<s>"}, {"special", true}}};
  e = tokenizer_error(j);
  EXPECT_TRUE(has(e, "added_tokens[0].id is 1099511627776")) << e;

  j = small_tokenizer();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {int64_t{1} << 40}}}}}}};
  e = tokenizer_error(j);
  EXPECT_TRUE(has(e, "TemplateProcessing")) << e;
  EXPECT_TRUE(has(e, "1099511627776")) << e;

  // In range but far beyond the tokens listed: the id table would be all holes.
  j = small_tokenizer();
  j["model"]["vocab"]["x"] = kMaxVocab - 1;
  e = tokenizer_error(j);
  EXPECT_TRUE(has(e, "far beyond")) << e;

  for (const json& bad : {json(-1), json(1.5), json("3"), json(uint64_t{1} << 63)}) {
    j = small_tokenizer();
    j["model"]["vocab"]["x"] = bad;
    EXPECT_TRUE(has(tokenizer_error(j), "not a token id")) << bad.dump();
  }
}

// --- 3, 4. parameters

TEST(HostileTokenizer, DecoderAndPreTokenizerParametersAreRangeChecked) {
  auto with = [](const char* part, json v) {
    json j = small_tokenizer();
    j[part] = std::move(v);
    return tokenizer_error(j);
  };
  // An empty replacement once looped forever.
  std::string e = with("decoder", {{"type", "Metaspace"}, {"replacement", ""}});
  EXPECT_TRUE(has(e, "decoder.Metaspace: \"replacement\" must be one character")) << e;
  e = with("pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "ab"}});
  EXPECT_TRUE(has(e, "pre_tokenizer.Metaspace: \"replacement\" must be one character")) << e;
  // Huge counts once looped 2^31 times per decoded text.
  e = with("decoder", {{"type", "Strip"}, {"content", " "}, {"start", int64_t{1} << 40}, {"stop", 0}});
  EXPECT_TRUE(has(e, "decoder.Strip: \"start\" must be a whole number")) << e;
  e = with("decoder", {{"type", "Strip"}, {"content", ""}, {"start", 1}, {"stop", 0}});
  EXPECT_TRUE(has(e, "decoder.Strip: \"content\" must be one character")) << e;
  e = with("decoder", {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}});
  EXPECT_TRUE(has(e, "\"start\"")) << e;
  e = with("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", 7}});
  EXPECT_TRUE(has(e, "pre_tokenizer.Split: \"behavior\" must be a string")) << e;
  e = with("pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", "yes"}});
  EXPECT_TRUE(has(e, "\"add_prefix_space\" must be true or false")) << e;
  e = with("normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", std::string(kMaxTokenizerStringBytes + 1, 'x')}});
  EXPECT_TRUE(has(e, "normalizer.Replace: \"content\" is")) << e;
  // Strip with a one-character content and a large count ends with the text.
  json j = small_tokenizer();
  j["decoder"] = {{"type", "Strip"}, {"content", "a"}, {"start", kMaxDim}, {"stop", kMaxDim}};
  const HfTokenizer t(j, "tok.json");
  EXPECT_EQ(t.decode(t.encode("aaab")), "b");
}

TEST(HostileTokenizer, NormalizerGrowthIsBoundedBeforeItIsBuilt) {
  // A 60 KB replacement of every space: 5,000 spaces would make 300 MB.
  json j = small_tokenizer();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", std::string(60000, 'a')}};
  const HfTokenizer t(j, "tok.json");
  const std::string e = error_of([&] { (void)t.encode(std::string(5000, ' ')); });
  EXPECT_TRUE(has(e, "tok.json: normalizer.Replace: the text would grow to")) << e;
  EXPECT_EQ(t.encode(" ").size(), 60000u);
}

TEST(HostileTokenizer, DecoderGrowthIsBounded) {
  // A 60 KB replacement at every position of every token: the per-token text table would
  // need about 1 GB; it stops at 256 MiB in all.
  json j = small_tokenizer();
  for (int i = 0; i < 5000; ++i) j["model"]["vocab"]["t" + std::to_string(i)] = 100 + i;
  j["decoder"] = {{"type", "Replace"}, {"pattern", {{"Regex", ""}}}, {"content", std::string(60000, 'a')}};
  const std::string e = tokenizer_error(j);
  EXPECT_TRUE(has(e, "tok.json: decoder: the tokens' decoded text exceeds")) << e;
}

TEST(HostileTokenizer, RegexErrorsNameTheFileAndPart) {
  json j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
  EXPECT_TRUE(has(tokenizer_error(j), "tok.json: pre_tokenizer.Split: the regex does not compile")) << tokenizer_error(j);
  // Catastrophic backtracking hits PCRE2's match limit: the error names the part.
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a|a?)+$"}}}, {"behavior", "Isolated"}};
  const HfTokenizer t(j, "tok.json");
  const std::string e = error_of([&] { (void)t.encode(std::string(5000, 'a') + "b"); });
  EXPECT_TRUE(has(e, "tok.json: pre_tokenizer.Split: the regex failed")) << e;
}

// --- 5. quadratic paths

TEST(HostileTokenizer, ManyAddedTokensSharingAFirstByteMatchInLinearTime) {
  // 20,000 added tokens starting with '<', and a text of 8 MB where every other byte is
  // '<': compared one by one that was 8·10^10 comparisons; the trie walks one step each.
  json j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}};
  json added = json::array();
  for (int i = 0; i < 20000; ++i)
    added.push_back({{"id", 100 + i}, {"content", "<tok" + std::to_string(i) + ">"}, {"special", true}});
  j["added_tokens"] = added;
  const HfTokenizer t(j, "tok.json");
  std::string text;
  for (int i = 0; i < 4 << 20; ++i) text += "< ";
  text += "<tok19999>";
  const std::vector<int> ids = t.encode(text);
  ASSERT_EQ(ids.size(), (4u << 20) + 1);
  EXPECT_EQ(ids.back(), 100 + 19999);
  // Longest match first, as before.
  j["added_tokens"] = {{{"id", 40}, {"content", "<a"}, {"special", true}}, {{"id", 41}, {"content", "<ab"}, {"special", true}}};
  const HfTokenizer t2(j, "tok.json");
  EXPECT_EQ(t2.encode("<ab<a"), (std::vector<int>{41, 40}));
}

TEST(HostileTokenizer, OneVeryLongSentencePiecePieceDerivesMergesInLinearTime) {
  // A llama (SentencePiece) GGUF vocabulary with one piece of 4 MB: deriving its merges
  // once copied a substring at every one of its 4·10^6 boundaries (8·10^12 bytes).
  GgufTokenizerData d;
  d.model = "llama";
  for (char c = 'a'; c <= 'z'; ++c) d.tokens.emplace_back(1, c);
  d.tokens.push_back("ab");
  d.tokens.push_back(std::string(4 << 20, 'a') + "b");
  d.tokens.push_back(std::string(4 << 20, 'a'));
  d.scores.assign(d.tokens.size(), 0.0f);
  const auto j = gguf_tokenizer_json(d, "m.gguf");
  const json& merges = j["model"]["merges"];
  // "ab" = a + b, and the long piece = its 4 MB of a's + b.
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0], json::array({"a", "b"}));
  EXPECT_EQ(merges[1][1], "b");
}

TEST(HostileTokenizer, MergesDerivedFromScoresAreBounded) {
  // Pieces a, aa, aaa, ...: piece k splits k-1 ways, so the merges grow as the cube of the
  // longest piece; past what a tokenizer.json may hold they are refused.
  GgufTokenizerData d;
  d.model = "llama";
  for (int k = 1; k <= 1500; ++k) d.tokens.push_back(std::string(static_cast<size_t>(k), 'a'));
  const std::string e = error_of([&] { (void)gguf_tokenizer_json(d, "m.gguf"); });
  EXPECT_TRUE(has(e, "m.gguf: tokenizer.ggml.tokens: the merges derived from the scores exceed")) << e;
}

TEST(HostileShards, ManyShardNamesAreRefusedInLinearTime) {
  // 200,000 different shards: a linear search per entry once took 2·10^10 comparisons
  // before anything was checked.
  const std::string dir = test::temp_dir("manyshards");
  json map = json::object();
  for (int i = 0; i < 200000; ++i) map["t" + std::to_string(i)] = "s" + std::to_string(i) + ".safetensors";
  test::write_bytes(dir + "/model.safetensors.index.json", json{{"weight_map", map}}.dump());
  const std::string e = error_of([&] { (void)SafetensorsSet::open_dir(dir); });
  EXPECT_TRUE(has(e, "model.safetensors.index.json names more than " + std::to_string(kMaxShards))) << e;
}

// --- 6. GGUF byte counts

TEST(HostileGguf, TensorByteCountOverflowIsRefused) {
  test::GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.add_tensor("t", {8}, GgmlType::F32, std::string(32, '\0'));
  g.ne_override["t"] = {(uint64_t{1} << 62) + 8};  // ·4 bytes wraps to 32
  const std::string path = test::temp_dir("ggufoverflow") + "/m.gguf";
  g.write(path);
  const std::string e = error_of([&] { (void)GgufFile::open(path); });
  EXPECT_TRUE(has(e, "tensor 't'")) << e;
  EXPECT_TRUE(has(e, "byte count")) << e;
}

// --- 7. strict UTF-8

TEST(HostileText, StrictUtf8) {
  for (const std::string bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
                                "\xED\xA0\x80", "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xF7\xBF\xBF\xBF",
                                "\xFF", "\x80", "\xE4\xB8", "\xE4\x41\x41"}) {
    const std::string e = error_of([&] { utf8_validate("ok " + bad); });
    EXPECT_TRUE(has(e, "not valid UTF-8 at byte 3")) << excerpt(bad) << ": " << e;
  }
  for (const std::string good : {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
                                 "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"})
    EXPECT_NO_THROW(utf8_validate(good)) << excerpt(good);
  EXPECT_TRUE(has(error_of([] { utf8_validate("ab\xED\xA0\x80"); }), "UTF-16 surrogate"));
  // Every tokenizer refuses it before any regex sees it.
  json j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
  const HfTokenizer t(j, "tok.json");
  EXPECT_THROW(t.encode("a \xED\xA0\x80"), Error);
  EXPECT_THROW(CharTokenizer({"a", "\xED\xA0\x80"}).encode("\xED\xA0\x80"), Error);
}

// --- 8. streamed labels

TEST(HostileText, LabelChunksEqualTheWholeList) {
  // GPT-2-style byte tokens that split a character: chunks never cut inside one.
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::bytes_to_unicode(std::string(1, static_cast<char>(b)))] = b;
  json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
            {"decoder", {{"type", "ByteLevel"}}}};
  const HfTokenizer t(j, "tok.json");
  std::string text;
  for (int i = 0; i < 300; ++i) text += i % 3 ? "\xE4\xB8\xAD" : "a b";
  const std::vector<int> ids = t.encode(text);
  const std::vector<TokenLabel> whole = token_labels(t, ids);
  for (size_t chunk : {1u, 2u, 7u, 4096u}) {
    std::vector<TokenLabel> parts;
    for_each_label_chunk(t, ids, chunk, [&](size_t first, const std::vector<TokenLabel>& l) {
      EXPECT_EQ(first, parts.size());
      parts.insert(parts.end(), l.begin(), l.end());
    });
    ASSERT_EQ(parts.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(parts[i].text, whole[i].text) << chunk << " " << i;
      EXPECT_EQ(parts[i].continues, whole[i].continues) << chunk << " " << i;
    }
  }
}

}  // namespace
}  // namespace attnviz
