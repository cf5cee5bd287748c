// A Jinja2 interpreter for chat templates: the subset of the language that the templates
// models ship with use (tokenizer_config.json's `chat_template`, GGUF
// `tokenizer.chat_template`, chat_template.jinja), rendering as Python's jinja2 does when it
// is set up as Hugging Face transformers sets it up for apply_chat_template:
// an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, no trailing newline
// kept, the loopcontrols extension (break, continue), transformers' {% generation %} tag,
// the globals raise_exception(msg) and strftime_now(fmt), and a `tojson` filter that is
// Python's json.dumps with ensure_ascii=False.
//
// Debian has no C++ Jinja library, hence this one. What it covers: text, {{ }} output,
// comments, whitespace control (-, +), if/elif/else, for (loop.*, unpacking, for-else,
// for-if, break, continue), set (names, tuples, namespace attributes, block set), macros
// (positional, keyword and default arguments), namespace(), range(), dict(); expressions
// with Python's semantics (and/or return operands, int and float arithmetic, `~`, `in`,
// slices, inline if); the filters and tests the real templates use plus the common ones;
// string, dict and list methods. Anything else (extends, include, import, call blocks,
// recursive loops, % string formatting, unknown filters or tests) is refused with an
// attnviz::Error naming the construct and the template's line.
//
// Templates are untrusted input: a template over kMaxTemplateBytes is refused, and a
// render stops with an Error after kMaxTemplateSteps steps, kMaxTemplateWork units of work,
// kMaxTemplateDepth levels of nesting (parser, macro calls, values) or
// kMaxTemplateOutputBytes of text. Values are shared, never copied, when a template reads
// them (strings, lists and dicts are immutable and reference-counted, as jinja2's Python
// objects are), so that a step costs what it does: reading a 60 MB string is one step and
// no work, building one is 60 M units of work.
#pragma once
#include <nlohmann/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace attnviz {

// Largest template accepted: 1 MiB (the largest real ones are under 20 kB).
constexpr int64_t kMaxTemplateBytes = int64_t{1} << 20;
// Most steps (statements, expression nodes, loop iterations) one render may take. Real
// templates take a few thousand (a hundred or so per message); a template that loops
// forever stops here, after about a second (2 s under the sanitizers).
constexpr int64_t kMaxTemplateSteps = 2'000'000;
// Most work one render may do, beside its steps: a unit is a byte built, copied, compared
// or scanned; a byte decoded as part of a code point (case mapping, repr, split on
// whitespace) is 8 units, and an item visited (a list item copied, two values compared, a
// dict entry made) 16. The slowest kinds of work (sorting strings, title-casing, going
// through a string character by character) take up to about 3.5 ns a unit on this 2-core
// machine, plain copies far less, so that any template stops within about a second; real
// templates spend a few units per byte of their output.
constexpr int64_t kMaxTemplateWork = int64_t{1} << 28;
// Deepest nesting: of blocks and expressions when parsing, of macro calls when rendering,
// and of lists and dicts a template builds.
constexpr int kMaxTemplateDepth = 256;
// Most items in one list a template builds (range(), `*`, `+`, filters).
constexpr int64_t kMaxTemplateListItems = 1'000'000;
// Longest text a render, or any one string it builds, may reach: 64 MiB.
constexpr int64_t kMaxTemplateOutputBytes = int64_t{64} << 20;

namespace jinja {
struct Program;  // the parsed template (core/chat/jinja.cpp)
}

// What one render spent (JinjaTemplate::render fills it in when asked, also when the render
// stops with an Error): steps against kMaxTemplateSteps, work against kMaxTemplateWork.
struct JinjaRenderStats {
  int64_t steps = 0;
  int64_t work = 0;
};

// A parsed template. Parsing checks the syntax and that every tag, filter and test is one
// this interpreter knows; errors name the line. A parsed template can render any number of
// times, from any thread (render keeps its state on the stack of the call).
class JinjaTemplate {
 public:
  // Throws a data Error ("chat template line N: ...") on a syntax error, an unsupported
  // construct, or a template over kMaxTemplateBytes.
  static JinjaTemplate parse(const std::string& source);
  // Renders with `context`'s keys as the template's variables. `context` is ordered_json
  // because Python keeps the order of a dict's keys and the output shows it (tojson, dict
  // loops). `date` is what strftime_now formats: "YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS";
  // empty means now (local time). Throws a data Error naming the line on any failure,
  // raise_exception(msg) included (the message carries msg).
  // `max_steps` and `max_work` lower the limits (the fuzz target's renders must stay short);
  // `stats`, when given, receives what the render spent.
  std::string render(const nlohmann::ordered_json& context, const std::string& date = "",
                     int64_t max_steps = kMaxTemplateSteps, JinjaRenderStats* stats = nullptr,
                     int64_t max_work = kMaxTemplateWork) const;

 private:
  std::shared_ptr<const jinja::Program> program_;
};

// What render_chat_template passes besides the messages, as transformers does.
struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Undefined in the template when not set (a model without a BOS token).
  std::optional<std::string> bos_token, eos_token;
  // What strftime_now sees ("YYYY-MM-DD"); empty = today.
  std::string date;
  // More variables (tools, documents, enable_thinking, ...); they override the above.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// Parses and renders `tmpl` with messages, add_generation_prompt, bos_token, eos_token,
// tools = None and documents = None (transformers' defaults), then `o.extra`.
std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& messages,
                                 const ChatRenderOptions& o = {});

}  // namespace attnviz
