// `scan`: what each attention head does over a whole corpus (core/engine/head_scan.h).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "app/commands.h"
#include "core/engine/head_scan.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"

namespace attnviz {

namespace {

struct ScanCliOptions {
  InputOptions in;
  std::string corpus, out;
  ScanOptions scan;
  bool json = false;
};

std::atomic<bool> g_interrupted{false};
RunControl g_control;
extern "C" void on_interrupt(int) {
  g_interrupted = true;
  g_control.cancel = true;
}

nlohmann::json result_json(const ScanCliOptions& o, const Model& m, const ScanResult& r) {
  nlohmann::json j = parse_json(scan_result_json(r, m.config), "scan results");
  j["model"] = o.in.model;
  j["corpus"] = o.corpus;
  return j;
}

void print_text(const ScanCliOptions& o, const Model& m, const ScanResult& r, Io& io) {
  io.out << "model " << o.in.model << ", corpus " << o.corpus << ": " << r.tokens << " tokens in " << r.windows
         << " windows of " << r.window << " (stride " << r.stride << "), " << r.queries
         << " queries; each head's mean attention over the windows\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "%5s %4s %7s %7s %7s %7s %7s %7s  %-15s %s\n", "layer", "head", "prev", "ind", "first",
                "self", "entropy", "dist", "label", "strongest (window:query→key weight)");
  io.out << buf;
  for (const ScanHead& h : r.heads) {
    std::snprintf(buf, sizeof buf, "%5d %4d %7.3f %7.3f %7.3f %7.3f %7.3f %7.2f  %-15s", h.layer, h.head, h.metrics[0],
                  h.metrics[1], h.metrics[2], h.metrics[3], h.metrics[4], h.metrics[5], scan_head_label(h).c_str());
    io.out << buf;
    if (!h.top.empty()) {
      const ScanExample& x = h.top.front();
      std::snprintf(buf, sizeof buf, " %d:%d→%d %.3f", x.window, x.query, x.key, x.weight);
      io.out << buf;
    }
    io.out << "\n";
  }
  (void)m;
}

// `text` into `path` through a temporary file renamed over it: a failed or interrupted
// write leaves no half-written results.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".part";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error("cannot write " + excerpt(path, kPathExcerptBytes) + " (disk full or not writable)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error("cannot write " + excerpt(path, kPathExcerptBytes) + ": " + ec.message());
  }
}

void run_scan(const ScanCliOptions& o, Io& io) {
  Engine engine = open_engine(o.in, io.err);
  engine.set_all_logits(false);  // the scan reads attention only
  const bool bar = isatty(STDERR_FILENO);
  g_interrupted = false;
  g_control.reset(engine.model().config.n_layer);
  engine.set_control(&g_control);
  const auto old = std::signal(SIGINT, on_interrupt);
  ScanResult r;
  try {
    r = scan_corpus(engine, o.corpus, o.scan,
                    [&](const ScanProgress& p) {
                      if (!bar) return;
                      const double f = p.bytes_total ? static_cast<double>(p.bytes_read) / p.bytes_total : 1.0;
                      const int w = static_cast<int>(f * 30);
                      std::fprintf(stderr, "\rscan [%-30s] %3d%%  %d windows, %lld tokens", std::string(w, '#').c_str(),
                                   static_cast<int>(f * 100), p.windows, static_cast<long long>(p.tokens));
                    },
                    &g_interrupted);
  } catch (const Cancelled&) {
    std::signal(SIGINT, old);
    engine.set_control(nullptr);
    if (bar) std::fprintf(stderr, "\n");
    throw Error("the scan was interrupted; no results were written");
  } catch (...) {
    std::signal(SIGINT, old);
    engine.set_control(nullptr);
    if (bar) std::fprintf(stderr, "\n");
    throw;
  }
  std::signal(SIGINT, old);
  engine.set_control(nullptr);
  if (bar) std::fprintf(stderr, "\n");
  const Model& m = engine.model();
  if (r.skipped) {
    io.err << "note: " << r.skipped << " character(s) not in the model's vocabulary were left out:";
    for (const std::string& ch : r.skipped_chars) io.err << " '" << excerpt(ch) << "'";
    io.err << "\n";
  }
  if (!o.out.empty()) write_atomically(o.out, result_json(o, m, r).dump(1) + "\n");
  if (o.json) io.out << result_json(o, m, r).dump(1) << "\n";
  else print_text(o, m, r, io);
}

}  // namespace

Action add_scan_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<ScanCliOptions>();
  auto* cmd = add_model_command(app, "scan",
      "Score every attention head over a corpus: the metrics of `heads` averaged over the corpus's windows (each "
      "weighted by its queries) and each head's strongest examples; the corpus is streamed, memory stays flat",
      o->in, kModelOnly);
  cmd->add_option("--corpus", o->corpus, "a UTF-8 text file (at most 1 GiB)")->required();
  cmd->add_option("--window", o->scan.window, "tokens per window, BOS included where the tokenizer adds one "
                                              "(default min(256, block_size))");
  cmd->add_option("--stride", o->scan.stride, "corpus tokens between window starts (default: the window's, no overlap)");
  cmd->add_option("--top", o->scan.top, "examples kept per head (default 5)");
  cmd->add_option("--out", o->out, "also write the JSON results to this file (replaced only when the scan completes)");
  cmd->add_flag("--json", o->json, "print JSON: windows, tokens, metrics, heads [L][H] (each metric, label, top)");
  return [o, &io] { run_scan(*o, io); };
}

}  // namespace attnviz
