#!/bin/sh
# README's "Using it" programs are examples/readme-a.c and readme-b.c byte
# for byte, and they work in both orders: B started before A (B waits for
# the segment, then for the queue) and A before B.
# usage: check-readme.sh SOURCE_DIR READMEA_EXE READMEB_EXE
set -eu
src=$1
a=$2
b=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The fenced C blocks of the "Using it" section, one file each.
awk -v dir="$tmp" '
  /^## / { in_sec = ($0 == "## Using it") }
  in_sec && /^```c$/ { n++; out = dir "/block" n ".c"; printf "" >out; next }
  in_sec && out != "" && /^```$/ { close(out); out = ""; next }
  out != "" { print >>out }
' "$src/README.md"
for pair in 1:readme-a.c 2:readme-b.c; do
  block=$tmp/block${pair%%:*}.c
  [ -f "$block" ] || { echo "README's Using it has no block ${pair%%:*}"; exit 1; }
  if ! diff -u "$src/examples/${pair#*:}" "$block"; then
    echo "README's block ${pair%%:*} differs from examples/${pair#*:}"
    exit 1
  fi
done
[ ! -f "$tmp/block3.c" ] || { echo "README's Using it has more than two blocks"; exit 1; }

expect='employees 12, key value'
check_b() {
  out=$(cat "$1")
  [ "$out" = "$expect" ] || { echo "B printed '$out', expected '$expect'"; exit 1; }
}

# B before A: B must wait for the segment and then for the queue.
name=shmobj-readme-b-$$
"$b" "$name" >"$tmp/b1" &
bpid=$!
sleep 0.2
"$a" "$name" || { echo "A failed with B started first"; kill "$bpid" 2>/dev/null; exit 1; }
wait "$bpid" || { echo "B failed when started before A"; exit 1; }
check_b "$tmp/b1"

# A before B: everything exists when B starts.
name=shmobj-readme-a-$$
"$a" "$name" || { echo "A failed"; exit 1; }
"$b" "$name" >"$tmp/b2" || { echo "B failed when started after A"; exit 1; }
check_b "$tmp/b2"
echo "README's programs match examples/readme-[ab].c and run in both orders"
