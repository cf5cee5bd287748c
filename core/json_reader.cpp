#include "core/json_reader.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace attnviz {

namespace {

// One open array or object during the scan: for an object the last key seen, for an
// array the index of the current element.
struct Level {
  bool object = false;
  std::string_view key;
  int64_t index = 0;
};

// The keys and indices of `levels` as a short path: the first kShown, then a count.
std::string level_path(const std::vector<Level>& levels) {
  constexpr size_t kShown = 6;
  std::string s;
  for (size_t i = 0; i < levels.size() && i < kShown; ++i) {
    if (i) s += " → ";
    if (levels[i].object) s += "\"" + excerpt(levels[i].key, 32) + "\"";
    else s += "[" + std::to_string(levels[i].index) + "]";
  }
  if (levels.size() > kShown) s += " … (" + std::to_string(levels.size() - kShown) + " more levels)";
  return s;
}

// Line and column (both from 1; the column in bytes) of byte `offset` of `text`.
std::pair<int64_t, int64_t> line_column(std::string_view text, int64_t offset) {
  int64_t line = 1, line_start = 0;
  for (int64_t i = 0; i < offset; ++i)
    if (text[static_cast<size_t>(i)] == '\n') ++line, line_start = i + 1;
  return {line, offset - line_start + 1};
}

}  // namespace

JsonDepthProbe probe_json_depth(std::string_view text, int max_depth) {
  std::vector<Level> levels;
  levels.reserve(static_cast<size_t>(std::min(max_depth, 64)));
  bool expect_key = false;  // the next string in the current object is a key
  const char* p = text.data();
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    switch (p[i]) {
      case '"': {
        // Skip to the closing quote; a backslash escapes the byte after it. An
        // unterminated string runs to the end (the parser reports it).
        const size_t start = i + 1;
        size_t j = start;
        while (j < n && p[j] != '"') j += (p[j] == '\\') ? 2 : 1;
        if (expect_key && !levels.empty() && levels.back().object) {
          levels.back().key = text.substr(start, std::min(j, n) - start);
          expect_key = false;
        }
        i = std::min(j, n);
        break;
      }
      case '{':
      case '[':
        if (static_cast<int>(levels.size()) >= max_depth) return {static_cast<int64_t>(i), level_path(levels)};
        levels.push_back({p[i] == '{', {}, 0});
        expect_key = p[i] == '{';
        break;
      case '}':
      case ']':
        if (!levels.empty()) levels.pop_back();
        expect_key = false;
        break;
      case ',':
        if (!levels.empty()) {
          if (levels.back().object) expect_key = true;
          else ++levels.back().index;
        }
        break;
      default: break;
    }
  }
  return {};
}

namespace {

// Builds an ordered_json from nlohmann's SAX events in time linear in the text. Its own
// parse inserts each key of an object with a scan of the keys before it (ordered_map), so
// that an object of n keys costs O(n²): 200,000 keys took over a minute. Here an object
// past a few keys gets a hash index of its keys. A key given twice keeps its first place
// and takes the last value, as nlohmann's parse and Python's json.loads do.
class OrderedJsonBuilder {
 public:
  using Json = nlohmann::ordered_json;
  explicit OrderedJsonBuilder(Json& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(Json::number_integer_t v) { return put(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(v); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(v); }
  bool string(Json::string_t& v) { return put(std::move(v)); }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) {
    open_.push_back({put_ref(Json::object()), {}});
    return true;
  }
  bool key(Json::string_t& k) {
    Open& o = open_.back();
    auto& obj = o.v->get_ref<Json::object_t&>();
    // (ordered_map's operator[] looks keys up; the i-th entry is reached through begin())
    const auto entry = [&](size_t i) -> auto& { return *(obj.begin() + static_cast<std::ptrdiff_t>(i)); };
    size_t at = obj.size();
    if (!o.index.empty()) {
      const auto it = o.index.find(k);
      if (it != o.index.end()) at = it->second;
    } else {
      for (size_t i = 0; i < obj.size(); ++i)
        if (entry(i).first == k) at = i;
    }
    if (at == obj.size()) {
      obj.emplace_back(k, nullptr);
      if (!o.index.empty())
        o.index.emplace(k, at);
      else if (obj.size() > kLinear)
        for (size_t i = 0; i < obj.size(); ++i) o.index.emplace(entry(i).first, i);
    }
    slot_ = &entry(at).second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    open_.push_back({put_ref(Json::array()), {}});
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) { throw e; }

 private:
  static constexpr size_t kLinear = 8;  // objects up to this many keys are scanned
  struct Open {
    Json* v;
    std::unordered_map<std::string, size_t> index;  // an object's keys, once past kLinear
  };
  // Stores v where the next value goes; returns where it went. The containers above it
  // do not change while it is filled, so the pointer stays valid until it is closed.
  Json* put_ref(Json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json* top = open_.back().v;
    if (top->is_array()) {
      top->get_ref<Json::array_t&>().push_back(std::move(v));
      return &top->back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  template <class T>
  bool put(T&& v) {
    put_ref(Json(std::forward<T>(v)));
    return true;
  }
  Json& root_;
  std::vector<Open> open_;
  Json* slot_ = nullptr;
};

template <class Json>
Json parse_text(std::string_view text) {
  return Json::parse(text.data(), text.data() + text.size());
}
template <>
nlohmann::ordered_json parse_text<nlohmann::ordered_json>(std::string_view text) {
  nlohmann::ordered_json root;
  OrderedJsonBuilder b(root);
  nlohmann::ordered_json::sax_parse(text.data(), text.data() + text.size(), &b);
  return root;
}

// parse_json's checks and parse, for either kind of object (sorted or in the text's order).
template <class Json>
Json parse_checked(std::string_view text, const std::string& where, const std::string& hint) {
  if (static_cast<int64_t>(text.size()) > kMaxJsonBytes)
    throw Error(where + ": " + format_bytes(static_cast<double>(text.size())) + " of JSON, more than the " +
                format_bytes(static_cast<double>(kMaxJsonBytes)) + " attnviz reads" + hint);
  if (const void* nul = std::memchr(text.data(), 0, text.size())) {
    const auto at = line_column(text, static_cast<const char*>(nul) - text.data());
    throw Error(where + ": not valid JSON: a NUL byte at line " + std::to_string(at.first) + ", column " +
                std::to_string(at.second) + " (JSON text never holds one)" + hint);
  }
  const JsonDepthProbe deep = probe_json_depth(text, kMaxJsonDepth);
  if (deep.offset >= 0) {
    const auto at = line_column(text, deep.offset);
    throw Error(where + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep at line " +
                std::to_string(at.first) + ", column " + std::to_string(at.second) + ", under " + deep.path +
                "\n  HINT: no file attnviz reads nests that deep; this one is damaged or was not written for it. "
                "Re-download or rewrite it.");
  }
  try {
    return parse_text<Json>(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not valid JSON: " + excerpt(e.what(), 200) + hint);
  }
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& where, const std::string& hint) {
  return parse_checked<nlohmann::json>(text, where, hint);
}

nlohmann::ordered_json parse_json_ordered(std::string_view text, const std::string& where, const std::string& hint) {
  return parse_checked<nlohmann::ordered_json>(text, where, hint);
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint,
                              int64_t max_bytes) {
  const std::string text = read_regular_file(path, max_bytes, what, /*allow_nul=*/false);
  return parse_json(text, excerpt(path, kPathExcerptBytes), hint);
}

nlohmann::ordered_json read_json_file_ordered(const std::string& path, const std::string& what, const std::string& hint,
                                              int64_t max_bytes) {
  const std::string text = read_regular_file(path, max_bytes, what, /*allow_nul=*/false);
  return parse_json_ordered(text, excerpt(path, kPathExcerptBytes), hint);
}

}  // namespace attnviz
