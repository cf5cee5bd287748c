#include "ui/state/settings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/paths.h"
#include "core/model/random_model.h"

namespace attnviz::ui {

namespace fs = std::filesystem;

namespace {
std::string xdg_dir(const char* var, const char* fallback_under_home) {
  if (const char* v = std::getenv(var); v && *v) return (fs::path(v) / "attnviz").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / fallback_under_home / "attnviz").string();
}
}  // namespace

std::string config_dir() { return xdg_dir("XDG_CONFIG_HOME", ".config"); }
std::string cache_dir() { return xdg_dir("XDG_CACHE_HOME", ".cache"); }

std::string settings_to_json(const AppState& s, const PanelVisibility& panels) {
  nlohmann::json j;
  j["model"] = s.model_spec;
  j["backend"] = s.backend;
  j["arith"] = s.arith;
  j["text"] = s.text;
  j["block_size"] = s.block_size;
  j["layer"] = s.layer;
  j["head"] = s.head;
  j["stage"] = stage_name(s.stage);
  j["kv_group"] = s.kv_group;
  j["temperature"] = s.temperature;
  j["top_k"] = s.top_k;
  j["cell_px"] = s.cell_px;
  j["probs_colormap"] = colormap_name(s.probs_colormap);
  j["presentation"] = s.presentation;
  j["panels"] = panels;
  {
    const LayoutState& l = s.layout;
    nlohmann::json moved = nlohmann::json::object();
    for (const auto& [title, region] : l.moved) moved[title] = region_name(region);
    j["layout"] = {{"preset", preset_name(l.preset)}, {"left", l.left}, {"right", l.right}, {"bottom", l.bottom},
                   {"left_dragged", l.left_dragged}, {"right_dragged", l.right_dragged},
                   {"bottom_dragged", l.bottom_dragged}, {"moved", moved}};
  }
  j["recent_models"] = s.recent_models;
  j["chat"] = {{"on", s.chat}, {"generation_prompt", s.chat_generation_prompt}, {"turns", nlohmann::json::array()}};
  for (const ChatTurn& t : s.chat_turns) j["chat"]["turns"].push_back({{"role", t.role}, {"content", t.content}});
  return j.dump(2);
}

bool settings_from_json(const std::string& text, AppState& s, PanelVisibility& panels, std::string* error,
                        const std::string& where) {
  nlohmann::json j;
  try {
    j = parse_json(text, where);
  } catch (const Error& e) {
    if (error) *error = e.what();
    return false;
  }
  if (!j.is_object()) {
    if (error) *error = where + ": not a JSON object (found " + json_excerpt(j) + ")";
    return false;
  }
  auto str = [&](const char* k, std::string& out) {
    if (j.contains(k) && j[k].is_string()) out = j[k].get<std::string>();
  };
  auto num = [&](const char* k, auto& out) {
    if (j.contains(k) && j[k].is_number()) out = j[k].get<std::decay_t<decltype(out)>>();
  };
  str("model", s.model_spec);
  str("backend", s.backend);
  str("arith", s.arith);
  str("text", s.text);
  num("block_size", s.block_size);
  num("layer", s.layer);
  num("head", s.head);
  num("kv_group", s.kv_group);
  num("temperature", s.temperature);
  num("top_k", s.top_k);
  num("cell_px", s.cell_px);
  if (j.contains("presentation") && j["presentation"].is_boolean()) s.presentation = j["presentation"].get<bool>();
  std::string name;
  str("stage", name);
  for (int i = 0; i < kStageCount; ++i)
    if (name == stage_name(static_cast<Stage>(i))) s.stage = static_cast<Stage>(i);
  name.clear();
  str("probs_colormap", name);
  for (int i = 0; i < kColormapCount; ++i)
    if (name == colormap_name(static_cast<Colormap>(i))) s.probs_colormap = static_cast<Colormap>(i);
  if (j.contains("recent_models") && j["recent_models"].is_array()) {
    // Strings only, oldest last, as remember_model keeps them (duplicates and the excess dropped).
    std::vector<std::string> recent;
    const auto& list = j["recent_models"];
    for (auto it = list.rbegin(); it != list.rend(); ++it)
      if (it->is_string()) remember_model(recent, it->get<std::string>());
    s.recent_models = std::move(recent);
  }
  if (j.contains("chat") && j["chat"].is_object()) {  // the chat mode's turns (strings only; others dropped)
    const nlohmann::json& c = j["chat"];
    if (c.contains("on") && c["on"].is_boolean()) s.chat = c["on"].get<bool>();
    if (c.contains("generation_prompt") && c["generation_prompt"].is_boolean())
      s.chat_generation_prompt = c["generation_prompt"].get<bool>();
    if (c.contains("turns") && c["turns"].is_array()) {
      s.chat_turns.clear();
      for (const auto& t : c["turns"])
        if (t.is_object() && t.contains("role") && t["role"].is_string() && t.contains("content") && t["content"].is_string())
          s.chat_turns.push_back(ChatTurn{t["role"].get<std::string>(), t["content"].get<std::string>()});
    }
  }
  if (j.contains("layout") && j["layout"].is_object()) {  // fractions outside (0, 0.9) are dropped
    const nlohmann::json& l = j["layout"];
    LayoutState& out = s.layout;
    if (l.contains("preset") && l["preset"].is_string()) preset_from_name(l["preset"].get<std::string>(), &out.preset);
    const auto frac = [&](const char* key, float* f) {
      if (l.contains(key) && l[key].is_number()) {
        const double v = l[key].get<double>();
        if (v > 0.0 && v < 0.9) *f = static_cast<float>(v);
      }
    };
    frac("left", &out.left);
    frac("right", &out.right);
    frac("bottom", &out.bottom);
    const auto flag = [&](const char* key, bool* b) {
      if (l.contains(key) && l[key].is_boolean()) *b = l[key].get<bool>();
    };
    flag("left_dragged", &out.left_dragged);
    flag("right_dragged", &out.right_dragged);
    flag("bottom_dragged", &out.bottom_dragged);
    if (l.contains("moved") && l["moved"].is_object())
      for (auto it = l["moved"].begin(); it != l["moved"].end(); ++it) {
        Region r;
        if (it.value().is_string() && region_from_name(it.value().get<std::string>(), &r)) out.moved[it.key()] = r;
      }
  }
  if (j.contains("panels") && j["panels"].is_object())
    for (auto it = j["panels"].begin(); it != j["panels"].end(); ++it)
      if (it.value().is_boolean()) panels[it.key()] = it.value().get<bool>();
  return true;
}

bool load_settings(AppState& s, PanelVisibility& panels, std::string* error) {
  const std::string path = (fs::path(config_dir()) / "settings.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  std::string text;
  try {
    text = read_regular_file(path, kMaxSettingsBytes, "settings file", /*allow_nul=*/false);
  } catch (const Error& e) {
    if (error) *error = e.what();
    return false;
  }
  return settings_from_json(text, s, panels, error, excerpt(path, kPathExcerptBytes));
}

void save_settings(const AppState& s, const PanelVisibility& panels) {
  std::error_code ec;
  fs::create_directories(config_dir(), ec);
  const fs::path path = fs::path(config_dir()) / "settings.json";
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << settings_to_json(s, panels) << "\n";
    if (!out) return;
  }
  fs::rename(tmp, path, ec);
}

std::string default_model_spec(bool* random_weights) {
  for (const auto& n : builtin_models())
    if (n == "fortunes-en") {
      if (random_weights) *random_weights = false;
      return "builtin:fortunes-en";
    }
  const fs::path dir = fs::path(cache_dir()) / "random-tiny";
  if (!fs::exists(dir / "config.json") || !fs::exists(dir / "model.safetensors") ||
      !fs::exists(dir / "tokenizer.json")) {
    // Write into a fresh folder, then move it into place, so a half-written model is
    // never picked up.
    const fs::path tmp = dir.string() + ".tmp";
    std::error_code ec;
    fs::remove_all(tmp, ec);
    write_random_model(preset_config("tiny"), 1, tmp.string());
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir);
  }
  if (random_weights) *random_weights = true;
  return dir.string();
}

}  // namespace attnviz::ui
