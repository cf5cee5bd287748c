#!/usr/bin/env bash
# "Why this score", the Circuits view and the Head scan panel end to end under Xvfb, on
# builtin:fortunes-en:
#  - --why on the induction cell of layer 1 head 2 ("the moon is the moon": the second 'm'
#    attends to the 'o' after the first): the split's sum equals the score, the score equals
#    `attnviz-cli qk`'s, and the head with the largest part on the key side is layer 0 head 4,
#    the previous-token head (the circuit, found by itself);
#  - a click on a heatmap cell in a normal session opens the panel (saved as open on quit);
#  - --circuits: the composition is computed and edges are drawn, the strongest K-composition
#    edge into layer 1 comes from L0H4;
#  - --scan: 40 kB of the shipped corpus scanned whole (progress counted every window), the
#    scatter plot drawn, and L0H4 and an induction head found by their corpus averages.
#   gui_why.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="the moon is the moon"

check "why screenshot" xrun "$app" --model builtin:fortunes-en --text "$text" --layer 1 --head 2 --query 16 --key 5 --why \
  --screenshot "$work/why.png"
check "qk" sh -c "'$cli' qk --model builtin:fortunes-en --text '$text' --layer 1 --head 2 --query 16 --key 5 --json > '$work/qk.json'"
check "why: the split, the CLI's score, the previous-token head on the key side" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); q = json.load(open(sys.argv[2]))
w = j["why"]
assert w["error"] == "" and (w["layer"], w["head"], w["query"], w["key"]) == (1, 2, 16, 5), w
assert abs(w["sum"] - w["score"]) <= 1e-4 * max(1.0, abs(w["score"])), w
assert abs(w["score"] - q["score"]) <= 1e-5 * max(1.0, abs(q["score"])), (w["score"], q["score"])
heads = [(v, p) for v, p in zip(w["key_side"], w["parts"]) if "H" in p]
assert max(heads)[1] == "L0H4", sorted(heads)[-3:]
x, y, bw, bh = j["rects"]["why_bars"]
assert bw > 50 and bh > 20, j["rects"]["why_bars"]
' "$work/why.png.json" "$work/qk.json"

# A click on the heatmap cell (16, 5) in a normal session opens the panel: the cell's place
# comes from a screenshot of the same window.
check "heatmap geometry" xrun "$app" --model builtin:fortunes-en --text "$text" --layer 1 --head 2 --size 1600x1000 \
  --screenshot "$work/geom.png"
pos=$(/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); x, y, w, h = j["rects"]["heatmap"]; T = j["T"]
print(int(x + (5 + 0.5) * w / T), int(y + (16 + 0.5) * h / T))' "$work/geom.png.json")
mkdir -p "$work/session"
check "click a cell" env XDG_CONFIG_HOME="$work/session" xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
  "$0" --model builtin:fortunes-en --text "$1" --layer 1 --head 2 --size 1600x1000 & pid=$!
  xdotool search --sync --onlyvisible --name "^attnviz$" >/dev/null
  sleep 5
  xdotool mousemove $2 $3 click 1 sleep 1.5 key ctrl+q
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { kill $pid; exit 1; }
  wait $pid' "$app" "$text" $pos
check "the click opened Why this score" /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["panels"].get("Why this score") is True, s["panels"]
' "$work/session/attnviz/settings.json"

check "circuits screenshot" xrun "$app" --model builtin:fortunes-en --text "$text" --circuits --screenshot "$work/circuits.png"
check "heads --composition" sh -c "'$cli' heads --model builtin:fortunes-en --composition --json > '$work/comp.json'"
check "circuits: computed, edges drawn, L0H4 feeds layer 1 through K" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert j["circuits"]["ready"] and j["circuits"]["error"] == "" and j["circuits"]["edges"] > 0, j["circuits"]
x, y, w, h = j["rects"]["circuits_graph"]
assert w > 100 and h > 100, j["rects"]["circuits_graph"]
best = max((c["k"][0][h1][1][h2], h1) for h1 in range(8) for h2 in range(8))
assert best[1] == 4, best
' "$work/circuits.png.json" "$work/comp.json"

# The first 40 kB of the shipped corpus (the whole of it takes minutes under the sanitizers).
head -c 40000 "$(dirname "$0")/../assets/corpus/en-prose.txt" > "$work/corpus.txt"
check "scan screenshot" xrun "$app" --model builtin:fortunes-en --text "$text" --scan "$work/corpus.txt" \
  --screenshot "$work/scan.png"
check "scan: the whole corpus, the plot" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
s = j["scan"]
assert s["error"] == "" and not s["running"] and s["windows"] > 300 and s["progress_windows"] == s["windows"], s
assert s["corpus"].endswith("corpus.txt") and not s["from_cache"], s
x, y, w, h = j["rects"]["scan_plot"]
assert w > 100 and h > 100, j["rects"]["scan_plot"]
' "$work/scan.png.json"
check "scan CLI on the same corpus" sh -c "'$cli' scan --model builtin:fortunes-en --corpus '$work/corpus.txt' --json > '$work/scan.json'"
check "the scan names the previous-token and induction heads" /usr/bin/python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))["heads"]
assert h[0][4]["label"] == "previous-token" and h[0][4]["previous_token"] > 0.7, h[0][4]
ind = max(range(8), key=lambda k: h[1][k]["induction"])
assert h[1][ind]["induction"] > 0.25 and all(h[0][k]["induction"] < 0.15 for k in range(8)), [x["induction"] for x in h[1]]
' "$work/scan.json"
finish
