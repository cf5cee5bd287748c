#!/usr/bin/env bash
# GPT-OSS in the GUI under Xvfb, on the small model tests/reference/gpt_oss_parity.py writes
# (3 layers, 4 heads with learned sinks, 6 experts with 2 per token, the qwen3-12k tokenizer):
#  - the heatmap's softmax tab reserves the sink column (the screenshot's heatmap_sink rect)
#    and its rows' sink probabilities are the dump's layers.{l}.sink;
#  - --experts draws the Experts grid (6 columns, a row per token) for the selected layer.
#   gui_gpt_oss.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="the cat sat on the mat and the cat sat"
check "model" /usr/bin/python3 "$tests_dir/reference/gpt_oss_parity.py" --write-model "$work/m" \
  --tokenizer "$tests_dir/data/tokenizers/qwen3-12k.tokenizer.json"
check "screenshot" xrun "$app" --model "$work/m" --text "$text" --layer 1 --head 2 --stage probs --experts \
  --screenshot "$work/shot.png"
check "dump" "$cli" dump --model "$work/m" --text "$text" --stages probs,sink,experts --out "$work/d.safetensors"
check "the sink column, the experts grid, the dump's sink" /usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[3])
import parity as P
j = json.load(open(sys.argv[1]))
d, _ = P.read_safetensors(sys.argv[2])
T = d["tokens"].shape[0]
x, y, w, h = j["rects"]["experts_grid"]
assert w > 30 and h > 2 * T, j["rects"]["experts_grid"]
assert abs(w / h - 6 / T) < 0.05 * 6 / T or w / 6 > 1, (w, h)  # 6 columns, T rows
sx, sy, sw, sh = j["rects"]["heatmap_sink"]
assert sw > 5 and sh > 5, j["rects"]["heatmap_sink"]
s = d["layers.1.sink"]
p = d["layers.1.probs"]
assert abs(p.sum(-1) + s - 1).max() < 1e-5
assert s.shape == (4, T) and s.max() > 0.01, s.shape
' "$work/shot.png.json" "$work/d.safetensors" "$tests_dir/reference"
finish
