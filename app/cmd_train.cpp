#include <unistd.h>

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <memory>
#include <tuple>
#include <sstream>

#include "app/commands.h"
#include "core/error.h"
#include "core/export/filmstrip.h"
#include "core/train/session.h"
#include "core/train/train.h"

namespace attnviz {

namespace {

std::string hms(double s) {
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

// What --filmstrip asks for: head L:H on `text` every `every` steps, drawn into `out`.
struct FilmstripOptions {
  std::string head;  // "L:H"; "" = no filmstrip
  std::string text;
  int every = 0;     // 0: a tenth of the run
  std::string out;   // .png or .svg
  int cell = 12;
};

// Collects the weights at step 0, every `every` steps and at the end, and writes the
// filmstrip once the run is done. Checks its options before training starts.
class FilmstripRecorder {
 public:
  FilmstripRecorder(const FilmstripOptions& f, const TrainOptions& o) : f_(f) {
    if (f.head.empty()) return;
    if (f.text.empty() || f.out.empty())
      throw Error("--filmstrip needs --text S and --filmstrip-out F.png (or .svg)", ErrorKind::Usage);
    std::tie(layer_, head_) = parse_layer_head(f.head, "--filmstrip");
    if (format_of_path(f.out) != ExportFormat::Png && format_of_path(f.out) != ExportFormat::Svg)
      throw Error("--filmstrip-out must end in .png or .svg", ErrorKind::Usage);
    every_ = f.every > 0 ? f.every : std::max(1, o.steps / 10);
  }
  void operator()(const TrainProgress& p) {
    if (f_.head.empty() || !(p.start || p.step % every_ == 0 || p.step == p.steps)) return;
    if (!tok_) {  // the first report: the text must be in the corpus's vocabulary
      tok_ = std::make_shared<const CharTokenizer>(p.run->corpus.vocab);
      try {
        ids_ = tok_->encode(f_.text);
      } catch (const Error& e) {
        throw Error(std::string("--text: ") + e.what() + "\n  HINT: the vocabulary is the corpus's characters.",
                    ErrorKind::Usage);
      }
      if (layer_ >= p.run->c.n_layer || head_ >= p.run->c.n_head)
        throw Error("--filmstrip " + f_.head + ": the model has layers 0 … " + std::to_string(p.run->c.n_layer - 1) +
                        " and heads 0 … " + std::to_string(p.run->c.n_head - 1),
                    ErrorKind::Usage);
    }
    if (frames_.empty() || frames_.back().step != p.step)
      frames_.push_back({p.step, model_of_run(*p.run, tok_, "")});
  }
  // Writes the file; returns a line saying so ("" without --filmstrip).
  std::string write() const {
    if (f_.head.empty()) return "";
    write_filmstrip(frames_, ids_, layer_, head_, f_.cell, f_.out);
    return "filmstrip of layer " + std::to_string(layer_) + " head " + std::to_string(head_) + " at " +
           std::to_string(frames_.size()) + " steps: " + f_.out + "\n";
  }

 private:
  FilmstripOptions f_;
  int layer_ = 0, head_ = 0, every_ = 1;
  std::shared_ptr<const CharTokenizer> tok_;
  std::vector<int> ids_;
  std::vector<FilmstripFrame> frames_;
};

// At every validation: the best head's induction score on random strings typed twice that
// are not in the corpus (induction_probes: 8 strings of 10-30 characters), and the first
// step where it reaches kInductionFormed (the phase change).
class InductionWatch {
 public:
  // "" except after a validation: "  induction 0.43 (L1 H2)".
  std::string operator()(const TrainProgress& p) {
    if (!p.evaluated && !p.start) return "";
    if (!tok_) {
      tok_ = std::make_shared<const CharTokenizer>(p.run->corpus.vocab);
      probes_ = induction_probes(tok_.get(), p.run->c.vocab_size, p.run->c.n_ctx, 0, 8, &p.run->corpus.ids);
    }
    const auto scores = probe_head_scores(*model_of_run(*p.run, tok_, ""), probes_);
    const HeadScore* best = &scores.front();
    for (const auto& h : scores)
      if (h.induction > best->induction) best = &h;
    last_ = *best;
    if (step_ < 0 && best->induction >= kInductionFormed) {
      step_ = p.step;
      seconds_ = p.elapsed_s;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "  induction %.2f (L%d H%d)", best->induction, best->layer, best->head);
    return buf;
  }
  std::string summary() const {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "induction score %.2f (layer %d head %d) on %zu random strings of 10-30 characters typed twice, "
                  "none of them in the corpus\n",
                  last_.induction, last_.layer, last_.head, probes_.size());
    if (step_ < 0)
      return buf + ("no induction head yet (no head scored " + std::to_string(kInductionFormed).substr(0, 3) + ")\n");
    std::string out = buf;
    std::snprintf(buf, sizeof buf, "an induction head formed by step %d (%.1f s of training)\n", step_, seconds_);
    return out + buf;
  }

 private:
  std::shared_ptr<const CharTokenizer> tok_;
  std::vector<std::vector<int>> probes_;
  int step_ = -1;
  double seconds_ = 0;
  HeadScore last_;  // the best head at the last validation
};

// Trains with the options as given, except a warm-up as long as the run, which becomes a
// tenth of it. Progress goes to io.err: a redrawn bar on a terminal, a line per percent
// otherwise, only the evaluations with `quiet`.
void run_train(const TrainOptions& o, const FilmstripOptions& film, bool quiet, Io& io) {
  if (o.corpus.empty()) throw Error("train needs --corpus FILE (or --preset NAME)", ErrorKind::Usage);
  const TrainOptions& opts = o;
  FilmstripRecorder filmstrip(film, o);
  // A small model trains on one thread (train_single_threaded) unless OMP_NUM_THREADS says otherwise.
  if (!std::getenv("OMP_NUM_THREADS") && o.resume.empty() &&
      train_single_threaded(make_train_config(o, 2)))
    omp_set_num_threads(1);
  if (!quiet) io.err << "training on " << o.corpus << " with " << omp_get_max_threads() << " threads\n";
  // A redirected stderr (a log file) gets a line per percent, not a redrawn bar.
  const bool redraw = isatty(STDERR_FILENO);
  InductionWatch induction;
  const auto progress = [&io, quiet, redraw, &filmstrip, &induction](const TrainProgress& p) {
    filmstrip(p);
    const std::string ind = induction(p);
    if (p.start) return;
    if (quiet && !p.evaluated) return;
    if (!redraw && !p.evaluated && p.step % std::max(1, p.steps / 100) != 0) return;
    std::ostringstream line;
    const int width = 24, fill = static_cast<int>(static_cast<double>(p.step) / p.steps * width);
    line << "\r[" << std::string(fill, '#') << std::string(width - fill, '.') << "] step " << p.step << "/"
         << p.steps << std::fixed << std::setprecision(4) << "  loss " << p.loss;
    if (p.val_loss >= 0) line << "  val " << p.val_loss;
    line << ind;
    line << std::setprecision(0) << "  " << p.tokens_per_s << " tok/s  ETA " << hms(p.eta_s) << "   ";
    if (quiet || !redraw) io.err << line.str().substr(1) << "\n";
    else io.err << line.str() << (p.evaluated ? "\n" : "") << std::flush;
  };
  const TrainResult r = train(opts, progress);
  io.err << "\n";
  io.out << std::fixed << std::setprecision(4) << "trained " << r.config.model_type << " (" << r.config.n_layer
         << " layers, " << r.config.n_embd << " wide, " << r.config.n_head << " heads, " << r.config.n_kv_head
         << " KV heads, vocab " << r.config.vocab_size << ", block_size " << r.config.n_ctx << ") for " << r.steps
         << " steps in " << hms(r.seconds) << "\n"
         << "validation loss " << (r.first_val_loss >= 0 ? std::to_string(r.first_val_loss) + " -> " : std::string("(resumed) "))
         << r.final_val_loss << " nats/token\n"
         << induction.summary() << "saved " << o.out << "\n"
         << filmstrip.write();
}

}  // namespace

Action add_train_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<TrainOptions>();
  auto quiet = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("train", "Train a character-level gpt2 or llama model on a UTF-8 text file");
  // Defined first: CLI11 applies options in the order they are defined, so the preset
  // sets its values and any option given beside it overrides them.
  cmd->add_option_function<std::string>(
      "--preset",
      [o](const std::string& name) {
        try {
          apply_train_preset(name, *o);
        } catch (const Error& e) {  // during parsing only parse errors are caught: a usage error, exit 2
          throw CLI::ValidationError("--preset", e.what());
        }
      },
      "start from a preset: induction-head (the classroom run: an induction head forms within two minutes)");
  cmd->add_option("--corpus", o->corpus,
                  "UTF-8 text (or builtin:repeats); vocabulary = its distinct characters; last 10% = validation");
  cmd->add_option("--out", o->out, "checkpoint directory (a Hugging Face model directory + trainer state)")->required();
  cmd->add_option("--arch", o->arch, "gpt2 (learned positions, LayerNorm, GELU) or llama (RoPE, RMSNorm, SwiGLU, GQA)");
  cmd->add_option("--layers", o->layers, "layers (default 2)")->check(CLI::PositiveNumber);
  cmd->add_option("--embd", o->embd, "model width n_embd (default 64)")->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->heads, "query heads (default 4)")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", o->kv_heads, "key/value heads, llama GQA (default = --heads)")->check(CLI::PositiveNumber);
  cmd->add_option("--inner", o->inner, "MLP hidden size (default 4*embd for gpt2, 8/3*embd for llama)");
  cmd->add_option("--block-size", o->block_size, "context window = training sequence length (default 64)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_flag("--untied{false}", o->tie, "llama: separate lm_head instead of tying it to the embeddings");
  cmd->add_option("--rope-theta", o->rope_theta, "llama RoPE base (default 10000)");
  cmd->add_option("--batch", o->batch, "sequences per step (default 8)")->check(CLI::PositiveNumber);
  cmd->add_option("--steps", o->steps, "optimizer steps (default 1000)")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", o->lr, "peak learning rate (default 1e-3)");
  cmd->add_option("--min-lr-frac", o->min_lr_frac, "final lr as a fraction of --lr (default 0.1)");
  cmd->add_option("--warmup", o->warmup, "linear warm-up steps (default 100)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay on matrices (default 0.1)");
  cmd->add_option("--clip", o->clip, "clip the global gradient norm to this (default 1, 0 = off)");
  cmd->add_option("--seed", o->seed, "random seed for init and batches (default 1)");
  cmd->add_option("--repeat-frac", o->repeat_frac, "fraction of each batch that repeats a corpus segment (teaches copying: induction heads; default 0)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--eval-every", o->eval_every, "steps between validation + checkpoint (default 200)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eval-batches", o->eval_batches, "validation batches per pass (default 8)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--resume", o->resume, "continue the run saved in DIR (model, AdamW state, step)");
  cmd->add_flag("--quiet", *quiet, "no progress bar");
  auto film = std::make_shared<FilmstripOptions>();
  cmd->add_option("--filmstrip", film->head, "L:H: draw that head's attention weights on --text at several steps")
      ->group("Filmstrip");
  cmd->add_option("--text", film->text, "the text of the filmstrip (characters of the corpus)")->group("Filmstrip");
  cmd->add_option("--every", film->every, "steps between filmstrip frames (default: a tenth of the run)")
      ->check(CLI::PositiveNumber)
      ->group("Filmstrip");
  cmd->add_option("--filmstrip-out", film->out, "the filmstrip file, F.png or F.svg")->group("Filmstrip");
  cmd->add_option("--cell", film->cell, "filmstrip pixels per cell (default 12)")
      ->check(CLI::Range(1, 256))
      ->group("Filmstrip");
  return [o, film, quiet, &io] { run_train(*o, *film, *quiet, io); };
}

}  // namespace attnviz
