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
# The installed examples, built by their Makefile as its comment says a
# user does on Debian: the library under a prefix pkg-config does not
# search, PKG_CONFIG_PATH in the environment, nothing else (no
# LD_LIBRARY_PATH: the programs carry a run path). The destdir's shmobj.pc
# is first given the prefix it lies under, as an install with that
# --prefix writes it. Warnings are errors.
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" >"$pc.new" && mv "$pc.new" "$pc"
exdir=$(find "$tmp/root" -type d -path '*/libshmobj/examples' | head -n 1)
[ -n "$exdir" ] || { echo "examples not installed"; exit 1; }
cp -R "$exdir" "$tmp/examples"
env -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$pcdir" make -s -C "$tmp/examples" \
  CFLAGS="-O2 -Wall -Wextra -Wpedantic -Werror" \
  CXXFLAGS="-O2 -Wall -Wextra -Wpedantic -Werror" all
if command -v readelf >/dev/null 2>&1; then
  readelf -d "$tmp/examples/counter" | grep -E 'R(UN)?PATH' | grep -qF "$libdir" ||
    { echo "the examples have no run path to $libdir"; exit 1; }
fi
(cd "$tmp/examples" && env -u LD_LIBRARY_PATH ./counter 2 1000 >/dev/null) ||
  { echo "an installed example did not run as built"; exit 1; }
# The other way of giving the path, on make's command line, which the
# $(shell) of GNU make 4.3 does not see by itself.
got=$(env -u PKG_CONFIG_PATH make -s -C "$tmp/examples" PKG_CONFIG_PATH="$pcdir" \
  --eval 'shmobj-libs: ; @echo $(SHMOBJ_LIBS)' shmobj-libs)
case $got in
  *"-L$libdir "*) ;;
  *) echo "make PKG_CONFIG_PATH=... gave SHMOBJ_LIBS '$got'"; exit 1 ;;
esac
# Without it, the Makefile says what is missing.
if env -u PKG_CONFIG_PATH PKG_CONFIG_LIBDIR=/nonexistent make -s -C "$tmp/examples" all \
  >"$tmp/nopc.out" 2>&1; then
  echo "the examples' Makefile built without finding shmobj.pc"; exit 1
fi
grep -q "set PKG_CONFIG_PATH" "$tmp/nopc.out" ||
  { echo "the examples' Makefile did not say what was missing:"; cat "$tmp/nopc.out"; exit 1; }
# The Python module is installed with the library (python/meson.build);
# the Python examples import that copy.
pymod=$(find "$tmp/root" -name shmobj.py | head -n 1)
[ -n "$pymod" ] || { echo "python/shmobj.py not installed"; exit 1; }
PYTHONPATH="$(dirname "$pymod")" PKG_CONFIG_PATH="$pcdir" LD_LIBRARY_PATH="$libdir" \
  SHMOBJ_LIBRARY="$libdir/libshmobj.so.0" make -s -C "$tmp/examples" check
echo "install check passed"
