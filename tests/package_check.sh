#!/usr/bin/env bash
# `cpack -G DEB` gives attnviz_VERSION_ARCH.deb; unpacked with dpkg-deb into a scratch root it
# holds the binaries, the same share/attnviz/ as `cmake --install`, the desktop entry, the
# icon and the man pages, its Depends name the package of every library the binaries link,
# and the unpacked attnviz-cli runs on its own data.
# Usage: package_check.sh BUILD_DIR WORKDIR VERSION CPACK CMAKE
set -u
build=$1
work=$2
version=$3
cpack=$4
cmake=$5
. "$(dirname "$0")/check_lib.sh"
unset ATTNVIZ_DATA_DIR
root=$work/root
usr=$root/usr

if ! (cd "$build" && "$cpack" -G DEB -B "$work/out" --config "$build/CPackConfig.cmake") >"$work/cpack.log" 2>&1; then
  echo "not ok: cpack -G DEB"
  failed "$work/cpack.log"
  finish
  exit 1
fi
passed
debs=("$work/out/attnviz_${version}_"*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  echo "not ok: one attnviz_${version}_ARCH.deb (found: $(ls "$work/out"))"
  failed
  finish
  exit 1
fi
deb=${debs[0]}
echo "package: $(basename "$deb"), $(stat -c %s "$deb") bytes"

# --- control fields
field() { dpkg-deb -f "$deb" "$1"; }
check "Package: attnviz" test "$(field Package)" = attnviz
check "Version: $version" test "$(field Version)" = "$version"
check "Maintainer set" bash -c "dpkg-deb -f '$deb' Maintainer | grep -q '<.*@.*>'"
check "Section set" test -n "$(field Section)"
check "Description set" test -n "$(field Description)"
depends=$(field Depends)
echo "Depends: $depends"
check "Depends set" test -n "$depends"
check "Depends names no -dev package" bash -c "! printf '%s' '$depends' | grep -q -- '-dev\\b'"
check "Recommends a CJK font" bash -c "dpkg-deb -f '$deb' Recommends | grep -q fonts-noto-cjk"

# --- the files
check "dpkg-deb -x" dpkg-deb -x "$deb" "$root"
gui=0
[ -x "$build/app/attnviz" ] && gui=1
check "attnviz-cli in /usr/bin" test -x "$usr/bin/attnviz-cli"
check "attnviz-cli.1.gz" test -f "$usr/share/man/man1/attnviz-cli.1.gz"
if [ $gui = 1 ]; then
  check "attnviz in /usr/bin" test -x "$usr/bin/attnviz"
  check "attnviz.1.gz" test -f "$usr/share/man/man1/attnviz.1.gz"
  check "desktop entry" test -f "$usr/share/applications/attnviz.desktop"
  check "icon" test -f "$usr/share/icons/hicolor/scalable/apps/attnviz.svg"
fi
check "assets" test -f "$usr/share/attnviz/assets/models/fortunes-en/config.json"
if [ -f "$build/python/attnviz/__init__.py" ]; then  # the Python module, inside the same package
  check "python module in dist-packages" bash -c "ls '$usr/lib/python3/dist-packages/attnviz/'_attnviz*.so"
  check "import attnviz from the package" env PYTHONPATH="$usr/lib/python3/dist-packages" /usr/bin/python3 -c \
    "import attnviz; assert attnviz.Model('builtin:fortunes-en').run(text='a b')['logits'].ndim == 2"
  check "Recommends python3-numpy" bash -c "dpkg-deb -f '$deb' Recommends | grep -q python3-numpy"
fi
# share/attnviz/ and bin/ are exactly what `cmake --install` gives
check "cmake --install" "$cmake" --install "$build" --prefix "$work/inst"
listing() { (cd "$1" 2>/dev/null && find . | LC_ALL=C sort); }
check "share/attnviz/ as cmake --install" diff <(listing "$work/inst/share/attnviz") <(listing "$usr/share/attnviz")
check "bin/ as cmake --install" diff <(listing "$work/inst/bin") <(listing "$usr/bin")
check "share/ as cmake --install" diff <(listing "$work/inst/share") <(listing "$usr/share")

# --- man pages: gzip, roff, generated from --help
man_ok() {  # PAGE NAME
  local page=$1 name=$2 esc=${2//-/\\-}
  gzip -t "$page" || return 1
  zcat "$page" >"$work/page.roff"
  grep -qF ".TH \"$(printf '%s' "$esc" | tr '[:lower:]' '[:upper:]')\" 1" "$work/page.roff" || { echo "no .TH"; return 1; }
  grep -qF "$esc \\- " "$work/page.roff" || { echo "no NAME line for $name"; return 1; }
  grep -qF "\\fB\\-\\-version\\fR" "$work/page.roff" || { echo "no --version option"; return 1; }
  grep -qF "$esc $version" "$work/page.roff" || { echo "no version $version"; return 1; }
  if command -v groff >/dev/null; then
    groff -man -Tutf8 -ww -z "$work/page.roff" >"$work/groff.log" 2>&1 || return 1
    [ ! -s "$work/groff.log" ] || { cat "$work/groff.log"; return 1; }
  fi
}
check "attnviz-cli.1.gz" man_ok "$usr/share/man/man1/attnviz-cli.1.gz" attnviz-cli
each_subcommand_in_page() {
  local sub subs
  subs=$("$usr/bin/attnviz-cli" --help | sed -n '/^Subcommands:/,$ s/^  \([^ ]\{1,\}\).*/\1/p')
  [ -n "$subs" ] || { echo "no subcommands in attnviz-cli --help"; return 1; }
  for sub in $subs; do
    zcat "$usr/share/man/man1/attnviz-cli.1.gz" | grep -qF ".SS \"attnviz\\-cli $sub\"" || { echo "no section for $sub"; return 1; }
  done
}
check "attnviz-cli.1.gz has a section for each subcommand" each_subcommand_in_page
if [ $gui = 1 ]; then
  if "$usr/bin/attnviz" --help 2>/dev/null | grep -q -- '--version'; then
    check "attnviz.1.gz" man_ok "$usr/share/man/man1/attnviz.1.gz" attnviz
  else
    echo "note: attnviz has no --version yet; its man page is checked without it"
    check "attnviz.1.gz" bash -c "gzip -t '$usr/share/man/man1/attnviz.1.gz' && zcat '$usr/share/man/man1/attnviz.1.gz' | grep -qF 'attnviz \\- '"
  fi
fi

# --- desktop entry and icon
if [ $gui = 1 ]; then
  desktop=$usr/share/applications/attnviz.desktop
  check "desktop entry: [Desktop Entry] first" bash -c "head -n 1 '$desktop' | grep -qx '\\[Desktop Entry\\]'"
  check "desktop entry: Type=Application" grep -qx 'Type=Application' "$desktop"
  check "desktop entry: Exec names the packaged binary" bash -c "exe=\$(sed -n 's/^Exec=\\([^ ]*\\).*/\\1/p' '$desktop'); test -n \"\$exe\" && test -x '$usr/bin/'\"\$exe\""
  check "desktop entry: Icon names the packaged icon" bash -c "icon=\$(sed -n 's/^Icon=//p' '$desktop'); test -f '$usr/share/icons/hicolor/scalable/apps/'\"\$icon\".svg"
  if command -v desktop-file-validate >/dev/null; then
    check "desktop-file-validate" desktop-file-validate "$desktop"
  fi
  check "icon is SVG" /usr/bin/python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == 'svg'" \
    "$usr/share/icons/hicolor/scalable/apps/attnviz.svg"
fi

# --- Depends covers the package of every library the binaries link (NEEDED)
deps_cover_needed() {
  local bin lib path pkg missing=0 names
  names=$(printf '%s\n' "$depends" | tr ',' '\n' | sed -e 's/^ *//' -e 's/[ (].*//')
  for bin in "$usr"/bin/*; do
    for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      path=$("$(command -v ldconfig || echo /sbin/ldconfig)" -p | awk -v l="$lib" '$1 == l && $NF ~ /^\// { print $NF; exit }')
      [ -n "$path" ] || { echo "$lib: not found by ldconfig"; missing=1; continue; }
      pkg=$({ dpkg -S "$path" || dpkg -S "$(readlink -f "$path")"; } 2>/dev/null | head -n 1)
      pkg=${pkg%%:*}
      [ -n "$pkg" ] || { echo "$lib ($path): no Debian package owns it"; missing=1; continue; }
      if ! printf '%s\n' "$names" | grep -qxF "$pkg"; then
        echo "$(basename "$bin") links $lib from $pkg, which Depends does not name"
        missing=1
      fi
    done
  done
  return $missing
}
check "Depends covers every NEEDED library" deps_cover_needed

# --- the unpacked programs run, on the unpacked data
cd /
check "attnviz-cli --version" test "$("$usr/bin/attnviz-cli" --version 2>&1)" = "attnviz-cli $version"
if [ $gui = 1 ] && "$usr/bin/attnviz" --help 2>/dev/null | grep -q -- '--version'; then
  check "attnviz --version" test "$("$usr/bin/attnviz" --version 2>&1)" = "attnviz $version"
fi
check "info on the packaged built-in model" bash -c \
  "'$usr/bin/attnviz-cli' info --model builtin:fortunes-en | grep -qF '($usr/share/attnviz/assets/models/fortunes-en)'"
check "dump with the packaged built-in model" "$usr/bin/attnviz-cli" dump --model builtin:fortunes-en --text "hi there" \
  --out "$work/d.safetensors"
finish
