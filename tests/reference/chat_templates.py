#!/usr/bin/env python3
"""The chat-template interpreter (core/chat/jinja) against Python's jinja2, byte for byte.

Renders every NAME.jinja in the templates folder (default: ../shared/chat-templates next to
the source tree; read there, never copied) for several conversations, once with jinja2 set
up as Hugging Face transformers sets up apply_chat_template, once with attnviz's
`jinja_render`, and compares the texts. The conversations go beyond the two stored
renderings (NAME.conv1.txt, NAME.conv2.txt, checked by test_jinja.cpp): tools and tool
calls, tool results, reasoning, add_generation_prompt=False with enable_thinking=False,
content given as a list of parts, non-ASCII text. Where jinja2 refuses a conversation
(raise_exception: "roles must alternate" and the like), attnviz must refuse it too, with
jinja2's message in its own; where a Python error stops jinja2 (a TypeError in the
template), attnviz must fail too.

The environment, written here from transformers' description of it
(transformers.utils.chat_template_utils._compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension and a {% generation %} tag that renders its body; tojson = json.dumps with
ensure_ascii=False; globals raise_exception and strftime_now (a fixed date here).

    /usr/bin/python3 tests/reference/chat_templates.py --renderer BUILD/tests/jinja_render [--templates DIR]

Needs jinja2 >= 3.1 (Debian: python3-jinja2). Exit 0 when every case matches, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATE = datetime(2026, 1, 15)

# (bos_token, eos_token) as each model's tokenizer config defines them; None = not defined.
TOKENS = {
    "qwen3": (None, "<|im_end|>"), "qwen3.5": (None, "<|im_end|>"), "qwen2.5": (None, "<|im_end|>"),
    "gemma3": ("<bos>", "<eos>"), "gemma4": ("<bos>", "<eos>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"), "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "phi4-mini": ("<|endoftext|>", "<|endoftext|>"), "smollm3": (None, "<|im_end|>"),
    "granite4.0": ("<|end_of_text|>", "<|end_of_text|>"), "gpt-oss": ("<|startoftext|>", "<|return|>"),
    "mistral-v0.3": ("<s>", "</s>"), "ministral3": ("<s>", "</s>"), "lfm2": ("<|startoftext|>", "<|im_end|>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "description": "How many days", "default": 1},
            },
            "required": ["city"],
        },
    },
}

# name -> (messages, extra variables)
CASES = {
    "tools": ([
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "id": "call_1",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "Thanks!"},
    ], {"tools": [WEATHER_TOOL]}),
    "no_prompt": ([
        {"role": "user", "content": "Think first: 6*7?"},
        {"role": "assistant", "content": "<think>\n6*7=42\n</think>\n\n42", "reasoning_content": "6*7=42"},
        {"role": "user", "content": "And 6*8?"},
        {"role": "assistant", "content": "48"},
    ], {"add_generation_prompt": False, "enable_thinking": False}),
    "unicode": ([
        {"role": "system", "content": "  Réponds en français.\n"},
        {"role": "user", "content": "Qu'est-ce que \"ceci\" ?\n日本語 ✓ é \\n\ttab"},
    ], {}),
    "parts": ([
        {"role": "system", "content": [{"type": "text", "text": "  Réponds en français.  "}]},
        {"role": "user", "content": [{"type": "text", "text": "Qu'est-ce que \"ceci\" ?\n"},
                                     {"type": "text", "text": "日本語 ✓ é"}]},
    ], {}),
    "string_args": ([
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}}]},
        {"role": "tool", "content": "cold"},
        {"role": "tool", "content": "warm"},
    ], {"tools": [WEATHER_TOOL, {"type": "function", "function": {
        "name": "now", "description": "The time.", "parameters": {"type": "object", "properties": {}}}}]}),
    "thinking_on": ([
        {"role": "user", "content": "Hello\tthere\\n"},
    ], {"enable_thinking": True}),
}


class Generation(Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE.strftime(fmt)
    return env


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--renderer", required=True, help="the jinja_render test binary")
    ap.add_argument("--templates", default=os.path.normpath(os.path.join(here, "..", "..", "..", "shared", "chat-templates")))
    args = ap.parse_args()
    names = sorted(f[:-len(".jinja")] for f in os.listdir(args.templates) if f.endswith(".jinja"))
    if not names:
        print(f"no templates in {args.templates}")
        return 1
    env = environment()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(args.templates, name + ".jinja")
            with open(path, encoding="utf-8", newline="") as f:
                source = f.read()
            bos, eos = TOKENS.get(name, (None, None))
            for case, (messages, extra) in CASES.items():
                ctx = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": True}
                if bos is not None:
                    ctx["bos_token"] = bos
                if eos is not None:
                    ctx["eos_token"] = eos
                ctx.update(extra)
                try:
                    want, want_err = env.from_string(source).render(**ctx), None
                except jinja2.exceptions.TemplateError as e:  # raise_exception and the like
                    want, want_err = None, str(e)
                except Exception as e:  # a Python error inside the template (TypeError ...)
                    want, want_err = None, ""
                ctx_path = os.path.join(tmp, "ctx.json")
                with open(ctx_path, "w", encoding="utf-8") as f:
                    json.dump(ctx, f, ensure_ascii=False)
                r = subprocess.run([args.renderer, path, ctx_path, DATE.strftime("%Y-%m-%d")], capture_output=True)
                got, got_err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace").strip()
                if want_err is not None:
                    ok = r.returncode != 0 and want_err in got_err
                    detail = f"jinja2 raised {want_err or 'a Python error'!r}; attnviz: " + (got_err if r.returncode else "rendered")
                else:
                    ok = r.returncode == 0 and got == want
                    detail = got_err if r.returncode else first_difference(want, got)
                failures += not ok
                what = "rendered" if want_err is None else f"refused: {want_err[:50]}"
                print(f"{'ok  ' if ok else 'FAIL'} {name:14s} {case:14s} " + (what if ok else detail))
    print(f"jinja2 {jinja2.__version__}; {len(names)} templates x {len(CASES)} conversations; {failures} failed")
    return 1 if failures else 0


def first_difference(want, got):
    i = next((k for k in range(min(len(want), len(got))) if want[k] != got[k]), min(len(want), len(got)))
    return f"differs at char {i}: jinja2 {want[max(0, i - 20):i + 40]!r} vs attnviz {got[max(0, i - 20):i + 40]!r}"


if __name__ == "__main__":
    sys.exit(main())
