#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/model/gguf_writer.h"
#include "core/model/random_model.h"

namespace attnviz {

namespace {

struct RandomOptions {
  std::string preset = "tiny", out, tokenizer, gguf;
  bool gguf_given = false;  // --gguf was passed, even with an empty TYPE (a usage error)
  uint64_t seed = 1;
  int layers = 0, embd = 0, heads = 0, kv = 0, vocab = 0, ctx = 0;
};

void run_random(const RandomOptions& o, Io& io) {
  ModelConfig c = preset_config(o.preset);
  if (o.layers) c.n_layer = o.layers;
  if (o.embd) c.n_embd = o.embd;
  if (o.heads) c.n_head = o.heads;
  if (c.arch == Arch::Gpt2) c.n_kv_head = c.n_head;
  else if (o.kv) c.n_kv_head = o.kv;
  else c.n_kv_head = std::min(c.n_kv_head, c.n_head);
  if (o.vocab) c.vocab_size = o.vocab;
  if (o.ctx) c.n_ctx = o.ctx;
  if (c.n_head % c.n_kv_head) throw Error("--heads must be a multiple of --kv-heads", ErrorKind::Usage);
  if (c.layer_specs.size() && o.layers) c.layer_specs.resize(static_cast<size_t>(c.n_layer), c.layer_specs.back());
  // A config that names its head size keeps it (Qwen3, Gemma); the others: n_embd / n_head.
  const bool explicit_head = c.n_head * c.head_size != c.n_embd;
  if (!explicit_head || o.embd || o.heads) {
    if (c.n_embd % c.n_head) throw Error("--embd must be a multiple of --heads", ErrorKind::Usage);
    const int old_d = c.head_size;
    c.head_size = c.n_embd / c.n_head;
    if (c.rotary_dim) {  // partial RoPE keeps its fraction; longrope's lists follow the rotary width
      c.rotary_dim = std::max(2, c.rotary_dim * c.head_size / old_d / 2 * 2);
      for (RopeScaling* s : {&c.rope_scaling}) {
        if (s->type != "longrope") continue;
        s->freq_factors.resize(static_cast<size_t>(c.rotary_dim / 2), s->freq_factors.back());
        s->long_factor.resize(static_cast<size_t>(c.rotary_dim / 2), s->long_factor.back());
      }
    }
  }
  if (c.arch == Arch::Gpt2) c.n_inner = 4 * c.n_embd;
  if (c.arch == Arch::Llama && c.head_size % 2) throw Error("RoPE needs an even head size", ErrorKind::Usage);
  // The same range checks as a config.json read from disk, as usage errors (they come
  // from flags), before anything is created.
  try {
    c = parse_config(config_to_json(c), "random model");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n  HINT: choose smaller --layers/--embd/--heads/--vocab/--context.",
                ErrorKind::Usage);
  }
  if (o.gguf_given) {  // one DIR/model.gguf in llama.cpp's layout, the tokenizer inside
    const GgmlType type = gguf_write_type(o.gguf);  // an empty or unknown TYPE: a usage error listing them
    if (!o.tokenizer.empty()) throw Error("--tokenizer cannot be combined with --gguf yet", ErrorKind::Usage);
    const std::string path = write_random_gguf(c, o.seed, o.out, type);
    io.err << "wrote random " << c.model_type << " model (random weights) as " << ggml_type_info(type).name << " to "
           << path << "\n";
    return;
  }
  write_random_model(c, o.seed, o.out, o.tokenizer);
  io.err << "wrote random " << c.model_type << " model (random weights) to " << o.out << "\n";
}

}  // namespace

Action add_random_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<RandomOptions>();
  auto* cmd = app.add_subcommand("random", "Write a random model as a Hugging Face directory");
  std::string presets;
  for (const std::string& n : preset_names()) presets += (presets.empty() ? "" : " | ") + n;
  cmd->add_option("--preset", o->preset,
                  presets + ": tiny, tiny-gpt2, gpt2-small and llama-small are small shapes, the others a real "
                  "checkpoint's config with random weights (default tiny)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "a tokenizer.json or tokenizer.model to copy into the directory (its ids must fit the vocabulary)");
  cmd->add_option("--layers", o->layers, "override the number of layers")->check(CLI::PositiveNumber);
  cmd->add_option("--embd", o->embd, "override n_embd")->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->heads, "override the query heads")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", o->kv, "override the KV heads (llama)")->check(CLI::PositiveNumber);
  cmd->add_option("--vocab", o->vocab, "override the vocabulary size")->check(CLI::PositiveNumber);
  cmd->add_option("--context", o->ctx, "override the context length")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "random seed (default 1)");
  auto* gguf = cmd->add_option("--gguf", o->gguf,
                  "write DIR/model.gguf instead, 2-D weights as TYPE: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K or MXFP4 "
                  "(llama.cpp's names and layout, the tokenizer inside)");
  cmd->add_option("--out", o->out, "output directory")->required();
  return [o, gguf, &io] {
    o->gguf_given = gguf->count() > 0;
    run_random(*o, io);
  };
}

}  // namespace attnviz
