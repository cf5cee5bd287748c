#!/usr/bin/python3
"""`attnviz-cli chat` against the stored jinja2 renderings, byte for byte.

For every NAME.jinja in the templates folder (../shared/chat-templates beside the source
tree; read there, never copied) that has NAME.conv1.txt / NAME.conv2.txt, writes the two
conversations as a messages file and runs

    attnviz-cli chat --template NAME.jinja --messages FILE.json --date 2026-01-15
                     [--bos-token B] [--eos-token E]

with the BOS/EOS strings and conversations that the folder's render.py used (imported from
there), then compares stdout with the stored text. Also checks that
--no-generation-prompt changes the text where the template uses the flag, and that a file
that is not a list of messages is refused with exit 1 and a message naming it.

    /usr/bin/python3 tests/reference/chat_cli.py --cli BUILD/app/attnviz-cli [--templates DIR]

Needs jinja2 (render.py imports it). Exit 0 when everything matches, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--templates", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "chat-templates"))
    a = ap.parse_args()
    sys.path.insert(0, a.templates)
    import render  # the folder's own description of how its renderings were made

    failed = passed = 0
    with tempfile.TemporaryDirectory() as work:
        for name in sorted(render.MODELS):
            tmpl = os.path.join(a.templates, name + ".jinja")
            if not os.path.exists(tmpl):
                continue
            _, bos, eos = render.MODELS[name]
            for conv, messages in render.CONVERSATIONS.items():
                want_path = os.path.join(a.templates, f"{name}.{conv}.txt")
                if not os.path.exists(want_path):
                    continue
                msgs = os.path.join(work, conv + ".json")
                with open(msgs, "w", encoding="utf-8") as f:
                    json.dump(messages, f, ensure_ascii=False)
                cmd = [a.cli, "chat", "--template", tmpl, "--messages", msgs, "--date", "2026-01-15"]
                if bos is not None:
                    cmd += ["--bos-token", bos]
                if eos is not None:
                    cmd += ["--eos-token", eos]
                r = subprocess.run(cmd, capture_output=True, timeout=60)
                with open(want_path, "rb") as f:
                    want = f.read()
                if r.returncode != 0 or r.stdout != want:
                    failed += 1
                    print(f"FAIL {name} {conv}: exit {r.returncode}; {r.stderr.decode(errors='replace')[:300]}")
                    print(f"  got  {r.stdout[:200]!r}\n  want {want[:200]!r}")
                else:
                    passed += 1
                    print(f"ok   {name} {conv} ({len(want)} bytes)")
        # --no-generation-prompt: Qwen3's text without the opening of the assistant's turn.
        msgs = os.path.join(work, "conv1.json")
        with open(msgs, "w", encoding="utf-8") as f:
            json.dump(render.CONVERSATIONS["conv1"], f)
        r = subprocess.run([a.cli, "chat", "--template", os.path.join(a.templates, "qwen3.jinja"), "--messages", msgs,
                            "--eos-token", "<|im_end|>", "--no-generation-prompt"], capture_output=True, timeout=60)
        with open(os.path.join(a.templates, "qwen3.conv1.txt"), "rb") as f:
            want = f.read()
        if r.returncode == 0 and r.stdout + b"<|im_start|>assistant\n" == want:
            passed += 1
            print("ok   --no-generation-prompt leaves out '<|im_start|>assistant\\n'")
        else:
            failed += 1
            print(f"FAIL --no-generation-prompt: exit {r.returncode}, got {r.stdout[-80:]!r}")
        # A file that is not a list of messages: a data error (exit 1) naming the file.
        bad = os.path.join(work, "bad.json")
        with open(bad, "w") as f:
            f.write('{"role": "user", "content": "Hi"}')
        r = subprocess.run([a.cli, "chat", "--template", os.path.join(a.templates, "qwen3.jinja"), "--messages", bad],
                           capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        if r.returncode == 1 and "bad.json" in err and "not a list of messages" in err:
            passed += 1
            print("ok   a messages file that is not a list is refused")
        else:
            failed += 1
            print(f"FAIL bad messages file: exit {r.returncode}: {err[:300]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
