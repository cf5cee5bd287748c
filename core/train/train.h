// The trainer: a character-level corpus, AdamW with warm-up + cosine schedule and global
// gradient clipping, periodic validation, and checkpoints that are Hugging Face model
// directories (loadable by load_model) plus the optimizer state for --resume.
// The maths (forward/backward of every op) lives in core/train/backward.h.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/train/backward.h"
#include "core/model/config.h"

namespace attnviz {

struct TrainOptions {
  // architecture (ignored on resume: the checkpoint's config is used)
  std::string arch = "gpt2";  // "gpt2" or "llama"
  int layers = 2, embd = 64, heads = 4, kv_heads = 0;  // kv_heads 0 = heads
  int inner = 0;         // MLP hidden size; 0 = 4·embd (gpt2) or 8/3·embd rounded up to 8 (llama)
  int block_size = 64;   // T of every training sequence = the model's context
  bool tie = true;       // llama: tie lm_head to the embeddings (gpt2 always ties)
  float rope_theta = 10000.f;
  // optimisation
  int batch = 8;         // sequences per step (B)
  int steps = 1000;
  float lr = 1e-3f, min_lr_frac = 0.1f;  // cosine from lr down to lr·min_lr_frac
  int warmup = 100;
  float weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f, adam_eps = 1e-8f;
  float clip = 1.0f;     // global gradient-norm clip; 0 = off
  uint64_t seed = 1;
  // Fraction of each batch's sequences that repeat a segment (period P drawn from 8 … T/2):
  // copying what it has already seen is what induction heads are for, and a small mix
  // makes them form in a short run. Every other such sequence repeats uniformly random
  // characters instead of corpus text, so the copying cannot lean on English statistics.
  // 0 = plain corpus windows.
  float repeat_frac = 0.f;
  // validation and checkpoints
  float val_frac = 0.1f;  // the LAST val_frac of the corpus is validation
  int eval_every = 200;   // steps between validation passes (and checkpoints); also at the end
  int eval_batches = 8;   // validation batches (of `batch` sequences) per pass
  std::string corpus;     // UTF-8 text file, or builtin:typing / builtin:repeats
  int max_vocab = 0;      // > 0: a corpus with more distinct characters than this is an error
  std::string out;        // checkpoint directory
  std::string resume;     // checkpoint directory to continue from ("" = fresh run)
};

// A corpus read as characters: vocab = its distinct code points, sorted.
struct Corpus {
  std::vector<std::string> vocab;  // (V) piece of each id
  std::vector<int> ids;            // the whole text as ids
  size_t n_train = 0;              // ids[0, n_train) train, ids[n_train, end) validation
};
// Throws an Error naming the file when it cannot be read, is empty or is not UTF-8.
// `path` may also be "builtin:repeats" (see repeats_corpus_text).
Corpus load_corpus(const std::string& path, float val_frac);
// The same from text in memory; `name` is what errors call it.
Corpus corpus_from_text(const std::string& text, float val_frac, const std::string& name);

// Learning rate at `step` (0-based): linear warm-up over `warmup` steps, then cosine decay
// to lr·min_lr_frac at `steps`.
float lr_at(const TrainOptions& o, int step);

// Presets for `train --preset NAME` and the GUI's Training panel, applied over the
// defaults. "induction-head": the classroom preset, a 2-layer 64-wide llama with 4 heads
// and block_size 64 on builtin:typing (every printable ASCII character, so a class can type
// anything) with every sequence repeating a segment, in which an induction head forms
// suddenly (a phase change) and then scores ≥ 0.8 on random strings typed twice that it
// never saw, within a minute on two cores (docs/lesson.md has the measurements).
const std::vector<std::string>& train_preset_names();
// Usage Error listing the names for an unknown one.
void apply_train_preset(const std::string& name, TrainOptions& o);

// Architecture from the options and vocabulary size.
ModelConfig make_train_config(const TrainOptions& o, int vocab_size);

// AdamW state: first and second moments with the parameters' shapes, and the step count.
struct AdamState {
  Params<float> m, v;
  int step = 0;  // optimizer steps taken
};

// Global L2 norm of all gradients; scales them down to `clip` when above (clip > 0).
// Returns the norm before clipping.
double clip_grad_norm(Params<float>& grads, float clip);
// One AdamW step with learning rate lr; decoupled weight decay on ParamRef::decay tensors.
void adamw_step(const TrainOptions& o, float lr, Params<float>& p, const Params<float>& grads, AdamState& st);

// One training sequence that repeats a segment of `period` tokens: seg[t mod period], with
// seg = ids[start, start + period) or, with `random_chars`, uniform draws from the
// vocabulary. Writes the T inputs and their next-token targets.
void fill_repeated(const std::vector<int>& ids, size_t start, int period, bool random_chars, int vocab,
                   std::mt19937_64& rng, int T, int* in, int* tg);

// Mean loss on `n_batches` deterministic, evenly spaced windows of ids[begin, end).
double evaluate(const ModelConfig& c, const Params<float>& p, const std::vector<int>& ids, size_t begin, size_t end,
                int batch, int n_batches);

// Writes DIR/config.json, DIR/model.safetensors (HF names and layouts, F32) and
// DIR/tokenizer.json; with `st`, also DIR/trainer_state.safetensors (m., v. per
// parameter) and DIR/trainer_state.json (step, options).
void save_checkpoint(const std::string& dir, const ModelConfig& c, const Params<float>& p,
                     const std::vector<std::string>& vocab, const AdamState* st, const TrainOptions* o);
// Reads the optimizer state saved by save_checkpoint into `st` (shapes from `p`).
void load_trainer_state(const std::string& dir, const Params<float>& p, AdamState& st);

struct TrainRun;

struct TrainProgress {
  int step = 0, steps = 0;      // steps done, total
  double loss = 0;              // training loss of the last step
  double val_loss = -1;         // last validation loss (-1 before the first)
  double tokens_per_s = 0, elapsed_s = 0, eta_s = 0;
  double grad_norm = 0, lr = 0;
  bool evaluated = false;       // this report follows a validation pass
  bool saved = false;           // ... and a checkpoint was written
  bool start = false;           // the one report before the first step (step = steps already done)
  const TrainRun* run = nullptr;  // the run's state at this report: weights, corpus (read only)
};

struct TrainResult {
  double first_val_loss = -1, final_val_loss = -1, final_train_loss = -1;
  int steps = 0;
  double seconds = 0;
  ModelConfig config;
};

// One run between two steps: what train() keeps, so that a caller can drive the steps
// itself (the GUI's training session) and get exactly the same run.
struct TrainRun {
  TrainOptions o;     // as given, except a warm-up as long as the run becomes a tenth of it
  Corpus corpus;
  ModelConfig c;
  Params<float> p;    // the weights
  AdamState st;       // st.step = steps done
  // scratch of the step (kept to avoid reallocating)
  Params<float> grads;
  Activations<float> acts;
  std::vector<int> in, tg;  // (B, T) inputs and next-token targets
};

// Checks the options, reads the corpus and makes the first weights (or reads them and the
// AdamW state from o.resume). Throws a clear Error for a missing, empty, non-UTF-8 or too
// short corpus and for a shape that does not divide. o.out is not needed here.
TrainRun start_run(const TrainOptions& o);
// One optimizer step on the batch of step r.st.step (a function of seed and step only).
// Fills pr.step, loss, grad_norm, lr. A loss that is not finite throws an Error before the
// weights change, so r.p stays the last good weights.
void train_step(TrainRun& r, TrainProgress& pr);
// Validation loss of the current weights (the last val_frac of the corpus).
double validate_run(const TrainRun& r);

// The corpus "builtin:repeats": random sentences of common words, each line written twice
// ("the cat saw a red bird. the cat saw a red bird."), so that half of every line can only
// be predicted by copying: the task an induction head solves. Deterministic; about
// `n_chars` characters.
std::string repeats_corpus_text(size_t n_chars, uint64_t seed);

// The characters a class types: every printable ASCII character, space to '~' (letters of
// both cases, digits, space and punctuation), in code-point order.
const std::string& typing_chars();
// The corpus "builtin:typing", the classroom preset's: a first line with every
// typing_chars() character, then lines that are either a sentence of the same made-up
// grammar (sometimes capitalised, with a number, ending in . ! or ?) or 10-30 random
// printable characters, each written twice with a space between ("x7#k q!a x7#k q!a").
// Its vocabulary is typing_chars() and newline. Deterministic; about `n_chars` characters.
std::string typing_corpus_text(size_t n_chars, uint64_t seed);

// Whether the training steps of this shape should run on one thread: a model this small
// (n_embd ≤ 128) spends more on OpenMP's barriers than it gains, and on a busy machine two
// threads waiting for each other made the classroom preset 7x slower (docs/lesson.md).
bool train_single_threaded(const ModelConfig& c);

// Runs the whole training; calls `progress` after every step.
TrainResult train(const TrainOptions& o, const std::function<void(const TrainProgress&)>& progress);

}  // namespace attnviz
