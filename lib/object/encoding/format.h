/* The encoding room of the object layer (lib/object/encoding/): the bytes
 * of slots, blocks and control blocks, the one index probe
 * (index-probe.h) and the checks of content (content-check.h). It sees no
 * other room; every other room reads the bytes through it
 * (doc/architecture.md, "The object layer's rooms").
 *
 * The bytes of a typed object in a segment (doc/format-object.md is the
 * normative description; this header and that file must agree).
 *
 * This header holds the layout, its constants and the hashes the format is
 * laid out by, and nothing else: no function of the layer is declared here
 * (lib/object/read/layer-interface.h declares those), so a change of the code never
 * touches the description of the bytes, and a file that only needs the
 * bytes (the checker's layout, a test pinning a hash) includes only them.
 *
 * An object block is one arena block:
 *
 *     [tree header 16 B][root slot 16 B][heap objects, 16-aligned ...]
 *
 * A value slot is 16 bytes: a tag fixed at creation and a 64-bit payload.
 * Scalar slots (bool, int64, uint64, double) hold their value inline and are
 * the only bytes of an object that change after it is written, through C11
 * atomics. An OBJ slot holds a reference (48-bit offset + 16-bit generation,
 * see space.h) to a heap object, or 0 for null:
 *   - inside the block that holds the slot: the offset of the object header
 *     and that block's generation (written in one pass with the block);
 *   - anywhere else: the reference of a separate object block (allocated when
 *     an item was replaced), whose root slot names the object.
 * Readers tell the two apart by the offset alone: blocks never overlap.
 *
 * Nothing here is trusted by a reader: every tag, count, length and offset
 * is checked against the extent of the block it was found in before use. */
#ifndef SHMOBJ_OBJECT_FORMAT_H
#define SHMOBJ_OBJECT_FORMAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "mix.h"
#include "shmobj/object.h"

#define SHMOBJ__TREE_MAGIC UINT32_C(0x4a424f53) /* "SOBJ" read little-endian */
/* Version 2 added medium string keys (SHMOBJ__SLOT_MSTR); a version 1
 * object is a version 2 object that holds none. Version 3 writes a record
 * that is its block's value into the tree header itself (ROOTREC:
 * shmobj__tree_rootrec) and a packed tuple below the root with its header
 * in its slot (SHMOBJ__SLOT_PTUP_MARK): 32 bytes less for a record alone
 * holding a tuple of strings. Readers take 1 to 3, writers write 3. */
#define SHMOBJ__TREE_VERSION 3
#define SHMOBJ__TREE_VERSION_MIN 1

/* Is v a version of the tree header readers take? */
static inline int shmobj__tree_version_ok(uint16_t v)
{
    return v >= SHMOBJ__TREE_VERSION_MIN && v <= SHMOBJ__TREE_VERSION;
}

/* Start of every object block. Written once by the builder before the
 * block's reference is published; never changed afterwards. */
struct shmobj__tree {
    uint32_t magic;    /* SHMOBJ__TREE_MAGIC; identifies an object block */
    uint16_t version;  /* SHMOBJ__TREE_VERSION */
    /* SHMOBJ__TREE_SEPARATE once a slot of this block has been given a
     * block of its own (shmobj_view_set); set with an atomic OR (release)
     * before the slot is published, never cleared. Lets a free skip the
     * walk of trees that were never changed. */
    _Atomic uint16_t flags;
    uint64_t size;     /* bytes written by the builder, this header included;
                        * <= the block's usable size. Readers take it as the
                        * block's extent. Version 3 with ROOTREC: the
                        * reference of the record's shape instead
                        * (shmobj__tree_rootrec). */
};
_Static_assert(sizeof(struct shmobj__tree) == 16, "tree header is 16 bytes");

#define SHMOBJ__TREE_SEPARATE 0x0001

/* Slot tags. Fixed at creation: an OBJ slot stays an OBJ slot, an INT slot
 * an INT slot, so a reader never sees a tag and a payload of different
 * kinds. Null is an OBJ slot with payload 0, so it may later receive an
 * object. */
enum shmobj__slot_tag {
    SHMOBJ__SLOT_BOOL = SHMOBJ_TYPE_BOOL,
    SHMOBJ__SLOT_INT = SHMOBJ_TYPE_INT,
    SHMOBJ__SLOT_UINT = SHMOBJ_TYPE_UINT,
    SHMOBJ__SLOT_DOUBLE = SHMOBJ_TYPE_DOUBLE,
    SHMOBJ__SLOT_OBJ = 0x40,
    /* A short string key (dict key, set member, field name) of at most 7
     * bytes held in the slot itself: reserved0 is its length, the payload
     * its bytes, NUL-padded. Saves a lookup one dependent load. Only in key
     * positions, which never change. */
    SHMOBJ__SLOT_SSTR = 0x41
};

#define SHMOBJ__SSTR_MAX 7

/* Version 3: an OBJ slot below a block's root whose reserved0 is this
 * (SHMOBJ_TYPE_TUPLE) and whose payload lies in the slot's own block holds
 * a packed tuple (SHMOBJ__OBJ_PACKED) without a header: reserved1 is its
 * count (1..65535), reserved2 its body's bytes (count..2^32 - 1), and the
 * payload the reference of the body itself (unaligned, this block's
 * generation). Written once with the block; a replacement later stores a
 * separate block's reference (or 0) in the payload and leaves the slot's
 * first word alone, so the mark counts only while the payload is inline
 * (replacements never are). */
#define SHMOBJ__SLOT_PTUP_MARK SHMOBJ_TYPE_TUPLE
#define SHMOBJ__PTUP_MAX_COUNT UINT32_C(0xffff)

/* A medium string key (format version 2): a str key of 8..14 bytes whose
 * last byte is not NUL, held in the slot itself: the tag at byte 0, the
 * key's bytes from byte 1, NUL-padded, so byte 15 is always 0 and a NUL
 * follows the bytes inside the slot. Its length is where its last
 * non-zero byte lies (payload != 0, its top byte 0). Like a short key: key
 * positions of fixed containers and shapes only, never changed. A lookup
 * compares two words, and the builder writes no str object for it. */
#define SHMOBJ__SLOT_MSTR 0x44
#define SHMOBJ__MSTR_MIN 8
#define SHMOBJ__MSTR_MAX 14

/* Is the str of n bytes at s one a writer holds as a medium key? */
static inline int shmobj__mstr_fits(const uint8_t *s, uint64_t n)
{
    return n >= SHMOBJ__MSTR_MIN && n <= SHMOBJ__MSTR_MAX && s[n - 1] != 0;
}

/* The two words of the medium key slot of the n bytes at s (n 8..14):
 * bytes 0..7 (the tag and s[0..6]) and bytes 8..15 (s[7..n-1], then
 * zeros), as little-endian loads of the slot read them. */
static inline uint64_t shmobj__mstr_w0(const uint8_t *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return SHMOBJ__SLOT_MSTR | w << 8;
}

static inline uint64_t shmobj__mstr_w1(const uint8_t *s, uint64_t n)
{
    uint64_t w;
    memcpy(&w, s + n - 8, 8);
    return w >> (8 * (15 - n));
}

/* The length of the medium key whose slot's payload (bytes 8..15) is w1,
 * or 0 when w1 is no medium key's (all zero, or byte 15 set). */
static inline uint64_t shmobj__mstr_len(uint64_t w1)
{
    if (w1 == 0 || (w1 >> 56) != 0)
        return 0;
    return SHMOBJ__MSTR_MIN + (uint64_t)(63 - __builtin_clzll(w1)) / 8;
}

/* A value slot, 16 bytes, 16-aligned. */
struct shmobj__slot {
    uint8_t tag;        /* enum shmobj__slot_tag; written once by the builder */
    uint8_t reserved0;  /* 0; SSTR: the string's length */
    uint16_t reserved1; /* 0 */
    uint32_t reserved2; /* 0 */
    /* Scalar: the value (double as its IEEE bits, bool 0/1). OBJ: a
     * reference or 0. Loads acquire and stores release, so a reader that
     * sees a new reference also sees the object written before it; RMW
     * operations are acq_rel. */
    _Atomic uint64_t payload;
};
_Static_assert(sizeof(struct shmobj__slot) == 16, "value slot is 16 bytes");
_Static_assert(offsetof(struct shmobj__slot, payload) == 8, "payload at 8");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
               "64-bit atomics must be lock-free to work across processes");

/* Header of every heap object, 16 bytes, 16-aligned. Written once. */
struct shmobj__obj {
    uint8_t tag;    /* enum shmobj_type: STR..STRUCT */
    uint8_t flags;  /* SHMOBJ__OBJ_NAMES for a struct with field names */
    uint8_t dtype;  /* buffer: enum shmobj_dtype; else 0 */
    uint8_t ndim;   /* buffer: 0..SHMOBJ_BUFFER_MAXDIM; else 0 */
    uint32_t count; /* containers: items (dict: pairs); else 0 */
    uint64_t len;   /* str/bytes: bytes without the NUL; buffer: data bytes;
                     * dict/set/named struct: index capacity (power of two);
                     * list/tuple/unnamed struct: 0 */
};
_Static_assert(sizeof(struct shmobj__obj) == 16, "object header is 16 bytes");

#define SHMOBJ__OBJ_NAMES 0x01
/* A tuple of strings packed (format version 2): no slots, the body is
 * each item's bytes and a NUL after them, back to back (len bytes in all,
 * count items, count >= 1). Written for every tuple whose items are all
 * strings without a NUL inside; tuples are immutable, so nothing but the
 * bytes is lost: an item is found by walking the NULs before it. */
#define SHMOBJ__OBJ_PACKED 0x02

/* Alignment of buffer data in the segment (a cache line). */
#define SHMOBJ__DATA_ALIGN 64

/* A buffer's header is followed by this, then shape[ndim] (uint64) and
 * strides[ndim] (int64, bytes, >= 0); the data starts data_rel bytes after
 * the object header, 64-aligned in the segment. */
struct shmobj__bufhdr {
    uint64_t data_rel; /* offset of the data from the object header */
    uint64_t reserved; /* 0 */
};
_Static_assert(sizeof(struct shmobj__bufhdr) == 16, "buffer header");

/* Layout of the body after the header (slots 16 B, index entries 8 B):
 *   list, tuple:  slots[count]
 *   dict:         index[len], then count pairs (key slot, value slot): a
 *                 lookup touches the index and one 32-byte pair
 *   set:          keys[count], index[len]
 *   struct:       values[count] (+ names[count], index[len] if NAMES)
 * Index entry: 0 empty, else (item + 1) | (hash >> 32) << 32. Keys are INT
 * slots, SSTR slots (strings of up to 7 bytes), MSTR slots (8..14 bytes,
 * version 2), or OBJ slots naming STR or BYTES objects in the same block. */

#define SHMOBJ__PREFIX (sizeof(struct shmobj__tree) + sizeof(struct shmobj__slot))

/* Offset of value slot i of a container from its header (cap: index
 * capacity, the header's len). */
static inline uint64_t shmobj__value_rel(unsigned type, uint64_t cap, uint64_t i)
{
    return type == SHMOBJ_TYPE_DICT ? 16 + 8 * cap + 32 * i + 16 : 16 + 16 * i;
}

/* Index entry e: 0 empty, else (item + 1) | (hash >> 32) << 32, the high
 * half of the key's hash kept so that most probes of other keys are told
 * apart without reading their slots. Probes start at hash & (len - 1) and
 * step by one (lib/object/encoding/index-probe.h walks them). */
static inline uint64_t shmobj__index_entry(uint64_t item, uint64_t hash)
{
    return (item + 1) | (hash >> 32 << 32);
}

/* ---- references, shapes and records (doc/format-object.md, "Shapes,
 * records and reference slots") ------------------------------------------
 *
 * A LINK slot holds the reference of another object block (a weak
 * reference: its generation tells a reader the target was freed); an
 * adopted object is an OBJ slot naming a separate block, as a replaced
 * item is. A record is a heap object (tag SHMOBJ_TYPE_RECORD) whose header
 * names its shape block in `len` and whose body is count slots; its
 * strings and bytes are ISTR slots whose bytes follow in the same block.
 * A record that is the value of its block is written in place of the
 * root slot (tag SHMOBJ_TYPE_RECORD at block offset 16), saving 16 bytes.
 * A shape is the object of a block of its own: header (count fields, len
 * the index capacity), the use count, count field descriptors, count
 * names (key slots) and the index of the names. */
#define SHMOBJ__SLOT_LINK 0x42   /* payload: a reference, never 0 */
#define SHMOBJ__SLOT_ISTR 0x43   /* reserved0: STR or BYTES, reserved2: the
                                  * length, payload: the block-relative offset
                                  * of the bytes, which a NUL follows */
#define SHMOBJ__SLOT_RECORD SHMOBJ_TYPE_RECORD /* root slot only: the record
                                                * header itself */

/* More tree header flags (set before the block's reference is published,
 * never cleared, except ADOPTED by a put that failed). */
#define SHMOBJ__TREE_RECORDS 0x0002 /* holds records: a free walks it to give
                                     * their shapes' uses back */
#define SHMOBJ__TREE_ADOPTED 0x0004 /* owned by the container that adopted
                                     * it (set by an atomic OR) */
#define SHMOBJ__TREE_SHAPE 0x0008   /* the block's value is a shape */
#define SHMOBJ__TREE_ROOTREC 0x0010 /* the block's value is a record (a free
                                     * gives its use back without a walk
                                     * when no other flag asks for one) */

/* Version 3: a block whose tree header has the ROOTREC flag (below) holds
 * a record in place of the header's size and the root slot: `size` is the
 * reference of the record's shape, the record's count is the shape's, its
 * slots start at 16, and the block's extent is the arena's usable size of
 * the block (shmobj__tree_open). So a record alone costs 16 bytes of
 * header, not 32. Blocks of versions 1 and 2 keep the record at 16. */
static inline int shmobj__tree_rootrec(uint16_t version, uint16_t flags)
{
    return version >= 3 && (flags & SHMOBJ__TREE_ROOTREC) != 0;
}

/* Most fields of a shape. */
#define SHMOBJ__SHAPE_MAX 65535
/* A shape's index capacity is a power of two from shmobj__index_cap(count)
 * to this many times it (grown by the writer to spread the names). */
#define SHMOBJ__SHAPE_CAP_GROWTH 16

/* The word after a shape's header. */
struct shmobj__shape_meta {
    /* Records that name the shape: +1 (acq_rel) before a record is
     * written, -1 when it goes; CLOSING set by the one compare-and-swap
     * from 0 that starts the shape's free, after which no use is taken. */
    _Atomic uint64_t uses;
    uint64_t reserved; /* 0 */
};
_Static_assert(sizeof(struct shmobj__shape_meta) == 16, "shape meta is 16 bytes");
#define SHMOBJ__SHAPE_CLOSING (UINT64_C(1) << 63)

/* A field descriptor of a shape, 16 bytes. Written once. */
struct shmobj__field {
    uint8_t kind;       /* BOOL, INT, UINT, DOUBLE, STR, BYTES, LINK, or
                         * NULL for an OBJ slot (any object or null) */
    uint8_t reserved0;  /* 0 */
    uint16_t reserved1; /* 0 */
    uint32_t cap;       /* STR, BYTES: most bytes, 0 for any; else 0 */
    uint64_t c_off;     /* offset in the publisher's C struct
                         * (shmobj_record_put_struct); not read by readers */
};
_Static_assert(sizeof(struct shmobj__field) == 16, "field descriptor is 16 bytes");
_Static_assert(offsetof(struct shmobj__field, cap) == 4, "field cap at 4");

/* Is kind (with capacity cap) a kind a shape's field may have? */
static inline int shmobj__field_ok(unsigned kind, uint64_t cap)
{
    switch (kind) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        return cap < UINT32_MAX;
    case SHMOBJ_TYPE_NULL:
    case SHMOBJ_TYPE_BOOL:
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
    case SHMOBJ_TYPE_LINK:
        return cap == 0;
    default:
        return 0;
    }
}

/* Offsets from a shape's header: the use count, descriptors, names,
 * index (n fields). */
#define SHMOBJ__SHAPE_META 16
static inline uint64_t shmobj__shape_descs(void) { return 32; }
static inline uint64_t shmobj__shape_names(uint64_t n) { return 32 + 16 * n; }
static inline uint64_t shmobj__shape_index(uint64_t n) { return 32 + 32 * n; }

/* ---- the format's hashes ------------------------------------------------
 * Deterministic (the same in every process: no seed), because every
 * reader probes an index another process laid out. The kinds of key hash
 * differently so "a" and b"a" never compare equal. Part of the format:
 * changing either changes where keys sit in every dict, set and named
 * struct already written, so they change only with SHMOBJ__TREE_VERSION.
 *
 * Why these and not the library's other hashes: an int key is mixed by
 * lib/common/mix.h's shmobj__mix64 (the one integer mixer of the library,
 * also the arena's fingerprints), so there is no integer hash of this
 * layer's own. Strings need a hash of bytes, and the library's other one,
 * htcore's seeded shmobj_htcore_hash64, is outside what this layer may see
 * (lib/htcore is a separate, vendorable unit with no dependencies, and its
 * hash is pinned by htcore's own golden tests for htcore's tables), differs
 * in its reads of 4..16-byte keys, and takes a seed the format has none
 * of; the header's FNV-1a (lib/segment) is a checksum, too slow per byte
 * for lookups. So shmobj__hash_mem is the object format's own: the wyhash
 * mixer tuned for the short keys of records (one or two loads, two
 * multiplies). */
static inline uint64_t shmobj__hash_int(int64_t v)
{
    return shmobj__mix64((uint64_t)v ^ UINT64_C(0x9e3779b97f4a7c15));
}

/* 64x64 -> 128-bit multiply folded to 64 bits (the wyhash mixer). */
static inline uint64_t shmobj__mum(uint64_t a, uint64_t b)
{
    __extension__ typedef unsigned __int128 u128;
    u128 x = (u128)a * b;
    return (uint64_t)x ^ (uint64_t)(x >> 64);
}

/* The bytes of a key of at most 7 bytes as a little-endian word, zero
 * above them: the payload of a short string key slot. */
static inline uint64_t shmobj__pack_short(const uint8_t *s, uint64_t n)
{
    if (n >= 4)
        return shmobj__load32(s) | shmobj__load32(s + n - 4) << (8 * (n - 4));
    if (n == 0)
        return 0;
    /* n 1..3: bytes 0, n/2 and n-1 cover them all */
    return (uint64_t)s[0] | (uint64_t)s[n >> 1] << (8 * (n >> 1)) |
           (uint64_t)s[n - 1] << (8 * (n - 1));
}

/* Hash of a string or bytes key. Short keys (the common case) take one or
 * two loads and two multiplies. Part of the format: the index of a dict is
 * laid out by it. Reads are little-endian loads of the key's bytes. */
static inline uint64_t shmobj__hash_mem(unsigned type, const void *p, uint64_t n)
{
    const uint8_t *s = p;
    const uint64_t k1 = UINT64_C(0xa0761d6478bd642f), k2 = UINT64_C(0xe7037ed1a0b428db);
    uint64_t seed = ((uint64_t)type * UINT64_C(0x8ebc6af09c88c6e3)) ^ n, a, b;
    if (n <= 16) {
        if (n >= 8) {
            a = shmobj__load64(s);
            b = shmobj__load64(s + n - 8);
        } else if (n >= 4) {
            a = shmobj__load32(s);
            b = shmobj__load32(s + n - 4);
        } else if (n > 0) {
            a = ((uint64_t)s[0] << 16) | ((uint64_t)s[n >> 1] << 8) | s[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        uint64_t i = n;
        while (i > 16) {
            seed = shmobj__mum(shmobj__load64(s) ^ k1, shmobj__load64(s + 8) ^ seed);
            s += 16;
            i -= 16;
        }
        a = shmobj__load64(s + i - 16);
        b = shmobj__load64(s + i - 8);
    }
    return shmobj__mum(k1 ^ n, shmobj__mum(a ^ k1, b ^ seed ^ k2));
}

static inline size_t shmobj__dtype_size(unsigned dtype)
{
    switch (dtype) {
    case SHMOBJ_DTYPE_I8: case SHMOBJ_DTYPE_U8: case SHMOBJ_DTYPE_BOOL: return 1;
    case SHMOBJ_DTYPE_I16: case SHMOBJ_DTYPE_U16: return 2;
    case SHMOBJ_DTYPE_I32: case SHMOBJ_DTYPE_U32: case SHMOBJ_DTYPE_F32: return 4;
    case SHMOBJ_DTYPE_I64: case SHMOBJ_DTYPE_U64: case SHMOBJ_DTYPE_F64: return 8;
    default: return 0;
    }
}

/* Index capacity for n keys: the smallest power of two that keeps the
 * load at 3/4 or below (so there is always an empty entry), 0 for none. */
static inline uint64_t shmobj__index_cap(uint64_t n)
{
    if (n == 0)
        return 0;
    /* the smallest power of two >= ceil(4n / 3), at least 2 (counts are
     * below 2^32, so no overflow) */
    uint64_t need = (4 * n + 2) / 3;
    return need <= 2 ? 2 : UINT64_C(1) << (64 - __builtin_clzll(need - 1));
}

/* ---- mutable containers (MLIST, MDICT, MSET) ----------------------------
 * doc/format-object.md, "Mutable containers". The heap object of a
 * mutable container is written by the builder like any other (a 16-byte
 * header with count and len 0) and followed by a control block that never
 * moves: the lock writers take, the sequence counter readers validate,
 * the counts, an intent record for the repair after a writer's death, and
 * (list) the directory of item chunks. Items live in blocks of their own
 * (list chunks, dict and set bodies), reached from the control block. */

/* Bytes of the library's lock (lib/os/os.h, SHMOBJ__OS_LOCK_SIZE; the
 * segment's layout signature records it, and tests/test-mutable.c pins
 * the two equal). */
#define SHMOBJ__MUT_LOCK_BYTES 64
/* List chunks: chunk k holds SHMOBJ__MLIST_CHUNK0 << k slots, so item p
 * lies in chunk log2(p / CHUNK0 + 1); 40 chunks hold 2^44 items. */
#define SHMOBJ__MLIST_CHUNK0 16
#define SHMOBJ__MLIST_CHUNKS 40

/* Intent codes (shmobj__mut.op): what the lock holder is doing. */
enum shmobj__mut_op {
    SHMOBJ__MUT_OP_NONE = 0,
    SHMOBJ__MUT_OP_CHUNK = 1,   /* list: spare is a chunk for directory entry `at` */
    SHMOBJ__MUT_OP_PUT = 2,     /* list append/set, dict/set new key or value set
                                 * at place `at` */
    SHMOBJ__MUT_OP_INSERT = 3,  /* list: items [at, old_len) move up by one */
    SHMOBJ__MUT_OP_REMOVE = 4,  /* list: items (at, old_len) move down by one;
                                 * dict/set: pair `at` becomes a hole */
    SHMOBJ__MUT_OP_REBUILD = 5, /* dict/set: spare is the new body */
    SHMOBJ__MUT_OP_CLEAR = 6    /* children of places [0, progress) of
                                 * `retired` (dict/set: the old body) are freed */
};

/* The control block: right after the container's object header (so
 * 16-aligned). Written only by the holder of `lock`; read by anyone. */
struct shmobj__mut {
    /* The library's lock (os-lock.c), taken through the space's live
     * operations; its word at offset 0 is 0 when free, else the owner's
     * token. */
    _Alignas(16) uint8_t lock[SHMOBJ__MUT_LOCK_BYTES];
    /* Even when stable, odd while the lock holder changes what readers
     * see. Writer: relaxed store of odd, release fence, changes, release
     * store of even. Reader: acquire load, reads, acquire fence, relaxed
     * load: what it read counts only if both loads agree and are even. */
    _Atomic uint64_t seq;
    /* List: items, all published, in the low SHMOBJ__MLIST_LEN_BITS (an
     * epoch above them): every place below is written, and len only grows
     * except under the lock (an append publishes by a CAS from the value
     * it saw, release, over a written slot; a lock holder stores it).
     * Dict/set: pair places in use in the body, holes (deleted pairs)
     * included. Stored inside a writer section. */
    _Atomic uint64_t len;
    /* Live items (dict/set: pairs that are not holes). List: the
     * reservation counter, the next place an append without the lock
     * takes (fetch-add), with SHMOBJ__MLIST_CLOSED while a lock holder
     * holds the list; on len's line, which every append writes anyway. */
    _Atomic uint64_t count;
    /* Dict/set: reference of the body block, 0 while there is none. List:
     * 0. Changed inside a writer section only. */
    _Atomic uint64_t body;
    /* Dict/set: the insertion order the next new key takes; orders only
     * grow (iteration resumes after the last order it returned). */
    _Atomic uint64_t order;
    /* The intent record (enum shmobj__mut_op, and its arguments), written
     * by the lock holder before it changes anything else and cleared after;
     * the next locker after the holder's death repairs from it. */
    _Atomic uint64_t op;
    _Atomic uint64_t at;       /* the place (list item, dict pair) */
    _Atomic uint64_t progress; /* how far a move or a clear got */
    _Atomic uint64_t old_len;  /* len when the change began */
    /* Blocks allocated by the lock holder and not yet published (the value
     * child, a dict key child, a chunk, a new body): freed by the repair
     * unless the place they were for holds them. */
    _Atomic uint64_t spare;
    _Atomic uint64_t spare2;
    /* Blocks unpublished by the change (the old value's child, a deleted
     * key's child, an old body): freed once nothing the container shows
     * refers to them. */
    _Atomic uint64_t retired;
    /* List: not a retired block but its growth block (struct
     * shmobj__mlapps), 0 until the first locked write makes it (until
     * then appends take the lock). Stored once, inside a writer section. */
    _Atomic uint64_t retired2;
    /* The item (tag, payload) a list insert puts at `at`, so that the
     * repair can finish the insert. */
    _Atomic uint64_t item_tag;
    _Atomic uint64_t item_payload;
    /* Dict: 0, or the token (widened) of the one handle making an int add
     * without the lock (mutable-dict-change.c). Its owner: CAS from 0 before it
     * reads seq, store of 0 (release) after its fetch-add; a lock holder
     * that moves or frees value slots (rebuild, clear, a value's
     * replacement, a repair) waits inside its section until it is 0 or
     * names a dead handle, which it clears with a CAS. List, set: 0. */
    _Atomic uint64_t adder;
};
_Static_assert(sizeof(struct shmobj__mut) == 192, "mutable control block is 192 bytes");
_Static_assert(offsetof(struct shmobj__mut, adder) == 184, "adder at 184");
_Static_assert(offsetof(struct shmobj__mut, seq) == 64, "seq at 64");
_Static_assert(offsetof(struct shmobj__mut, len) == 72, "len at 72");
_Static_assert(offsetof(struct shmobj__mut, count) == 80, "count at 80");
_Static_assert(offsetof(struct shmobj__mut, body) == 88, "body at 88");
_Static_assert(offsetof(struct shmobj__mut, op) == 104, "op at 104");
_Static_assert(offsetof(struct shmobj__mut, spare) == 136, "spare at 136");

/* Bytes after a mutable container's object header: the control block, and
 * for a list its chunk directory (SHMOBJ__MLIST_CHUNKS references, stored
 * inside a writer section; 0 for a chunk not allocated yet). */
static inline uint64_t shmobj__mut_body_bytes(unsigned type)
{
    return sizeof(struct shmobj__mut) +
           (type == SHMOBJ_TYPE_MLIST ? 8u * SHMOBJ__MLIST_CHUNKS : 0);
}

/* A list's growth block (version 4 of the list, magic "SML4"), named by
 * the control block's retired2: a raw arena block of 64-byte alignment.
 *
 * Appends without the lock (mutable-list-append.c, doc/format-object.md) reserve
 * a place with one fetch-add of the control block's `count` (a list's
 * reservation counter), claim its slot, write it, and publish it by
 * moving `len` over every consecutive written slot. The slot states, in
 * the slot's first word (tag byte, then reserved0..2):
 *   - 0: reserved (or beyond the reservations) and not written yet;
 *   - SHMOBJ__SLOT_CLAIM with the claimant's token in bits 32..63: being
 *     written by that handle (CAS from 0 only);
 *   - any item tag: written (CAS from the claim, after the payload).
 * A place whose claimant died, or which stays unclaimed for
 * SHMOBJ__MLIST_UNCLAIMED_NS, is claimed by whoever finds it and given a
 * null (tag SHMOBJ__SLOT_OBJ, payload 0): a skipped place reads as null.
 *
 * This block holds the rest of what appends without the lock share:
 * where a hole was first seen stuck (stuck_at, 1 + len's word, its epoch
 * and place, so that a place reused after a removal is a new hole; and
 * stuck_ns, the monotonic time then: advisory, a damaged value only makes
 * a skip come early or late), and the growers' records, one line each: an
 * appender whose place lies in a chunk not made yet CASes its token into
 * a free record's `tok`, allocates the chunk, records it in `ref` (and
 * its index in `k`), zeroes it, CASes the directory entry from 0 and
 * frees its chunk when another was published first, then clears the
 * record. A lock holder frees the recorded chunk of a dead grower unless
 * the directory holds it. */
#define SHMOBJ__MLIST_MAGIC UINT32_C(0x344c4d53) /* "SML4" read little-endian */
#define SHMOBJ__MLGROW_RECS 4
/* The tag of a slot being written (never below len). */
#define SHMOBJ__SLOT_CLAIM 0x7f
/* A list's reservation counter (control block `count`) while a lock
 * holder holds the list: appends seeing it take the lock. */
#define SHMOBJ__MLIST_CLOSED (UINT64_C(1) << 63)
/* In a list's closed_r: its closer settled every place below the count
 * (and may have removed items since), so nothing is left to settle. */
#define SHMOBJ__MLIST_SETTLED (UINT64_C(1) << 63)
/* A list's len: the published items in the low bits, an epoch above that
 * every lock holder advances, so that a publisher stalled across a locked
 * change fails its CAS of len. */
#define SHMOBJ__MLIST_LEN_BITS 44
#define SHMOBJ__MLIST_LEN_MASK ((UINT64_C(1) << SHMOBJ__MLIST_LEN_BITS) - 1)
/* An unclaimed reserved place is skipped after this long (ns). */
#define SHMOBJ__MLIST_UNCLAIMED_NS (UINT64_C(1000000000))

struct shmobj__mlgrow {
    _Atomic uint64_t tok; /* 0, or the grower's token (widened) */
    _Atomic uint64_t ref; /* the chunk it allocated, 0 before */
    _Atomic uint64_t k;   /* the directory entry it is for */
    uint64_t reserved[5]; /* 0 */
};
_Static_assert(sizeof(struct shmobj__mlgrow) == 64, "a grower's record has its own line");

struct shmobj__mlapps {
    uint32_t magic;            /* SHMOBJ__MLIST_MAGIC, written once */
    uint32_t recs;             /* SHMOBJ__MLGROW_RECS */
    _Atomic uint64_t stuck_at; /* 0, or 1 + len's word (epoch, place) seen stuck */
    _Atomic uint64_t stuck_ns; /* when it was first seen stuck */
    /* The count of places the last closer of the reservations found (lock
     * holders only), with SHMOBJ__MLIST_SETTLED once it settled them all:
     * the next closer's when the counter was left closed by one that
     * died. */
    _Atomic uint64_t closed_r;
    uint64_t reserved[4]; /* 0 */
    struct shmobj__mlgrow g[SHMOBJ__MLGROW_RECS];
};
_Static_assert(offsetof(struct shmobj__mlapps, g) == 64, "growers' records from 64");
_Static_assert(sizeof(struct shmobj__mlapps) == 64 * (1 + SHMOBJ__MLGROW_RECS),
               "growth block size");

/* "SMD2" read little-endian: version 2 of the body, whose dict values may
 * be added to without the lock (the control block's adder); version 1
 * ("SMDB") was written by writers that do not wait for such adds, so the
 * two are never mixed. */
#define SHMOBJ__MBODY_MAGIC UINT32_C(0x32444d53)
/* "SMD3": version 3 of the body, which may also hold medium string keys
 * (SHMOBJ__SLOT_MSTR) in its key slots, as the fixed containers do; a
 * version 2 body never holds one (its readers would refuse the slot), so
 * writers put a medium key in a block of its own there. Readers take
 * both; every body made now is version 3. The two magics differ only in
 * bit 24. */
#define SHMOBJ__MBODY_MAGIC3 UINT32_C(0x33444d53)

/* Start of a dict or set body block (a raw arena block):
 *     [this 32 B][index: cap x 8 B][pairs: pcap x 32 B][orders: pcap x 8 B]
 * Written whole before it is published (body); afterwards the lock holder
 * appends pairs past len, adds index entries, marks holes and replaces
 * values, inside writer sections. A pair is a key slot and a value slot
 * (a set's value slot is null); a hole's key slot has tag
 * SHMOBJ__SLOT_HOLE. Index entries are those of the fixed dicts
 * (shmobj__index_entry, probed by index-probe.h) and name pair places; a
 * hole's entry stays until the next rebuild, so no probe is ever cut
 * short. orders[p] is pair p's insertion order, ascending in p. */
struct shmobj__mbody {
    uint32_t magic;    /* SHMOBJ__MBODY_MAGIC */
    uint8_t kind;      /* SHMOBJ_TYPE_MDICT or SHMOBJ_TYPE_MSET */
    uint8_t reserved0; /* 0 */
    uint16_t reserved1; /* 0 */
    uint64_t cap;      /* index entries: a power of two, 4 * pcap <= 3 * cap */
    uint64_t pcap;     /* pair places */
    uint64_t reserved2; /* 0 */
};
_Static_assert(sizeof(struct shmobj__mbody) == 32, "body header is 32 bytes");

/* The key slot tag of a deleted pair (a hole): never a key. */
#define SHMOBJ__SLOT_HOLE 0x42


/* ---- tables: records of one shape, row after row (doc/format-object.md,
 * "Tables") ---------------------------------------------------------------
 *
 * A table is the value of a block of its own: the root slot names a heap
 * object of tag SHMOBJ_TYPE_TABLE at offset 32 whose header is a record's
 * (count: the shape's fields, len: the shape's reference; the table holds
 * one use of it), followed by this control block. Rows are the bytes of
 * the C struct the shape's field offsets describe, row_size apart, in
 * chunks that never move: chunk k holds chunk0 << k rows, the rows from
 * chunk0 * (2^k - 1) on, and is a raw arena block of 64-byte alignment
 * named by dir[k] (0 until made). An appender holds the lock, writes the
 * rows past len (making the chunk first when they open one) and publishes
 * them with one release store of len: every row below len is whole, and a
 * row never changes after but through atomic updates of its 8-byte
 * fields. */
#define SHMOBJ__TABLE_VERSION 1
#define SHMOBJ__TABLE_CHUNKS 40
/* Most bytes of a row (a field's bytes are checked against overlap with a
 * bitmap of this many bits), most rows of chunk 0. */
#define SHMOBJ__TABLE_ROW_MAX 65536
#define SHMOBJ__TABLE_CHUNK0_MAX (UINT64_C(1) << 32)

struct shmobj__table {
    /* The library's lock, taken by appenders only (readers and atomic
     * updates never take it); its word at 0 is 0 or the holder's token. */
    _Alignas(16) uint8_t lock[SHMOBJ__MUT_LOCK_BYTES];
    /* Published rows: every row below is whole. Stored (release) by the
     * lock holder only, after the rows it exposes; loaded acquire. Never
     * goes down. */
    _Atomic uint64_t len;
    uint64_t reserved1[7]; /* 0: len alone on its line */
    uint32_t version;      /* SHMOBJ__TABLE_VERSION; written once */
    uint32_t row_size;     /* bytes of a row, 1..SHMOBJ__TABLE_ROW_MAX; written once */
    uint64_t chunk0;       /* rows of chunk 0, 1..SHMOBJ__TABLE_CHUNK0_MAX; written once */
    uint64_t reserved2[2]; /* 0 */
    /* Chunk references: 0 until made; stored (release) once by the lock
     * holder, before len reaches the chunk's first row. */
    _Atomic uint64_t dir[SHMOBJ__TABLE_CHUNKS];
};
_Static_assert(sizeof(struct shmobj__table) == 480, "table control block is 480 bytes");
_Static_assert(offsetof(struct shmobj__table, len) == 64, "table len at 64");
_Static_assert(offsetof(struct shmobj__table, version) == 128, "table version at 128");
_Static_assert(offsetof(struct shmobj__table, chunk0) == 136, "table chunk0 at 136");
_Static_assert(offsetof(struct shmobj__table, dir) == 160, "table directory at 160");

#endif /* SHMOBJ_OBJECT_FORMAT_H */
