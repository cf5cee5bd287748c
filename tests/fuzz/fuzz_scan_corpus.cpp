// A corpus file → the head scan (core/engine/head_scan.h): the bytes as a corpus read in
// blocks, checked as UTF-8, characters the tokenizer lacks left out, cut into windows of
// builtin:fortunes-en (a character tokenizer; windows of 10 tokens 61 apart, so that a
// 4 kB input runs about 70 short forwards: the reader is what is fuzzed, and every window is
// still cut and run). Accepted corpora give finite metrics and examples inside their windows.
#include <cmath>
#include <memory>

#include "core/engine/backend.h"
#include "core/engine/head_scan.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
attnviz::Engine* engine() {
  static const std::unique_ptr<attnviz::Engine> e = [] {
    std::unique_ptr<attnviz::Engine> out;
    try {
      out = std::make_unique<attnviz::Engine>(attnviz::load_model("builtin:fortunes-en"), attnviz::make_cpu_backend());
      out->set_all_logits(false);
    } catch (const attnviz::Error&) {
    }
    return out;
  }();
  return e.get();
}
}  // namespace

ATTNVIZ_FUZZ_TARGET(scan_corpus) {
  attnviz::Engine* e = engine();
  if (!e) return;
  const std::string path = attnviz::fuzz::write_scratch_file("corpus.txt", data, size);
  if (path.empty()) return;
  attnviz::ScanOptions o;
  o.window = 10;
  o.stride = 61;
  o.top = 2;
  try {
    const attnviz::ScanResult r = attnviz::scan_corpus(*e, path, o);
    if (r.windows < 1 || r.tokens < 2) __builtin_trap();
    for (const attnviz::ScanHead& h : r.heads) {
      for (double v : h.metrics)
        if (!std::isfinite(v)) __builtin_trap();
      for (const attnviz::ScanExample& x : h.top)
        if (x.window < 0 || x.window >= r.windows || x.key < 1 || x.key > x.query || x.query >= o.window) __builtin_trap();
    }
  } catch (const attnviz::Error&) {
  }
}
