// Helpers shared by the tests: temporary directories, random models, tensor comparison.
#pragma once
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/model.h"
#include "core/engine/trace.h"

namespace attnviz::test {

// A fresh empty directory under the system temp dir, removed at process exit.
std::string temp_dir(const std::string& tag);

// A random model config: `arch` "gpt2" or "llama", with the given sizes.
ModelConfig small_config(const std::string& arch, int layers, int embd, int heads, int kv_heads, int vocab, int ctx);
// The qwen3.5-0.8b preset's layout, shrunk: 4 layers (3 linear, then 1 full), GQA in both
// kinds, vocabulary 60, context 640.
ModelConfig small_qwen35();
// The lfm2-350m preset's layout, shrunk: conv, conv, attention, conv, attention; biases on;
// vocabulary 60, context 640.
ModelConfig small_lfm2();

// Writes a random model for `c` and returns its directory.
std::string make_model_dir(const ModelConfig& c, uint64_t seed, const std::string& tag);

// A loaded random model of `arch` with 3 layers, 8 dimensions per head and context 32 (the
// lens and patching tests' shape), written with `seed` under "tag-arch".
std::shared_ptr<const Model> small_model(const std::string& arch, int heads, int kv_heads, int vocab, uint64_t seed,
                                         const std::string& tag);

// max|a−b| / max(max|b|, 1e-6) over finite entries; −1 if shapes differ, +inf if the −inf
// pattern differs or a NaN appears. `b` is the reference.
double rel_error(const Tensor& a, const Tensor& b);

// Compares every recorded tensor of two traces (and the residual stream wherever `ref`
// holds it); returns "" when all are within `tol`,
// else a description of the first mismatch (tensor, error).
std::string compare_traces(const Trace& a, const Trace& ref, double tol);

// n token ids drawn uniformly from [0, vocab) with `seed`.
std::vector<int> random_ids(int n, int vocab, unsigned seed);

std::string read_file(const std::string& path);
// DIR/corpus.txt: `n` sentences "<first> cat|dog|bird|fish sat on the mat. " (the animal
// drawn with `seed`), a small learnable training text; returns its path.
std::string write_sentence_corpus(const std::string& dir, const std::string& first, int n, unsigned seed);
// The message of the attnviz::Error that load_model(spec) throws ("" when it loads).
std::string load_error(const std::string& spec);
// The JSON file at `path`, parsed (std::runtime_error when it cannot be read).
nlohmann::json read_json(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);
// Whether `part` occurs in `s` (messages checked for what they name).
inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace attnviz::test
