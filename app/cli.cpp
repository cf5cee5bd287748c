#include "app/cli.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/dump.h"
#include "core/engine.h"
#include "core/error.h"
#include "core/paths.h"
#include "core/random_model.h"

namespace attnviz {

namespace {

// "3,1,4" → {3, 1, 4}
std::vector<int> parse_token_list(const std::string& s) {
  std::vector<int> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      throw Error("--tokens: '" + item + "' is not an integer token id (expected a list like 1,2,3)", ErrorKind::Usage);
    ids.push_back(static_cast<int>(v));
  }
  return ids;
}

std::unique_ptr<Backend> open_backend(const std::string& name, std::ostream& err) {
  std::string note;
  auto b = attnviz::make_backend(name, &note);
  if (!note.empty()) err << "note: " << note << "\n";
  return b;
}

struct InputOptions {
  std::string model, text, tokens, backend = "cpu";
  int block_size = 0;
};

void add_input_options(CLI::App* cmd, InputOptions& o, bool with_text) {
  cmd->add_option("--model", o.model, "model directory (config.json + model.safetensors) or builtin:NAME")->required();
  if (with_text) {
    auto* text = cmd->add_option("--text", o.text, "text to run (needs the model's tokenizer)");
    auto* toks = cmd->add_option("--tokens", o.tokens, "token ids to run, e.g. 1,2,3");
    text->excludes(toks);
  }
  cmd->add_option("--backend", o.backend, "cpu or gpu")->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_option("--block-size", o.block_size, "context window: only the last N tokens are seen (default: the model's context)");
}

// Loads the model, builds the engine and runs the input: what dump and export share.
Engine run_input(const InputOptions& o, bool text_given, bool tokens_given, std::ostream& err) {
  if (!text_given && !tokens_given) throw Error("give the input with --text S or --tokens 1,2,3", ErrorKind::Usage);
  Engine engine(load_model(o.model), open_backend(o.backend, err));
  if (o.block_size) engine.set_block_size(o.block_size);
  const std::vector<int> ids = text_given ? encode_text(engine.model(), o.text) : parse_token_list(o.tokens);
  engine.run(ids);
  return engine;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Floating-point operations of one full forward over T tokens (multiply-add = 2).
double forward_flops(const ModelConfig& c, int T) {
  const double C = c.n_embd, Hd = c.n_head * c.head_size, KVd = c.n_kv_head * c.head_size, I = c.n_inner;
  const double proj = 2.0 * T * C * (Hd + 2 * KVd) + 2.0 * T * Hd * C;
  const double attn = 2.0 * 2.0 * c.n_head * static_cast<double>(T) * T * c.head_size;  // QKᵀ and PV
  const double mlp = 2.0 * T * C * I * (c.arch == Arch::Gpt2 ? 2 : 3);
  return c.n_layer * (proj + attn + mlp) + 2.0 * T * C * c.vocab_size;
}

void print_info(const Model& m, bool json, std::ostream& out) {
  const ModelConfig& c = m.config;
  long long emb = m.weights.tok_emb.size() + m.weights.pos_emb.size(), attn = 0, mlp = 0, norms = 0;
  for (const auto& l : m.weights.layers) {
    attn += l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() + l.bq.size() + l.bk.size() + l.bv.size() + l.bo.size();
    mlp += l.w_fc.size() + l.b_fc.size() + l.w_up.size() + l.w_down.size() + l.b_down.size();
    norms += l.norm1_w.size() + l.norm1_b.size() + l.norm2_w.size() + l.norm2_b.size();
  }
  norms += m.weights.normf_w.size() + m.weights.normf_b.size();
  const long long head = m.weights.lm_head.size();
  nlohmann::json j = {{"model", m.name}, {"dir", m.dir}, {"model_type", c.model_type}, {"vocab_size", c.vocab_size},
                      {"n_layer", c.n_layer}, {"n_embd", c.n_embd}, {"n_head", c.n_head}, {"n_kv_head", c.n_kv_head},
                      {"head_size", c.head_size}, {"group_size", c.group_size()}, {"n_inner", c.n_inner},
                      {"context", c.n_ctx}, {"tied_embeddings", c.tie_embeddings},
                      {"tokenizer", m.tokenizer ? "char" : "none"},
                      {"parameters", {{"total", m.parameter_count()}, {"embeddings", emb}, {"attention", attn},
                                      {"mlp", mlp}, {"norms", norms}, {"lm_head", head}}}};
  if (json) {
    out << j.dump(2) << "\n";
    return;
  }
  out << "model       " << m.name << "  (" << m.dir << ")\n"
      << "type        " << c.model_type << (c.arch == Arch::Gpt2 ? "  (learned positions, LayerNorm, GELU)" : "  (RoPE, RMSNorm, SwiGLU)") << "\n"
      << "layers      " << c.n_layer << "\n"
      << "n_embd      " << c.n_embd << " = n_head " << c.n_head << " x head_size " << c.head_size << "\n"
      << "KV heads    " << c.n_kv_head << "  (query head h reads KV head h / " << c.group_size() << ")\n"
      << "MLP hidden  " << c.n_inner << "\n"
      << "vocab       " << c.vocab_size << "  tokenizer: " << (m.tokenizer ? "character-level" : "none (use --tokens)") << "\n"
      << "context     " << c.n_ctx << " tokens\n"
      << "parameters  " << m.parameter_count() << "  (embeddings " << emb << ", attention " << attn << ", MLP " << mlp
      << ", norms " << norms << ", lm_head " << (head ? std::to_string(head) : "tied") << ")\n";
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"attnviz-cli: run a causal transformer and record every step of attention"};
  app.require_subcommand(1);

  // info
  auto* info = app.add_subcommand("info", "Show a model's configuration and parameter counts");
  std::string info_model;
  bool info_json = false, info_list = false;
  info->add_option("--model", info_model, "model directory or builtin:NAME");
  info->add_flag("--json", info_json, "print JSON");
  info->add_flag("--list", info_list, "list the built-in models and random presets");

  // dump
  auto* dump = app.add_subcommand("dump", "Run a model and write every recorded matrix to a safetensors file");
  InputOptions dump_in;
  std::string dump_out;
  add_input_options(dump, dump_in, true);
  dump->add_option("--out", dump_out, "output .safetensors file")->required();

  // bench
  auto* bench = app.add_subcommand("bench", "Time the full forward with recording, and appending one token");
  InputOptions bench_in;
  int bench_len = 0, bench_reps = 5;
  bool bench_json = false;
  add_input_options(bench, bench_in, false);
  bench->add_option("--length", bench_len, "tokens T")->required()->check(CLI::PositiveNumber);
  bench->add_option("--reps", bench_reps, "timed repetitions (default 5)")->check(CLI::PositiveNumber);
  bench->add_flag("--json", bench_json, "print one JSON object");

  // random
  auto* rnd = app.add_subcommand("random", "Write a random model as a Hugging Face directory");
  std::string rnd_preset = "tiny", rnd_out;
  uint64_t rnd_seed = 1;
  int rnd_layers = 0, rnd_embd = 0, rnd_heads = 0, rnd_kv = 0, rnd_vocab = 0, rnd_ctx = 0;
  rnd->add_option("--preset", rnd_preset, "tiny | tiny-gpt2 | gpt2-small | llama-small (default tiny)");
  rnd->add_option("--layers", rnd_layers, "override the number of layers")->check(CLI::PositiveNumber);
  rnd->add_option("--embd", rnd_embd, "override n_embd")->check(CLI::PositiveNumber);
  rnd->add_option("--heads", rnd_heads, "override the query heads")->check(CLI::PositiveNumber);
  rnd->add_option("--kv-heads", rnd_kv, "override the KV heads (llama)")->check(CLI::PositiveNumber);
  rnd->add_option("--vocab", rnd_vocab, "override the vocabulary size")->check(CLI::PositiveNumber);
  rnd->add_option("--context", rnd_ctx, "override the context length")->check(CLI::PositiveNumber);
  rnd->add_option("--seed", rnd_seed, "random seed (default 1)");
  rnd->add_option("--out", rnd_out, "output directory")->required();

  if (argc > 1 && argv[1][0] != '-') {
    const std::string sub = argv[1];
    bool known = false;
    for (const auto* s : app.get_subcommands({})) known |= s->get_name() == sub;
    if (!known) {
      err << "error: unknown subcommand '" << sub << "' (choose one of: info, dump, bench, random; see --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : 2;
  }

  try {
    if (*info) {
      if (info_list || info_model.empty()) {
        out << "built-in models:";
        for (const auto& n : builtin_models()) out << " builtin:" << n;
        out << "\nrandom presets (attnviz-cli random --preset P):";
        for (const auto& n : preset_names()) out << " " << n;
        out << "\n";
        if (!info_list) throw Error("info needs --model M (or --list)", ErrorKind::Usage);
        return 0;
      }
      print_info(*load_model(info_model), info_json, out);
    } else if (*dump) {
      const Engine engine = run_input(dump_in, dump->count("--text") > 0, dump->count("--tokens") > 0, err);
      write_dump(engine.trace(), dump_out);
      const Trace& tr = engine.trace();
      err << "wrote " << dump_out << ": " << tr.layers.size() << " layers, T=" << tr.T() << ", dropped " << tr.dropped
          << "\n";
    } else if (*bench) {
      auto model = load_model(bench_in.model);
      Engine engine(model, open_backend(bench_in.backend, err));
      if (bench_in.block_size) engine.set_block_size(bench_in.block_size);
      if (bench_len > engine.block_size())
        throw Error("--length " + std::to_string(bench_len) + " is longer than the window (" +
                        std::to_string(engine.block_size()) + " tokens)",
                    ErrorKind::Usage);
      std::mt19937 rng(7);
      std::uniform_int_distribution<int> pick(0, model->config.vocab_size - 1);
      std::vector<int> ids(static_cast<size_t>(bench_len));
      for (int& t : ids) t = pick(rng);
      const std::vector<int> prefix(ids.begin(), ids.end() - 1);
      using clock = std::chrono::steady_clock;
      auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
      std::vector<double> full, append;
      engine.run(ids);  // warm-up
      for (int r = 0; r < bench_reps; ++r) {
        engine.clear_cache();
        auto t0 = clock::now();
        engine.run(ids);
        full.push_back(ms(clock::now() - t0));
      }
      if (bench_len > 1)
        for (int r = 0; r < bench_reps; ++r) {
          engine.run(prefix);
          auto t0 = clock::now();
          engine.run(ids);  // one new row through the KV cache
          append.push_back(ms(clock::now() - t0));
        }
      const double med = median(full), flops = forward_flops(model->config, bench_len);
      nlohmann::json j = {{"model", bench_in.model}, {"backend", engine.backend().name()}, {"length", bench_len},
                          {"reps", bench_reps}, {"median_ms", med}, {"min_ms", *std::min_element(full.begin(), full.end())},
                          {"append_median_ms", append.empty() ? 0.0 : median(append)}, {"threads", omp_get_max_threads()},
                          {"gflop", flops / 1e9}, {"gflops_per_s", flops / 1e6 / med},
                          {"trace_mb", static_cast<double>(engine.trace().bytes()) / 1e6}};
      if (bench_json) {
        out << j.dump() << "\n";
      } else {
        out << std::fixed << std::setprecision(3) << "model " << bench_in.model << ", backend "
            << engine.backend().name() << ", T=" << bench_len << ", " << bench_reps << " reps, "
            << omp_get_max_threads() << " threads\n"
            << "full forward + recording: median " << med << " ms, min " << j["min_ms"].get<double>() << " ms ("
            << j["gflops_per_s"].get<double>() << " GFLOP/s)\n"
            << "append one token (KV cache): median " << j["append_median_ms"].get<double>() << " ms\n"
            << "recorded matrices: " << j["trace_mb"].get<double>() << " MB\n";
      }
    } else if (*rnd) {
      ModelConfig c = preset_config(rnd_preset);
      if (rnd_layers) c.n_layer = rnd_layers;
      if (rnd_embd) c.n_embd = rnd_embd;
      if (rnd_heads) c.n_head = rnd_heads;
      if (c.arch == Arch::Gpt2) c.n_kv_head = c.n_head;
      else if (rnd_kv) c.n_kv_head = rnd_kv;
      else c.n_kv_head = std::min(c.n_kv_head, c.n_head);
      if (rnd_vocab) c.vocab_size = rnd_vocab;
      if (rnd_ctx) c.n_ctx = rnd_ctx;
      if (c.n_embd % c.n_head) throw Error("--embd must be a multiple of --heads", ErrorKind::Usage);
      if (c.n_head % c.n_kv_head) throw Error("--heads must be a multiple of --kv-heads", ErrorKind::Usage);
      c.head_size = c.n_embd / c.n_head;
      if (c.arch == Arch::Gpt2) c.n_inner = 4 * c.n_embd;
      if (c.arch == Arch::Llama && c.head_size % 2) throw Error("RoPE needs an even head size", ErrorKind::Usage);
      write_random_model(c, rnd_seed, rnd_out);
      err << "wrote random " << c.model_type << " model to " << rnd_out << "\n";
    }
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    err << "error: out of memory\n  HINT: use a shorter text (--block-size) or a smaller model.\n";
    return 1;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace attnviz
