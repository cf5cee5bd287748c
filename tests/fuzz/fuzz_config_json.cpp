// config.json: the bytes as the loader reads them, through the one JSON reader
// (core/json_reader.h: NUL, size and nesting refused with an attnviz::Error), then the
// config parsed and its parameter counts and memory estimate computed.
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/model/config.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(config_json) {
  nlohmann::json j;
  try {
    j = attnviz::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const attnviz::Error&) {  // not JSON, a NUL byte, too deep: the loader reports them
    return;
  }
  try {
    const attnviz::ModelConfig c = attnviz::parse_config(j, "config.json");
    (void)attnviz::parameter_counts(c).total();
    (void)c.group_size();
    (void)attnviz::config_to_json(c).dump();
    attnviz::check_trace_memory(c, c.n_ctx);
  } catch (const attnviz::Error&) {
  }
}
