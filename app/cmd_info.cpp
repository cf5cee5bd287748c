#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/engine/stored_product.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/model/gguf.h"
#include "core/model/mixer.h"
#include "core/model/paths.h"
#include "core/model/random_model.h"

namespace attnviz {

namespace {

std::string tokenizer_str(const Model& m) {
  if (m.gguf_tokenizer) {
    const std::string what = "GGUF metadata (" + m.gguf_tokenizer->model +
                             (m.gguf_tokenizer->pre.empty() ? "" : ", pre " + m.gguf_tokenizer->pre) + ", " +
                             std::to_string(m.gguf_tokenizer->tokens.size()) + " tokens)";
    return m.tokenizer ? what : what + " not used: " + m.no_tokenizer_reason + " (use --tokens)";
  }
  if (m.tokenizer)
    return (m.tokenizer->kind() == "char" ? std::string("character-level") : m.tokenizer->kind()) + ", " +
           std::to_string(m.tokenizer->vocab_size()) + " tokens";
  return "none (use --tokens)";
}

}  // namespace

nlohmann::json model_info_json(const Model& m) {
  const ModelConfig& c = m.config;
  const ParamCounts p = parameter_counts(c);
  const long long emb = p.token_embedding + p.position_embedding, attn = p.attention, mlp = p.mlp, norms = p.norms,
                  head = p.lm_head;
  nlohmann::json stored = nlohmann::json::object();
  for (const auto& [type, count] : m.stored_types) stored[type] = count;
  nlohmann::json held = nlohmann::json::object();  // element type → bytes as held in memory
  for (const auto& [type, bytes] : m.held_types()) held[type] = bytes;
  nlohmann::json j = {
      {"model", m.name}, {"dir", m.dir}, {"model_type", c.model_type}, {"vocab_size", c.vocab_size},
      {"n_layer", c.n_layer}, {"n_embd", c.n_embd}, {"n_head", c.n_head}, {"n_kv_head", c.n_kv_head},
      {"head_size", c.head_size}, {"group_size", c.group_size()}, {"n_inner", c.n_inner}, {"context", c.n_ctx},
      {"tied_embeddings", c.tie_embeddings}, {"tokenizer", m.tokenizer ? m.tokenizer->kind() : "none"},
      {"warnings", m.warnings},
      {"parameters", {{"total", m.parameter_count()}, {"embeddings", emb}, {"attention", attn}, {"mlp", mlp},
                      {"norms", norms}, {"lm_head", head}, {"per_layer", p.per_layer}}},
      {"format", m.format}, {"stored_types", stored}, {"weight_bytes", m.weight_bytes()},
      {"weights_held", held}, {"stored_kernel", stored_kernel_name()},
      {"features", c.features()}, {"notes", c.notes}};
  j["layer_specs"] = nlohmann::json::array();  // (L) what each layer's attention does
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerSpec s = c.layer(l);
    nlohmann::json spec = {{"window", s.window}, {"rope", s.rope}, {"rope_theta", s.rope_theta},
                           {"scale", s.scale}, {"softcap", s.softcap}, {"mixer", mixer_info(s.mixer).key}};
    if (c.per_layer_attention()) {  // Gemma 4: each layer's own sizes, and whose K/V it reads
      spec["head_size"] = c.head_size_at(l);
      spec["kv_heads"] = c.kv_heads_at(l);
      spec["n_inner"] = c.inner_at(l);
      spec["kv_source"] = s.kv_source >= 0 ? s.kv_source : l;
      spec["v_from_k"] = s.v_from_k;
    }
    j["layer_specs"].push_back(spec);
  }
  return j;
}

namespace {

void print_info(const Model& m, bool json, std::ostream& out) {
  const ModelConfig& c = m.config;
  const ParamCounts p = parameter_counts(c);
  const long long emb = p.token_embedding + p.position_embedding, attn = p.attention, mlp = p.mlp, norms = p.norms,
                  head = p.lm_head;
  if (json) {
    out << model_info_json(m).dump(2) << "\n";
    return;
  }
  out << "model       " << m.name << "  (" << m.dir << ")\n"
      << "type        " << c.model_type << "  (" << c.block_kind() << ")"
      << "\n";
  if (!c.features().empty()) out << "attention   " << c.features() << "\n";
  for (const std::string& n : c.notes) out << "note        " << n << "\n";
  out << "layers      " << c.n_layer << "\n";
  if (c.n_head * c.head_size == c.n_embd)
    out << "n_embd      " << c.n_embd << " = n_head " << c.n_head << " x head_size " << c.head_size << "\n";
  else
    out << "n_embd      " << c.n_embd << "; n_head " << c.n_head << " x head_size " << c.head_size << " = "
        << c.n_head * c.head_size << " (the config sets head_dim)\n";
  out
      << "KV heads    " << c.n_kv_head << "  (query head h reads KV head h / " << c.group_size() << ")\n"
      << "MLP hidden  " << c.n_inner << "\n"
      << "vocab       " << c.vocab_size << "  tokenizer: " << tokenizer_str(m)
      << "\n"
      << "context     " << c.n_ctx << " tokens\n"
      << "parameters  " << m.parameter_count() << "  (embeddings " << emb << ", attention " << attn << ", MLP " << mlp
      << ", norms " << norms << ", lm_head " << (head ? std::to_string(head) : "tied")
      << (p.per_layer ? ", per-layer embeddings and scalars " + std::to_string(p.per_layer) : std::string()) << ")\n"
      << "weights     " << m.format << ": " << m.stored_types_str() << "\n"
      << "in memory   " << format_bytes(static_cast<double>(m.weight_bytes())) << ": " << m.held_types_str()
      << (m.weights.any_stored() ? std::string("; used where the file stores them (") + stored_kernel_name() + " kernels)"
                                 : std::string("; float32"))
      << "\n";
}

struct InfoOptions {
  std::string model, weights = "stored";
  bool json = false, list = false;
};

void run_info(const InfoOptions& o, Io& io) {
  if (o.list || o.model.empty()) {
    io.out << "built-in models:";
    for (const auto& n : builtin_models()) io.out << " builtin:" << n;
    io.out << "\nrandom presets (attnviz-cli random --preset P):";
    for (const auto& n : preset_names()) io.out << " " << n;
    io.out << "\n";
    if (!o.list) throw Error("info needs --model M (or --list)", ErrorKind::Usage);
    return;
  }
  const auto m = load_model(o.model, load_options(o.weights));
  print_info(*m, o.json, io.out);
  for (const std::string& w : m->warnings) io.err << format_message("warning", w);
}

}  // namespace

Action add_info_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand("info", "Show a model's configuration and parameter counts");
  cmd->add_option("--model", o->model, "model directory, FILE.gguf, builtin:NAME, ollama:NAME[:TAG] or hf:ORG/NAME[@REV]");
  cmd->add_flag("--json", o->json, "print JSON");
  add_weights_option(cmd, o->weights);
  cmd->add_flag("--list", o->list, "list the built-in models and random presets");
  return [o, &io] { run_info(*o, io); };
}

}  // namespace attnviz
