#!/usr/bin/env bash
# The heatmap's navigation end to end under Xvfb. At the start the whole matrix is shown (the
# zoom is the fit, no minimap) with the row strip under it; --heatmap-zoom and
# --heatmap-center zoom in and centre a token: the minimap appears, the selected cell is
# framed, the strip shows that row, and the texture holds only the cells around the view,
# one texel per cell. A zoom past the limit is clamped; a token out of range gives the go-to
# field's message and nothing else changes. On a Qwen2.5-0.5B-shaped random model (one
# layer) with a long text, the texture at fit is max-pooled to the pixels on screen, and
# zoomed in it is exact again.
#   gui_heatmap_nav.sh ATTNVIZ ATTNVIZ_CLI WORKDIR CHECK_COLORS CHECK_SCREENSHOT
set -u
app=$1 cli=$2 work=$3 colors=$4 shot=$5
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="The cat sat on the mat. The cat ate the fish, and then the cat sat on the mat again."
nav() {  # nav SIDECAR PYTHON-EXPRESSION: the expression over n = the sidecar's heatmap_nav, j = all of it
  /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); n = j["heatmap_nav"]
ok = eval("(" + sys.argv[2] + ")")
if not ok: print("heatmap_nav:", n, "T:", j["T"], "query:", j["query"]); sys.exit(1)
' "$1" "$2"
}

check "fit" xrun "$app" --text "$text" --layer 1 --head 4 --screenshot "$work/fit.png"
check "fit: drawn" "$shot" "$work/fit.png"
check "fit: whole matrix, no minimap, strip on the last row" nav "$work/fit.png.json" \
  'abs(n["zoom"] - n["fit"]) < 1e-6 and not n["minimap"] and n["strip_row"] == j["T"] - 1 and n["tex_cells"] == [0, j["T"], 0, j["T"]] and n["tex"] == [j["T"], j["T"]]'

check "zoomed" xrun "$app" --text "$text" --layer 1 --head 4 --heatmap-zoom 20 --heatmap-center 40 --screenshot "$work/zoom.png"
check "zoomed: drawn" "$shot" "$work/zoom.png"
check "zoomed: minimap, strip on row 40, query 40, exact texture around the view" nav "$work/zoom.png.json" '
n["zoom"] == 20 and n["minimap"] and n["strip_row"] == 40 and j["query"] == 40
and n["tex_cells"][0] <= 40 < n["tex_cells"][1] and n["tex_cells"][2] <= 40 < n["tex_cells"][3]
and n["tex_cells"][1] - n["tex_cells"][0] < j["T"]
and n["tex"] == [n["tex_cells"][3] - n["tex_cells"][2], n["tex_cells"][1] - n["tex_cells"][0]]
and n["x0"] > 0 and n["y0"] > 0 and n["goto_error"] == ""'
# The view's centre is cell 40.5 (the rectangle of the matrix on screen, in cells).
check "zoomed: centred on token 40" nav "$work/zoom.png.json" '
abs(n["x0"] + j["rects"]["heatmap"][2] / 2 / n["zoom"] - 40.5) < 0.6 and abs(n["y0"] + j["rects"]["heatmap"][3] / 2 / n["zoom"] - 40.5) < 0.6'
# The selected cell's pink frame and the minimap's yellow view rectangle.
check "zoomed: selected cell and minimap frame" "$colors" "$work/zoom.png" 255,90,200:60 255,220,0:30

check "past the largest zoom" xrun "$app" --text "$text" --heatmap-zoom 100000 --screenshot "$work/max.png"
check "past the largest zoom: 64 px per cell" nav "$work/max.png.json" 'n["zoom"] == 64 and n["minimap"]'
check "go to out of range runs" xrun "$app" --text "$text" --heatmap-center 100000 --screenshot "$work/bad.png"
check "go to out of range: the message, the view unchanged" nav "$work/bad.png.json" \
  '"out of range" in n["goto_error"] and abs(n["zoom"] - n["fit"]) < 1e-6 and j["query"] == -1'
check "out of range: still drawn" "$shot" "$work/bad.png"

# A Qwen2.5-0.5B-shaped model (one layer, a small vocabulary) on ~1500 tokens of text.
check "qwen2.5-0.5b-shaped model" "$cli" random --preset qwen2.5-0.5b --layers 1 --vocab 512 --out "$work/q05"
long=$(for i in $(seq 1 18); do printf '%s ' "$text"; done)
check "long: fit" xrun "$app" --model "$work/q05" --text "$long" --head 3 --screenshot "$work/long-fit.png"
check "long: max-pooled to the pixels on screen" nav "$work/long-fit.png.json" '
j["T"] > 1200 and n["fit"] < 1 and n["tex_cells"] == [0, j["T"], 0, j["T"]]
and n["tex"][0] <= j["rects"]["heatmap"][2] + 1 and n["tex"][1] <= j["rects"]["heatmap"][3] + 1 and n["tex"][0] < j["T"]
and n["rebuilds"] <= 3'
check "long: zoomed" xrun "$app" --model "$work/q05" --text "$long" --head 3 --heatmap-zoom 3 --heatmap-center 900 \
  --screenshot "$work/long-zoom.png"
check "long: exact around the view, minimap" nav "$work/long-zoom.png.json" '
n["zoom"] == 3 and n["minimap"] and n["strip_row"] == 900
and n["tex"] == [n["tex_cells"][3] - n["tex_cells"][2], n["tex_cells"][1] - n["tex_cells"][0]]
and n["tex_cells"][0] <= 900 < n["tex_cells"][1]'
finish
