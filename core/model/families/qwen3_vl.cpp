// Qwen3-VL's text model (model_type "qwen3_vl_text", or inside a "qwen3_vl" config's
// text_config; GGUF "qwen3vl"): Qwen3's keys and tensors, with multi-axis RoPE.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/config.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"

namespace attnviz {

namespace {

// Qwen3-VL: its text model (text_config, model_type qwen3_vl_text) is Qwen3 with
// multi-axis RoPE. The sections (mrope_section) give each frequency pair the position of
// one axis (time, height, width); text has the same position on every axis, so every pair
// turns by position × its frequency, which is plain RoPE. Parsed as Qwen3, kept named.
ModelConfig parse_qwen3_vl(const nlohmann::json& j, const std::string& where) {
  const bool outer = j["model_type"] == "qwen3_vl";
  if (outer && (!j.contains("text_config") || !j["text_config"].is_object()))
    throw Error(where +
                ": model_type \"qwen3_vl\" without a \"text_config\" object\n  HINT: attnviz reads the text "
                "model of Qwen3-VL.");
  nlohmann::json text = outer ? j["text_config"] : j;
  if (outer && !text.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
    text["tie_word_embeddings"] = j["tie_word_embeddings"];
  text["model_type"] = "qwen3";
  ModelConfig c = parse_config(text, outer ? where + ": text_config" : where);
  c.model_type = "qwen3_vl_text";
  c.notes.push_back("qwen3_vl: multi-axis RoPE, which for text (every axis at the same position) is plain RoPE" +
                    std::string(outer ? "; the vision tower is not used" : ""));
  return c;
}

}  // namespace

FamilyTraits qwen3_vl_traits() {
  FamilyTraits t = family_traits(Family::Qwen3);
  t.parse = parse_qwen3_vl;
  t.gguf_rope_sections = true;  // llama.cpp requires them; one text position on every axis
  return t;
}

}  // namespace attnviz
