// jinja_render TEMPLATE CONTEXT.json [DATE]: renders a Jinja template with core/chat/jinja
// and prints the text, byte for byte, for tests/reference/chat_templates.py to compare with
// Python's jinja2. CONTEXT.json is an object whose keys become the template's variables
// (key order kept, read by parse_json_ordered as attnviz-cli chat reads messages); DATE is
// what strftime_now sees. On an error: the message on stderr, exit status 1 (2 for bad
// usage).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/chat/jinja.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace {
std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw attnviz::Error(std::string("cannot read ") + path, attnviz::ErrorKind::Usage);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: jinja_render TEMPLATE CONTEXT.json [DATE]\n");
    return 2;
  }
  try {
    const auto ctx = attnviz::parse_json_ordered(slurp(argv[2]), argv[2]);
    const std::string out = attnviz::JinjaTemplate::parse(slurp(argv[1])).render(ctx, argc > 3 ? argv[3] : "");
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const attnviz::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "error: %s: %s\n", argv[2], e.what());
    return 2;
  }
}
