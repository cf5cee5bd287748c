// The one JSON reader. Every JSON text attnviz parses (config.json, the shard index, a
// safetensors header, tokenizer.json, tokenizer_config.json, the settings file, a lesson,
// a trainer state, chat messages, manifests) goes through parse_json or read_json_file;
// tests/CMakeLists.txt's `json_reader_only` fails when a parse call appears anywhere else
// in core/, ui/ or app/.
//
// Before the parser builds anything, one flat scan measures the nesting. A text nested
// deeper than kMaxJsonDepth levels is refused with the line, the column and the keys above
// the point where it went too deep. Every value that comes back is therefore at most that
// deep, so that copying, comparing, dumping or walking it (all recursive in nlohmann::json)
// stays within a few hundred stack frames, in any thread and under the sanitizers.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/limits.h"

namespace attnviz {

// Most levels of arrays and objects one JSON text may nest. Real files nest a few levels
// (config.json 3, tokenizer.json about 2 per nested Sequence: its 64 Sequences take 130).
constexpr int kMaxJsonDepth = 256;

// Where a text first nests deeper than `max_depth`: the byte offset, or -1 when it never
// does, and the path of keys and indices above that point ("text_config" → "x" → [0] …).
struct JsonDepthProbe {
  int64_t offset = -1;
  std::string path;
};
// One pass over `text`, no recursion and no allocation per value. Strings are skipped
// as JSON tokenizes them, so brackets inside strings do not count.
JsonDepthProbe probe_json_depth(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses `text` (at most kMaxJsonBytes, no NUL byte, nested at most kMaxJsonDepth). On
// any failure throws a data Error that starts with `where` (a file's path, or "PATH
// header"), says what is wrong and where, and ends with `hint` when it is not empty
// (e.g. "\n  HINT: …").
nlohmann::json parse_json(std::string_view text, const std::string& where, const std::string& hint = "");

// read_regular_file(path, max_bytes, what, no NUL) then parse_json, naming the path.
nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint = "",
                              int64_t max_bytes = kMaxJsonBytes);

// The same, keeping objects' keys in the text's order (chat messages and tools: a chat
// template's tojson prints them in that order, as Python does).
nlohmann::ordered_json parse_json_ordered(std::string_view text, const std::string& where, const std::string& hint = "");
nlohmann::ordered_json read_json_file_ordered(const std::string& path, const std::string& what,
                                              const std::string& hint = "", int64_t max_bytes = kMaxJsonBytes);

}  // namespace attnviz
