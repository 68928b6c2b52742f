#!/bin/sh
# Every cmocka test that starts a thread must run under the thread
# sanitizer (suite 'threads'): its name matches test_*_threads_*, or it is
# listed by name in tests/meson.build's threads block. Finds the test around
# each pthread_create() / test_thread_start() of tests/test-*.c.
# usage: check-threads.sh tests/meson.build tests/
set -eu
build=$1
dir=$2
missing=0
for f in "$dir"/test-*.c; do
  for t in $(awk '/^static (void|int) test_[a-z0-9_]*\(/ { n = $3; sub(/\(.*/, "", n) }
                  /pthread_create\(|test_thread_start\(/ && n != "" { print n }' "$f" | sort -u); do
    case "$t" in
      test_*_threads_*) continue ;;
    esac
    if ! grep -q "'$t'" "$build"; then
      echo "$f: $t starts a thread but is not in suite 'threads'"
      missing=1
    fi
  done
done
exit $missing
