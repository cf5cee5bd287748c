// The one JSON reader (core/json_reader.h): its depth limit against an independent
// measure of depth (a recursive walk of the parsed value), its messages (line, column,
// the keys above), strings that hold brackets, NUL bytes, files, and values at the limit
// copied and dumped on a thread of their own (under ASan too).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/json_reader.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::has;

// The message parse_json throws for `text`, or "accepted".
std::string parse_error(const std::string& text, const std::string& where = "T") {
  try {
    parse_json(text, where);
    return "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    return e.what();
  }
}

// Levels of arrays and objects in a parsed value, counted by walking it (the values here
// are shallow enough for recursion): a scalar 0, [] 1, [[]] 2.
int depth_of(const nlohmann::json& j) {
  if (!j.is_array() && !j.is_object()) return 0;
  int d = 0;
  for (const auto& v : j) d = std::max(d, depth_of(v));
  return 1 + d;
}

std::string nested_arrays(int n) { return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']'); }

TEST(JsonReader, DepthLimitIsExact) {
  EXPECT_EQ(parse_error(nested_arrays(kMaxJsonDepth)), "accepted");
  const std::string e = parse_error(nested_arrays(kMaxJsonDepth + 1));
  EXPECT_TRUE(has(e, "T: JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep")) << e;
  // The bracket that went too deep is byte kMaxJsonDepth (0-based): column kMaxJsonDepth + 1.
  EXPECT_TRUE(has(e, "line 1, column " + std::to_string(kMaxJsonDepth + 1))) << e;
  EXPECT_TRUE(has(e, "HINT")) << e;
  // A million levels: refused at once, with a short message.
  const std::string deep = parse_error(nested_arrays(1000000));
  EXPECT_TRUE(has(deep, "nested more than")) << deep;
  EXPECT_LT(deep.size(), 600u);
  // Unterminated: the scan refuses it by depth too, before the parser sees it.
  EXPECT_TRUE(has(parse_error(std::string(100000, '[')), "nested more than"));
}

TEST(JsonReader, MessageNamesLineColumnAndKeys) {
  std::string text = "{\n  \"model_type\": \"x\",\n  \"text_config\": {\"a\": 1, \"unused\": [1, 2, ";
  const size_t col = text.size() - text.rfind('\n');  // the column of the next byte
  // [2] of "unused" opens the next level; depth 3 so far ({, {, [), then 300 more.
  text += nested_arrays(300) + "]}}";
  const std::string e = parse_error(text, "cfg.json");
  EXPECT_TRUE(has(e, "cfg.json: JSON nested more than")) << e;
  // The 257th level is the (256 - 3 + 1)th bracket of the run: column col + 253.
  EXPECT_TRUE(has(e, "line 3, column " + std::to_string(col + kMaxJsonDepth - 3))) << e;
  EXPECT_TRUE(has(e, "under \"text_config\" → \"unused\" → [2] → [0] → [0] → [0] … (250 more levels)")) << e;
}

TEST(JsonReader, BracketsInsideStringsDoNotCount) {
  // 400 brackets and escaped quotes inside strings (keys and values): depth 2.
  const std::string brackets(400, '[');
  const std::string text = "{\"" + brackets + "\\\"{\": [\"" + brackets + "\\\\\", \"\\\"]]]\"]}";
  nlohmann::json j;
  ASSERT_NO_THROW(j = parse_json(text, "T"));
  EXPECT_EQ(depth_of(j), 2);
  EXPECT_EQ(j.begin().key(), brackets + "\"{");
  EXPECT_EQ(j.begin().value()[0], brackets + "\\");
}

TEST(JsonReader, ProbeAgreesWithTheParsedValuesDepth) {
  // Random JSON values (objects, arrays, strings with brackets and escapes, numbers), dumped,
  // then probed with the limit at the value's own depth (accepted) and one below (refused).
  std::mt19937 rng(7);
  std::function<nlohmann::json(int)> make = [&](int budget) -> nlohmann::json {
    const int kind = budget <= 0 ? static_cast<int>(rng() % 2) : static_cast<int>(rng() % 5);
    switch (kind) {
      case 0: return static_cast<int>(rng() % 100);
      case 1: {
        std::string s;
        for (int i = 0; i < static_cast<int>(rng() % 6); ++i) s += "[{\"\\]}x"[rng() % 7];
        return s;
      }
      case 2: return nlohmann::json::array();
      case 3: {
        nlohmann::json a = nlohmann::json::array();
        for (int i = 0; i < 1 + static_cast<int>(rng() % 3); ++i) a.push_back(make(budget - 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (int i = 0; i < 1 + static_cast<int>(rng() % 3); ++i) o["k[" + std::to_string(i) + "\"{"] = make(budget - 1);
        return o;
      }
    }
  };
  int deep_ones = 0;
  for (int n = 0; n < 300; ++n) {
    const nlohmann::json v = make(static_cast<int>(rng() % 12));
    const std::string text = v.dump(n % 2 ? 1 : -1);
    const int d = depth_of(v);
    EXPECT_EQ(probe_json_depth(text, d).offset, -1) << text;
    if (d > 0) {
      EXPECT_GE(probe_json_depth(text, d - 1).offset, 0) << text;
      ++deep_ones;
    }
    EXPECT_EQ(parse_json(text, "T"), v);
  }
  EXPECT_GT(deep_ones, 100);
}

TEST(JsonReader, NulBytesAndInvalidJson) {
  const std::string e = parse_error(std::string("{\"a\":\n 1}\0{", 11));
  EXPECT_TRUE(has(e, "T: not valid JSON: a NUL byte at line 2, column 4")) << e;
  const std::string bad = parse_error("{\"a\": }");
  EXPECT_TRUE(has(bad, "T: not valid JSON: ")) << bad;
  try {
    parse_json("[1,", "T", "\n  HINT: do this.");
    ADD_FAILURE() << "accepted";
  } catch (const Error& err) {
    EXPECT_TRUE(has(err.what(), "\n  HINT: do this.")) << err.what();
  }
}

TEST(JsonReader, FilesAreNamedByPath) {
  const std::string dir = test::temp_dir("json-reader");
  test::write_bytes(dir + "/config.json", "{\"a\": " + nested_arrays(5000) + "}");
  try {
    read_json_file(dir + "/config.json", "config.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), dir + "/config.json: JSON nested more than")) << e.what();
    EXPECT_TRUE(has(e.what(), "under \"a\" → [0]")) << e.what();
  }
  test::write_bytes(dir + "/ok.json", "{\"a\": [1, {\"b\": null}]}");
  EXPECT_EQ(read_json_file(dir + "/ok.json", "ok")["a"][1].contains("b"), true);
  try {
    read_json_file(dir + "/missing.json", "settings file");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "missing.json")) << e.what();
  }
}

TEST(JsonReader, ValuesAtTheLimitCopyAndDumpOnAThread) {
  // The deepest value parse_json returns, copied, compared and dumped (all recursive in
  // nlohmann::json) on a thread of its own, whose stack is the default.
  const std::string text = nested_arrays(kMaxJsonDepth);
  std::string dumped;
  std::thread t([&] {
    const nlohmann::json j = parse_json(text, "T");
    const nlohmann::json copy = j;  // NOLINT(performance-unnecessary-copy-initialization)
    if (copy == j) dumped = copy.dump();
  });
  t.join();
  EXPECT_EQ(dumped, text);
}

}  // namespace
}  // namespace attnviz
