#include "ui/state/training_state.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/filmstrip.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz::ui {

TrainingForm form_for_preset(const std::string& name) {
  TrainingForm f;
  f.preset = name;
  apply_train_preset(name, f.train);
  return f;
}

SessionOptions session_options(const TrainingForm& f) {
  SessionOptions s;
  s.train = f.train;
  s.train.repeat_frac = std::clamp(f.train.repeat_frac, 0.f, 1.f);
  if (s.train.eval_every > s.train.steps) s.train.eval_every = std::max(1, s.train.steps);
  s.publish_every = std::max(1, f.publish_every);
  s.snapshot_every = std::max(1, f.snapshot_every);
  s.snapshot_budget = static_cast<size_t>(std::max(1, f.budget_mb)) << 20;
  return s;
}

TrainingButtons buttons_for(SessionState s, bool has_run) {
  TrainingButtons b;
  const bool going = s == SessionState::Running || s == SessionState::Paused;
  b.start = !going;
  b.pause = s == SessionState::Running;
  b.resume = s == SessionState::Paused;
  b.stop = going;
  b.reset = has_run && s != SessionState::Idle;
  b.save = has_run && s != SessionState::Running && s != SessionState::Idle;
  return b;
}

int nearest_kept_step(const std::vector<int>& kept, int want) {
  int best = -1;
  for (int s : kept)
    if (best < 0 || std::abs(s - want) < std::abs(best - want)) best = s;
  return best;
}

std::vector<int> filmstrip_steps(const std::vector<int>& kept, int k) {
  if (k <= 0 || kept.empty()) return {};
  if (static_cast<int>(kept.size()) <= k) return kept;
  std::vector<int> out;
  if (k == 1) return {kept.back()};
  for (int i = 0; i < k; ++i) {
    const size_t at = static_cast<size_t>(std::lround(static_cast<double>(i) * (kept.size() - 1) / (k - 1)));
    if (out.empty() || out.back() != kept[at]) out.push_back(kept[at]);
  }
  return out;
}

std::vector<float> head_series(const SessionStatus& s, int index, bool induction) {
  std::vector<float> out;
  out.reserve(s.scores.size());
  for (const auto& p : s.scores) {
    if (index < 0 || index >= static_cast<int>(p.heads.size())) break;
    const HeadScore& h = p.heads[static_cast<size_t>(index)];
    out.push_back(induction ? std::max(0.f, h.induction) : h.previous_token);
  }
  return out;
}

std::vector<int> score_steps(const SessionStatus& s) {
  std::vector<int> out;
  for (const auto& p : s.scores) out.push_back(p.step);
  return out;
}

int best_induction_head(const SessionStatus& s) {
  if (s.scores.empty() || s.scores.back().heads.empty()) return -1;
  const auto& h = s.scores.back().heads;
  int best = 0;
  for (size_t i = 1; i < h.size(); ++i)
    if (h[i].induction > h[static_cast<size_t>(best)].induction) best = static_cast<int>(i);
  return best;
}

std::string induction_note(const SessionStatus& s) {
  if (s.induction_step < 0) return "";
  for (const auto& p : s.scores) {
    if (p.step != s.induction_step) continue;
    const HeadScore* best = nullptr;
    for (const auto& h : p.heads)
      if (!best || h.induction > best->induction) best = &h;
    char buf[160];
    std::snprintf(buf, sizeof buf, "induction head formed at step %d (%.0f s): layer %d head %d, score %.2f",
                  s.induction_step, s.induction_seconds, best->layer, best->head, best->induction);
    return buf;
  }
  return "induction head formed at step " + std::to_string(s.induction_step);
}

std::string write_session_filmstrip(const TrainingSession& session, int k, const std::string& text, int layer, int head,
                                    const std::string& path) {
  std::vector<FilmstripFrame> frames;
  for (int s : filmstrip_steps(session.status()->snapshot_steps, k))
    if (auto m = session.snapshot(s)) frames.push_back({s, m});
  if (frames.empty()) throw Error("no snapshots kept yet: start a run first");
  write_filmstrip(frames, encode_text(*frames.back().model, text), layer, head, 14, path);
  return "wrote " + path + ": layer " + std::to_string(layer) + " head " + std::to_string(head) + " at " +
         std::to_string(frames.size()) + " steps";
}

std::string text_for_vocabulary(const std::string& text, const std::vector<std::string>& vocab) {
  const std::set<std::string> known(vocab.begin(), vocab.end());
  std::vector<std::string> chars;
  try {
    chars = utf8_split(text);
  } catch (const Error&) {
    chars.clear();
  }
  bool all = !chars.empty();
  for (const auto& c : chars) all = all && known.count(c);
  if (all) return text;
  std::string kept;
  for (auto c : chars) {
    if (c.size() == 1) c[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(c[0])));
    if (known.count(c)) kept += c;
  }
  if (!kept.empty() && kept.find_first_not_of(' ') != std::string::npos) return kept;
  // The vocabulary's letters in order, as a "sentence" written twice: something to copy.
  std::string line;
  for (const auto& v : vocab)
    if (v.size() == 1 && std::isalpha(static_cast<unsigned char>(v[0])) && line.size() < 16) line += v;
  if (line.empty())
    for (const auto& v : vocab)
      if (line.size() < 16) line += v;
  return line + line;
}

}  // namespace attnviz::ui
