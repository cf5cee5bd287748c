#!/usr/bin/env bash
# The GUI end to end: install into a temporary prefix, run the INSTALLED attnviz under
# Xvfb with --screenshot, and check the PNG's pixels (check_screenshot). Also: unknown
# characters show an error in the UI (exit 0, last good trace kept), a bad model directory
# does not crash, and --layer/--head are honoured.
#   gui_screenshot.sh BUILD_DIR WORKDIR CHECKER
set -u
build=$1
work=$2
checker=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config"  # never the user's own
if ! command -v xvfb-run >/dev/null; then
  echo "xvfb-run not found (apt-get install xvfb xauth)"
  exit 1
fi
xrun() { xvfb-run -a -s "-screen 0 1920x1200x24" "$@"; }

check "install" cmake --install "$build" --prefix "$work/prefix"
check "attnviz installed" test -x "$work/prefix/bin/attnviz"
cd "$work"
app="$work/prefix/bin/attnviz"

check "screenshot runs" xrun "$app" --screenshot "$work/shot.png" --frames 5 --layer 1 --head 5 \
  --text "The cat sat on the mat. The cat ate the fish."
check "screenshot pixels" "$checker" "$work/shot.png"
# The default layout at the default size and at a projector's 1280x720: no panel covers
# another, and the left column's panels are all drawn.
check "no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/shot.png.json" \
  "Text & model" "Next token" "Model" "Head statistics" "Attention heatmap" "All heads (softmax)"
check "1280x720 runs" xrun "$app" --screenshot "$work/shot-720.png" --frames 5 --size 1280x720 \
  --text "The cat sat on the mat. The cat ate the fish."
# (at 720 px the Model and Head statistics panels share a tile as tabs: the statistics, opened last, shows)
check "1280x720: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/shot-720.png.json" \
  "Text & model" "Next token" "Head statistics" "Attention heatmap" "All heads (softmax)"
check "--layer/--head honoured" grep -q '"head": 5' "$work/shot.png.json"
# With no --model the installed builtin:fortunes-en opens (found next to the binary).
check "opens the built-in model" grep -q '"model": "builtin:fortunes-en"' "$work/shot.png.json"
check "trained, not random" grep -q '"random_weights": false' "$work/shot.png.json"
# A generated model is labelled as random weights.
check "random model made" "$work/prefix/bin/attnviz-cli" random --preset tiny --layers 2 --out "$work/random-model"
check "random model runs" xrun "$app" --screenshot "$work/random.png" --frames 3 --model "$work/random-model" --text "hello"
check "says random weights" grep -q '"random_weights": true' "$work/random.png.json"
check "default view is the softmax" grep -q '"stage": "probs"' "$work/shot.png.json"

# Presentation mode on a projector's 1280x720 and on 1920x1080: the heatmap window takes at
# least half of the window, its matrix is drawn large, the secondary panels are folded away.
for size in 1280x720 1920x1080; do
  check "presentation $size runs" xrun "$app" --screenshot "$work/present-$size.png" --frames 5 --presentation \
    --size "$size" --layer 1 --head 4 --text "The cat sat on the mat. The cat sat on the mat."
  check "presentation $size pixels" "$checker" "$work/present-$size.png"
  check "presentation $size layout" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
W, H = j["window"]
x, y, w, h = j["rects"]["heatmap_window"]
assert j["presentation"] and (W, H) == tuple(map(int, sys.argv[2].split("x"))), j
assert w * h >= 0.5 * W * H, ("heatmap window", w * h / (W * H))
assert j["rects"]["heatmap"][3] >= 0.45 * H, ("matrix height", j["rects"]["heatmap"])
assert j["rects"]["head_grid"][2] == 0, "the head grid should be folded away"
' "$work/present-$size.png.json" "$size"
done

# The guided lesson opened at step 5 (exp and the row sum): the heatmap shows the masked
# scores, row i = the last token is outlined, and the panels are drawn.
check "lesson runs" env ATTNVIZ_LESSON_STEP=5 xvfb-run -a -s "-screen 0 1920x1200x24" "$app" --screenshot "$work/lesson.png" \
  --frames 5 --layer 1 --head 4 --text "The cat sat on the mat. The cat sat on the mat."
check "lesson pixels" "$checker" "$work/lesson.png"
check "lesson state" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["lesson"]["open"] and j["lesson"]["row"] == j["T"] - 1 and 0 <= j["lesson"]["col"] <= j["lesson"]["row"], j["lesson"]
assert j["stage"] == "masked", j["stage"]
' "$work/lesson.png.json"

# Text longer than block_size: the window slides, tokens drop.
check "small block_size" xrun "$app" --screenshot "$work/window.png" --frames 3 --block-size 8 --stage masked \
  --text "to be or not to be"
check "window pixels" "$checker" "$work/window.png"
check "dropped reported" grep -q '"dropped": 10' "$work/window.png.json"

# 猫 is not in the English model's vocabulary: left out (and listed), the rest runs, exit 0.
check "unknown character runs" xrun "$app" --screenshot "$work/unknown.png" --frames 3 --text "The cat sat on the mat and looked at the 猫"
check "unknown character skipped" /usr/bin/python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); assert j["skipped"] == ["猫"] and not j["showing_sample"], j' "$work/unknown.png.json"
check "the rest computed" grep -q '"T": 41' "$work/unknown.png.json"
check "unknown character pixels" "$checker" "$work/unknown.png"
# English typed into poems-zh: no character is in its vocabulary, so its sample text runs
# (never blank panels) and the English stays in the text box.
check "all unknown runs" xrun "$app" --screenshot "$work/allunknown.png" --frames 3 --model builtin:poems-zh --text "hello"
check "all unknown pixels" "$checker" "$work/allunknown.png"
check "sample shown instead" /usr/bin/python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); assert j["showing_sample"] and j["T"] == 24 and j["skipped"] == ["h", "e", "l", "o"], j' "$work/allunknown.png.json"

# A model directory that does not exist: an error, exit 0.
check "bad model runs" xrun "$app" --screenshot "$work/badmodel.png" --frames 3 --wait 60 --model "$work/nope"
check "bad model error" grep -q 'could not load model' "$work/badmodel.png.json"

# A GGUF file opens as a model and its own tokenizer (tokenizer.ggml.*) encodes the text:
# "the theater" is t, he, Ġthe, a, t, e, r with the test writer's merges.
check "gguf model made" "$build/tests/gguf_make_model" tiny Q4_K "$work/gguf" --no-hf --vocab 300
check "gguf model runs" xrun "$app" --screenshot "$work/gguf.png" --frames 3 --model "$work/gguf/model.gguf" --text "the theater"
check "gguf text encoded" grep -q '"T": 7' "$work/gguf.png.json"
check "gguf pixels" "$checker" "$work/gguf.png"
# The arithmetic of its quantized products: float32 unless asked (--arith, or the Compute menu).
check "gguf: f32 products by default" grep -q '"arith": "f32"' "$work/gguf.png.json"
check "gguf --arith int8 runs" xrun "$app" --screenshot "$work/gguf-int8.png" --frames 3 --model "$work/gguf/model.gguf" \
  --text "the theater" --arith int8
check "gguf: int8 products said" grep -q '"arith": "int8"' "$work/gguf-int8.png.json"

# Typing: 12 keys, one at a time, each shown before the next; the final text is the
# start plus every key, and each key has its keystroke-to-frame time.
check "typing runs" xrun "$app" --screenshot "$work/typed.png" --frames 2 --text "The cat " --type "sat on a mat"
check "typed text computed" grep -q '"text": "The cat sat on a mat"' "$work/typed.png.json"
check "every key timed" /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["typing"]
assert t["keys"] == 12 and len(t["latency_ms"]) == 12, t
assert all(x > 0 for x in t["latency_ms"]) and all(f > 0 for f in t["forward_ms"]), t
assert t["median_ms"] <= t["p90_ms"] <= t["max_ms"], t
' "$work/typed.png.json"
check "typed T" grep -q '"T": 20' "$work/typed.png.json"
# A compact trace (no stored matrices): the heatmap computes its head's rows itself, all 8
# for the first text, then only each key's new row (8 + 12 = 20), not the whole head again
# (8 + 9 + … + 20 = 182).
export ATTNVIZ_TRACE_MATRICES=recompute
check "typing compact" xrun "$app" --screenshot "$work/typed-compact.png" --frames 2 --text "The cat " --type "sat on a mat"
unset ATTNVIZ_TRACE_MATRICES
check "a key computes its rows only" /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
n = j["heatmap_nav"]["rows_computed"]
assert j["T"] == 20 and 20 <= n <= 40, n
' "$work/typed-compact.png.json"

# The sidecar's frame times: one entry per frame presented, medians that are times.
check "frame times" /usr/bin/python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["frames"]
assert f["count"] >= 2 and 0 < f["ui_ms_median"] < 10000 and 0 < f["draw_ms_median"] < 10000, f
' "$work/typed-compact.png.json"

# Presentation mode renders too.
check "presentation mode" xrun "$app" --screenshot "$work/presentation.png" --frames 3 --presentation --head 2
check "presentation pixels" "$checker" "$work/presentation.png"

finish
