#!/usr/bin/env python3
"""Checks that every JSON parse in core/, ui/ and app/ goes through core/json_reader.cpp.

core/json_reader.cpp's parse_json refuses JSON nested deeper than kMaxJsonDepth before
nlohmann::json builds it; a parse call anywhere else would bring back the crashes of deep
nesting (copies and dumps of a parsed value recurse). This lists nlohmann::json's entry
points that build a value from text or bytes (parse, accept, sax_parse, the binary
formats, the _json literals, stream extraction into a json) outside the reader and fails
when it finds one. Run: check_json_reader.py ROOT
"""
import os
import re
import sys

READER = os.path.join("core", "json_reader.cpp")
PATTERNS = [
    (re.compile(r"\bjson\s*::\s*(parse|accept|sax_parse)\s*\("), "json::parse/accept/sax_parse"),
    (re.compile(r"\bbasic_json\s*<[^;]*>\s*::\s*(parse|accept|sax_parse)\s*\("), "basic_json<...>::parse"),
    (re.compile(r"\bfrom_(cbor|msgpack|bson|ubjson|bjdata)\s*\("), "a binary JSON reader"),
    (re.compile(r"\"\s*_json(_pointer)?\b"), "a _json literal"),
    (re.compile(r"\bnlohmann\s*::\s*(json_literals|literals)\b"), "the _json literals"),
    (re.compile(r">>\s*(nlohmann\s*::\s*)?json\b|\boperator\s*>>\s*\(\s*std::istream\s*&[^)]*json"), "stream extraction into a json"),
]

# The patterns must find what they are for: a check that cannot fail checks nothing.
SELF_TEST = {
    "  j = nlohmann::json::parse(text);": True,
    "const auto j = json::parse(b, e, nullptr, false);": True,
    "bool ok = nlohmann::json::accept(s);": True,
    "auto j = nlohmann::json::from_cbor(bytes);": True,
    "auto j = R\"({\"a\": 1})\"_json;": True,
    "using namespace nlohmann::literals;": True,
    "j = nlohmann::basic_json<std::map>::parse(s);": True,
    "in >> json;": True,
    "const nlohmann::json j = parse_json(text, where);": False,
    "j.dump(2);": False,
    "std::string config_to_json(const ModelConfig& c);": False,
    "x >> 8;": False,
}


def hits(line):
    return [what for rx, what in PATTERNS if rx.search(line)]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    for line, expected in SELF_TEST.items():
        if bool(hits(line)) != expected:
            sys.exit("check_json_reader.py self-test: %r %s" % (line, "not found" if expected else "found"))
    bad = []
    files = 0
    for top in ("core", "ui", "app"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".h", ".hpp", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                files += 1
                if rel == READER:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("//", 1)[0]
                        for what in hits(code):
                            bad.append("%s:%d: %s outside %s: %s" % (rel, n, what, READER, line.strip()))
    if files == 0:
        sys.exit("no source files under %s" % root)
    for b in bad:
        print(b)
    if bad:
        print("%d JSON parse call(s) bypass parse_json/read_json_file (core/json_reader.h)" % len(bad))
        sys.exit(1)
    print("%d files: every JSON parse goes through core/json_reader.cpp" % files)


if __name__ == "__main__":
    main()
