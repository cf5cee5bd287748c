// The Jinja interpreter (core/chat/jinja.h): the bytes as a template, parsed, then rendered
// for a fixed conversation with tools, as render_chat_template's callers do. Syntax errors,
// unsupported constructs, raise_exception and every limit are attnviz::Errors. The step
// limit is lowered to 200000 and the work limit to 4·10^6 units so that each input renders
// in well under a second under the sanitizers; the full limits are unit tests
// (test_jinja.cpp). scripts/fuzz.sh also seeds it with ../shared/chat-templates (real
// templates, read there, never copied).
#include <nlohmann/json.hpp>
#include <string>

#include "core/chat/jinja.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(chat_template) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9 \u2713"},
                 {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                   "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null, true]}}}]},
                 {"role": "tool", "content": "ok"}, {"role": "user", "content": [{"type": "text", "text": "more"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "enable_thinking": false})");
  try {
    const attnviz::JinjaTemplate t =
        attnviz::JinjaTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(context, "2026-01-15", 200000, nullptr, 4'000'000);
  } catch (const attnviz::Error&) {  // refused with a message: what the template's users see
  }
}
