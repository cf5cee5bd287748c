#include "tests/test_util.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/export/dump.h"
#include "core/error.h"
#include "core/model/model.h"
#include "core/model/random_model.h"

namespace attnviz::test {

namespace fs = std::filesystem;

namespace {
struct TempRoot {
  fs::path root;
  TempRoot() {
    root = fs::temp_directory_path() / ("attnviz-test-" + std::to_string(getpid()));
    fs::create_directories(root);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};
TempRoot& temp_root() {
  static TempRoot r;  // one per test process
  return r;
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static int counter = 0;
  const fs::path p = temp_root().root / (tag + "-" + std::to_string(counter++));
  fs::create_directories(p);
  return p.string();
}

ModelConfig small_qwen35() {
  ModelConfig c = preset_config("qwen3.5-0.8b");
  c.n_layer = 4, c.n_embd = 64, c.n_head = 4, c.n_kv_head = 2, c.head_size = 16, c.rotary_dim = 4;
  c.n_inner = 96, c.vocab_size = 60, c.n_ctx = 640;
  c.linear = LinearAttnDims{2, 4, 8, 12, 4};
  c.layer_specs.resize(4);
  for (int l = 0; l < 4; ++l) {
    c.layer_specs[static_cast<size_t>(l)].mixer = l == 3 ? Mixer::Softmax : Mixer::GatedDeltaNet;
    c.layer_specs[static_cast<size_t>(l)].rope = l == 3;
    c.layer_specs[static_cast<size_t>(l)].scale = 1.f / std::sqrt(l == 3 ? 16.f : 8.f);
  }
  return c;
}

ModelConfig small_lfm2() {
  ModelConfig c = preset_config("lfm2-350m");
  c.n_layer = 5, c.n_embd = 48, c.n_head = 4, c.n_kv_head = 2, c.head_size = 12;
  c.n_inner = 80, c.vocab_size = 60, c.n_ctx = 640;
  c.short_conv_bias = true;
  c.layer_specs.resize(5);
  for (int l = 0; l < 5; ++l) {
    const bool attn = l == 2 || l == 4;
    c.layer_specs[static_cast<size_t>(l)].mixer = attn ? Mixer::Softmax : Mixer::ShortConv;
    c.layer_specs[static_cast<size_t>(l)].rope = attn;
    c.layer_specs[static_cast<size_t>(l)].scale = 1.f / std::sqrt(12.f);
  }
  return c;
}

ModelConfig small_config(const std::string& arch, int layers, int embd, int heads, int kv_heads, int vocab, int ctx) {
  ModelConfig c = preset_config(arch == "gpt2" ? "tiny-gpt2" : "tiny");
  c.n_layer = layers;
  c.n_embd = embd;
  c.n_head = heads;
  c.n_kv_head = arch == "gpt2" ? heads : kv_heads;
  c.head_size = embd / heads;
  c.vocab_size = vocab;
  c.n_ctx = ctx;
  c.n_inner = arch == "gpt2" ? 4 * embd : embd * 3 / 2 + 1;
  return c;
}

std::string make_model_dir(const ModelConfig& c, uint64_t seed, const std::string& tag) {
  const std::string dir = temp_dir(tag);
  write_random_model(c, seed, dir);
  return dir;
}

std::shared_ptr<const Model> small_model(const std::string& arch, int heads, int kv_heads, int vocab, uint64_t seed,
                                         const std::string& tag) {
  const ModelConfig c = small_config(arch, 3, 8 * heads, heads, kv_heads, vocab, 32);
  return load_model(make_model_dir(c, seed, tag + "-" + arch));
}

double rel_error(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape || a.data.size() != b.data.size()) return -1;
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    max_diff = std::max(max_diff, std::abs(x - y));
    max_ref = std::max(max_ref, std::abs(y));
  }
  return max_diff / std::max(max_ref, 1e-6);
}

std::string compare_traces(const Trace& a, const Trace& ref, double tol) {
  if (a.tokens != ref.tokens) return "tokens differ";
  if (a.layers.size() != ref.layers.size()) return "layer count differs";
  std::ostringstream why;
  for (size_t l = 0; l < a.layers.size(); ++l)
    for (int s = 0; s < kStageCount; ++s) {
      const Stage st = static_cast<Stage>(s);
      const Tensor x = a.layers[l].materialize(st), y = ref.layers[l].materialize(st);
      const double e = rel_error(x, y);
      if (e < 0 || e > tol) {
        why << dump_tensor_name(static_cast<int>(l), st) << ": "
            << (e < 0 ? "shape " + shape_str_of(x.shape) + " vs " + shape_str_of(y.shape)
                      : "relative error " + std::to_string(e));
        return why.str();
      }
    }
  // GPT-OSS's sink probabilities, router logits and chosen experts with their weights,
  // wherever the reference recorded them (an index that differs is an error of ≥ 1/E).
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerTrace &x = a.layers[l], &y = ref.layers[l];
    const std::pair<const char*, std::pair<const Tensor*, const Tensor*>> more[] = {
        {"sink", {&x.sink, &y.sink}},
        {"router", {&x.router, &y.router}},
        {"experts", {&x.experts, &y.experts}},
        {"expert_weights", {&x.expert_weights, &y.expert_weights}}};
    for (const auto& [name, t] : more) {
      if (t.second->data.empty()) continue;
      const double e = rel_error(*t.first, *t.second);
      if (e < 0 || e > tol)
        return "layers." + std::to_string(l) + "." + name + ": " +
               (e < 0 ? "shape " + shape_str_of(t.first->shape) + " vs " + shape_str_of(t.second->shape)
                      : "relative error " + std::to_string(e));
    }
  }
  // The residual stream (entering each layer, then after the last), wherever the reference
  // recorded it.
  for (size_t l = 0; l <= a.layers.size(); ++l) {
    const bool last = l == a.layers.size();
    const Tensor& y = last ? ref.final_resid : ref.layers[l].resid;
    if (y.data.empty()) continue;
    const Tensor& x = last ? a.final_resid : a.layers[l].resid;
    const std::string name = last ? "resid_final" : "layers." + std::to_string(l) + ".resid";
    const double e = rel_error(x, y);
    if (e < 0) return name + ": shape " + shape_str_of(x.shape) + " vs " + shape_str_of(y.shape);
    if (e > tol) return name + ": relative error " + std::to_string(e);
  }
  const double e = rel_error(a.logits, ref.logits);
  if (e < 0 || e > tol) return "logits: relative error " + std::to_string(e);
  return "";
}

std::vector<int> random_ids(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<int> ids(static_cast<size_t>(n));
  for (int& t : ids) t = pick(rng);
  return ids;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

std::string write_sentence_corpus(const std::string& dir, const std::string& first, int n, unsigned seed) {
  std::string text;
  const char* words[] = {"cat", "dog", "bird", "fish"};
  std::mt19937 r(seed);
  for (int i = 0; i < n; ++i) text += first + " " + words[r() % 4] + " sat on the mat. ";
  const std::string path = dir + "/corpus.txt";
  write_bytes(path, text);
  return path;
}

std::string load_error(const std::string& spec) {
  try {
    load_model(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace attnviz::test
