// The pinned dump format: one safetensors file with every recorded matrix
// (see ARCHITECTURE.md, "attnviz-cli dump").
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/engine/trace.h"

namespace attnviz {

// "layers.{l}.{stage}" as in the dump.
std::string dump_tensor_name(int layer, Stage s);

// Writes `trace` atomically to `path`; throws attnviz::Error when it cannot. `extra`
// tensors (name, dense tensor) are written after the pinned ones.
void write_dump(const Trace& trace, const std::string& path,
                const std::vector<std::pair<std::string, const Tensor*>>& extra = {});

}  // namespace attnviz
