#!/bin/sh
# The layers' arrows, checked on the sources (doc/architecture.md, "Layers
# and the direction of dependence"). Every layer is compiled with the one
# public include folder, so the compiler alone cannot stop a layer from
# including a public header of another area or a header of a layer it must
# not see; this test does, and it fails when a layer above lib/os calls the
# system itself. Inside a layer split into rooms (sub-folders, see
# doc/architecture.md, "The object layer's rooms"), it checks the arrows
# between the rooms the same way.
#
# usage: check-layers.sh SOURCE_ROOT
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
fail=0

# layer: the layers whose headers it may include (itself first), then the
# public headers (include/shmobj/NAME.h) it may include. api, types and
# error are every layer's; a layer's own area header is its own.
arrows='
common   common                           | version
htcore   htcore                           | -
arena    arena common                     | arena
object   object arena common              | object table watch
os       os common                        | -
segment  segment os arena common          | segment arena version watch
queue    queue os arena common            | queue segment arena
map      map os arena htcore common       | map segment watch
topic    topic os common                  | topic segment
service  service os common                | service queue segment object
waitset  waitset os common                | waitset queue topic service watch
'

# layer/room: the rooms of that layer whose headers it may include (itself
# first). Every sub-folder of a layer must be here: a new room comes with
# its arrows. The arrows form a DAG (encoding at the bottom, views at the
# top); a file of a layer's own top folder may not include a room's header.
rooms='
object/encoding  encoding
object/read      read encoding
object/build     build read encoding
object/mutable   mutable read encoding
object/shape     shape build read encoding
object/views     views mutable read encoding
'

layer_of_header() { # the layer folder holding lib/*/$1 or lib/*/*/$1, or nothing
    for d in lib/*/ lib/*/*/; do
        [ -f "$d$1" ] && { printf '%s\n' "$d" | cut -d/ -f2; return; }
    done
}

room_of_header() { # the room of layer $1 holding header $2 ("" for its top)
    for d in lib/"$1"/*/; do
        [ -f "$d$2" ] && { basename "$d"; return; }
    done
}

for dir in lib/*/; do
    layer=$(basename "$dir")
    line=$(printf '%s\n' "$arrows" | awk -v l="$layer" '$1 == l')
    if [ -z "$line" ]; then
        echo "layer $layer is not in tests/check-layers.sh: add its arrows"
        fail=1
        continue
    fi
    sees=$(printf '%s\n' "$line" | sed 's/|.*//' | cut -d' ' -f2- )
    pub=" api types error $(printf '%s\n' "$line" | sed 's/.*|//') "
    for sub in "$dir"*/; do
        [ -d "$sub" ] || continue
        r=$layer/$(basename "$sub")
        if ! printf '%s\n' "$rooms" | awk -v r="$r" '$1 == r { f = 1 } END { exit !f }'; then
            echo "room $r is not in tests/check-layers.sh: add its arrows"
            fail=1
        fi
    done
    for f in "$dir"*.c "$dir"*.h "$dir"*/*.c "$dir"*/*.h; do
        [ -f "$f" ] || continue
        rel=${f#"$dir"}
        case $rel in
        */*) room=${rel%%/*}
             rsees=$(printf '%s\n' "$rooms" | awk -v r="$layer/$room" '$1 == r' | cut -d' ' -f2-) ;;
        *)   room= rsees= ;;
        esac
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
            sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1 \2/' >"${TMPDIR:-/tmp}/layers.$$"
        while read -r n h; do
            case $h in
            shmobj/*.h)
                a=${h#shmobj/}; a=${a%.h}
                case $pub in *" $a "*) ;; *)
                    echo "$f:$n: layer $layer includes public $h outside its arrow"
                    fail=1 ;;
                esac ;;
            *)
                owner=$(layer_of_header "$h")
                if [ -z "$owner" ]; then
                    echo "$f:$n: $h is no header of lib/"
                    fail=1
                else
                    case " $sees " in *" $owner "*) ;; *)
                        echo "$f:$n: layer $layer includes $h of layer $owner, outside its arrow"
                        fail=1 ;;
                    esac
                    if [ "$owner" = "$layer" ]; then
                        hroom=$(room_of_header "$layer" "$h")
                        if [ -n "$hroom" ]; then
                            case " $rsees " in *" $hroom "*) ;; *)
                                echo "$f:$n: room ${room:-(top)} of $layer includes $h of room $hroom, outside its arrow"
                                fail=1 ;;
                            esac
                        fi
                    fi
                fi ;;
            esac
        done <"${TMPDIR:-/tmp}/layers.$$"
        rm -f "${TMPDIR:-/tmp}/layers.$$"
    done
done

# System calls and process-wide side effects outside lib/os. The library
# never prints, aborts or exits, and only lib/os talks to the kernel.
# Allowed, each for a reason:
#  lib/object/views/json-print.c fwrite: shmobj_view_json_write writes to the
#  caller's FILE, the caller's own I/O (stdio, not a system call of ours).
calls='open|openat|close|read|write|pread|pwrite|mmap|munmap|mprotect|madvise|fcntl|ftruncate|fallocate|posix_fallocate|shm_open|shm_unlink|memfd_create|unlink|fstat|stat|getpid|gettid|clock_gettime|nanosleep|usleep|sleep|sched_yield|syscall|ioctl|pipe|pipe2|poll|dup|dup2|dup3|kill|fork|inotify_[a-z_]+|pthread_[a-z_]+|printf|fprintf|puts|fputs|fwrite|perror|abort|exit|_exit|assert'
for f in $(find lib -name '*.c' -o -name '*.h' | grep -v '^lib/os/' | sort); do
    grep -nE "(^|[^A-Za-z0-9_.>])($calls)[[:space:]]*\(" "$f" |
        grep -vE '^[0-9]+:[[:space:]]*(/\*|\*|//)' |
        while IFS= read -r hit; do
            case "$f:$hit" in
            lib/object/views/json-print.c:*fwrite*) continue ;;
            esac
            echo "$f:$hit"
        done
done >"${TMPDIR:-/tmp}/calls.$$"
if [ -s "${TMPDIR:-/tmp}/calls.$$" ]; then
    echo "system calls outside lib/os (move them behind lib/os/os.h):"
    cat "${TMPDIR:-/tmp}/calls.$$"
    fail=1
fi
rm -f "${TMPDIR:-/tmp}/calls.$$"

# The conversion of a segment handle to its space is written once, in
# lib/common/space.h, where segment.h's _Static_assert backs it.
casts=$(grep -rn '(struct shmobj__space \*)' lib | grep -v '^lib/common/space.h:')
if [ -n "$casts" ]; then
    echo "casts to struct shmobj__space * outside space.h (use shmobj__space_of_seg):"
    printf '%s\n' "$casts"
    fail=1
fi

# The NATS bridge (bridge/) is a client of the library, not a layer: it
# includes the public headers (<shmobj.h>, <shmobj/...>) and its own, never
# a header of lib/.
for f in bridge/*.c bridge/*.h; do
    [ -f "$f" ] || continue
    grep -n '^[[:space:]]*#[[:space:]]*include' "$f" |
        sed -n 's/^\([0-9]*\):[^"<]*["<]\([^">]*\)[">].*/\1 \2/p' >"${TMPDIR:-/tmp}/bridge.$$"
    while read -r n h; do
        case $h in
        shmobj.h|shmobj/*.h|shmobj-bridge.h|bridge-internal.h) ;;
        */*|stdatomic.h|pthread.h|std*.h|time.h|unistd.h|errno.h|ctype.h|signal.h|inttypes.h) ;;
        *) [ -n "$(layer_of_header "$h")" ] && {
               echo "$f:$n: the bridge includes $h of lib/: use the public API"
               fail=1
           } ;;
        esac
    done <"${TMPDIR:-/tmp}/bridge.$$"
    rm -f "${TMPDIR:-/tmp}/bridge.$$"
done

[ $fail = 0 ] && echo "layers: every include within its arrow, no system call outside lib/os"
exit $fail
