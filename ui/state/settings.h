// Where the GUI keeps its files, and the last settings as JSON. No ImGui.
//   config: $XDG_CONFIG_HOME/attnviz or ~/.config/attnviz   (imgui.ini, settings.json)
//   cache:  $XDG_CACHE_HOME/attnviz  or ~/.cache/attnviz    (the generated random model)
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ui/state/app_state.h"

namespace attnviz::ui {

std::string config_dir();
std::string cache_dir();

// Panel visibility by panel title, saved with the settings.
using PanelVisibility = std::map<std::string, bool>;

// JSON text of the settings worth keeping between runs (model, backend, text, block
// size, selection, next-token options, view); hover state is not kept.
std::string settings_to_json(const AppState& s, const PanelVisibility& panels);
// Fills what the JSON has; ignores unknown keys and wrong types. Returns false (and leaves
// `s` as it was) when the text is not a JSON object, with the reason in *error (which
// starts with `where`): not JSON, nested too deep (parse_json's limits), not an object.
bool settings_from_json(const std::string& json, AppState& s, PanelVisibility& panels, std::string* error = nullptr,
                        const std::string& where = "settings.json");

// Largest settings file read (it is a few hundred bytes when attnviz writes it).
constexpr int64_t kMaxSettingsBytes = int64_t{1} << 20;
// config_dir()/settings.json. A missing file returns false with *error left empty; one
// that cannot be read or is not a settings object returns false with the reason in *error
// (the GUI starts with its defaults and shows it).
bool load_settings(AppState& s, PanelVisibility& panels, std::string* error = nullptr);
void save_settings(const AppState& s, const PanelVisibility& panels);  // best effort

// The model to use when none is given: builtin:fortunes-en when it exists, else a random
// "tiny" llama written once into cache_dir()/random-tiny. *random_weights says which.
std::string default_model_spec(bool* random_weights);

}  // namespace attnviz::ui
