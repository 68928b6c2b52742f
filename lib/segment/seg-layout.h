/* The bytes at the start of every segment (format SHMOBJ_FORMAT_VERSION).
 * doc/format.md is the normative description; this header and its
 * _Static_asserts are the code side of it.
 *
 *   offset 0      struct shmobj__seg_header   (one page, 4096 bytes)
 *   offset 4096   process table, SHMOBJ__SEG_PROCS entries of 16 bytes
 *   offset 20480  root directory, SHMOBJ__SEG_ROOTS entries of 64 bytes
 *   offset 32768  arena control block, then the heap up to `size`
 *
 * Liveness lives outside the bytes: slot i of the process table is held by
 * an OFD write lock on byte SHMOBJ__SEG_LIVE_BASE + i of the backing
 * object, and the creator holds byte SHMOBJ__SEG_LIVE_CREATOR from the
 * moment the object exists until its handle closes (seg-procs.c).
 *
 * magic, state, format_version and header_size keep their offsets in every
 * future format, so any version can tell another one apart (and wait for it
 * to become ready) before it interprets anything else. */
#ifndef SHMOBJ_SEG_LAYOUT_H
#define SHMOBJ_SEG_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "os.h"

/* "SHMOBJ" then 0x00, 0x01 as bytes: read as a little-endian uint64 on one
 * byte order, byte-swapped on the other, so the magic exposes byte order. */
#define SHMOBJ__SEG_MAGIC UINT64_C(0x01004a424f4d4853)
#define SHMOBJ__SEG_MAGIC_SWAPPED UINT64_C(0x53484d4f424a0001)

#define SHMOBJ__SEG_HEADER_SIZE 4096
/* The granule the heap's untouched mark is raised by (bytes). */
#define SHMOBJ__SEG_UNTOUCHED_STEP (UINT64_C(64) << 10)
#define SHMOBJ__SEG_PROCS_OFF 4096
#define SHMOBJ__SEG_PROCS 1024
#define SHMOBJ__SEG_ROOTS_OFF 20480
#define SHMOBJ__SEG_ROOTS 128
#define SHMOBJ__SEG_ROOT_NAME 48
#define SHMOBJ__SEG_ARENA_OFF 32768
/* Bits of the header's `pages` word. */
#define SHMOBJ__SEG_PAGES_SHIFT_MASK 0xffu
#define SHMOBJ__SEG_PAGES_THP 0x100u

/* Attachment tokens: slot | generation << SLOT_BITS, 31 bits, never 0 (the
 * generation is never 0). They name a handle in lock words and in every
 * record "owned by a live handle" of the layers above. */
#define SHMOBJ__SEG_SLOT_BITS 10
#define SHMOBJ__SEG_GEN_MAX ((UINT32_C(1) << (31 - SHMOBJ__SEG_SLOT_BITS)) - 1)
_Static_assert(SHMOBJ__SEG_PROCS == 1u << SHMOBJ__SEG_SLOT_BITS, "slots");

/* Bytes of the backing object that carry OFD locks: far beyond any data
 * (SHMOBJ__SEG_MAX_SIZE), so they never overlap what is mapped. */
#define SHMOBJ__SEG_LIVE_BASE (UINT64_C(1) << 62)
#define SHMOBJ__SEG_LIVE_CREATOR (SHMOBJ__SEG_LIVE_BASE + SHMOBJ__SEG_PROCS)

/* Largest segment this format addresses: references hold 48-bit offsets. */
#define SHMOBJ__SEG_MAX_SIZE (UINT64_C(1) << 47)

enum {
    SHMOBJ__SEG_STATE_INIT = 0,  /* creator still writing the header */
    SHMOBJ__SEG_STATE_READY = 1, /* header complete; open may proceed */
};

struct shmobj__seg_header {
    /* ---- fixed in every format version ---- */
    /* SHMOBJ__SEG_MAGIC, written with format_version and header_size
     * first of all, right after the object is sized: an opener that finds
     * another magic knows at once that this is not a segment it can wait
     * for, and one that finds 0 waits only while the creator lives. */
    uint64_t magic;
    /* Futex word. INIT -> READY once, by the creator, with release order
     * after every other header field, so an opener that acquires READY sees
     * a complete header. Any other value is damage (SHMOBJ_ECORRUPT). */
    _Atomic uint32_t state;
    uint32_t format_version; /* SHMOBJ_FORMAT_VERSION of the creator */
    uint32_t header_size;    /* sizeof(struct shmobj__seg_header) */
    uint32_t reserved0;      /* zero */

    /* ---- immutable after creation; covered by `checksum` ---- */
    uint64_t layout_sig;   /* shmobj__seg_layout_signature() of the creator */
    uint64_t max_size;     /* bytes of address space every process maps */
    uint64_t arena_off;    /* SHMOBJ__SEG_ARENA_OFF */
    uint64_t procs_off;    /* SHMOBJ__SEG_PROCS_OFF */
    uint64_t roots_off;    /* SHMOBJ__SEG_ROOTS_OFF */
    uint32_t procs_max;    /* SHMOBJ__SEG_PROCS */
    uint32_t roots_max;    /* SHMOBJ__SEG_ROOTS */
    uint32_t backend;      /* enum shmobj_backend */
    uint32_t reserved1;    /* zero */
    uint64_t created_ns;   /* CLOCK_REALTIME at creation, for tools */
    uint64_t checksum;     /* FNV-1a 64 of bytes [16, offsetof(checksum)) */

    /* ---- written by the creator before READY, then read-only ---- */
    /* The creator's pid in its own PID namespace, for tools only: openers
     * learn whether the creator is alive from its OFD lock on
     * SHMOBJ__SEG_LIVE_CREATOR, never from this number. */
    uint32_t creator_pid;
    /* The pages the creator obtained, for tools and openers: bits 0-7 the
     * log2 of their size (12, 21, 30; 0 in segments of builds that did not
     * record it: system pages), bit 8 (SHMOBJ__SEG_PAGES_THP) set when the
     * segment asks for transparent huge pages, so every opener advises its
     * mapping (MADV_HUGEPAGE) as the creator did. An opener takes the
     * granule of sizes from its own fstatfs, never from this word. */
    uint32_t pages;
    uint64_t reserved4; /* zero */

    uint8_t pad0[128 - 112];

    /* ---- mutable, own cache line ---- */
    /* Bytes of the backing object in use by the heap; grows. Written under
     * `lock` after the object has grown and the arena has taken the space
     * (release); read by anyone (acquire) to learn the heap's extent. */
    _Atomic uint64_t size;
    /* Futex word bumped (release) on every attach and detach so that
     * shmobj_segment_wait_attached() sleeps until the table changes. */
    _Atomic uint32_t attach_seq;
    /* Futex word bumped (release) under `lock` by every root add, set and
     * delete, after the entry is written; each bump is followed by a
     * FUTEX_WAKE of all sleepers, after the unlock, whether or not anyone
     * sleeps (roots change a few times in a segment's life, so the one
     * system call costs nothing worth a waiter count, and no count can
     * be left wrong by a killed waiter). shmobj_segment_root_wait() reads
     * it (acquire) before it looks the name up, so a root added after the
     * look-up changes the word and the futex wait returns at once. Its
     * value means nothing beyond "changed"; it wraps. Zero in a segment
     * no root was ever written to (formerly a reserved zero word, so
     * segments of earlier builds read as "no change yet"). */
    _Atomic uint32_t root_seq;
    /* The heap's untouched mark: no block ever held a byte at or past it
     * (heap bytes written there are free blocks' headers and links, at a
     * block's start). Raised under `lock`, past the end of every block
     * handed out (rounded up to SHMOBJ__SEG_UNTOUCHED_STEP, so that
     * allocations at the heap's top seldom write this line), to the old
     * end at every growth (whose old sentinel stays inside the merged
     * block) and to the heap's end when a dead holder's lock is repaired
     * (its allocation may have been made and not marked). The bytes of a
     * new block past its first 64 and past the mark read as zero, as the
     * object was made: seg-heap.c's alloc_dirty says so, and a caller that
     * zeroes a new block clears only the rest.
     * 0: unknown, nothing is untouched. */
    _Atomic uint64_t untouched;
    uint8_t pad1[64 - 24];

    /* ---- the segment lock, own cache line ---- */
    /* Guards the arena, growth and the root directory. A holder that dies
     * is repaired by the next locker (seg-lock.c, seg-grow.c). */
    shmobj__os_lock lock;
};

_Static_assert(offsetof(struct shmobj__seg_header, state) == 8, "fixed");
_Static_assert(offsetof(struct shmobj__seg_header, format_version) == 12,
               "fixed");
_Static_assert(offsetof(struct shmobj__seg_header, header_size) == 16,
               "fixed");
_Static_assert(offsetof(struct shmobj__seg_header, checksum) == 88, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, layout_sig) == 24, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, max_size) == 32, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, backend) == 72, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, created_ns) == 80, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, creator_pid) == 96, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, pages) == 100, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, attach_seq) == 136, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, size) == 128, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, root_seq) == 140, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, untouched) == 144, "layout");
_Static_assert(offsetof(struct shmobj__seg_header, lock) == 192, "layout");
_Static_assert(sizeof(struct shmobj__seg_header) == 256, "layout");
_Static_assert(sizeof(struct shmobj__seg_header) <= SHMOBJ__SEG_HEADER_SIZE,
               "header page");

/* The watch table (seg-watch.c, shmobj/watch.h), in the header page after
 * the header: bytes that segments of earlier builds leave zero, which
 * reads as "no watch", so neither the format version nor the header's
 * size changed for it. A build that does not know it ignores it (its
 * writers then wake nobody).
 *
 *   offset 256    struct shmobj__seg_watch_head (64 bytes)
 *   offset 320    SHMOBJ__SEG_WATCHES entries of 64 bytes, to 3904 */
#define SHMOBJ__SEG_WATCH_OFF 256
#define SHMOBJ__SEG_WATCHES 56
#define SHMOBJ__SEG_WATCH_ALL ((UINT64_C(1) << SHMOBJ__SEG_WATCHES) - 1)

struct shmobj__seg_watch_head {
    /* Bit i set while entry i may hold a registration. Set (seq_cst
     * fetch-or) by a watcher once its entry is complete, cleared
     * (fetch-and) by the watcher's close before it frees the entry; an
     * entry of a dead watcher keeps its bit until it is reclaimed. Read
     * (relaxed) after every change of a watchable structure: 0 means
     * nobody watches anything here, and the change wakes nobody. Only a
     * hint: the entries' state words are the truth, and bits beyond
     * SHMOBJ__SEG_WATCHES are ignored. */
    _Atomic uint64_t used;
    uint64_t reserved[7]; /* zero */
};
_Static_assert(sizeof(struct shmobj__seg_watch_head) == 64, "layout");

/* Entry states, in the low byte of `state`; the owner's token above bit
 * 32, so that one word tells who holds the entry in every state. */
enum {
    SHMOBJ__SEG_WATCH_FREE = 0,
    SHMOBJ__SEG_WATCH_BUSY = 1,  /* being filled, or emptied, by the owner */
    SHMOBJ__SEG_WATCH_IDLE = 2,  /* registered, not armed */
    SHMOBJ__SEG_WATCH_ARMED = 3, /* registered: the next change writes to
                                    its FIFO */
};

/* One watch: a process's interest in a block (a map's control block with
 * a key hash, or a mutable container), and how to wake it. */
struct shmobj__seg_watch {
    /* state | owner token << 32 (0 when FREE). Moved by CAS from the exact
     * value seen (acq_rel): FREE -> BUSY by a claimant, any state of a
     * dead owner -> BUSY by a reclaimer, BUSY -> IDLE (release) once the
     * fields below are written, IDLE <-> ARMED by the owner's arm and a
     * writer's wake-up, IDLE/ARMED -> BUSY -> FREE by the owner's close.
     * The fields below are written only by whoever holds it BUSY. */
    _Atomic uint64_t state;
    /* Changes seen by writers since the entry was filled: a writer that
     * matches the entry adds 1 (seq_cst) before it looks at the state for
     * ARMED; the owner compares it with what it consumed. Wraps. */
    _Atomic uint64_t changes;
    _Atomic uint64_t obj;   /* reference of the watched block */
    _Atomic uint64_t key;   /* key hash (the map's seeded hash), or 0 */
    _Atomic uint64_t ino;   /* the owner's FIFO (os-notify.h) */
    _Atomic uint32_t pid;   /* the owner's pid: its pipe without /dev/shm */
    _Atomic int32_t fd;     /* the read end's descriptor in the owner */
    _Atomic uint32_t flags; /* SHMOBJ__WATCH_WHOLE (space.h): any change
                               of the block, not one key */
    uint32_t reserved0;     /* zero */
    uint64_t reserved1;     /* zero */
};
_Static_assert(sizeof(struct shmobj__seg_watch) == 64, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, changes) == 8, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, obj) == 16, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, key) == 24, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, ino) == 32, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, pid) == 40, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, fd) == 44, "layout");
_Static_assert(offsetof(struct shmobj__seg_watch, flags) == 48, "layout");
_Static_assert(SHMOBJ__SEG_WATCH_OFF >= sizeof(struct shmobj__seg_header) &&
                   SHMOBJ__SEG_WATCH_OFF + 64 + SHMOBJ__SEG_WATCHES * 64 <=
                       SHMOBJ__SEG_HEADER_SIZE,
               "the watch table lies in the header page, after the header");
_Static_assert(SHMOBJ__SEG_WATCHES <= 64, "one bit each in `used`");

/* One attachment slot. Its occupant is whoever holds the OFD lock on byte
 * SHMOBJ__SEG_LIVE_BASE + index: the kernel, not these bytes, decides who
 * owns a slot, so claiming needs no segment lock and damage here can only
 * make a live handle look dead to others in the sense of "its token does
 * not match" (its records are then taken over, as after a death). */
struct shmobj__seg_proc {
    /* Token of the current or last occupant. Written (release) only by the
     * process that holds the slot's OFD lock, right after taking it: the
     * new token's generation is the old one's plus one, so a token never
     * names two occupants before the generation wraps (2^21 attaches of
     * one slot). Read (acquire) by liveness checks. */
    _Atomic uint32_t token;
    /* Occupant's pid in its own PID namespace, 0 after a clean detach; for
     * tools only (relaxed). */
    _Atomic uint32_t pid;
    /* CLOCK_REALTIME of the attach, nanoseconds; for tools (relaxed). */
    _Atomic uint64_t attached_ns;
};
_Static_assert(sizeof(struct shmobj__seg_proc) == 16, "layout");
_Static_assert(offsetof(struct shmobj__seg_proc, token) == 0, "layout");
_Static_assert(offsetof(struct shmobj__seg_proc, pid) == 4, "layout");
_Static_assert(offsetof(struct shmobj__seg_proc, attached_ns) == 8, "layout");
_Static_assert(SHMOBJ__SEG_PROCS * 16 == SHMOBJ__SEG_ROOTS_OFF -
                                             SHMOBJ__SEG_PROCS_OFF,
               "layout");

/* One named root. `ref` 0 marks a free entry. Written under the lock in the
 * order ref = 0, name, ref (release), so a torn write leaves a free entry;
 * readers take the lock too, so they never see a half-written name. */
struct shmobj__seg_root {
    char name[SHMOBJ__SEG_ROOT_NAME]; /* NUL-terminated */
    uint64_t ref;                     /* shmobj_ref, 0 = free */
    uint64_t reserved;
};
_Static_assert(sizeof(struct shmobj__seg_root) == 64, "layout");
_Static_assert(offsetof(struct shmobj__seg_root, ref) == 48, "layout");
_Static_assert(SHMOBJ__SEG_ROOTS * 64 <=
                   SHMOBJ__SEG_ARENA_OFF - SHMOBJ__SEG_ROOTS_OFF,
               "layout");

#endif /* SHMOBJ_SEG_LAYOUT_H */
