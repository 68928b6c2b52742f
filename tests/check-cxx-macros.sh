#!/bin/sh
# In C++ the value macros of shmobj/object.h that take no array build safe
# descriptions and compile without a warning under -Wpedantic -Werror,
# while those that would build a C array or buffer description as a
# compound literal (a temporary that C++ destroys at the end of the full
# expression, leaving the description dangling) refuse to compile, naming
# shmobj.hpp. Exit 77 (skipped) without a C++ compiler.
# usage: check-cxx-macros.sh SOURCE_DIR [C++ COMPILER]
set -eu
src=$1
cxx=${2:-c++}
command -v "$cxx" >/dev/null 2>&1 || { echo "no C++ compiler"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-std=c++17 -Wall -Wextra -Wpedantic -Werror -I$src/include"
cat >"$tmp/ok.cpp" <<'CPP'
#include <shmobj.h>
int main()
{
    static const char *const names[] = {"a", "b"};
    const shmobj_value items[] = {SHMOBJ_VAL_INT(-3), SHMOBJ_VAL_UINT(4u),
                                  SHMOBJ_VAL_DOUBLE(0.5), SHMOBJ_VAL_BOOL(1),
                                  SHMOBJ_VAL_NULL, SHMOBJ_VAL_STR("str"),
                                  SHMOBJ_VAL_STRN("ab", 2), SHMOBJ_VAL_BYTES("xy", 2)};
    shmobj_value l = SHMOBJ_VAL_LIST(items, 8);
    shmobj_value t = SHMOBJ_VAL_TUPLE(items, 8);
    shmobj_value s = SHMOBJ_VAL_SET(items, 1);
    shmobj_value d = SHMOBJ_VAL_DICT(items, 4);
    shmobj_value st = SHMOBJ_VAL_STRUCT(items, 2, names);
    shmobj_value ml = SHMOBJ_VAL_MLIST(), md = SHMOBJ_VAL_MDICT(), ms = SHMOBJ_VAL_MSET();
    shmobj_value ad = SHMOBJ_VAL_ADOPT(16), ln = SHMOBJ_VAL_LINK(32);
    shmobj_value rec = SHMOBJ_VAL_RECORD(48, items, 2);
    if (ml.type != SHMOBJ_TYPE_MLIST || md.type != SHMOBJ_TYPE_MDICT ||
        ms.type != SHMOBJ_TYPE_MSET || ad.v.ref != 16 || ln.type != SHMOBJ_TYPE_LINK ||
        rec.v.r.shape != 48 || rec.v.r.count != 2)
        return 1;
    size_t n = 0;
    return shmobj_obj_size(&l, &n) != 0 || shmobj_obj_size(&t, &n) != 0 ||
           shmobj_obj_size(&s, &n) != 0 || shmobj_obj_size(&st, &n) != 0 ||
           d.v.c.count != 4 || items[5].v.s.len != 3;
}
CPP
fail=0
if ! $cxx $flags -c "$tmp/ok.cpp" -o "$tmp/ok.o" 2>"$tmp/err"; then
  head -n 20 "$tmp/err"
  echo "the scalar and array-taking value macros do not compile cleanly in C++"
  fail=1
fi
for m in 'SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2))' \
         'SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_INT(1))' \
         'SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(1))' \
         'SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("k"), SHMOBJ_VAL_INT(1))' \
         'SHMOBJ__VALS(SHMOBJ_VAL_INT(1))[0]' \
         'SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F32, 1, shape, nullptr)'; do
  printf '#include <shmobj.h>\nint main()\n{\n    static const uint64_t shape[1] = {4};\n    (void)shape;\n    shmobj_value v = %s;\n    return (int)v.type;\n}\n' "$m" >"$tmp/bad.cpp"
  if $cxx -std=c++17 -I"$src/include" -c "$tmp/bad.cpp" -o "$tmp/bad.o" 2>"$tmp/err"; then
    echo "compiled, but must not: $m"
    fail=1
  elif ! grep -q 'shmobj.hpp' "$tmp/err"; then
    echo "refused without naming shmobj.hpp: $m"
    cat "$tmp/err"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "value macros: safe or refused in C++"
exit "$fail"
