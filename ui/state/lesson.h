// The guided lesson: a sequence of steps a teacher clicks through on the current text, each
// naming the panel and heatmap stage it talks about and showing the real numbers of one
// chosen row i (and key j) of the selected layer and head: q_i and k_j, q·k, ÷√d, the mask,
// exp and the row sum, the softmax weights, the weighted sum of v, then GQA, block_size and
// the KV cache.
//
// The words live in one data file per language (assets/lesson/lesson.LANG.json) so that a
// teacher can edit or translate them:
//   {"language": "English", "steps": [{"id": "dot", "title": "…", "body": "… {score} …",
//     "stage": "scores", "show": "dot"}, …]}
// "stage" is the heatmap tab the step shows (a dump stage name: q, k, v, scores, scaled,
// masked, probs, out); "show" picks the numbers drawn under the text (one of
// lesson_show_kinds()). {placeholders} in title and body are filled from RowNumbers
// (lesson_placeholders() lists them). No ImGui: unit-tested in tests/test_lesson.cpp.
#pragma once
#include <string>
#include <vector>

#include "core/engine/trace.h"
#include "core/model/config.h"

namespace attnviz::ui {

struct LessonStep {
  std::string id, title, body;
  std::string body_sink;  // optional: the body on a layer with learned sinks (GPT-OSS), else `body`
  const std::string& body_for(bool has_sink) const { return has_sink && !body_sink.empty() ? body_sink : body; }
  Stage stage = Stage::Probs;
  std::string show;  // which numbers the panel draws
};

struct Lesson {
  std::string language;  // as the file names itself ("English", "中文")
  std::vector<LessonStep> steps;
};

// The "show" kinds a step may name, and the placeholders a text may use.
const std::vector<std::string>& lesson_show_kinds();
const std::vector<std::string>& lesson_placeholders();

// Reads and checks a lesson file. Throws attnviz::Error naming the file and, for a bad step,
// its number and id (a missing title, an unknown stage, "show" or {placeholder}, …).
Lesson load_lesson(const std::string& path);
// The lesson files that can be found (data_dirs()/assets/lesson/lesson.*.json), sorted, and
// the one for a language code ("en", "zh"): "" when there is none.
std::vector<std::string> lesson_files();
std::string lesson_file(const std::string& code);

// The numbers of row i (query) and key j ≤ i of one layer (its scale, soft-cap and window as
// the trace recorded them) and query head of a trace, computed
// from its stored Q, K, V as the steps explain them (plain loops, double sums).
struct RowNumbers {
  int layer = 0, head = 0, kv_head = 0, i = 0, j = 0, d = 0;
  int n_head = 0, n_kv_head = 0, group = 0;  // group = n_head / n_kv_head
  int T = 0, block_size = 0, dropped = 0, n_layer = 0;
  std::vector<int> shared_heads;  // the query heads that read kv_head
  double sqrt_d = 0.0;
  std::vector<float> q_i, k_j;     // (d)
  double score = 0.0;              // q_i · k_j
  double scale = 0.0;              // the layer's: 1/√d unless the model says otherwise
  double scaled = 0.0;             // score × scale (score / √d)
  double softcap = 0.0;            // > 0: the layer soft-caps, scaled_row holds c·tanh(x/c)
  // (i + 1) scaled (and soft-capped) scores of row i, keys 0 … i; −inf for keys before a
  // local layer's window
  std::vector<double> scaled_row;
  int masked_count = 0;            // keys j > i of row i: −inf (T − 1 − i)
  int window = 0;                  // the layer's window W (0: global)
  int first_key = 0;               // the first key row i sees: i − W + 1 on a local layer, else 0
  int outside_count = 0;           // keys of row i before the window: −inf too (first_key)
  double row_max = 0.0;            // max of scaled_row
  std::vector<double> exp_row;     // (i + 1) exp(scaled − row_max), 0 outside the window
  double row_sum = 0.0;            // Σ exp_row
  std::vector<double> weights;     // (i + 1) exp_row / row_sum
  // The head's learned sink (GPT-OSS): one more logit in the softmax, then dropped, so the
  // row's weights sum to 1 − sink_weight; row_max and row_sum include it.
  bool has_sink = false;
  double sink_logit = 0.0, sink_weight = 0.0;
  double first_weight = 0.0;       // the weight of the first key row i sees (where heads without a sink park theirs)
  std::vector<double> out_i;       // (d) Σ_j weights_j · v_j
  long long kv_cache_floats = 0;   // K and V of every softmax layer for the window: 2·L·T·KV·d
  long long layer_kv_floats = 0;   // K and V of one softmax layer for the window: 2·T·KV·d
  int kv_layers = 0;               // layers that keep K and V (all but a hybrid's other layers)
  // A hybrid (Qwen3.5, LFM2): its first layer whose memory has a fixed size (−1: none), that
  // memory's floats (layer_state_values), and on a linear-attention layer row i of its A for
  // value head head mod Hv: Σ_s A[i,s], the smallest entry and how many are negative.
  int memory_layer = -1;
  long long state_floats = 0;
  double a_row_sum = 0.0, a_row_min = 0.0;
  int a_negative = 0;
};
// Throws attnviz::Error when layer, head, i or j are out of range (j must be ≤ i), or the
// layer is not softmax attention.
RowNumbers row_numbers(const Trace& tr, const ModelConfig& c, int layer, int head, int i, int j);

// `text` with every {placeholder} replaced by its value in `n` (numbers to 4 significant
// digits, lists as "0, 1, 2").
std::string fill_placeholders(const std::string& text, const RowNumbers& n);

}  // namespace attnviz::ui
