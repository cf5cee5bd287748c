// gguf_make_model SHAPE TYPE DIR [--no-hf] [--vocab N]
// Writes a random model of SHAPE as DIR/model.gguf (2-D weights stored as TYPE) and, unless
// --no-hf, the same model as a float32 Hugging Face directory DIR/hf (for comparing load
// time and memory). SHAPE: qwen2.5-0.5b (24 layers, 896 wide, 14 heads, 2 KV heads,
// 4864 MLP, 151936 vocab), or a preset of `attnviz-cli random`. --vocab N changes the
// vocabulary size; with 261 or more ids the file carries the test writer's small byte-level
// tokenizer (small_byte_level_tokenizer), so text can be typed into it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/model/random_model.h"
#include "tests/gguf_writer.h"

using namespace attnviz;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gguf_make_model SHAPE TYPE DIR [--no-hf] [--vocab N]\n");
    return 2;
  }
  try {
    const std::string shape = argv[1], type_name = argv[2], dir = argv[3];
    bool hf = true;
    int vocab = 0;
    for (int i = 4; i < argc; ++i) {
      if (std::strcmp(argv[i], "--no-hf") == 0) hf = false;
      else if (std::strcmp(argv[i], "--vocab") == 0 && i + 1 < argc) vocab = std::atoi(argv[++i]);
      else {
        std::fprintf(stderr, "unknown argument %s\n", argv[i]);
        return 2;
      }
    }
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
    if (vocab > 0) c.vocab_size = vocab;
    const GgmlTypeInfo* type = nullptr;
    for (uint32_t id = 0; id < 64 && !type; ++id)
      if (const GgmlTypeInfo* t = ggml_type_info(id); t && t->supported() && type_name == t->name) type = t;
    if (!type) {
      std::fprintf(stderr, "unknown type %s (one of %s)\n", type_name.c_str(), supported_ggml_types().c_str());
      return 2;
    }
    const std::string path = test::write_gguf_model_pair(c, static_cast<GgmlType>(type->id), 1, dir, hf, c.vocab_size >= 261);
    std::printf("%s\n", path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
