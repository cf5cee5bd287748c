#!/usr/bin/env bash
# A normal GUI session (settings read and written, not --screenshot) under Xvfb, driven with
# xdotool as a person would: a model that fails to load is never saved, and a saved model
# that no longer loads makes the next start fall back to the default model.
#   gui_session.sh ATTNVIZ WORKDIR
set -u
app=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config"  # never the user's own
settings="$work/config/attnviz/settings.json"
if ! command -v xvfb-run >/dev/null || ! command -v xdotool >/dev/null; then
  echo "xvfb-run or xdotool not found (apt-get install xvfb xauth xdotool)"
  exit 1
fi

# session ARGS...: starts attnviz, waits until it has answered, quits with Ctrl+Q (as a user).
session() {
  xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
    "$0" "$@" & pid=$!
    xdotool search --sync --onlyvisible --name "^attnviz$" >/dev/null
    sleep 6
    xdotool mousemove 800 600 click 1 sleep 0.5 key ctrl+q
    for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && { echo "attnviz did not quit on Ctrl+Q"; kill $pid; exit 1; }
    wait $pid' "$app" "$@"
}
model_saved() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("model", ""))' "$settings"; }

# 1. A path that does not exist, given on the command line: the session shows the error and
#    quits; the settings do not keep the bad path.
check "session with a bad model" session --model "$work/no-such-model" --text "hello"
check "settings written" test -f "$settings"
if model_saved | grep -q "no-such-model"; then failed; echo "not ok: the bad model path was saved: $(model_saved)"; else passed; fi

# 2. Settings that name a model that is gone: the start falls back to the default model, and
#    that is what the next save keeps.
/usr/bin/python3 - "$settings" "$work/gone-model" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["model"] = sys.argv[2]
json.dump(s, open(sys.argv[1], "w"))
PY
check "session from saved settings" session --text "hello"
check "fell back to the built-in model" test "$(model_saved)" = "builtin:fortunes-en"
finish
