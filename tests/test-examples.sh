#!/bin/sh
# Runs the examples of examples/ the way the guide describes them.
#   test-examples.sh completion PROGRAM   the consumer first, then the producer;
#                                         then the producer first
#   test-examples.sh shape PROGRAM        the reader first, then the writer;
#                                         then the writer first
#   test-examples.sh python PEER SOURCE_DIR LIBDIR
#                                         a C process makes an object, the
#                                         Python binding reads and updates
#                                         it, the C process checks it
#                                         (exit 77 without python3)
#   test-examples.sh python-consumer COMPLETION SOURCE_DIR LIBDIR
#                                         examples/python/consumer.py answers
#                                         the jobs of `completion producer`,
#                                         started before it and after it
#                                         (exit 77 without python3)
#   test-examples.sh guide SOURCE_DIR CC...
#                                         every C block of doc/guide.md
#                                         compiles (strict warnings) in a
#                                         function whose file declares the
#                                         names the blocks share
set -eu
name="shmobj-example-$$"

# both_orders PROGRAM WAITER STARTER ARGS...: WAITER started first (it must
# wait, asleep, for what STARTER makes), then STARTER first
both_orders() {
  prog=$1 waiter=$2 starter=$3
  shift 3
  "$prog" "$waiter" "$name-1" "$@" &
  first=$!
  "$prog" "$starter" "$name-1" "$@" || { kill "$first" 2>/dev/null; exit 1; }
  wait "$first"
  "$prog" "$starter" "$name-2" "$@" &
  first=$!
  "$prog" "$waiter" "$name-2" "$@" || { kill "$first" 2>/dev/null; exit 1; }
  wait "$first"
}

# python_env LIBDIR: what python3 needs to load the library (and, in a
# sanitizer build, the runtimes the library needs first)
python_env() {
  command -v python3 >/dev/null 2>&1 || { echo "no python3"; exit 77; }
  preload=${SHMOBJ_EXAMPLE_PRELOAD:-}
  for rt in $preload; do
    [ -f "$rt" ] || { echo "no sanitizer runtime to preload ($rt)"; exit 77; }
  done
  lib="$1/libshmobj.so"
  # the module the examples import: python/shmobj.py of the tree
  PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
  PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
  export PYTHONPATH PYTHONDONTWRITEBYTECODE
}

case "$1" in
completion)
  both_orders "$2" consumer producer 2000
  ;;
shape)
  both_orders "$2" reader writer
  ;;
python)
  peer=$2 src=$3
  python_env "$4"
  trap '"$peer" destroy "$name" >/dev/null 2>&1 || true' EXIT
  "$peer" make "$name"
  LD_PRELOAD="$preload" SHMOBJ_LIBRARY="$lib" \
    python3 "$src/examples/python/record.py" "$name"
  "$peer" check "$name"
  ;;
python-consumer)
  prog=$2 src=$3
  python_env "$4"
  consumer() {
    LD_PRELOAD="$preload" SHMOBJ_LIBRARY="$lib" \
      python3 "$src/examples/python/consumer.py" "$1" 300
  }
  # B starts first: the Python consumer waits for the segment and the queue
  consumer "$name-1" &
  first=$!
  "$prog" producer "$name-1" 300 || { kill "$first" 2>/dev/null; exit 1; }
  wait "$first"
  "$prog" producer "$name-2" 300 &
  first=$!
  consumer "$name-2" || { kill "$first" 2>/dev/null; exit 1; }
  wait "$first"
  ;;
guide)
  src=$2
  shift 2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  awk -v dir="$tmp" '
    /^```c$/ { n++; out = dir "/block" n ".c"; printf "" >out; next }
    out != "" && /^```$/ { close(out); out = ""; next }
    out != "" { print >>out }
  ' "$src/doc/guide.md"
  n=0
  for b in "$tmp"/block*.c; do
    [ -f "$b" ] || { echo "doc/guide.md has no C block"; exit 1; }
    n=$((n + 1))
    # The names the cookbook's fragments use without declaring them.
    { cat <<'PRELUDE'
#include <shmobj.h>
#include <stddef.h>
#include <stdint.h>
#define WAIT_NS 1000000000
static shmobj_segment *seg;
static shmobj_queue *q;
static shmobj_map *m;
static const char *name = "guide";
static int rc;
static int64_t n;
static uint64_t rows = 2, cols = 3;
static shmobj_ref ref;
static shmobj_view v, stats;
static const char *key = "k", *value = "v";
static size_t key_len = 1, value_len = 1;
int guide_block(void);
int guide_block(void)
{
PRELUDE
      cat "$b"
      printf 'return rc;\n}\n'
    } >"$b.c"
    if ! "$@" -std=c11 -Wall -Wextra -Wpedantic -Werror -Wno-unused \
        -Werror=implicit-function-declaration -I"$src/include" \
        -c "$b.c" -o "$tmp/block.o"; then
      echo "doc/guide.md: C block $n does not compile:"
      sed 's/^/  | /' "$b"
      exit 1
    fi
  done
  echo "doc/guide.md: $n C blocks compile"
  ;;
*)
  echo "usage: $0 completion|shape PROGRAM | python PEER SOURCE_DIR LIBDIR |" >&2
  echo "       python-consumer COMPLETION SOURCE_DIR LIBDIR | guide SOURCE_DIR CC..." >&2
  exit 2
  ;;
esac
