// attnviz-cli models: every model the local stores hold (Ollama, the Hugging Face cache,
// LM Studio, llama.cpp's cache; core/model/stores.h), read from headers only, with whether
// attnviz opens it and why not.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/limits.h"
#include "core/model/stores.h"

namespace attnviz {

namespace {

// One line a model: the pinned fields' values, padded into columns.
void print_table(const std::vector<StoredModel>& models, std::ostream& out) {
  if (models.empty()) {
    out << "no models found in the stores (Ollama, Hugging Face cache, LM Studio, llama.cpp cache)\n";
    return;
  }
  const std::vector<std::string> head = {"SOURCE", "NAME", "ARCH", "TYPE", "SIZE", "OPENS"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : models)
    // An unreadable store is shown by where it is.
    rows.push_back({m.source, m.name == "(store)" ? m.path : m.name, m.architecture.empty() ? "-" : m.architecture,
                    m.file_type.empty() ? "-" : m.file_type, m.bytes ? format_bytes(static_cast<double>(m.bytes)) : "-",
                    m.opens ? "yes" : "no: " + m.reason});
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t c = 0; c < r.size(); ++c)
      s += c + 1 == r.size() ? r[c] : r[c] + std::string(width[c] - r[c].size() + 2, ' ');
    out << s << "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  const auto n = std::count_if(models.begin(), models.end(), [](const StoredModel& m) { return m.name != "(store)"; });
  out << n << " model" << (n == 1 ? "" : "s")
      << "; open one with --model ollama:NAME[:TAG], hf:ORG/NAME[@REVISION] or its path\n";
}

}  // namespace

Action add_models_command(CLI::App& app, Io& io) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "models", "List the models on this disk: Ollama, the Hugging Face cache, LM Studio and llama.cpp's cache");
  cmd->add_flag("--json", *json,
                "print {\"models\": [{source, name, path, architecture, file_type, bytes, opens, reason}, ...]}");
  return [json, &io] {
    const auto models = list_stored_models();
    if (!*json) return print_table(models, io.out);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& m : models)
      list.push_back({{"source", m.source},
                      {"name", m.name},
                      {"path", m.path},
                      {"architecture", m.architecture},
                      {"file_type", m.file_type},
                      {"bytes", m.bytes},
                      {"opens", m.opens},
                      {"reason", m.reason}});
    // Names and paths come from the disk: invalid UTF-8 is replaced, not a throw from dump().
    io.out << nlohmann::json{{"models", list}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  };
}

}  // namespace attnviz
