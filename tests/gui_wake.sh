#!/usr/bin/env bash
# A background job's end wakes the event loop: a model dropped on the window loads off the
# UI thread (slowed by ATTNVIZ_LOAD_DELAY_MS); with no input at all, a frame after the
# load's end shows it ("opened … in the status bar), and the loop then sleeps again.
# ATTNVIZ_FRAME_LOG records each presented frame's time and status line.
#   gui_wake.sh ATTNVIZ ATTNVIZ_CLI WORKDIR
set -u
app=$1 cli=$2 work=$3
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
if ! command -v xvfb-run >/dev/null; then
  echo "xvfb-run not found (apt-get install xvfb xauth)"
  exit 1
fi
check "random model" "$cli" random --preset tiny --layers 2 --gguf F32 --out "$work/g"
log="$work/frames.log"
# A normal session (not --screenshot, which draws without pause): the drop starts a 3 s load;
# nothing touches the window for 8 s.
check "session" xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
  ATTNVIZ_LOAD_DELAY_MS=3000 ATTNVIZ_FRAME_LOG="$1" "$0" --text "hello there" --drop "$2" & pid=$!
  sleep 8
  kill $pid; wait $pid; true' "$app" "$log" "$work/g/model.gguf"
check "frames logged" test -s "$log"
opened=$(grep -c "opened .*model.gguf" "$log")
loading=$(grep -c "loading .*model.gguf" "$log")
if [ "$loading" -ge 1 ] && [ "$opened" -ge 1 ]; then
  passed
else
  failed
  echo "not ok: with no input, no frame showed the load's end ($loading frames while loading, $opened after)"
  tail -5 "$log"
fi
# After it, the loop sleeps: not a frame every poll for the seconds left.
if [ "$opened" -le 60 ]; then passed; else failed; echo "not ok: $opened frames after the load with nothing to show"; fi
finish
