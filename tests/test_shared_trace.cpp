// Engine::share and copy_changed: a trace handed out is never written again (a deep copy
// taken when it was shared must still match after later runs), and the engine that shares
// computes every trace to the same bits as a twin that never shares, through typing,
// edits, deletions, a sliding window, ablation changes and a cancelled run. Also
// LayerTrace::update_head_values (the heatmap's per-keystroke rows) against head_values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/engine/engine.h"
#include "core/error.h"
#include "test_util.h"

namespace attnviz {
namespace {
using namespace test;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) return false;
  if (a.shape.empty() || a.numel() == 0) return a.numel() == b.numel();
  const FloatBuf x = a.dense_copy().data, y = b.dense_copy().data;
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Every field and every tensor's values (not their storage layout): equal bits.
void expect_identical(const Trace& a, const Trace& b, const std::string& when) {
  EXPECT_EQ(a.model, b.model) << when;
  EXPECT_EQ(a.backend, b.backend) << when;
  EXPECT_EQ(a.block_size, b.block_size) << when;
  EXPECT_EQ(a.dropped, b.dropped) << when;
  EXPECT_EQ(a.tokens, b.tokens) << when;
  EXPECT_EQ(a.logits_from, b.logits_from) << when;
  EXPECT_TRUE(a.row_loss.size() == b.row_loss.size() &&
              (a.row_loss.empty() || std::memcmp(a.row_loss.data(), b.row_loss.data(), a.row_loss.size() * 4) == 0))
      << when << ": row_loss";  // (memcmp never sees the null data() of an empty vector)
  EXPECT_EQ(a.all_logits, b.all_logits) << when;
  EXPECT_EQ(a.compact, b.compact) << when;
  EXPECT_EQ(a.ablation, b.ablation) << when;
  EXPECT_TRUE(same_bits(a.logits, b.logits)) << when << ": logits";
  EXPECT_TRUE(same_bits(a.final_hidden, b.final_hidden)) << when << ": final_hidden";
  EXPECT_TRUE(same_bits(a.final_resid, b.final_resid)) << when << ": final_resid";
  ASSERT_EQ(a.layers.size(), b.layers.size()) << when;
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerTrace &x = a.layers[l], &y = b.layers[l];
    const std::string at = when + ", layer " + std::to_string(l) + ": ";
    EXPECT_TRUE(same_bits(x.q, y.q)) << at << "q";
    EXPECT_TRUE(same_bits(x.k, y.k)) << at << "k";
    EXPECT_TRUE(same_bits(x.v, y.v)) << at << "v";
    EXPECT_TRUE(same_bits(x.scores, y.scores)) << at << "scores";
    EXPECT_TRUE(same_bits(x.probs, y.probs)) << at << "probs";
    EXPECT_TRUE(same_bits(x.out, y.out)) << at << "out";
    EXPECT_TRUE(same_bits(x.resid, y.resid)) << at << "resid";
    EXPECT_TRUE(same_bits(x.row_stats, y.row_stats)) << at << "row_stats";
    EXPECT_TRUE(same_bits(x.thumbs, y.thumbs)) << at << "thumbs";
    EXPECT_EQ(x.thumb_bucket, y.thumb_bucket) << at;
    EXPECT_EQ(x.scale, y.scale) << at;
    EXPECT_EQ(x.softcap, y.softcap) << at;
    EXPECT_EQ(x.window, y.window) << at;
    EXPECT_EQ(x.compact, y.compact) << at;
  }
}

std::shared_ptr<const Model> shared_gqa_model() {
  return load_model(make_model_dir(small_config("llama", 3, 64, 4, 2, 300, 512), 7, "shared_gqa"));
}

std::shared_ptr<const Model> local_model() {
  // Gemma 2's rules: windows of 6 on every other layer, soft-capped scores.
  const ModelConfig c = parse_config(
      {{"model_type", "gemma2"}, {"vocab_size", 300}, {"hidden_size", 64}, {"intermediate_size", 96},
       {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
       {"max_position_embeddings", 512}, {"sliding_window", 6}, {"attn_logit_softcapping", 3.0}},
      "gemma2 test config");
  return load_model(make_model_dir(c, 5, "shared_gemma2"));
}

// A run of edits as a user makes them. Each step: ids to run, and what to do first.
struct Step {
  std::vector<int> ids;
  int block_size = 0;            // > 0: set it first
  std::vector<int> ablate;       // layer, head pairs flattened; set when `set_ablation`
  bool set_ablation = false;
  bool cancel = false;           // the run is stopped half-way (throws Cancelled)
  std::string what;
};

std::vector<Step> session() {
  std::vector<Step> steps;
  std::vector<int> ids = random_ids(40, 300, 3);
  steps.push_back({ids, 0, {}, false, false, "first text"});
  for (int i = 0; i < 30; ++i) {  // typing: crosses the thumbnails' bucket at T = 65
    ids.push_back((i * 37 + 11) % 300);
    steps.push_back({ids, 0, {}, false, false, "typed " + std::to_string(ids.size())});
  }
  ids[50] = (ids[50] + 1) % 300;
  steps.push_back({ids, 0, {}, false, false, "edit at 50"});
  ids.pop_back();
  steps.push_back({ids, 0, {}, false, false, "backspace"});
  ids.resize(20);
  steps.push_back({ids, 0, {}, false, false, "deleted to 20"});
  steps.push_back({ids, 0, {1, 1}, true, false, "ablate 1:1"});
  ids.push_back(7);
  steps.push_back({ids, 0, {1, 1}, false, false, "typed with an ablation"});
  steps.push_back({ids, 0, {}, true, false, "ablation cleared"});
  ids.push_back(8);
  steps.push_back({ids, 0, {}, false, true, "cancelled"});
  ids.push_back(9);
  steps.push_back({ids, 0, {}, false, false, "after the cancel"});
  for (int i = 0; i < 12; ++i) ids.push_back(i);
  steps.push_back({ids, 16, {}, false, false, "window of 16 slides"});
  ids.push_back(1);
  steps.push_back({ids, 0, {}, false, false, "slides again"});
  return steps;
}

void run_session(const std::shared_ptr<const Model>& m, Engine::Matrices matrices, bool all_logits, const std::string& name) {
  Engine sharing(m, make_cpu_backend()), twin(m, make_cpu_backend());
  RunControl ctl;
  for (Engine* e : {&sharing, &twin}) {
    e->set_matrices(matrices);
    e->set_all_logits(all_logits);
    e->set_control(&ctl);
  }
  struct Held {
    std::shared_ptr<const Trace> shared;
    Trace copy;  // deep, taken when it was shared
    std::string what;
  };
  std::vector<Held> held;  // the last two, as the GUI's snapshot and a job may hold them
  for (const Step& st : session()) {
    const std::string when = name + ", " + st.what;
    for (Engine* e : {&sharing, &twin}) {
      if (st.block_size) e->set_block_size(st.block_size);
      if (st.set_ablation) {
        Ablation a;
        for (size_t i = 0; i + 1 < st.ablate.size(); i += 2) a.heads.push_back({st.ablate[i], st.ablate[i + 1]});
        e->set_ablation(a);
      }
    }
    if (st.cancel) {
      for (Engine* e : {&sharing, &twin}) {
        ctl.reset(m->config.n_layer);
        ctl.cancel = true;
        EXPECT_THROW(e->run(st.ids), Cancelled) << when;
      }
      ctl.reset(m->config.n_layer);
      continue;
    }
    ctl.reset(m->config.n_layer);
    sharing.run(st.ids);
    ctl.reset(m->config.n_layer);
    const Trace& want = twin.run(st.ids);
    EXPECT_EQ(sharing.last_recomputed_from(), twin.last_recomputed_from()) << when;
    std::shared_ptr<const Trace> s = sharing.share();
    EXPECT_EQ(s.get(), &sharing.trace()) << "share() hands out the current trace, not a copy";
    expect_identical(*s, want, when);
    for (const Held& h : held) expect_identical(*h.shared, h.copy, when + ": the trace shared at '" + h.what + "'");
    held.push_back({s, *s, st.what});
    if (held.size() > 2) held.erase(held.begin());
    EXPECT_LE(sharing.trace_copies(), 3u) << when << ": two held and the current one";
  }
  // Released, the traces are reused instead of piling up.
  held.clear();
  auto ids = session().back().ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(i);
    sharing.run(ids);
    sharing.share();  // dropped at once
  }
  EXPECT_LE(sharing.trace_copies(), 2u) << name;
}

TEST(SharedTrace, HeldTracesNeverChangeAndRunsMatchATwinThatCopiesNothing) {
  run_session(shared_gqa_model(), Engine::Matrices::kKeep, true, "keep, all logits");
  run_session(shared_gqa_model(), Engine::Matrices::kRecompute, false, "compact, last logits");
  run_session(local_model(), Engine::Matrices::kKeep, false, "gemma2, keep");
  run_session(local_model(), Engine::Matrices::kRecompute, true, "gemma2, compact");
}

TEST(SharedTrace, ASharedTraceOutlivesItsEngine) {
  std::shared_ptr<const Trace> s;
  Trace copy;
  {
    Engine e(shared_gqa_model(), make_cpu_backend());
    e.run(random_ids(30, 300, 4));
    s = e.share();
    copy = *s;
  }
  expect_identical(*s, copy, "after the engine is gone");
}

TEST(SharedTrace, WithRoomToGrowTypingMovesNoTensorAndMatchesATwin) {
  const auto m = shared_gqa_model();
  Engine typing(m, make_cpu_backend()), twin(m, make_cpu_backend());
  typing.set_room_to_grow(true);
  for (Engine* e : {&typing, &twin}) e->set_matrices(Engine::Matrices::kRecompute);
  auto ids = random_ids(200, 300, 12);
  typing.run(ids);
  twin.run(ids);
  std::shared_ptr<const Trace> held = typing.share();  // as the GUI's snapshot holds the last result
  // Storage of every row tensor of both traces the engine alternates between.
  auto storage = [](const Trace& t) {
    std::vector<const float*> p;
    for (const LayerTrace& lt : t.layers)
      for (const Tensor* x : {&lt.q, &lt.k, &lt.v, &lt.out, &lt.row_stats, &lt.resid}) p.push_back(x->data.data());
    p.push_back(t.final_hidden.data.data());
    p.push_back(t.final_resid.data.data());
    return p;
  };
  std::vector<std::vector<const float*>> seen;
  for (int i = 0; i < 40; ++i) {  // 200 + 40 tokens: within the quarter more room
    ids.push_back(i % 300);
    const Trace& t = typing.run(ids);
    expect_identical(t, twin.run(ids), "typed " + std::to_string(ids.size()));
    held = typing.share();
    const auto now = storage(t);
    if (std::find(seen.begin(), seen.end(), now) == seen.end()) {
      if (seen.size() >= 2)
        for (size_t k = 0; k < now.size(); ++k)
          if (now[k] != seen[seen.size() - 2][k]) ADD_FAILURE() << "tensor " << k << " of " << now.size() << " moved at key " << i;
      seen.push_back(now);
    }
  }
  EXPECT_EQ(seen.size(), 2u) << "two traces, each laid out once: no tensor moved while typing";
  EXPECT_EQ(typing.trace_copies(), 2u);
  // Without the room the first keys move the tensors (what the room is for).
  Engine plain(m, make_cpu_backend());
  plain.set_matrices(Engine::Matrices::kRecompute);
  auto ids2 = random_ids(200, 300, 12);
  const float* q0 = plain.run(ids2).layers[0].q.data.data();
  ids2.push_back(1);
  EXPECT_NE(plain.run(ids2).layers[0].q.data.data(), q0);
}

TEST(CopyChanged, CopiesTheChangedRowsToTheSameValuesAsAWholeCopy) {
  const auto m = shared_gqa_model();
  for (auto matrices : {Engine::Matrices::kKeep, Engine::Matrices::kRecompute}) {
    Engine e(m, make_cpu_backend());
    e.set_matrices(matrices);
    auto ids = random_ids(70, 300, 9);
    Trace before = e.run(ids);
    ids.push_back(3);  // appended: rows from 70, and (T, T) matrices gain a column
    const Trace& after = e.run(ids);
    ASSERT_EQ(e.last_recomputed_from(), 70);
    Trace d = before;
    copy_changed(d, after, 70, 1 << 30);
    expect_identical(d, after, "appended");
    // Claiming fewer rows changed than did leaves the rest stale: the test can tell.
    Trace stale = before;
    ids[60] = (ids[60] + 1) % 300;
    const Trace& edited = e.run(ids);
    ASSERT_EQ(e.last_recomputed_from(), 60);
    copy_changed(stale, edited, 70, 1 << 30);
    EXPECT_FALSE(same_bits(stale.layers[0].q, edited.layers[0].q)) << "rows 60 … 69 were not copied";
    copy_changed(d, edited, 60, 1 << 30);
    expect_identical(d, edited, "edited at 60");
    ids.resize(50);  // shrinks
    const Trace& shorter = e.run(ids);
    copy_changed(d, shorter, e.last_recomputed_from(), 1 << 30);
    expect_identical(d, shorter, "deleted to 50");
    Ablation a;
    a.heads = {{1, 2}};
    e.set_ablation(a);
    const Trace& ablated = e.run(ids);
    ASSERT_EQ(e.last_recomputed_from_layer(), 1);
    copy_changed(d, ablated, 1 << 30, 1);  // every row of layers 1 and 2, and the final rows
    expect_identical(d, ablated, "ablated from layer 1");
  }
}

TEST(UpdateHeadValues, TheKeptRowsPlusTheNewRowsAreTheWholeHead) {
  for (const auto& m : {shared_gqa_model(), local_model()}) {
    for (auto matrices : {Engine::Matrices::kKeep, Engine::Matrices::kRecompute}) {
      Engine e(m, make_cpu_backend());
      e.set_matrices(matrices);
      const auto ids = random_ids(30, 300, 2);
      const int L = m->config.n_layer, H = m->config.n_head;
      for (Stage s : {Stage::Probs, Stage::Masked}) {
        e.run(ids);
        std::vector<std::vector<float>> shown(static_cast<size_t>(L * H));
        std::vector<int64_t> ld(static_cast<size_t>(L * H), 30);
        for (int l = 0; l < L; ++l)
          for (int h = 0; h < H; ++h) {
            std::vector<float>& v = shown[static_cast<size_t>(l * H + h)];
            const float* p = e.trace().layers[l].head_values(s, h, v);
            if (p != v.data()) v.assign(p, p + 30 * 30);
          }
        int moved = 0;
        auto edits = ids;
        int T_old = 30;
        for (int step = 0; step < 12; ++step) {
          if (step == 3) edits[10] = (edits[10] + 1) % 300;  // an edit: rows from 10
          else if (step == 4) edits.resize(edits.size() - 2);  // two deleted
          else edits.push_back(step);
          const Trace& t = e.run(edits);
          const int kept = e.last_recomputed_from();
          for (int l = 0; l < L; ++l)
            for (int h = 0; h < H; ++h) {
              std::vector<float>& v = shown[static_cast<size_t>(l * H + h)];
              std::vector<float> whole;
              const float* want = t.layers[l].head_values(s, h, whole);
              int64_t& pitch = ld[static_cast<size_t>(l * H + h)];
              const int64_t before = pitch;
              const float* got = t.layers[l].update_head_values(s, h, T_old, kept, v, &pitch);
              moved += pitch != before;
              ASSERT_GE(pitch, t.T());
              for (int i = 0; i < t.T(); ++i)
                ASSERT_EQ(std::memcmp(got + i * pitch, want + i * t.T(), static_cast<size_t>(t.T()) * 4), 0)
                    << stage_name(s) << " layer " << l << " head " << h << " step " << step << " T " << t.T() << " row " << i;
            }
          T_old = t.T();
        }
        EXPECT_EQ(moved, L * H) << "the rows move once, when T first passes 30, then grow in place";
      }
    }
  }
}

}  // namespace
}  // namespace attnviz
