// The traits of every family: one switch with a case for each (-Wswitch names a missing
// one). A module of its own, which no other includes: it reads config.h's enumerations,
// and config.cpp reads family.h.
#include "core/model/config.h"
#include "core/model/config_read.h"
#include "core/model/families/family.h"

namespace attnviz {

FamilyTraits family_traits(Family f) {
  FamilyTraits t;
  switch (f) {
    case Family::Gpt2:
      t.gpt2 = true;
      t.parse = parse_gpt2;
      return t;
    case Family::Llama: t.json_attention_bias = t.gguf_permuted_qk = true; return t;
    case Family::Mistral:
      t.local = LocalRule::All;
      t.gguf_permuted_qk = true;
      return t;
    case Family::Qwen2:
      t.qkv_bias = t.json_layer_types = true;
      t.local = LocalRule::FromMaxWindowLayers;
      return t;
    case Family::Qwen3:
      t.qk_norm = QkNorm::PerHead;
      t.local = LocalRule::FromMaxWindowLayers;
      t.json_attention_bias = t.json_layer_types = true;
      return t;
    case Family::Gemma2:
      t.gemma = t.json_attention_bias = t.json_layer_types = true;
      t.local = LocalRule::EveryOther;
      t.gguf_local_period = 2;
      t.gguf_wide_scale_layers = 46;
      t.gguf_attn_softcap = true;
      return t;
    case Family::Gemma3:
      t.gemma = t.json_attention_bias = t.json_layer_types = true;
      t.default_theta = 1e6f;
      t.qk_norm = QkNorm::PerHead;
      t.per_type_rope = true;
      t.local = LocalRule::Pattern;
      t.gguf_local_period = 6;
      t.gguf_wide_scale_layers = 62;
      return t;
    case Family::Phi3:
      t.partial_rope = t.json_attention_bias = true;
      t.local = LocalRule::All;
      return t;
    case Family::SmolLM3:
      t.no_rope_layers = t.json_attention_bias = t.json_layer_types = t.gguf_permuted_qk = true;
      t.local = LocalRule::AllWhenEnabled;
      return t;
    case Family::Olmo2:
      t.default_eps = 1e-5f;
      t.qk_norm = QkNorm::Whole;
      t.norm_place = NormPlace::Post;
      t.json_attention_bias = true;
      return t;
    case Family::Granite: t.multipliers = t.json_attention_bias = t.gguf_permuted_qk = true; return t;
    case Family::Qwen35: return qwen35_traits();
    case Family::Qwen3Vl: return qwen3_vl_traits();
    case Family::Ministral3: return ministral3_traits();
    case Family::Lfm2: return lfm2_traits();
    case Family::GptOss: return gpt_oss_traits();
    case Family::Gemma4: return gemma4_traits();
  }
  return t;
}

Family family_of(const ModelConfig& c) {
  if (const FamilyInfo* f = family_of_model_type(c.model_type)) return f->family;
  return c.arch == Arch::Gpt2 ? Family::Gpt2 : Family::Llama;
}

}  // namespace attnviz
