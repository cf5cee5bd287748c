#!/usr/bin/env bash
# Real sliding windows in the GUI: a small Gemma-3-shaped random model (local
# layers of window 4 alternating with global ones, tests/gui_gemma3_model.py) opened under
# Xvfb with a block_size crop. The softmax tab of a local layer paints the keys outside the
# window in their own colour and frames the band it sees; the token strip and the lesson run;
# the capped tab opens only on a model that soft-caps (gemma2), else the masked tab shows.
#   gui_window_band.sh ATTNVIZ ATTNVIZ_CLI WORKDIR CHECK_COLORS
# docs/window-band.png is this script's first screenshot.
set -u
app=$1
cli=$2
work=$3
colors=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check_lib.sh"
verbose_checks=1
export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config" OMP_NUM_THREADS=1
cd "$work"
xrun() { xvfb-run -a -s "-screen 0 1920x1200x24" "$@"; }
text="the cat sat on the mat, the cat ate"

check "tokenizer model" "$cli" random --preset tiny --layers 1 --out "$work/tiny"
check "gemma3_text model" /usr/bin/python3 "$here/gui_gemma3_model.py" "$work/gemma3" "$work/tiny"
check "gemma2 model" /usr/bin/python3 "$here/gui_gemma3_model.py" "$work/gemma2" "$work/tiny" --gemma2 1.5
check "info names the windows" sh -c "'$cli' info --model '$work/gemma3' | grep -q 'window 4 on layers 0,2, global on 1,3'"

check "local layer screenshot" xrun "$app" --model "$work/gemma3" --text "$text" --layer 0 --stage probs \
  --block-size 16 --screenshot "$work/local.png"
check "labelled random weights" grep -q '"random_weights": true' "$work/local.png.json"
check "crop: 19 dropped, T 16" sh -c "grep -q '\"dropped\": 19' '$work/local.png.json' && grep -q '\"T\": 16' '$work/local.png.json'"
# Keys outside the window (120,96,64): 78 of the 256 cells of the 16 x 16 matrix, each tens
# of pixels wide; the band's frame (0,230,170).
check "window band drawn" "$colors" "$work/local.png" 120,96,64:30000 0,230,170:1500

check "global layer screenshot" xrun "$app" --model "$work/gemma3" --text "$text" --layer 1 --stage masked \
  --block-size 16 --screenshot "$work/global.png"
check "global layer: masked tab" grep -q '"stage": "masked"' "$work/global.png.json"

# No soft-cap in Gemma 3: asking for the capped tab shows the masked one.
check "no capped tab without a soft-cap" xrun "$app" --model "$work/gemma3" --text "$text" --layer 0 --stage capped \
  --screenshot "$work/nocap.png"
check "fell back to masked" grep -q '"stage": "masked"' "$work/nocap.png.json"
check "gemma2 capped tab" xrun "$app" --model "$work/gemma2" --text "$text" --layer 0 --stage capped \
  --screenshot "$work/capped.png"
check "capped shown" grep -q '"stage": "capped"' "$work/capped.png.json"

# The lesson's step 10 (the crop beside a real window) on a global layer moves to a local one.
check "lesson window step" env ATTNVIZ_LESSON_STEP=11 xvfb-run -a -s "-screen 0 1920x1200x24" "$app" \
  --model "$work/gemma3" --text "$text" --layer 1 --block-size 16 --screenshot "$work/lesson.png"
check "lesson moved to local layer 0" grep -q '"layer": 0' "$work/lesson.png.json"
finish
