// The model families attnviz reads, as one enumeration, and the registry that maps a
// config.json model_type or a GGUF general.architecture to one of them.
//
// Where a family differs from the others, the shared code (config.cpp, model.cpp,
// gguf_model.cpp, gguf_writer.cpp, random_model.cpp) reads its FamilyTraits: data, filled by
// one switch with a case for every family and no `default:` (families/traits.cpp), so that
// -Wswitch names a family left out; the shared code compares no model_type strings. What is
// a family's own code (its config keys, its Hugging Face and GGUF tensor names, its GGUF
// metadata read and written) lives in its file under core/model/families/, reached through
// the hooks of its traits.
//
// Adding a family: one enumerator below, its line in kFamilies (family.cpp), its case in
// family_traits (traits.cpp), and, where it has code of its own, its file in
// core/model/families/ (listed in core/CMakeLists.txt) that fills its FamilyTraits.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnviz {

// Declared here, defined where they live (this header includes no other module, so that
// every module of core/model/ can include it).
struct ModelConfig;    // core/model/config.h
enum class QkNorm;     // core/model/config.h
enum class NormPlace;  // core/model/config.h
class GgufFile;        // core/model/gguf.h
struct DecoderTensor;  // core/model/model.h
enum class Slot;       // core/model/model.h
class GgufWriter;      // core/model/gguf_writer.h

enum class Family {
  Gpt2,        // gpt2: learned positions, LayerNorm, GELU, Conv1D weights
  Llama,       // llama (and SmolLM/Mistral-style checkpoints that say llama)
  Mistral,     // mistral: llama with sliding_window on every layer
  Qwen2,       // qwen2: q/k/v biases, windows from max_window_layers
  Qwen3,       // qwen3: QK-norm per head
  Gemma2,      // gemma2: sandwich norms, GeGLU, soft-caps, local/global alternating
  Gemma3,      // gemma3_text: Gemma 2's block with QK-norm, 5 local : 1 global
  Phi3,        // phi3: fused qkv and gate_up, partial RoPE, longrope
  SmolLM3,     // smollm3: layers without RoPE
  Olmo2,       // olmo2: norms after each part, QK-norm over the whole projection
  Granite,     // granite: embedding, residual, attention and logit multipliers
  Qwen35,      // qwen3_5_text: gated-delta-rule layers between gated attention (families/qwen35.cpp)
  Lfm2,        // lfm2: short convolutions between attention layers (families/lfm2.cpp)
  Qwen3Vl,     // qwen3_vl_text: Qwen3 with multi-axis RoPE (plain RoPE for text)
  Ministral3,  // ministral3: Mistral with YaRN and a query temperature
  GptOss,      // gpt_oss: sinks and experts (families/gpt_oss.cpp)
  Gemma4,      // gemma4_text: per-layer sizes, KV sharing, per-layer embeddings (families/gemma4.cpp)
};

// One line of the registry.
struct FamilyInfo {
  Family family;
  const char* model_type;   // config.json's model_type, as ModelConfig::model_type holds it
  const char* wrappers[3];  // other model_types whose config holds this family's (a text_config), or nullptr
  const char* gguf_arch;    // general.architecture as llama.cpp writes it (and attnviz writes it)
  const char* gguf_alias;   // another general.architecture read as this family (written by other tools), or nullptr
};

// Which layers of a llama-style family are local when its config.json has no layer_types:
// none; every other one from layer 0 (Gemma 2); all but every sliding_window_pattern-th
// (Gemma 3, 6 by default); all when sliding_window is set (Mistral, Phi-3); those from
// max_window_layers on when use_sliding_window (Qwen2/3), or all of them (SmolLM3).
enum class LocalRule { None, EveryOther, Pattern, All, FromMaxWindowLayers, AllWhenEnabled };

// What the shared readers and writers of config.json and GGUF do differently for a family,
// as data (defaults: llama's). family_traits() fills it with one switch over every family.
struct FamilyTraits {
  bool gpt2 = false;              // gpt2's shape (Arch::Gpt2) rather than llama's
  bool gemma = false;             // Gemma 2/3: sandwich norms, GeGLU, norms as 1 + w, embeddings × √C, soft-caps
  float default_eps = 1e-6f;      // rms_norm_eps when absent
  float default_theta = 10000.f;  // rope_theta when absent
  bool qkv_bias = false;          // q/k/v biases whatever the config says (Qwen2)
  QkNorm qk_norm{};               // None unless set
  NormPlace norm_place{};         // Pre unless set; Post: OLMo 2's (Gemma's sandwich comes with `gemma`)
  bool partial_rope = false;      // Phi-3: partial_rotary_factor, fused qkv and gate_up
  bool multipliers = false;       // Granite: embedding, residual, attention and logit multipliers
  bool per_type_rope = false;     // Gemma 3: local layers turn with their own base, unscaled
  LocalRule local = LocalRule::None;
  bool no_rope_layers = false;       // SmolLM3: no_rope_layers / every 4th layer without RoPE
  bool json_attention_bias = false;  // config_to_json writes attention_bias
  bool json_layer_types = false;     // config_to_json writes layer_types for local layers
  bool json_windows = true;          // config_to_json writes sliding_window (false: the family's to_json says all)
  bool gguf_rope_sections = false;   // GGUF: rope.dimension_sections of multi-axis RoPE are written (Qwen3-VL)
  bool gguf_permuted_qk = false;     // llama.cpp's converter reorders q/k rows (rotary pairs made adjacent)
  int gguf_local_period = 0;         // GGUF: local unless (l + 1) % period == 0 (0: every layer), without a pattern key
  int gguf_wide_scale_layers = 0;    // GGUF: the layer count of the 27B Gemma whose scale is (C/H)^−½
  bool gguf_attn_softcap = false;    // GGUF: attn_logit_softcapping is read (Gemma 2)
  bool gguf_yarn_truncate = false;   // llama.cpp rounds YaRN's range outward, whatever the config says (GPT-OSS)

  // What is the family's own, in its file under core/model/families/ (nullptr: none, the
  // shared code's). config.json, the whole file (wrappers included) read into a configuration.
  ModelConfig (*parse)(const nlohmann::json& j, const std::string& where) = nullptr;
  // config.json's keys of the family written into j (after the shared ones).
  void (*to_json)(const ModelConfig& c, nlohmann::json& j) = nullptr;
  // The Hugging Face tensors (in place of decoder_tensors' shared list).
  std::vector<DecoderTensor> (*hf_tensors)(const ModelConfig& c, const std::string& prefix,
                                           const std::string& lm_head) = nullptr;
  // The GGUF tensors, where they differ from the Hugging Face list.
  std::vector<DecoderTensor> (*gguf_tensors)(const ModelConfig& c) = nullptr;
  // A slot's GGUF name where the family names it ("" for a shared slot's shared name).
  std::string (*gguf_name)(Slot slot, int layer) = nullptr;
  // The GGUF metadata read into a configuration (in place of the shared llama-style reader),
  // or read on top of the shared reader's configuration.
  ModelConfig (*gguf_read)(const GgufFile& f) = nullptr;
  void (*gguf_read_traits)(const GgufFile& f, ModelConfig& c) = nullptr;
  // GGUF metadata written from attention.head_count_kv on (under the prefix a, "lfm2."), in
  // place of the shared head_count_kv; true when it wrote all the metadata there is.
  bool (*gguf_write)(const ModelConfig& c, const std::string& a, GgufWriter& g) = nullptr;
  // GGUF metadata written after the shared RoPE keys (GPT-OSS's experts).
  void (*gguf_write_tail)(const ModelConfig& c, const std::string& a, GgufWriter& g) = nullptr;
};

// A family's traits: one switch, a case for each family (families/traits.cpp). The families with
// code of their own give theirs from their files:
FamilyTraits family_traits(Family f);
FamilyTraits qwen35_traits();      // families/qwen35.cpp
FamilyTraits qwen3_vl_traits();    // families/qwen3_vl.cpp
FamilyTraits ministral3_traits();  // families/ministral3.cpp
FamilyTraits lfm2_traits();        // families/lfm2.cpp
FamilyTraits gpt_oss_traits();     // families/gpt_oss.cpp
FamilyTraits gemma4_traits();      // families/gemma4.cpp

// The registry line of a family.
const FamilyInfo& family_info(Family f);
// The family whose model_type or one of whose wrappers is `model_type`; nullptr for none.
const FamilyInfo* family_of_model_type(const std::string& model_type);
// The family stored as `arch` (general.architecture, or its alias); nullptr for none.
const FamilyInfo* family_of_gguf_arch(const std::string& arch);
// The family of a configuration: its model_type's; for a configuration made by hand whose
// model_type names no family, gpt2 or llama by its Arch (the two shapes every family builds
// on). families/traits.cpp.
Family family_of(const ModelConfig& c);

// "\"gpt2\", \"llama\", …": the model_types attnviz reads, for hints.
std::string known_model_types();
// "llama, mistral, …": the GGUF architectures attnviz reads, for hints.
std::string known_gguf_archs();

}  // namespace attnviz
