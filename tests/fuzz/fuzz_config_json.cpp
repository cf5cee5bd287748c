// config.json: the bytes as the loader sees them (NUL refused, JSON parsed; the loader turns
// every JSON exception into an attnviz::Error), then the
// config parsed and its parameter counts and memory estimate computed.
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/model/config.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(config_json) {
  if (std::memchr(data, 0, size)) return;  // the loader refuses NUL bytes before parsing
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {  // parse errors, number overflow: the loader reports them
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
