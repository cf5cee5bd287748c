#!/usr/bin/env bash
# The tiled layout under Xvfb:
#  - each preset (--layout explore|research|classroom, --presentation = classroom) tiles
#    its panels with no overlap, says which it is in the sidecar, and the Classroom one gives
#    the heatmap at least 45 % of a 1280x720 and a 1920x1080 window;
#  - in a normal session, F7 switches to Research (its analysis panels open as tabs beside
#    the heatmap) and F8 to Classroom (large type), kept in the settings;
#  - a splitter dragged with the mouse (xdotool) moves by what the mouse moved, kept too.
#   gui_layout.sh ATTNVIZ WORKDIR
set -u
app=$1 work=$2
. "$(dirname "$0")/check_lib.sh"
verbose_checks=1
gui_env
text="The cat sat on the mat. The cat ate the fish."
if ! command -v xvfb-run >/dev/null || ! command -v xdotool >/dev/null; then
  echo "xvfb-run or xdotool not found (apt-get install xvfb xauth xdotool)"
  exit 1
fi
field() { /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"j": j}))' "$@"; }
share() { field "$1" 'round(100.0 * j["rects"]["heatmap"][2] * j["rects"]["heatmap"][3] / (j["window"][0] * j["window"][1]), 1)'; }

for p in explore research classroom; do
  check "$p screenshot" xrun "$app" --layout $p --text "$text" --screenshot "$work/$p.png"
  check "$p: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/$p.png.json" "Attention heatmap"
  check "$p: named in the sidecar" test "$(field "$work/$p.png.json" 'j["layout"]["preset"]')" = $p
done
check "research: the lens is a tab on the right" test "$(field "$work/research.png.json" 'j["layout"]["places"]["Logit lens"]')" = right
check "classroom: the caption beside the heatmap" test "$(field "$work/classroom.png.json" '"Caption" in j["windows"] and "All heads (softmax)" not in j["windows"]')" = True
for size in 1280x720 1920x1080; do
  # The lesson at its softmax step: a square matrix.
  check "classroom $size" env ATTNVIZ_LESSON_STEP=6 xvfb-run -a -s "-screen 0 1920x1200x24" "$app" --presentation --size $size --text "$text" --screenshot "$work/class-$size.png"
  check "classroom $size: no panel covers another" /usr/bin/python3 "$tests_dir/check_no_overlap.py" "$work/class-$size.png.json" "Attention heatmap" "Caption" "Guided lesson"
  s=$(share "$work/class-$size.png.json")
  if /usr/bin/python3 -c "import sys; sys.exit(0 if $s >= 45.0 else 1)"; then passed; else failed; echo "not ok: classroom $size gives the heatmap $s % (< 45 %)"; fi
done

# session XDOTOOL_SCRIPT: a normal session (settings read and written) at 1600x1000 that
# runs the xdotool commands once the window shows, then quits with Ctrl+Q.
settings="$work/config/attnviz/settings.json"
session() {
  xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
    "$0" --text "$1" --size 1600x1000 & pid=$!
    xdotool search --sync --onlyvisible --name "^attnviz$" >/dev/null
    sleep 4
    eval "$2"
    sleep 1
    xdotool key ctrl+q
    for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && { echo "attnviz did not quit on Ctrl+Q"; kill $pid; exit 1; }
    wait $pid' "$app" "$text" "$1"
}
check "F7: research" session 'xdotool mousemove 5 995 key F7'
check "research kept" test "$(field "$settings" 'j["layout"]["preset"] + str(j["panels"]["Logit lens"])')" = researchTrue
check "F8: classroom" session 'xdotool mousemove 5 995 key F8'
check "classroom kept, presenting" test "$(field "$settings" 'j["layout"]["preset"] + str(j["presentation"])')" = classroomTrue
check "F6: explore" session 'xdotool mousemove 5 995 key F6'
check "explore kept" test "$(field "$settings" 'j["layout"]["preset"] + str(j["presentation"]) + str(j["panels"]["Logit lens"])')" = exploreFalseFalse

# The left splitter, where the sidecar says it is at 1600x1000, dragged 150 px right.
check "explore 1600x1000" xrun "$app" --layout explore --size 1600x1000 --text "$text" --screenshot "$work/drag0.png"
read -r sx sy sw sh <<<"$(field "$work/drag0.png.json" '" ".join(str(v) for v in j["layout"]["splitters"]["left"])')"
gx=$((sx + sw / 2)) gy=$((sy + sh / 2))
check "drag the left splitter" session "xdotool mousemove $gx $gy mousedown 1 sleep 0.3 mousemove $((gx + 50)) $gy sleep 0.3 mousemove $((gx + 150)) $gy sleep 0.3 mouseup 1"
got=$(field "$settings" 'round(j["layout"]["left"] * 1600)')
want=$((sx + 150))
if [ "$(field "$settings" 'j["layout"]["left_dragged"]')" = True ] && [ $((got - want)) -le 2 ] && [ $((want - got)) -le 2 ]; then
  passed
else
  failed
  echo "not ok: the left splitter was at x=$sx, dragged by 150 px; the settings keep $got px (want $want ± 2)"
fi
finish
