#!/usr/bin/env bash
# The Logit lens and Direct logit attribution panels end to end under Xvfb. --lens and
# --attribution open them under the heatmap (side by side), covering no panel, also beside
# the text view and at 1280x720; the lens draws rows of computed cells; the attribution's
# parts add up to the logit of the predicted token at the last position. On a
# Gemma-3-shaped model (its blocks norm their attention output) the attribution shows the
# core's refusal instead of crashing, and the lens still draws.
#   gui_lens.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="The cat sat on the mat. The cat ate the fish, and then the cat sat on the mat again."
panels=("Logit lens" "Direct logit attribution" "Attention heatmap" "Text & model" "Next token" "Model"
        "Head statistics" "All heads (softmax)")

check "screenshot" xrun "$app" --lens --attribution --text "$text" --screenshot "$work/lens.png"
check "no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/lens.png.json" "${panels[@]}"
check "lens rows and attribution sum" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
x, y, w, h = j["rects"]["lens_grid"]
assert w > 100 and h > 50, j["rects"]["lens_grid"]
assert j["lens"]["rows"] >= 5 and j["lens"]["error"] == "", j["lens"]
a = j["attribution"]
assert a["error"] == "" and a["position"] == j["T"] - 1 and len(a["target_ids"]) == 1, a
assert abs(a["sum"] - a["logit"]) <= 1e-4 * max(abs(a["logit"]), 1e-2), a
x, y, w, h = j["rects"]["attribution_grid"]
assert w > 40 and h > 10, j["rects"]["attribution_grid"]
' "$work/lens.png.json"
check "--query moves the attribution" xrun "$app" --attribution --query 5 --text "$text" --screenshot "$work/q5.png"
check "--query 5: position 5" /usr/bin/python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["attribution"]
assert a["position"] == 5 and a["error"] == "", a
' "$work/q5.png.json"
check "with the text view" xrun "$app" --lens --attribution --text-view --text "$text" --screenshot "$work/three.png"
check "with the text view: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" \
  "$work/three.png.json" "Text view" "${panels[@]}"
check "lens alone at 1280x720" xrun "$app" --lens --size 1280x720 --text "$text" --screenshot "$work/lens-720.png"
check "1280x720: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/lens-720.png.json" \
  "Logit lens" "Attention heatmap"

# Gemma-3-shaped: sandwich norms, so no attribution (the core's message); the lens draws.
check "tokenizer model" "$cli" random --preset tiny --layers 1 --out "$work/tiny"
check "gemma3_text model" /usr/bin/python3 "$tests_dir/gui_gemma3_model.py" "$work/gemma3" "$work/tiny"
check "gemma3" xrun "$app" --model "$work/gemma3" --lens --attribution --text "$text" --screenshot "$work/gemma3.png"
check "gemma3: refused with the core's message, the lens drawn" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert "not available" in j["attribution"]["error"] and "sum" not in j["attribution"], j["attribution"]
assert j["lens"]["rows"] >= 5 and j["lens"]["error"] == "", j["lens"]
' "$work/gemma3.png.json"
finish
