// gguf_make_model SHAPE TYPE DIR [--no-hf]
// Writes a random model of SHAPE as DIR/model.gguf (2-D weights stored as TYPE) and, unless
// --no-hf, the same model as a float32 Hugging Face directory DIR/hf (for comparing load
// time and memory). SHAPE: qwen2.5-0.5b (24 layers, 896 wide, 14 heads, 2 KV heads,
// 4864 MLP, 151936 vocab), or a preset of `attnviz-cli random`.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "core/model/random_model.h"
#include "tests/gguf_writer.h"

using namespace attnviz;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gguf_make_model SHAPE TYPE DIR [--no-hf]\n");
    return 2;
  }
  try {
    const std::string shape = argv[1], type_name = argv[2], dir = argv[3];
    const bool hf = !(argc > 4 && std::strcmp(argv[4], "--no-hf") == 0);
    ModelConfig c;
    if (shape == "qwen2.5-0.5b") {
      c.model_type = "qwen2";
      c.arch = Arch::Llama;
      c.n_layer = 24, c.n_embd = 896, c.n_head = 14, c.n_kv_head = 2, c.head_size = 64, c.n_inner = 4864;
      c.vocab_size = 151936, c.n_ctx = 32768, c.norm_eps = 1e-6f, c.rope_theta = 1000000.f;
      c.tie_embeddings = true, c.qkv_bias = true;
    } else {
      c = preset_config(shape);
    }
    const GgmlTypeInfo* type = nullptr;
    for (uint32_t id = 0; id < 64 && !type; ++id)
      if (const GgmlTypeInfo* t = ggml_type_info(id); t && t->supported() && type_name == t->name) type = t;
    if (!type) {
      std::fprintf(stderr, "unknown type %s (one of %s)\n", type_name.c_str(), supported_ggml_types().c_str());
      return 2;
    }
    const std::string path = test::write_gguf_model_pair(c, static_cast<GgmlType>(type->id), 1, dir, hf, false);
    std::printf("%s\n", path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
