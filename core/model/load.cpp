// load_model (declared in model.h): a model directory (config.json + safetensors, one
// file or shards), a GGUF file or builtin:NAME into a Model. Apart from model.cpp, so that
// the model module does not include the GGUF loader, which includes it.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/gguf.h"
#include "core/model/gguf_model.h"
#include "core/model/model.h"
#include "core/model/pages.h"
#include "core/model/paths.h"
#include "core/model/safetensors.h"

namespace attnviz {

namespace {

// Fetches tensors by Hugging Face name, checking shapes, and remembers which were used.
class TensorSource {
 public:
  // `progress` (LoadOptions::progress; may be null or empty) hears of each tensor read.
  TensorSource(const SafetensorsSet& f, std::string prefix, std::vector<std::string>* warnings = nullptr,
               WeightsMode mode = WeightsMode::F32, const LoadOptions* progress = nullptr)
      : f_(f), prefix_(std::move(prefix)), warnings_(warnings), mode_(mode), opt_(progress) {
    if (opt_ && opt_->progress)
      for (const auto& t : f_.tensors()) total_ += t.end - t.begin;
  }

  // Reads `name` (prefix added) with exactly `shape`, as float32, into out (numel floats).
  void get_into(const std::string& name, const std::vector<int64_t>& shape, float* out) {
    const std::string full = prefix_ + name;
    const TensorInfo* t = f_.find(full);
    if (!t)
      throw Error(f_.path() + ": missing tensor '" + full + "' (expected shape " + shape_str_of(shape) +
                  ")\n  HINT: the checkpoint does not match its config.json, or uses names attnviz does not know.");
    if (t->shape != shape)
      throw Error(f_.path() + ": tensor '" + full + "' has shape " + shape_str_of(t->shape) + ", expected " +
                  shape_str_of(shape) + " from config.json");
    used_.insert(full);
    started(*t);
    f_.read_f32_into(*t, out);
    if (warnings_) warn_if_not_finite(full, out, t->numel(), *warnings_);
  }
  bool has(const std::string& name) const { return f_.find(prefix_ + name) != nullptr; }

  // Straight into the matrix: a model's weights are held once while loading, plus the
  // one tensor being read (and, for mat_t, its copy before the transpose).
  Mat mat(const std::string& name, int rows, int cols) {  // stored (rows, cols) as is
    Mat m(rows, cols);
    get_into(name, {rows, cols}, m.data());
    return m;
  }
  Mat mat_t(const std::string& name, int out, int in) {  // nn.Linear (out, in) → (in, out)
    return mat(name, out, in).transpose();
  }
  // A matrix stored (rows, cols) (an nn.Linear's (out, in), or a table (V, C)): an F16 or
  // BF16 one kept where it lies in WeightsMode::Stored, otherwise as float32 (in, out) for
  // a linear, (V, C) for a table.
  Weight weight(const std::string& name, int rows, int cols, bool table) {
    const TensorInfo* t = f_.find(prefix_ + name);
    if (mode_ == WeightsMode::Stored && t && t->shape == std::vector<int64_t>{rows, cols} &&
        (t->dtype == DType::F16 || t->dtype == DType::BF16)) {
      const std::string full = prefix_ + name;
      used_.insert(full);
      started(*t);
      const SafetensorsFile& file = f_.file_of(*t);
      const GgmlType type = t->dtype == DType::F16 ? GgmlType::F16 : GgmlType::BF16;
      Weight w;
      w.stored = StoredRows{type, file.bytes(*t), rows, cols, int64_t{2} * cols, file.mapping(), file.path() + ": " + full};
      if (warnings_)
        if (const int64_t bad = count_non_finite(w.stored))
          warnings_->push_back("tensor '" + excerpt(full) + "' holds " + std::to_string(bad) + " NaN or infinite value" +
                               (bad == 1 ? "" : "s") + " (of " + std::to_string(t->numel()) + "); its outputs will be NaN");
      files_.insert(file.mapping());
      return w;
    }
    return table ? mat(name, rows, cols) : mat_t(name, rows, cols);
  }
  // The mappings that weights kept in place lie in.
  const std::set<std::shared_ptr<const MappedFile>>& files() const { return files_; }
  Vec vec(const std::string& name, int n) {
    Vec v(n);
    get_into(name, {n}, v.data());
    return v;
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& t : f_.tensors())
      if (!used_.count(t.name)) out.push_back(t.name);
    return out;
  }

 private:
  const SafetensorsSet& f_;
  std::string prefix_;
  std::vector<std::string>* warnings_;
  WeightsMode mode_;
  std::set<std::string> used_;
  std::set<std::shared_ptr<const MappedFile>> files_;
  const LoadOptions* opt_;
  uint64_t total_ = 0, done_ = 0;  // bytes of the set's tensors; of those started

  void started(const TensorInfo& t) {
    if (!opt_ || !opt_->progress) return;
    done_ += t.end - t.begin;
    opt_->progress(std::min(done_, total_), total_);
  }
};

void load_gpt2(const ModelConfig& c, const SafetensorsSet& f, ModelWeights& w, std::vector<std::string>& warnings,
               const LoadOptions& opt) {
  const std::string prefix = f.find("transformer.wte.weight") ? "transformer." : "";
  TensorSource s(f, prefix, &warnings, WeightsMode::F32, &opt);
  const int C = c.n_embd;
  w.tok_emb = s.mat("wte.weight", c.vocab_size, C);
  w.pos_emb = s.mat("wpe.weight", c.n_ctx, C);
  read_gpt2_body(
      c, Gpt2Format::HuggingFace, [&](const std::string& n, int k) { return s.vec(n, k); },
      [&](const std::string& n, int in, int out) { return s.mat(n, in, out); }, w);
  // lm_head is tied to wte; a stored copy (some exports keep one) must match its shape.
  if (f.find("lm_head.weight")) {
    TensorSource root(f, "", &warnings);
    w.lm_head = root.mat("lm_head.weight", c.vocab_size, C);
  }
}

// The text model's place in a checkpoint: "model." or, in Gemma 3's multimodal files,
// "language_model.model." (older) or "model.language_model." (newer); and its unembedding.
void text_model_names(const SafetensorsSet& f, std::string& prefix, std::string& lm_head) {
  prefix = "model.";
  lm_head = "lm_head.weight";
  if (f.find("language_model.model.embed_tokens.weight")) {
    prefix = "language_model.model.";
    lm_head = "language_model.lm_head.weight";
  } else if (f.find("model.language_model.embed_tokens.weight")) {
    prefix = "model.language_model.";
  }
}

void load_decoder(const ModelConfig& c, const SafetensorsSet& f, WeightsMode mode, Model& model, const LoadOptions& opt) {
  ModelWeights& w = model.weights;
  TensorSource s(f, "", &model.warnings, mode, &opt);
  const int C = c.n_embd;
  checked_dim(c.n_head, c.head_size, "query width");
  checked_dim(c.n_kv_head, c.head_size, "key/value width");
  std::string prefix, lm_head;
  text_model_names(f, prefix, lm_head);
  if (!c.tie_embeddings && !f.find(lm_head))
    throw Error(f.path() + ": missing tensor '" + lm_head + "' (expected shape " + shape_str({c.vocab_size, C}) +
                ") and tie_word_embeddings is false");
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (const DecoderTensor& t : decoder_tensors(c, prefix, lm_head)) {
    if (t.optional && !f.find(t.name)) continue;  // its default stands (LayerWeights)
    const int rows = static_cast<int>(t.shape[0]), cols = t.shape.size() > 1 ? static_cast<int>(t.shape[1]) : 0;
    Vec v;
    Weight m;
    if (t.shape.size() == 1) {
      v = s.vec(t.name, rows);
    } else if (t.shape.size() == 3 || slot_is_flat(t.slot)) {  // a convolution's (channels, 1, taps), the experts' stacks: one vector
      v.resize(static_cast<Eigen::Index>(checked_product(t.shape, t.name)));
      s.get_into(t.name, t.shape, v.data());
    } else {
      m = s.weight(t.name, rows, cols, t.slot == Slot::TokEmb || t.slot == Slot::LmHead || t.slot == Slot::PleTable);
    }
    if (slot_is_norm(t.slot) && c.norm_plus_one) v.array() += 1.f;  // Gemma: x·(1 + w)
    place_decoder_tensor(c, t, std::move(m), std::move(v), w);
  }
  const std::vector<std::string> unused = s.unused();
  size_t vision = 0, mtp = 0;
  for (const std::string& n : unused) {
    if (n.rfind("mtp.", 0) == 0) ++mtp;  // Qwen3.5's multi-token-prediction block
    else vision += n.rfind(prefix, 0) != 0 && n != lm_head;
  }
  model.files.assign(s.files().begin(), s.files().end());
  if (vision && prefix != "model.")
    model.warnings.push_back(std::to_string(vision) + " tensors outside the text model (the vision tower) are not used");
  if (mtp)
    model.warnings.push_back(std::to_string(mtp) + " tensors of the multi-token-prediction block (mtp.*) are not used: "
                             "attnviz predicts the next token only");
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The config.json of the model directory `dir` (resolve_model_dir's answer that is not a
// GGUF file), parsed.
ModelConfig dir_config(const std::string& dir) {
  if (!is_dir(dir))
    throw Error("model directory '" + dir + "' does not exist\n  HINT: pass a folder holding config.json and "
                "model.safetensors, a FILE.gguf, or builtin:NAME (attnviz-cli info --list shows them).");
  const std::string cfg_path = dir + "/config.json";
  struct stat st {};
  if (stat(cfg_path.c_str(), &st) != 0)
    throw Error("'" + excerpt(cfg_path, kPathExcerptBytes) + "' not found\n  HINT: a model directory needs config.json and model.safetensors.");
  // Read without blocking (a FIFO is refused), bounded, and with no NUL: the JSON parser
  // would stop at a NUL and silently accept whatever follows it.
  return parse_config(read_json_file(cfg_path, "config.json"), cfg_path);
}

}  // namespace

ModelConfig read_model_config(const std::string& spec) {
  const std::string dir = resolve_model_dir(spec);
  if (!is_dir(dir) && looks_like_gguf(dir)) return gguf_model_config(GgufFile::open(dir));
  return dir_config(dir);
}

std::shared_ptr<const Model> load_model(const std::string& spec, const LoadOptions& opt) {
  auto m = std::make_shared<Model>();
  m->name = spec;
  m->dir = resolve_model_dir(spec);
  if (!is_dir(m->dir) && looks_like_gguf(m->dir)) {
    load_gguf_model(GgufFile::open(m->dir), *m, opt);
    return m;
  }
  m->config = dir_config(m->dir);
  // Refuse before reading when the weights cannot fit: float32 ones take 4 bytes a
  // parameter, F16/BF16 matrices kept in place (not gpt2's, whose layout is transposed) 2.
  // First from config.json's sizes (at least 2 bytes a parameter), then from the tensors.
  const bool in_place = opt.weights == WeightsMode::Stored && m->config.arch != Arch::Gpt2;
  check_memory((in_place ? 2.0 : 4.0) * static_cast<double>(parameter_counts(m->config).total()),
               "the model in '" + excerpt(m->dir, kPathExcerptBytes) + "'", "use a smaller model, or free memory.");
  const auto f = SafetensorsSet::open_dir(m->dir);  // model.safetensors, or the shards of its index
  double bytes = 0;
  std::map<std::string, int> types;
  for (const auto& t : f.tensors()) {
    ++types[dtype_name(t.dtype)];
    const bool half = t.dtype == DType::F16 || t.dtype == DType::BF16;
    bytes += static_cast<double>(t.numel()) * (in_place && half && t.shape.size() == 2 ? 2.0 : 4.0);
  }
  check_memory(bytes, "the model in '" + excerpt(m->dir, kPathExcerptBytes) + "'",
               "use a smaller model, or free memory.");
  m->set_stored_types(types);
  if (m->config.arch == Arch::Gpt2) load_gpt2(m->config, f, m->weights, m->warnings, opt);
  else load_decoder(m->config, f, in_place ? WeightsMode::Stored : WeightsMode::F32, *m, opt);
  m->tokenizer = load_tokenizer(m->dir);
  if (m->tokenizer) check_tokenizer_fits(*m->tokenizer, m->config.vocab_size, tokenizer_file_in(m->dir));
  return m;
}

}  // namespace attnviz
