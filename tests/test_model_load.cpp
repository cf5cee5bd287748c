// Loading Hugging Face directories: good ones load with the right shapes, bad ones give an
// Error that names the file, the tensor, and the expected and found shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/families/family.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/random_model.h"
#include "core/model/safetensors.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

// Rewrites DIR/model.safetensors, letting `edit` drop (return false) or reshape tensors.
void rewrite_tensors(const std::string& dir,
                     const std::function<bool(const std::string&, std::vector<int64_t>&, std::vector<float>&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  SafetensorsWriter w;
  {
    const auto f = SafetensorsFile::open(path);
    for (const auto& t : f.tensors()) {
      auto shape = t.shape;
      auto values = f.read_f32(t);
      if (edit(t.name, shape, values)) w.add_f32(t.name, shape, values.data());
    }
  }
  w.write(path);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  edit(j);
  test::write_bytes(dir + "/config.json", j.dump());
}

using test::load_error;

TEST(ModelLoad, LlamaGqaLoadsWithTransposedShapes) {
  const auto c = test::small_config("llama", 2, 32, 4, 2, 50, 16);
  const auto m = load_model(test::make_model_dir(c, 1, "llama"));
  EXPECT_EQ(m->config.n_kv_head, 2);
  EXPECT_EQ(m->config.group_size(), 2);
  EXPECT_EQ(m->config.kv_head_of(3), 1);
  ASSERT_EQ(m->weights.layers.size(), 2u);
  EXPECT_EQ(m->weights.layers[0].wq.f32.rows(), 32);  // (C, H·d)
  EXPECT_EQ(m->weights.layers[0].wq.f32.cols(), 32);
  EXPECT_EQ(m->weights.layers[0].wk.f32.cols(), 16);  // (C, KV·d)
  EXPECT_EQ(m->weights.layers[0].w_down.f32.rows(), c.n_inner);
  ASSERT_TRUE(m->tokenizer);
  EXPECT_EQ(m->tokenizer->encode("AB").size(), 2u);
}

TEST(ModelLoad, Gpt2SplitsPackedQkvInConv1DLayout) {
  const auto c = test::small_config("gpt2", 1, 12, 3, 3, 20, 8);
  const std::string dir = test::make_model_dir(c, 2, "gpt2");
  std::vector<float> packed;
  rewrite_tensors(dir, [&](const std::string& n, std::vector<int64_t>&, std::vector<float>& v) {
    if (n == "h.0.attn.c_attn.weight") packed = v;
    return true;
  });
  const auto m = load_model(dir);
  const auto& l = m->weights.layers[0];
  // c_attn.weight is (C, 3C) = [q | k | v] along the output axis
  EXPECT_EQ(l.wq.f32(5, 7), packed[5 * 36 + 7]);
  EXPECT_EQ(l.wk.f32(5, 7), packed[5 * 36 + 12 + 7]);
  EXPECT_EQ(l.wv.f32(5, 7), packed[5 * 36 + 24 + 7]);
}

TEST(ModelLoad, Gpt2AcceptsTransformerPrefix) {
  const auto c = test::small_config("gpt2", 1, 12, 3, 3, 20, 8);
  const std::string dir = test::make_model_dir(c, 3, "prefix");
  SafetensorsWriter w;
  {
    const auto f = SafetensorsFile::open(dir + "/model.safetensors");
    for (const auto& t : f.tensors()) w.add_f32("transformer." + t.name, t.shape, f.read_f32(t).data());
  }
  w.write(dir + "/model.safetensors");
  EXPECT_EQ(load_model(dir)->config.n_layer, 1);
}

TEST(ModelLoad, MissingDirectory) {
  const std::string m = load_error("/nonexistent/model");
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
}

TEST(ModelLoad, MissingConfig) {
  const std::string dir = test::temp_dir("noconfig");
  EXPECT_NE(load_error(dir).find("config.json' not found"), std::string::npos);
}

TEST(ModelLoad, UnknownModelType) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 10, 8), 4, "type");
  edit_config(dir, [](nlohmann::json& j) { j["model_type"] = "mamba"; });
  const std::string m = load_error(dir);
  EXPECT_NE(m.find("unknown model_type \"mamba\""), std::string::npos) << m;
}

// The registry of families: each family's model_type, the model_types that wrap it and its
// GGUF architecture lead back to it, and nothing else does.
TEST(Families, EveryModelTypeAndGgufArchitectureLeadsBackToItsFamily) {
  for (int i = 0; i <= static_cast<int>(Family::Gemma4); ++i) {
    const Family f = static_cast<Family>(i);
    const FamilyInfo& info = family_info(f);
    EXPECT_EQ(info.family, f) << i;
    const FamilyInfo* by_type = family_of_model_type(info.model_type);
    ASSERT_NE(by_type, nullptr) << info.model_type;
    EXPECT_EQ(by_type->family, f) << info.model_type;
    for (const char* w : info.wrappers)
      if (w) EXPECT_EQ(family_of_model_type(w), &info) << w;
    // Mistral is written as llama (as llama.cpp's converter writes it) and read from its alias.
    const FamilyInfo* by_arch = family_of_gguf_arch(info.gguf_alias ? info.gguf_alias : info.gguf_arch);
    ASSERT_NE(by_arch, nullptr) << info.gguf_arch;
    EXPECT_EQ(by_arch->family, f) << info.gguf_arch;
  }
  EXPECT_EQ(family_of_gguf_arch("llama")->family, Family::Llama);
  // The GGUF architectures as llama.cpp names them (its llm_arch names), for the model_types
  // whose names differ; the others are spelled alike.
  const std::pair<const char*, const char*> kLlamaCppNames[] = {{"gemma3_text", "gemma3"},
                                                                {"qwen3_5_text", "qwen35"},
                                                                {"qwen3_vl_text", "qwen3vl"},
                                                                {"ministral3", "mistral3"},
                                                                {"gpt_oss", "gpt-oss"},
                                                                {"gemma4_text", "gemma4"},
                                                                {"mistral", "llama"},
                                                                {"qwen2", "qwen2"},
                                                                {"olmo2", "olmo2"},
                                                                {"lfm2", "lfm2"},
                                                                {"gpt2", "gpt2"}};
  for (const auto& [type, arch] : kLlamaCppNames) {
    ModelConfig c;
    c.model_type = type;
    EXPECT_EQ(gguf_arch_of(c), arch) << type;
  }
  EXPECT_EQ(family_of_model_type("mamba"), nullptr);
  EXPECT_EQ(family_of_gguf_arch("gpt_oss"), nullptr);  // GGUF spells it gpt-oss
  EXPECT_EQ(family_of_gguf_arch("gemma3_text"), nullptr);
}

// Every preset's configuration, written as config.json and read back, is the same family
// with the same GGUF architecture and parameter count.
TEST(Families, EveryPresetKeepsItsFamilyThroughConfigJson) {
  for (const std::string& p : preset_names()) {
    const ModelConfig c = preset_config(p);
    const ModelConfig back = parse_config(config_to_json(c), "preset " + p);
    EXPECT_EQ(family_of(back), family_of(c)) << p;
    EXPECT_EQ(back.model_type, c.model_type) << p;
    EXPECT_EQ(gguf_arch_of(back), gguf_arch_of(c)) << p;
    EXPECT_EQ(parameter_counts(back).total(), parameter_counts(c).total()) << p;
  }
}

TEST(ModelLoad, MissingTensorIsNamed) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 2, 16, 2, 1, 10, 8), 5, "missing");
  rewrite_tensors(dir, [](const std::string& n, auto&, auto&) { return n != "model.layers.1.self_attn.k_proj.weight"; });
  const std::string m = load_error(dir);
  EXPECT_NE(m.find("missing tensor 'model.layers.1.self_attn.k_proj.weight'"), std::string::npos) << m;
  EXPECT_NE(m.find("(8, 16)"), std::string::npos) << "expected shape should be named: " << m;
}

TEST(ModelLoad, WrongShapeNamesTensorExpectedAndFound) {
  const std::string dir = test::make_model_dir(test::small_config("gpt2", 1, 16, 2, 2, 10, 8), 6, "shape");
  rewrite_tensors(dir, [](const std::string& n, std::vector<int64_t>& shape, std::vector<float>& v) {
    if (n == "h.0.mlp.c_fc.weight") {
      shape = {16, 60};
      v.resize(16 * 60);
    }
    return true;
  });
  const std::string m = load_error(dir);
  EXPECT_NE(m.find("tensor 'h.0.mlp.c_fc.weight' has shape (16, 60), expected (16, 64)"), std::string::npos) << m;
}

TEST(ModelLoad, UnsupportedDtypeIsRejected) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 2, 1, 10, 8), 7, "dtype");
  SafetensorsWriter w;
  {
    const auto f = SafetensorsFile::open(dir + "/model.safetensors");
    for (const auto& t : f.tensors()) {
      if (t.name == "model.norm.weight") {
        std::vector<int32_t> ints(16, 1);
        w.add_i32(t.name, t.shape, ints.data());
      } else {
        w.add_f32(t.name, t.shape, f.read_f32(t).data());
      }
    }
  }
  w.write(dir + "/model.safetensors");
  const std::string m = load_error(dir);
  EXPECT_NE(m.find("'model.norm.weight'"), std::string::npos) << m;
  EXPECT_NE(m.find("dtype I32"), std::string::npos) << m;
}

TEST(ModelLoad, InconsistentConfigIsRejected) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 1, 16, 4, 2, 10, 8), 8, "cfg");
  edit_config(dir, [](nlohmann::json& j) { j["num_key_value_heads"] = 3; });
  EXPECT_NE(load_error(dir).find("not a multiple of num_key_value_heads 3"), std::string::npos);
  edit_config(dir, [](nlohmann::json& j) { j.erase("hidden_size"); });
  EXPECT_NE(load_error(dir).find("missing key \"hidden_size\""), std::string::npos);
}

TEST(ModelLoad, UnknownBuiltinListsWhereItLooked) {
  const std::string m = load_error("builtin:no-such-model");
  EXPECT_NE(m.find("unknown built-in model 'builtin:no-such-model'"), std::string::npos) << m;
}

}  // namespace
}  // namespace attnviz
