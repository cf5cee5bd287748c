// The chat-template interpreter (core/chat/jinja.h). Every expected string here was printed
// by Python's jinja2 3.1.6, set up as transformers sets it up (tests/reference/
// chat_templates.py's environment()), for the same template and context; none was copied
// from this interpreter's output. Then the errors and the limits, and every template in
// ../shared/chat-templates against jinja2's renderings stored beside it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/chat/jinja.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using ojson = nlohmann::ordered_json;

// The context of the construct cases (key order as Python's dict has it).
ojson context() {
  return ojson::parse(R"({"msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    "d": {"b": 1, "a": [1, 2], "c": {"x": null}}, "s": "  Hello World  ", "n": 7, "f": 2.5, "t": true,
    "u8": "h\u00e9llo \u2713", "none": null})");
}

std::string render(const std::string& tmpl, const ojson& ctx = context()) {
  return JinjaTemplate::parse(tmpl).render(ctx, "2026-01-15");
}

// The message of the Error that parsing or rendering `tmpl` throws, or "rendered".
std::string error_of(const std::string& tmpl, const ojson& ctx = context()) {
  try {
    render(tmpl, ctx);
    return "rendered";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1) << e.what();
    return e.what();
  }
}
using test::has;

struct Case {
  const char* name;
  const char* tmpl;
  const char* want;  // jinja2's output
};

// One construct per case: whitespace control, literals, operators, access, statements,
// filters, tests, methods, globals.
const Case kCases[] = {
    {"ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB",
     "A\nB"},
    {"ws_lstrip", "x\n    {% if true %}\n    y\n    {% endif %}\nz",
     "x\n    y\nz"},
    {"ws_lstrip_not_after_var", "{{ 1 }}  {% if true %}A{% endif %}",
     "1  A"},
    {"ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c {{- ' d ' -}} e",
     "abc d e"},
    {"ws_plus", "x\n  {%+ if true %}y{% endif %}",
     "x\n  y"},
    {"ws_comment", "a\n  {# note #}\nb {#- c -#} d",
     "a\nbd"},
    {"ws_trailing_newline", "line\n",
     "line"},
    {"ws_var_no_trim", "{{ 1 }}\n{{ 2 }}\n",
     "1\n2"},
    {"ws_crlf", "a\015\n{% if true %}\015\nb\015\n{% endif %}\015\n",
     "a\nb\n"},
    {"lit_strings", "{{ 'a\\'b' }}|{{ \"q\\\"\\n\\t\\\\\" }}|{{ '\\x41\\u00e9' }}|{{ 'ab' 'cd' }}",
     "a'b|q\"\n\t\\|A\303\251|abcd"},
    {"lit_numbers", "{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e16 }} {{ 0.0001 }} {{ 1_000 }} {{ -3 }} {{ 0.1 + 0.2 }}",
     "1 1.0 1500.0 1e+16 0.0001 1000 -3 0.30000000000000004"},
    {"lit_consts", "{{ true }} {{ False }} {{ none }} {{ None }}",
     "True False None None"},
    {"lit_list_dict", "{{ [1, 'a', none, true, 1.5, [2]] }} {{ {'k': 'v', 'n': [1]} }} {{ (1,) }} {{ (1, 'x') }} {{ \"it's\" }} {{ ['it\\'s', 'a\"b'] }}",
     "[1, 'a', None, True, 1.5, [2]] {'k': 'v', 'n': [1]} (1,) (1, 'x') it's [\"it's\", 'a\"b']"},
    {"print_dict_ctx", "{{ d }}|{{ msgs[0] }}",
     "{'b': 1, 'a': [1, 2], 'c': {'x': None}}|{'role': 'user', 'content': 'hi'}"},
    {"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 10 / 4 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2.0 }} {{ true + 1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
     "3 -4 2 -2 2.5 1024 0.5 3.0 2 3.0 0.5"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ 'x' + 'y' }}",
     "a1NoneTrue[1]|ababab|[1, 1]|[1, 2]|xy"},
    {"compare", "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != 2 }} {{ none == none }} {{ 1 == '1' }} {{ 2 >= 2 }} {{ true == 1 }}",
     "True True True True True False True True"},
    {"in_ops", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'a' in d }} {{ 'z' not in d }} {{ 3 not in [1] }}",
     "True True True True True"},
    {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ not none }} {{ none or [] }} {{ not 1 == 2 }}",
     "x y  True [] True"},
    {"inline_if", "{{ 'y' if t else 'n' }}|{{ 'y' if not t else 'n' }}|{{ 'y' if false }}|",
     "y|n||"},
    {"attr_item", "{{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ d.c.x }} {{ d['a'][1] }} {{ d.missing }}|{{ msgs[5] }}|{{ none.x }}|",
     "user yo None 2 |||"},
    {"slices", "{{ msgs[1:] | length }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ [1,2,3,4][::2] }} {{ 'abc'[-1] }} {{ u8[1:3] }} {{ [1,2,3][-2:] }}",
     "1 bcd fedcba [1, 3] c \303\251l [2, 3]"},
    {"for_loop", "{% for m in msgs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {{ m.role }};{% endfor %}",
     "1/0/2/1/True/False/2 user;2/1/1/0/False/True/2 assistant;"},
    {"for_dict", "{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d | dictsort %}{{ k }};{% endfor %}",
     "b,a,c,|b=1;a=[1, 2];c={'x': None};|a;b;c;"},
    {"for_else_if", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }} {% endfor %}",
     "empty|22 42 "},
    {"for_prev_next_cycle", "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a','b') }} {% endfor %}",
     "-2-a 1-3-b 2--a "},
    {"for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "0134"},
    {"for_nested_loop", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }};{% endfor %}",
     "1x2y1;1x2y2;"},
    {"for_string", "{% for c in u8 %}[{{ c }}]{% endfor %}",
     "[h][\303\251][l][l][o][ ][\342\234\223]"},
    {"if_elif", "{% for n in [1,2,3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}",
     "one two many "},
    {"set_scoping", "{% set x = 1 %}{% for i in [1,2] %}[{{ x }}]{% set x = i * 10 %}({{ x }}){% endfor %}{{ x }}{% if true %}{% set x = 5 %}{% endif %}{{ x }}",
     "[1](10)[1](20)15"},
    {"set_tuple", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}",
     "12(1, 2)"},
    {"set_block", "{% set x %}  inner {{ 1 + 1 }}\n{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}",
     "[  inner 2\n]ABC"},
    {"namespace", "{% set ns = namespace(count=0, last=none) %}{% for m in msgs %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }} {{ ns.missing }}|",
     "2 assistant |"},
    {"macro", "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(punct='?', name='C') }}",
     "Hello, A! Hi, B! Hello, C?"},
    {"macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}",
     "120"},
    {"macro_scope", "{% set g = 'global' %}{% macro m() %}{{ g }}{% set g = 'local' %}{{ g }}{% endmacro %}{{ m() }} {{ g }}",
     "globallocal global"},
    {"generation_tag", "a{% generation %}b{{ 1 }}{% endgeneration %}c",
     "ab1c"},
    {"f_str", "{{ s | trim }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ s | replace('l', 'L') }}|{{ s | replace('l', '', 1) }}|{{ 'x,y' | trim(',x') }}",
     "Hello World|  HELLO WORLD  |  hello world  |Hello World|Hello|  HeLLo WorLd  |  Helo World  |y"},
    {"f_length", "{{ msgs | length }} {{ u8 | length }} {{ d | count }} {{ undefined_thing | length }}",
     "2 7 3 0"},
    {"f_default", "{{ missing | default('dflt') }} {{ none | default('x') }} {{ '' | default('e', true) }} {{ 0 | d(5) }} {{ missing | default }}|",
     "dflt None e 0 |"},
    {"f_join_list", "{{ [1, 2, 3] | join(', ') }} {{ 'abc' | list }} {{ d | list }} {{ msgs | map(attribute='role') | join('+') }} {{ ['a','b'] | map('upper') | list }}",
     "1, 2, 3 ['a', 'b', 'c'] ['b', 'a', 'c'] user+assistant ['A', 'B']"},
    {"f_first_last", "{{ [1,2,3] | first }} {{ [1,2,3] | last }} {{ 'abc' | first }} {{ [] | first }}|",
     "1 3 a |"},
    {"f_select", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('role', 'eq', 'user') | map(attribute='content') | first }} {{ [1,2,3,4] | select('odd') | list }} {{ ['a','code','b'] | reject('equalto', 'code') | join(',') }} {{ [0, 1, '', 'x'] | select | list }}",
     "1 yo [1, 3] a,b [1, 'x']"},
    {"f_sort", "{{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3,1,2] | sort(reverse=true) }} {{ msgs | sort(attribute='role', reverse=true) | map(attribute='role') | join }} {{ {'b': 1, 'A': 2} | dictsort }}",
     "['A', 'b', 'c'] ['A', 'b', 'c'] [3, 2, 1] userassistant [('A', 2), ('b', 1)]"},
    {"f_items_string", "{{ d | items | list }} {{ d | string }} {{ 5 | string }} {{ none | string }} {{ [1] | string }}",
     "[('b', 1), ('a', [1, 2]), ('c', {'x': None})] {'b': 1, 'a': [1, 2], 'c': {'x': None}} 5 None [1]"},
    {"f_int_float", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 3 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }}",
     "42 4 0 7 3 2.5 3.0 3 2.57"},
    {"f_indent", "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}",
     "a\n    b\n\n    c|  a\n  b|a\n  \n  b"},
    {"f_tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ '\303\251\"\\n\001' | tojson }}|{{ [1.0, 1e20, true, none] | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [] | tojson(indent=4) }}",
     "{\"b\": 1, \"a\": [1, 2], \"c\": {\"x\": null}}|{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ],\n  \"c\": {\n    \"x\": null\n  }\n}|\"\303\251\\\"\\n\\u0001\"|[1.0, 1e+20, true, null]|{\"a\": 2, \"b\": 1}|[]"},
    {"f_safe_misc", "{{ '<b>' | safe }} {{ [1,2,2,3] | unique | list }} {{ [1,2,3] | reverse | list }} {{ 'abc' | reverse }} {{ [1,2,3] | sum }} {{ [3,1,2] | max }} {{ [3,1,2] | min }} {{ 'a b  c' | wordcount }}",
     "<b> [1, 2, 3] [3, 2, 1] cba 6 3 1 3"},
    {"tests_types", "{{ s is string }} {{ d is mapping }} {{ msgs is sequence }} {{ msgs is iterable }} {{ n is number }} {{ f is float }} {{ n is integer }} {{ t is boolean }} {{ t is true }} {{ t is false }} {{ none is none }} {{ x is defined }} {{ x is undefined }} {{ d is string }} {{ s is mapping }} {{ 'x' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ x is sequence }}",
     "True True True True True True True True True False True False True False False True False True True"},
    {"tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 2 is equalto 2 }} {{ 'a' is in 'abc' }} {{ 5 is gt 3 }} {{ none is sameas none }} {{ 'ab' is lower }} {{ 3 is not string }} {{ x is not defined }} {{ 'a' is eq('a') }}",
     "True True True True True True True True True True True"},
    {"str_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ s.startswith('  He') }}|{{ s.endswith(('x', '  ')) }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'hi there'.title() }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.count('b') }}|{{ '-'.join(['a', 'b']) }}",
     "Hello World|Hello World  |  Hello World|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a,b', 'c']|True|True|a-b-|ABab|Hi There|1|2|a-b"},
    {"dict_methods", "{{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dv') }} {{ d.keys() | list }} {{ d.values() | list | length }} {{ d['items'] is defined }}",
     "1 None dv ['b', 'a', 'c'] 3 True"},
    {"globals", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ strftime_now('%Y-%m-%d %d %B %b %A %a %j') }} {{ raise_exception is defined }}",
     "[0, 1, 2] [1, 3, 5] [5, 3, 1] {'a': 1, 'b': 'x'} 2026-01-15 15 January Jan Thursday Thu 015 True"},
    {"unicode_case", "{{ '\303\251' | upper }} {{ u8 | length }} {{ u8[1] }} {{ u8 | tojson }}",
     "\303\211 7 \303\251 \"h\303\251llo \342\234\223\""},
};

TEST(Jinja, EachConstructAsJinja2RendersIt) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    std::string got;
    try {
      got = render(c.tmpl);
    } catch (const Error& e) {
      got = std::string("ERROR: ") + e.what();
    }
    EXPECT_EQ(got, c.want) << "case " << c.name;
  }
}

TEST(Jinja, RaiseExceptionCarriesTheMessageAndLine) {
  const std::string m = error_of("line1\n{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_TRUE(has(m, "Conversation roles must alternate")) << m;
  EXPECT_TRUE(has(m, "line 2")) << m;
}

TEST(Jinja, ErrorsNameTheLineAndTheConstruct) {
  struct E {
    const char* tmpl;
    std::vector<const char*> parts;
  };
  const E cases[] = {
      // where jinja2 raises UndefinedError, TypeError, TemplateSyntaxError ...
      {"a\n{{ x.y }}", {"line 2", "'x' is undefined"}},
      {"{{ x + 1 }}", {"line 1", "'x' is undefined"}},
      {"\n\n{{ 'a' + 1 }}", {"line 3", "can only concatenate str (not \"int\") to str"}},
      {"{% if %}", {"line 1", "expected an expression"}},
      {"{% if true %}x", {"line 1", "'endif'"}},
      {"\n{{ x | nosuchfilter }}", {"line 2", "filter 'nosuchfilter' is not supported"}},
      {"{{ x is nosuchtest }}", {"line 1", "test 'nosuchtest' is not supported"}},
      {"{% frobnicate %}", {"line 1", "unknown tag 'frobnicate'"}},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {"macro 'm' takes not more than 1 argument(s)"}},
      {"{{ x | tojson }}", {"Object of type Undefined is not JSON serializable"}},
      {"{% for x in 5 %}{% endfor %}", {"'int' object is not iterable"}},
      {"{% set x = 1 %}{% set x.y = 2 %}", {"cannot assign attribute 'y'", "namespace"}},
      // constructs jinja2 has and this interpreter does not: named, with the line
      {"x\n{% include 'other.jinja' %}", {"line 2", "'{% include %}' is not supported"}},
      {"{% extends 'base' %}", {"'{% extends %}' is not supported"}},
      {"{% call m() %}x{% endcall %}", {"'{% call %}' is not supported"}},
      {"{% for x in y recursive %}{% endfor %}", {"recursive for loops are not supported"}},
      {"{{ '%s' % 1 }}", {"'%' string formatting is not supported"}},
      {"{{ f(*args) }}", {"*args and **kwargs in calls are not supported"}},
      {"{{ 'abc }}", {"a string that is never closed"}},
      {"{# open comment", {"a comment that is never closed"}},
      {"{{ 1 ", {"missing '}}'"}},
      {"{{ [1, 2 }}", {"unexpected '}'"}},
      {"{{ ''.format(1) }}", {"'str object' has no attribute 'format'"}},
      {"{{ [1].append(2) }}", {"the sandbox forbids"}},
      {"{{ 1 // 0 }}", {"integer division by zero"}},
      // values stay acyclic: no namespace or loop object inside a container (jinja2 allows it)
      {"{% set ns = namespace() %}{% set ns.me = ns %}", {"namespace cannot be stored"}},
      {"{% for x in [1] %}{{ [loop] }}{% endfor %}", {"loop object cannot be stored"}},
      {"{{ 9223372036854775807 + 1 }}", {"integer overflow"}},
      // eight hex digits past U+10FFFF (once a signed overflow while lexing)
      {"{{ '\\UFFFFFFFF' }}", {"a bad \\U escape"}},
      {"{{ '\\U00110000' }}", {"a bad \\U escape"}},
  };
  for (const E& c : cases) {
    const std::string m = error_of(c.tmpl);
    for (const char* p : c.parts) EXPECT_TRUE(has(m, p)) << c.tmpl << "\n  -> " << m << "\n  wanted: " << p;
  }
}

TEST(Jinja, UndefinedBehavesAsJinja2Default) {
  // printed empty, falsy, iterable as nothing, length 0, equal only to undefined; a missing
  // attribute of a defined value is undefined, an attribute of undefined raises
  EXPECT_EQ(render("[{{ nope }}]{{ nope is defined }}{% if not nope %}F{% endif %}{% for x in nope %}x{% endfor %}"
                   "{{ nope | length }}{{ nope == nope2 }}{{ d.nope is defined }}{{ d.nope }}"),
            "[]FalseF0TrueFalse");
  EXPECT_TRUE(has(error_of("{{ d.nope.deeper }}"), "has no attribute 'nope'"));
  EXPECT_TRUE(has(error_of("{{ nope() }}"), "'nope' is undefined"));
}

TEST(Jinja, TemplateSizeLimit) {
  const std::string big(static_cast<size_t>(kMaxTemplateBytes) + 1, 'x');
  const std::string m = error_of(big);
  EXPECT_TRUE(has(m, "over the limit")) << m;
  // exactly at the limit is accepted
  EXPECT_EQ(render(std::string(static_cast<size_t>(kMaxTemplateBytes), 'x')).size(), static_cast<size_t>(kMaxTemplateBytes));
}

TEST(Jinja, StepLimitStopsEndlessLoops) {
  // nested loops over 10^4 x 10^4 items: 10^8 iterations, far past the step limit
  const std::string m = error_of("{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}");
  EXPECT_TRUE(has(m, "step limit")) << m;
  EXPECT_TRUE(has(m, "line 1")) << m;
  EXPECT_TRUE(has(error_of("{{ range(100000000) | length }}"), "list limit"));
  EXPECT_TRUE(has(error_of("{{ ([1, 2] * 600000) | length }}"), "list limit"));
  EXPECT_EQ(render("{{ range(1000000) | length }}"), "1000000");
  // a lower limit for one render
  const JinjaTemplate t = JinjaTemplate::parse("{% for i in range(1000) %}{{ i }}{% endfor %}");
  EXPECT_TRUE(has([&] {
    try {
      t.render(context(), "2026-01-15", 500);
      return std::string("rendered");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }(), "more than 500 steps"));
}

TEST(Jinja, DepthLimits) {
  // a macro that calls itself without end
  const std::string rec = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(has(rec, "recursion limit")) << rec;
  // parentheses, lists, unary operators, chained operators and nested blocks
  const std::string deep(400, '(');
  EXPECT_TRUE(has(error_of("{{ " + deep + "1" + std::string(400, ')') + " }}"), "nesting limit"));
  EXPECT_TRUE(has(error_of("{{ " + std::string(400, '[') + std::string(400, ']') + " }}"), "nesting limit"));
  EXPECT_TRUE(has(error_of("{{ " + std::string(400, '-') + "1 }}"), "nesting limit"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_TRUE(has(error_of(chain + " }}"), "nesting limit"));
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 300; ++i) blocks += "{% endif %}";
  EXPECT_TRUE(has(error_of(blocks), "nesting limit"));
  // a list nested in a loop deeper and deeper
  const std::string m = error_of(
      "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | length }}");
  EXPECT_TRUE(has(m, "nesting limit")) << m;
  // well within the limits: 100 levels of each
  EXPECT_EQ(render("{{ " + std::string(100, '(') + "7" + std::string(100, ')') + " }}"), "7");
}

TEST(Jinja, OutputLimit) {
  const std::string m = error_of("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}");
  EXPECT_TRUE(has(m, "output limit")) << m;
  EXPECT_TRUE(has(error_of("{{ 'x' * 100000000000 }}"), "output limit"));
}

// The message of the Error that rendering `tmpl` throws (or "rendered"), with what the
// render spent and a lowered work limit.
std::string error_of_work(const std::string& tmpl, int64_t max_work, JinjaRenderStats* stats = nullptr) {
  try {
    JinjaTemplate::parse(tmpl).render(context(), "2026-01-15", kMaxTemplateSteps, stats, max_work);
    return "rendered";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Jinja, ReadingAValueCopiesNothing) {
  // A 1 MB string read 4,000 and 100,000 times: each read shares the string (its length is
  // counted once), so the work is the building of the string, whatever the loop's length.
  // Copied on each read, as before, the 4,000 reads took 8 s and charged 4·10^9 bytes.
  for (const char* n : {"4000", "100000"}) {
    SCOPED_TRACE(n);
    JinjaRenderStats st;
    const std::string out = JinjaTemplate::parse(std::string("{% set s = 'a' * 1000000 %}{% set ns = namespace(n=0) %}"
                                                             "{% for i in range(") +
                                                 n +
                                                 ") %}{% set t = s %}{% set ns.n = t|length %}{% endfor %}"
                                                 "{{ ns.n }}")
                                .render(context(), "2026-01-15", kMaxTemplateSteps, &st);
    EXPECT_EQ(out, "1000000");
    // 1 MB built, 1 MB counted once, and range()'s items made and visited (32 units each)
    EXPECT_LT(st.work, 2'500'000 + 40 * std::stoll(n)) << "work " << st.work;
    EXPECT_GT(st.steps, std::stoll(n));
  }
  // a list of a million items passed around, indexed and measured: no item copied
  JinjaRenderStats st;
  EXPECT_EQ(JinjaTemplate::parse("{% set l = range(1000000) | list %}{% for i in range(10000) %}{% set m = l %}"
                                 "{% endfor %}{{ l[999999] }} {{ l | length }} {{ l | last }}")
                .render(context(), "2026-01-15", kMaxTemplateSteps, &st),
            "999999 1000000 999999");
  // range() makes 10^6 items, list() visits and makes them again: 48·10^6 units, and the
  // 10,000 reads add almost nothing
  EXPECT_LT(st.work, 50'000'000) << "work " << st.work;
}

TEST(Jinja, WorkLimitStopsCostlyTemplatesAndNamesTheLine) {
  // Each runs far inside the step limit and would run for minutes without the work limit
  // (a 1 MB string copied 100,000 times is 100 GB): stopped, with the line, at the full
  // limit (plain copies) or at a lowered one (to keep the test short under sanitizers).
  const std::string m =
      error_of("{% set s = 'a' * 1000000 %}\n{% for i in range(100000) %}{% set t = s ~ '' %}{% endfor %}");
  EXPECT_TRUE(has(m, "work limit")) << m;
  EXPECT_TRUE(has(m, "line 2")) << m;
  const int64_t lowered = 20'000'000;
  const char* const costly[] = {
      // sort, `in` and equality over a long list, again and again
      "\n{% set l = range(100000) | map('string') | list %}{% for i in range(100) %}{% set t = l | sort %}{% endfor %}",
      "\n{% set l = range(100000) | list %}{% for i in range(10000) %}{% if -1 in l %}{% endif %}{% endfor %}",
      "\n{% set l = range(100000) | list %}{% set k = range(100000) | list %}{% for i in range(1000) %}"
      "{% if l == k %}{% endif %}{% endfor %}",
      // case mapping, reprs and JSON of long non-ASCII text
      "\n{% set s = '\u00e9' * 1000000 %}{% for i in range(1000) %}{% set t = s.upper() %}{% endfor %}",
      "\n{% set s = '\u00e9' * 100000 %}{% for i in range(1000) %}{% set t = [s] | string %}{% endfor %}",
      "\n{% set s = '\u00e9' * 100000 %}{% for i in range(1000) %}{% set t = [s, s] | tojson %}{% endfor %}",
      // a substring search that a plain find makes quadratic (10^7 x 5,000 compares each)
      "\n{% set s = 'a' * 1000000 %}{% set n = 'a' * 5000 ~ 'b' %}{% for i in range(1000) %}{% if n in s %}"
      "{% endif %}{% endfor %}",
      // unique over distinct items: quadratic, as jinja2's is not (it hashes)
      "\n{{ range(100000) | unique | list | length }}",
      // going through a long string character by character
      "\n{% set s = '\u00e9' * 100000 %}{% for i in range(1000) %}{% set t = s | list %}{% endfor %}",
  };
  for (const char* t : costly) {
    JinjaRenderStats st;
    const std::string e = error_of_work(t, lowered, &st);
    EXPECT_TRUE(has(e, "work limit")) << t << "\n  -> " << e;
    EXPECT_TRUE(has(e, "line 2")) << t << "\n  -> " << e;
    EXPECT_GT(st.work, lowered) << t;
    EXPECT_LT(st.steps, kMaxTemplateSteps) << t;
  }
  // a long string in a list of a million: its repr stops at the output or the work limit
  // before it is built (the list shares the one string)
  const std::string r = error_of("{% set s = 'a' * 60000000 %}\n{{ [s] * 1000000 }}");
  EXPECT_TRUE(has(r, "line 2")) << r;
  EXPECT_TRUE(has(r, "output limit") || has(r, "work limit")) << r;
  // splitting into more parts than a list may hold stops at the list limit, not after
  EXPECT_TRUE(has(error_of("{{ ('a,' * 2000000).split(',') | length }}"), "list limit"));
  // a real chat template's work: a few units per byte of its output
  JinjaRenderStats st;
  const std::string out =
      JinjaTemplate::parse(
          "{% for m in msgs %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}")
          .render(context(), "2026-01-15", kMaxTemplateSteps, &st);
  EXPECT_GT(st.work, 0);
  EXPECT_LT(st.work, 100 * static_cast<int64_t>(out.size())) << st.work;
}

TEST(Jinja, ManyKeysBuildInLinearTime) {
  // A message of 200,000 keys, read as attnviz-cli chat reads messages (parse_json_ordered)
  // and rendered: each key is inserted once, without a scan of the keys before it (that
  // scan made it 87 s). The work counts each entry once.
  const int n = 200000;
  std::string text = R"([{"role": "user", "content": "hi")";
  for (int i = 0; i < n; ++i) text += ", \"k" + std::to_string(i) + "\": " + std::to_string(i);
  text += R"(, "k7": "last"}])";  // a key given twice: its first place, its last value
  const ojson messages = parse_json_ordered(text, "messages");
  ASSERT_EQ(messages[0].size(), static_cast<size_t>(n + 2));
  EXPECT_EQ(messages[0].begin().key(), "role");
  EXPECT_EQ(messages[0]["k7"], "last");
  JinjaRenderStats st;
  const std::string out = JinjaTemplate::parse(
                              "{{ messages[0].k199999 }} {{ messages[0] | length }} {{ messages[0].k7 }} "
                              "{{ (messages[0].keys() | list)[2:4] }}")
                              .render(ojson{{"messages", messages}}, "2026-01-15", kMaxTemplateSteps, &st);
  EXPECT_EQ(out, "199999 200002 last ['k0', 'k1']");
  EXPECT_LT(st.work, 30LL * 16 * n) << st.work;
  // dicts and namespaces a template builds: a literal of 20,000 keys, 20,000 attributes
  std::string lit = "{% set d = {";
  for (int i = 0; i < 20000; ++i) lit += (i ? ", 'k" : "'k") + std::to_string(i) + "': " + std::to_string(i);
  lit += ", 'k5': 'again'} %}{{ d | length }} {{ d.k19999 }} {{ d.k5 }} {{ (d | list)[5] }}";
  EXPECT_EQ(render(lit), "20000 19999 again k5");
  std::string ns = "{% set ns = namespace() %}";
  for (int i = 0; i < 20000; ++i) ns += "{% set ns.a" + std::to_string(i) + " = " + std::to_string(i) + " %}";
  EXPECT_EQ(render(ns + "{{ ns.a0 + ns.a19999 }}"), "19999");
}

TEST(Jinja, ToJsonReplacesInvalidUtf8AsPythonDecodesIt) {
  // Text that is not UTF-8 (raw bytes in a template) has no Python str: each invalid run is
  // U+FFFD, as bytes.decode("utf-8", "replace") reads it (the longest start of a valid
  // sequence is one run), so that json.dumps' output is valid UTF-8. Expected strings from
  // Python 3.11: json.dumps(b.decode("utf-8", "replace"), ensure_ascii=...).
  struct U {
    const char* bytes;
    const char* want;        // ensure_ascii=False
    const char* want_ascii;  // ensure_ascii=True
  };
  const U cases[] = {
      {"\xe2\x82"
       "A\xff",
       "\"\xef\xbf\xbd"
       "A\xef\xbf\xbd\"",
       "\"\\ufffdA\\ufffd\""},
      {"\xed\xa0\x80x", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\"", "\"\\ufffd\\ufffd\\ufffdx\""},
      {"\xf0\x9f\x98", "\"\xef\xbf\xbd\"", "\"\\ufffd\""},
      {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"", "\"\\ufffd\\ufffd\""},
      {"\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
      {"\xe0\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", "\"\\ufffd\\ufffd\\ufffd\""},
      // valid text is unchanged
      {"h\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80", "\"h\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80\"",
       "\"h\\u00e9 \\u2713 \\ud83d\\ude00\""},
  };
  for (const U& c : cases) {
    EXPECT_EQ(render(std::string("{{ '") + c.bytes + "' | tojson }}"), c.want) << c.bytes;
    EXPECT_EQ(render(std::string("{{ '") + c.bytes + "' | tojson(ensure_ascii=true) }}"), c.want_ascii) << c.bytes;
  }
  // in keys too
  EXPECT_EQ(render("{{ {'\xff': 1} | tojson }}"), "{\"\xef\xbf\xbd\": 1}");
}

TEST(Jinja, RenderChatTemplatePassesTransformersVariables) {
  const std::string t =
      "{{ bos_token }}|{{ eos_token is defined }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ add_generation_prompt }}|{{ messages | length }}|{{ enable_thinking }}";
  ChatRenderOptions o;
  o.bos_token = "<s>";
  o.extra = ojson{{"enable_thinking", false}};
  o.date = "2026-01-15";
  EXPECT_EQ(render_chat_template(t, ojson::array({{{"role", "user"}, {"content", "x"}}}), o),
            "<s>|False|True|True|True|1|False");
  o.add_generation_prompt = false;
  o.extra = ojson{{"tools", ojson::array({1})}};
  EXPECT_EQ(render_chat_template("{{ add_generation_prompt }} {{ tools }}", ojson::array(), o), "False [1]");
  // a bad date is a usage error
  o.date = "15/01/2026";
  try {
    render_chat_template("x", ojson::array(), o);
    ADD_FAILURE() << "accepted a bad date";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(Jinja, RendersAgainAndFromThreads) {
  const JinjaTemplate t = JinjaTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in msgs %}{% set ns.n = ns.n + 1 %}{{ m.role }};{% endfor %}{{ ns.n }}");
  EXPECT_EQ(t.render(context()), "user;assistant;2");
  EXPECT_EQ(t.render(context()), "user;assistant;2");  // no state kept between renders
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) got[i] = t.render(context());
    });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, "user;assistant;2");
}

// --- the real templates

std::string templates_dir() {
  if (const char* d = std::getenv("ATTNVIZ_CHAT_TEMPLATES_DIR")) return d;
  // the source tree's ../shared/chat-templates (this file is tests/test_jinja.cpp)
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared" / "chat-templates").string();
}
std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The two conversations and special tokens of ../shared/chat-templates/render.py, which
// made NAME.conv1.txt and NAME.conv2.txt with jinja2 (strftime_now pinned to 2026-01-15).
TEST(Jinja, EveryTemplateInSharedRendersAsJinja2) {
  const std::filesystem::path dir = templates_dir();
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing (set ATTNVIZ_CHAT_TEMPLATES_DIR)";
  struct Tokens {
    const char* name;
    const char* bos;
    const char* eos;
  };
  const Tokens tokens[] = {
      {"qwen3", nullptr, "<|im_end|>"}, {"qwen3.5", nullptr, "<|im_end|>"}, {"qwen2.5", nullptr, "<|im_end|>"},
      {"gemma3", "<bos>", "<eos>"}, {"gemma4", "<bos>", "<eos>"},
      {"llama3.1", "<|begin_of_text|>", "<|eot_id|>"}, {"llama3.2", "<|begin_of_text|>", "<|eot_id|>"},
      {"phi4-mini", "<|endoftext|>", "<|endoftext|>"}, {"smollm3", nullptr, "<|im_end|>"},
      {"granite4.0", "<|end_of_text|>", "<|end_of_text|>"}, {"gpt-oss", "<|startoftext|>", "<|return|>"},
      {"mistral-v0.3", "<s>", "</s>"}, {"ministral3", "<s>", "</s>"}, {"lfm2", "<|startoftext|>", "<|im_end|>"},
  };
  const ojson convs[] = {
      ojson::parse(R"([{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi!"}])"),
      ojson::parse(R"([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                       {"role": "user", "content": "And 3+3?"}])"),
  };
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jinja") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  EXPECT_GE(names.size(), 14u);
  int compared = 0;
  for (const std::string& name : names) {
    ChatRenderOptions o;
    o.date = "2026-01-15";
    bool known = false;
    for (const Tokens& t : tokens)
      if (name == t.name) {
        known = true;
        if (t.bos) o.bos_token = t.bos;
        if (t.eos) o.eos_token = t.eos;
      }
    EXPECT_TRUE(known) << name << ": a template this test has no special tokens for";
    const std::string tmpl = slurp(dir / (name + ".jinja"));
    for (int c = 0; c < 2; ++c) {
      const std::filesystem::path want_path = dir / (name + ".conv" + std::to_string(c + 1) + ".txt");
      if (!std::filesystem::exists(want_path)) {
        ADD_FAILURE() << want_path << " is missing (jinja2 failed on it? see render.py)";
        continue;
      }
      std::string got;
      try {
        got = render_chat_template(tmpl, convs[c], o);
      } catch (const Error& e) {
        got = std::string("ERROR: ") + e.what();
      }
      EXPECT_EQ(got, slurp(want_path)) << name << " conv" << c + 1;
      ++compared;
    }
  }
  EXPECT_GE(compared, 28);
}

}  // namespace
}  // namespace attnviz
