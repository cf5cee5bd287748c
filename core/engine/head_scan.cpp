#include "core/engine/head_scan.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>

#include "core/engine/head_scores.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

namespace {

constexpr size_t kBlockBytes = size_t{64} << 10;
// Examples come from queries with at least this many keys besides the first: an early
// query's weight is a choice among few keys, large whatever the head does.
constexpr int kMinExampleQuery = 8;
enum Metric { kPrev, kInd, kFirstTok, kSelfTok, kEntropy, kDist, kScanMetrics };

// The corpus as a stream of token ids, encoded a block at a time.
class CorpusTokens {
 public:
  CorpusTokens(const std::string& path, const Tokenizer& tok) : path_(path), tok_(tok), in_(path, std::ios::binary) {
    if (!in_) throw Error("cannot read the corpus " + excerpt(path, kPathExcerptBytes) + ": no such file or not readable");
    in_.seekg(0, std::ios::end);
    total_ = static_cast<int64_t>(in_.tellg());
    in_.seekg(0);
    if (total_ <= 0)
      throw Error("the corpus " + excerpt(path, kPathExcerptBytes) + " is empty: give a UTF-8 text file");
    if (total_ > kMaxCorpusBytes)
      throw Error("the corpus " + excerpt(path, kPathExcerptBytes) + " has " + std::to_string(total_) +
                  " bytes, more than the limit of " + std::to_string(kMaxCorpusBytes) + " (1 GiB): split it");
  }
  int64_t bytes_total() const { return total_; }
  int64_t bytes_read() const { return read_; }
  // Appends the next block's ids to `out`; false at the end of the file.
  bool next_block(std::deque<int>& out) {
    if (eof_ && pending_.empty()) return false;
    std::string block = std::move(pending_);
    pending_.clear();
    while (!eof_ && (block.size() < kBlockBytes || block.find('\n') == std::string::npos)) {
      char buf[kBlockBytes];
      in_.read(buf, sizeof buf);
      const std::streamsize n = in_.gcount();
      if (n <= 0) {
        eof_ = true;
        break;
      }
      block.append(buf, static_cast<size_t>(n));
      if (block.size() >= 16 * kBlockBytes) break;  // a very long line: cut at a character boundary below
    }
    if (!eof_) {  // keep what follows the last newline (or a partial character) for the next block
      size_t cut = block.rfind('\n');
      if (cut != std::string::npos) ++cut;
      else {
        cut = block.size();
        while (cut > 0 && (static_cast<unsigned char>(block[cut - 1]) & 0xC0) == 0x80) --cut;  // continuation bytes
        if (cut > 0 && static_cast<unsigned char>(block[cut - 1]) >= 0xC0) --cut;            // the lead byte
      }
      pending_ = block.substr(cut);
      block.resize(cut);
    }
    for (size_t i = 0; i < block.size();) {
      const size_t len = utf8_valid_len(block, i);
      if (!len)
        throw Error("the corpus " + excerpt(path_, kPathExcerptBytes) + " is not UTF-8: invalid bytes at byte " +
                    std::to_string(read_ + static_cast<int64_t>(i)) + "; convert it to UTF-8 (e.g. iconv -t UTF-8)");
      i += len;
    }
    const std::vector<int> ids = tok_.encode_with(block, false);
    out.insert(out.end(), ids.begin(), ids.end());
    read_ += static_cast<int64_t>(block.size());
    return true;
  }

 private:
  std::string path_;
  const Tokenizer& tok_;
  std::ifstream in_;
  int64_t total_ = 0, read_ = 0;
  bool eof_ = false;
  std::string pending_;
};

// The ids the tokenizer puts before a text when it adds special tokens (BOS), if any.
std::vector<int> special_prefix(const Tokenizer& tok) {
  const std::vector<int> with = tok.encode_with("a", true), without = tok.encode_with("a", false);
  if (with.size() > without.size() && std::equal(without.begin(), without.end(), with.end() - static_cast<std::ptrdiff_t>(without.size())))
    return std::vector<int>(with.begin(), with.end() - static_cast<std::ptrdiff_t>(without.size()));
  return {};
}

struct HeadSums {
  double sum[kScanMetrics] = {};
  double ind_weight = 0;
  std::vector<ScanExample> top;
};

bool stronger(const ScanExample& a, const ScanExample& b) {
  if (a.weight != b.weight) return a.weight > b.weight;
  if (a.window != b.window) return a.window < b.window;
  return a.query < b.query;
}

}  // namespace

const std::vector<std::string>& scan_metric_names() {
  static const std::vector<std::string> names = {"previous_token", "induction", "first_token",
                                                 "self", "entropy_bits", "mean_distance"};
  return names;
}

ScanResult scan_corpus(Engine& engine, const std::string& path, const ScanOptions& o,
                       const std::function<void(const ScanProgress&)>& progress, const std::atomic<bool>* cancel) {
  const Model& m = engine.model();
  if (!m.tokenizer)
    throw Error("model '" + m.name + "' has no tokenizer, so a text corpus cannot be encoded");
  const int N = o.window ? o.window : std::min(256, engine.block_size());
  if (N < 2 || N > engine.block_size())
    throw Error("--window " + std::to_string(N) + " is outside 2 … " + std::to_string(engine.block_size()) +
                    " (the block size)",
                ErrorKind::Usage);
  if (o.top < 1) throw Error("--top must be at least 1", ErrorKind::Usage);
  const std::vector<int> prefix = special_prefix(*m.tokenizer);
  const int M = N - static_cast<int>(prefix.size());  // corpus tokens per window
  if (M < 1) throw Error("--window " + std::to_string(N) + " leaves no room after the special tokens", ErrorKind::Usage);
  const int S = o.stride ? o.stride : M;
  if (S < 1) throw Error("--stride must be at least 1", ErrorKind::Usage);
  CorpusTokens corpus(path, *m.tokenizer);  // checks the file before any work

  ScanResult r;
  r.window = N;
  r.stride = S;
  r.prefix = static_cast<int>(prefix.size());
  std::vector<std::pair<int, int>> heads;  // (layer, head) of the softmax layers
  for (int l = 0; l < m.config.n_layer; ++l)
    if (m.config.layer(l).mixer == Mixer::Softmax)
      for (int h = 0; h < m.config.n_head; ++h) heads.emplace_back(l, h);
  std::vector<HeadSums> sums(heads.size());
  std::deque<int> queue;   // corpus tokens [base, base + queue.size())
  int64_t base = 0, start = 0;
  bool eof = false;
  std::vector<int> ids;
  std::vector<float> scratch;
  for (int k = 0;; ++k) {
    if (cancel && cancel->load()) throw Cancelled();
    while (!eof && base + static_cast<int64_t>(queue.size()) < start + M) eof = !corpus.next_block(queue);
    r.tokens = base + static_cast<int64_t>(queue.size());
    if (start >= r.tokens) break;
    while (base < start && !queue.empty()) queue.pop_front(), ++base;
    const int64_t count = std::min<int64_t>(M, r.tokens - start);
    ids.assign(prefix.begin(), prefix.end());
    ids.insert(ids.end(), queue.begin(), queue.begin() + count);
    const bool last = start + M >= r.tokens && eof;
    if (ids.size() >= 2) {
      const Trace& tr = engine.run(ids);
      const int T = tr.T();
      const std::vector<HeadScore> scores = score_heads(tr);
      for (size_t x = 0; x < heads.size(); ++x) {
        const auto [l, h] = heads[x];
        const HeadScore* s = find_score(scores, l, h);
        HeadSums& hs = sums[x];
        const double q = T - 1;
        hs.sum[kPrev] += s->previous_token * q;
        hs.sum[kFirstTok] += s->first_token * q;
        hs.sum[kSelfTok] += s->self * q;
        hs.sum[kEntropy] += s->entropy_bits * q;
        hs.sum[kDist] += s->mean_distance * q;
        if (s->induction >= 0) hs.sum[kInd] += s->induction * q, hs.ind_weight += q;
        // The examples: each query's strongest key other than the first.
        const float* P = tr.layers[static_cast<size_t>(l)].head_values(Stage::Probs, h, scratch);  // (T, T)
        for (int i = kMinExampleQuery; i < T; ++i) {
          const float* row = P + static_cast<int64_t>(i) * T;
          const int j = static_cast<int>(std::max_element(row + 1, row + i + 1) - row);
          const ScanExample e{r.windows, i, j, row[j]};
          if (static_cast<int>(hs.top.size()) == o.top && !stronger(e, hs.top.back())) continue;
          hs.top.insert(std::upper_bound(hs.top.begin(), hs.top.end(), e, stronger), e);
          if (static_cast<int>(hs.top.size()) > o.top) hs.top.pop_back();
        }
      }
      r.queries += T - 1;
      ++r.windows;
    }
    if (progress) progress({corpus.bytes_read(), corpus.bytes_total(), r.windows, r.tokens});
    if (last) break;  // this window reached the corpus's end
    start += S;
  }
  if (r.windows == 0)
    throw Error("the corpus " + excerpt(path, kPathExcerptBytes) + " gives " + std::to_string(r.tokens) +
                " token(s): a scan needs at least two");
  for (size_t x = 0; x < heads.size(); ++x) {
    ScanHead sh;
    sh.layer = heads[x].first;
    sh.head = heads[x].second;
    const HeadSums& hs = sums[x];
    sh.metrics.resize(kScanMetrics);
    for (int k2 = 0; k2 < kScanMetrics; ++k2) sh.metrics[static_cast<size_t>(k2)] = hs.sum[k2] / static_cast<double>(r.queries);
    sh.metrics[kInd] = hs.ind_weight > 0 ? hs.sum[kInd] / hs.ind_weight : -1.0;
    sh.top = hs.top;
    r.heads.push_back(std::move(sh));
  }
  return r;
}

}  // namespace attnviz
