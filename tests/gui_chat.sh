#!/usr/bin/env bash
# Chat mode in the GUI under Xvfb: a random model with the qwen3-12k tokenizer (its
# <|im_start|> and <|im_end|> are special tokens) and Qwen2.5's chat template, read from
# ../shared/chat-templates into the model folder at test time, started with --chat:
#  - the text it runs is the template's rendering as Python's jinja2 renders it (a peer);
#  - each turn and the generation prompt are marked from their <|im_start|> token, in order,
#    with their roles; the special tokens are single tokens (the tokenizer adds no BOS);
#  - settings written by a normal session keep the turns.
#   gui_chat.sh ATTNVIZ ATTNVIZ_CLI TEMPLATES_DIR WORKDIR
set -u
app=$1 cli=$2 templates=$3 work=$4
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
check "model" "$cli" random --preset tiny --layers 2 --vocab 12288 --tokenizer "$tests_dir/data/tokenizers/qwen3-12k.tokenizer.json" --out "$work/m"
check "its chat template" cp "$templates/qwen2.5.jinja" "$work/m/chat_template.jinja"
cat > "$work/chat.json" <<'JSON'
[{"role": "system", "content": "You are brief."},
 {"role": "user", "content": "the cat sat"},
 {"role": "assistant", "content": "on the mat"},
 {"role": "user", "content": "and then?"}]
JSON
check "screenshot" xrun "$app" --model "$work/m" --chat "$work/chat.json" --screenshot "$work/chat.png"
check "the rendering is jinja2's; the turns are marked at their headers" /usr/bin/python3 - "$work/chat.png.json" "$work/m/chat_template.jinja" "$work/chat.json" "$tests_dir/reference" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[4])
import chat_templates  # jinja2 set up as transformers sets it up (tests/reference)
j = json.load(open(sys.argv[1]))
tmpl = open(sys.argv[2]).read()
messages = json.load(open(sys.argv[3]))
want = chat_templates.environment().from_string(tmpl).render(messages=messages, add_generation_prompt=True, tools=None,
                                                             documents=None)
c = j["chat"]
assert c["error"] == "", c["error"]
assert c["text"] == want, (c["text"], want)
roles = [s["role"] for s in c["spans"]]
assert roles == ["system", "user", "assistant", "user", "assistant"], roles
assert all(s["label"] == "<|im_start|>" for s in c["spans"]), c["spans"]
tokens = [s["token"] for s in c["spans"]]
assert tokens[0] == 0 and tokens == sorted(tokens) and len(set(tokens)) == 5, tokens
assert j["rects"]["heatmap"][2] > 100 and j["rects"]["token_strip"][2] > 100, j["rects"]
PY
# A normal session keeps the chat in the settings (Ctrl+Q quits).
settings="$XDG_CONFIG_HOME/attnviz/settings.json"
check "session" xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
  "$0" --model "$1" --chat "$2" & pid=$!
  xdotool search --sync --onlyvisible --name "^attnviz$" >/dev/null
  sleep 6
  xdotool mousemove 800 600 key ctrl+q
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { echo "attnviz did not quit on Ctrl+Q"; kill $pid; exit 1; }
  wait $pid' "$app" "$work/m" "$work/chat.json"
check "the settings keep the turns" /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["chat"]
m = json.load(open(sys.argv[2]))
assert s["on"] is True, s
assert [(t["role"], t["content"]) for t in s["turns"]] == [(t["role"], t["content"]) for t in m], s
' "$settings" "$work/chat.json"
check "a chat file that is not a list of messages" bash -c '
  echo "{\"role\": \"user\"}" > "$1/bad.json"
  out=$("$0" --model "$2" --chat "$1/bad.json" --screenshot "$1/bad.png" 2>&1); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q "not a list of messages"' "$app" "$work" "$work/m"
finish
