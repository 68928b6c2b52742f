#!/usr/bin/env python3
"""Writes the hand-made seed inputs of fuzz/corpus/<target>/.

An input is a list of edits (fuzz/fuzz-edits.h): u16 region, u32 offset,
u8 length - 1, then the bytes. Region numbers are the order in which each
target's fuzz_setup() registers its regions (see the comments below).
Run from the repository's top directory: python3 fuzz/corpus/seeds.py"""
import os
import struct


def edit(region, off, data):
    out = b""
    while data:
        chunk, data = data[:16], data[16:]
        out += struct.pack("<HIB", region, off, len(chunk) - 1) + chunk
        off += len(chunk)
    return out


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def write(target, seeds):
    d = os.path.join("fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


# fuzz-segment: 0 header (256 bytes), 1 state, 2 lock word, 3 size and
# attach_seq, 4 process table, 5 this handle's slot and the next two,
# 6 root directory, 7 its first four entries.
write("fuzz-segment", {
    "state-2": edit(1, 0, u32(2)),
    "state-init": edit(1, 0, u32(0)),
    "magic-swapped": edit(0, 0, u64(0x53484d4f424a0001)),
    "magic-zero": edit(0, 0, u64(0)),
    "version-99": edit(0, 12, u32(99)),
    "checksum": edit(0, 88, u64(0x0123456789abcdef)),
    "lock-dead": edit(2, 0, u32(5 | 1 << 10)),
    "lock-dead-contended": edit(2, 0, u32(0x80000000 | 7 | 3 << 10)),
    "lock-impossible": edit(2, 0, u32(5)),
    "size-huge": edit(3, 0, u64(0xffffffffffffffff)),
    "slot-cleared": edit(5, 0, u64(0)),
    "slots-pids": edit(4, 4, u32(1)) + edit(4, 20, u32(1)) + edit(4, 16, u32(1 | 1 << 10)),
    "root-unterminated": edit(7, 0, b"A" * 48),
    "root-ref": edit(7, 48, u64(0x0001000000008040)),
    "root-dup-name": edit(7, 64, b"m\0"),
})

# fuzz-queue: 0..2 the waiting messages' headers, 3 ring header up to the
# notify records, 4 notify records, 5 sleeper records, 6 waiter totals and
# armed count, 7 slots and claims, 8 retire FIFO before its lock, 9 the
# FIFO after it, 10 its lock word, then the retired blocks' headers.
notify_armed = u32(3) + u32(1) + u64(5 | 1 << 10) + u64(12345) + u32(0) + u32(0)
sleeper_dead = u64(5 | 1 << 10) + u64(5 | 1 << 10) + u32(3) + u32(2)
write("fuzz-queue", {
    "notify-armed-foreign": edit(4, 32, notify_armed),
    "notify-token-wide": edit(4, 8, u64(0x100000005)),
    "notify-state-junk": edit(4, 0, u32(0xdeadbeef)),
    "sleeper-dead": edit(5, 0, sleeper_dead) + edit(6, 0, u32(3)) + edit(6, 64, u32(2)),
    "sleeper-busy": edit(5, 32, u64(0xffffffffffffffff)),
    "waiters-huge": edit(6, 0, u32(0xffffffff)) + edit(6, 8, u32(0xffffffff)),
    "slot-zero": edit(7, 0, u64(0)),
    # the retire lock: a dead owner (slot 5, generation 1), one no lock can
    # hold (generation 0), garbage with the contended bit
    "retire-lock-dead": edit(10, 0, u32(5 | 1 << 10)),
    "retire-lock-impossible": edit(10, 0, u32(5)),
    "retire-lock-junk": edit(10, 0, u32(0xdeadbeef)),
})

# fuzz-map: 0 control block header and reader slots, 1..64 the shards'
# lock words, then each shard's fields after its lock and its table, then
# the entries.
write("fuzz-map", {
    "shard-lock-dead": edit(1, 0, u32(5 | 1 << 10)),
    "shard-lock-dead-contended": edit(2, 0, u32(0x80000000 | 7 | 3 << 10)),
    "shard-lock-impossible": edit(3, 0, u32(5)),
    "shard-lock-junk": edit(64, 0, u32(0xdeadbeef)),
    "every-lock-dead": b"".join(edit(1 + i, 0, u32(9 | 2 << 10)) for i in range(64)),
})

# fuzz-topic: topic "t" (capacity 8, 4 records): 0 constants line, 1 lock
# line, 2 publishers' line, 3 subscribers' line, 4 slots, 5 subscriber
# records (the holder's, then the one behind), 6 loan records, 7 spare
# records, 8..11 the headers of the loans in the ring (sequences 18..21;
# 10 is the loan the holder took first, in slot 4), 12..16 the spare
# blocks' headers, 17 the outstanding loan's record, 18 its header; then
# topic "o" (capacity 4, overwrite): 19..22 its header's lines, 23 slots,
# 24 records, 25 loan records, 26 spare records, 27..31 its spare blocks'
# headers. In a line: head 0, tail 8, sub_hwm 28 (publishers'); in a
# record: token 0, next 8, held 16, notify 32, pid 40, inode 48; in a
# loan's header: stamp 0, size 8, cap 16.
notify_armed = u32(2) + u32(3) + u32(1) + u32(0) + u64(12345)
write("fuzz-topic", {
    "lock-dead": edit(1, 0, u32(5 | 1 << 10)),
    "lock-dead-contended": edit(1, 0, u32(0x80000000 | 7 | 3 << 10)),
    "lock-impossible": edit(1, 0, u32(5)),
    "lock-junk": edit(20, 0, u32(0xdeadbeef)),
    "ident-zero": edit(0, 8, u64(0)),
    "version-99": edit(0, 4, u32(99)),
    "tail-zero": edit(2, 8, u64(0)),
    "head-huge": edit(2, 0, u64(0xffffffffffffffff)),
    "hwm-huge": edit(2, 28, u32(0xffffffff)),
    "waiters-huge": edit(2, 20, u32(0xffffffff)) + edit(3, 4, u32(0xffffffff)),
    "slot-kind-junk": edit(4, 4 * 32 + 24, u64(7)),
    "record-held-huge": edit(5, 16, u64(1 << 63)),
    "record-dead": edit(5, 64, u64(5 | 1 << 10)),
    "record-armed-foreign": edit(5, 64 + 32, notify_armed) + edit(2, 24, u32(1)),
    "loan-dead-junk": edit(6, 16, u64(5 | 1 << 10) + u64(0x0001000000008040)),
    "spare-ref-junk": edit(7, 8, u64(0x0001000000008040)),
    # findings (tests/test-fuzz-regress.c): a slot's length that wraps the
    # header's 64 bytes round, with a loan header's size to match; a spare
    # block's header claiming more bytes than the block has
    "slot-len-wrap": edit(4, 4 * 32 + 16, u64(2**64 - 32)) + edit(10, 8, u64(2**64 - 1)),
    "spare-cap-large": b"".join(edit(27 + i, 16, u64(155)) for i in range(5)),
})

# fuzz-object, mutable containers: "MUT:" then edits of 5 bytes (u32: top
# byte the block, 0 the object block, then the list's chunks, the dict's
# body, the set's body; low 24 bits the byte in it; u8 the value), applied
# to the graph fuzz/fuzz-object.c builds (mut_build).
def mut(*edits):
    return b"MUT:" + b"".join(struct.pack("<IB", (blk << 24) | off, v) for blk, off, v in edits)


write("fuzz-object", {
    "mutable-intact": mut(),
    # the list's seq odd and an unknown intent (its control block is at 192
    # in the object block): readers fall back to the
    # lock, whose repair refuses the intent
    "mutable-seq-odd": mut((0, 192 + 64, 1), (0, 192 + 104, 99)),
    # a short key's NUL padding overwritten in the dict's body
    "mutable-sstr-pad": mut((3, 1056 + 32 * 38 + 11, 183)),
    # the dict's body magic
    "mutable-body-magic": mut((3, 0, 0)),
})
