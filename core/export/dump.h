// The pinned dump format: one safetensors file with every recorded matrix
// (see ARCHITECTURE.md, "attnviz-cli dump").
#pragma once
#include <string>

#include "core/engine/trace.h"

namespace attnviz {

// "layers.{l}.{stage}" as in the dump.
std::string dump_tensor_name(int layer, Stage s);

// Writes `trace` atomically to `path`; throws attnviz::Error when it cannot.
void write_dump(const Trace& trace, const std::string& path);

}  // namespace attnviz
