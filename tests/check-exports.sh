#!/bin/sh
# The shared library exports exactly the functions the public headers
# declare with SHMOBJ_API, nothing else, and carries a SONAME.
# usage: check-exports.sh LIBSHMOBJ_SO SOURCE_DIR
set -eu
so=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
readelf -d "$so" | grep -q 'SONAME.*libshmobj\.so\.[0-9]' || {
  echo "no SONAME in $so"; exit 1; }
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {sub(/@.*/, "", $3); print $3}' \
  | sort -u >"$tmp/exported"
# Declarations span lines; join each header, then pick SHMOBJ_API names.
find "$src/include" "$src/lib/htcore" -name '*.h' -exec cat {} + 2>/dev/null \
  | tr '\n' ' ' | grep -o 'SHMOBJ_API[^;(]*(' \
  | grep -o 'shmobj_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort -u >"$tmp/declared"
if ! diff -u "$tmp/declared" "$tmp/exported"; then
  echo "exported symbols and SHMOBJ_API declarations differ (- declared, + exported)"
  exit 1
fi
echo "$(wc -l <"$tmp/exported") symbols, all declared; SONAME present"
