#!/bin/sh
# No call is documented as newer than the library that ships it: every
# "@since X.Y" in include/ is at most the library's version, and the
# library's version is one number everywhere (meson.build's project
# version, which names the shared library's files, and the
# SHMOBJ_VERSION_* macros of include/shmobj/version.h, which
# shmobj_version() returns).
#
# usage: check-since.sh SOURCE_ROOT PROJECT_VERSION
set -u
root=$1
project=$2
cd "$root" || exit 2
h=include/shmobj/version.h
major=$(sed -n 's/^#define SHMOBJ_VERSION_MAJOR \([0-9][0-9]*\).*/\1/p' "$h")
minor=$(sed -n 's/^#define SHMOBJ_VERSION_MINOR \([0-9][0-9]*\).*/\1/p' "$h")
patch=$(sed -n 's/^#define SHMOBJ_VERSION_PATCH \([0-9][0-9]*\).*/\1/p' "$h")
string=$(sed -n 's/^#define SHMOBJ_VERSION_STRING "\([^"]*\)".*/\1/p' "$h")
if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
    echo "$h: SHMOBJ_VERSION_MAJOR/MINOR/PATCH not found"
    exit 1
fi
fail=0
if [ "$major.$minor.$patch" != "$project" ] || [ "$string" != "$project" ]; then
    echo "version.h says $major.$minor.$patch (\"$string\"), meson.build says $project"
    fail=1
fi
# one number per version, comparable as integers: major * 10000 + minor * 100
lib=$((major * 10000 + minor * 100))
n=0
for s in $(grep -rhoE '@since[[:space:]]+[0-9]+\.[0-9]+' include | awk '{print $2}' | sort -u); do
    n=$((n + 1))
    smaj=${s%%.*}
    smin=${s#*.}
    if [ $((smaj * 10000 + smin * 100)) -gt "$lib" ]; then
        echo "@since $s is newer than the library's version $major.$minor.$patch:"
        grep -rn -E "@since[[:space:]]+$smaj\.$smin([^0-9]|\$)" include | head -5
        fail=1
    fi
done
# Every tag names a release of doc/versioning.md's table ("| X.Y.0 |"),
# whose last row is the library's version; a tag of another form (no
# number, a patch, a "v") names none.
doc=doc/versioning.md
rows=$(sed -n 's/^| \([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\) |.*/\1/p' "$doc")
if [ -z "$rows" ]; then
    echo "$doc: no table of releases (rows '| X.Y.Z | ... |')"
    fail=1
elif [ "$(echo "$rows" | tail -n 1)" != "$project" ]; then
    echo "$doc: the last release listed is $(echo "$rows" | tail -n 1), the library is $project"
    fail=1
fi
for s in $(grep -rhoE '@since[[:space:]]+[0-9]+\.[0-9]+' include | awk '{print $2}' | sort -u); do
    echo "$rows" | grep -qx "$s\.0" || {
        echo "@since $s names no release of $doc:"
        grep -rn -E "@since[[:space:]]+$s([^0-9]|\$)" include | head -5
        fail=1
    }
done
odd=$(grep -rn '@since' include | grep -vE '@since[[:space:]]+[0-9]+\.[0-9]+([^.0-9]|$)')
if [ -n "$odd" ]; then
    echo "@since tags that are not X.Y:"
    echo "$odd" | head -5
    fail=1
fi
if [ "$n" -eq 0 ]; then
    echo "no @since found in include/"
    exit 1
fi
[ "$fail" -eq 0 ] &&
    echo "library $major.$minor.$patch; the @since tags name $n versions, none newer"
exit $fail
