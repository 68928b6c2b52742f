#!/bin/sh
# The shmobj tool against live, damaged, missing, foreign, stale,
# orphaned and unreadable segments, and while examples/shmobj-demo runs.
#   test-cli.sh SHMOBJ TEST-CLI-HELPER SHMOBJ-DEMO TEST-CLI-SWAP
# Every wait is bounded; each check says what it expected and what came.
set -u
tool=$1
helper=$2
demo=$3
swap=$4
case $swap in /*) ;; *) swap="$PWD/$swap" ;; esac
tag="clitest-$$"
tmp=$(mktemp -d)
failures=0
helpers=""
demo_pid=""

cleanup() {
    for fd in $helpers; do eval "exec $fd>&-"; done
    [ -n "$demo_pid" ] && kill -TERM "-$demo_pid" 2>/dev/null
    wait 2>/dev/null
    for f in /dev/shm/"$tag"*; do [ -e "$f" ] && rm -f "$f"; done
    [ -n "$demo_pid" ] && rm -f /dev/shm/shmobj-demo-"$demo_pid"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run NAME EXPECTED_STATUS ARGS...: run the tool, keep stdout and stderr
run() {
    what=$1
    want=$2
    shift 2
    "$tool" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$what: exit $got, expected $want (shmobj $*)"
        sed 's/^/  out: /' "$tmp/out" >&2
        sed 's/^/  err: /' "$tmp/err" >&2
    fi
}

# has FILE PATTERN WHAT: the output holds a line matching PATTERN
has() {
    grep -q -e "$2" "$tmp/$1" || {
        fail "$3: no line matching '$2' in $1"
        sed 's/^/  | /' "$tmp/$1" >&2
    }
}

hasnt() {
    if grep -q -e "$2" "$tmp/$1"; then
        fail "$3: a line matches '$2' in $1"
        sed 's/^/  | /' "$tmp/$1" >&2
    fi
}

# json WHAT FILE: FILE holds one valid JSON value (python3, and jq when
# there is one)
json() {
    python3 -m json.tool "$tmp/$2" >/dev/null 2>"$tmp/json.err" ||
        { fail "$1: not valid JSON: $(head -n 1 "$tmp/json.err")"; head -c 600 "$tmp/$2" >&2; }
    if command -v jq >/dev/null 2>&1; then
        jq -e . "$tmp/$2" >/dev/null 2>&1 || fail "$1: jq does not read it"
    fi
}

# jqtrue WHAT FILE EXPR: the JSON in FILE makes the Python expression
# EXPR (over d, the parsed value) true
jqtrue() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$tmp/$2" "$3" 2>"$tmp/json.err" ||
        { fail "$1: not true: $3"; sed 's/^/  | /' "$tmp/json.err" >&2; }
}

# wait_line FILE PATTERN: until FILE holds a line matching PATTERN, 10 s
wait_line() {
    i=0
    while ! grep -q -e "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 200 ] && return 1
        sleep 0.05
    done
}

# serve NAME FD: a helper keeps segment NAME alive while descriptor FD
# (a fifo into its standard input) stays open (600 s at most: far past the
# test's own timeout, so a slow machine never sees the segment go early)
serve() {
    mkfifo "$tmp/fifo-$2"
    "$helper" serve "$1" 600 <"$tmp/fifo-$2" >"$tmp/ready-$2" &
    eval "exec $2>\"$tmp/fifo-$2\""
    helpers="$helpers $2"
    wait_line "$tmp/ready-$2" '^ready' || fail "helper for $1 never got ready"
}

# ---- help ------------------------------------------------------------------
run "help" 0 --help
has out "^usage: shmobj COMMAND" "help"
for c in ls stat dump check rm top; do
    run "$c --help" 0 "$c" --help
    has out "^usage: shmobj $c" "$c --help"
done
# ls names every column it prints
run "ls --help" 0 ls --help
for col in NAME BACK SIZE MAX USED CREATOR ATT STATE; do
    has out "^  $col " "ls --help explains column $col"
done
run "stat bad entries" 2 stat -e many x
has err "^shmobj stat: bad number of entries 'many'" "stat bad -e says why"
run "dump -e without a value" 2 dump x -e
has err "^shmobj dump: option '-e' needs a value" "dump -e without a value says why"
run "no command" 2
run "unknown command" 2 frobnicate
has err "unknown command" "unknown command"
# a bad command line says what was wrong on its first line, then the usage
run "top bad interval" 2 top -i abc x
has err "^shmobj top: bad interval 'abc'" "top bad interval says why"
has err "^usage: shmobj top" "top bad interval shows the usage"
run "top bad count" 2 top -n -3 x
has err "^shmobj top: bad count '-3'" "top bad count says why"
run "top no name" 2 top
has err "^shmobj top: NAME missing" "top without a name says why"
run "ls unknown option" 2 ls -z
has err "^shmobj ls: unknown option '-z'" "ls unknown option says why"
run "stat two names" 2 stat a b
has err "^shmobj stat: one NAME expected" "stat with two names says why"
run "dump no name" 2 dump
has err "^shmobj dump: NAME missing" "dump without a name says why"
run "dump three args" 2 dump a b c
has err "^shmobj dump: too many arguments" "dump with three arguments says why"
run "check no name" 2 check
has err "^shmobj check: NAME missing" "check without a name says why"
run "check two names" 2 check a b
has err "^shmobj check: one NAME expected" "check with two names says why"
run "rm unknown option" 2 rm -q x
has err "^shmobj rm: unknown option '-q'" "rm unknown option says why"
run "rm no name" 2 rm
has err "^shmobj rm: NAME missing" "rm without a name says why"
run "version" 0 --version
has out "^shmobj [0-9]" "version"

# ---- a live segment -----------------------------------------------------------
live="$tag-live"
serve "$live" 3
hpid=$(sed -n 's/^ready //p' "$tmp/ready-3")

run "ls" 0 ls
awk -v n="$live" '$1 == n { print $7, $8 }' "$tmp/out" >"$tmp/row"
[ "$(cat "$tmp/row")" = "1 ready" ] ||
    fail "ls: row of $live says '$(cat "$tmp/row")', expected '1 ready' (one attached, ready)"
awk -v n="$live" '$1 == n { print $6 }' "$tmp/out" >"$tmp/row"
[ "$(cat "$tmp/row")" = "$hpid" ] || fail "ls: creator pid '$(cat "$tmp/row")', expected $hpid"
run "ls NAME" 0 ls "$live"
has out "^$live .* ready" "ls NAME"
run "ls /dev/shm/NAME" 0 ls "/dev/shm/$live"
has out "ready" "ls /dev/shm/NAME"

run "stat" 0 stat "$live"
has out "^segment $live" "stat"
has out "by pid $hpid (attached)" "stat: creator"
has out "fragmentation" "stat: heap"
has out "^processes (1 attached besides this tool)" "stat: processes"
has out "pid $hpid .* creator" "stat: the helper's handle"
has out "jobs  *queue .*depth [0-9]*/64, puts [0-9]*, takes [0-9]*, skipped 0, rescued 0" "stat: queue"
has out "cache  *map .*count 103, load [0-9.]*, [0-9.]* bytes/item" "stat: map"
has out "config  *object .*type dict len 4" "stat: dict object"
has out "weights  *object .*type buffer f32\[4,8\]" "stat: buffer object"
has out "answer  *object .*type int" "stat: int object"
has out "events  *object .*type mlist" "stat: growable list object"
has out "position  *object .*type record" "stat: record object"
has out "blob  *raw" "stat: raw block"
# what the roots hold: map entries (text, bytes, a counter), members with
# the sizes of containers, mutable ones too, and a topic's subscribers
has out '^      "key[0-9]*" = "value"$' "stat: map entries"
has out '^      \.\.\. more entries (103 in all' "stat: map entries bounded by default"
has out '^      "tags"  *list  *len 2$' "stat: a member's size"
has out "state  *object .*type mdict len 2" "stat: mutable dict object"
has out '^      "queue"  *mlist  *len 3$' "stat: size of a growable list inside"
has out '^      "seen"  *mset  *len 2$' "stat: size of a mutable set inside"
has out "news  *topic .*published 5, kept 5, capacity 256, history 0, 1 subscriber, max lag 3" "stat: topic"
has out "rpc  *service .*0 calls waiting (queue rpc/calls)" "stat: a service and its queue"
has out "^      subscriber pid $hpid token [0-9]*: lag 3, held 0, missed 0" "stat: a subscriber's lag"
has out "idle  *queue .*depth 0/4" "stat: idle queue"
run "stat -e all" 0 stat -e all "$live"
[ "$(grep -c '^      "key[0-9]*" = "value"$' "$tmp/out")" -eq 100 ] ||
    fail "stat -e all: $(grep -c '^      "key' "$tmp/out") text entries, expected 100"
has out '^      "counter" = 0x[0-9a-f]\{16\} (int64 [0-9]*)$' "stat -e all: an int64 counter"
has out '^      0xff000102 = 0x0102$' "stat -e all: bytes that are not text, in hex"
has out '^      "say \\"h[^"]*\\"\\n\\\\" = "a\\tb"$' "stat -e all: text escaped"
hasnt out "more entries" "stat -e all leaves nothing out"
run "stat -e 0" 0 stat --entries=0 "$live"
hasnt out '^      "key' "stat -e 0 lists no entry"
has out "cache  *map .*count 103" "stat -e 0 still has the figures"
# ls only peeks: after ls and stat, still just the helper attached
run "ls again" 0 ls "$live"
awk -v n="$live" '$1 == n { print $7 }' "$tmp/out" >"$tmp/row"
[ "$(cat "$tmp/row")" = "1" ] || fail "ls after stat: $(cat "$tmp/row") attached, expected 1"

run "dump ROOT" 0 dump "$live" config
[ "$(cat "$tmp/out")" = '{"name":"cli","workers":4,"ratio":0.5,"tags":["a","b"]}' ] ||
    fail "dump config: got $(cat "$tmp/out")"
run "dump --pretty ROOT" 0 dump --pretty "$live" config
cat >"$tmp/want" <<'EOF'
{
  "name": "cli",
  "workers": 4,
  "ratio": 0.5,
  "tags": [
    "a",
    "b"
  ]
}
EOF
cmp -s "$tmp/out" "$tmp/want" || { fail "dump --pretty config differs:"; diff "$tmp/want" "$tmp/out" >&2; }
run "dump" 0 dump "$live"
has out '"answer":42' "dump: every root"
has out '"jobs":{"\$queue":{"capacity":64' "dump: queue"
has out '"blob":{"\$raw":256}' "dump: raw"
json "dump" out
jqtrue "dump: map entries" out 'd["cache"]["$map"]["count"] == 103 and d["cache"]["$map"]["entries"]["key7"] == "value" and "truncated" not in d["cache"]["$map"]'
jqtrue "dump: bytes that are not text" out 'd["cache"]["$map"]["entries"]["$bytes:ff000102"] == {"$bytes": 2, "hex": "0102"}'
jqtrue "dump: a counter" out 'd["cache"]["$map"]["entries"]["counter"]["int64"] >= 0'
jqtrue "dump: a text key JSON escapes" out 'd["cache"]["$map"]["entries"]["say \"h\u00e9\"\n\\"] == "a\tb"'
jqtrue "dump: mutable containers" out 'd["state"] == {"queue": [0, 1, 2], "seen": [10, 11]}'
jqtrue "dump: topic" out 'd["news"]["$topic"]["published"] == 5 and [s["lag"] for s in d["news"]["$topic"]["subscribers"]] == [3]'
jqtrue "dump: service" out 'd["rpc"]["$service"]["pending"] == 0'
jqtrue "dump: waiting" out 'd["idle"]["$queue"]["consumers_waiting"] == 0'
run "dump --json --pretty" 0 dump --json --pretty "$live"
json "dump --pretty" out
run "dump -e 5 ROOT" 0 dump -e 5 "$live" cache
json "dump -e 5 cache" out
jqtrue "dump -e 5: five entries, truncated" out 'len(d["$map"]["entries"]) == 5 and d["$map"]["truncated"] is True'
run "dump topic ROOT" 0 dump "$live" news
json "dump news" out
run "dump missing root" 2 dump "$live" nosuchroot
has err "no root named 'nosuchroot'" "dump missing root"

run "check" 0 check "$live"
has out "^$live: ok: heap, 13 roots (3 queues, 1 map, 6 objects, 1 topic, 1 service, 1 other)" "check"
has out "^service 'rpc' at offset [0-9]* (0x[0-9a-f]*), .*: ok, 0 calls waiting$" "check: a service"
# what it found, and where: a line per part with its block's offset
has out "^heap: ok, [0-9]* blocks in use" "check: the heap"
has out "^queue 'jobs' at offset [0-9]* (0x[0-9a-f]*), [0-9.]* KiB: ok, [0-9]* messages* of 64 waiting" "check: a queue and where"
has out "^map 'cache' at offset [0-9]* (0x[0-9a-f]*), .*: ok, 103 entries" "check: a map and where"
has out "^object 'config' at offset [0-9]* (0x[0-9a-f]*), .*: ok, dict len 4" "check: an object and where"
has out "^topic 'news' at offset [0-9]* (0x[0-9a-f]*), .*: ok, 5 published, 1 subscriber$" "check: a topic and where"
has out "^raw 'blob' at offset .*: not checked" "check: a raw block is not checked"

run "top" 0 top -n 3 -i 0.3 "$live"
has out "frame 3" "top: three frames"
hasnt out "frame 4" "top: -n 3"
if grep -q "$(printf '\033')" "$tmp/out"; then fail "top: ANSI escapes when stdout is not a terminal"; fi
# the first frame has no rates yet; later ones do, and the helper puts
# and takes all the time (a positive rate in one of them at least, so a
# helper starved for one interval on a loaded machine does not count)
awk '$1 == "jobs" { print $4 }' "$tmp/out" >"$tmp/rates"
[ "$(head -n 1 "$tmp/rates")" = "-" ] || fail "top: frame 1 has a rate: $(head -n 1 "$tmp/rates")"
tail -n +2 "$tmp/rates" | grep -q '^[1-9][0-9]*$' ||
    fail "top: no later frame has a positive puts/s: $(tr '\n' ' ' <"$tmp/rates")"
has out "^news  *5  *[-0-9]*  *1  *0  *3  *0$" "top: the topic: 1 subscriber, none dead, lag 3"
has out "^  subscriber pid $hpid token [0-9]*: lag 3" "top: each subscriber's lag"
# a map's figure is its entries' net change, not its operations: top says so
run "top --help" 0 top --help
has out "no operation counters" "top --help says a map's figure is no operation rate"
run "top bad interval" 2 top -i 0 "$live"

# ---- a process killed while it waited is not listed as waiting -------------------
"$helper" wait-queue "$live" >"$tmp/wq" 2>&1 &
wq=$!
"$helper" wait-topic "$live" >"$tmp/wt" 2>&1 &
wt=$!
wait_line "$tmp/wq" '^waiting' || fail "queue waiter never started"
wait_line "$tmp/wt" '^waiting' || fail "topic waiter never started"
i=0
while :; do
    "$tool" stat "$live" >"$tmp/out" 2>"$tmp/err"
    grep -q "idle .*waiting 1 consumers 0 producers" "$tmp/out" && break
    i=$((i + 1))
    [ $i -gt 200 ] && { fail "stat never listed the blocked taker as waiting"; break; }
    sleep 0.05
done
has out "news  *topic .*2 subscribers" "stat: the blocked subscriber"
kill -KILL $wq $wt
wait $wq 2>/dev/null
wait $wt 2>/dev/null
run "stat after the waiters were killed" 0 stat "$live"
has out "idle  *queue .*depth 0/4" "stat: idle queue after the kill"
hasnt out "idle .*waiting" "stat lists a killed taker as waiting"
has out "news  *topic .*1 subscriber (and 1 dead)" "stat: the killed subscriber is dead, not live"
has out "^      subscriber dead (its process is gone" "stat: the killed subscriber's line"
run "top after the waiters were killed" 0 top -n 1 "$live"
has out "^idle  *0  *4  *-  *-  *0/0 " "top lists a killed taker as waiting"
has out "^news  *5  *-  *1  *1  *3 " "top: one live subscriber, one dead"
run "dump after the waiters were killed" 0 dump "$live"
json "dump after the kill" out
jqtrue "dump: no waiting consumer after the kill" out 'd["idle"]["$queue"]["consumers_waiting"] == 0'
jqtrue "dump: the dead subscriber" out '[s["dead"] for s in d["news"]["$topic"]["subscribers"]] == [False, True]'
run "check after the waiters were killed" 0 check "$live"
has out "^topic 'news' .*: ok, 5 published, 1 subscriber, 1 record of dead subscribers" "check: dead subscriber records are told, not damage"

# ---- missing -----------------------------------------------------------------
for c in stat check dump top ls rm; do
    run "$c missing" 2 "$c" "$tag-missing"
    has err "$tag-missing: no such segment" "$c missing"
done

# ---- foreign: a /dev/shm file that is not ours ---------------------------------
foreign="$tag-foreign"
head -c 8192 /dev/zero | tr '\0' 'x' >"/dev/shm/$foreign"
run "ls with a foreign file" 0 ls
hasnt out "^$foreign " "ls lists a foreign file"
for c in ls stat check dump; do
    run "$c foreign" 2 "$c" "$foreign"
    has err "not a libshmobj segment" "$c foreign"
done
run "rm foreign" 2 rm "$foreign"
has err "not a libshmobj segment" "rm foreign"
[ -e "/dev/shm/$foreign" ] || fail "rm removed a foreign file"
: >"/dev/shm/$tag-empty"
run "ls without -a" 0 ls
hasnt out "^$tag-empty " "ls lists an empty file without -a"
run "ls -a" 0 ls -a
has out "^$tag-empty .* empty" "ls -a lists an empty file"
hasnt out "^$foreign " "ls -a lists a foreign file"
run "rm empty" 2 rm "$tag-empty"
[ -e "/dev/shm/$tag-empty" ] || fail "rm removed an empty file without -f"
run "rm -f empty" 0 rm -f "$tag-empty"
[ -e "/dev/shm/$tag-empty" ] && fail "rm -f kept an empty file"
run "rm -f foreign" 2 rm -f "$foreign"
[ -e "/dev/shm/$foreign" ] || fail "rm -f removed a foreign file"

# ---- orphaned and stale: copies of the live segment hold no locks --------------
cp "/dev/shm/$live" "/dev/shm/$tag-orphan"
run "ls orphaned" 0 ls "$tag-orphan"
has out "^$tag-orphan .* 0 orphaned" "ls orphaned"
cp "/dev/shm/$live" "/dev/shm/$tag-stale"
# state (offset 8) back to 0: set up and never finished, nobody holds it
printf '\000\000\000\000' | dd of="/dev/shm/$tag-stale" bs=1 seek=8 conv=notrunc 2>/dev/null
run "ls stale" 0 ls "$tag-stale"
has out "^$tag-stale .* stale" "ls stale"
has out "^  setting-up, stale: MAX, USED, CREATOR and ATT" "ls explains the '-' of a stale segment"
run "stat stale" 2 stat "$tag-stale"
has err "stale: its creator died during set-up" "stat stale"
# every '-' of ls is explained under the table
cp "/dev/shm/$live" "/dev/shm/$tag-version"
# the format version (offset 12, doc/format.md) of a later library
printf '\377' | dd of="/dev/shm/$tag-version" bs=1 seek=12 conv=notrunc 2>/dev/null
run "ls another version" 0 ls "$tag-version" "$tag-orphan"
has out "^$tag-version .* - *- *- *- version$" "ls: a segment of another version"
has out "^  version: made by a libshmobj of another segment format" "ls explains the '-' of another version"
hasnt out "^  setting-up" "ls explains only the '-' it printed"
run "ls ready" 0 ls "$tag-orphan"
hasnt out "^'-'" "ls without a '-' explains none"
rm -f "/dev/shm/$tag-version"
run "rm stale and orphaned" 0 rm "$tag-stale" "$tag-orphan"
[ -e "/dev/shm/$tag-stale" ] && fail "rm kept the stale segment"
[ -e "/dev/shm/$tag-orphan" ] && fail "rm kept the orphaned segment"

# ---- damaged -------------------------------------------------------------------
cp "/dev/shm/$live" "/dev/shm/$tag-hdr"
# a byte of max_size (offset 32), which the header checksum covers
printf '\001' | dd of="/dev/shm/$tag-hdr" bs=1 seek=33 conv=notrunc 2>/dev/null
run "ls damaged header" 1 ls "$tag-hdr"
has out "^$tag-hdr .* damaged" "ls damaged header"
run "check damaged header" 1 check "$tag-hdr"
has out "header: damaged at offset 0" "check damaged header"
has err "damaged: its header does not check out" "check damaged header message"
run "stat damaged header" 1 stat "$tag-hdr"
run "rm damaged header" 0 rm "$tag-hdr"

# a root's name that fills its field (the directory is at offset 20480,
# 64 bytes an entry, doc/format.md; the first root is the queue "jobs")
cp "/dev/shm/$live" "/dev/shm/$tag-names"
head -c 48 /dev/zero | tr '\0' 'z' |
    dd of="/dev/shm/$tag-names" bs=1 seek=20480 conv=notrunc 2>/dev/null
run "check damaged root name" 1 check "$tag-names"
has out "^root directory: entry 0 damaged" "check damaged root name"
run "stat damaged root name" 1 stat "$tag-names"
has out "config  *object" "stat goes on past a damaged root name"
run "dump ROOT past a damaged root name" 0 dump "$tag-names" config
has out '"workers":4' "dump ROOT past a damaged root name"
run "rm damaged root name" 0 rm "$tag-names"

# ---- busy: a live process keeps the segment lock ------------------------------
# The helper's own attachment token (slot 0, the first word of the process
# table at offset 4096) written into the segment lock's word (offset 192,
# doc/format.md): to every other process, a live owner that does not let
# go. check, read-write, needs the lock: it gives up after the library's
# 10 s, says so in one line on stderr, and exits 2. stat and dump attach
# read-only and take no lock: the stuck holder does not stop them.
busy="$tag-busy"
serve "$busy" 7
dd if="/dev/shm/$busy" bs=1 skip=4096 count=4 2>/dev/null |
    dd of="/dev/shm/$busy" bs=1 seek=192 conv=notrunc 2>/dev/null
run "stat busy" 0 stat "$busy"
hasnt err "busy" "stat of a segment whose lock is stuck"
hasnt out "entry 4294967295" "stat busy names an entry that does not exist"
hasnt out "(none)" "stat busy calls roots it could not read none"
run "check busy" 2 check "$busy"
has err "^shmobj: $busy: .*busy" "check busy says why on stderr"
run "dump busy" 0 dump "$busy" config
hasnt err "busy" "dump of a segment whose lock is stuck"

# ---- rm and a name replaced between its look and its removal ---------------------
# test-cli-swap moves another program's file over the name once rm's peek
# found a segment there: rm must leave the newcomer alone.
cp "/dev/shm/$live" "/dev/shm/$tag-swap"
head -c 8192 /dev/zero | tr '\0' 'y' >"/dev/shm/$tag-intruder"
cp "/dev/shm/$tag-intruder" "$tmp/intruder"
env LD_PRELOAD="$swap" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    SHMOBJ_TEST_SWAP_FROM="/dev/shm/$tag-intruder" \
    SHMOBJ_TEST_SWAP_TO="/dev/shm/$tag-swap" SHMOBJ_TEST_SWAP_DONE="$tmp/swapped" \
    "$tool" rm "$tag-swap" >"$tmp/out" 2>"$tmp/err"
got=$?
if [ ! -e "$tmp/swapped" ]; then
    echo "skipped: rm with a replaced name (the tool's peek was not interposed)"
    rm -f "/dev/shm/$tag-swap" "/dev/shm/$tag-intruder"
else
    [ $got -eq 2 ] || fail "rm of a replaced name: exit $got, expected 2"
    has err "$tag-swap: refused: the name was replaced" "rm of a replaced name"
    cmp -s "/dev/shm/$tag-swap" "$tmp/intruder" ||
        fail "rm of a replaced name removed the file that replaced the segment"
fi

heap="$tag-heap"
serve "$heap" 4
off=$("$helper" damage-heap "$heap" blob) || fail "damage-heap"
run "check damaged heap" 1 check "$heap"
has out "^heap: damaged at offset $off " "check damaged heap: the offset of the block"
has out "^$heap: damaged (1 problem)" "check damaged heap: summary"

map="$tag-map"
serve "$map" 5
off=$("$helper" damage-map "$map" cache) || fail "damage-map"
run "check damaged map" 1 check "$map"
has out "^map 'cache': damaged at offset $off " "check damaged map: the map's offset"

# ---- unreadable: another user ---------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 &&
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$tool" --help >/dev/null 2>&1; then
    for c in ls check stat; do
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$tool" "$c" "$live" \
            >"$tmp/out" 2>"$tmp/err"
        got=$?
        [ $got -eq 2 ] || fail "$c as nobody: exit $got, expected 2"
        has err "$live: permission denied" "$c as nobody"
    done
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$tool" rm "$live" \
        >"$tmp/out" 2>"$tmp/err"
    [ -e "/dev/shm/$live" ] || fail "rm as nobody removed the segment"
    # readable by everyone (0644): nobody attaches read-only, every look
    # works and check repairs nothing and says so (that not a byte changes
    # is test-readonly's: the helper here keeps writing)
    chmod 0644 "/dev/shm/$live"
    for c in stat check "dump --pretty" "top -n 1 -i 0.2"; do
        # shellcheck disable=SC2086
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$tool" $c "$live" \
            >"$tmp/out" 2>"$tmp/err"
        got=$?
        [ $got -eq 0 ] || { fail "$c as nobody on 0644: exit $got, expected 0"; sed 's/^/  err: /' "$tmp/err" >&2; }
    done
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$tool" check "$live" \
        >"$tmp/out" 2>"$tmp/err"
    has out "^$live: read-only: not repaired" "check as nobody on 0644 says it repaired nothing"
    has out "^$live: ok: heap" "check as nobody on 0644"
    chmod 0600 "/dev/shm/$live"
else
    echo "skipped: unreadable segments (needs root and setpriv)"
fi

# ---- file-backed segments by path ------------------------------------------------
serve "$tmp/seg.file" 6
run "ls PATH" 0 ls "$tmp/seg.file"
has out "^$tmp/seg.file  *file .* 1 ready" "ls PATH"
run "check PATH" 0 check "$tmp/seg.file"
has out "ok: heap, 13 roots" "check PATH"
run "stat PATH" 0 stat "$tmp/seg.file"
has out "backend file" "stat PATH"
# a copy of a shm segment in a file is not a file-backed segment
cp "/dev/shm/$live" "$tmp/copy.file"
run "check a copied shm segment as a file" 1 check "$tmp/copy.file"
run "ls a copied shm segment as a file" 1 ls "$tmp/copy.file"
has out "damaged" "ls a copied shm segment as a file"
run "rm PATH" 0 rm "$tmp/seg.file" "$tmp/copy.file"
[ -e "$tmp/seg.file" ] && fail "rm PATH kept the file"
echo hello >"$tmp/text.file"
run "rm a text file" 2 rm "$tmp/text.file"
[ -e "$tmp/text.file" ] || fail "rm removed a text file"

# ---- while the demo runs ----------------------------------------------------------
# in a session of its own, so that its producer and consumer go together;
# its pid (that session's and group's number) is in its first line
setsid "$demo" 100000000 1 1 >"$tmp/demo.out" 2>&1 &
demo_job=$!
if wait_line "$tmp/demo.out" 'consumer attached'; then
    demo_pid=$(sed -n 's/^producer \([0-9]*\): created.*/\1/p' "$tmp/demo.out")
    dname="shmobj-demo-$demo_pid"
    run "ls demo" 0 ls "$dname"
    has out "^$dname .* 2 ready" "ls demo: producer and consumer attached"
    run "stat demo" 0 stat "$dname"
    has out "^processes (2 attached besides this tool)" "stat demo"
    has out "default  *queue .*depth [0-9]*/256" "stat demo: its queue"
    run "dump demo" 0 dump "$dname"
    has out '"default":{"\$queue":{"capacity":256' "dump demo"
    run "check demo" 0 check "$dname"
    has out "ok: heap, 1 root (1 queue" "check demo"
    run "top demo" 0 top -n 2 -i 0.2 "$dname"
    has out "frame 2" "top demo"
    kill -TERM "-$demo_pid"
    wait "$demo_job" 2>/dev/null
    demo_pid_done=$demo_pid
    demo_pid=""
    # killed: its name stays, nobody attached
    i=0
    while :; do
        "$tool" ls "$dname" >"$tmp/out" 2>"$tmp/err"
        grep -q " orphaned" "$tmp/out" && break
        i=$((i + 1))
        [ $i -gt 200 ] && { fail "killed demo's segment never orphaned"; break; }
        sleep 0.05
    done
    run "rm killed demo" 0 rm "$dname"
    [ -e "/dev/shm/shmobj-demo-$demo_pid_done" ] && fail "rm kept the demo's segment"
else
    fail "demo never attached its consumer"
    cat "$tmp/demo.out" >&2
fi

# ---- rm of a live segment: its users go on, the name goes --------------------------
run "rm live" 0 rm "$live"
[ -e "/dev/shm/$live" ] && fail "rm kept the live segment"
run "ls removed" 2 ls "$live"

if [ $failures -ne 0 ]; then
    echo "$failures checks failed" >&2
    exit 1
fi
echo "all checks passed"
