/* The bytes of a shared map (normative description: doc/format-map.md).
 *
 * A map is one control block (header, epoch, reader slots, shards) plus,
 * per shard, one table block (a 64-byte prefix and an htcore ref-mode
 * table) and one heap block per entry. Every reference is a space.h
 * reference (48-bit offset, 16-bit generation). Tests and the fuzz target
 * include this header to aim their damage. */
#ifndef SHMOBJ_MAP_LAYOUT_H
#define SHMOBJ_MAP_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "os.h"

#define SHMOBJ__MAP_MAGIC UINT64_C(0x31304d4a424f4d53) /* "SMOBJM01" */
#define SHMOBJ__MAP_VERSION 2u /* 2: 1024 reader slots and their bitmap */
#define SHMOBJ__MAP_SHARDS 64u      /* a power of two */
#define SHMOBJ__MAP_SHARD_SHIFT 58u /* shard = hash >> 58 */
#define SHMOBJ__MAP_READERS 1024u   /* handles with the map open at once
                                       (SHMOBJ_MAP_HANDLES_MAX) */
#define SHMOBJ__MAP_CLAIM_WORDS (SHMOBJ__MAP_READERS / 64u)
#define SHMOBJ__MAP_TABLE_PREFIX 64u /* bytes before the htcore table */
#define SHMOBJ__MAP_ENTRY_HEADER 16u

/* Intent codes of a shard (what a lock holder was doing). */
enum {
    SHMOBJ__MAP_OP_NONE = 0,
    SHMOBJ__MAP_OP_SET = 1,   /* intent_new replaces intent_old / inserts */
    SHMOBJ__MAP_OP_DEL = 2,   /* intent_old is being removed */
    SHMOBJ__MAP_OP_CLEAR = 3  /* intent_table replaces intent_table_old */
};

/* Where a retired block keeps the link to the next one on its limbo list:
 * bytes 8..15 of its payload, i.e. an entry's hash_gen (no longer needed
 * once the entry is unlinked: the list holds its full reference; the
 * lengths at 0..7 stay intact for views and cursors that still read it) or
 * a table prefix's second word. */
#define SHMOBJ__MAP_LINK_OFF 8u

/* Bit 0 of a retired reference (offsets are 16-byte aligned, so it is free):
 * the block is a table whose entries must be freed with it (clear). */
#define SHMOBJ__MAP_RETIRE_DEEP UINT64_C(1)

/* One handle's read guards. A reader adds 1 to active[e & 1] for the
 * epoch e it entered in; retired memory of epoch r is freed once the epoch
 * has reached r + 2, which needs every active[(r) & 1] back at 0. A slot is
 * claimed by setting its bit in the control block's `claimed` bitmap (the
 * bit is the claim: the epoch advance scans only claimed slots), then
 * token, then owner; it is given back in the reverse order. */
struct shmobj__map_reader {
    _Atomic uint64_t owner;      /* claims << 32 | attachment token of the
                                    claiming handle's segment handle
                                    (seg-layout.h); 0 while free,
                                    being claimed or being reaped. Stored
                                    by open after token, CAS to 0 by
                                    close and by the reaper of a dead
                                    owner (the claim count in the high
                                    half makes that CAS miss a new owner
                                    of the same identity) */
    _Atomic uint64_t token;      /* the owner's token again; written
                                    before owner, 0 once given back, so a
                                    reaper never judges a half-claimed
                                    slot */
    _Atomic uint64_t active[2];  /* guards held, by epoch parity; seq_cst
                                    RMW by readers, loaded by writers */
    _Atomic uint64_t claims;     /* times the slot was claimed; RMW by open
                                    (only the bit's holder), never reset */
    uint8_t pad[24];
};
_Static_assert(sizeof(struct shmobj__map_reader) == 64, "one cache line");
_Static_assert(offsetof(struct shmobj__map_reader, token) == 8, "layout");
_Static_assert(offsetof(struct shmobj__map_reader, active) == 16, "layout");
_Static_assert(offsetof(struct shmobj__map_reader, claims) == 32, "layout");

/* One shard: the lock stripe, the sequence counter readers validate
 * against, the current table and the repair record. Fields other than
 * seq/table/count are written only under `lock`. */
struct shmobj__map_shard {
    shmobj__os_lock lock;            /* the library's lock (os-lock.c):
                                        owner's token, taken over from a
                                        dead owner with EOWNERDEAD */
    _Atomic uint64_t seq;            /* odd while the table changes;
                                        release by the writer, acquire by
                                        readers */
    _Atomic uint64_t table;          /* ref of the table block; release */
    _Atomic uint64_t count;          /* entries; relaxed (count()) */
    _Atomic uint64_t intent_op;      /* SHMOBJ__MAP_OP_*, set before the
                                        change it describes, 0 after */
    _Atomic uint64_t intent_new;     /* entry being linked */
    _Atomic uint64_t intent_old;     /* entry being unlinked */
    _Atomic uint64_t intent_table;   /* table being published */
    _Atomic uint64_t intent_table_old; /* table it replaces */
    _Atomic uint64_t intent_free;    /* block being freed off a limbo list */
    _Atomic uint64_t limbo_head[3];  /* retired refs (| DEEP), linked
                                        through SHMOBJ__MAP_LINK_OFF */
    _Atomic uint64_t limbo_epoch[3]; /* epoch the list's items retired in */
    _Atomic uint64_t limbo_len;      /* items on the three lists */
    uint8_t pad[64];
};
_Static_assert(offsetof(struct shmobj__map_shard, seq) == 64, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, table) == 72, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, count) == 80, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_op) == 88, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_new) == 96, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_old) == 104, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_table) == 112, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_table_old) == 120, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, intent_free) == 128, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, limbo_head) == 136, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, limbo_epoch) == 160, "layout");
_Static_assert(offsetof(struct shmobj__map_shard, limbo_len) == 184, "layout");
_Static_assert(sizeof(struct shmobj__map_shard) == 256, "layout");

struct shmobj__map_ctl {
    uint64_t magic;       /* SHMOBJ__MAP_MAGIC; written at creation */
    uint32_t version;     /* SHMOBJ__MAP_VERSION */
    uint32_t shards;      /* SHMOBJ__MAP_SHARDS */
    uint32_t readers;     /* SHMOBJ__MAP_READERS */
    uint32_t ctl_size;    /* sizeof(struct shmobj__map_ctl) */
    uint64_t seed;        /* hash seed of every key of the map */
    uint64_t lock_format; /* SHMOBJ__OS_LOCK_FORMAT of the creator */
    uint64_t check;       /* hash of the 40 bytes above */
    uint8_t pad0[16];
    _Atomic uint64_t epoch; /* global epoch, >= 2; seq_cst */
    uint8_t pad1[56];
    _Atomic uint64_t claimed[SHMOBJ__MAP_CLAIM_WORDS]; /* bit i: reader slot i
                                    is claimed; seq_cst CAS by open, AND by
                                    close and reapers, loaded by the epoch
                                    advance */
    struct shmobj__map_reader readers_[SHMOBJ__MAP_READERS];
    struct shmobj__map_shard shards_[SHMOBJ__MAP_SHARDS];
};
_Static_assert(offsetof(struct shmobj__map_ctl, version) == 8, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, shards) == 12, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, readers) == 16, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, ctl_size) == 20, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, seed) == 24, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, lock_format) == 32, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, check) == 40, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, epoch) == 64, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, claimed) == 128, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, readers_) == 256, "layout");
_Static_assert(offsetof(struct shmobj__map_ctl, shards_) == 256 + 64 * SHMOBJ__MAP_READERS,
               "layout");
_Static_assert(sizeof(struct shmobj__map_ctl) == 82176, "layout");

/* An entry block's payload: header, then the key, padding to 16 bytes,
 * then the value (16-byte aligned, so an 8-byte value takes atomic
 * additions). The key follows the header so that a lookup's comparison
 * reads the lines right after the one it had to wait for. A table slot holds
 * the payload's offset / 16 (see SHMOBJ__MAP_SLOT_SHIFT); the block's
 * generation, needed to free it, is kept here. */
struct shmobj__map_entry {
    uint32_t key_len;   /* bytes of key */
    uint32_t value_len; /* bytes of value */
    uint64_t hash_gen;  /* hash64(key, seed) with bits 0..15 replaced by the
                           block's generation; overwritten by the limbo
                           link once the entry is retired */
};

/* Slot value of an entry: payload offset >> 4 (offsets are 16-aligned and
 * below 2^48, so values fit htcore's 44 bits). */
#define SHMOBJ__MAP_SLOT_SHIFT 4u
#define SHMOBJ__MAP_GEN_MASK UINT64_C(0xffff)

/* Offset of the value in an entry's payload, and the payload's size. */
static inline uint64_t shmobj__map_value_off(uint64_t key_len) /* <= UINT32_MAX */
{
    return SHMOBJ__MAP_ENTRY_HEADER + (((uint64_t)key_len + 15) & ~UINT64_C(15));
}
static inline uint64_t shmobj__map_entry_size(uint32_t key_len, uint32_t value_len)
{
    return shmobj__map_value_off(key_len) + value_len;
}
_Static_assert(sizeof(struct shmobj__map_entry) == SHMOBJ__MAP_ENTRY_HEADER,
               "layout");
_Static_assert(offsetof(struct shmobj__map_entry, value_len) == 4, "layout");
_Static_assert(offsetof(struct shmobj__map_entry, hash_gen) == SHMOBJ__MAP_LINK_OFF,
               "the limbo link overwrites hash_gen");

#endif /* SHMOBJ_MAP_LAYOUT_H */
