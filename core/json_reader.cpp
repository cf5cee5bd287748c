#include "core/json_reader.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
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
    return Json::parse(text.data(), text.data() + text.size());
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
