#!/bin/sh
# Every named step of a protocol in lib/ (SHMOBJ__STEP("...")) is walked by
# a test: its name appears in some tests/test-*.c, where a process is
# stopped, delayed or killed there (tests/test-stall.h). A step added
# without a test that stalls a process at it fails here.
#
# usage: check-steps.sh SOURCE_ROOT
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
steps=$(grep -rhoE --exclude=step.h 'SHMOBJ__STEP\("[^"]+"\)' lib | sed -E 's/.*\("([^"]+)"\)/\1/' | sort -u)
fail=0
n=0
for s in $steps; do
    n=$((n + 1))
    if ! grep -qF "\"$s\"" tests/test-*.c; then
        echo "step $s is stalled by no test (tests/test-*.c)"
        fail=1
    fi
done
echo "$n steps, each walked by a test"
exit $fail
