// HfTokenizer: reading tokenizer.json, added-token matching, the encode pipeline,
// post-processors and decoders. Normalizers, pre-tokenizers and BPE are in their own files.
#include "core/tokenize/hf_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

using nlohmann::json;
using namespace hf;

namespace {

// The member `key` of object j, or null when absent: read in place, never copied (a
// copy of a value nested thousands deep would recurse once per level).
const json& member(const json& j, const std::string& key) {
  static const json none;
  if (!j.is_object()) return none;
  const auto it = j.find(key);
  return it == j.end() ? none : *it;
}

// Reads "type" of a component, or an Error naming the part.
std::string type_of(const json& j, const std::string& where) {
  const json& t = member(j, "type");
  if (!t.is_string()) throw Error(where + ": expected an object with a \"type\", found " + json_excerpt(j));
  return excerpt(t.get_ref<const std::string&>(), 64);
}

[[noreturn]] void unknown_type(const std::string& where, const std::string& type, const std::string& supported) {
  throw Error(where + ": type \"" + type + "\" is not supported (attnviz reads " + supported + ")" +
              "\n  HINT: open an issue with the model's name; meanwhile pass token ids with --tokens.");
}

bool flag(const json& j, const char* key, bool def, const std::string& where = "") {
  const json& v = member(j, key);
  if (v.is_null()) return def;
  if (!v.is_boolean()) throw Error(where + (where.empty() ? "" : ": ") + "\"" + key + "\" must be true or false, found " + json_excerpt(v));
  return v.get<bool>();
}

// A string parameter of at most kMaxTokenizerStringBytes, or `def` when absent or null.
std::string text_param(const json& j, const char* key, const std::string& where, const std::string& def) {
  const json& v = member(j, key);
  if (v.is_null()) return def;
  if (!v.is_string()) throw Error(where + ": \"" + key + "\" must be a string, found " + json_excerpt(v));
  const std::string& t = v.get_ref<const std::string&>();
  if (static_cast<int64_t>(t.size()) > kMaxTokenizerStringBytes)
    throw Error(where + ": \"" + key + "\" is " + std::to_string(t.size()) + " bytes, more than the " +
                std::to_string(kMaxTokenizerStringBytes) + " attnviz accepts\n  HINT: the file is damaged or not a tokenizer.json.");
  return t;
}

// A parameter that Hugging Face holds as one `char`: exactly one UTF-8 character.
std::string char_param(const json& j, const char* key, const std::string& where, const std::string& def) {
  const std::string c = text_param(j, key, where, def);
  if (c.empty() || utf8_valid_len(c, 0) != c.size())
    throw Error(where + ": \"" + key + "\" must be one character, found \"" + excerpt(c) + "\"" +
                "\n  HINT: the file is damaged; Hugging Face's tokenizers hold this as a single char.");
  return c;
}

// A count parameter in [0, kMaxDim] (default `def`), refused when it is not one.
int count_param(const json& j, const char* key, const std::string& where, int def) {
  const json& v = member(j, key);
  if (v.is_null()) return def;
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMaxDim) : v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxDim))
    throw Error(where + ": \"" + key + "\" must be a whole number from 0 to " + std::to_string(kMaxDim) + ", found " +
                json_excerpt(v));
  return static_cast<int>(v.get<int64_t>());
}

// A token id: a whole number below kMaxVocab, read as 64 bits and never truncated.
int id_value(const json& v, const std::string& what) {
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(kMaxVocab)
                                                        : v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxVocab))
    throw Error(what + " is " + json_excerpt(v) + ", not a token id from 0 to " + std::to_string(kMaxVocab - 1) +
                " (the largest vocabulary attnviz reads)\n  HINT: the file is damaged or not a tokenizer.json.");
  return static_cast<int>(v.get<int64_t>());
}

Pattern read_pattern(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return Pattern{text_param(j, "String", where + ".pattern", ""), nullptr};
  if (j.contains("Regex")) return Pattern{"", std::make_shared<Regex>(text_param(j, "Regex", where + ".pattern", ""), where)};
  throw Error(where + ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

// Walks a component that may be a Sequence of components (Sequences nested in Sequences),
// depth first in file order, without recursion and without copying: `leaf` gets each
// non-Sequence component. `list_key` names a Sequence's list ("normalizers", ...).
// Sequences nested deeper than kMaxJsonNesting are refused.
void walk_sequence(const json& root, const char* list_key, const std::string& where,
                   const std::function<void(const json&, const std::string&)>& leaf) {
  if (root.is_null()) return;
  struct Frame {
    const json* items;
    size_t next;
  };
  std::vector<Frame> stack;
  const std::string inner = where + ".Sequence";
  auto visit = [&](const json& c) {
    const std::string& w = stack.empty() ? where : inner;
    if (type_of(c, w) != "Sequence") return leaf(c, w);
    const json& items = member(c, list_key);
    if (!items.is_array()) throw Error(w + ": a Sequence needs a \"" + list_key + "\" array, found " + json_excerpt(items));
    if (static_cast<int>(stack.size()) >= kMaxJsonNesting)
      throw Error(w + ": Sequences nested more than " + std::to_string(kMaxJsonNesting) +
                  " deep (attnviz's limit)\n  HINT: the file is damaged or hostile; real tokenizers nest one or two.");
    stack.push_back({&items, 0});
  };
  visit(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.items->size()) {
      stack.pop_back();
      continue;
    }
    visit((*f.items)[f.next++]);  // may push: `f` is not used after this
  }
}

void read_normalizer(const json& root, const std::string& where, std::vector<Normalizer>& out) {
  walk_sequence(root, "normalizers", where, [&](const json& j, const std::string& w) {
    const std::string t = type_of(j, w);
    const std::string at = w + "." + t;
    if (t == "NFC") out.push_back({Normalizer::NFC, "", {}, at});
    else if (t == "NFD") out.push_back({Normalizer::NFD, "", {}, at});
    else if (t == "NFKC") out.push_back({Normalizer::NFKC, "", {}, at});
    else if (t == "NFKD") out.push_back({Normalizer::NFKD, "", {}, at});
    else if (t == "Lowercase") out.push_back({Normalizer::Lowercase, "", {}, at});
    else if (t == "Prepend") out.push_back({Normalizer::Prepend, text_param(j, "prepend", at, ""), {}, at});
    else if (t == "Replace")
      out.push_back({Normalizer::Replace, text_param(j, "content", at, ""), read_pattern(member(j, "pattern"), at), at});
    else unknown_type(w, t, "NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence");
  });
}

Behavior read_behavior(const json& j, const std::string& where) {
  const std::string b = text_param(j, "behavior", where, "Isolated");
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  throw Error(where + ": behavior \"" + excerpt(b) + "\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

PreTokenizer::Prepend read_prepend_scheme(const json& j, const std::string& where) {
  const json& v = member(j, "prepend_scheme");
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return s == "never" ? PreTokenizer::Never : s == "first" ? PreTokenizer::First : PreTokenizer::Always;
  }
  return flag(j, "add_prefix_space", true, where) ? PreTokenizer::Always : PreTokenizer::Never;
}

void read_pre_tokenizer(const json& root, const std::string& where, std::vector<PreTokenizer>& out) {
  walk_sequence(root, "pretokenizers", where, [&](const json& j, const std::string& w) {
    const std::string t = type_of(j, w);
    PreTokenizer p{};
    if (t == "ByteLevel") {
      p.kind = PreTokenizer::ByteLevel;
      p.add_prefix_space = flag(j, "add_prefix_space", true, w + ".ByteLevel");
      p.use_regex = flag(j, "use_regex", true, w + ".ByteLevel");
    } else if (t == "Split") {
      p.kind = PreTokenizer::Split;
      p.pattern = read_pattern(member(j, "pattern"), w + ".Split");
      p.behavior = read_behavior(j, w + ".Split");
      p.invert = flag(j, "invert", false, w + ".Split");
    } else if (t == "Digits") {
      p.kind = PreTokenizer::Digits;
      p.individual_digits = flag(j, "individual_digits", false, w + ".Digits");
    } else if (t == "Metaspace") {
      p.kind = PreTokenizer::Metaspace;
      p.replacement = char_param(j, "replacement", w + ".Metaspace", "\xE2\x96\x81");
      p.prepend_scheme = read_prepend_scheme(j, w + ".Metaspace");
      p.split = flag(j, "split", true, w + ".Metaspace");
    } else {
      unknown_type(w, t, "ByteLevel, Split, Digits, Metaspace, Sequence");
    }
    out.push_back(std::move(p));
  });
}

void read_decoder(const json& root, const std::string& where, std::vector<Decoder>& out) {
  walk_sequence(root, "decoders", where, [&](const json& j, const std::string& w) {
    const std::string t = type_of(j, w);
    Decoder d{};
    d.where = w + "." + t;
    if (t == "ByteLevel") d.kind = Decoder::ByteLevel;
    else if (t == "ByteFallback") d.kind = Decoder::ByteFallback;
    else if (t == "Fuse") d.kind = Decoder::Fuse;
    else if (t == "Replace") {
      d.kind = Decoder::Replace;
      d.pattern = read_pattern(member(j, "pattern"), w + ".Replace");
      d.text = text_param(j, "content", w + ".Replace", "");
    } else if (t == "Strip") {
      // Hugging Face: content is one char, start and stop counts of it.
      d.kind = Decoder::Strip;
      d.text = char_param(j, "content", w + ".Strip", "");
      d.start = count_param(j, "start", w + ".Strip", 0);
      d.stop = count_param(j, "stop", w + ".Strip", 0);
    } else if (t == "Metaspace") {
      d.kind = Decoder::Metaspace;
      d.text = char_param(j, "replacement", w + ".Metaspace", "\xE2\x96\x81");
      d.prepend = read_prepend_scheme(j, w + ".Metaspace") != PreTokenizer::Never;
    } else {
      unknown_type(w, t, "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence");
    }
    out.push_back(std::move(d));
  });
}

// Unicode White_Space, as Rust's char::is_whitespace.
bool is_space_cp(int32_t cp) {
  return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_cp(int32_t cp) {
  if (cp == '_') return true;
  const auto c = utf8proc_category(cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

// The code point that ends just before byte `i` (i > 0) and its start.
int32_t cp_before(std::string_view s, size_t i, size_t* start) {
  size_t b = i - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) >> 6) == 0x2) --b;
  utf8proc_int32_t cp = -1;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + b), static_cast<utf8proc_ssize_t>(i - b), &cp);
  if (start) *start = b;
  return cp;
}

int32_t cp_at(std::string_view s, size_t i, size_t* len) {
  utf8proc_int32_t cp = -1;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (len) *len = n > 0 ? static_cast<size_t>(n) : 1;
  return cp;
}

}  // namespace

namespace {
struct Part {
  std::string text;
  int added_id;
  bool at_start;
};
}  // namespace

// The added tokens of one kind (raw or normalized) as a byte trie: an edge per (node, byte)
// in one hash map, and the token that ends at each node. Finding the longest token at a
// position walks the text once from there, so a text is matched in time proportional to
// its length times the depth the walks reach (the longest common run of text and a token),
// not times the number of tokens (20,000 tokens sharing a first byte cost no more than one).
class AddedTrie {
 public:
  void add(const AddedToken* t) {
    int node = 0;
    for (char c : t->content) {
      const auto [it, fresh] = edges_.emplace(key(node, c), static_cast<int>(ends_.size()));
      if (fresh) ends_.push_back(nullptr);
      node = it->second;
    }
    if (!ends_[static_cast<size_t>(node)]) ends_[static_cast<size_t>(node)] = t;  // the first of equal contents wins
  }
  // The longest token that text[i...] starts with, or nullptr.
  const AddedToken* longest_at(const std::string& text, size_t i) const {
    const AddedToken* best = nullptr;
    int node = 0;
    for (size_t k = i; k < text.size(); ++k) {
      const auto it = edges_.find(key(node, text[k]));
      if (it == edges_.end()) break;
      node = it->second;
      if (const AddedToken* t = ends_[static_cast<size_t>(node)]) best = t;
    }
    return best;
  }

 private:
  static uint64_t key(int node, char c) { return (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c); }
  std::unordered_map<uint64_t, int> edges_;       // (node, byte) → child node
  std::vector<const AddedToken*> ends_{nullptr};  // node → the token ending there (node 0: the root)
};

namespace {
// Splits `text` at the added tokens in `trie`: leftmost match first, then the longest
// there; lstrip/rstrip take the spaces beside a match along, single_word skips matches
// inside a word. Parts that are not tokens keep `at_start` when they begin at byte 0 of a
// text that had it.
void split_added(const AddedTrie& trie, const std::string& text, bool at_start, std::vector<Part>& out) {
  size_t prev = 0;  // end of the last match
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = trie.longest_at(text, i);
    if (!hit) {
      ++i;
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->single_word) {
      const bool left_ok = b == 0 || !is_word_cp(cp_before(text, b, nullptr));
      const bool right_ok = e == text.size() || !is_word_cp(cp_at(text, e, nullptr));
      if (!left_ok || !right_ok) {
        ++i;
        continue;
      }
    }
    if (hit->lstrip)
      while (b > prev) {
        size_t s = 0;
        if (!is_space_cp(cp_before(text, b, &s))) break;
        b = s;
      }
    if (hit->rstrip)
      while (e < text.size()) {
        size_t len = 0;
        if (!is_space_cp(cp_at(text, e, &len))) break;
        e += len;
      }
    if (b > prev) out.push_back({text.substr(prev, b - prev), -1, at_start && prev == 0});
    out.push_back({"", hit->id, false});
    prev = i = e;
  }
  if (prev < text.size()) out.push_back({text.substr(prev), -1, at_start && prev == 0});
}
}  // namespace

// The two matchers (raw text, normalized text), over pointers into added_.
struct HfAddedIndex {
  AddedTrie raw, norm;
};

HfTokenizer::HfTokenizer(const json& j, const std::string& name) : name_(name) {
  try {
    if (!j.is_object()) throw Error(name + ": expected a JSON object");
    // --- model
    if (!j.contains("model") || !j["model"].is_object()) throw Error(name + ": no \"model\" object");
    const json& m = j["model"];
    const std::string mtype = text_param(m, "type", name + ": model", "BPE");
    if (mtype != "BPE") unknown_type(name + ": model", mtype, "BPE");
    if (!m.contains("vocab") || !m["vocab"].is_object()) throw Error(name + ": model.vocab must be an object {token: id}");
    int max_id = -1;
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      const int id = id_value(it.value(), name + ": model.vocab[\"" + excerpt(it.key()) + "\"]");
      bpe_.vocab.emplace(it.key(), id);
      max_id = std::max(max_id, id);
    }
    const json& added = member(j, "added_tokens");
    if (!added.is_null() && !added.is_array()) throw Error(name + ": added_tokens must be an array, found " + json_excerpt(added));
    if (added.is_array())
      for (size_t k = 0; k < added.size(); ++k) {
        const json& a = added[k];
        const std::string w = name + ": added_tokens[" + std::to_string(k) + "]";
        if (!a.is_object()) throw Error(w + " must be an object, found " + json_excerpt(a));
        AddedToken t;
        t.id = id_value(member(a, "id"), w + ".id");
        t.content = text_param(a, "content", w, "");
        t.special = flag(a, "special", false, w);
        t.normalized = flag(a, "normalized", !t.special, w);
        t.lstrip = flag(a, "lstrip", false, w);
        t.rstrip = flag(a, "rstrip", false, w);
        t.single_word = flag(a, "single_word", false, w);
        if (t.content.empty()) throw Error(w + " (id " + std::to_string(t.id) + ") is empty");
        // As Hugging Face does: content that the vocabulary has keeps the vocabulary's id.
        if (auto v = bpe_.vocab.find(t.content); v != bpe_.vocab.end()) t.id = v->second;
        max_id = std::max(max_id, t.id);
        added_.push_back(std::move(t));
      }
    // The id → token table is sized by the largest id: ids far beyond the number of tokens
    // (a file of holes) are refused before it is allocated.
    const size_t n_tokens = bpe_.vocab.size() + added_.size();
    if (max_id >= 0 && static_cast<size_t>(max_id) >= 2 * n_tokens + 1024)
      throw Error(name + ": token id " + std::to_string(max_id) + " is far beyond the " + std::to_string(n_tokens) +
                  " tokens the file lists (ids must be about 0 ... N-1)\n  HINT: the file is damaged or hostile.");
    id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
    std::vector<char> used(id_to_token_.size(), 0);
    for (const auto& [tok, id] : bpe_.vocab) {
      if (used[static_cast<size_t>(id)])
        throw Error(name + ": model.vocab gives id " + std::to_string(id) + " to both \"" + id_to_token_[static_cast<size_t>(id)] +
                    "\" and \"" + tok + "\"");
      used[static_cast<size_t>(id)] = 1;
      id_to_token_[static_cast<size_t>(id)] = tok;
    }
    special_.assign(id_to_token_.size(), 0);
    for (const AddedToken& t : added_) {
      auto& slot = id_to_token_[static_cast<size_t>(t.id)];
      if (used[static_cast<size_t>(t.id)] && slot != t.content)
        throw Error(name + ": added token \"" + t.content + "\" has id " + std::to_string(t.id) + ", which the vocabulary gives to \"" +
                    slot + "\"");
      slot = t.content;
      used[static_cast<size_t>(t.id)] = 1;
      special_[static_cast<size_t>(t.id)] = t.special;
    }
    // BPE options
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      const std::string unk = m["unk_token"].get<std::string>();
      auto it = bpe_.vocab.find(unk);
      if (it == bpe_.vocab.end()) throw Error(name + ": model.unk_token \"" + unk + "\" is not in the vocabulary");
      bpe_.unk_id = it->second;
    }
    bpe_.fuse_unk = flag(m, "fuse_unk", false);
    bpe_.byte_fallback = flag(m, "byte_fallback", false);
    bpe_.ignore_merges = flag(m, "ignore_merges", false);
    if (m.contains("continuing_subword_prefix") && m["continuing_subword_prefix"].is_string())
      bpe_.continuing_subword_prefix = m["continuing_subword_prefix"].get<std::string>();
    if (m.contains("end_of_word_suffix") && m["end_of_word_suffix"].is_string())
      bpe_.end_of_word_suffix = m["end_of_word_suffix"].get<std::string>();
    if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0)
      throw Error(name + ": model.dropout > 0 (random merges) is not supported");
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      auto it = bpe_.vocab.find(buf);
      bpe_.byte_ids[b] = it == bpe_.vocab.end() ? -1 : it->second;
    }
    // merges
    if (m.contains("merges") && !m["merges"].is_null()) {
      if (!m["merges"].is_array()) throw Error(name + ": model.merges must be an array");
      const auto& merges = m["merges"];
      bpe_.merges.reserve(merges.size());
      const size_t prefix = bpe_.continuing_subword_prefix.size();
      for (size_t r = 0; r < merges.size(); ++r) {
        const json& e = merges[r];
        std::string a, b;
        if (e.is_string()) {
          const std::string s = e.get<std::string>();
          const size_t sp = s.find(' ');
          if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
            throw Error(name + ": model.merges[" + std::to_string(r) + "] \"" + s + "\" is not two tokens separated by one space");
          a = s.substr(0, sp);
          b = s.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
          a = e[0].get<std::string>();
          b = e[1].get<std::string>();
        } else {
          throw Error(name + ": model.merges[" + std::to_string(r) + "] is neither \"a b\" nor [\"a\", \"b\"]");
        }
        auto ia = bpe_.vocab.find(a), ib = bpe_.vocab.find(b);
        for (const auto& [tok, it] : {std::pair{a, ia}, std::pair{b, ib}})
          if (it == bpe_.vocab.end())
            throw Error(name + ": model.merges[" + std::to_string(r) + "] names \"" + tok + "\", which is not in the vocabulary");
        const std::string merged = a + (prefix && b.compare(0, prefix, bpe_.continuing_subword_prefix) == 0 ? b.substr(prefix) : b);
        auto im = bpe_.vocab.find(merged);
        if (im == bpe_.vocab.end())
          throw Error(name + ": model.merges[" + std::to_string(r) + "] makes \"" + merged + "\", which is not in the vocabulary");
        const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
        bpe_.merges.emplace(key, std::make_pair(static_cast<int>(r), im->second));  // the first (lowest) rank wins
      }
    }
    // components
    read_normalizer(member(j, "normalizer"), name + ": normalizer", normalizers_);
    read_pre_tokenizer(member(j, "pre_tokenizer"), name + ": pre_tokenizer", pre_tokenizers_);
    read_decoder(member(j, "decoder"), name + ": decoder", decoders_);
    walk_sequence(member(j, "post_processor"), "processors", name + ": post_processor", [&](const json& post, const std::string& where) {
      const std::string t = type_of(post, where);
      if (t == "ByteLevel") return;  // offsets only; the ids do not change
      if (t != "TemplateProcessing") unknown_type(where, t, "TemplateProcessing, ByteLevel, Sequence");
      const std::string w = where + ".TemplateProcessing";
      const json& single = member(post, "single");
      const json& specials = member(post, "special_tokens");
      if (!single.is_array()) throw Error(w + ": \"single\" must be an array, found " + json_excerpt(single));
      std::vector<TemplatePiece> tpl;
      for (const json& p : single) {
        if (p.is_object() && p.contains("Sequence")) {
          tpl.push_back({false, {}});
          continue;
        }
        const json& sid_json = member(member(p, "SpecialToken"), "id");
        if (!sid_json.is_string()) throw Error(w + ": a \"single\" entry is neither SpecialToken (with an id) nor Sequence");
        const std::string& sid = sid_json.get_ref<const std::string&>();
        const json& ids_json = member(member(specials, sid), "ids");
        if (!ids_json.is_array())
          throw Error(w + ": special token \"" + excerpt(sid) + "\" is not in special_tokens (with an \"ids\" array)");
        std::vector<int> ids;
        for (const json& id : ids_json) {
          ids.push_back(id_value(id, w + ": special token \"" + excerpt(sid) + "\" id"));
          if (ids.back() >= vocab_size())
            throw Error(w + ": special token \"" + excerpt(sid) + "\" has id " + std::to_string(ids.back()) +
                        ", outside the vocabulary of " + std::to_string(vocab_size()));
        }
        tpl.push_back({true, std::move(ids)});
      }
      templates_.push_back(std::move(tpl));
    });
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": unexpected layout: " + excerpt(e.what(), 300) +
                "\n  HINT: the file is not a tokenizer.json as Hugging Face's tokenizers writes it.");
  }
  // added-token matchers
  index_ = std::make_shared<HfAddedIndex>();
  for (AddedToken& t : added_) {
    if (t.normalized && !normalizers_.empty()) t.content = normalize(normalizers_, t.content);
    if (t.content.empty()) continue;
    (t.normalized ? index_->norm : index_->raw).add(&t);
  }
  // Each token's bytes, once: labels read them for every token of every result.
  // Bounded in all: decoders (Replace) can make each token's text larger than its entry.
  bytes_.resize(id_to_token_.size());
  int64_t total = 0;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (id_to_token_[id].empty()) continue;
    bytes_[id] = compute_token_bytes(static_cast<int>(id));
    total += static_cast<int64_t>(bytes_[id].size());
    if (total > kMaxJsonBytes)
      throw Error(name + ": decoder: the tokens' decoded text exceeds " + format_bytes(static_cast<double>(kMaxJsonBytes)) +
                  "\n  HINT: a decoder's replacement is too long; the file is damaged or hostile.");
  }
}

bool HfTokenizer::supports_incremental() const {
  return !pre_tokenizers_.empty() && cuts_independently(pre_tokenizers_[0]);
}

std::string HfTokenizer::first_step_input(std::string normalized) const {
  const PreTokenizer& st = pre_tokenizers_[0];
  if (st.kind == PreTokenizer::ByteLevel && st.add_prefix_space && (normalized.empty() || normalized[0] != ' '))
    normalized.insert(0, 1, ' ');
  return normalized;
}

void HfTokenizer::encode_tail(const std::string& x, size_t from, bool at_start, std::vector<int>& ids,
                              std::vector<size_t>* piece_begin, std::vector<size_t>* piece_ids) const {
  const PreTokenizer& first = pre_tokenizers_[0];
  const std::vector<PreTokenizer> rest(pre_tokenizers_.begin() + 1, pre_tokenizers_.end());
  std::vector<PreToken> pieces;
  for (const Span& sp : first_cut(first, x, from)) {
    if (piece_begin) piece_begin->push_back(sp.begin);
    if (piece_ids) piece_ids->push_back(ids.size());
    std::string t = x.substr(sp.begin, sp.end - sp.begin);
    if (first.kind == PreTokenizer::ByteLevel) t = bytes_to_unicode(t);
    pieces.assign(1, PreToken{std::move(t), at_start && sp.begin == 0});
    if (!rest.empty()) pre_tokenize(rest, pieces);
    for (const PreToken& pt : pieces) bpe_encode(bpe_, pt.text, ids);
  }
}

std::vector<int> HfTokenizer::encode_full(std::string_view text, EncodeCache* cache) const {
  utf8_validate(text);
  const bool incremental = supports_incremental();
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  if (cache) {
    cache->valid = false;
    cache->tail.clear();
    cache->piece_begin.clear();
    cache->piece_ids.clear();
    cache->tail_begin = text.size();
  }
  std::vector<Part> first, second;
  split_added(index_->raw, std::string(text), true, first);
  for (size_t i = 0; i < first.size(); ++i) {
    Part& p = first[i];
    if (p.added_id >= 0) {
      ids.push_back(p.added_id);
      continue;
    }
    const size_t raw_len = p.text.size();
    second.clear();
    split_added(index_->norm, normalize(normalizers_, std::move(p.text)), p.at_start, second);
    for (Part& q : second) {
      if (q.added_id >= 0) {
        ids.push_back(q.added_id);
      } else if (incremental) {
        const bool is_tail = cache && i + 1 == first.size() && second.size() == 1;
        std::string x = first_step_input(std::move(q.text));
        encode_tail(x, 0, q.at_start, ids, is_tail ? &cache->piece_begin : nullptr, is_tail ? &cache->piece_ids : nullptr);
        if (is_tail) {
          cache->tail_begin = text.size() - raw_len;
          cache->tail = std::move(x);
        }
      } else {
        std::vector<PreToken> pieces{{std::move(q.text), q.at_start}};
        pre_tokenize(pre_tokenizers_, pieces);
        for (const PreToken& pt : pieces) bpe_encode(bpe_, pt.text, ids);
      }
    }
  }
  if (cache) {
    cache->owner = this;
    cache->text.assign(text);
    cache->ids = ids;
    cache->valid = incremental;
    cache->retokenized_bytes = text.size();
  }
  return ids;
}

std::vector<int> HfTokenizer::add_special_tokens(std::vector<int> ids) const {
  for (const auto& tpl : templates_) {
    std::vector<int> wrapped;
    wrapped.reserve(ids.size() + 4);
    for (const TemplatePiece& p : tpl)
      wrapped.insert(wrapped.end(), p.special ? p.ids.begin() : ids.begin(), p.special ? p.ids.end() : ids.end());
    ids.swap(wrapped);
  }
  return ids;
}

std::vector<int> HfTokenizer::encode_with(std::string_view text, bool add_special) const {
  std::vector<int> ids = encode_full(text, nullptr);
  return add_special ? add_special_tokens(std::move(ids)) : ids;
}

std::vector<int> HfTokenizer::encode_incremental(std::string_view text, bool add_special, EncodeCache& c) const {
  auto full = [&] {
    std::vector<int> ids = encode_full(text, &c);
    return add_special ? add_special_tokens(std::move(ids)) : ids;
  };
  if (!c.valid || c.owner != this || c.tail_begin > text.size()) return full();
  utf8_validate(text);
  size_t same = 0;  // bytes the old and new text share at the start
  const size_t n = std::min(c.text.size(), text.size());
  while (same < n && c.text[same] == text[same]) ++same;
  if (same < c.tail_begin) return full();
  // The new tail must still be one section: no added token made by the edit.
  std::vector<Part> parts;
  split_added(index_->raw, std::string(text.substr(c.tail_begin)), c.tail_begin == 0, parts);
  if (parts.size() != 1 || parts[0].added_id >= 0) return full();
  std::vector<Part> norm_parts;
  split_added(index_->norm, normalize(normalizers_, std::move(parts[0].text)), parts[0].at_start, norm_parts);
  if (norm_parts.size() != 1 || norm_parts[0].added_id >= 0) return full();
  std::string x = first_step_input(std::move(norm_parts[0].text));
  size_t q = 0;
  const size_t m = std::min(c.tail.size(), x.size());
  while (q < m && c.tail[q] == x[q]) ++q;
  // Restart two pieces before the first changed byte (the one holding it may grow or
  // shrink, and the one before it saw the changed text through look-ahead).
  size_t k = 0;
  while (k + 1 < c.piece_begin.size() && c.piece_begin[k + 1] < q) ++k;
  if (k < 2) return full();
  k -= 1;
  c.ids.resize(c.piece_ids[k]);
  const size_t from = c.piece_begin[k];
  c.piece_begin.resize(k);
  c.piece_ids.resize(k);
  encode_tail(x, from, norm_parts[0].at_start, c.ids, &c.piece_begin, &c.piece_ids);
  c.retokenized_bytes = x.size() - from;
  c.tail = std::move(x);
  c.text.assign(text);
  return add_special ? add_special_tokens(c.ids) : c.ids;
}

const std::string& HfTokenizer::raw_token(int id) const {
  static const std::string none;
  return id >= 0 && id < vocab_size() ? id_to_token_[static_cast<size_t>(id)] : none;
}

bool HfTokenizer::is_special(int id) const { return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)]; }

namespace {

// "<0xNN>" → NN, else -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[static_cast<size_t>(k)];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Each character of t through the byte-level table; t unchanged if one is not in it.
std::string byte_level_decode(const std::string& t) {
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    size_t len = 0;
    const int32_t cp = cp_at(t, i, &len);
    const int b = cp < 0 ? -1 : cp_to_byte(static_cast<uint32_t>(cp));
    if (b < 0) return t;
    out += static_cast<char>(b);
    i += len;
  }
  return out;
}

// Invalid UTF-8 sequences → U+FFFD (as Rust's from_utf8_lossy, one per bad sequence start).
std::string lossy_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = utf8_valid_len(s, i)) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> HfTokenizer::decode_chain(std::vector<std::string> toks, bool for_label) const {
  for (const Decoder& d : decoders_) {
    switch (d.kind) {
      case Decoder::ByteLevel: {
        std::string all;
        for (std::string& t : toks) {
          t = byte_level_decode(t);
          if (!for_label) all += t;
        }
        if (!for_label) toks = {lossy_utf8(all)};
        break;
      }
      case Decoder::Replace:
        for (std::string& t : toks) t = replace_all(d.pattern, t, d.text, d.where);
        break;
      case Decoder::ByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        size_t nbytes = 0;
        auto flush = [&] {
          if (nbytes == 0) return;
          bool valid = true;
          for (size_t i = 0; valid && i < bytes.size(); i += utf8_valid_len(bytes, i)) valid = utf8_valid_len(bytes, i) > 0;
          if (valid || for_label) out.push_back(bytes);
          else
            for (size_t k = 0; k < nbytes; ++k) out.push_back("\xEF\xBF\xBD");
          bytes.clear();
          nbytes = 0;
        };
        for (std::string& t : toks) {
          const int b = byte_token(t);
          if (b >= 0 && !for_label) {
            bytes += static_cast<char>(b);
            ++nbytes;
          } else if (b >= 0) {
            out.push_back(std::string(1, static_cast<char>(b)));
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        toks.swap(out);
        break;
      }
      case Decoder::Fuse:
        if (!for_label) {
          std::string all;
          for (const std::string& t : toks) all += t;
          toks = {all};
        }
        break;
      case Decoder::Strip:
        if (!for_label)
          for (std::string& t : toks) {
            size_t b = 0, e = t.size();
            for (int k = 0; k < d.start && t.compare(b, d.text.size(), d.text) == 0 && b < e; ++k) b += d.text.size();
            for (int k = 0; k < d.stop && e >= b + d.text.size() && t.compare(e - d.text.size(), d.text.size(), d.text) == 0; ++k)
              e -= d.text.size();
            t = t.substr(b, e - b);
          }
        break;
      case Decoder::Metaspace:
        for (size_t k = 0; k < toks.size(); ++k) {
          std::string& t = toks[k];
          std::string r;
          for (size_t i = 0; i < t.size();) {
            if (t.compare(i, d.text.size(), d.text) == 0) {
              r += ' ';
              i += d.text.size();
            } else {
              r += t[i++];
            }
          }
          if (k == 0 && d.prepend && !for_label && !r.empty() && r[0] == ' ') r.erase(0, 1);
          t.swap(r);
        }
        break;
    }
  }
  return toks;
}

std::string HfTokenizer::decode(const std::vector<int>& ids) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int id : ids) toks.push_back(raw_token(id));
  std::string s;
  for (const std::string& t : decode_chain(std::move(toks), false)) s += t;
  return lossy_utf8(s);
}

std::string HfTokenizer::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return bytes_[static_cast<size_t>(id)];
}

std::string HfTokenizer::compute_token_bytes(int id) const {
  if (is_special(id)) return raw_token(id);
  std::string s;
  for (const std::string& t : decode_chain({raw_token(id)}, true)) s += t;
  return s;
}

std::string HfTokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size() || raw_token(id).empty()) return "<" + std::to_string(id) + ">";
  const std::string b = token_bytes(id);
  std::string out;
  for (size_t i = 0; i < b.size();) {
    if (const size_t n = utf8_valid_len(b, i)) {
      out.append(b, i, n);
      i += n;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(b[i]));
      out += buf;
      ++i;
    }
  }
  return out;
}

}  // namespace attnviz
