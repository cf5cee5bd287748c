#include "core/engine/patch.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/engine/lens.h"
#include "core/engine/ops.h"
#include "core/engine/int8_product.h"
#include "core/engine/stored_product.h"
#include "core/error.h"

namespace attnviz {

namespace {

// A full pass of `window` into a fresh trace that records no (T, T) matrices and no logits
// (patching reads only the streams, the head outputs and final_hidden).
Trace clean_run(const Model& m, Backend& backend, const std::vector<int>& window) {
  check_trace_memory(m.config, static_cast<int64_t>(window.size()), true, false);
  Trace tr;
  tr.model = m.name;
  tr.backend = backend.name();
  tr.arith = arith_name(backend.uses_stored_products() ? arith_for(m.weights, arith()) : Arith::F32);
  tr.block_size = static_cast<int>(window.size());
  tr.compact = true;
  tr.all_logits = false;
  tr.hidden_only = true;
  backend.forward(m, window, 0, tr);
  return tr;
}

// Row r0 of a (T, C) stream tensor, and the rows after it.
float* stream_rows(Tensor& t, int r0) { return t.data.data() + static_cast<size_t>(r0) * t.dim(1); }

bool same_bits(const float* x, const float* y, size_t n) { return std::memcmp(x, y, n * sizeof(float)) == 0; }

}  // namespace

double patch_metric(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids) {
  const int C = m.config.n_embd;
  const Mat h = Eigen::Map<const Mat>(tr.final_hidden.data.data() + static_cast<size_t>(position) * C, 1, C);  // (1, C)
  Mat y(1, 1);
  double v = 0;
  for (size_t k = 0; k < target_ids.size(); ++k) {
    linear_bt(h, m.weights.unembedding(), y, target_ids[k], 1);  // (1, 1): the target's logit
    finish_logits(m.config, y.data(), 1);
    v += (k == 0 ? 1.0 : -1.0) * static_cast<double>(y(0, 0));
  }
  return v;
}

PatchResult activation_patching(const Model& m, const std::vector<int>& a, const std::vector<int>& b,
                                const PatchRequest& request, const std::function<bool(int, int)>& progress) {
  const ModelConfig& c = m.config;
  const int L = c.n_layer, H = c.n_head, C = c.n_embd, V = c.vocab_size;
  if (a.size() != b.size())
    throw Error("the two prompts have different token counts (A: " + std::to_string(a.size()) + ", B: " +
                std::to_string(b.size()) +
                "); patching takes activations position by position, so it needs prompts of the same length\n"
                "  HINT: reword one prompt, or pass --tokens/--other-tokens of equal length.");
  check_token_ids(a, V);
  check_token_ids(b, V);
  const int T = static_cast<int>(a.size());
  const int pos = request.position < 0 ? T - 1 : request.position;
  if (request.position < -1 || pos >= T)
    throw Error("position " + std::to_string(request.position) + " is outside the text (" + std::to_string(T) +
                    " tokens: 0 … " + std::to_string(T - 1) + ")",
                ErrorKind::Usage);
  if (request.target_ids.size() > 2)
    throw Error("patching takes one target id or two (the logit of A minus that of B)", ErrorKind::Usage);
  if (request.kind == PatchKind::Heads && c.any_linear())  // a head's output is swapped in by ablation, which
    throw Error("patching heads does not cover " + c.model_type +  // stops at softmax layers for now
                    "'s linear-attention and convolution layers yet\n  HINT: patch the residual stream (--resid), "
                    "which covers every layer.",
                ErrorKind::Usage);
  for (int id : request.target_ids)
    if (id < 0 || id >= V)
      throw Error("target id " + std::to_string(id) + " is outside the vocabulary (0 … " + std::to_string(V - 1) + ")",
                  ErrorKind::Usage);

  const std::unique_ptr<Backend> backend = make_cpu_backend();
  Trace work = clean_run(m, *backend, a);  // A's run; the patched passes overwrite its later layers
  PatchResult r;
  r.position = pos;
  r.target_ids = request.target_ids.empty() ? std::vector<int>{predicted_token(m, work, pos)} : request.target_ids;
  r.metric = r.target_ids.size() > 1 ? "logit_diff" : "logit";
  r.clean = patch_metric(m, work, pos, r.target_ids);

  // One layer's head outputs (H, T, d), dense, or its stream's T rows (T, C), as plain vectors.
  auto outputs_of = [](const LayerTrace& lt) {
    const Tensor out = lt.out.dense_copy();
    return std::vector<float>(out.data.begin(), out.data.end());
  };
  auto stream_of = [&](const LayerTrace& lt) {
    return std::vector<float>(lt.resid.data.begin(), lt.resid.data.begin() + int64_t{T} * C);
  };
  // A's own head outputs or stream (to see where B's differ, and to put A's rows back).
  std::vector<std::vector<float>> a_out, a_resid;  // (L) of (H, T, d); (L) of (T, C)
  for (const LayerTrace& lt : work.layers) {
    if (request.kind == PatchKind::Heads) a_out.push_back(outputs_of(lt));
    else a_resid.push_back(stream_of(lt));
  }
  // What B's run gives: the heads' outputs, or its stream rows.
  auto source = std::make_shared<HeadOutputs>();  // (L) of (H, T, d)
  std::vector<std::vector<float>> b_resid;        // (L) of (T, C)
  {
    const Trace tb = clean_run(m, *backend, b);
    r.other = patch_metric(m, tb, pos, r.target_ids);
    for (const LayerTrace& lt : tb.layers) {
      if (request.kind == PatchKind::Heads) source->out.push_back(outputs_of(lt));
      if (request.kind == PatchKind::Heads && c.per_layer_attention()) source->d_of.push_back(lt.out.dim(2));
      else b_resid.push_back(stream_of(lt));
    }
    source->T = T, source->d = c.head_size;
  }

  const int cols = request.kind == PatchKind::Heads ? H : T;
  r.grid.assign(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(cols), r.clean));
  int done = 0;
  const int total = L * cols;
  const auto step = [&] {
    if (progress && !progress(++done, total)) throw Cancelled();
  };
  // A pass recomputes rows [from, T) of layers [l, L) and keeps rows [0, from) as they are:
  // they must still be A's. Passes go from the last layer down (and, for the stream, from
  // the last position down), so the rows an earlier pass changed start at `dirty` or later,
  // in layers at or above the current one.
  int dirty = T;
  const auto start_row = [&](int layer, int from) {
    from = request.incremental ? std::min(from, dirty) : 0;
    dirty = std::min(dirty, from);
    if (request.kind == PatchKind::Resid) {  // A's rows back in, from `from` on
      const float* mine = a_resid[static_cast<size_t>(layer)].data();
      std::copy(mine + static_cast<size_t>(from) * C, mine + static_cast<size_t>(T) * C,
                stream_rows(work.layers[static_cast<size_t>(layer)].resid, from));
    }
    return from;
  };
  const auto metric_after = [&](int layer, int from) {
    if (!backend->forward_from_layer(m, a, layer, work, from))
      throw Error("activation patching: the backend could not start a pass at layer " + std::to_string(layer));
    ++r.passes;
    return patch_metric(m, work, pos, r.target_ids);
  };

  if (request.kind == PatchKind::Heads) {
    // A head whose output B leaves equal to A's up to row `first` changes nothing before it:
    // its pass starts there. A head B leaves unchanged (first = T) is A's run.
    for (int l = L - 1; l >= 0; --l)
      for (int h = 0; h < H; ++h) {
        const float* theirs = source->head(l, h);
        const int d = c.head_size_at(l);  // Gemma 4's differ by layer
        const float* mine = a_out[static_cast<size_t>(l)].data() + static_cast<size_t>(h) * T * d;
        int first = 0;
        while (first < T && same_bits(theirs + static_cast<size_t>(first) * d, mine + static_cast<size_t>(first) * d,
                                      static_cast<size_t>(d)))
          ++first;
        if (first < T || !request.incremental) {
          backend->set_ablation(Ablation{AblationMode::Zero, {{l, h}}, source});
          r.grid[static_cast<size_t>(l)][static_cast<size_t>(h)] = metric_after(l, start_row(l, first));
        }
        step();
      }
    return r;
  }

  // The stream entering layer l at position t: only rows t … T−1 of layers l … L−1 can
  // change, so the pass starts at row t (the rows before are the KV cache). A row B leaves
  // equal to A's, and a position after the metric's, leave A's run as it is.
  for (int t = T - 1; t >= 0; --t)
    for (int l = L - 1; l >= 0; --l) {
      const float* mine = a_resid[static_cast<size_t>(l)].data() + static_cast<size_t>(t) * C;
      const float* theirs = b_resid[static_cast<size_t>(l)].data() + static_cast<size_t>(t) * C;
      if (t <= pos && (!request.incremental || !same_bits(mine, theirs, static_cast<size_t>(C)))) {
        const int from = start_row(l, t);
        std::copy_n(theirs, C, stream_rows(work.layers[static_cast<size_t>(l)].resid, t));
        r.grid[static_cast<size_t>(l)][static_cast<size_t>(t)] = metric_after(l, from);
      }
      step();
    }
  return r;
}

}  // namespace attnviz
