// Random models written as Hugging Face directories, for tests, benchmarks and for trying
// attnviz before any trained model is at hand. The tensors are written in HF's own layout
// (Conv1D for gpt2, nn.Linear for llama), so loading them exercises the real loader.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"

namespace attnviz {

// Named shapes: "tiny" (llama GQA: 4 layers, 64 wide, 8 heads, 2 KV heads),
// "tiny-gpt2" (4 layers, 64 wide, 4 heads), "gpt2-small" (12 layers, 768 wide, 12 heads,
// 50257 vocab, 1024 context), "llama-small" (12 layers, 768 wide, 12 heads, 4 KV heads),
// and real checkpoints' shapes: "smollm2-135m", "qwen2.5-0.5b", "tinyllama-1.1b".
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// Writes DIR/config.json, DIR/model.safetensors (F32) and DIR/tokenizer.json (a character
// tokenizer over printable ASCII and newline, padded with "<id>" pieces up to vocab_size).
// Creates DIR if needed. With `tokenizer_file` (a tokenizer.json or SentencePiece model),
// that file is copied in instead, after checking that its ids fit vocab_size (an Error
// before anything is written when they do not).
void write_random_model(const ModelConfig& c, uint64_t seed, const std::string& dir,
                        const std::string& tokenizer_file = "");

}  // namespace attnviz
