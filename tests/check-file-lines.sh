#!/bin/sh
# No file in lib/ over 800 lines (doc/architecture.md, "Files and
# rooms"): a longer file holds two jobs. A .c file is counted together
# with the *-inline.h headers it includes, whose bodies are its own code
# moved out of it for other layers to inline, so that moving code into an
# inline header does not dodge the limit.
#
# usage: check-file-lines.sh SOURCE_ROOT
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
max=800
fail=0
for f in $(find lib -name '*.c' -o -name '*.h' | sort); do
    n=$(wc -l <"$f")
    if [ "$n" -gt "$max" ]; then
        echo "$f: $n lines, more than $max: split it by job"
        fail=1
    fi
    case $f in *.c) ;; *) continue ;; esac
    total=$n
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*-inline\.h\)".*/\1/p' "$f"); do
        p=$(find lib -name "$h" | head -n 1)
        [ -n "$p" ] && total=$((total + $(wc -l <"$p")))
    done
    if [ "$total" -gt "$max" ] && [ "$total" != "$n" ]; then
        echo "$f: $total lines with its inline headers, more than $max: split it by job"
        fail=1
    fi
done
[ $fail = 0 ] && echo "file lines: every file of lib/ within $max lines"
exit $fail
