/*
 * shmobj_htcore.h - a freestanding open-addressing hash table core.
 *
 * Part of libshmobj, and meant to be copied alone into other projects
 * ("vendored"): this header and shmobj_htcore.c need only <stddef.h>,
 * <stdint.h> and <string.h> (and <emmintrin.h> where SSE2 is available,
 * unless SHMOBJ_HTCORE_NO_SSE2 is defined), compile as C99, allocate
 * nothing, keep no globals and take no locks. With GCC or Clang on x86-64
 * the hash's multiply is one line of inline assembly (the same result;
 * SHMOBJ_HTCORE_NO_ASM keeps it in C).
 *
 * The table lives entirely in memory the caller gives: size it with
 * shmobj_htcore_footprint(), build it with shmobj_htcore_init(). The bytes
 * hold only sizes, counters and indices (no pointers), so the same table
 * works on the heap, in a static array, in a file or in shared memory mapped
 * at different addresses. A small process-local handle (shmobj_htcore)
 * caches the validated layout; shmobj_htcore_attach() rebuilds one from
 * existing bytes and refuses damaged ones.
 *
 * Layout (all integers in the host's byte order; see doc/format-map.md):
 *
 *     offset 0   header, 64 bytes (magic "SHTC", version, sizes, seed,
 *                counters, a check value of the immutable fields)
 *     offset 64  slots / 16 groups, each 16 + 16 * stride bytes: the
 *                group's 16 control bytes (0x80 empty, 0xFE deleted,
 *                0x00..0x7F full with a 7-bit tag taken from the hash),
 *                then its 16 slots of `stride` bytes
 *
 * Keeping a group's control bytes beside its slots puts both on one page
 * and in neighbouring cache lines, so a lookup costs one page walk and
 * overlapping cache misses instead of two of each.
 *
 * Slots come in groups of 16; a lookup reads the 16 control bytes of a group
 * (SWAR, or SSE2 where available), compares keys only where the tag matches,
 * and stops at the first group holding an empty slot. Groups are probed
 * triangularly (0, 1, 3, 6, ... groups from the home group), which visits
 * every group of a power-of-two table. Deletion leaves a tombstone only when
 * the group has no empty slot (otherwise no probe can have passed through
 * it); tombstones are dropped when the caller rehashes into a new region.
 * The pieces of that probe (group match, candidate filter, probe sequence,
 * ref-slot words, header fields) are inline functions of this header, for
 * callers that walk a table themselves on a hot path; the core is built
 * from the same pieces.
 *
 * Two modes:
 *  - inline: entries are `key_size` key bytes followed by `value_size` value
 *    bytes, stored in the slot (the embedded case);
 *  - ref: an 8-byte slot holds a 44-bit value chosen by the caller that
 *    refers to an entry stored elsewhere (variable-length keys), and 20
 *    more bits of the entry's hash (bits 7..26; the control byte has bits
 *    0..6). Lookups compare those bits first and then call an equality
 *    callback with the value. With the bits in the slot, a rehash into a
 *    table of up to 2^20 groups (16 M slots) runs over the table alone,
 *    never touching the entries; bigger tables ask a hash callback. Small
 *    slots keep the table small enough to stay in cache.
 *
 * Vendoring switches (define before including this header and the .c file):
 *  - SHMOBJ_HTCORE_STATIC: every function becomes `static` (include the .c
 *    file into one translation unit of yours);
 *  - SHMOBJ_HTCORE_PREFIX=myproj_: every symbol becomes
 *    myproj_shmobj_htcore_..., so a vendored copy never clashes with an
 *    installed libshmobj.
 * Golden vectors in libshmobj's tests pin the hash function, the bytes of
 * a table built from fixed inputs and what the inline probe pieces read
 * from them, so copies stay byte-compatible.
 *
 * Concurrency: none inside. A caller that lets readers run beside a writer
 * (libshmobj's map does, under sequence counters) must validate what it read
 * afterwards; every index a function computes is masked into the table, and
 * every probe is bounded by the number of groups, so racing reads return
 * wrong answers, never out-of-bounds accesses or endless loops.
 */
#ifndef SHMOBJ_HTCORE_H
#define SHMOBJ_HTCORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- vendoring switches ------------------------------------------------- */

#if defined(SHMOBJ_HTCORE_STATIC)
#if defined(__GNUC__)
#define SHMOBJ_HTCORE_FN static __attribute__((unused))
#else
#define SHMOBJ_HTCORE_FN static
#endif
#else
#ifndef SHMOBJ_HTCORE_API
#define SHMOBJ_HTCORE_API
#endif
#define SHMOBJ_HTCORE_FN SHMOBJ_HTCORE_API
#endif

#if defined(SHMOBJ_HTCORE_PREFIX)
#define SHMOBJ_HTCORE_CAT_(a, b) a##b
#define SHMOBJ_HTCORE_CAT(a, b) SHMOBJ_HTCORE_CAT_(a, b)
#define SHMOBJ_HTCORE_NAME(n) SHMOBJ_HTCORE_CAT(SHMOBJ_HTCORE_PREFIX, n)
#define shmobj_htcore_hash64 SHMOBJ_HTCORE_NAME(shmobj_htcore_hash64)
#define shmobj_htcore_footprint SHMOBJ_HTCORE_NAME(shmobj_htcore_footprint)
#define shmobj_htcore_init SHMOBJ_HTCORE_NAME(shmobj_htcore_init)
#define shmobj_htcore_init_ref SHMOBJ_HTCORE_NAME(shmobj_htcore_init_ref)
#define shmobj_htcore_attach SHMOBJ_HTCORE_NAME(shmobj_htcore_attach)
#define shmobj_htcore_hash SHMOBJ_HTCORE_NAME(shmobj_htcore_hash)
#define shmobj_htcore_seed_mix SHMOBJ_HTCORE_NAME(shmobj_htcore_seed_mix)
#define shmobj_htcore_hash64_mixed SHMOBJ_HTCORE_NAME(shmobj_htcore_hash64_mixed)
#define shmobj_htcore_mum_ SHMOBJ_HTCORE_NAME(shmobj_htcore_mum_)
#define shmobj_htcore_mix_ SHMOBJ_HTCORE_NAME(shmobj_htcore_mix_)
#define shmobj_htcore_r64_ SHMOBJ_HTCORE_NAME(shmobj_htcore_r64_)
#define shmobj_htcore_r32_ SHMOBJ_HTCORE_NAME(shmobj_htcore_r32_)
#define shmobj_htcore_count SHMOBJ_HTCORE_NAME(shmobj_htcore_count)
#define shmobj_htcore_ctz SHMOBJ_HTCORE_NAME(shmobj_htcore_ctz)
#define shmobj_htcore_zero_bytes_ SHMOBJ_HTCORE_NAME(shmobj_htcore_zero_bytes_)
#define shmobj_htcore_gather_ SHMOBJ_HTCORE_NAME(shmobj_htcore_gather_)
#define shmobj_htcore_tag SHMOBJ_HTCORE_NAME(shmobj_htcore_tag)
#define shmobj_htcore_probe_home SHMOBJ_HTCORE_NAME(shmobj_htcore_probe_home)
#define shmobj_htcore_probe_next SHMOBJ_HTCORE_NAME(shmobj_htcore_probe_next)
#define shmobj_htcore_group_match SHMOBJ_HTCORE_NAME(shmobj_htcore_group_match)
#define shmobj_htcore_group_free SHMOBJ_HTCORE_NAME(shmobj_htcore_group_free)
#define shmobj_htcore_ref_word SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_word)
#define shmobj_htcore_ref_word_bits SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_word_bits)
#define shmobj_htcore_ref_word_matches SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_word_matches)
#define shmobj_htcore_ref_word_value SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_word_value)
#define shmobj_htcore_ref_candidates SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_candidates)
#define shmobj_htcore_header_slots SHMOBJ_HTCORE_NAME(shmobj_htcore_header_slots)
#define shmobj_htcore_header_tail SHMOBJ_HTCORE_NAME(shmobj_htcore_header_tail)
#define shmobj_htcore_find SHMOBJ_HTCORE_NAME(shmobj_htcore_find)
#define shmobj_htcore_put SHMOBJ_HTCORE_NAME(shmobj_htcore_put)
#define shmobj_htcore_get SHMOBJ_HTCORE_NAME(shmobj_htcore_get)
#define shmobj_htcore_del SHMOBJ_HTCORE_NAME(shmobj_htcore_del)
#define shmobj_htcore_entry SHMOBJ_HTCORE_NAME(shmobj_htcore_entry)
#define shmobj_htcore_ref_find SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_find)
#define shmobj_htcore_ref_group SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_group)
#define shmobj_htcore_ref_insert SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_insert)
#define shmobj_htcore_ref_find_free SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_find_free)
#define shmobj_htcore_ref_insert_at SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_insert_at)
#define shmobj_htcore_ref_value SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_value)
#define shmobj_htcore_ref_replace SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_replace)
#define shmobj_htcore_erase SHMOBJ_HTCORE_NAME(shmobj_htcore_erase)
#define shmobj_htcore_next SHMOBJ_HTCORE_NAME(shmobj_htcore_next)
#define shmobj_htcore_rehash SHMOBJ_HTCORE_NAME(shmobj_htcore_rehash)
#define shmobj_htcore_ref_rehash SHMOBJ_HTCORE_NAME(shmobj_htcore_ref_rehash)
#define shmobj_htcore_clear SHMOBJ_HTCORE_NAME(shmobj_htcore_clear)
#define shmobj_htcore_recount SHMOBJ_HTCORE_NAME(shmobj_htcore_recount)
#define shmobj_htcore_stats_get SHMOBJ_HTCORE_NAME(shmobj_htcore_stats_get)
#define shmobj_htcore_check SHMOBJ_HTCORE_NAME(shmobj_htcore_check)
#endif

/* ---- constants ---------------------------------------------------------- */

#define SHMOBJ_HTCORE_MAGIC 0x43544853u /* "SHTC" read as a little-endian u32 */
#define SHMOBJ_HTCORE_VERSION 1u
#define SHMOBJ_HTCORE_HEADER_SIZE 64u
#define SHMOBJ_HTCORE_GROUP 16u     /* slots per probe group */
#define SHMOBJ_HTCORE_MIN_SLOTS 16u /* one group */
/* Maximum load: full + deleted slots stay at or below 7/8 of the slots. */
#define SHMOBJ_HTCORE_LOAD_NUM 7u
#define SHMOBJ_HTCORE_LOAD_DEN 8u

#define SHMOBJ_HTCORE_CTRL_EMPTY 0x80u
#define SHMOBJ_HTCORE_CTRL_DELETED 0xFEu

/* Flags of the header (mode). */
#define SHMOBJ_HTCORE_FLAG_REF 1u
/* Bytes of a ref-mode slot: value << 20 | bits 7..26 of the hash. */
#define SHMOBJ_HTCORE_REF_SLOT 8u
/* Ref-mode values are below 2^44. */
#define SHMOBJ_HTCORE_REF_VALUE_BITS 44u
/* Ref-mode slot: value << SHMOBJ_HTCORE_REF_HASH_BITS | hash bits 7..26. */
#define SHMOBJ_HTCORE_REF_HASH_BITS 20u
/* Bytes of a ref-mode group: 16 control bytes, then 16 slots of 8 bytes. */
#define SHMOBJ_HTCORE_REF_GROUP_BYTES \
    (SHMOBJ_HTCORE_GROUP * (1u + SHMOBJ_HTCORE_REF_SLOT))
/* shmobj_htcore_ref_candidates() and shmobj_htcore_ref_group() result
 * bit: the group has an empty slot, where a probe sequence ends. */
#define SHMOBJ_HTCORE_GROUP_END 0x10000u

/* Status codes. Their values equal libshmobj's SHMOBJ_E* codes of the same
 * names, so the map passes them through unchanged. */
#define SHMOBJ_HTCORE_OK 0
#define SHMOBJ_HTCORE_EINVAL (-1)
#define SHMOBJ_HTCORE_ENOTFOUND (-3)
#define SHMOBJ_HTCORE_ECORRUPT (-5)
#define SHMOBJ_HTCORE_EVERSION (-6)
#define SHMOBJ_HTCORE_EFULL (-10)

/* ---- types --------------------------------------------------------------- */

/* The bytes at the start of a table. Every field is written by the one
 * writer the caller allows at a time; the core never reads them unchecked:
 * shmobj_htcore_attach() validates the immutable ones against `check`. */
typedef struct shmobj_htcore_header {
    uint32_t magic;       /* SHMOBJ_HTCORE_MAGIC */
    uint16_t version;     /* SHMOBJ_HTCORE_VERSION */
    uint16_t flags;       /* SHMOBJ_HTCORE_FLAG_REF or 0 */
    uint32_t key_size;    /* inline: key bytes per entry; ref: 0 */
    uint32_t value_size;  /* inline: value bytes per entry; ref: 8 */
    uint64_t seed;        /* seed of shmobj_htcore_hash() for this table */
    uint64_t slots;       /* number of slots, a power of two >= 16 */
    uint64_t count;       /* full slots (live entries) */
    uint64_t tombstones;  /* deleted slots */
    uint64_t growth_left; /* empty slots that may still be filled */
    uint32_t stride;      /* bytes per slot: key_size + value_size */
    uint32_t check;       /* hash of bytes 0..31 and stride: damage check */
} shmobj_htcore_header;

/* A process-local handle on a table: where it is, and its validated,
 * immutable shape. Holds pointers, so it is never stored in the table. */
typedef struct shmobj_htcore {
    shmobj_htcore_header *hdr; /* the table's first byte */
    unsigned char *groups;     /* first group */
    uint64_t group_bytes;      /* 16 + 16 * stride */
    uint64_t mask;             /* slots - 1 */
    uint64_t seed;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t stride;
    uint32_t flags;
} shmobj_htcore;

/* Ref mode: compare the key the caller looks for (in ctx) with the entry
 * that slot value `value` refers to. Return 1 when equal, 0 when not, or a
 * negative status to stop the lookup with it (e.g. the entry is damaged). */
typedef int (*shmobj_htcore_eq_fn)(void *ctx, uint64_t value);

/* Ref mode: the full hash of the entry that slot value `value` refers to,
 * for rehashing into tables of more than 2^20 groups and for
 * shmobj_htcore_check() to confirm the bits stored in the slot. 0 or a
 * negative status. */
typedef int (*shmobj_htcore_hash_fn)(void *ctx, uint64_t value,
                                     uint64_t *hash);

/* Statistics of shmobj_htcore_stats_get(). Probe length counts the groups a
 * lookup of a present key reads (1 = found in its home group). */
typedef struct shmobj_htcore_stats {
    uint64_t slots;
    uint64_t count;
    uint64_t tombstones;
    uint64_t growth_left;
    uint64_t probe_total;  /* sum of probe lengths over entries */
    uint64_t probe_max;    /* longest probe length */
    uint64_t bytes;        /* footprint */
} shmobj_htcore_stats;

/* ---- hashing ------------------------------------------------------------- */

/* The seeded 64-bit hash every table uses (wyhash-like: 128-bit multiply
 * and fold). Stable across versions of the format; pinned by tests. */
SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_hash64(const void *key, size_t len,
                                               uint64_t seed);

/* The same hash in two steps, inline, for a caller that hashes many keys
 * under one seed on a hot path:
 *     shmobj_htcore_hash64(key, len, seed) ==
 *         shmobj_htcore_hash64_mixed(key, len, shmobj_htcore_seed_mix(seed))
 * The helpers below are the hash's parts, not a separate interface. */
#define SHMOBJ_HTCORE_P0_ 0xa0761d6478bd642fULL
#define SHMOBJ_HTCORE_P1_ 0xe7037ed1a0b428dbULL
#define SHMOBJ_HTCORE_P2_ 0x8ebc6af09c88c6e3ULL
#define SHMOBJ_HTCORE_P3_ 0x589965cc75374cc3ULL

/* 64 x 64 -> 128-bit product, low half in *a, high half in *b. The portable
 * branch gives the same result as the __int128 one. */
static inline void shmobj_htcore_mum_(uint64_t *a, uint64_t *b)
{
#if defined(__SIZEOF_INT128__) && !defined(SHMOBJ_HTCORE_NO_INT128)
    __extension__ typedef unsigned __int128 u128;
    u128 r = (u128)*a * *b;
    *a = (uint64_t)r;
    *b = (uint64_t)(r >> 64);
#else
    uint64_t ha = *a >> 32, hb = *b >> 32;
    uint64_t la = (uint32_t)*a, lb = (uint32_t)*b;
    uint64_t rh = ha * hb, rm0 = ha * lb, rm1 = hb * la, rl = la * lb;
    uint64_t t = rl + (rm0 << 32), c = t < rl;
    uint64_t lo = t + (rm1 << 32);
    c += lo < t;
    *a = lo;
    *b = rh + (rm0 >> 32) + (rm1 >> 32) + c;
#endif
}

static inline uint64_t shmobj_htcore_mix_(uint64_t a, uint64_t b)
{
#if defined(__GNUC__) && defined(__x86_64__) && !defined(SHMOBJ_HTCORE_NO_ASM)
    /* one mulq, its halves folded at once: GCC keeps several live 128-bit
     * products in memory (eight stack moves in a 64-byte key's hash) */
    uint64_t hi;
    __asm__("mulq %3" : "=a"(a), "=d"(hi) : "0"(a), "rm"(b) : "cc");
    return a ^ hi;
#else
    shmobj_htcore_mum_(&a, &b);
    return a ^ b;
#endif
}

/* Little-endian reads byte by byte: the hash is the same on every host;
 * compilers turn these into single loads on little-endian machines. */
static inline uint64_t shmobj_htcore_r64_(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 |
           (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static inline uint64_t shmobj_htcore_r32_(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24;
}

static inline uint64_t shmobj_htcore_seed_mix(uint64_t seed)
{
    return seed ^ shmobj_htcore_mix_(seed ^ SHMOBJ_HTCORE_P0_, SHMOBJ_HTCORE_P1_);
}

static inline uint64_t shmobj_htcore_hash64_mixed(const void *key, size_t len,
                                                  uint64_t seed)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t a, b;
    if (len <= 16) {
        if (len >= 4) {
            size_t s = (len >> 3) << 2;
            a = (shmobj_htcore_r32_(p) << 32) | shmobj_htcore_r32_(p + s);
            b = (shmobj_htcore_r32_(p + len - 4) << 32) |
                shmobj_htcore_r32_(p + len - 4 - s);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) |
                p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else if (len > 48 && len <= 64) {
        /* what the loops below do for these lengths (one 48-byte round,
         * then the last 16 bytes), without their counters and branches */
        uint64_t s0 = shmobj_htcore_mix_(shmobj_htcore_r64_(p) ^ SHMOBJ_HTCORE_P1_,
                                         shmobj_htcore_r64_(p + 8) ^ seed);
        uint64_t s1 = shmobj_htcore_mix_(shmobj_htcore_r64_(p + 16) ^ SHMOBJ_HTCORE_P2_,
                                         shmobj_htcore_r64_(p + 24) ^ seed);
        uint64_t s2 = shmobj_htcore_mix_(shmobj_htcore_r64_(p + 32) ^ SHMOBJ_HTCORE_P3_,
                                         shmobj_htcore_r64_(p + 40) ^ seed);
        seed = s0 ^ s1 ^ s2;
        a = shmobj_htcore_r64_(p + len - 16);
        b = shmobj_htcore_r64_(p + len - 8);
    } else {
        size_t i = len;
        if (i > 48) {
            uint64_t s1 = seed, s2 = seed;
            do {
                seed = shmobj_htcore_mix_(shmobj_htcore_r64_(p) ^ SHMOBJ_HTCORE_P1_,
                                          shmobj_htcore_r64_(p + 8) ^ seed);
                s1 = shmobj_htcore_mix_(shmobj_htcore_r64_(p + 16) ^ SHMOBJ_HTCORE_P2_,
                                        shmobj_htcore_r64_(p + 24) ^ s1);
                s2 = shmobj_htcore_mix_(shmobj_htcore_r64_(p + 32) ^ SHMOBJ_HTCORE_P3_,
                                        shmobj_htcore_r64_(p + 40) ^ s2);
                p += 48;
                i -= 48;
            } while (i > 48);
            seed ^= s1 ^ s2;
        }
        while (i > 16) {
            seed = shmobj_htcore_mix_(shmobj_htcore_r64_(p) ^ SHMOBJ_HTCORE_P1_,
                                      shmobj_htcore_r64_(p + 8) ^ seed);
            i -= 16;
            p += 16;
        }
        /* the last 16 bytes of the key (len > 16, so p + i - 16 is inside) */
        a = shmobj_htcore_r64_(p + i - 16);
        b = shmobj_htcore_r64_(p + i - 8);
    }
    a ^= SHMOBJ_HTCORE_P1_;
    b ^= seed;
    shmobj_htcore_mum_(&a, &b);
    return shmobj_htcore_mix_(a ^ SHMOBJ_HTCORE_P0_ ^ (uint64_t)len,
                              b ^ SHMOBJ_HTCORE_P1_);
}

/* The hash of a key with this table's seed. */
SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_hash(const shmobj_htcore *t,
                                             const void *key, size_t len);

/* ---- the probe, inline -------------------------------------------------- */

/* The pieces of a lookup, for a caller that walks a table itself on a hot
 * path (libshmobj's map reads its shared ref tables this way, with no call
 * per group or per candidate). The core's own functions are built from the
 * same pieces, so a caller reads exactly what the core writes, and the
 * golden vectors of libshmobj's tests pin them: a change of layout fails a
 * test. They read the bytes they are given and check nothing: a caller
 * racing a writer validates afterwards. */

/* Index of the lowest set bit of m (m != 0). */
static inline unsigned shmobj_htcore_ctz(uint32_t m)
{
#if defined(__GNUC__)
    return (unsigned)__builtin_ctz(m);
#else
    unsigned n = 0;
    while (!(m & 1u)) {
        m >>= 1;
        n++;
    }
    return n;
#endif
}

/* The control byte of a full slot holding hash: its low 7 bits. */
static inline unsigned char shmobj_htcore_tag(uint64_t hash)
{
    return (unsigned char)(hash & 0x7f);
}

/* The probe sequence of hash in a table of gmask + 1 groups (a power of
 * two, gmask = slots / SHMOBJ_HTCORE_GROUP - 1): the home group, then
 * after the step-th group visited (from 0) the next one, triangular
 * (home + i(i+1)/2), which visits every group once in gmask + 1 steps. */
static inline uint64_t shmobj_htcore_probe_home(uint64_t hash, uint64_t gmask)
{
    return (hash >> 7) & gmask;
}

static inline uint64_t shmobj_htcore_probe_next(uint64_t g, uint64_t step,
                                                uint64_t gmask)
{
    return (g + step + 1) & gmask;
}

#if defined(__SSE2__) && !defined(SHMOBJ_HTCORE_NO_SSE2)
#define SHMOBJ_HTCORE_SSE2_ 1
#include <emmintrin.h>
#else
/* 0x80 in every byte of w that is zero, exactly (no borrow across
 * bytes). */
static inline uint64_t shmobj_htcore_zero_bytes_(uint64_t w)
{
    const uint64_t lo7 = 0x7f7f7f7f7f7f7f7fULL;
    return ~(((w & lo7) + lo7) | w | lo7);
}
/* The top bit of each byte of m gathered into 8 bits, byte i -> bit i. */
static inline uint32_t shmobj_htcore_gather_(uint64_t m)
{
    return (uint32_t)((((m >> 7) & 0x0101010101010101ULL) *
                       0x0102040810204080ULL) >> 56);
}
#endif

/* The 16 control bytes at ctrl: the result has bit j set when byte j is
 * tag, *empty when byte j is SHMOBJ_HTCORE_CTRL_EMPTY. Exact (no false
 * positives), the same with and without SSE2. */
static inline uint32_t shmobj_htcore_group_match(const unsigned char *ctrl,
                                                 unsigned char tag,
                                                 uint32_t *empty)
{
#if defined(SHMOBJ_HTCORE_SSE2_)
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)ctrl);
    *empty = (uint32_t)_mm_movemask_epi8(
        _mm_cmpeq_epi8(c, _mm_set1_epi8((char)SHMOBJ_HTCORE_CTRL_EMPTY)));
    /* the tag in every byte by a multiply and a shuffle of dwords (three
     * instructions; a byte broadcast in SSE2 takes five) */
    __m128i t = _mm_set1_epi32((int)(0x01010101u * tag));
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(c, t));
#else
    const uint64_t pt = 0x0101010101010101ULL * tag;
    const uint64_t pe = 0x0101010101010101ULL * SHMOBJ_HTCORE_CTRL_EMPTY;
    uint64_t lo = shmobj_htcore_r64_(ctrl), hi = shmobj_htcore_r64_(ctrl + 8);
    *empty = shmobj_htcore_gather_(shmobj_htcore_zero_bytes_(lo ^ pe)) |
             shmobj_htcore_gather_(shmobj_htcore_zero_bytes_(hi ^ pe)) << 8;
    return shmobj_htcore_gather_(shmobj_htcore_zero_bytes_(lo ^ pt)) |
           shmobj_htcore_gather_(shmobj_htcore_zero_bytes_(hi ^ pt)) << 8;
#endif
}

/* Bit j set when control byte j is free (empty or deleted: top bit set). */
static inline uint32_t shmobj_htcore_group_free(const unsigned char *ctrl)
{
#if defined(SHMOBJ_HTCORE_SSE2_)
    return (uint32_t)_mm_movemask_epi8(
        _mm_loadu_si128((const __m128i *)(const void *)ctrl));
#else
    const uint64_t hi1 = 0x8080808080808080ULL;
    return shmobj_htcore_gather_(shmobj_htcore_r64_(ctrl) & hi1) |
           shmobj_htcore_gather_(shmobj_htcore_r64_(ctrl + 8) & hi1) << 8;
#endif
}

/* Slot j of the ref-mode group at group (16 control bytes, then 16 slots of
 * SHMOBJ_HTCORE_REF_SLOT bytes, SHMOBJ_HTCORE_REF_GROUP_BYTES in all): the
 * slot's 8 bytes in host order, value << SHMOBJ_HTCORE_REF_HASH_BITS |
 * hash bits 7..26. */
static inline uint64_t shmobj_htcore_ref_word(const unsigned char *group,
                                              unsigned j)
{
    uint64_t w;
    memcpy(&w, group + SHMOBJ_HTCORE_GROUP + (size_t)j * SHMOBJ_HTCORE_REF_SLOT,
           sizeof w);
    return w;
}

/* The hash bits a ref slot of hash stores. */
static inline uint64_t shmobj_htcore_ref_word_bits(uint64_t hash)
{
    return (hash >> 7) & ((UINT64_C(1) << SHMOBJ_HTCORE_REF_HASH_BITS) - 1);
}

/* Whether ref slot word w may hold hash: its stored hash bits agree. */
static inline int shmobj_htcore_ref_word_matches(uint64_t w, uint64_t hash)
{
    return ((w ^ (hash >> 7)) & ((UINT64_C(1) << SHMOBJ_HTCORE_REF_HASH_BITS) - 1)) == 0;
}

/* The caller's value in ref slot word w. */
static inline uint64_t shmobj_htcore_ref_word_value(uint64_t w)
{
    return w >> SHMOBJ_HTCORE_REF_HASH_BITS;
}

/* The candidates of the ref-mode group at group for hash: bit j for each
 * slot whose tag and stored hash bits match, plus SHMOBJ_HTCORE_GROUP_END
 * when the group has an empty slot (the probe of hash ends here). */
static inline uint32_t shmobj_htcore_ref_candidates(const unsigned char *group,
                                                    uint64_t hash)
{
    uint32_t empty, out = 0;
    uint32_t tags = shmobj_htcore_group_match(group, shmobj_htcore_tag(hash), &empty);
    for (; tags != 0; tags &= tags - 1) {
        unsigned j = shmobj_htcore_ctz(tags);
        if (shmobj_htcore_ref_word_matches(shmobj_htcore_ref_word(group, j), hash))
            out |= 1u << j;
    }
    return empty != 0 ? out | SHMOBJ_HTCORE_GROUP_END : out;
}

/* Header fields read from a table's first byte, for a caller that caches a
 * validated table's shape and checks it is unchanged: the slot count, and
 * the header's last 8 bytes (stride, then check) as one word, which a
 * change of either field changes. */
static inline uint64_t shmobj_htcore_header_slots(const unsigned char *table)
{
    uint64_t v;
    memcpy(&v, table + offsetof(shmobj_htcore_header, slots), sizeof v);
    return v;
}

static inline uint64_t shmobj_htcore_header_tail(const unsigned char *table)
{
    uint64_t v;
    memcpy(&v, table + offsetof(shmobj_htcore_header, stride), sizeof v);
    return v;
}

/* The offsets doc/format-map.md gives, checked at compile time (C99 has no
 * _Static_assert: a negative array size fails). */
typedef char shmobj_htcore_header_layout_[
    (sizeof(shmobj_htcore_header) == SHMOBJ_HTCORE_HEADER_SIZE &&
     offsetof(shmobj_htcore_header, slots) == 24 &&
     offsetof(shmobj_htcore_header, stride) == 56 &&
     offsetof(shmobj_htcore_header, check) == 60) ? 1 : -1];

/* ---- construction --------------------------------------------------------- */

/* Bytes a table needs to hold `capacity` entries of `entry_size` bytes
 * (key_size + value_size inline, SHMOBJ_HTCORE_REF_SLOT in ref mode) at the maximum load: the
 * header, then the smallest power-of-two number of slots (16 at least)
 * whose 7/8 reach capacity. Returns 0 when entry_size is 0 or the size
 * would overflow. */
SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_footprint(uint64_t capacity,
                                                  uint32_t entry_size);

/* Build an empty inline table in mem (mem_size bytes, 8-byte aligned, at
 * least the footprint) and fill the handle t. */
SHMOBJ_HTCORE_FN int shmobj_htcore_init(shmobj_htcore *t, void *mem,
                                        uint64_t mem_size, uint64_t capacity,
                                        uint32_t key_size,
                                        uint32_t value_size, uint64_t seed);

/* Build an empty ref-mode table (slots of a 64-bit value and its hash). */
SHMOBJ_HTCORE_FN int shmobj_htcore_init_ref(shmobj_htcore *t, void *mem,
                                            uint64_t mem_size,
                                            uint64_t capacity, uint64_t seed);

/* Fill a handle for an existing table at mem: checks magic, version, the
 * check value of the immutable fields and that the footprint fits in
 * mem_size. SHMOBJ_HTCORE_EVERSION / SHMOBJ_HTCORE_ECORRUPT otherwise. */
SHMOBJ_HTCORE_FN int shmobj_htcore_attach(shmobj_htcore *t, void *mem,
                                          uint64_t mem_size);

/* Live entries. */
SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_count(const shmobj_htcore *t);

/* ---- inline mode ------------------------------------------------------------ */

/* Index of the entry whose key equals key (key_size bytes), or ENOTFOUND. */
SHMOBJ_HTCORE_FN int shmobj_htcore_find(const shmobj_htcore *t,
                                        const void *key, uint64_t *index);

/* Insert or overwrite. EFULL when a new key finds no room at the maximum
 * load: rehash into a bigger table. */
SHMOBJ_HTCORE_FN int shmobj_htcore_put(shmobj_htcore *t, const void *key,
                                       const void *value);

/* Copy the value of key out (value_size bytes), or ENOTFOUND. */
SHMOBJ_HTCORE_FN int shmobj_htcore_get(const shmobj_htcore *t,
                                       const void *key, void *value);

/* Remove key, or ENOTFOUND. */
SHMOBJ_HTCORE_FN int shmobj_htcore_del(shmobj_htcore *t, const void *key);

/* Address of the entry at index (key bytes, then value bytes); index must
 * come from find/next of this table. */
SHMOBJ_HTCORE_FN void *shmobj_htcore_entry(const shmobj_htcore *t,
                                           uint64_t index);

/* Copy every entry of src into dst (an empty inline table of the same key
 * and value sizes, any seed, room for src's entries): growth, or shrinking
 * away tombstones. EFULL when dst is too small. */
SHMOBJ_HTCORE_FN int shmobj_htcore_rehash(shmobj_htcore *dst,
                                          const shmobj_htcore *src);

/* ---- ref mode --------------------------------------------------------------- */

/* Find the slot whose value eq() accepts among those whose stored hash
 * bits match hash. 0 with *index set, ENOTFOUND, or eq()'s negative
 * status. */
SHMOBJ_HTCORE_FN int shmobj_htcore_ref_find(const shmobj_htcore *t,
                                            uint64_t hash,
                                            shmobj_htcore_eq_fn eq, void *ctx,
                                            uint64_t *index);

/* shmobj_htcore_ref_find() that also notes, in *free_index, the slot where
 * an insert of hash would go (what shmobj_htcore_ref_insert() would pick),
 * or UINT64_MAX when the probe met none: an insert-or-replace then probes
 * once. Fill the slot with shmobj_htcore_ref_insert_at() before any other
 * change of the table. */
SHMOBJ_HTCORE_FN int shmobj_htcore_ref_find_free(const shmobj_htcore *t,
                                                 uint64_t hash,
                                                 shmobj_htcore_eq_fn eq,
                                                 void *ctx, uint64_t *index,
                                                 uint64_t *free_index);

/* shmobj_htcore_ref_candidates() of group g (taken modulo the number of
 * groups) of a ref table, for a caller that holds a handle rather than a
 * group's address; 0 for inline tables. */
SHMOBJ_HTCORE_FN uint32_t shmobj_htcore_ref_group(const shmobj_htcore *t,
                                                  uint64_t g, uint64_t hash);

/* Insert value (below 2^44, else EINVAL) under hash; the caller has made
 * sure no equal entry exists. The slot is written before its control byte.
 * EFULL when full. */
SHMOBJ_HTCORE_FN int shmobj_htcore_ref_insert(shmobj_htcore *t, uint64_t hash,
                                              uint64_t value, uint64_t *index);

/* Insert value under hash into the free slot at index, which
 * shmobj_htcore_ref_find_free() gave for this hash with no change of the
 * table since. EINVAL when the slot is not free (or value is 2^44 or
 * more), EFULL when it is empty and the table may not fill another empty
 * slot (grow first). */
SHMOBJ_HTCORE_FN int shmobj_htcore_ref_insert_at(shmobj_htcore *t,
                                                 uint64_t index, uint64_t hash,
                                                 uint64_t value);

/* The slot value at index. */
SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_ref_value(const shmobj_htcore *t,
                                                  uint64_t index);

/* Overwrite the slot value at index (same key, so same hash; new entry;
 * below 2^44). */
SHMOBJ_HTCORE_FN void shmobj_htcore_ref_replace(shmobj_htcore *t,
                                                uint64_t index,
                                                uint64_t value);

/* Copy every slot of src into dst (an empty ref table with room for
 * them). Slots are placed by their stored hash bits while dst has at most
 * 2^20 groups; beyond that hash_fn gives each entry's hash (NULL: EINVAL).
 * EFULL when dst is too small. */
SHMOBJ_HTCORE_FN int shmobj_htcore_ref_rehash(shmobj_htcore *dst,
                                              const shmobj_htcore *src,
                                              shmobj_htcore_hash_fn hash_fn,
                                              void *ctx);

/* ---- both modes ---------------------------------------------------------- */

/* Remove the entry at index (a full slot). */
SHMOBJ_HTCORE_FN void shmobj_htcore_erase(shmobj_htcore *t, uint64_t index);

/* Iteration in slot order: the first full slot at or after *index; 0 with
 * *index set, or ENOTFOUND past the end. Start at 0, continue at index+1. */
SHMOBJ_HTCORE_FN int shmobj_htcore_next(const shmobj_htcore *t,
                                        uint64_t *index);

/* Remove every entry. */
SHMOBJ_HTCORE_FN void shmobj_htcore_clear(shmobj_htcore *t);

/* Recompute count, tombstones and growth_left from the control bytes (crash
 * recovery: a writer died between a control byte and a counter). */
SHMOBJ_HTCORE_FN void shmobj_htcore_recount(shmobj_htcore *t);

/* Statistics, probe lengths included (a walk of the whole table; in ref
 * mode only up to 2^20 groups, else probe lengths are left 0). */
SHMOBJ_HTCORE_FN void shmobj_htcore_stats_get(const shmobj_htcore *t,
                                              shmobj_htcore_stats *out);

/* Full consistency check: counters agree with the control bytes, and every
 * entry's tag matches its hash and is reachable from its home group. In ref
 * mode, hash_fn (NULL: trust the stored bits, up to 2^20 groups) gives
 * each entry's hash, which must agree with the slot's bits. 0 or ECORRUPT
 * (or hash_fn's status). */
SHMOBJ_HTCORE_FN int shmobj_htcore_check(const shmobj_htcore *t,
                                         shmobj_htcore_hash_fn hash_fn,
                                         void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_HTCORE_H */
