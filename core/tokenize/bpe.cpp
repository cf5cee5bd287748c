// The BPE model: one pre-token → ids. Characters start as their own tokens (or bytes
// through byte fallback, or the unknown token); then the pair with the lowest merge rank is
// merged, leftmost first, until no pair of neighbours has a merge.
#include <queue>

#include "core/tokenize/hf_tokenizer.h"

namespace attnviz::hf {
namespace {

inline uint64_t pair_key(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

struct Symbol {
  int id;
  int prev, next;  // neighbour indices, -1 at the ends
  bool alive;
};

struct Candidate {
  int rank, pos, left, right, merged;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void bpe_encode(const Bpe& m, std::string_view word, std::vector<int>& out) {
  if (word.empty()) return;
  if (m.ignore_merges) {
    auto it = m.vocab.find(std::string(word));
    if (it != m.vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Initial symbols, one per character.
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto add = [&](int id) { sym.push_back({id, static_cast<int>(sym.size()) - 1, -1, true}); };
  int pending_unk = -1;  // fused unknowns wait here
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
    key.assign(word.data() + i, len);
    if (i > 0 && !m.continuing_subword_prefix.empty()) key.insert(0, m.continuing_subword_prefix);
    if (i + len == word.size() && !m.end_of_word_suffix.empty()) key += m.end_of_word_suffix;
    i += len;
    auto it = m.vocab.find(key);
    if (it != m.vocab.end()) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(it->second);
      continue;
    }
    if (m.byte_fallback) {
      bool all = true;
      for (char c : key) all &= m.byte_ids[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // As Hugging Face does: the bytes go in before a pending fused unknown.
        for (char c : key) add(m.byte_ids[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (m.unk_id >= 0) {
      if (pending_unk >= 0 && !m.fuse_unk) add(pending_unk);
      pending_unk = m.unk_id;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  for (size_t i = 0; i + 1 < sym.size(); ++i) sym[i].next = static_cast<int>(i) + 1;

  if (sym.size() > 1 && !m.merges.empty()) {
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> q;
    auto consider = [&](int a) {
      const int b = sym[static_cast<size_t>(a)].next;
      if (b < 0) return;
      auto it = m.merges.find(pair_key(sym[static_cast<size_t>(a)].id, sym[static_cast<size_t>(b)].id));
      if (it != m.merges.end())
        q.push({it->second.first, a, sym[static_cast<size_t>(a)].id, sym[static_cast<size_t>(b)].id, it->second.second});
    };
    for (size_t i = 0; i + 1 < sym.size(); ++i) consider(static_cast<int>(i));
    while (!q.empty()) {
      const Candidate c = q.top();
      q.pop();
      Symbol& a = sym[static_cast<size_t>(c.pos)];
      if (!a.alive || a.id != c.left || a.next < 0) continue;
      Symbol& b = sym[static_cast<size_t>(a.next)];
      if (b.id != c.right) continue;
      a.id = c.merged;
      b.alive = false;
      a.next = b.next;
      if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = c.pos;
      if (a.prev >= 0) consider(a.prev);
      consider(c.pos);
    }
  }
  for (const Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

}  // namespace attnviz::hf
