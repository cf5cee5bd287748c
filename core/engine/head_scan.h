// A head scan: what each attention head does over a whole corpus, not one prompt
// (`attnviz-cli scan`, the GUI's Head scan panel).
//
// The corpus is read as it goes, a block at a time: each block (cut after a newline) is
// checked as UTF-8 and encoded without special tokens (characters a character tokenizer
// lacks are left out and counted, as the GUI leaves them out of typed text), and its ids join a queue from which
// windows are cut. Window k holds the tokenizer's leading special tokens (BOS, where the
// model's tokenizer adds one) and then corpus tokens [k·S, k·S + N − prefix) (N the window
// length, S the stride, both counted in corpus tokens after the prefix); the windows stop with
// the first that reaches the corpus's end, and a last window of fewer than two tokens is
// dropped. Nothing but the queue, the current trace and the running sums is held: memory is
// flat in the corpus length. (Cutting blocks at newlines can tokenize a block boundary
// differently from the whole file at once; blocks are 64 KiB, so this touches a token in
// tens of thousands at most, and none with a tokenizer that splits at newlines.)
//
// Per head (the softmax layers'), each metric of score_heads (head_scores.h) is averaged
// over the windows, each weighted by its number of queries (T − 1); induction over the
// windows where it is defined (−1 when none is). `top` keeps the K strongest examples: for
// each query i ≥ 8 of each window (a choice among at least eight keys besides the first),
// its largest weight on a key 1 ≤ j ≤ i (any key but the window's first token, the usual
// sink; the lower j among equals), the K largest over the corpus (ties: the earlier window,
// then the earlier query).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace attnviz {

// Largest corpus accepted: 1 GiB (it is streamed; the limit bounds a scan's duration).
constexpr int64_t kMaxCorpusBytes = int64_t{1} << 30;

struct ScanOptions {
  int window = 0;  // N tokens per window, the prefix included (0: min(256, block_size))
  int stride = 0;  // S corpus tokens between window starts (0: the window's corpus tokens, no overlap)
  int top = 5;     // K examples per head
};

struct ScanExample {
  int window = 0, query = 0, key = 0;  // positions inside the window
  float weight = 0;
};

struct ScanHead {
  int layer = 0, head = 0;
  std::vector<double> metrics;     // (kScanMetrics) in scan_metric_names' order
  std::vector<ScanExample> top;    // ≤ K, strongest first
};

struct ScanResult {
  int windows = 0;
  int64_t tokens = 0;      // corpus tokens read (without the windows' prefixes)
  int64_t queries = 0;     // Σ (T − 1) over the windows
  int window = 0, stride = 0, prefix = 0;
  int64_t skipped = 0;                     // characters left out: a character tokenizer lacks them
  std::vector<std::string> skipped_chars;  // the first few of them, each once
  std::vector<ScanHead> heads;  // the softmax layers' heads, layer-major
};

// "previous_token", "induction", "first_token", "self", "entropy_bits", "mean_distance":
// the names of heads --json.
const std::vector<std::string>& scan_metric_names();

struct ScanProgress {
  int64_t bytes_read = 0, bytes_total = 0;
  int windows = 0;
  int64_t tokens = 0;
};

// Scans the corpus at `path` with the engine's model (its block size bounds the window).
// Errors (data): a corpus that cannot be read, is not a regular file, is empty, is not UTF-8 (with the byte offset),
// is larger than kMaxCorpusBytes, or gives fewer than two tokens; a model without a
// tokenizer. Usage errors: a window < 2 or above the block size, a stride < 1 or above the
// window's corpus tokens, top < 1. `progress` is called after each window; `cancel`, when
// set, stops the scan by throwing Cancelled (between windows, or inside a forward through the
// engine's RunControl when the caller set one).
ScanResult scan_corpus(Engine& engine, const std::string& path, const ScanOptions& o,
                       const std::function<void(const ScanProgress&)>& progress = {},
                       const std::atomic<bool>* cancel = nullptr);

// The ids of window k (0-based, counting the windows a scan runs) of the corpus at `path`
// for `m`'s tokenizer, cut as scan_corpus cuts them for an engine of `block_size`: what a
// scan example's `window` refers to. Reads the corpus up to that window. Errors as
// scan_corpus's, and a usage Error when the corpus has no window k.
std::vector<int> scan_window(const Model& m, int block_size, const std::string& path, const ScanOptions& o, int k);

// head_label (head_scores.h) of the head's corpus averages.
std::string scan_head_label(const ScanHead& h);

// The result as `scan --json` prints it (without `model` and `corpus`): windows, tokens,
// queries, window, stride, prefix, skipped_chars, metrics, and heads [L][H] (a layer without
// softmax heads: []), each head's metrics by name, its label (head_label), kv_head and top.
std::string scan_result_json(const ScanResult& r, const ModelConfig& c);
// Back from that JSON; throws a data Error naming what is missing or wrong.
ScanResult scan_result_from_json(const std::string& text);

}  // namespace attnviz
