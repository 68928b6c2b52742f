#!/bin/sh
# shmobj.hpp, the C++ examples, the C++ blocks of doc/guide.md (each in
# a block of its own inside a function given a segment) and the C++ tests
# compile without a warning under -std=c++17 -Wall -Wextra -Wpedantic -Werror with both g++ and
# clang++ (a syntax-only pass: the templates the programs use are
# instantiated, nothing is linked). Exit 77 (skipped) when neither
# compiler is there; a missing one of the two fails the test, unless
# SHMOBJ_CXX_ONE=1 says one is enough on this machine.
# usage: check-cxx-compilers.sh SOURCE_DIR
set -eu
src=$1
flags="-std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I$src/include"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <shmobj.hpp>\n' >"$tmp/header.cpp"
# each C++ block of the guide, in a function that has a segment at hand
awk -v dir="$tmp" '
  /^```cpp$/ { n++; out = dir "/guide" n ".cpp"
               printf "#include <shmobj.hpp>\n#include <cstdio>\n" >out
               printf "void block(shmobj::segment &seg)\n{\n    (void)seg;\n    {\n" >>out; next }
  out != "" && /^```$/ { printf "    }\n}\n" >>out; close(out); out = ""; next }
  out != "" { print >>out }
' "$src/doc/guide.md"
found=0
fail=0
for cxx in g++ clang++; do
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "no $cxx"
    continue
  fi
  found=$((found + 1))
  for f in "$tmp"/header.cpp "$tmp"/guide*.cpp "$src"/examples/cxx/*.cpp "$src"/tests/test-cxx.cpp \
           "$src"/tests/test-examples-cxx.cpp; do
    if ! "$cxx" $flags "$f" 2>"$tmp/err"; then
      head -n 30 "$tmp/err"
      echo "$cxx: $f does not compile cleanly"
      fail=1
    fi
  done
  [ "$fail" = 0 ] && echo "$cxx: header, guide blocks, examples and tests compile cleanly"
done
[ "$found" = 0 ] && exit 77
if [ "$found" = 1 ] && [ "${SHMOBJ_CXX_ONE:-0}" != 1 ]; then
  echo "only one of g++ and clang++ is installed: both are required"
  fail=1
fi
exit "$fail"
