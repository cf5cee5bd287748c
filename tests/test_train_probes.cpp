// The classroom preset and what its induction score is measured on: a vocabulary a class
// can type into, a context that holds a 30-character string typed twice, and probe strings
// drawn fresh (seeded) that are not in the training corpus. The score itself on a trained
// model and the training time are measured in docs/lesson.md (a timed test would depend
// on the machine's load).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/tokenize/tokenizer.h"
#include "core/train/session.h"
#include "core/train/train.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::temp_dir;
using test::write_bytes;

// The vocabulary of builtin:typing: every printable ASCII character and the newline.
std::vector<std::string> typing_chars_vocab_for_test() {
  std::vector<std::string> v{"\n"};
  for (const char ch : typing_chars()) v.emplace_back(1, ch);
  return v;
}

bool occurs_in(const std::vector<int>& hay, const std::vector<int>& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

TEST(ClassroomPreset, ItsVocabularyHoldsWhatAClassTypes) {
  TrainOptions o;
  apply_train_preset("induction-head", o);
  EXPECT_GE(o.block_size, 64);
  const Corpus c = load_corpus(o.corpus, o.val_frac);
  const std::set<std::string> vocab(c.vocab.begin(), c.vocab.end());
  const std::string wanted = "abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?'\"-()/&@#%*+=_[]{}<>$~^`|\\";
  for (const char ch : wanted) EXPECT_TRUE(vocab.count(std::string(1, ch))) << "missing '" << ch << "'";
  for (char ch = 'A'; ch <= 'Z'; ++ch) EXPECT_TRUE(vocab.count(std::string(1, ch))) << "missing '" << ch << "'";
  EXPECT_EQ(c.vocab.size(), typing_chars().size() + 1);  // and the newline
  // "jazz" and "xylophone", typed twice, encode.
  const CharTokenizer tok(c.vocab);
  EXPECT_NO_THROW(tok.encode("jazz xylophone 42! jazz xylophone 42!"));
}

TEST(ClassroomPreset, TypingCorpusLinesAreWrittenTwice) {
  const std::string text = typing_corpus_text(5000, 7);
  EXPECT_GE(text.size(), 5000u);
  EXPECT_EQ(text, typing_corpus_text(5000, 7));
  EXPECT_NE(text, typing_corpus_text(5000, 8));
  size_t lines = 0, begin = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; begin = nl + 1, nl = text.find('\n', begin)) {
    const std::string line = text.substr(begin, nl - begin);  // "X X"
    ASSERT_EQ(line.size() % 2, 1u) << line;
    const size_t half = line.size() / 2;
    EXPECT_EQ(line.substr(0, half), line.substr(half + 1)) << line;
    EXPECT_EQ(line[half], ' ') << line;
    ++lines;
  }
  EXPECT_GT(lines, 50u);
}

TEST(InductionProbes, AreRandomStringsOfTenToThirtyTypedTwice) {
  const Corpus c = load_corpus("builtin:typing", 0.1f);
  const CharTokenizer tok(c.vocab);
  const auto probes = induction_probes(&tok, tok.vocab_size(), 64, 0, 8, &c.ids);
  ASSERT_EQ(probes.size(), 8u);
  std::set<size_t> lengths;
  const int newline = tok.encode("\n").front();
  for (const auto& p : probes) {
    ASSERT_EQ(p.size() % 2, 0u);
    const size_t n = p.size() / 2;
    EXPECT_GE(n, 10u);
    EXPECT_LE(n, 30u);
    lengths.insert(n);
    const std::vector<int> first(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(first, std::vector<int>(p.begin() + static_cast<std::ptrdiff_t>(n), p.end()));
    EXPECT_EQ(std::count(p.begin(), p.end(), newline), 0);
    // Never seen: not in the corpus (training or validation part).
    EXPECT_FALSE(occurs_in(c.ids, first)) << tok.decode(first);
  }
  EXPECT_GT(lengths.size(), 2u);  // lengths vary
  // Seeded: the same strings every time; a smaller context caps their length.
  EXPECT_EQ(probes, induction_probes(&tok, tok.vocab_size(), 64, 0, 8, &c.ids));
  for (const auto& p : induction_probes(&tok, tok.vocab_size(), 16, 0, 4, nullptr)) EXPECT_LE(p.size(), 16u);
}

TEST(InductionProbes, AStringTheCorpusHoldsIsDrawnAgain) {
  const CharTokenizer tok(typing_chars_vocab_for_test());
  const auto plain = induction_probes(&tok, tok.vocab_size(), 64, 0, 3, nullptr);
  // A corpus made of exactly the strings the probes would be: each is redrawn.
  std::vector<int> corpus;
  for (const auto& p : plain) corpus.insert(corpus.end(), p.begin(), p.end());
  const auto fresh = induction_probes(&tok, tok.vocab_size(), 64, 0, 3, &corpus);
  ASSERT_EQ(fresh.size(), plain.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_NE(fresh[i], plain[i]);
    EXPECT_FALSE(occurs_in(corpus, std::vector<int>(fresh[i].begin(), fresh[i].begin() + fresh[i].size() / 2)));
  }
}

TEST(InductionProbes, TheSessionScoresOnStringsAbsentFromItsCorpus) {
  // A corpus that holds the strings the probes would be without the check, so a session
  // that measured on them (or on its training text) fails here. A few steps only.
  const std::string dir = temp_dir("probe_corpus");
  const CharTokenizer tok(typing_chars_vocab_for_test());
  std::string text;
  for (int rep = 0; rep < 20; ++rep)
    for (const auto& p : induction_probes(&tok, tok.vocab_size(), 64, 0, 8, nullptr)) text += tok.decode(p) + "\n";
  text += typing_chars() + "\n";
  const std::string path = dir + "/corpus.txt";
  write_bytes(path, text);
  TrainingSession s;
  SessionOptions so;
  apply_train_preset("induction-head", so.train);
  so.train.corpus = path;
  so.train.steps = 2;
  so.train.eval_every = 2;
  so.train.eval_batches = 1;
  s.start(so);
  ASSERT_TRUE(s.wait_idle(60000));
  const Corpus c = load_corpus(path, so.train.val_frac);
  const auto probes = s.probes();
  ASSERT_EQ(probes.size(), 8u);
  for (const auto& p : probes) {
    const std::vector<int> first(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(p.size() / 2));
    EXPECT_FALSE(occurs_in(c.ids, first));
  }
  // Each scored step has an induction score per head, in [0, 1].
  const auto st = s.status();
  ASSERT_FALSE(st->scores.empty());
  for (const auto& h : st->scores.back().heads) {
    EXPECT_GE(h.induction, 0.f);
    EXPECT_LE(h.induction, 1.f);
  }
}

}  // namespace
}  // namespace attnviz
