// Model weights as plain data, loaded from a Hugging Face directory
// (config.json + model.safetensors [+ tokenizer.json]) or a GGUF file. A linear layer is
// y = x · W + b with x a row vector: W is (in, out). Held as float32, W is row-major (in,
// out) (Hugging Face nn.Linear weights (out, in) are transposed on load; GPT-2 Conv1D
// weights are already (in, out)); kept where the file stores it (a GGUF tensor of any type,
// an F16/BF16 safetensors tensor), it is the file's (out, in) rows, used in place (Weight).
// See core/model/config.h for the dimension letters.
#pragma once
#include <Eigen/Core>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/stored_rows.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::Matrix<float, 1, Eigen::Dynamic, Eigen::RowMajor>;  // row vector

// A weight matrix, held as float32 in `f32` or where its file stores it in `stored`
// (never both; empty when neither). For a linear layer f32 is W (in, out) and stored holds
// Wᵀ, out rows of in values, as the file does; for an embedding table or the unembedding
// both are (V, C). llama.cpp stores a llama model's q and k rows reordered: `row_of_col`
// maps each output column (Hugging Face's order) to its stored row (null: the same order).
struct Weight {
  Mat f32;
  StoredRows stored;
  std::shared_ptr<const std::vector<int32_t>> row_of_col;  // (out) or null

  Weight() = default;
  Weight(Mat m) : f32(std::move(m)) {}  // NOLINT: a float32 matrix is a weight
  bool is_stored() const { return !stored.empty(); }
  bool empty() const { return !f32.size() && stored.empty(); }
  int64_t numel() const { return is_stored() ? stored.rows * stored.cols : f32.size(); }
  int64_t bytes() const { return is_stored() ? stored.bytes() : f32.size() * static_cast<int64_t>(sizeof(float)); }
  const char* type_name() const { return is_stored() ? ggml_type_info(stored.type).name : "F32"; }
  // A linear weight's output columns [c0, c0 + n): phi3's fused q | k | v and gate | up.
  Weight columns(int64_t c0, int64_t n) const;
  // As float32: a linear weight (in, out), a table (V, C) (copies f32, decodes stored).
  Mat linear_f32() const;
  Mat table_f32() const;
  // Row r of a table (V, C) into dst[0, C): an embedding lookup.
  void table_row(int64_t r, float* dst) const;
};

struct LayerWeights {
  Vec norm1_w, norm1_b;  // (C); norm1_b empty for RMSNorm; norm1_w empty when the block has
                         // no norm before attention (olmo2). RMSNorm weights are as applied:
                         // Gemma's files hold w for (1 + w), and 1 + w is held here.
  Weight wq;             // (C, H*d)
  Weight wk;             // (C, KV*d)
  Weight wv;             // (C, KV*d)
  Vec bq, bk, bv;        // (H*d), (KV*d), (KV*d); empty when the model has none
  Weight wo;             // (H*d, C)
  Vec bo;                // (C) or empty
  Vec norm2_w, norm2_b;  // (C); empty when the block has no norm before its MLP (olmo2)
  Vec q_norm, k_norm;    // QK-norm weights: (d) per head, or (H*d), (KV*d) whole; empty: none
  Vec post_attn_norm;    // (C) norm of the attention output before its add (gemma, olmo2) or empty
  Vec post_mlp_norm;     // (C) norm of the MLP output before its add (gemma, olmo2) or empty
  Weight w_fc;           // (C, I)  gpt2 c_fc, llama gate_proj
  Vec b_fc;              // (I) or empty
  Weight w_up;           // (C, I)  llama up_proj; empty for gpt2
  Weight w_down;         // (I, C)  gpt2 mlp.c_proj, llama down_proj
  Vec b_down;            // (C) or empty
  Weight w_gate;         // (C, H*d) Qwen3.5's output gate (the second half of each head's q_proj rows) or empty

  // A gated-delta-rule layer (Mixer::GatedDeltaNet; LinearAttnDims: Hk, Hv, dk, dv, K taps,
  // Ch = 2·Hk·dk + Hv·dv); empty in softmax layers, whose wq … wo are empty in these.
  Weight lin_qkv;        // (C, Ch)    in_proj_qkv: q | k | v before the convolution
  Weight lin_z;          // (C, Hv*dv) in_proj_z: the gated norm's gate
  Weight lin_b;          // (C, Hv)    in_proj_b: β = σ(x·lin_b)
  Weight lin_a;          // (C, Hv)    in_proj_a: g = −exp(A_log)·softplus(x·lin_a + dt_bias)
  Vec lin_conv;          // (Ch·K)     conv1d.weight (Ch, 1, K), tap k of channel ch at ch·K + k
  Vec lin_dt_bias;       // (Hv)
  Vec lin_decay_rate;    // (Hv) −exp(A_log) < 0, as llama.cpp's ssm_a holds it
  Vec lin_norm;          // (dv) the gated RMSNorm's weight, as applied (no 1 + w)
  Weight lin_out;        // (Hv*dv, C) out_proj

  // An LFM2 short-convolution layer (Mixer::ShortConv; K taps); empty elsewhere.
  Weight sc_in;          // (C, 3C) in_proj: B | C | x
  Vec sc_in_b;           // (3C) or empty
  Vec sc_taps;           // (C·K) conv.weight (C, 1, K), tap k of channel ch at ch·K + k
  Vec sc_taps_b;         // (C) or empty
  Weight sc_out;         // (C, C) out_proj
  Vec sc_out_b;          // (C) or empty

  // GPT-OSS (ModelConfig::attn_sinks, ::experts; E experts, I their width); empty elsewhere,
  // and then w_fc, w_up, w_down are empty instead.
  Vec sinks;             // (H) each query head's sink logit
  Weight router;         // (C, E) the router (nn.Linear (E, C) transposed)
  Vec router_b;          // (E)
  // Expert e's matrices, each a Weight of its own (float32, or rows where a GGUF file stores
  // them: MXFP4 in place). Hugging Face's gate_up_proj (E, C, 2I) interleaves gate and up
  // columns; they are split here, as llama.cpp's ffn_gate_exps / ffn_up_exps hold them.
  std::vector<Weight> ex_gate;  // E × (C, I)
  std::vector<Weight> ex_up;    // E × (C, I)
  std::vector<Weight> ex_down;  // E × (I, C)
  Vec ex_gate_b, ex_up_b;       // (E·I): expert e's at [e·I, (e + 1)·I)
  Vec ex_down_b;                // (E·C)
  // Gemma 4's experts beside the dense MLP (ModelConfig::Experts::gemma); router is (C, E)
  // without a bias there, and ex_gate / ex_up / ex_down hold (C, I_e), (C, I_e), (I_e, C).
  Vec router_scale;                       // (C) multiplies the router's normed input
  Vec expert_scale;                       // (E) multiplies each chosen expert's weight
  Vec norm2_experts;                      // (C) pre_feedforward_layernorm_2: the experts' input norm
  Vec post_mlp_norm_dense, post_mlp_norm_experts;  // (C) post_feedforward_layernorm_1 / _2
  // Gemma 4 (ModelConfig::ple_dim P, ::layer_scalars); empty (1) elsewhere.
  Weight ple_gate;       // (C, P) per_layer_input_gate
  Weight ple_proj;       // (P, C) per_layer_projection
  Vec ple_post_norm;     // (C) post_per_layer_input_norm
  float layer_scalar = 1.f;  // multiplies the residual stream at the end of the layer
};

struct ModelWeights {
  Weight tok_emb;  // (V, C)
  Mat pos_emb;     // (n_ctx, C) gpt2 only
  std::vector<LayerWeights> layers;
  Vec normf_w, normf_b;  // (C)
  Weight lm_head;  // (V, C); empty when tied to tok_emb
  // Gemma 4's per-layer embeddings (ModelConfig::ple_dim P): a (V_ple, L·P) table, the
  // model's (C, L·P) projection of the scaled token embedding, and its RMSNorm weight (P).
  Weight ple_table, ple_model_proj;
  Vec ple_norm;
  const Weight& unembedding() const { return lm_head.empty() ? tok_emb : lm_head; }  // (V, C)
  bool any_stored() const;  // some matrix is used where its file stores it
  std::vector<GgmlType> stored_types() const;  // the types of those matrices, each once
  // Every stored matrix decoded to float32 (what the trainer and `--weights f32` need).
  void to_f32();
};

struct GgufTokenizerData;  // core/tokenize/gguf_tokenizer.h
class MappedFile;          // core/model/pages.h

struct Model {
  std::string name;  // what the user passed: a directory, a FILE.gguf or builtin:NAME
  std::string dir;   // the directory it was read from (for a GGUF model: the file)
  ModelConfig config;
  ModelWeights weights;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the directory has none
  // Why `tokenizer` is null although the file has one (a GGUF tokenizer of a kind attnviz
  // does not run), for the message that refuses --text; "" otherwise.
  std::string no_tokenizer_reason;
  // Problems that do not stop the model from loading, one line each (e.g. a tensor holding
  // NaN or infinite values). The CLI prints them, the GUI shows them in its status bar.
  std::vector<std::string> warnings;
  std::string format = "safetensors";          // where the weights came from: "safetensors" or "gguf"
  // Element types as stored in the file with their tensor counts, most tensors first,
  // e.g. {{"Q4_K", 192}, {"F32", 49}}. held_types() says how they are held in memory.
  std::vector<std::pair<std::string, int>> stored_types;
  // A GGUF file's tokenizer metadata as plain data (null otherwise, or when it has none);
  // `tokenizer` runs it.
  std::shared_ptr<const GgufTokenizerData> gguf_tokenizer;
  // The mapped files that stored weights lie in (empty when every weight is float32).
  std::vector<std::shared_ptr<const MappedFile>> files;
  // An Error naming the file when one of `files` has been truncated since it was opened:
  // the backends call it before each pass, so a shrunken file is an error, not a SIGBUS.
  void check_files() const;
  long long parameter_count() const;
  // Bytes the weights take: float32 arrays plus the stored matrices' bytes in the mapped file.
  long long weight_bytes() const;
  // How the weights are held, by element type with their bytes, most bytes first:
  // {{"Q4_K", 4.2e9}, {"Q6_K", 0.4e9}, {"F32", 1e6}}; "F32" counts every float32 array.
  std::vector<std::pair<std::string, long long>> held_types() const;
  std::string held_types_str() const;  // "Q4_K 4.2 GB, Q6_K 411 MB, F32 1 MB"
  // The weight arrays by the type they are held in: {{"Q4_K", 193}, {"F32", 49}}.
  std::map<std::string, int> held_tensor_counts() const;
  std::string stored_types_str() const;  // "Q4_K 192 tensors, F32 49"
  void set_stored_types(const std::map<std::string, int>& counts);  // sorted into stored_types
};

// Appends "tensor 'NAME' holds N NaN or infinite values (of M); its outputs will be NaN" to
// `warnings` when v[0, n) has any; the loaders (safetensors and GGUF) call it per tensor.
void warn_if_not_finite(const std::string& name, const float* v, int64_t n, std::vector<std::string>& warnings);

// One weight array as (pointer, bytes): float32 arrays and stored matrices alike.
struct WeightSpan {
  const void* data;
  long long bytes;
  long long numel;  // its values
};
// Every weight array of the model. With `one_token_pass`: only what a pass over one new
// token reads in full: all but the embedding rows it looks up (pos_emb, and tok_emb
// unless it is also the unembedding).
std::vector<WeightSpan> weight_spans(const ModelWeights& w, bool one_token_pass = false);


// `spec` is a model directory, a GGUF file (core/model/gguf_model.h) or builtin:NAME
// (defined in load.cpp, which includes the loaders). Throws attnviz::Error naming the file, the
// tensor, the expected and the found shape when something is wrong.
// How load_model holds the weights: where the file stores them (the default: GGUF tensors of
// every type, F16/BF16 safetensors; float32 safetensors are transposed into float32 as
// before), or every matrix converted to float32 (`--weights f32`: the comparison
// baseline, and what the trainer needs).
enum class WeightsMode { Stored, F32 };
struct LoadOptions {
  WeightsMode weights = WeightsMode::Stored;
  // Called before each tensor is read, with the bytes of the tensors started so far (this
  // one included) and of all the file's tensors: the GUI's loader shows it and stops a
  // cancelled load by throwing from it (the exception leaves load_model as it is). Empty:
  // not called.
  std::function<void(uint64_t done, uint64_t total)> progress;
};
std::shared_ptr<const Model> load_model(const std::string& spec, const LoadOptions& opt = {});
// The config load_model would read for `spec` (config.json, or a GGUF file's metadata:
// gguf_model_config), without reading a weight: what the GUI's model browser describes
// before a model is opened. Throws as load_model.
ModelConfig read_model_config(const std::string& spec);

// Where one tensor of a llama-family checkpoint goes (decoder_tensors).
enum class Slot {
  TokEmb, NormF, LmHead,                               // the model's
  Norm1, Wq, Wk, Wv, Bq, Bk, Bv, Wqkv, Wo, Bo,         // a layer's attention (Wqkv: phi3's fused q | k | v)
  QNorm, KNorm, PostAttnNorm, Norm2, Wfc, Wup, WgateUp, Wdown, PostMlpNorm,  // WgateUp: phi3's gate | up
  WqGate,                                              // Qwen3.5's q_proj: per head q (d rows) | gate (d rows)
  LinQkv, LinZ, LinB, LinA, LinConv, LinDtBias, LinALog, LinNorm, LinOut,  // a gated-delta-rule layer's
  ConvIn, ConvInBias, ConvTaps, ConvTapsBias, ConvOut, ConvOutBias,       // an LFM2 short convolution's
  Sinks, Router, RouterBias, ExpGateUp, ExpGateUpBias, ExpDown, ExpDownBias,  // GPT-OSS's sinks and experts
  ExpGate, ExpUp, ExpGateBias, ExpUpBias,  // GPT-OSS's experts as GGUF holds them (gate and up apart)
  PleTable, PleModelProj, PleNorm, PleGate, PleProj, PlePostNorm, LayerScalar,  // Gemma 4's per-layer embeddings
  RouterScale, ExpertScale, ExpGateUpHalves, ExpDownRows, Norm2Experts, PostMlpNormDense, PostMlpNormExperts,  // its experts
};
// Slots read as one flat vector whatever their rank (a convolution's taps, the experts'
// stacked matrices and biases), not as a linear layer's matrix.
bool slot_is_flat(Slot s);
// One tensor of a checkpoint: its Hugging Face name, its shape as stored (nn.Linear (out, in)),
// its layer (−1: the model's) and slot. The loader and the random-model writer both read
// this table, so the names of a family are written once.
struct DecoderTensor {
  std::string name;
  std::vector<int64_t> shape;
  int layer;
  Slot slot;
  bool optional = false;  // may be absent from a file (Gemma 4's layer_scalar: then 1)
};
bool slot_is_norm(Slot s);
// Every tensor a llama-family model `c` has, in file order. `prefix` is where the text
// model sits ("model." or, in Gemma 3's multimodal files, "language_model.model." or
// "model.language_model."); `lm_head` is the unembedding's name. A tied model lists no
// lm_head.
std::vector<DecoderTensor> decoder_tensors(const ModelConfig& c, const std::string& prefix = "model.",
                                           const std::string& lm_head = "lm_head.weight");
// LFM2's list (core/model/lfm2.cpp), which decoder_tensors returns for model_type "lfm2".
std::vector<DecoderTensor> lfm2_tensors(const ModelConfig& c, const std::string& prefix, const std::string& lm_head);
// Gemma 4's list (core/model/gemma4.cpp), which decoder_tensors returns for model_type "gemma4_text".
std::vector<DecoderTensor> gemma4_tensors(const ModelConfig& c, const std::string& prefix);

// Puts a decoder tensor, once read, where `t.slot` says: a vector (norm weights already as
// applied, biases) or a matrix in attnviz's layout (embeddings (V, C) as stored; linears
// (in, out)). Phi-3's fused qkv (C, Hd + 2·KVd) and gate_up (C, 2·I) are split here. Both
// loaders (safetensors, GGUF) read every tensor through this.
void place_decoder_tensor(const ModelConfig& c, const DecoderTensor& t, Weight m, Vec v, ModelWeights& w);

// llama.cpp's GGUF name of a decoder tensor (decoder_tensors() gives the Hugging Face one):
// "blk.3.attn_q_norm.weight". The GGUF loader and writer both read it.
std::string gguf_tensor_name(Slot s, int layer);
// The GGUF name of a tensor of this config: the family's own names for Qwen3.5 and LFM2
// (qwen35.cpp, lfm2.cpp; "" where they use the common one), gguf_tensor_name(s, layer) otherwise.
std::string gguf_tensor_name(const ModelConfig& c, Slot s, int layer);
std::string qwen35_gguf_name(Slot s, int layer);
std::string lfm2_gguf_name(Slot s, int layer);
std::string gpt_oss_gguf_name(Slot s, int layer);
std::string gemma4_gguf_name(Slot s, int layer);
// The tensors of a GGUF file of `c`, their names llama.cpp's and their shapes the file's:
// decoder_tensors(c) but for GPT-OSS, whose experts GGUF holds as gate, up and down
// matrices stacked (E, out, in) with (E, out) biases (gpt_oss_gguf_tensors, gpt_oss.cpp).
std::vector<DecoderTensor> gguf_decoder_tensors(const ModelConfig& c);
std::vector<DecoderTensor> gpt_oss_gguf_tensors(const ModelConfig& c);

// GPT-2's blocks and final norm, read through a loader's readers in the names of its format:
// vec(name, n) gives a Vec (n), mat(name, in, out) a Weight (in, out) (safetensors:
// "h.{i}.attn.c_attn.weight", "ln_f.weight"; GGUF: "blk.{i}.attn_qkv.weight",
// "output_norm.weight"). The packed attention input qkv (C, 3C) = q | k | v side by side and
// its bias (3C) are split into wq, wk, wv (C, C) and bq, bk, bv (C). Fills w.layers,
// w.normf_w and w.normf_b; the embeddings and the unembedding are the loader's.
enum class Gpt2Format { HuggingFace, Gguf };
void read_gpt2_body(const ModelConfig& c, Gpt2Format format, const std::function<Vec(const std::string&, int)>& vec,
                    const std::function<Weight(const std::string&, int, int)>& mat, ModelWeights& w);

}  // namespace attnviz
