#!/bin/sh
# Builds the training corpora of the built-in models from Debian packages:
#   OUT/fortunes-en.txt  every English fortune file of the `fortunes` package
#   OUT/poems-zh.txt     the Tang (tang300) and Song (song100) poems of `fortunes-zh`
# Usage: scripts/make-corpora.sh [OUT]   (default OUT: corpora/)
# Needs: apt-get install fortunes fortunes-zh   (and perl, which Debian always has)
# The files are listed with dpkg -L, sorted by name (LC_ALL=C), so the result is the same
# on every machine with the same package versions. Cleaning:
#   - lines that are just `%` (the fortune separators) become empty lines;
#   - ANSI colour escapes (ESC [ ... m) are removed;
#   - overstrike sequences (char, backspace) are removed; other control characters except
#     tab and newline are dropped; \r is dropped;
#   - runs of blank lines collapse to one.
set -eu
OUT=${1:-corpora}
mkdir -p "$OUT"
export LC_ALL=C

files_of() {  # regular text files of package $1 under .../fortunes/, minus .dat/.u8
  dpkg -L "$1" | grep '/share/games/fortunes/[^/]*$' | grep -v -e '\.dat$' -e '\.u8$' | sort | while read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"
  done
}

clean() {
  perl -CSD -ne '
    s/\r//g; s/\e\[[0-9;]*m//g; s/.\x08//g; s/[\x00-\x08\x0b-\x1f\x7f]//g;
    $_ = "\n" if /^%\s*$/;
    if (/^\s*$/) { print "\n" unless $blank++; } else { $blank = 0; print; }'
}

for p in fortunes fortunes-zh; do
  dpkg -s "$p" >/dev/null 2>&1 || { echo "error: package $p is not installed; HINT: apt-get install fortunes fortunes-zh" >&2; exit 1; }
done

files_of fortunes | xargs cat | clean > "$OUT/fortunes-en.txt"
zh=$(files_of fortunes-zh | grep -e '/tang300$' -e '/song100$')
[ -n "$zh" ] || { echo "error: tang300/song100 not found in fortunes-zh" >&2; exit 1; }
cat $zh | clean > "$OUT/poems-zh.txt"
for f in "$OUT/fortunes-en.txt" "$OUT/poems-zh.txt"; do
  echo "$f: $(wc -c < "$f") bytes, $(LC_ALL=C.UTF-8 wc -m < "$f") chars, sha256 $(sha256sum "$f" | cut -c1-16)"
done
