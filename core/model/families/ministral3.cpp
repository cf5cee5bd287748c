// Mistral 3's text model (model_type "ministral3", or inside a "mistral3" config's
// text_config; GGUF "mistral3"): Mistral's keys and tensors, with YaRN and the query
// temperature of Llama 4 (llama_4_scaling_beta; GGUF attention.temperature_scale).
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/config.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"
#include "core/model/gguf.h"

namespace attnviz {

namespace {

// Mistral 3 (model_type "mistral3"): a vision tower beside a text model in text_config,
// "ministral3" (Ministral 3) or "mistral" (Mistral Small 3.1). Ministral 3 is Mistral with
// YaRN in rope_parameters and, parked there too, llama_4_scaling_beta: the query
// temperature 1 + beta·ln(1 + ⌊pos / original_max_position_embeddings⌋) after RoPE.
ModelConfig parse_mistral3(const nlohmann::json& j, const std::string& where) {
  const bool outer = j["model_type"] == "mistral3";
  if (outer && (!j.contains("text_config") || !j["text_config"].is_object()))
    throw Error(where +
                ": model_type \"mistral3\" without a \"text_config\" object\n  HINT: attnviz reads the text "
                "model of Mistral 3.");
  nlohmann::json text = outer ? j["text_config"] : j;
  const std::string at = outer ? where + ": text_config" : where;
  if (outer && !text.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
    text["tie_word_embeddings"] = j["tie_word_embeddings"];
  const std::string inner = text.value("model_type", std::string(outer ? "ministral3" : "ministral3"));
  if (inner != "ministral3" && inner != "mistral")
    throw Error(at + ": model_type \"" + excerpt(inner) +
                "\" inside mistral3 is not supported (\"ministral3\" or "
                "\"mistral\" expected)");
  text["model_type"] = "mistral";
  ModelConfig c = parse_config(text, at);
  if (inner == "ministral3") {
    c.model_type = "ministral3";
    const nlohmann::json* rp =
        text.contains("rope_parameters") && text["rope_parameters"].is_object() ? &text["rope_parameters"] : nullptr;
    if (rp) {
      c.attn_temp_beta = get_float(*rp, "llama_4_scaling_beta", 0.f, at + ": rope_parameters", true);
      if (c.attn_temp_beta != 0.f) {
        // The dict's original_max_position_embeddings after standardize_rope_params: YaRN's.
        c.attn_temp_length =
            c.rope_scaling.type == "yarn"
                ? c.rope_scaling.original_max_position
                : get_int(text, "original_max_position_embeddings", at,
                          get_int(*rp, "original_max_position_embeddings", at + ": rope_parameters", 0));
        if (c.attn_temp_length <= 0)
          throw Error(at +
                      ": rope_parameters.llama_4_scaling_beta needs \"original_max_position_embeddings\" (the "
                      "length the query temperature steps by)");
        if (!std::isfinite(c.attn_temp_beta))
          throw Error(at + ": rope_parameters.llama_4_scaling_beta must be a finite number");
      }
    }
  }
  if (outer) c.notes.push_back("mistral3: the text model of a multimodal checkpoint; its vision tower is not used");
  return c;
}

// config.json: Ministral 3 keeps YaRN, its base and the temperature's beta in rope_parameters.
void ministral3_config_json(const ModelConfig& c, nlohmann::json& j) {
  if (c.rope_scaling.type != "yarn") return;
  j["architectures"] = {"Ministral3ForCausalLM"};
  nlohmann::json rp = j["rope_scaling"];
  rp["rope_theta"] = c.rope_theta;
  rp["llama_4_scaling_beta"] = c.attn_temp_beta;  // its length is YaRN's original_max_position_embeddings
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = rp;
}

// GGUF: the query temperature, stepping every YaRN original context (as llama.cpp reads it).
void ministral3_gguf_traits(const GgufFile& f, ModelConfig& c) {
  const std::string a = "mistral3.", where = "GGUF file '" + f.path() + "': ";
  if (!f.find_key(a + "attention.temperature_scale")) return;
  c.attn_temp_beta = static_cast<float>(f.get_float(a + "attention.temperature_scale", 0.0));
  if (!std::isfinite(c.attn_temp_beta))
    throw Error(where + "'" + a + "attention.temperature_scale' must be a finite number");
  if (c.attn_temp_beta != 0.f) {
    if (c.rope_scaling.type != "yarn")
      throw Error(where + "'" + a + "attention.temperature_scale' needs YaRN's '" + a +
                  "rope.scaling.original_context_length' (the length the temperature steps by)");
    c.attn_temp_length = c.rope_scaling.original_max_position;
  }
}

}  // namespace

FamilyTraits ministral3_traits() {
  FamilyTraits t = family_traits(Family::Mistral);
  t.parse = parse_mistral3;
  t.to_json = ministral3_config_json;
  t.gguf_read_traits = ministral3_gguf_traits;
  return t;
}

}  // namespace attnviz
