#!/usr/bin/env bash
# Two prompts end to end under Xvfb. --other sets prompt B, --compare and --patching open the
# Compare prompts and Activation patching panels under the heatmap (covering no panel, also
# with the text view, the lens and the attribution open). The comparison aligns A and B (the
# same token count, differing from one word), and the patching grid, heads or residual
# stream, is what `attnviz-cli patch` computes for the same prompts. B = A changes nothing;
# prompts of different lengths and a missing prompt B are messages, not crashes.
#   gui_patching.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
a="The cat sat on the mat. The cat ate the fish."
b="The dog sat on the mat. The cat ate the fish."
panels=("Compare prompts" "Activation patching" "Attention heatmap" "Text & model" "Next token" "Model"
        "Head statistics" "All heads (softmax)")

# The grid in a sidecar against the CLI's JSON for the same prompts.
same_grid='
import json, sys
j = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))
kind = sys.argv[3]
p = j["patching"]
assert p["kind"] == kind and p["error"] == "" and p["message"] == "" and p["current"], p
assert p["position"] == j["T"] - 1 == ref["position"], (p["position"], j["T"], ref["position"])
assert p["target_ids"] == ref["target_ids"] and p["metric"] == ref["metric"], (p["target_ids"], ref["target_ids"])
g, r = p["grid"], ref[kind]
assert len(g) == len(r) and all(len(x) == len(y) for x, y in zip(g, r)), "grid shape"
tol = lambda v: 1e-6 * max(1.0, abs(v))
assert abs(p["clean"] - ref["clean"]) <= tol(ref["clean"]) and abs(p["other"] - ref["other"]) <= tol(ref["other"])
bad = [(l, c, x, y) for l, (gx, ry) in enumerate(zip(g, r)) for c, (x, y) in enumerate(zip(gx, ry)) if abs(x - y) > tol(y)]
assert not bad, bad[:5]
moved = max(abs(x - p["clean"]) for row in g for x in row)
assert moved > 1e-4, "nothing moved"
x, y, w, h = j["rects"]["patching_grid"]
assert w > 20 and h > 10, j["rects"]["patching_grid"]
'

check "screenshot" xrun "$app" --text "$a" --other "$b" --compare --patching --screenshot "$work/two.png"
check "no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/two.png.json" "${panels[@]}"
check "cli patch --heads" sh -c '"$1" patch --model builtin:fortunes-en --text "$2" --other "$3" --heads --json > "$4"' \
  _ "$cli" "$a" "$b" "$work/heads.json"
check "heads grid as the CLI's" /usr/bin/python3 -c "$same_grid" "$work/two.png.json" "$work/heads.json" heads
check "compare aligned, A and B differ" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
c = j["compare"]
assert c["Ta"] == c["Tb"] == c["n"] == j["T"] == 45 and c["message"] == "" and c["view"] != "A", c
assert c["max_abs_diff"] > 1e-4, c
x, y, w, h = j["rects"]["compare_matrix"]
assert w > 50 and h > 50 and abs(w - h) <= 1, j["rects"]["compare_matrix"]
' "$work/two.png.json"

check "residual grid" xrun "$app" --text "$a" --other "$b" --patching --patch-grid resid --screenshot "$work/resid.png"
check "cli patch --resid" sh -c '"$1" patch --model builtin:fortunes-en --text "$2" --other "$3" --resid --json > "$4"' \
  _ "$cli" "$a" "$b" "$work/resid.json"
check "residual grid as the CLI's" /usr/bin/python3 -c "$same_grid" "$work/resid.png.json" "$work/resid.json" resid

check "B = A" xrun "$app" --text "$a" --other "$a" --compare --patching --screenshot "$work/same.png"
check "B = A changes nothing" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
p, c = j["patching"], j["compare"]
assert p["error"] == "" and p["passes"] == 0 and p["other"] == p["clean"], p
assert all(x == p["clean"] for row in p["grid"] for x in row), p["grid"]
assert c["max_abs_diff"] == 0 and c["n"] == 45, c
' "$work/same.png.json"

check "different lengths" xrun "$app" --text "$a" --other "The dog" --compare --patching --screenshot "$work/short.png"
check "different lengths: said, aligned from the start" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
c, p = j["compare"], j["patching"]
assert c["Ta"] == 45 and c["Tb"] == 7 and c["n"] == 7 and "A has 45 tokens, B 7" in c["message"], c
assert "cannot be aligned" in p["message"] and "grid" not in p, p
' "$work/short.png.json"

check "no prompt B" xrun "$app" --text "$a" --compare --patching --screenshot "$work/none.png"
check "no prompt B: said in both panels" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["text"] == sys.argv[2], j["text"]  # --text still honoured without --other
assert "no other prompt" in j["compare"]["message"], j["compare"]
assert "no other prompt" in j["patching"]["message"] and "grid" not in j["patching"], j["patching"]
' "$work/none.png.json" "$a"

check "every band open" xrun "$app" --text "$a" --other "$b" --compare --patching --lens --attribution --text-view \
  --screenshot "$work/all.png"
# Five analysis panels in the bottom region: the first two tiled, the rest tabs of the third
# tile (the patching, opened last, shows); none covers another.
check "every band open: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/all.png.json" \
  "Text view" "Logit lens" "Activation patching" "Attention heatmap" "Text & model" "Next token" "Model" \
  "Head statistics" "All heads (softmax)"
finish
