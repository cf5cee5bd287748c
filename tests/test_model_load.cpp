// Loading Hugging Face directories: good ones load with the right shapes, bad ones give an
// Error that names the file, the tensor, and the expected and found shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/model.h"
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
