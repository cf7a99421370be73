#!/bin/sh
# Copy the pages listed in pages.txt (beside this script) from the installed
# Debian package into OUT, keeping their paths relative to the root.
# Usage: sh make-docs.sh OUT      (install first: apt-get install -y postfix-doc)
set -eu

[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
out=$1
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
list=$here/pages.txt

pkg=$(sed -n 's/^# package: \([^ ]*\) .*/\1/p' "$list")
want=$(sed -n 's/^# package: [^ ]* \(.*\)$/\1/p' "$list")
root=$(sed -n 's/^# root: //p' "$list")

status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
case $status in
*" installed") ;;
*) echo "$0: package $pkg is not installed (apt-get install -y $pkg)" >&2; exit 1 ;;
esac
have=$(dpkg-query -W -f='${Version}' "$pkg")
[ "$have" = "$want" ] ||
    echo "$0: note: $pkg $have installed, the set was written against $want" >&2

mkdir -p "$out"
grep -v '^#' "$list" | while IFS= read -r page; do
    [ -n "$page" ] || continue
    [ -f "$root/$page" ] || { echo "$0: missing $root/$page" >&2; exit 1; }
    mkdir -p "$out/$(dirname -- "$page")"
    cp "$root/$page" "$out/$page"
done
n=$(grep -v -c '^#' "$list")
echo "$n pages copied from $root into $out"
