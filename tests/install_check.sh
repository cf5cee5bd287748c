#!/usr/bin/env bash
# `cmake --install` gives PREFIX/bin/attnviz-cli and PREFIX/share/attnviz/, and the
# installed binary runs from anywhere. Usage: install_check.sh BUILD_DIR WORKDIR
set -u
build=$1
work=$2
. "$(dirname "$0")/check_lib.sh"
check "install" cmake --install "$build" --prefix "$work/prefix"
check "binary installed" test -x "$work/prefix/bin/attnviz-cli"
check "assets installed" test -f "$work/prefix/share/attnviz/assets/README.md"
cd /
check "runs from elsewhere" "$work/prefix/bin/attnviz-cli" random --preset tiny --layers 1 --out "$work/m"
check "dump from elsewhere" "$work/prefix/bin/attnviz-cli" dump --model "$work/m" --text "hi there" --out "$work/d.safetensors"
# a model placed in the installed data folder is found as builtin:NAME (only via <exe>/../share)
mkdir -p "$work/prefix/share/attnviz/assets/models" && cp -r "$work/m" "$work/prefix/share/attnviz/assets/models/installcheck"
check "finds installed data" "$work/prefix/bin/attnviz-cli" info --model builtin:installcheck
check "lists installed data" bash -c "'$work/prefix/bin/attnviz-cli' info --list | grep -q builtin:installcheck"
# the Python module, when the build made it: imported from the prefix alone, it finds the
# installed data (builtin:installcheck) from there
if [ -f "$build/python/attnviz/__init__.py" ]; then
  check "python module installed" bash -c "ls '$work/prefix/lib/python3/dist-packages/attnviz/'_attnviz*.so"
  check "import attnviz from the prefix" env PYTHONPATH="$work/prefix/lib/python3/dist-packages" /usr/bin/python3 -c \
    "import attnviz; t = attnviz.Model('builtin:installcheck').run(text='hi there'); assert t['logits'].shape[0] == len(t.tokens) > 0"
fi
finish
