#include "core/train/train.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

namespace {

// One line of a small made-up grammar over common words: English-like letter statistics
// (so that a previous-token head pays off early), with nothing to memorise beyond them.
std::string grammar_sentence(std::mt19937_64& rng) {
  static const std::vector<std::vector<std::string>> parts = {
      {"the", "a", "my", "one", "that", "every", "his", "her", "our", "this"},
      {"old", "red", "small", "happy", "quiet", "big", "green", "lazy", "brave", "cold", "dark", "warm"},
      {"cat", "dog", "bird", "fish", "king", "girl", "boy", "tree", "ship", "house", "river", "horse", "man", "cook",
       "star", "moon", "baker", "queen", "mouse", "child"},
      {"saw", "liked", "found", "took", "ate", "made", "met", "heard", "drew", "kept", "sold", "left", "had", "knew",
       "moved", "called"},
      {"near", "under", "over", "behind", "past", "with", "from", "into", "by", "beside"}};
  auto pick = [&](int part) {
    const auto& p = parts[static_cast<size_t>(part)];
    return p[std::uniform_int_distribution<size_t>(0, p.size() - 1)(rng)];
  };
  std::uniform_int_distribution<int> coin(0, 1);
  // det [adj] noun verb det [adj] noun [prep det noun]
  std::string line = pick(0) + " " + (coin(rng) ? pick(1) + " " : "") + pick(2) + " " + pick(3) + " " + pick(0) + " " +
                     (coin(rng) ? pick(1) + " " : "") + pick(2);
  if (coin(rng)) line += " " + pick(4) + " " + pick(0) + " " + pick(2);
  return line;
}

}  // namespace

std::string repeats_corpus_text(size_t n_chars, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string text;
  while (text.size() < n_chars) {
    const std::string line = grammar_sentence(rng);
    text += line + ". " + line + ".\n";
  }
  return text;
}

const std::string& typing_chars() {
  static const std::string chars = [] {
    std::string s;
    for (char c = 0x20; c < 0x7f; ++c) s += c;
    return s;
  }();
  return chars;
}

std::string typing_corpus_text(size_t n_chars, uint64_t seed) {
  const std::string& chars = typing_chars();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> any(0, chars.size() - 1);
  std::uniform_int_distribution<int> len(10, 30), coin(0, 1), digit(0, 9);
  // The first line holds every character once, typed twice: the vocabulary is all of them
  // whatever the seed.
  std::string text = chars + " " + chars + "\n";
  while (text.size() < n_chars) {
    std::string line;
    if (coin(rng)) {  // a sentence, sometimes capitalised, with a number and . ! or ?
      line = grammar_sentence(rng);
      if (coin(rng)) line[0] = static_cast<char>(line[0] - 'a' + 'A');
      if (coin(rng)) line += " " + std::to_string(digit(rng) * 10 + digit(rng)) + " times";
      line += ".!?,;"[std::uniform_int_distribution<int>(0, 2)(rng)];
    } else {  // 10-30 random printable characters
      const int n = len(rng);
      for (int i = 0; i < n; ++i) line += chars[any(rng)];
    }
    text += line + " " + line + "\n";
  }
  return text;
}

Corpus load_corpus(const std::string& path, float val_frac) {
  if (path == "builtin:repeats") return corpus_from_text(repeats_corpus_text(100000, 1), val_frac, path);
  if (path == "builtin:typing") return corpus_from_text(typing_corpus_text(100000, 1), val_frac, path);
  if (path.rfind("builtin:", 0) == 0)
    throw Error("unknown corpus '" + excerpt(path) +
                "'\n  HINT: the built-in corpora are builtin:typing and builtin:repeats; otherwise give a UTF-8 file.");
  struct stat sb {};
  if (stat(path.c_str(), &sb) != 0)
    throw Error("cannot read corpus '" + excerpt(path, kPathExcerptBytes) +
                "'\n  HINT: scripts/make-corpora.sh builds the built-in ones.");
  // A regular file of at most kMaxTextBytes, opened without blocking.
  return corpus_from_text(read_regular_file(path, kMaxTextBytes, "corpus"), val_frac, path);
}

Corpus corpus_from_text(const std::string& text, float val_frac, const std::string& name) {
  if (text.empty()) throw Error("corpus '" + excerpt(name, kPathExcerptBytes) + "' is empty\n  HINT: give a UTF-8 text file with some text in it.");
  std::vector<std::string> chars;
  try {
    chars = utf8_split(text);
  } catch (const Error& e) {
    throw Error(name + ": " + e.what());
  }
  // UTF-8 byte order is code-point order, so the sorted set is sorted by code point.
  const std::set<std::string> distinct(chars.begin(), chars.end());
  Corpus c;
  c.vocab.assign(distinct.begin(), distinct.end());
  c.ids.reserve(chars.size());
  std::unordered_map<std::string, int> id;
  for (size_t i = 0; i < c.vocab.size(); ++i) id[c.vocab[i]] = static_cast<int>(i);
  for (const auto& ch : chars) c.ids.push_back(id[ch]);
  c.n_train = static_cast<size_t>(static_cast<double>(c.ids.size()) * (1.0 - val_frac));
  return c;
}

float lr_at(const TrainOptions& o, int step) {
  if (step < o.warmup) return o.lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup);
  const double span = std::max(1, o.steps - o.warmup);
  const double t = std::min(1.0, static_cast<double>(step - o.warmup) / span);
  const double min_lr = o.lr * o.min_lr_frac;
  return static_cast<float>(min_lr + 0.5 * (o.lr - min_lr) * (1.0 + std::cos(M_PI * t)));
}

const std::vector<std::string>& train_preset_names() {
  static const std::vector<std::string> names = {"induction-head"};
  return names;
}

void apply_train_preset(const std::string& name, TrainOptions& o) {
  if (name != "induction-head")
    throw Error("unknown preset '" + name + "'\n  HINT: the presets are: induction-head", ErrorKind::Usage);
  o.arch = "llama";
  o.layers = 2;
  o.embd = 64;
  o.heads = 4;
  o.kv_heads = 0;
  o.block_size = 64;  // a string of up to 30 characters typed twice fits, with room
  o.batch = 16;
  o.steps = 1600;
  o.lr = 6e-3f;
  o.warmup = 100;
  o.repeat_frac = 1.f;
  o.eval_every = 100;
  o.eval_batches = 4;
  o.corpus = "builtin:typing";
}

ModelConfig make_train_config(const TrainOptions& o, int vocab_size) {
  ModelConfig c;
  const auto usage = [](const std::string& m) { return Error(m, ErrorKind::Usage); };
  if (o.arch != "gpt2" && o.arch != "llama") throw usage("--arch must be gpt2 or llama, not '" + o.arch + "'");
  if (o.layers < 1 || o.embd < 1 || o.heads < 1 || o.block_size < 2 || o.kv_heads < 0)
    throw usage("--layers, --embd, --heads must be ≥ 1, --kv-heads ≥ 0 and --block-size ≥ 2");
  if (o.embd % o.heads) throw usage("--embd must be a multiple of --heads (n_embd = heads x head_size)");
  c.model_type = o.arch;
  c.arch = o.arch == "gpt2" ? Arch::Gpt2 : Arch::Llama;
  c.vocab_size = vocab_size;
  c.n_layer = o.layers;
  c.n_embd = o.embd;
  c.n_head = o.heads;
  c.head_size = o.embd / o.heads;
  c.n_ctx = o.block_size;
  if (c.arch == Arch::Gpt2) {
    if (o.kv_heads && o.kv_heads != o.heads) throw usage("gpt2 has no GQA: leave --kv-heads out or equal to --heads");
    c.n_kv_head = o.heads;
    c.n_inner = o.inner ? o.inner : 4 * o.embd;
    c.norm_eps = 1e-5f;
    c.tie_embeddings = true;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
  } else {
    c.n_kv_head = o.kv_heads ? o.kv_heads : o.heads;
    if (o.heads % c.n_kv_head) throw usage("--heads must be a multiple of --kv-heads");
    if (c.head_size % 2) throw usage("RoPE needs an even head size (--embd / --heads)");
    c.n_inner = o.inner ? o.inner : (8 * o.embd / 3 + 7) / 8 * 8;
    c.norm_eps = 1e-5f;
    c.rope_theta = o.rope_theta;
    c.tie_embeddings = o.tie;
    c.qkv_bias = c.o_bias = c.mlp_bias = false;
  }
  return c;
}

double clip_grad_norm(Params<float>& grads, float clip) {
  double sq = 0;
  const auto refs = param_list(grads);
  for (const auto& r : refs)
    for (Eigen::Index i = 0; i < r.size; ++i) sq += static_cast<double>(r.data[i]) * r.data[i];
  const double norm = std::sqrt(sq);
  if (clip > 0 && norm > clip) {
    const float s = static_cast<float>(clip / (norm + 1e-6));
    for (const auto& r : refs)
      for (Eigen::Index i = 0; i < r.size; ++i) r.data[i] *= s;
  }
  return norm;
}

void adamw_step(const TrainOptions& o, float lr, Params<float>& p, const Params<float>& grads, AdamState& st) {
  st.step += 1;
  const auto P = param_list(p);
  const auto G = param_list(const_cast<Params<float>&>(grads));
  const auto M = param_list(st.m), V = param_list(st.v);
  const float b1 = o.beta1, b2 = o.beta2;
  const float c1 = 1.f - std::pow(b1, static_cast<float>(st.step)), c2 = 1.f - std::pow(b2, static_cast<float>(st.step));
  for (size_t t = 0; t < P.size(); ++t) {
    float *w = P[t].data, *m = M[t].data, *v = V[t].data;
    const float* g = G[t].data;
    const float decay = P[t].decay ? lr * o.weight_decay : 0.f;
    for (Eigen::Index i = 0; i < P[t].size; ++i) {
      m[i] = b1 * m[i] + (1.f - b1) * g[i];
      v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
      const float mhat = m[i] / c1, vhat = v[i] / c2;
      w[i] -= decay * w[i] + lr * mhat / (std::sqrt(vhat) + o.adam_eps);
    }
  }
}

namespace {

// Inputs and targets of B windows starting at `starts`.
void make_batch(const std::vector<int>& ids, const std::vector<size_t>& starts, int T, std::vector<int>& in,
                std::vector<int>& tg) {
  in.resize(starts.size() * T);
  tg.resize(starts.size() * T);
  for (size_t b = 0; b < starts.size(); ++b)
    for (int t = 0; t < T; ++t) {
      in[b * T + t] = ids[starts[b] + t];
      tg[b * T + t] = ids[starts[b] + t + 1];
    }
}

}  // namespace

void fill_repeated(const std::vector<int>& ids, size_t start, int period, bool random_chars, int vocab,
                   std::mt19937_64& rng, int T, int* in, int* tg) {
  std::uniform_int_distribution<int> any_char(0, vocab - 1);
  std::vector<int> seg(static_cast<size_t>(period));
  for (int t = 0; t < period; ++t) seg[t] = random_chars ? any_char(rng) : ids[start + static_cast<size_t>(t)];
  for (int t = 0; t < T; ++t) {
    in[t] = seg[t % period];
    tg[t] = seg[(t + 1) % period];
  }
}

double evaluate(const ModelConfig& c, const Params<float>& p, const std::vector<int>& ids, size_t begin, size_t end,
                int batch, int n_batches) {
  const int T = c.n_ctx;
  if (end < begin + T + 1) throw Error("the validation part of the corpus is shorter than block_size + 1 characters");
  const size_t span = end - begin - T - 1, total = static_cast<size_t>(batch) * n_batches;
  Activations<float> acts;
  std::vector<int> in, tg;
  double sum = 0;
  for (int k = 0; k < n_batches; ++k) {
    std::vector<size_t> starts;
    for (int b = 0; b < batch; ++b) {
      const size_t i = static_cast<size_t>(k) * batch + b;
      starts.push_back(begin + (total > 1 ? span * i / (total - 1) : 0));
    }
    make_batch(ids, starts, T, in, tg);
    sum += model_loss<float>(c, p, in, tg, batch, T, nullptr, acts);
  }
  return sum / n_batches;
}

// ---------------------------------------------------------------------------------------
// Checkpoints

namespace {

std::vector<int64_t> shape2(const MatT<float>& m) { return {m.rows(), m.cols()}; }

// Adds a matrix stored as nn.Linear (out, in): our (in, out) transposed.
void add_linear(SafetensorsWriter& w, const std::string& name, const MatT<float>& m) {
  const MatT<float> t = m.transpose();
  w.add_f32(name, {t.rows(), t.cols()}, t.data());
}
void add_vec(SafetensorsWriter& w, const std::string& name, const VecT<float>& v) { w.add_f32(name, {v.size()}, v.data()); }

nlohmann::json options_json(const TrainOptions& o) {
  return {{"arch", o.arch}, {"layers", o.layers}, {"embd", o.embd}, {"heads", o.heads}, {"kv_heads", o.kv_heads},
          {"inner", o.inner}, {"block_size", o.block_size}, {"tie", o.tie}, {"batch", o.batch}, {"steps", o.steps},
          {"lr", o.lr}, {"min_lr_frac", o.min_lr_frac}, {"warmup", o.warmup}, {"weight_decay", o.weight_decay},
          {"beta1", o.beta1}, {"beta2", o.beta2}, {"clip", o.clip}, {"seed", o.seed}, {"repeat_frac", o.repeat_frac}, {"val_frac", o.val_frac},
          {"eval_every", o.eval_every}, {"eval_batches", o.eval_batches}, {"corpus", o.corpus}};
}

}  // namespace

namespace {

// The files of a checkpoint, each written atomically (see save_checkpoint).
void write_checkpoint_files(const std::string& dir, const ModelConfig& c, const Params<float>& p,
                            const std::vector<std::string>& vocab, const AdamState* st, const TrainOptions* o) {
  SafetensorsWriter w;
  if (c.arch == Arch::Gpt2) {
    // GPT-2: Conv1D weights are (in, out) as we store them; c_attn packs q | k | v.
    w.add_f32("wte.weight", shape2(p.tok_emb), p.tok_emb.data());
    w.add_f32("wpe.weight", shape2(p.pos_emb), p.pos_emb.data());
    for (size_t l = 0; l < p.layers.size(); ++l) {
      const auto& lp = p.layers[l];
      const std::string pre = "h." + std::to_string(l) + ".";
      const int C = c.n_embd;
      MatT<float> qkv(C, 3 * C);
      qkv << lp.wq, lp.wk, lp.wv;
      VecT<float> qkv_b(3 * C);
      qkv_b << lp.bq, lp.bk, lp.bv;
      add_vec(w, pre + "ln_1.weight", lp.norm1_w);
      add_vec(w, pre + "ln_1.bias", lp.norm1_b);
      w.add_f32(pre + "attn.c_attn.weight", shape2(qkv), qkv.data());
      add_vec(w, pre + "attn.c_attn.bias", qkv_b);
      w.add_f32(pre + "attn.c_proj.weight", shape2(lp.wo), lp.wo.data());
      add_vec(w, pre + "attn.c_proj.bias", lp.bo);
      add_vec(w, pre + "ln_2.weight", lp.norm2_w);
      add_vec(w, pre + "ln_2.bias", lp.norm2_b);
      w.add_f32(pre + "mlp.c_fc.weight", shape2(lp.w_fc), lp.w_fc.data());
      add_vec(w, pre + "mlp.c_fc.bias", lp.b_fc);
      w.add_f32(pre + "mlp.c_proj.weight", shape2(lp.w_down), lp.w_down.data());
      add_vec(w, pre + "mlp.c_proj.bias", lp.b_down);
    }
    add_vec(w, "ln_f.weight", p.normf_w);
    add_vec(w, "ln_f.bias", p.normf_b);
  } else {
    w.add_f32("model.embed_tokens.weight", shape2(p.tok_emb), p.tok_emb.data());
    for (size_t l = 0; l < p.layers.size(); ++l) {
      const auto& lp = p.layers[l];
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      add_vec(w, pre + "input_layernorm.weight", lp.norm1_w);
      add_linear(w, pre + "self_attn.q_proj.weight", lp.wq);
      add_linear(w, pre + "self_attn.k_proj.weight", lp.wk);
      add_linear(w, pre + "self_attn.v_proj.weight", lp.wv);
      if (c.qkv_bias) {
        add_vec(w, pre + "self_attn.q_proj.bias", lp.bq);
        add_vec(w, pre + "self_attn.k_proj.bias", lp.bk);
        add_vec(w, pre + "self_attn.v_proj.bias", lp.bv);
      }
      add_linear(w, pre + "self_attn.o_proj.weight", lp.wo);
      if (c.o_bias) add_vec(w, pre + "self_attn.o_proj.bias", lp.bo);
      add_vec(w, pre + "post_attention_layernorm.weight", lp.norm2_w);
      add_linear(w, pre + "mlp.gate_proj.weight", lp.w_fc);
      add_linear(w, pre + "mlp.up_proj.weight", lp.w_up);
      add_linear(w, pre + "mlp.down_proj.weight", lp.w_down);
    }
    add_vec(w, "model.norm.weight", p.normf_w);
    if (!c.tie_embeddings) w.add_f32("lm_head.weight", shape2(p.lm_head), p.lm_head.data());
  }
  w.set_metadata("format", "pt");
  w.set_metadata("generator", "attnviz-cli train");
  if (st) w.set_metadata("step", std::to_string(st->step));
  w.write(dir + "/model.safetensors");
  write_file_atomic(dir + "/config.json", config_to_json(c).dump(2) + "\n");
  write_file_atomic(dir + "/tokenizer.json", CharTokenizer(vocab).to_json() + "\n");
  if (st) {
    SafetensorsWriter s;
    auto& m = const_cast<AdamState*>(st)->m;
    auto& v = const_cast<AdamState*>(st)->v;
    for (const auto& r : param_list(m)) s.add_f32("m." + r.name, {r.size}, r.data);
    for (const auto& r : param_list(v)) s.add_f32("v." + r.name, {r.size}, r.data);
    s.write(dir + "/trainer_state.safetensors");
    nlohmann::json j = {{"step", st->step}};
    if (o) j["options"] = options_json(*o);
    write_file_atomic(dir + "/trainer_state.json", j.dump(2) + "\n");
  }
}

}  // namespace

void save_checkpoint(const std::string& dir, const ModelConfig& c, const Params<float>& p,
                     const std::vector<std::string>& vocab, const AdamState* st, const TrainOptions* o) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create checkpoint directory '" + dir + "': " + ec.message());
  try {
    write_checkpoint_files(dir, c, p, vocab, st, o);
  } catch (...) {
    // Each file is whole or absent; a directory this call made goes again when it fails
    // (a full disk, a file-size limit), so a failed first save leaves nothing behind.
    if (!existed) std::filesystem::remove_all(dir, ec);
    throw;
  }
}

void load_trainer_state(const std::string& dir, const Params<float>& p, AdamState& st) {
  const std::string jpath = dir + "/trainer_state.json";
  struct stat sb {};
  if (stat(jpath.c_str(), &sb) != 0)
    throw Error("'" + jpath + "' not found\n  HINT: --resume needs a directory written by attnviz-cli train.");
  nlohmann::json j = read_json_file(jpath, "trainer_state.json");
  if (!j.contains("step") || !j["step"].is_number_integer()) throw Error(jpath + ": missing integer \"step\"");
  st.step = json_int(j["step"], 0, std::numeric_limits<int>::max(), jpath + ": \"step\"");
  st.m = zeros_like(p);
  st.v = zeros_like(p);
  const auto f = SafetensorsFile::open(dir + "/trainer_state.safetensors");
  auto fill = [&](Params<float>& dst, const std::string& prefix) {
    for (const auto& r : param_list(dst)) {
      const TensorInfo* t = f.find(prefix + r.name);
      if (!t || t->numel() != r.size)
        throw Error(f.path() + ": tensor '" + prefix + r.name + "' missing or of the wrong size (expected " +
                    std::to_string(r.size) + " values)");
      const auto vals = f.read_f32(*t);
      std::copy(vals.begin(), vals.end(), r.data);
    }
  };
  fill(st.m, "m.");
  fill(st.v, "v.");
}

// ---------------------------------------------------------------------------------------
// The loop

TrainRun start_run(const TrainOptions& o) {
  if (o.batch < 1 || o.steps < 1) throw Error("--batch and --steps must be ≥ 1", ErrorKind::Usage);
  TrainRun r;
  r.o = o;
  if (r.o.warmup >= r.o.steps) r.o.warmup = std::max(0, r.o.steps / 10);
  r.corpus = load_corpus(o.corpus, o.val_frac);
  if (o.max_vocab > 0 && static_cast<int>(r.corpus.vocab.size()) > o.max_vocab)
    throw Error(o.corpus + ": " + std::to_string(r.corpus.vocab.size()) + " distinct characters, more than the " +
                    std::to_string(o.max_vocab) + " the vocabulary allows\n  HINT: raise the vocabulary size or use a "
                    "text with fewer distinct characters.",
                ErrorKind::Usage);
  if (!o.resume.empty()) {
    const auto m = load_model(o.resume);
    r.c = m->config;
    // The trainer's gradients are gpt2's and llama's; the families after llama (windows,
    // QK-norm, other norms, soft-caps, GeGLU, multipliers) are viewed, not trained.
    if ((r.c.model_type != "gpt2" && r.c.model_type != "llama") || !r.c.features().empty())
      throw Error("--resume " + o.resume + ": a " + r.c.model_type + " model (" +
                  (r.c.features().empty() ? std::string("not a trainer checkpoint") : r.c.features()) +
                  ") cannot be trained\n  HINT: attnviz trains the gpt2 and llama shapes it writes itself; other "
                  "architectures can be opened and explored, not trained.",
                  ErrorKind::Usage);
    const auto* tok = dynamic_cast<const CharTokenizer*>(m->tokenizer.get());
    if (!tok || tok->pieces() != r.corpus.vocab)
      throw Error("--resume " + o.resume + ": the checkpoint's vocabulary differs from the corpus's\n  HINT: resume "
                  "with the same --corpus the run started with.");
    r.p = params_from_weights<float>(m->weights);
    if (r.c.arch == Arch::Gpt2) r.p.lm_head.resize(0, 0);  // tied
    load_trainer_state(o.resume, r.p, r.st);
  } else {
    r.c = make_train_config(o, static_cast<int>(r.corpus.vocab.size()));
    r.p = init_params(r.c, o.seed);
    r.st.m = zeros_like(r.p);
    r.st.v = zeros_like(r.p);
  }
  const size_t T = static_cast<size_t>(r.c.n_ctx);
  if (r.corpus.n_train < T + 2 || r.corpus.ids.size() - r.corpus.n_train < T + 2)
    throw Error(o.corpus + ": too short for block_size " + std::to_string(T) +
                " (both the training part and the last " + std::to_string(o.val_frac * 100) +
                "% for validation need more than block_size characters)");
  r.grads = zeros_like(r.p);
  return r;
}

void train_step(TrainRun& r, TrainProgress& pr) {
  const TrainOptions& o = r.o;
  const Corpus& corpus = r.corpus;
  const int T = r.c.n_ctx, B = o.batch, step = r.st.step;
  // The batch depends only on (seed, step), so a resumed run sees the same data.
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step));
  std::uniform_int_distribution<size_t> pick(0, corpus.n_train - T - 1);
  std::vector<size_t> starts(static_cast<size_t>(B));
  for (auto& s : starts) s = pick(rng);
  make_batch(corpus.ids, starts, T, r.in, r.tg);
  const int repeated = static_cast<int>(std::lround(o.repeat_frac * B));
  for (int b = 0; b < repeated; ++b) {
    std::uniform_int_distribution<int> period(8, std::max(8, T / 2));
    const int P = period(rng);
    fill_repeated(corpus.ids, starts[b], P, b % 2 == 1, r.c.vocab_size, rng, T, &r.in[static_cast<size_t>(b) * T],
                  &r.tg[static_cast<size_t>(b) * T]);
  }
  for (const auto& g : param_list(r.grads)) std::fill(g.data, g.data + g.size, 0.f);
  const float loss = model_loss<float>(r.c, r.p, r.in, r.tg, B, T, &r.grads, r.acts);
  if (!std::isfinite(loss))
    throw Error("the training loss became " + std::to_string(loss) + " at step " + std::to_string(step) +
                "\n  HINT: lower --lr or raise --warmup.");
  pr.grad_norm = clip_grad_norm(r.grads, o.clip);
  pr.lr = lr_at(o, step);
  adamw_step(o, static_cast<float>(pr.lr), r.p, r.grads, r.st);
  pr.step = step + 1;
  pr.steps = o.steps;
  pr.loss = loss;
}

double validate_run(const TrainRun& r) {
  return evaluate(r.c, r.p, r.corpus.ids, r.corpus.n_train, r.corpus.ids.size(), r.o.batch, r.o.eval_batches);
}

bool train_single_threaded(const ModelConfig& c) { return c.n_embd <= 128; }

TrainResult train(const TrainOptions& o, const std::function<void(const TrainProgress&)>& progress) {
  using clock = std::chrono::steady_clock;
  if (o.out.empty()) throw Error("train needs --out DIR", ErrorKind::Usage);
  TrainRun r = start_run(o);
  const int T = r.c.n_ctx, B = o.batch;
  TrainResult res;
  res.config = r.c;
  TrainProgress pr;
  pr.steps = o.steps;
  const auto t0 = clock::now();
  const int first = r.st.step;
  if (first == 0) pr.val_loss = res.first_val_loss = validate_run(r);
  pr.run = &r;
  pr.step = first;
  pr.start = true;
  if (progress) progress(pr);
  pr.start = false;
  while (r.st.step < o.steps) {
    train_step(r, pr);
    pr.elapsed_s = std::chrono::duration<double>(clock::now() - t0).count();
    const int done = pr.step - first;
    pr.tokens_per_s = done * static_cast<double>(B) * T / std::max(pr.elapsed_s, 1e-9);
    pr.eta_s = pr.elapsed_s / done * (o.steps - pr.step);
    pr.evaluated = pr.saved = false;
    if (pr.step % o.eval_every == 0 || pr.step == o.steps) {
      pr.val_loss = validate_run(r);
      save_checkpoint(o.out, r.c, r.p, r.corpus.vocab, &r.st, &r.o);
      pr.evaluated = pr.saved = true;
    }
    res.final_train_loss = pr.loss;
    if (progress) progress(pr);
  }
  if (first >= o.steps) {  // nothing to do: still leave a checkpoint and a validation loss
    pr.val_loss = validate_run(r);
    save_checkpoint(o.out, r.c, r.p, r.corpus.vocab, &r.st, &r.o);
  }
  res.final_val_loss = pr.val_loss;
  res.steps = r.st.step;
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace attnviz
