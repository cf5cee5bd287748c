#include <gtest/gtest.h>

#include "core/error.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {
namespace {

TEST(Tokenizer, OneTokenPerCodePointIncludingChinese) {
  CharTokenizer t({"春", "江", "花", "月", "夜", " ", "a"});
  EXPECT_EQ(t.encode("春江花月夜"), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.encode("a 月"), (std::vector<int>{6, 5, 3}));
  EXPECT_EQ(t.decode({4, 3}), "夜月");
  EXPECT_EQ(t.piece(99), "<99>");
}

TEST(Tokenizer, UnknownCharacterNamesCharAndPosition) {
  CharTokenizer t({"a", "b"});
  try {
    t.encode("ab中");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'中'"), std::string::npos) << m;
    EXPECT_NE(m.find("U+4E2D"), std::string::npos) << m;
    EXPECT_NE(m.find("position 2"), std::string::npos) << m;
  }
}

TEST(Tokenizer, InvalidUtf8IsRejectedWithOffset) {
  CharTokenizer t({"a"});
  try {
    t.encode(std::string("a\xff", 2));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(utf8_split(std::string("\xe4\xb8", 2)), Error);  // truncated 3-byte sequence
}

}  // namespace
}  // namespace attnviz
