#!/usr/bin/env bash
# Opening models in the GUI under Xvfb, with model stores faked in a temporary HOME:
#  - File → Open model (--browser) lists the Ollama and Hugging Face entries with what
#    `attnviz-cli models --json` says of them (name, opens, reason), a broken one included;
#  - a .gguf file dropped on the window (--drop) loads off the UI thread and replaces the
#    model shown, and joins the recent models; a file that is no model leaves the model
#    shown and says why;
#  - in a normal session (settings written) the dropped model is what the settings keep,
#    first in the recent list.
#   gui_open_model.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
export HOME="$work/home"
unset OLLAMA_MODELS HF_HUB_CACHE HF_HOME LLAMA_CACHE
mkdir -p "$HOME"
# The stores: an Ollama model (a GGUF blob) and a manifest whose blob is missing; a Hugging
# Face snapshot (config.json + model.safetensors + tokenizer.json) behind refs/main, in
# $XDG_CACHE_HOME/huggingface/hub (gui_env points XDG_CACHE_HOME into $work).
check "random models" bash -c '
  "$0" random --preset tiny --layers 2 --gguf F32 --out "$1/g" >/dev/null &&
  "$0" random --preset tiny --layers 3 --out "$1/hfsrc" >/dev/null' "$cli" "$work"
gguf="$work/g/model.gguf"
check "fake stores" /usr/bin/python3 - "$HOME" "$gguf" "$work/hfsrc" "$XDG_CACHE_HOME/huggingface/hub" <<'PY'
import hashlib, json, os, shutil, sys
home, gguf, hfsrc, hub_root = sys.argv[1:]
root = os.path.join(home, ".ollama", "models")
def manifest(name, tag, digest):
    d = os.path.join(root, "manifests", "registry.ollama.ai", "library", name)
    os.makedirs(d, exist_ok=True)
    json.dump({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model",
               "digest": "sha256:" + digest, "size": 1}]}, open(os.path.join(d, tag), "w"))
digest = hashlib.sha256(open(gguf, "rb").read()).hexdigest()
os.makedirs(os.path.join(root, "blobs"), exist_ok=True)
shutil.copy(gguf, os.path.join(root, "blobs", "sha256-" + digest))
manifest("tinyllama", "latest", digest)
manifest("broken", "1b", "f" * 64)
hub = os.path.join(hub_root, "models--acme--tiny3")  # $XDG_CACHE_HOME/huggingface/hub
commit = "c" * 40
os.makedirs(os.path.join(hub, "refs"))
open(os.path.join(hub, "refs", "main"), "w").write(commit)
shutil.copytree(hfsrc, os.path.join(hub, "snapshots", commit))
PY
check "models --json" bash -c '"$0" models --json > "$1/models.json"' "$cli" "$work"

# 1. The browser lists what `models` lists.
check "browser screenshot" xrun "$app" --model builtin:fortunes-en --text "the cat" --browser --screenshot "$work/browser.png"
check "the browser's entries are the stores'" /usr/bin/python3 - "$work/browser.png.json" "$work/models.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cli = json.load(open(sys.argv[2]))
cli = cli["models"] if isinstance(cli, dict) else cli
shown = {(m["source"], m["name"]): (m["opens"], m["reason"]) for m in j["browser"]["models"]}
listed = {(m["source"], m["name"]): (m["opens"], m["reason"]) for m in cli}
assert shown == listed, (shown, listed)
assert shown[("ollama", "tinyllama:latest")][0] is True, shown
assert shown[("ollama", "broken:1b")][0] is False and shown[("ollama", "broken:1b")][1], shown
assert shown[("hf", "acme/tiny3")][0] is True, shown
x, y, w, h = j["windows"]["Open model"]
assert w > 600 and h > 400, j["windows"]["Open model"]
assert j["model"] == "builtin:fortunes-en", j["model"]
PY

# 2. A dropped GGUF file replaces the model shown; it heads the recent models.
check "drop a gguf" xrun "$app" --model builtin:fortunes-en --text "the cat" --drop "$gguf" --screenshot "$work/drop.png"
check "the dropped model is shown" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == sys.argv[2], j["model"]
assert j["recent_models"] == [sys.argv[2]], j["recent_models"]
assert "opened " in j["notice"], j["notice"]
assert j["rects"]["heatmap"][2] > 100, j["rects"]["heatmap"]
' "$work/drop.png.json" "$gguf"

# 3. A file that is no model: the model shown stays, the status bar says why.
echo "not a model" > "$work/notes.txt"
check "drop a text file" xrun "$app" --model builtin:fortunes-en --text "the cat" --drop "$work/notes.txt" --screenshot "$work/nodrop.png"
check "the model shown stays" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "builtin:fortunes-en", j["model"]
assert "not a .gguf file or a model folder" in j["notice"], j["notice"]
assert j["recent_models"] == [], j["recent_models"]
' "$work/nodrop.png.json"

# 4. A path that is not there: the model shown stays, the status bar says why.
check "drop a missing path" xrun "$app" --model builtin:fortunes-en --text "the cat" --drop "$work/gone.gguf" --screenshot "$work/gone.png"
check "nothing opened" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "builtin:fortunes-en", j["model"]
assert "does not exist" in j["notice"], j["notice"]
' "$work/gone.png.json"

# 5. A normal session: the dropped model is saved, first in the recent list (Ctrl+Q quits).
settings="$XDG_CONFIG_HOME/attnviz/settings.json"
check "session" xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
  "$0" --model builtin:fortunes-en --text "the cat" --drop "$1" & pid=$!
  xdotool search --sync --onlyvisible --name "^attnviz$" >/dev/null
  sleep 8
  xdotool mousemove 800 600 key ctrl+q
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { echo "attnviz did not quit on Ctrl+Q"; kill $pid; exit 1; }
  wait $pid' "$app" "$gguf"
check "the settings keep it" /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["model"] == sys.argv[2], s["model"]
assert s["recent_models"][0] == sys.argv[2], s["recent_models"]
' "$settings" "$gguf"
finish
