// The pinned dump format: one safetensors file with every recorded matrix (README.md, "Dump
// tensors", lists the names, shapes and metadata keys).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/engine/trace.h"
#include "core/model/safetensors.h"

namespace attnviz {

// "layers.{l}.{stage}" as in the dump.
std::string dump_tensor_name(int layer, Stage s);

// What a dump writes (attnviz-cli dump --layers/--heads/--stages): empty lists mean all.
// Selected tensors keep their names and shapes, except that with `heads` the head axis
// holds the selected query heads in order; for k and v (whose axis is the KV heads) it
// holds the KV heads those query heads read, each once, in order of first use.
struct DumpSelection {
  std::vector<int> layers;            // layer indices, in order
  std::vector<int> heads;             // query head indices, in order
  std::vector<std::string> stages;    // q, k, v, scores, scaled, masked, probs, out, logits, resid
                                      // (resid: only when listed, never by default)
  bool empty() const { return layers.empty() && heads.empty() && stages.empty(); }
  std::string to_string() const;      // for the dump's metadata: "layers=0,2;heads=1;stages=probs"
};

// "0,2,4-6" → {0, 2, 4, 5, 6}: every index in [0, count), no repeats; a usage Error naming
// `what` ("--layers") otherwise. "" → {} (all).
std::vector<int> parse_index_list(const std::string& list, int count, const std::string& what);
// "probs,logits" → the names, checked against the dump's stage names, "logits" and "resid".
std::vector<std::string> parse_stage_list(const std::string& list);

// The dump's tensors and metadata as write_dump writes them, gathered without writing (the
// Python module lends them as arrays). Borrowed and generated tensors read `trace` and
// `extra`, which must outlive the writer. Throws the selection's usage errors.
SafetensorsWriter dump_tensors(const Trace& trace, const std::vector<std::pair<std::string, const Tensor*>>& extra = {},
                               const DumpSelection& sel = {});

// Writes `trace` atomically to `path`; throws attnviz::Error when it cannot. `extra`
// tensors (name, dense tensor) are written after the pinned ones. `sel` limits what is
// written (the token ids are always written).
void write_dump(const Trace& trace, const std::string& path,
                const std::vector<std::pair<std::string, const Tensor*>>& extra = {},
                const DumpSelection& sel = {});

}  // namespace attnviz
