#!/bin/sh
# Compare the built libshmobj.so with the committed ABI baseline
# (abi/libshmobj.abi). Added functions are fine; a removed function or a
# changed struct layout or signature fails, so an accidental ABI break cannot land. Skipped (77) when
# abigail-tools is not installed. abi/libshmobj.suppr lists what is not
# ABI (the private layouts of opaque handles).
# Regenerate after an intended change (a soname bump, or a struct_size
# struct grown at its end, which old callers keep using) with:
#   abidw --no-corpus-path --no-comp-dir-path --headers-dir include \
#         --out-file abi/libshmobj.abi build/libshmobj.so
# usage: check-abi.sh LIBSHMOBJ_SO SOURCE_DIR
set -u
so=$1
src=$2
command -v abidiff >/dev/null 2>&1 || { echo "abidiff not installed"; exit 77; }
abidiff --headers-dir2 "$src/include" --no-added-syms \
  --suppressions "$src/abi/libshmobj.suppr" \
  "$src/abi/libshmobj.abi" "$so"
rc=$?
# abidiff's status is a bit set: 1 error, 2 usage, 4 change (a struct
# layout or signature), 8 incompatible. Added functions are not reported
# (--no-added-syms), so any non-zero status is a break or a failure.
if [ "$rc" -ne 0 ]; then
  echo "ABI check failed (abidiff status $rc)"
  exit 1
fi
echo "ABI compatible with the baseline (abidiff status $rc)"
