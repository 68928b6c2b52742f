#!/bin/sh
# Install the build into a scratch destdir, then build C and C++ programs
# against it with `pkg-config --cflags --libs shmobj` and strict warnings,
# and run them. Also compiles every public header on its own in both
# languages, pedantic and warning-free, shmobj.hpp as C++17, and builds and
# runs the installed examples with their own Makefile.
# usage: check-install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --no-rebuild --destdir "$tmp/root" >/dev/null
pc=$(find "$tmp/root" -name shmobj.pc | head -n 1)
[ -n "$pc" ] || { echo "shmobj.pc not installed"; exit 1; }
pcdir=$(dirname "$pc")
prefix=$(sed -n 's/^prefix=//p' "$pc")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --cflags --libs shmobj)
libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --variable=libdir shmobj)
echo "pkg-config: $flags"
cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$src/tests/install/consumer.c" $flags -o "$tmp/consumer-c"
c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror "$src/tests/install/consumer.cpp" $flags -o "$tmp/consumer-cxx"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer-c"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer-cxx"
# The installed tool finds the installed library by itself: a prefix the
# dynamic loader does not search (~/opt/shmobj) must not leave `shmobj`
# failing with "cannot open shared object file".
tool="$tmp/root$prefix/bin/shmobj"
[ -x "$tool" ] || { echo "shmobj not installed"; exit 1; }
want_libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir shmobj)
if [ "$prefix" != /usr ] && command -v readelf >/dev/null 2>&1; then
  readelf -d "$tool" | grep -E 'R(UN)?PATH' | grep -qF "$want_libdir" ||
    { echo "the installed shmobj has no run path to $want_libdir"; readelf -d "$tool" | grep -E 'R(UN)?PATH'; exit 1; }
fi
# Each installed header compiles alone, in C and in C++.
incdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --variable=includedir shmobj)
for h in $(cd "$incdir" && find . -name '*.h' | sed 's|^\./||'); do
  case "$h" in *experimental*) continue ;; esac
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/h.c"
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$incdir" -c "$tmp/h.c" -o "$tmp/h.o"
  cp "$tmp/h.c" "$tmp/h.cpp"
  c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -I"$incdir" -c "$tmp/h.cpp" -o "$tmp/h.o"
done
# The C++ header, alone, as C++17.
printf '#include <shmobj.hpp>\nint main() { return 0; }\n' >"$tmp/hpp.cpp"
c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -I"$incdir" -c "$tmp/hpp.cpp" -o "$tmp/h.o"
# The installed examples, built by their Makefile through the installed
# shmobj.pc, with warnings as errors, then run.
exdir=$(find "$tmp/root" -type d -path '*/libshmobj/examples' | head -n 1)
[ -n "$exdir" ] || { echo "examples not installed"; exit 1; }
cp -R "$exdir" "$tmp/examples"
PKG_CONFIG_PATH="$pcdir" make -s -C "$tmp/examples" \
  PKG_CONFIG="pkg-config --define-variable=prefix=$tmp/root$prefix" \
  CFLAGS="-O2 -Wall -Wextra -Wpedantic -Werror" \
  CXXFLAGS="-O2 -Wall -Wextra -Wpedantic -Werror" all
# The Python module is installed with the library (python/meson.build);
# the Python examples import that copy.
pymod=$(find "$tmp/root" -name shmobj.py | head -n 1)
[ -n "$pymod" ] || { echo "python/shmobj.py not installed"; exit 1; }
PYTHONPATH="$(dirname "$pymod")" PKG_CONFIG_PATH="$pcdir" LD_LIBRARY_PATH="$libdir" \
  SHMOBJ_LIBRARY="$libdir/libshmobj.so.0" make -s -C "$tmp/examples" \
  PKG_CONFIG="pkg-config --define-variable=prefix=$tmp/root$prefix" check
echo "install check passed"
