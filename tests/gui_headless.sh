#!/usr/bin/env bash
# attnviz --headless: the GUI drawn offscreen through EGL with no display server at all
# (DISPLAY and WAYLAND_DISPLAY unset; Mesa's llvmpipe here, a GPU's driver elsewhere), as
# scripts/device-check.sh runs it. The screenshot has the window's size; typed keys are
# timed on both backends; the heatmap's pixels equal those of the same state drawn in a
# window under Xvfb; --headless without --screenshot is a usage error.
#   gui_headless.sh ATTNVIZ WORKDIR
set -u
app=$1 work=$2
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="The cat sat on the mat. The cat sat on the mat."
headless() { env -u DISPLAY -u WAYLAND_DISPLAY "$app" --headless "$@"; }

for backend in cpu gpu; do
  check "headless --type on $backend" headless --backend "$backend" --text "$text" --type " The" --screenshot "$work/$backend.png"
  check "headless $backend: size, backend, typed keys" /usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[3])
from png_rgb import read_png_rgb
w, h, rows = read_png_rgb(sys.argv[1])
assert (w, h) == (1600, 1000), (w, h)
j = json.load(open(sys.argv[1] + ".json"))
assert j["backend"] == sys.argv[2], j["backend"]
t = j["typing"]
assert t["keys"] == 4 and len(t["latency_ms"]) == 4 and all(x > 0 for x in t["latency_ms"]), t
assert j["text"].endswith("mat. The"), j["text"]
' "$work/$backend.png" "$backend" "$tests_dir"
done
check "the same state in a window (Xvfb)" xrun "$app" --text "$text" --size 1600x1000 --screenshot "$work/window.png"
check "headless on cpu" headless --text "$text" --screenshot "$work/still.png"
check "the heatmap's pixels equal the window's" /usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[3])
from png_rgb import read_png_rgb
a, b = read_png_rgb(sys.argv[1]), read_png_rgb(sys.argv[2])
ra, rb = json.load(open(sys.argv[1] + ".json"))["rects"]["heatmap"], json.load(open(sys.argv[2] + ".json"))["rects"]["heatmap"]
assert ra == rb, (ra, rb)
x, y, w, h = (int(v) for v in ra)
assert w > 100 and h > 100, ra
diff = sum(a[2][r][x * 3:(x + w) * 3] != b[2][r][x * 3:(x + w) * 3] for r in range(y, y + h))
assert diff == 0, f"{diff} of {h} heatmap rows differ"
' "$work/still.png" "$work/window.png" "$tests_dir"
check "--headless without --screenshot is refused, naming it" bash -c '
  ! env -u DISPLAY -u WAYLAND_DISPLAY "$1" --headless --text x >"$2" 2>&1 && grep -q -- "--screenshot" "$2"' _ "$app" "$work/usage.log"
finish
