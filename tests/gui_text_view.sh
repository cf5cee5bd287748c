#!/usr/bin/env bash
# The Text view end to end under Xvfb. --text-view opens it under the heatmap, covering no
# panel (at the default size and at 1280x720); the text is drawn with the strongest key in
# the highlight colour and the query framed in yellow; --query picks the query, and one past
# the end is the last token. On a Gemma-3-shaped model (local layers of window 4) with a
# block_size crop, the keys outside the local window get their brown background. A long
# text (a few thousand characters) draws too.
#   gui_text_view.sh ATTNVIZ ATTNVIZ_CLI WORKDIR CHECK_COLORS
set -u
app=$1 cli=$2 work=$3 colors=$4
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="The cat sat on the mat. The cat ate the fish, and then the cat sat on the mat again."
panels=("Text view" "Attention heatmap" "Text & model" "Next token" "Model" "Head statistics" "All heads (softmax)")

check "screenshot" xrun "$app" --text-view --text "$text" --layer 1 --head 4 --screenshot "$work/tv.png"
check "no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/tv.png.json" "${panels[@]}"
check "text drawn" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
x, y, w, h = j["rects"]["text_view"]
assert w > 200 and h > 80, j["rects"]["text_view"]
assert j["query"] == -1 and j["T"] > 20, j
' "$work/tv.png.json"
# The strongest key at full shade (255,150,30) and the query's yellow frame (255,220,0).
check "shades and query frame" "$colors" "$work/tv.png" 255,150,30:60 255,220,0:40
check "1280x720" xrun "$app" --text-view --size 1280x720 --text "$text" --screenshot "$work/tv-720.png"
# (at 720 px the Model and Head statistics panels share a tile as tabs: the statistics, opened last, shows)
check "1280x720: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/tv-720.png.json" \
  "Text view" "Attention heatmap" "Text & model" "Next token" "Head statistics" "All heads (softmax)"
check "presentation" xrun "$app" --text-view --presentation --text "$text" --screenshot "$work/tv-present.png"
check "presentation: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/tv-present.png.json" \
  "Text view" "Attention heatmap"
check "--query" xrun "$app" --text-view --query 3 --text "$text" --screenshot "$work/tv-q3.png"
check "--query honoured" grep -q '"query": 3' "$work/tv-q3.png.json"
check "--query past the end runs" xrun "$app" --text-view --query 100000 --text "$text" --screenshot "$work/tv-past.png"
check "past the end: still drawn" "$colors" "$work/tv-past.png" 255,220,0:40

# Shaded by logit attribution: the job's key shares arrive before the screenshot, the note
# names the target's logit, and the strongest key is at full shade, orange (255,150,30) when
# its share is for the target, blue (60,140,255) when against.
check "logit attribution" xrun "$app" --text-view-attribution --text "$text" --layer 1 --head 4 --screenshot "$work/tv-attr.png"
check "attribution shown" /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["text_view"]
assert t["shade_by"] == "attribution" and t["ready"] and "shares of the logit of" in t["note"], t
assert t["strongest"] != 0, t
' "$work/tv-attr.png.json"
strongest_rgb=$(/usr/bin/python3 -c 'import json,sys; print("255,150,30" if json.load(open(sys.argv[1]))["text_view"]["strongest"] > 0 else "60,140,255")' "$work/tv-attr.png.json")
check "attribution: strongest key at full shade" "$colors" "$work/tv-attr.png" "$strongest_rgb:60" 255,220,0:40

# A local layer (window 4) and a crop: keys outside the window on their brown (120,96,64);
# the heatmap shows Q so that the brown comes from the text view alone.
check "tokenizer model" "$cli" random --preset tiny --layers 1 --out "$work/tiny"
check "gemma3_text model" /usr/bin/python3 "$tests_dir/gui_gemma3_model.py" "$work/gemma3" "$work/tiny"
check "local layer" xrun "$app" --model "$work/gemma3" --text-view --text "$text" --layer 0 --stage q --block-size 24 \
  --screenshot "$work/tv-local.png"
check "crop" grep -q '"dropped": ' "$work/tv-local.png.json"
check "outside the window marked" "$colors" "$work/tv-local.png" 120,96,64:400
# Gemma 3 norms each block's output before adding it: no share is linear, and the view says so.
check "attribution refused on gemma3" xrun "$app" --model "$work/gemma3" --text-view-attribution --text "$text" \
  --screenshot "$work/tv-gemma-attr.png"
check "refusal said" /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["text_view"]
assert not t["ready"] and "not available" in t["note"], t
' "$work/tv-gemma-attr.png.json"

# A long text: a few thousand characters on the built-in model.
long=$(for i in $(seq 1 40); do printf '%s ' "$text"; done)
check "long text" xrun "$app" --text-view --text "$long" --layer 1 --head 4 --screenshot "$work/tv-long.png"
check "long text: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/tv-long.png.json" "${panels[@]}"
check "long text: shades" "$colors" "$work/tv-long.png" 255,150,30:60 255,220,0:40
finish
