#!/bin/sh
# Runs the examples of examples/ the way the guide describes them.
#   test-examples.sh completion PROGRAM   the consumer first, then the producer
#   test-examples.sh python PEER SOURCE_DIR LIBDIR
#                                         a C process makes an object, the
#                                         Python binding reads and updates
#                                         it, the C process checks it
#                                         (exit 77 without python3)
set -eu
name="shmobj-example-$$"
case "$1" in
completion)
  prog=$2
  # B starts first: the consumer waits for the segment and the queue
  "$prog" consumer "$name" 2000 &
  consumer=$!
  "$prog" producer "$name" 2000 || { kill "$consumer" 2>/dev/null; exit 1; }
  wait "$consumer"
  ;;
python)
  peer=$2 src=$3 libdir=$4
  command -v python3 >/dev/null 2>&1 || { echo "no python3"; exit 77; }
  # a sanitizer build's library needs its runtimes loaded first
  preload=${SHMOBJ_EXAMPLE_PRELOAD:-}
  for rt in $preload; do
    [ -f "$rt" ] || { echo "no sanitizer runtime to preload ($rt)"; exit 77; }
  done
  trap '"$peer" destroy "$name" >/dev/null 2>&1 || true' EXIT
  "$peer" make "$name"
  LD_PRELOAD="$preload" SHMOBJ_LIBRARY="$libdir/libshmobj.so" \
    python3 "$src/examples/python/record.py" "$name"
  "$peer" check "$name"
  ;;
*)
  echo "usage: $0 completion PROGRAM | python PEER SOURCE_DIR LIBDIR" >&2
  exit 2
  ;;
esac
