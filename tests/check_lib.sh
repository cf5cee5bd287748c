# Shared by the shell tests: source it after setting `work` (the test's scratch folder).
#   check NAME COMMAND...   runs COMMAND; a pass, or "not ok: NAME" with its output
#   passed / failed [LOG]   count a check done by hand (failed prints LOG, if given)
#   finish                  prints the counts; its status is the test's result
#   $tests_dir              this folder (tests/), for the checkers beside it
#   gui_env                 for the GUI tests: settings and caches under $work (never the
#                           user's), one OpenMP thread, and cd "$work"
#   xrun COMMAND...         COMMAND under a fresh Xvfb (1920x1200)
rm -rf "$work" && mkdir -p "$work"
tests_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pass=0
fail=0
passed() { pass=$((pass + 1)); }
failed() {
  fail=$((fail + 1))
  [ $# -gt 0 ] && [ -f "$1" ] && sed 's/^/    /' "$1"
  return 0
}
check() {
  local name=$1
  shift
  if "$@" >"$work/log" 2>&1; then
    passed
    [ -n "${verbose_checks:-}" ] && echo "ok: $name"
  else
    echo "not ok: $name"
    failed "$work/log"
  fi
  return 0
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
gui_env() {
  export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config" OMP_NUM_THREADS=1
  cd "$work" || exit 1
}
xrun() { xvfb-run -a -s "-screen 0 1920x1200x24" "$@"; }
