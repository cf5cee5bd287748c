#!/usr/bin/env bash
# The Training panel end to end: attnviz --train-steps N under Xvfb trains the classroom
# preset for N steps, every panel shows the model in training, and the screenshot holds the
# panel's plots (the training-loss line and the validation-loss line in their colours).
#   gui_training.sh ATTNVIZ WORKDIR CHECK_COLORS
set -u
app=$1
work=$2
colors=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config" OMP_NUM_THREADS=1
cd "$work"
check "screenshot after 60 training steps" xvfb-run -a -s "-screen 0 1920x1200x24" "$app" --train-steps 60 \
  --screenshot "$work/train.png" --frames 5 --layer 1
check "the run finished" grep -q '"state": "finished"' "$work/train.png.json"
check "every panel shows the model in training" grep -q '"model": "training (step 60)"' "$work/train.png.json"
check "the text fits the run's vocabulary" grep -q '"error": ""' "$work/train.png.json"
# training loss (90,160,240) and validation loss (250,190,60) lines in the loss plot
check "loss plot drawn" "$colors" "$work/train.png" 90,160,240:100 250,190,60:100
# Training takes the left column below the text box: no other panel covers its plots (the
# head statistics once did), and it covers none, at the default size and at 1280x720.
check "no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/train.png.json" \
  Training "Text & model" "Attention heatmap"
check "1280x720 runs" xvfb-run -a -s "-screen 0 1920x1200x24" "$app" --train-steps 20 --size 1280x720 \
  --screenshot "$work/train-720.png" --frames 5 --layer 1
check "1280x720: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/train-720.png.json" \
  Training "Text & model" "Attention heatmap"
finish
