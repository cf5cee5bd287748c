#include "core/model/families/family.h"

#include <iterator>

namespace attnviz {

namespace {

// The registry: one line per family, in the enumeration's order.
constexpr FamilyInfo kFamilies[] = {
    {Family::Gpt2, "gpt2", {}, "gpt2", nullptr},
    {Family::Llama, "llama", {}, "llama", nullptr},
    // llama.cpp's converter writes Mistral as "llama"; other tools write "mistral".
    {Family::Mistral, "mistral", {}, "llama", "mistral"},
    {Family::Qwen2, "qwen2", {}, "qwen2", nullptr},
    {Family::Qwen3, "qwen3", {}, "qwen3", nullptr},
    {Family::Gemma2, "gemma2", {}, "gemma2", nullptr},
    {Family::Gemma3, "gemma3_text", {"gemma3"}, "gemma3", nullptr},
    {Family::Phi3, "phi3", {}, "phi3", nullptr},
    {Family::SmolLM3, "smollm3", {}, "smollm3", nullptr},
    {Family::Olmo2, "olmo2", {}, "olmo2", nullptr},
    {Family::Granite, "granite", {}, "granite", nullptr},
    {Family::Qwen35, "qwen3_5_text", {"qwen3_5"}, "qwen35", nullptr},
    {Family::Lfm2, "lfm2", {}, "lfm2", nullptr},
    {Family::Qwen3Vl, "qwen3_vl_text", {"qwen3_vl"}, "qwen3vl", nullptr},
    {Family::Ministral3, "ministral3", {"mistral3"}, "mistral3", nullptr},
    {Family::GptOss, "gpt_oss", {}, "gpt-oss", nullptr},
    {Family::Gemma4, "gemma4_text", {"gemma4", "gemma4_unified", "gemma4_unified_text"}, "gemma4", nullptr},
};

// Every enumerator has its line, at its own index (the last enumerator bounds the count).
constexpr bool registry_in_order() {
  for (size_t i = 0; i < std::size(kFamilies); ++i)
    if (static_cast<size_t>(kFamilies[i].family) != i) return false;
  return std::size(kFamilies) == static_cast<size_t>(Family::Gemma4) + 1;
}
static_assert(registry_in_order(), "kFamilies must list every Family once, in the enumeration's order");

bool same(const char* a, const std::string& b) { return a && b == a; }

}  // namespace

const FamilyInfo& family_info(Family f) { return kFamilies[static_cast<size_t>(f)]; }

const FamilyInfo* family_of_model_type(const std::string& model_type) {
  for (const FamilyInfo& f : kFamilies) {
    if (same(f.model_type, model_type)) return &f;
    for (const char* w : f.wrappers)
      if (same(w, model_type)) return &f;
  }
  return nullptr;
}

const FamilyInfo* family_of_gguf_arch(const std::string& arch) {
  for (const FamilyInfo& f : kFamilies)
    if (f.family != Family::Mistral && (same(f.gguf_arch, arch))) return &f;  // "llama" is Llama's to read
  for (const FamilyInfo& f : kFamilies)
    if (same(f.gguf_alias, arch)) return &f;
  return nullptr;
}

std::string known_model_types() {
  std::string s, wrapped;
  for (const FamilyInfo& f : kFamilies) {
    s += std::string(s.empty() ? "" : ", ") + "\"" + f.model_type + "\"";
    for (const char* w : f.wrappers)
      if (w && std::string(w).find("_text") == std::string::npos) wrapped += std::string(", \"") + w + "\"";
  }
  return s + wrapped + " (these with a text_config)";
}

std::string known_gguf_archs() {
  std::string s;
  for (const FamilyInfo& f : kFamilies) {
    if (f.family != Family::Mistral) s += std::string(s.empty() ? "" : ", ") + f.gguf_arch;
    if (f.gguf_alias) s += std::string(s.empty() ? "" : ", ") + f.gguf_alias;
  }
  return s;
}

}  // namespace attnviz
