"""docs/python.md's snippets, run in order as written (one namespace, as a notebook would),
in a folder holding the model.gguf and corpus.txt the page says it has."""

import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_docs_python_md_snippets_run(tmp_path, monkeypatch):
    subprocess.run([os.environ["ATTNVIZ_CLI"], "random", "--preset", "tiny", "--gguf", "Q8_0", "--out", str(tmp_path)],
                   check=True, capture_output=True)
    assert (tmp_path / "model.gguf").is_file()
    shutil.copy(os.path.join(ROOT, "assets", "corpus", "en-prose.txt"), tmp_path / "corpus.txt")
    with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
        page = f.read()
    snippets = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(snippets) >= 6, "docs/python.md lost its snippets"
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for i, code in enumerate(snippets):
        exec(compile(code, f"docs/python.md snippet {i + 1}", "exec"), namespace)
    assert (tmp_path / "l0h1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
