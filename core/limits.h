// Limits on untrusted input, and the small helpers that enforce them. Everything attnviz
// reads from a file, a flag or the keyboard goes through these before sizes are
// multiplied, memory is allocated or a value is quoted back in a message.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

// Largest value accepted for any one model dimension (vocab, width, layers, heads, head
// size, MLP hidden size, context): 2^24. Products of dimensions that size memory are
// still computed with checked_product.
constexpr int64_t kMaxDim = int64_t{1} << 24;
// Largest vocabulary: every token id read from a file (tokenizer.json's vocab and added
// tokens, TemplateProcessing, GGUF metadata) must be below this, checked as a 64-bit value
// before anything is sized by it.
constexpr int64_t kMaxVocab = kMaxDim;
// Most layers a model may have (config.json's num_hidden_layers / n_layer, GGUF's
// block_count). The largest published models have about 130; a file claiming millions
// would make the loader list millions of tensors before it found them missing.
constexpr int kMaxLayers = 1024;
// `n` (a layer count read from a file) when it is at most kMaxLayers; else throws a data
// Error naming `what`.
int checked_layers(int64_t n, const std::string& what);
// Deepest nesting of tokenizer.json components (a Sequence inside a Sequence ...). The
// readers walk them without recursion; deeper files are refused.
constexpr int kMaxJsonNesting = 64;
// Longest string parameter of a tokenizer component (a regex, a replacement, a prefix).
constexpr int64_t kMaxTokenizerStringBytes = int64_t{64} << 10;
// Largest text a tokenizer's normalizers may make (Replace and Prepend can grow it).
constexpr int64_t kMaxNormalizedBytes = int64_t{4} * (int64_t{64} << 20);
// Most shard files a model.safetensors.index.json may name.
constexpr int64_t kMaxShards = 4096;
// Largest text read from a file (--text-file and the like): 64 MiB.
constexpr int64_t kMaxTextBytes = int64_t{64} << 20;
// Largest JSON file read whole (config.json, tokenizer.json): 256 MiB.
constexpr int64_t kMaxJsonBytes = int64_t{256} << 20;
// Longest excerpt of an untrusted value quoted in an error message, in bytes.
constexpr size_t kExcerptBytes = 48;
// Longest excerpt of a message the input itself makes (a chat template's raise_exception
// text), in bytes: long enough for a sentence or two, control characters escaped.
constexpr size_t kQuotedMessageBytes = 1000;
// Longest excerpt of a path (the user's own, but still bounded): 512 bytes.
constexpr size_t kPathExcerptBytes = 512;

// The product of `dims` as int64; throws a data Error naming `what` when a factor is
// negative or the product overflows int64.
int64_t checked_product(std::initializer_list<int64_t> dims, const std::string& what);
int64_t checked_product(const std::vector<int64_t>& dims, const std::string& what);
// `v` (an integer read from a file) narrowed to int when lo <= v <= hi (a subrange of int's);
// else a data Error "`what` = V must be an integer from LO to HI" ("a positive integer up to
// HI" when lo is 1). Every integer read from a file goes through this, or through a reader
// built on it, before it is narrowed.
int checked_int(int64_t v, int64_t lo, int64_t hi, const std::string& what);
// A JSON value that must be an integer in [lo, hi] (a subrange of int's), narrowed to int;
// else a data Error naming `what`, the value (json_excerpt) and the range.
int json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what);
// checked_product of two model dimensions that must itself be a dimension (≤ kMaxDim):
// the result fits an int.
int checked_dim(int64_t a, int64_t b, const std::string& what);

// At most `max_bytes` (default kExcerptBytes) of `s`, cut at a UTF-8 boundary, control bytes shown as \xNN,
// with "… (N bytes)" when it was cut. Safe to print whatever `s` holds.
std::string excerpt(std::string_view s, size_t max_bytes = kExcerptBytes);
// A short description of a JSON value for messages: scalars quoted via excerpt(), arrays
// and objects by kind and size only. Never recurses, so any depth is safe.
std::string json_excerpt(const nlohmann::json& j);

// Reads a whole file that must be a regular file of at most `max_bytes`. The file is
// opened without blocking, so a FIFO or a device is refused instead of waited on. Throws
// a data Error naming `what` and the path. A file with a NUL byte is refused when
// `allow_nul` is false (text formats such as JSON never hold one).
std::string read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                              bool allow_nul = true);
// Opens `path` read-only, non-blocking, and checks that it is a regular file; returns the
// descriptor (the caller closes it) or throws a data Error naming `what`.
int open_regular_file(const std::string& path, const std::string& what);

// Bytes of memory this process may still use: the smaller of MemAvailable
// (/proc/meminfo), RLIMIT_AS/RLIMIT_DATA headroom and $ATTNVIZ_MAX_MEMORY_MB when set.
double memory_available_bytes();
// Throws a data Error when `bytes` (an estimate of what `what` needs) exceeds
// memory_available_bytes(): the message gives both numbers and `hint`.
void check_memory(double bytes, const std::string& what, const std::string& hint);
// "1.5 GB", "320 MB", "12 KB" for messages.
std::string format_bytes(double bytes);

}  // namespace attnviz
