#!/usr/bin/env python3
"""Checks the include rules of core/ (core/README.md): a folder includes only from the
folders to its left in  {tokenize, chat} <- model <- engine <- {gpu, train, export}  (and
error.h / limits.h / aligned.h / json_reader.h anywhere); the one exception is engine/backend_factory.cpp, the backend factory,
which includes gpu/gl_backend.h; nothing in core/ includes ui/, app/, ImGui or GLFW; and no
two modules of core/ (foo.h + foo.cpp counted as one) include each other, directly or
through others. In ui/ (ui/README.md): state/ and jobs/ include no ImGui or GL and only
their own folder of ui/; draw/ only draw/; panels/ any of those; app.{h,cpp} anything.
Prints each violation and exits 1 when there is any.

    /usr/bin/python3 scripts/check_includes.py [ROOT]
"""
import os
import re
import sys

RANK = {"tokenize": 0, "chat": 0, "model": 1, "engine": 2, "gpu": 3, "train": 3, "export": 3}
ANYWHERE = {"core/error.h", "core/limits.h", "core/aligned.h", "core/json_reader.h"}
EXCEPTIONS = {("core/engine/backend_factory.cpp", "core/gpu/gl_backend.h")}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(root, top):
    """(path, folder, [(kind, include)]) of each .h/.cpp under root/top: folder is the first
    level below top (None for files directly in it)."""
    for dirpath, _, files in sorted(os.walk(os.path.join(root, top))):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), root)
            parts = path.split(os.sep)
            text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
            yield path, parts[1] if len(parts) > 2 else None, INCLUDE.findall(text)


def module(path):  # core/model/model.h and core/model/model.cpp -> core/model/model
    return os.path.splitext(path)[0]


# ui/ (ui/README.md): what each folder may include besides core/ and the standard library.
UI_ALLOWED = {
    "state": {"state"},            # no ImGui, no GL: the worker, AppState, settings, views' logic
    "jobs": {"jobs"},              # no ImGui, no GL: work on threads of their own
    "draw": {"draw"},              # ImGui and GL helpers
    "panels": {"panels", "draw", "state", "jobs"},
}


def ui_problems(root):
    problems = []
    for path, folder, includes in sources(root, "ui"):
        if folder is None:
            continue  # ui/app.{h,cpp} ties everything together
        if folder not in UI_ALLOWED:
            problems.append(f"{path}: ui/{folder}/ is not one of ui/README.md's folders")
            continue
        for kind, inc in includes:
            if folder in ("state", "jobs") and re.match(r"imgui|GLFW|backends/imgui|epoxy|GL/", inc):
                problems.append(f"{path}: includes {inc} (ui/{folder}/ has no ImGui and no GL)")
            if kind == '"' and inc.startswith("ui/"):
                to = inc.split("/")
                to_folder = to[1] if len(to) > 2 else "app"
                if to_folder not in UI_ALLOWED[folder]:
                    problems.append(f"{path}: includes {inc}, but ui/{folder}/ may include only from "
                                    f"{', '.join('ui/' + f + '/' for f in sorted(UI_ALLOWED[folder]))}")
    return problems


def main(root):
    problems = []
    edges = {}
    for path, folder, includes in sources(root, "core"):
        for kind, inc in includes:
            if re.match(r"(ui|app)/|imgui|GLFW|backends/imgui", inc):
                problems.append(f"{path}: includes {inc} (core/ never includes the UI, the app, ImGui or GLFW)")
                continue
            if kind != '"' or not inc.startswith("core/"):
                continue
            if inc in ANYWHERE:
                continue
            to = inc.split("/")
            to_folder = to[1] if len(to) > 2 else None
            if folder and to_folder and folder != to_folder and (path, inc) not in EXCEPTIONS:
                if RANK.get(to_folder, 99) >= RANK.get(folder, -1):
                    problems.append(f"{path}: includes {inc}, but {folder}/ may include only from "
                                    f"folders to its left (tokenize <- model <- engine <- gpu, train, export)")
            if module(path) != module(inc):  # the exceptions too: they may point right, never round
                edges.setdefault(module(path), set()).add(module(inc))
    # Cycles between modules: a depth-first search that reports each back edge's cycle once.
    state, stack, seen_cycles = {}, [], set()

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    problems.append("include cycle: " + " -> ".join(cycle))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    problems += ui_problems(root)
    for p in problems:
        print(p)
    print(f"{len(problems)} include problem(s) in core/ and ui/")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
