// A Model from a GGUF file: architecture and hyper-parameters from llama.cpp's metadata
// keys, weights from llama.cpp's tensor names, converted to attnviz's layout.
//
// Architectures (general.architecture):
//   llama  {arch}.block_count, .embedding_length, .feed_forward_length, .attention.head_count,
//          .attention.head_count_kv, .attention.key_length (head size, default C/H),
//          .rope.freq_base, .attention.layer_norm_rms_epsilon, .context_length.
//          Tensors token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
//          ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm, output (absent: tied).
//          llama.cpp's converter reorders the rows of attn_q / attn_k inside every head from
//          rotate-half order (HF) to interleaved pairs; they are put back here, so the
//          recorded Q and K equal those of the Hugging Face checkpoint.
//   qwen2  as llama, plus attn_q/k/v biases; rows are not reordered (rotate-half as in HF).
//   gpt2   position_embd, attn_qkv (q | k | v rows), LayerNorm weights and biases,
//          biases everywhere, {arch}.attention.layer_norm_epsilon.
// A GGUF linear weight has ne = [in, out] (rows of `in` values, like HF's nn.Linear
// (out, in)). By default every matrix is used where it lies (Weight::stored, of any
// supported type; reordered q/k rows are mapped back by Weight::row_of_col, not moved);
// with WeightsMode::F32 it is converted and transposed to attnviz's float32 (in, out).
#pragma once
#include <string>

#include "core/model/model.h"

namespace attnviz {

class GgufFile;

// Fills m.config, m.weights, m.format, m.stored_types, m.files and m.gguf_tokenizer from
// `f`. Throws attnviz::Error naming the key or tensor when something is missing or wrong,
// or the estimate when the weights would not fit in memory.
void load_gguf_model(const GgufFile& f, Model& m, const LoadOptions& opt = {});

// The hyper-parameters load_gguf_model reads from `f` (opened in full: its arrays and
// tensor infos are needed). Of the tensors' data it reads only the small RoPE factor
// tensors (rope_freqs, rope_factors_*), no weight. Throws as load_gguf_model.
ModelConfig gguf_model_config(const GgufFile& f);

// Whether load_gguf_model reads GGUF files of general.architecture `arch`, and the list of
// those it reads ("llama, mistral, ..."), for messages.
bool gguf_arch_supported(const std::string& arch);
std::string gguf_supported_archs();

}  // namespace attnviz
