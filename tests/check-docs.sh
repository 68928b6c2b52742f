#!/bin/sh
# The Doxygen documentation builds without a warning (doc/Doxyfile.in makes
# warnings errors), and every status code of SHMOBJ_ERRNO_MAP
# (include/shmobj/error.h) is a documented value of the enum shmobj_status
# with the table's number, the enum holding no other value and no number
# twice. Exit 77 (skipped) without doxygen or python3.
# usage: check-docs.sh SOURCE_DIR
set -eu
src=$1
command -v doxygen >/dev/null 2>&1 || { echo "no doxygen"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e "s|@SRCDIR@|$src|g" -e "s|@OUTPUT@|$tmp|g" -e "s|@VERSION@|test|g" \
  "$src/doc/Doxyfile.in" >"$tmp/Doxyfile"
printf 'GENERATE_XML = YES\n' >>"$tmp/Doxyfile"
doxygen "$tmp/Doxyfile"
python3 - "$src/include/shmobj/error.h" "$tmp/xml" <<'PY'
import re, sys, glob, xml.etree.ElementTree as ET
table = {("SHMOBJ_" + n): int(v) for n, v in
         re.findall(r'X\((E[A-Z0-9]+), (-\d+),', open(sys.argv[1]).read())}
table["SHMOBJ_OK"] = 0
documented = {}
for f in glob.glob(sys.argv[2] + "/*.xml"):
    for enum in ET.parse(f).getroot().iter("memberdef"):
        if enum.get("kind") != "enum" or enum.findtext("name") != "shmobj_status":
            continue
        for ev in enum.findall("enumvalue"):
            name = ev.findtext("name")
            init = (ev.findtext("initializer") or "").lstrip("= ").strip()
            brief = "".join("".join(ev.find(d).itertext()) for d in
                            ("briefdescription", "detaileddescription")).strip()
            documented[name] = (int(init) if init else None, brief)
bad = []
for name, value in sorted(table.items(), key=lambda kv: -kv[1]):
    if name not in documented:
        bad.append("%s (%d) is not a documented value of enum shmobj_status" % (name, value))
    elif documented[name][0] != value:
        bad.append("%s is %s in the documentation, %d in the table" % (name, documented[name][0], value))
    elif not documented[name][1]:
        bad.append("%s has no description" % name)
for name in documented:
    if name not in table:
        bad.append("%s is in the enum but not in SHMOBJ_ERRNO_MAP" % name)
values = [v for v, _ in documented.values()]
if len(set(values)) != len(values):
    bad.append("two values of enum shmobj_status share a number")
print("\n".join(bad) if bad else "%d status codes documented" % len(documented))
sys.exit(1 if bad else 0)
PY
