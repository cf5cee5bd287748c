#include "core/engine/head_scan.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/engine/head_scores.h"
#include "core/json_reader.h"
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
  CorpusTokens(const std::string& path, const Tokenizer& tok) : path_(path), tok_(tok) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
      throw Error("the corpus " + excerpt(path, kPathExcerptBytes) + " is not a regular file: give a UTF-8 text file");
    in_.open(path, std::ios::binary);
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
  int64_t skipped() const { return skipped_; }
  const std::vector<std::string>& skipped_chars() const { return skipped_chars_; }
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
    std::vector<int> ids;
    try {
      ids = tok_.encode_with(block, false);
    } catch (const Error&) {  // a character tokenizer lacks some character: leave those out
      ids = tok_.encode_with(known_only(block), false);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    read_ += static_cast<int64_t>(block.size());
    return true;
  }

 private:
  // `block` without the characters the tokenizer cannot encode, counted in skipped_.
  std::string known_only(const std::string& block) {
    std::string known;
    for (const std::string& ch : utf8_split(block)) {
      auto it = known_.find(ch);
      if (it == known_.end()) {
        bool ok = true;
        try {
          tok_.encode_with(ch, false);
        } catch (const Error&) {
          ok = false;
        }
        it = known_.emplace(ch, ok).first;
      }
      if (it->second) {
        known += ch;
      } else {
        ++skipped_;
        if (skipped_chars_.size() < 8 && std::find(skipped_chars_.begin(), skipped_chars_.end(), ch) == skipped_chars_.end())
          skipped_chars_.push_back(ch);
      }
    }
    return known;
  }

  std::string path_;
  const Tokenizer& tok_;
  std::ifstream in_;
  int64_t total_ = 0, read_ = 0;
  bool eof_ = false;
  std::string pending_;
  std::map<std::string, bool> known_;  // character → the tokenizer encodes it
  int64_t skipped_ = 0;
  std::vector<std::string> skipped_chars_;
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

// The windows of a corpus in order (the rule in head_scan.h), each with at least two tokens.
class CorpusWindows {
 public:
  CorpusWindows(const std::string& path, const Tokenizer& tok, const ScanOptions& o, int block_size)
      : prefix_(special_prefix(tok)) {
    N_ = o.window ? o.window : std::min(256, block_size);
    if (N_ < 2 || N_ > block_size)
      throw Error("--window " + std::to_string(N_) + " is outside 2 … " + std::to_string(block_size) + " (the block size)",
                  ErrorKind::Usage);
    if (o.top < 1) throw Error("--top must be at least 1", ErrorKind::Usage);
    M_ = N_ - static_cast<int>(prefix_.size());  // corpus tokens per window
    if (M_ < 1) throw Error("--window " + std::to_string(N_) + " leaves no room after the special tokens", ErrorKind::Usage);
    S_ = o.stride ? o.stride : M_;
    if (S_ < 1) throw Error("--stride must be at least 1", ErrorKind::Usage);
    corpus_ = std::make_unique<CorpusTokens>(path, tok);  // checks the file before any work
  }
  int window() const { return N_; }
  int stride() const { return S_; }
  int prefix() const { return static_cast<int>(prefix_.size()); }
  int64_t tokens() const { return tokens_; }
  const CorpusTokens& corpus() const { return *corpus_; }
  // The next window's ids into `ids`; false after the last.
  bool next(std::vector<int>& ids) {
    while (!done_) {
      while (!eof_ && base_ + static_cast<int64_t>(queue_.size()) < start_ + M_) eof_ = !corpus_->next_block(queue_);
      tokens_ = base_ + static_cast<int64_t>(queue_.size());
      if (start_ >= tokens_) {
        done_ = true;
        break;
      }
      while (base_ < start_ && !queue_.empty()) queue_.pop_front(), ++base_;
      const int64_t count = std::min<int64_t>(M_, tokens_ - start_);
      ids.assign(prefix_.begin(), prefix_.end());
      ids.insert(ids.end(), queue_.begin(), queue_.begin() + count);
      done_ = eof_ && start_ + M_ >= tokens_;  // this window reaches the corpus's end
      start_ += S_;
      if (ids.size() >= 2) return true;
    }
    return false;
  }

 private:
  std::vector<int> prefix_;
  int N_ = 0, M_ = 0, S_ = 0;
  std::unique_ptr<CorpusTokens> corpus_;
  std::deque<int> queue_;  // corpus tokens [base_, base_ + queue_.size())
  int64_t base_ = 0, start_ = 0, tokens_ = 0;
  bool eof_ = false, done_ = false;
};

std::vector<int> scan_window(const Model& m, int block_size, const std::string& path, const ScanOptions& o, int k) {
  if (!m.tokenizer) throw Error("model '" + m.name + "' has no tokenizer, so a text corpus cannot be encoded");
  CorpusWindows w(path, *m.tokenizer, o, block_size);
  std::vector<int> ids;
  for (int i = 0; w.next(ids); ++i)
    if (i == k) return ids;
  throw Error("the corpus has no window " + std::to_string(k) + " (it has fewer); scan it again", ErrorKind::Usage);
}

ScanResult scan_corpus(Engine& engine, const std::string& path, const ScanOptions& o,
                       const std::function<void(const ScanProgress&)>& progress, const std::atomic<bool>* cancel) {
  const Model& m = engine.model();
  if (!m.tokenizer)
    throw Error("model '" + m.name + "' has no tokenizer, so a text corpus cannot be encoded");
  CorpusWindows windows(path, *m.tokenizer, o, engine.block_size());
  ScanResult r;
  r.window = windows.window();
  r.stride = windows.stride();
  r.prefix = windows.prefix();
  std::vector<std::pair<int, int>> heads;  // (layer, head) of the softmax layers
  for (int l = 0; l < m.config.n_layer; ++l)
    if (m.config.layer(l).mixer == Mixer::Softmax)
      for (int h = 0; h < m.config.n_head; ++h) heads.emplace_back(l, h);
  std::vector<HeadSums> sums(heads.size());
  std::vector<int> ids;
  std::vector<float> scratch;
  while (true) {
    if (cancel && cancel->load()) throw Cancelled();
    if (!windows.next(ids)) break;
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
    if (progress) progress({windows.corpus().bytes_read(), windows.corpus().bytes_total(), r.windows, windows.tokens()});
  }
  r.tokens = windows.tokens();
  const CorpusTokens& corpus = windows.corpus();
  r.skipped = corpus.skipped();
  r.skipped_chars = corpus.skipped_chars();
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

std::string scan_head_label(const ScanHead& h) {
  HeadScore s;
  s.previous_token = static_cast<float>(h.metrics[kPrev]);
  s.induction = static_cast<float>(h.metrics[kInd]);
  s.first_token = static_cast<float>(h.metrics[kFirstTok]);
  s.self = static_cast<float>(h.metrics[kSelfTok]);
  return head_label(s);
}

std::string scan_result_json(const ScanResult& r, const ModelConfig& c) {
  const std::vector<std::string>& names = scan_metric_names();
  nlohmann::json heads = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l) heads.push_back(nlohmann::json::array());
  for (const ScanHead& h : r.heads) {
    nlohmann::json e = nlohmann::json::object();
    for (size_t k = 0; k < names.size(); ++k) e[names[k]] = h.metrics[k];
    e["label"] = scan_head_label(h);
    e["kv_head"] = c.kv_head_of(h.layer, h.head);
    nlohmann::json top = nlohmann::json::array();
    for (const ScanExample& x : h.top)
      top.push_back({{"window", x.window}, {"query", x.query}, {"key", x.key}, {"weight", x.weight}});
    e["top"] = std::move(top);
    if (h.layer >= 0 && h.layer < c.n_layer) heads[static_cast<size_t>(h.layer)].push_back(std::move(e));
  }
  const nlohmann::json j = {{"windows", r.windows}, {"tokens", r.tokens},  {"queries", r.queries},
                            {"window", r.window},   {"stride", r.stride},  {"prefix", r.prefix},
                            {"skipped_chars", r.skipped}, {"metrics", names}, {"heads", std::move(heads)}};
  return j.dump(1);
}

ScanResult scan_result_from_json(const std::string& text) {
  const nlohmann::json j = parse_json(text, "scan results");
  ScanResult r;
  try {
    constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
    r.windows = json_int(j.at("windows"), 0, kMaxInt, "scan results: \"windows\"");
    r.tokens = j.at("tokens").get<int64_t>();
    r.queries = j.at("queries").get<int64_t>();
    r.window = json_int(j.at("window"), 0, kMaxDim, "scan results: \"window\"");
    r.stride = json_int(j.at("stride"), 0, kMaxDim, "scan results: \"stride\"");
    r.prefix = json_int(j.at("prefix"), 0, kMaxDim, "scan results: \"prefix\"");
    r.skipped = j.value("skipped_chars", int64_t{0});
    if (j.at("metrics").get<std::vector<std::string>>() != scan_metric_names())
      throw Error("scan results: the metrics are not " + std::to_string(kScanMetrics) + " known names");
    const nlohmann::json& heads = j.at("heads");
    for (size_t l = 0; l < heads.size(); ++l)
      for (size_t h = 0; h < heads[l].size(); ++h) {
        const nlohmann::json& e = heads[l][h];
        ScanHead sh;
        sh.layer = static_cast<int>(l);
        sh.head = static_cast<int>(h);
        for (const std::string& n : scan_metric_names()) sh.metrics.push_back(e.at(n).get<double>());
        for (const nlohmann::json& x : e.at("top"))
          sh.top.push_back({json_int(x.at("window"), 0, kMaxInt, "scan results: a top example's \"window\""),
                            json_int(x.at("query"), 0, kMaxDim, "scan results: a top example's \"query\""),
                            json_int(x.at("key"), 0, kMaxDim, "scan results: a top example's \"key\""),
                            x.at("weight").get<float>()});
        r.heads.push_back(std::move(sh));
      }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("scan results: ") + e.what());
  }
  return r;
}

}  // namespace attnviz
