/**
 * @file shmobj/object.h
 * @brief Typed objects in a segment: build once, read in place, update
 *        scalars atomically.
 *
 * A value is null, bool, int64, uint64, double, string (UTF-8), bytes,
 * buffer (a typed n-dimensional array), list, tuple, fixed dict, fixed set
 * or struct; containers nest. A process describes a value tree in its own
 * memory with ::shmobj_value (the SHMOBJ_VAL_* macros build descriptions on
 * the stack), and shmobj_obj_put() measures it, allocates one block of the
 * segment and writes the whole tree into it. The returned ::shmobj_ref can be
 * handed to any process attached to the segment (through a queue or a named
 * root, see shmobj_segment_root_set()); that process opens it with
 * shmobj_obj_get() and reads it through views (::shmobj_view): no decode,
 * no copy, and the cost of an access does not depend on the object's size.
 *
 * **Mutability.** Scalar items of lists, dict values, struct fields and the
 * top-level value are updated in place with atomics (shmobj_int_add() and
 * friends) and every process sees the update at once. Strings, bytes, tuple
 * items, dict keys and set members are immutable. Buffer data is mutable
 * memory that the caller synchronises. A slot's kind never changes: an int
 * item stays an int; an item that holds an object (or null) may be replaced
 * by another object or null with shmobj_view_set().
 *
 * **Ownership.** The process that put an object owns it until it hands the
 * reference on; whoever owns it frees it with shmobj_obj_free(), which frees
 * the whole tree (items replaced later included). A reference to a freed
 * object is refused with SHMOBJ_ESTALE (the block's generation no longer
 * matches), never misread.
 *
 * **Untrusted segments.** Every read checks what it follows: a damaged
 * object gives SHMOBJ_ECORRUPT, never a read outside the segment. Use
 * shmobj_obj_check() to validate a whole graph (bounded in depth and work).
 */
#ifndef SHMOBJ_OBJECT_H
#define SHMOBJ_OBJECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shmobj/api.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Kinds of value. The numbers are part of the format. */
enum shmobj_type {
    SHMOBJ_TYPE_NULL = 1,    /**< null / None */
    SHMOBJ_TYPE_BOOL = 2,    /**< true or false */
    SHMOBJ_TYPE_INT = 3,     /**< int64 */
    SHMOBJ_TYPE_UINT = 4,    /**< uint64 */
    SHMOBJ_TYPE_DOUBLE = 5,  /**< IEEE double */
    SHMOBJ_TYPE_STR = 6,     /**< UTF-8 text, length-prefixed, NUL-terminated */
    SHMOBJ_TYPE_BYTES = 7,   /**< immutable bytes */
    SHMOBJ_TYPE_BUFFER = 8,  /**< mutable typed n-d array, 64-byte aligned */
    SHMOBJ_TYPE_LIST = 9,    /**< fixed length, mutable items */
    SHMOBJ_TYPE_TUPLE = 10,  /**< fixed length, immutable items */
    SHMOBJ_TYPE_DICT = 11,   /**< keys fixed at creation, mutable values */
    SHMOBJ_TYPE_SET = 12,    /**< fixed set of keys */
    SHMOBJ_TYPE_STRUCT = 13, /**< fields by index, optional names */
    SHMOBJ_TYPE_MLIST = 14,  /**< growable list (see "Mutable containers") */
    SHMOBJ_TYPE_MDICT = 15,  /**< mutable dict (see "Mutable containers") */
    SHMOBJ_TYPE_MSET = 16    /**< mutable set (see "Mutable containers") */
};

/**
 * @brief Kinds of references and shapes (the numbers continue enum
 *        shmobj_type and are part of the format; shmobj_view_type() returns
 *        them like the others).
 */
enum shmobj_type_ref {
    SHMOBJ_TYPE_SHAPE = 17,  /**< a shared, immutable list of field names and
                                  kinds (shmobj_shape_put()) */
    SHMOBJ_TYPE_RECORD = 18, /**< fields by index or by name through a shape */
    SHMOBJ_TYPE_LINK = 19,   /**< a weak reference to another object */
    SHMOBJ_TYPE_ADOPT = 20,  /**< description only: an object already put,
                                  taken over by the new container */
    SHMOBJ_TYPE_TABLE = 21   /**< rows of one shape stored back to back
                                  (shmobj_table_put(), shmobj/table.h);
                                  @since 0.4 */
};

/** @brief Element types of a buffer. The numbers are part of the format. */
enum shmobj_dtype {
    SHMOBJ_DTYPE_I8 = 1,   /**< int8 */
    SHMOBJ_DTYPE_I16 = 2,  /**< int16 */
    SHMOBJ_DTYPE_I32 = 3,  /**< int32 */
    SHMOBJ_DTYPE_I64 = 4,  /**< int64 */
    SHMOBJ_DTYPE_U8 = 5,   /**< uint8 */
    SHMOBJ_DTYPE_U16 = 6,  /**< uint16 */
    SHMOBJ_DTYPE_U32 = 7,  /**< uint32 */
    SHMOBJ_DTYPE_U64 = 8,  /**< uint64 */
    SHMOBJ_DTYPE_F32 = 9,  /**< float */
    SHMOBJ_DTYPE_F64 = 10, /**< double */
    SHMOBJ_DTYPE_BOOL = 11 /**< one byte, 0 or 1 */
};

/** @brief Most dimensions of a buffer. */
#define SHMOBJ_BUFFER_MAXDIM 8
/** @brief Deepest nesting of containers accepted by any call. */
#define SHMOBJ_OBJ_MAXDEPTH 64
/** @brief Length value meaning "NUL-terminated: measure with strlen". */
#define SHMOBJ_STRLEN ((size_t)-1)

/**
 * @brief Description of a buffer (see ::shmobj_value, SHMOBJ_VAL_BUFFER()).
 */
typedef struct shmobj_buffer_desc {
    const void *data;       /**< bytes to copy in, or NULL: left unset for
                             *   the caller to fill in place */
    size_t nbytes;          /**< data bytes, 0 to compute from shape (C
                             *   order); required with strides */
    const uint64_t *shape;  /**< ndim extents (NULL when ndim is 0) */
    const int64_t *strides; /**< ndim byte strides (>= 0), or NULL: C order */
    uint32_t dtype;         /**< enum shmobj_dtype */
    uint32_t ndim;          /**< 0..SHMOBJ_BUFFER_MAXDIM */
} shmobj_buffer_desc;

/**
 * @brief Description of a value in the caller's memory, input of
 *        shmobj_obj_put(). Fill it with the SHMOBJ_VAL_* macros (in C++
 *        those that build arrays do not compile: use shmobj.hpp). 32 bytes.
 *
 * - NULL, BOOL, INT, UINT, DOUBLE: `v.b`, `v.i`, `v.u`, `v.d`.
 * - STR, BYTES: `v.s.ptr`, `v.s.len` (SHMOBJ_STRLEN: NUL-terminated).
 * - LIST, TUPLE, SET: `v.c.items[0 .. v.c.count)`.
 * - DICT: `v.c.items` holds 2 * `v.c.count` values: key, value, key, ...
 *   Keys are INT, STR or BYTES and distinct (so are set members).
 * - STRUCT: `v.c.items[0 .. v.c.count)`, `v.c.names` NULL or count distinct
 *   NUL-terminated field names.
 * - BUFFER: `v.buf` points to a ::shmobj_buffer_desc.
 * - ADOPT, LINK: `v.ref` (see "References" below).
 * - RECORD: `v.r.shape`, `v.r.items[0 .. v.r.count)` (see "Shapes and
 *   records" below).
 */
typedef struct shmobj_value {
    uint32_t type;     /**< enum shmobj_type */
    uint32_t reserved; /**< must be 0 (else SHMOBJ_EINVAL): a later
                            release may give it a meaning */
    union {
        int b;      /**< BOOL: 0 or 1 */
        int64_t i;  /**< INT */
        uint64_t u; /**< UINT */
        double d;   /**< DOUBLE */
        /** STR, BYTES */
        struct {
            const void *ptr; /**< first byte */
            size_t len;      /**< bytes, or SHMOBJ_STRLEN for a C string */
        } s;
        /** LIST, TUPLE, SET, DICT, STRUCT */
        struct {
            const struct shmobj_value *items; /**< items (dict: key/value pairs) */
            size_t count;                     /**< items (dict: pairs) */
            const char *const *names;         /**< STRUCT: field names or NULL */
        } c;
        const shmobj_buffer_desc *buf; /**< BUFFER */
        /** ADOPT, LINK: the object referred to */
        shmobj_ref ref;
        /** RECORD */
        struct {
            const struct shmobj_value *items; /**< one value per field of the shape */
            size_t count;                     /**< fields (the shape's count) */
            shmobj_ref shape;                 /**< the shape (shmobj_shape_put()) */
        } r;
    } v; /**< the payload, by type */
} shmobj_value;

/** @cond INTERNAL */
/* The value macros below are built on these. In C they are compound
 * literals, which live until the end of the enclosing block. C++ has no
 * compound literals (g++ and clang++ accept them as an extension whose
 * temporaries die at the end of the full expression), so there the
 * macros that take no array are inline functions returning the
 * description by value, and those that would build an array or a buffer
 * description in a temporary refuse to compile: <shmobj.hpp> has builders
 * that own their storage. A string's length is taken in a function, so
 * the argument is evaluated once and the length of a literal is still
 * folded to a constant. */
#ifndef __cplusplus
#define SHMOBJ__VAL(t, field, x) ((shmobj_value){.type = (t), .v = {.field = (x)}})
#define SHMOBJ__VAL_MEM(t, p, n) ((shmobj_value){.type = (t), .v = {.s = {(p), (n)}}})
#define SHMOBJ__VAL_C(t, items, n, names)                                      \
    ((shmobj_value){.type = (t), .v = {.c = {(items), (n), (names)}}})
static inline shmobj_value shmobj__val_str(const char *cstr)
{
    return SHMOBJ__VAL_MEM(SHMOBJ_TYPE_STR, cstr, strlen(cstr));
}
#define SHMOBJ__VAL0(t) ((shmobj_value){.type = (t)})
#else
static inline shmobj_value shmobj__val0(uint32_t type)
{
    shmobj_value v;
    memset(&v, 0, sizeof v);
    v.type = type;
    return v;
}
static inline shmobj_value shmobj__val_b(uint32_t t, int x) { shmobj_value v = shmobj__val0(t); v.v.b = x; return v; }
static inline shmobj_value shmobj__val_i(uint32_t t, int64_t x) { shmobj_value v = shmobj__val0(t); v.v.i = x; return v; }
static inline shmobj_value shmobj__val_u(uint32_t t, uint64_t x) { shmobj_value v = shmobj__val0(t); v.v.u = x; return v; }
static inline shmobj_value shmobj__val_d(uint32_t t, double x) { shmobj_value v = shmobj__val0(t); v.v.d = x; return v; }
static inline shmobj_value shmobj__val_mem(uint32_t t, const void *p, size_t n)
{
    shmobj_value v = shmobj__val0(t);
    v.v.s.ptr = p;
    v.v.s.len = n;
    return v;
}
static inline shmobj_value shmobj__val_c(uint32_t t, const shmobj_value *items, size_t n,
                                         const char *const *names)
{
    shmobj_value v = shmobj__val0(t);
    v.v.c.items = items;
    v.v.c.count = n;
    v.v.c.names = names;
    return v;
}
static inline shmobj_value shmobj__val_str(const char *cstr)
{
    return shmobj__val_mem(SHMOBJ_TYPE_STR, cstr, strlen(cstr));
}
static inline shmobj_value shmobj__val_ref(uint32_t t, shmobj_ref r)
{
    shmobj_value v = shmobj__val0(t);
    v.v.ref = r;
    return v;
}
static inline shmobj_value shmobj__val_rec(shmobj_ref shape, const shmobj_value *items,
                                           size_t n)
{
    shmobj_value v = shmobj__val0(SHMOBJ_TYPE_RECORD);
    v.v.r.items = items;
    v.v.r.count = n;
    v.v.r.shape = shape;
    return v;
}
#define SHMOBJ__VAL0(t) (shmobj__val0(t))
#define SHMOBJ__VAL(t, field, x) shmobj__val_##field((t), (x))
#define SHMOBJ__VAL_MEM(t, p, n) shmobj__val_mem((t), (p), (n))
#define SHMOBJ__VAL_C(t, items, n, names) shmobj__val_c((t), (items), (n), (names))
/* A lambda holding a static_assert that always fails: the error, with its
 * message, appears where the macro is used and nowhere else. */
#define SHMOBJ__CXX_REFUSED(macro)                                             \
    ([]() -> shmobj_value {                                                    \
        static_assert(sizeof(shmobj_value) == 0,                               \
                      macro " builds its description in a C compound literal, " \
                      "a temporary that C++ destroys at the end of the full "  \
                      "expression: in C++ use the builders of <shmobj.hpp> "   \
                      "(shmobj::list, shmobj::dict, shmobj::buffer, ...)");    \
        return shmobj_value();                                                 \
    }())
#endif
/** @endcond */

/** @brief Describe null. */
#ifndef __cplusplus
#define SHMOBJ_VAL_NULL ((shmobj_value){.type = SHMOBJ_TYPE_NULL})
#else
#define SHMOBJ_VAL_NULL (shmobj__val0(SHMOBJ_TYPE_NULL))
#endif
/** @brief Describe a bool. */
#define SHMOBJ_VAL_BOOL(x) SHMOBJ__VAL(SHMOBJ_TYPE_BOOL, b, !!(x))
/** @brief Describe an int64. */
#define SHMOBJ_VAL_INT(x) SHMOBJ__VAL(SHMOBJ_TYPE_INT, i, (x))
/** @brief Describe a uint64. */
#define SHMOBJ_VAL_UINT(x) SHMOBJ__VAL(SHMOBJ_TYPE_UINT, u, (x))
/** @brief Describe a double. */
#define SHMOBJ_VAL_DOUBLE(x) SHMOBJ__VAL(SHMOBJ_TYPE_DOUBLE, d, (x))
/**
 * @brief Describe a string from a NUL-terminated C string (not NULL).
 * @note The argument is evaluated once; the description holds the pointer
 *       and the length strlen() gave (a constant for a literal), so the
 *       string must stay unchanged until the description was put.
 */
#ifndef __cplusplus
/* An lvalue like the other macros' compound literals, so that
 * &SHMOBJ_VAL_STR("k") may be passed where a description is wanted. */
#define SHMOBJ_VAL_STR(cstr) (*(shmobj_value[1]){shmobj__val_str(cstr)})
#else
#define SHMOBJ_VAL_STR(cstr) (shmobj__val_str(cstr))
#endif
/** @brief Describe a string of n bytes of UTF-8. */
#define SHMOBJ_VAL_STRN(p, n) SHMOBJ__VAL_MEM(SHMOBJ_TYPE_STR, (p), (n))
/** @brief Describe n bytes. */
#define SHMOBJ_VAL_BYTES(p, n) SHMOBJ__VAL_MEM(SHMOBJ_TYPE_BYTES, (p), (n))
/** @brief Describe a list of n items from an array. */
#define SHMOBJ_VAL_LIST(items, n) SHMOBJ__VAL_C(SHMOBJ_TYPE_LIST, (items), (n), NULL)
/** @brief Describe a tuple of n items from an array. */
#define SHMOBJ_VAL_TUPLE(items, n) SHMOBJ__VAL_C(SHMOBJ_TYPE_TUPLE, (items), (n), NULL)
/** @brief Describe a set of n members from an array. */
#define SHMOBJ_VAL_SET(items, n) SHMOBJ__VAL_C(SHMOBJ_TYPE_SET, (items), (n), NULL)
/** @brief Describe a dict of n pairs from an array of 2n values (k, v, ...). */
#define SHMOBJ_VAL_DICT(kv, n) SHMOBJ__VAL_C(SHMOBJ_TYPE_DICT, (kv), (n), NULL)
/** @brief Describe a struct of n fields, names an array of n C strings or NULL. */
#define SHMOBJ_VAL_STRUCT(items, n, names) \
    SHMOBJ__VAL_C(SHMOBJ_TYPE_STRUCT, (items), (n), (names))

#ifndef __cplusplus
/** @brief Describe a C-ordered buffer; data NULL leaves it to be filled in
 *         place. (The buffer description is a compound literal too.)
 * @note C only: in C++ it does not compile (use shmobj::buffer() of
 *       shmobj.hpp, or fill a ::shmobj_buffer_desc that outlives the put). */
#define SHMOBJ_VAL_BUFFER(dtype_, ndim_, shape_, data_) \
    ((shmobj_value){.type = SHMOBJ_TYPE_BUFFER, \
                    .v = {.buf = &(const shmobj_buffer_desc){(data_), 0, (shape_), \
                                                             NULL, (dtype_), (ndim_)}}})

/** @brief Describe an object already put that the new container takes
 *         over (see "References"). */
#define SHMOBJ_VAL_ADOPT(ref_) ((shmobj_value){.type = SHMOBJ_TYPE_ADOPT, .v = {.ref = (ref_)}})
/** @brief Describe a weak reference to an object already put (see
 *         "References"). */
#define SHMOBJ_VAL_LINK(ref_) ((shmobj_value){.type = SHMOBJ_TYPE_LINK, .v = {.ref = (ref_)}})
/** @brief Describe a record of a shape: n values, one per field in the
 *         shape's order (see "Shapes and records"). */
#define SHMOBJ_VAL_RECORD(shape_, items_, n_) \
    ((shmobj_value){.type = SHMOBJ_TYPE_RECORD, .v = {.r = {(items_), (n_), (shape_)}}})

/** @cond INTERNAL */
#define SHMOBJ__VALS(...) ((const shmobj_value[]){__VA_ARGS__})
#define SHMOBJ__NVALS(...) (sizeof(SHMOBJ__VALS(__VA_ARGS__)) / sizeof(shmobj_value))
/** @endcond */
/**
 * @brief A list of the values given, e.g.
 *        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("a")).
 * @note The *_OF macros build their item arrays as compound literals, which
 *       live until the end of the enclosing block: build and put the
 *       description in the same block (do not return one from a function).
 *       C only: in C++ they do not compile (a compound literal there dies
 *       at the end of the full expression); shmobj.hpp has shmobj::list(),
 *       shmobj::tuple(), shmobj::set() and shmobj::dict().
 */
#define SHMOBJ_VAL_LIST_OF(...) SHMOBJ_VAL_LIST(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A tuple of the values given. */
#define SHMOBJ_VAL_TUPLE_OF(...) SHMOBJ_VAL_TUPLE(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A set of the values given. */
#define SHMOBJ_VAL_SET_OF(...) SHMOBJ_VAL_SET(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A dict of the values given as key, value, key, value, ... */
#define SHMOBJ_VAL_DICT_OF(...) SHMOBJ_VAL_DICT(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__) / 2)
#else
/** @cond INTERNAL */
#define SHMOBJ_VAL_BUFFER(...) SHMOBJ__CXX_REFUSED("SHMOBJ_VAL_BUFFER")
#define SHMOBJ__VALS(...) SHMOBJ__CXX_REFUSED("SHMOBJ__VALS")
#define SHMOBJ__NVALS(...) SHMOBJ__CXX_REFUSED("SHMOBJ__NVALS")
#define SHMOBJ_VAL_LIST_OF(...) SHMOBJ__CXX_REFUSED("SHMOBJ_VAL_LIST_OF")
#define SHMOBJ_VAL_TUPLE_OF(...) SHMOBJ__CXX_REFUSED("SHMOBJ_VAL_TUPLE_OF")
#define SHMOBJ_VAL_SET_OF(...) SHMOBJ__CXX_REFUSED("SHMOBJ_VAL_SET_OF")
#define SHMOBJ_VAL_ADOPT(ref_) (shmobj__val_ref(SHMOBJ_TYPE_ADOPT, (ref_)))
#define SHMOBJ_VAL_LINK(ref_) (shmobj__val_ref(SHMOBJ_TYPE_LINK, (ref_)))
#define SHMOBJ_VAL_RECORD(shape_, items_, n_) (shmobj__val_rec((shape_), (items_), (n_)))
#define SHMOBJ_VAL_DICT_OF(...) SHMOBJ__CXX_REFUSED("SHMOBJ_VAL_DICT_OF")
/** @endcond */
#endif

/**
 * @brief A view of one value in a segment, filled by shmobj_obj_get(),
 *        shmobj_view_item() and the other lookups. Lives in the caller's
 *        memory; copy it freely.
 *
 * Only `seg` and `type` are for the caller to read; the rest is private.
 * A view borrows the segment's memory: it stays valid until the object is
 * freed or the item it names is replaced (see shmobj_view_set()), like a
 * pointer. Scalar views read the current value on every call.
 *
 * **A view kept past a free.** A view remembers the generation of the
 * arena block holding its slot and of the one holding its object (the
 * same block unless the item was replaced). Every call that writes
 * through a view (the scalar setters, adders and compare-and-swaps,
 * shmobj_item_int_add(), shmobj_view_key_int_add(), shmobj_view_set()) or
 * returns data read through it (the scalar getters, shmobj_item_int_get(),
 * shmobj_str_get(), shmobj_bytes_get(), shmobj_buffer_get(),
 * shmobj_view_len(), the item, key and lookup calls, the JSON printers)
 * first loads the generation in the header of the block it is about to
 * touch and returns SHMOBJ_ESTALE when it differs: the block was freed
 * (whatever has been built at that offset since is left alone). A scalar
 * read makes the comparison just after loading the value, so a value it
 * returns was loaded before the free was visible. shmobj_view_type() reads
 * only the view and always answers. What the check cannot see:
 * - a free that happens during the call, after the check: a write may then
 *   land in the freed or reused memory, and a read other than a scalar's
 *   may return bytes of the object built there;
 * - the memory behind a pointer returned earlier (a string's bytes, buffer
 *   data): it is not checked again when the caller reads it;
 * - a view of a block freed and built again at the same offset as many
 *   times as the 16-bit generation takes to come back to the same value
 *   (see the arena's reuse guarantee), or whose block header now lies
 *   inside another block's data bytes that happen to hold the same 16-bit
 *   value at that place.
 * So the check catches a view kept by mistake; it does not make reading
 * an object that another process may free at any moment safe: coordinate
 * frees with readers (queue completion, or a lock).
 */
typedef struct shmobj_view {
    shmobj_segment *seg; /**< the segment */
    void *slot;          /**< private: this process's address of the slot */
    const void *obj;     /**< private: the heap object, NULL for scalars and null */
    uint64_t slot_blk;   /**< private: offset of the block holding the slot */
    uint64_t slot_blen;  /**< private: its extent in bytes */
    uint64_t obj_blk;    /**< private: offset of the block holding the object */
    uint64_t obj_blen;   /**< private: its extent */
    uint64_t len;        /**< private: str/bytes/buffer bytes, index capacity */
    uint32_t count;      /**< private: items of a container */
    uint16_t obj_gen;    /**< private: generation of the object's block */
    uint16_t slot_gen;   /**< private: generation of the slot's block */
    uint8_t type;        /**< enum shmobj_type of the value */
    uint8_t flags;       /**< private */
    uint8_t dtype;       /**< private */
    uint8_t ndim;        /**< private */
    uint8_t slot_tag;    /**< private */
    uint8_t reserved[3]; /**< private */
} shmobj_view;

/**
 * @brief A key prepared once for many lookups (see shmobj_key_init()).
 *
 * Holds the key's kind, a pointer to its bytes (not a copy: they must stay
 * valid and unchanged while the key is used) and what a lookup would
 * otherwise work out from them on every call. A program that looks the
 * same field names up again and again (records read in a loop) prepares
 * them once. Only `type`, `i`, `ptr` and `len` are for the caller to read.
 */
typedef struct shmobj_key {
    uint32_t type;      /**< SHMOBJ_TYPE_INT, _STR or _BYTES; 0 before init */
    uint32_t reserved_; /**< private */
    int64_t i;          /**< an INT key's value */
    const void *ptr;    /**< a STR or BYTES key's bytes */
    uint64_t len;       /**< their length */
    uint64_t hash_;     /**< private: the key's hash */
    uint64_t word_;     /**< private: a short or medium string key as its slot holds it */
} shmobj_key;

/**
 * @brief Bytes of a ::shmobj_view as this library was built: what a
 *        binding from another language allocates (as an opaque, 8-byte
 *        aligned byte array) for each view it passes to the library,
 *        instead of mirroring the struct's fields.
 * @return sizeof(shmobj_view) (80 on every platform the format supports)
 * @note Thread-safe; touches no segment.
 * @since 0.2
 */
SHMOBJ_API size_t shmobj_view_size(void);

/** @brief Description of a buffer's memory, filled by shmobj_buffer_get(). */
typedef struct shmobj_buffer_info {
    uint32_t struct_size; /**< sizeof(shmobj_buffer_info), set by the caller */
    uint32_t dtype;       /**< enum shmobj_dtype */
    uint32_t ndim;        /**< dimensions */
    uint32_t itemsize;    /**< bytes of one element */
    void *data;           /**< this process's address of element 0, 64-aligned */
    uint64_t nbytes;      /**< bytes of data */
    uint64_t shape[SHMOBJ_BUFFER_MAXDIM];  /**< extents (ndim used) */
    int64_t strides[SHMOBJ_BUFFER_MAXDIM]; /**< byte strides (ndim used) */
} shmobj_buffer_info;

/* ---- building ------------------------------------------------------- */

/**
 * @brief Bytes of segment heap a value tree takes when put (the arena's
 *        block header excluded). Checks the structure of the description;
 *        UTF-8 and duplicate keys are checked by shmobj_obj_put() only.
 * @param[in] val description
 * @param[out] bytes bytes the block needs
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, bad type or dtype, bad key kind, too
 *         deep (> SHMOBJ_OBJ_MAXDEPTH), too many items, bad shape or
 *         strides, size overflow
 * @note Thread-safe; touches no segment.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_size(const shmobj_value *val, size_t *bytes);

/**
 * @brief Write a value tree into the segment: measure, allocate one block,
 *        write it in one pass.
 * @param[in] seg segment
 * @param[in] val description (caller memory; read only during the call)
 * @param[out] ref reference to the new object, owned by the caller
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description (see
 *         shmobj_obj_size()), or duplicate dict keys, set members or field
 *         names, or a reference or record that does not fit (see
 *         "References" and "Shapes and records")
 * @retval SHMOBJ_ETYPE an adopted or linked reference, or a record's
 *         shape, names a block of the wrong kind
 * @retval SHMOBJ_ESTALE an adopted or linked object, or a record's shape,
 *         was freed (or the shape is being freed)
 * @retval SHMOBJ_EOWNED an adopted object is owned by a container already
 * @retval SHMOBJ_ENOMEM the segment has no block that large
 * @retval SHMOBJ_ECORRUPT the segment's heap, or a shape the description
 *         names, is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (allocation takes the segment lock). The
 *       object is private to the caller until it publishes the reference.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put(shmobj_segment *seg, const shmobj_value *val,
                              shmobj_ref *ref);

/**
 * @brief Put a single int64 (a shared counter).
 * @param[in] seg segment
 * @param[in] x value
 * @param[out] ref reference to the new object
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put_int(shmobj_segment *seg, int64_t x, shmobj_ref *ref);

/**
 * @brief Put a single double.
 * @param[in] seg segment
 * @param[in] x value
 * @param[out] ref reference to the new object
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put_double(shmobj_segment *seg, double x, shmobj_ref *ref);

/**
 * @brief Put a string.
 * @param[in] seg segment
 * @param[in] s UTF-8 text
 * @param[in] len bytes, or SHMOBJ_STRLEN when s is NUL-terminated
 * @param[out] ref reference to the new object
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or invalid UTF-8
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put_str(shmobj_segment *seg, const char *s, size_t len,
                                  shmobj_ref *ref);

/**
 * @brief Put bytes (copied at memcpy speed).
 * @param[in] seg segment
 * @param[in] p bytes (may be NULL when n is 0)
 * @param[in] n length
 * @param[out] ref reference to the new object
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put_bytes(shmobj_segment *seg, const void *p, size_t n,
                                    shmobj_ref *ref);

/**
 * @brief Put a C-ordered buffer, copying its data in (memcpy speed), or
 *        allocate it empty to be filled in place (zero copy).
 * @param[in] seg segment
 * @param[in] dtype enum shmobj_dtype
 * @param[in] ndim dimensions, 0..SHMOBJ_BUFFER_MAXDIM
 * @param[in] shape ndim extents (may be NULL when ndim is 0)
 * @param[in] data prod(shape) * itemsize bytes to copy, or NULL to leave
 *            the data unset
 * @param[out] ref reference to the new object
 * @param[out] out_data this process's address of the data (64-aligned), to
 *             fill in place; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, bad dtype, ndim or shape
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Data left unset holds whatever the heap
 *       block held before: fill it before publishing the reference.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_put_buffer(shmobj_segment *seg, unsigned dtype,
                                     unsigned ndim, const uint64_t *shape,
                                     const void *data, shmobj_ref *ref,
                                     void **out_data);

/**
 * @brief Free an object and its whole tree, items replaced later included.
 * @param[in] seg segment
 * @param[in] ref reference from shmobj_obj_put()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL seg or null ref, or ref names no block of this
 *         segment (see shmobj_obj_get())
 * @retval SHMOBJ_ETYPE ref names a live block that is not an object (left
 *         alone)
 * @retval SHMOBJ_ESTALE the object was already freed (perhaps reused)
 * @retval SHMOBJ_EACCES the object was adopted by a container, which owns
 *         it (left alone)
 * @retval SHMOBJ_EINUSE ref names a shape that records still use (left
 *         alone; see shmobj_shape_free())
 * @retval SHMOBJ_ECORRUPT the object's header or tree is damaged (the blocks
 *         that could be reached are freed)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe against other allocations. Nobody may use
 *       the object afterwards: calls through views of it give
 *       SHMOBJ_ESTALE (::shmobj_view says what that check covers and what
 *       it cannot see), and so do references held elsewhere.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_free(shmobj_segment *seg, shmobj_ref ref);

/**
 * @brief Validate an object graph from an untrusted segment: every tag,
 *        offset, length, count, index and string, bounded in depth
 *        (SHMOBJ_OBJ_MAXDEPTH) and in work (proportional to the segment).
 * @param[in] seg segment
 * @param[in] ref object reference
 * @retval 0 the graph is well formed
 * @retval SHMOBJ_EINVAL NULL seg or null ref, or ref names no block of this
 *         segment (see shmobj_obj_get())
 * @retval SHMOBJ_ETYPE ref names a live block that is not an object
 * @retval SHMOBJ_ESTALE ref (or a reference inside) names a freed block
 * @retval SHMOBJ_ECORRUPT anything is malformed, too deep or too large
 *         (including a reference inside that names no block or a block
 *         that is not an object)
 * @note Thread- and process-safe; lock-free. A graph that another process
 *       changes meanwhile may be reported either way.
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_check(shmobj_segment *seg, shmobj_ref ref);

/* ---- views ------------------------------------------------------------ */

/**
 * @brief Open a view of the value an object reference names.
 *
 * What the reference names decides the error. A reference that names no
 * arena block of this segment (an offset beyond the heap or below it, not
 * 16-aligned, or where the arena finds no block header) is a bad argument.
 * A live block is an object block exactly when it begins with the object
 * tree magic (doc/format-object.md); any other live block (a raw
 * allocation, a map's, a queue's or a message's block) is the wrong kind.
 * Only an object block whose header disagrees with itself or its block,
 * or whose root slot is damaged, is reported as damage. A reference made
 * up to point inside another block may also be taken for a freed block
 * (SHMOBJ_ESTALE): the bytes there can look like a block header.
 *
 * @param[in] seg segment
 * @param[in] ref object reference
 * @param[out] view the view
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or null ref, or ref names no block of
 *         this segment
 * @retval SHMOBJ_ETYPE ref names a live block that is not an object
 * @retval SHMOBJ_ESTALE the object was freed
 * @retval SHMOBJ_ECORRUPT the object block's header or root is damaged
 * @note Thread- and process-safe; lock-free. O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_obj_get(shmobj_segment *seg, shmobj_ref ref, shmobj_view *view);

/**
 * @brief The kind of value a view shows.
 * @param[in] view a filled view
 * @return an enum shmobj_type value, or an enum shmobj_type_ref one
 *         (SHMOBJ_TYPE_SHAPE, SHMOBJ_TYPE_RECORD, SHMOBJ_TYPE_LINK); 0 for
 *         a NULL view
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_type(const shmobj_view *view);

/**
 * @brief Length: items of a list, tuple, set, struct or dict (pairs), bytes
 *        of a string (without NUL), bytes, or a buffer's data; the rows of
 *        a table (shmobj/table.h, since 0.4).
 * @param[in] view a filled view
 * @param[out] len the length
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE a scalar or null has no length
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT a mutable container's or a table's control block
 *         is damaged
 * @note Thread- and process-safe. O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_len(const shmobj_view *view, size_t *len);

/**
 * @brief Item i of a list, tuple or struct, value i of a dict, member i of
 *        a set (in creation order).
 * @param[in] view container
 * @param[in] i index
 * @param[out] item view of the item
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a container
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view), or
 *         the item names a freed block
 * @retval SHMOBJ_ECORRUPT the item is damaged
 * @note Thread- and process-safe; lock-free. O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_item(const shmobj_view *view, size_t i, shmobj_view *item);

/**
 * @brief Key i of a dict, member i of a set, or the name (a string) of
 *        field i of a struct.
 * @param[in] view dict, set or struct
 * @param[in] i index
 * @param[out] key view of the key (read-only)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a dict, set or named struct
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ECORRUPT the key is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe; lock-free. O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_key(const shmobj_view *view, size_t i, shmobj_view *key);

/**
 * @brief Position of a key in a dict or set, or of a field name (a STR key)
 *        in a struct, through the index built at creation.
 * @param[in] view dict, set or named struct
 * @param[in] key description of an INT, STR or BYTES key
 * @param[out] i its position (for shmobj_view_item())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key of another kind
 * @retval SHMOBJ_ETYPE view is not a dict, set or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ECORRUPT the index or a key is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe; lock-free. O(1) expected; bounded by the
 *       index size on a damaged index.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_index(const shmobj_view *view, const shmobj_value *key,
                                 size_t *i);

/**
 * @brief Value of a dict (or field of a struct) by key.
 * @param[in] view dict or named struct
 * @param[in] key description of an INT, STR or BYTES key
 * @param[out] item view of the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key of another kind
 * @retval SHMOBJ_ETYPE view is not a dict or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view), or
 *         the value names a freed block
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe; lock-free. O(1) expected.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_get(const shmobj_view *view, const shmobj_value *key,
                               shmobj_view *item);

/**
 * @brief A field by name: the value of a dict under a string key, or the
 *        field of a named struct.
 * @param[in] view dict or named struct
 * @param[in] key NUL-terminated key or field name
 * @param[out] item view of the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a dict or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view), or
 *         the value names a freed block
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe; lock-free. O(1) expected. For a field
 *       read in a loop, shmobj_key_init() once and shmobj_view_get_key()
 *       skip hashing the name on every call.
 * @since 0.2
 */
SHMOBJ_API int shmobj_field_get(const shmobj_view *view, const char *key,
                                shmobj_view *item);

/**
 * @brief The former name of shmobj_field_get(), which it calls: it reads
 *        as "get the string" but gets by string key.
 * @deprecated Use shmobj_field_get(); this name stays for the rest of ABI
 *             version 0 (doc/versioning.md).
 * @copydetails shmobj_field_get
 */
SHMOBJ_API int shmobj_view_get_str(const shmobj_view *view, const char *key,
                                   shmobj_view *item);

/**
 * @brief Read an int64 field by name: shmobj_field_get(), then
 *        shmobj_int_get().
 *
 * shmobj_field_uint_get(), shmobj_field_double_get() and
 * shmobj_field_bool_get() do the same for their kinds, with this
 * description.
 * @param[in] view dict or named struct
 * @param[in] name NUL-terminated key or field name
 * @param[out] out the value (a bool's: 0 or 1)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a dict or named struct, or the field is
 *         not of the kind the call reads
 * @retval SHMOBJ_ENOTFOUND no such field
 * @retval SHMOBJ_ESTALE the view's block or the field's was freed
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe; lock-free (atomic load, acquire).
 * @since 0.2
 */
SHMOBJ_API int shmobj_field_int_get(const shmobj_view *view, const char *name,
                                    int64_t *out);

/**
 * @brief Read a uint64 field by name.
 * @copydetails shmobj_field_int_get
 */
SHMOBJ_API int shmobj_field_uint_get(const shmobj_view *view, const char *name,
                                     uint64_t *out);

/**
 * @brief Read a double field by name.
 * @copydetails shmobj_field_int_get
 */
SHMOBJ_API int shmobj_field_double_get(const shmobj_view *view, const char *name,
                                       double *out);

/**
 * @brief Read a bool field by name.
 * @copydetails shmobj_field_int_get
 */
SHMOBJ_API int shmobj_field_bool_get(const shmobj_view *view, const char *name,
                                     int *out);

/**
 * @brief Read a string field by name, in place (see shmobj_field_int_get()
 *        and shmobj_str_get()).
 * @param[in] view dict or named struct
 * @param[in] name NUL-terminated key or field name
 * @param[out] s the NUL-terminated UTF-8 bytes in the segment
 * @param[out] len their length without the NUL; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a dict or named struct, or the field is
 *         not a string
 * @retval SHMOBJ_ENOTFOUND no such field
 * @retval SHMOBJ_ESTALE the view's block or the field's was freed
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe. The bytes stay valid while the string's
 *       block is not freed (see ::shmobj_view).
 * @since 0.2
 */
SHMOBJ_API int shmobj_field_str_get(const shmobj_view *view, const char *name,
                                    const char **s, size_t *len);

/**
 * @brief Prepare a key for shmobj_view_index_key() and shmobj_view_get_key().
 * @param[out] key the prepared key
 * @param[in] value description of an INT, STR or BYTES key (a string's
 *            length may be SHMOBJ_STRLEN); its bytes are referenced, not
 *            copied
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, a key of another kind, or a NULL
 *         pointer with a non-zero length
 * @note Thread-safe; touches no segment.
 * @since 0.1
 */
SHMOBJ_API int shmobj_key_init(shmobj_key *key, const shmobj_value *value);

/**
 * @brief shmobj_view_index() with a prepared key.
 * @param[in] view dict, set or named struct
 * @param[in] key a key prepared by shmobj_key_init()
 * @param[out] i its position (for shmobj_view_item())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key not prepared
 * @retval SHMOBJ_ETYPE view is not a dict, set or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ECORRUPT the index or a key is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe; lock-free. O(1) expected.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_index_key(const shmobj_view *view, const shmobj_key *key,
                                     size_t *i);

/**
 * @brief shmobj_view_get() with a prepared key.
 * @param[in] view dict or named struct
 * @param[in] key a key prepared by shmobj_key_init()
 * @param[out] item view of the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key not prepared
 * @retval SHMOBJ_ETYPE view is not a dict or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view), or
 *         the value names a freed block
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe; lock-free. O(1) expected.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_get_key(const shmobj_view *view, const shmobj_key *key,
                                   shmobj_view *item);

/**
 * @brief Replace the value a view names (an item of a list, a dict value, a
 *        struct field or a top-level value) and update the view.
 *
 * A scalar slot takes a value of its own type (an atomic store). A slot
 * holding an object or null takes any non-scalar value or null: the new
 * value is written into a block of its own, published with one atomic
 * exchange, and the old value is freed if it had a block of its own (an
 * old value written with its parent stays, unused, until the parent is
 * freed; a record among it gives its shape's use back at once). A link
 * slot takes another link (SHMOBJ_VAL_LINK(), one atomic store), and no
 * other slot does; an adopted object is named inside the new value's
 * description (SHMOBJ_VAL_ADOPT() as the value itself is SHMOBJ_EINVAL).
 *
 * @param[in,out] view the item; afterwards it shows the new value
 * @param[in] val description of the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE the value's kind does not fit the slot
 * @retval SHMOBJ_EACCES the item is immutable (tuple item, key, member)
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_EOWNED the new value adopts an object owned already
 *         (nothing changed)
 * @retval SHMOBJ_ESTALE the block holding the slot was freed (see
 *         ::shmobj_view), or an object or shape the new value refers to
 *         was freed: nothing changed; or the new value is in place but
 *         the view could not be refreshed, because other processes replaced
 *         the value again each of the 64 times it tried
 * @retval SHMOBJ_ECORRUPT the slot is damaged (nothing changed), or the new
 *         value is in place but the old one is damaged (what could be
 *         reached of it was freed)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe for the slot itself: two concurrent
 *       replacements each free exactly one old value. But no process may
 *       still read the old object (hold a view of it or of anything inside
 *       it) when it is replaced: its memory is freed and may be reused.
 *       Coordinate with the readers first (the queue's completion protocol,
 *       or a lock of your own). Views of scalar items need no such care.
 *       Taking a view of the item while it is being replaced
 *       (shmobj_view_item() and the like) is safe: it names the old value
 *       or the new one and does not fail because of the replacement
 *       (unless the item is replaced again each of the 64 times it
 *       follows it: then SHMOBJ_ESTALE); the rule above applies to holding
 *       that view afterwards.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_set(shmobj_view *view, const shmobj_value *val);

/* ---- scalars ---------------------------------------------------------- */

/**
 * @brief Read a bool.
 * @param[in] view bool value
 * @param[out] out 0 or 1
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a bool
 * @retval SHMOBJ_ESTALE the value's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire).
 * @since 0.1
 */
SHMOBJ_API int shmobj_bool_get(const shmobj_view *view, int *out);

/**
 * @brief Store a bool.
 * @param[in] view bool value
 * @param[in] x zero or non-zero
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a bool
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic store, release).
 * @since 0.1
 */
SHMOBJ_API int shmobj_bool_set(const shmobj_view *view, int x);

/**
 * @brief Read an int64.
 * @param[in] view int value
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not an int
 * @retval SHMOBJ_ESTALE the value's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire).
 * @since 0.1
 */
SHMOBJ_API int shmobj_int_get(const shmobj_view *view, int64_t *out);

/**
 * @brief Store an int64.
 * @param[in] view int value
 * @param[in] x the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not an int
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic store, release).
 * @since 0.1
 */
SHMOBJ_API int shmobj_int_set(const shmobj_view *view, int64_t x);

/**
 * @brief Add to an int64 atomically (wraps around like two's complement).
 * @param[in] view int value
 * @param[in] delta amount
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL view
 * @retval SHMOBJ_ETYPE not an int
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was added
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic fetch-add, acq_rel): concurrent
 *       adds from any number of processes lose nothing.
 * @since 0.1
 */
SHMOBJ_API int shmobj_int_add(const shmobj_view *view, int64_t delta, int64_t *old);

/**
 * @brief Compare and swap an int64.
 * @param[in] view int value
 * @param[in,out] expected the value assumed; on SHMOBJ_EBUSY the value found
 * @param[in] desired the value to store when it matched
 * @retval 0 swapped
 * @retval SHMOBJ_EBUSY the value was not *expected (nothing stored)
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not an int
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (strong CAS, acq_rel).
 * @since 0.1
 */
SHMOBJ_API int shmobj_int_cas(const shmobj_view *view, int64_t *expected, int64_t desired);

/**
 * @brief Add to the int64 value of a dict or named struct under a prepared
 *        key in one call (`record["health"] += delta`): the fast path for
 *        counters by name.
 * @param[in] view dict or named struct
 * @param[in] key a key prepared by shmobj_key_init()
 * @param[in] delta amount
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key not prepared
 * @retval SHMOBJ_ETYPE view is not a dict or named struct, or the value is
 *         not an int
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ECORRUPT the index, a key or the value's slot is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed: nothing was added
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic fetch-add, acq_rel); lock-free.
 *       O(1) expected.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_key_int_add(const shmobj_view *view, const shmobj_key *key,
                                       int64_t delta, int64_t *old);

/**
 * @brief Add to the int64 item i of a list, struct or dict (values by
 *        position) in one call, without a view of the item: the fast path
 *        for counters.
 * @param[in] view list, struct or dict
 * @param[in] i index of the item
 * @param[in] delta amount
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL view
 * @retval SHMOBJ_ETYPE view is not a list, struct or dict, or the item is
 *         not an int
 * @retval SHMOBJ_EACCES view is a tuple (immutable)
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ECORRUPT the item's slot is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed: nothing was added
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic fetch-add, acq_rel). O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_item_int_add(const shmobj_view *view, size_t i, int64_t delta,
                                   int64_t *old);

/**
 * @brief Read the int64 item i of a list, tuple, struct or dict (values by
 *        position) without a view of the item.
 * @param[in] view list, tuple, struct or dict
 * @param[in] i index of the item
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not such a container, or the item is not an int
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ECORRUPT the item's slot is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire). O(1).
 * @since 0.1
 */
SHMOBJ_API int shmobj_item_int_get(const shmobj_view *view, size_t i, int64_t *out);

/**
 * @brief Read a uint64.
 * @param[in] view uint value
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a uint
 * @retval SHMOBJ_ESTALE the value's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire).
 * @since 0.1
 */
SHMOBJ_API int shmobj_uint_get(const shmobj_view *view, uint64_t *out);

/**
 * @brief Store a uint64.
 * @param[in] view uint value
 * @param[in] x the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a uint
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic store, release).
 * @since 0.1
 */
SHMOBJ_API int shmobj_uint_set(const shmobj_view *view, uint64_t x);

/**
 * @brief Add to a uint64 atomically (modulo 2^64).
 * @param[in] view uint value
 * @param[in] delta amount
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL view
 * @retval SHMOBJ_ETYPE not a uint
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was added
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic fetch-add, acq_rel).
 * @since 0.1
 */
SHMOBJ_API int shmobj_uint_add(const shmobj_view *view, uint64_t delta, uint64_t *old);

/**
 * @brief Compare and swap a uint64.
 * @param[in] view uint value
 * @param[in,out] expected the value assumed; on SHMOBJ_EBUSY the value found
 * @param[in] desired the value to store when it matched
 * @retval 0 swapped
 * @retval SHMOBJ_EBUSY the value was not *expected (nothing stored)
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a uint
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (strong CAS, acq_rel).
 * @since 0.1
 */
SHMOBJ_API int shmobj_uint_cas(const shmobj_view *view, uint64_t *expected, uint64_t desired);

/**
 * @brief Read a double.
 * @param[in] view double value
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a double
 * @retval SHMOBJ_ESTALE the value's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire).
 * @since 0.1
 */
SHMOBJ_API int shmobj_double_get(const shmobj_view *view, double *out);

/**
 * @brief Store a double.
 * @param[in] view double value
 * @param[in] x the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a double
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was stored
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (atomic store, release).
 * @since 0.1
 */
SHMOBJ_API int shmobj_double_set(const shmobj_view *view, double x);

/**
 * @brief Add to a double atomically (a CAS loop).
 * @param[in] view double value
 * @param[in] delta amount
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL view
 * @retval SHMOBJ_ETYPE not a double
 * @retval SHMOBJ_EACCES the value is immutable
 * @retval SHMOBJ_ESTALE the value's block was freed: nothing was added
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe: concurrent adds lose nothing.
 * @since 0.1
 */
SHMOBJ_API int shmobj_double_add(const shmobj_view *view, double delta, double *old);

/**
 * @brief A string's bytes, in place.
 * @param[in] view string value
 * @param[out] s this process's address of the first byte; the string is
 *             NUL-terminated
 * @param[out] len bytes without the NUL; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not a string
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe. Borrowed: valid while the view is.
 * @since 0.1
 */
SHMOBJ_API int shmobj_str_get(const shmobj_view *view, const char **s, size_t *len);

/**
 * @brief A bytes value's bytes, in place.
 * @param[in] view bytes value
 * @param[out] p this process's address of the first byte
 * @param[out] len length; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE not bytes
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe. Borrowed: valid while the view is.
 * @since 0.1
 */
SHMOBJ_API int shmobj_bytes_get(const shmobj_view *view, const void **p, size_t *len);

/**
 * @brief A buffer's data address, dtype, shape and strides.
 * @param[in] view buffer value
 * @param[in,out] info struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ETYPE not a buffer
 * @retval SHMOBJ_ECORRUPT the buffer's header is damaged
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe. The data is writable shared memory: the
 *       library does not synchronise access to it.
 * @since 0.1
 */
SHMOBJ_API int shmobj_buffer_get(const shmobj_view *view, shmobj_buffer_info *info);

/**
 * @brief Bytes of one element of a dtype.
 * @param[in] dtype enum shmobj_dtype
 * @return 1, 2, 4 or 8; 0 for an unknown dtype
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API size_t shmobj_dtype_size(unsigned dtype);

/**
 * @brief Name of a dtype: "i8", ..., "f64", "bool".
 * @param[in] dtype enum shmobj_dtype
 * @return a static string; "?" for an unknown dtype
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API const char *shmobj_dtype_name(unsigned dtype);

/* ---- References --------------------------------------------------------- */

/**
 * @name References
 * A value may refer to an object already put, in two ways.
 *
 * **Adopt** (SHMOBJ_VAL_ADOPT(ref)): the new container takes ownership of
 * the object `ref` names, without copying it. Its slot holds the reference
 * (like an item replaced by shmobj_view_set()), views reach the object as
 * if it had been written inline, and freeing the container (or replacing
 * that item) frees it. From then on the object belongs to the container:
 * shmobj_obj_free() of it is refused with SHMOBJ_EACCES, and adopting it a
 * second time (in another put, twice in one description, or as an item of
 * a mutable container) with SHMOBJ_EOWNED. An object is marked as adopted
 * in its block's header by one atomic operation while the container is
 * written (past 16 marks and shape uses in one put, once it is written),
 * always before its reference is returned; a put that fails takes its
 * marks back. A mutable container (list, dict) adopts an item the same
 * way: marked before the item is stored, the mark given back when the
 * change fails (the caller still owns the object), and cleared when
 * shmobj_mlist_pop() hands the item back to a caller, who then owns (and
 * may free) it; deleting, replacing or clearing the item frees it. A
 * link is held in a mutable container's slot as in a fixed one's. A
 * shape
 * (SHMOBJ_TYPE_SHAPE) cannot be adopted (SHMOBJ_ETYPE: its records would
 * lose it), nor an object whose value is a scalar or null (SHMOBJ_ETYPE:
 * put it inside a container instead). The library cannot tell a named
 * root (shmobj_segment_root_set()) from any other object: adopting one
 * is allowed, and once the container is freed the root's reference names
 * a freed block, so shmobj_obj_get() of it gives SHMOBJ_ESTALE, never
 * another object. A process killed inside the put may leave the objects it
 * adopted marked and owned by nobody (at most those blocks leak).
 *
 * **Link** (SHMOBJ_VAL_LINK(ref)): a weak reference. The slot holds the
 * target's reference, whose 16-bit generation the arena bumps when the
 * target is freed; the link owns nothing (freeing the container leaves
 * the target alone, freeing the target leaves the link dangling). A view
 * of the slot has type SHMOBJ_TYPE_LINK; shmobj_view_follow() opens the
 * target and gives SHMOBJ_ESTALE once it was freed, never another object
 * (within the generation's reach, see ::shmobj_view). Links may form
 * cycles: shmobj_obj_check() and the JSON printer do not follow them (JSON
 * prints `{"$link":offset}`), so both stay bounded. A link slot may be
 * given another link with shmobj_view_set() (one atomic store).
 *
 * Both kinds are values of the builder's common path: they may stand
 * wherever a value of a container, a record field or the top-level value
 * may (not as keys), and shmobj_obj_size() counts a reference's slot only.
 * shmobj_obj_put() gives, besides its other errors, SHMOBJ_EINVAL for a
 * null reference, a reference that names no block of the segment or an
 * object freed (SHMOBJ_ESTALE), a block that is not an object
 * (SHMOBJ_ETYPE), and for adopt the errors above.
 * @{
 */

/**
 * @brief Follow a link: a view of the object a link names. Any other view
 *        is copied unchanged, so code may call it on every view it meets.
 * @param[in] view a view (of a link or of anything else)
 * @param[out] target view of the target's value (its top-level value, as
 *             shmobj_obj_get() gives it); may be the same memory as view
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the target was freed (or the view's own block was):
 *         its offset holds no live object of the link's generation, whatever
 *         now lies there (a free block, another block's payload, bytes
 *         that look like a damaged header); damage of the heap itself is
 *         shmobj_arena_check()'s to report
 * @retval SHMOBJ_ECORRUPT the link's own reference is impossible (0 or not
 *         16-aligned)
 * @note Thread- and process-safe; lock-free. O(1). Following a link to an
 *       object that another process may free at any moment has the limits
 *       of any view (::shmobj_view): coordinate frees with readers. The
 *       O(1) check is the arena's (doc/format-arena.md, Generations): a
 *       freed target's offset inside another block's payload whose bytes
 *       reproduce a whole used block of the link's generation, with the
 *       tree header and a valid root, is taken for the target.
 * @since 0.2
 */
SHMOBJ_API int shmobj_view_follow(const shmobj_view *view, shmobj_view *target);

/**
 * @brief The reference a link holds (not checked: it may name an object
 *        freed since).
 * @param[in] view view of a link
 * @param[out] ref the target's reference
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE the view is not a link
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe (atomic load, acquire).
 * @since 0.2
 */
SHMOBJ_API int shmobj_link_get(const shmobj_view *view, shmobj_ref *ref);

/** @} */

/* ---- Shapes and records -------------------------------------------------- */

/**
 * @name Shapes and records
 * A *shape* is a list of field names and kinds built once in the segment
 * (shmobj_shape_put()); a *record* of that shape holds only its values,
 * one 16-byte slot per field, and names its shape: no names, no index per
 * record. A record standing alone takes 16 x fields + 16 bytes (its header
 * is its block's), plus its strings' and bytes' own bytes and a NUL each
 * (written in the record, after its slots, without a header of their
 * own), plus what its object fields hold; inside a container, 16 x fields
 * + 16 plus the same. (The arena adds its 16-byte block header to every
 * block.)
 *
 * Records are read like named structs: by position (shmobj_view_item(),
 * shmobj_item_int_add(), shmobj_item_int_get()) and by name through the
 * shape's index (shmobj_field_get(), shmobj_view_get(),
 * shmobj_view_index(), and with keys prepared once shmobj_view_get_key(),
 * shmobj_view_index_key(), shmobj_view_key_int_add()); shmobj_view_key()
 * gives a field's name and shmobj_view_len() the number of fields. JSON
 * prints a record as an object with its field names. Fields are mutable
 * like struct fields.
 *
 * Field kinds (::shmobj_field.kind): SHMOBJ_TYPE_BOOL, _INT, _UINT,
 * _DOUBLE (a scalar slot, updated in place like a struct field's),
 * _STR and _BYTES (a string or bytes inline in the record, immutable
 * like every string: shmobj_view_set() of it gives SHMOBJ_EACCES; at most
 * `capacity` bytes when capacity is not 0, which is also the size of the
 * char array shmobj_record_put_struct() reads), SHMOBJ_TYPE_LINK (a link),
 * and SHMOBJ_TYPE_NULL (null or any object but a string or bytes: a
 * container, a nested record, an adopted object; replaceable with
 * shmobj_view_set(); a tuple of strings is held packed, its header in the
 * field's slot, each string's bytes and its NUL after the record's, no
 * slot per item). A record's description (SHMOBJ_VAL_RECORD()) gives
 * one value per field in the shape's order, each of the field's kind;
 * shmobj_obj_put() refuses anything else with SHMOBJ_EINVAL (also a string
 * longer than its capacity, a count other than the shape's), a shape
 * reference that names no shape with SHMOBJ_ETYPE (or SHMOBJ_EINVAL when
 * it names no block), and a shape freed or being freed with
 * SHMOBJ_ESTALE.
 *
 * Reading a record checks its shape: the shape's block must lie in the
 * segment, carry the reference's generation and hold a whole shape of the
 * record's number of fields (SHMOBJ_ECORRUPT otherwise, SHMOBJ_ESTALE for
 * a freed shape); shmobj_obj_check() also checks the shape's block with
 * the allocator and every field's kind and capacity. A shape's own
 * top-level view (shmobj_obj_get() of a shape) has type SHMOBJ_TYPE_SHAPE:
 * shmobj_view_len() gives its fields, shmobj_view_key() their names, and
 * JSON prints `{"$shape":{"name":"kind",...}}`.
 *
 * **Lifetime.** A shape is immutable and shared by its records. Every
 * record holds a use of its shape, taken (an atomic add on the shape's
 * use count) before the record is written and given back when the record
 * goes (its block freed, or the item holding it replaced); freeing a shape
 * still in use is refused with SHMOBJ_EINUSE. A shape being freed is
 * marked first (one compare-and-swap from a count of 0), so a record put
 * racing the free either takes its use first (and the free is refused) or
 * is refused itself with SHMOBJ_ESTALE. A process killed between two
 * steps errs on the side of a count too high: the shape then stays
 * allocated for good (a leak of one block), and no record is left naming
 * a freed shape; a process killed while freeing a block of records may
 * have given some of their uses back before the block's own free, and a
 * record whose shape was freed all the same reads as SHMOBJ_ESTALE (the
 * shape's generation), never another shape.
 * @{
 */

/**
 * @brief One field of a shape: input of shmobj_shape_put().
 */
typedef struct shmobj_field {
    const char *name;  /**< NUL-terminated UTF-8, distinct within the shape */
    uint32_t kind;     /**< enum shmobj_type: BOOL, INT, UINT, DOUBLE, STR,
                            BYTES, LINK, or NULL for any object */
    uint32_t capacity; /**< STR, BYTES: most bytes (0: any length); other
                            kinds: 0 */
    uint64_t offset;   /**< where shmobj_record_put_struct() reads the field
                            in the caller's C struct (offsetof) */
} shmobj_field;

/** @brief A field of a C struct: SHMOBJ_FIELD_OF(struct pos, x, SHMOBJ_TYPE_DOUBLE). */
#define SHMOBJ_FIELD_OF(ctype, member, kind_) \
    ((shmobj_field){#member, (kind_), 0, offsetof(ctype, member)})
/** @brief A char array of a C struct as a string field of that capacity. */
#define SHMOBJ_FIELD_STR_OF(ctype, member) \
    ((shmobj_field){#member, SHMOBJ_TYPE_STR, sizeof(((ctype *)0)->member), \
                    offsetof(ctype, member)})

/**
 * @brief Build a shape in the segment.
 * @param[in] seg segment
 * @param[in] fields n field descriptions (caller memory, read during the
 *            call only)
 * @param[in] n fields, 1 to 65535
 * @param[out] shape reference to the shape, owned by the caller (free it
 *             with shmobj_shape_free() once no record uses it)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, n out of range, a NULL or invalid
 *         UTF-8 name, two equal names, a bad kind, or a capacity given for
 *         a kind other than STR and BYTES
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (allocation takes the segment lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_shape_put(shmobj_segment *seg, const shmobj_field *fields, size_t n,
                                shmobj_ref *shape);

/**
 * @brief Free a shape no record uses any more. shmobj_obj_free() of a
 *        shape does the same.
 * @param[in] seg segment
 * @param[in] shape reference from shmobj_shape_put()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL seg or null ref, or ref names no block of this
 *         segment
 * @retval SHMOBJ_ETYPE ref names something other than a shape
 * @retval SHMOBJ_EINUSE records of the shape still exist (nothing freed)
 * @retval SHMOBJ_ESTALE the shape was already freed, or another process is
 *         freeing it
 * @retval SHMOBJ_ECORRUPT the shape's block is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (a compare-and-swap on the use count,
 *       then the allocator's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_shape_free(shmobj_segment *seg, shmobj_ref shape);

/**
 * @brief Put a record of a shape from a C struct, in one call: each field
 *        is read at its ::shmobj_field.offset in `c`.
 *
 * What is read at the offset, by kind: BOOL a `bool` (one byte), INT an
 * `int64_t`, UINT a `uint64_t`, DOUBLE a `double`, STR with a capacity a
 * `char[capacity]` (up to its first NUL, or all of it), STR without one a
 * `const char *` (NUL-terminated, not NULL), BYTES (capacity required) a
 * `uint8_t[capacity]` (all of it), LINK a ::shmobj_ref (not null), and
 * NULL (any object) a ::shmobj_ref that the record adopts, or
 * SHMOBJ_REF_NULL for null.
 *
 * @param[in] seg segment
 * @param[in] shape the shape
 * @param[in] c the caller's struct laid out as the shape's offsets say
 * @param[out] ref reference to the new record, owned by the caller
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, invalid UTF-8, a NULL string
 *         pointer, a BYTES field without a capacity, a null link, or a
 *         reference that names no block of this segment
 * @retval SHMOBJ_ETYPE shape is not a shape, or a link, an adopted object
 *         is not an object (or cannot be adopted, see "References")
 * @retval SHMOBJ_ESTALE the shape (or a referred object) was freed or is
 *         being freed
 * @retval SHMOBJ_EOWNED an adopted object is owned already
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the shape or the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. The record is private to the caller
 *       until it publishes the reference. The offsets, kinds and
 *       capacities are read from the shape in the segment, and `c` is read
 *       where they say: give it only a shape made from this C struct's own
 *       field table (a shape another program made, or a damaged one, may
 *       name offsets beyond the struct, and a damaged kind makes an integer
 *       read as a string pointer).
 * @deprecated Trusts the offsets and kinds it reads from the segment. Use
 *       shmobj_record_put_fields(), which reads `c` only where the
 *       caller's own table says.
 * @since 0.2
 */
SHMOBJ_API int shmobj_record_put_struct(shmobj_segment *seg, shmobj_ref shape,
                                        const void *c, shmobj_ref *ref);

/**
 * @brief Put a record of a shape from a C struct, in one call, reading the
 *        struct where the caller's own field table says.
 *
 * `fields` is the table the shape was made from (shmobj_shape_put()), in
 * the same order; each field is read at its ::shmobj_field.offset in `c`,
 * as shmobj_record_put_struct() describes by kind. The shape's count and
 * each field's kind and capacity must be the table's (names are not
 * compared): the caller's memory is read only where the caller said, so a
 * damaged or foreign shape is refused, never followed.
 *
 * @param[in] seg segment
 * @param[in] shape the shape
 * @param[in] fields the caller's field table
 * @param[in] nfields entries in `fields`
 * @param[in] c the caller's struct, laid out as `fields` says
 * @param[out] ref reference to the new record, owned by the caller
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument; `fields` does not match the shape
 *         (count, a kind or a capacity); invalid UTF-8, a NULL string
 *         pointer, a null link, or a reference that names no block of
 *         this segment
 * @retval SHMOBJ_ETYPE shape is not a shape, or a link, an adopted object
 *         is not an object (or cannot be adopted, see "References")
 * @retval SHMOBJ_ESTALE the shape (or a referred object) was freed or is
 *         being freed
 * @retval SHMOBJ_EOWNED an adopted object is owned already
 * @retval SHMOBJ_ENOMEM the segment is full
 * @retval SHMOBJ_ECORRUPT the shape or the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. The record is private to the caller
 *       until it publishes the reference. Costs one comparison of kind and
 *       capacity per field over shmobj_record_put_struct().
 * @since 0.2
 */
SHMOBJ_API int shmobj_record_put_fields(shmobj_segment *seg, shmobj_ref shape,
                                        const shmobj_field *fields, size_t nfields,
                                        const void *c, shmobj_ref *ref);

/**
 * @brief The shape of a record.
 * @param[in] view record
 * @param[out] shape the shape's reference
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE the view is not a record
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
 * @note Thread- and process-safe. O(1).
 * @since 0.2
 */
SHMOBJ_API int shmobj_record_shape(const shmobj_view *view, shmobj_ref *shape);

/** @} */

/* ---- mutable containers ------------------------------------------------ */

/**
 * @name Mutable containers
 *
 * A growable list (::SHMOBJ_TYPE_MLIST), a mutable dict
 * (::SHMOBJ_TYPE_MDICT) and a mutable set (::SHMOBJ_TYPE_MSET), next to
 * the fixed kinds (which stay the fast read-only form). A mutable
 * container is a value like any other: describe an empty one with
 * SHMOBJ_VAL_MLIST(), SHMOBJ_VAL_MDICT() or SHMOBJ_VAL_MSET() and put it
 * alone (its reference may be a named root, shmobj_segment_root_set()) or
 * nested anywhere in a description; then change it through a view of it
 * with the calls below, from any number of processes at once.
 *
 * **Items.** Scalar items (bool, int, uint, double) and null are held in
 * the container's slots; any other value (string, bytes, buffer, fixed or
 * mutable container, ...) is built by the same builder as shmobj_obj_put()
 * into a block of its own, a *child* that the container owns: replacing,
 * deleting or clearing an item frees its child, and freeing the container
 * (shmobj_obj_free() of its tree) frees every child. Dict keys and set
 * members are INT, STR or BYTES values; a string key of more than 7 bytes
 * is a child too.
 *
 * **Writers** are serialised per container by the library's lock (the
 * same lock as the segment's and the map's: bounded waits, a dead holder
 * detected by the next locker, which repairs the container from the
 * holder's intent record). A writer killed at any instruction leaves the
 * container consistent: a change whose call returned is kept, a change
 * under way is either done or not done, and at most the blocks it had
 * allocated and not yet published are leaked when the kill falls between
 * their allocation and their record (a child, a list chunk or a dict
 * body).
 *
 * **Readers** take no lock: they read under the container's sequence
 * counter and keep what they read only when no writer changed the
 * container meanwhile (else they read again; after many tries, or when a
 * writer seems stuck, they take the lock once, which also repairs a
 * container whose writer died). So a reader sees every container either
 * as it was before a change or as it is after, never half changed, and
 * every read is bounds-checked: a damaged container gives
 * SHMOBJ_ECORRUPT (readers check each offset against the segment and each
 * block's generation, one load; shmobj_obj_check() also proves every
 * chunk and body with the arena, so a reference moved inside its own
 * block is found by the check, and may be read by a reader as other
 * in-bounds bytes). Memory a change frees (an old dict body, a child) stays
 * mapped, and nothing read from it is used unless the sequence counter
 * says it was not freed before the read ended.
 *
 * **Views of items.** A view returned by these calls (or by
 * shmobj_view_item() and the lookups) is read-only (writes go through the
 * container) and is a view of what the container held when the call
 * returned:
 * - a view of a child follows the child's block: once the item is deleted
 *   or replaced by any process, calls through it give SHMOBJ_ESTALE (the
 *   child's block was freed), never another object's bytes;
 * - a view of a scalar item reads its slot: a dict value or set member
 *   keeps its slot until its key is deleted (the old value stays readable
 *   there) or the body is rebuilt (then SHMOBJ_ESTALE); a list item view
 *   names a position, which after an insert or delete before it shows the
 *   item moved there; a slot given an item of another kind gives
 *   SHMOBJ_ETYPE or SHMOBJ_ESTALE, never the bits of another kind.
 *
 * **Iteration** of a dict or set (shmobj_miter_next()) follows insertion
 * order and promises what the shared map promises: every key present for
 * the whole iteration is returned exactly once, whatever other processes
 * insert, delete or set meanwhile; a key inserted or deleted during the
 * iteration may or may not be returned. A list is iterated by index
 * (shmobj_mlist_get()).
 *
 * @{
 */

/** @brief Describe an empty growable list. */
#define SHMOBJ_VAL_MLIST() SHMOBJ__VAL0(SHMOBJ_TYPE_MLIST)
/** @brief Describe an empty mutable dict. */
#define SHMOBJ_VAL_MDICT() SHMOBJ__VAL0(SHMOBJ_TYPE_MDICT)
/** @brief Describe an empty mutable set. */
#define SHMOBJ_VAL_MSET() SHMOBJ__VAL0(SHMOBJ_TYPE_MSET)

/**
 * @brief Append an item to a growable list. Amortised O(1): items live in
 *        chunks that double in size and never move when the list grows.
 * @param[in] list view of a list
 * @param[in] val the item (scalars held inline, anything else built as a
 *            child)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_EOWNED val adopts (SHMOBJ_VAL_ADOPT()) an object that a
 *         container owns already (nothing changed)
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s, or
 *         was in the middle of an append without the lock for some
 *         seconds
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. A scalar or null is appended without
 *       the list's lock while no writer holds it: the appender reserves
 *       its place with one atomic add, writes its slot and moves the
 *       length over every written place, waiting for no other appender.
 *       It returns once its item is written; the item is counted in the
 *       length once every place reserved before it is written too, so
 *       another process's length may lag behind appends that returned
 *       while an appender is descheduled between its reservation and its
 *       write. A place whose appender died (or stayed unwritten for 1 s)
 *       is given a null by the next reader or writer that finds it
 *       holding the length back. Each process's items keep the order of
 *       its calls, and the length never goes down but by a removal. Any
 *       other item takes the lock.
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_append(const shmobj_view *list, const shmobj_value *val);

/**
 * @brief Insert an item before position i (i == length appends). O(n - i).
 * @param[in] list view of a list
 * @param[in] i position, 0..length
 * @param[in] val the item
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_EOWNED val adopts (SHMOBJ_VAL_ADOPT()) an object that a
 *         container owns already (nothing changed)
 * @retval SHMOBJ_ERANGE i > length
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s, or
 *         was in the middle of an append without the lock for some
 *         seconds
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the list's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_insert(const shmobj_view *list, size_t i,
                                   const shmobj_value *val);

/**
 * @brief Remove the item at position i (negative: from the end, -1 the
 *        last) and hand it to the caller. O(1) at the end, O(n - i)
 *        elsewhere.
 * @param[in] list view of a list
 * @param[in] i position; -length..length-1
 * @param[out] out the item as an object of its own, owned by the caller
 *             (a child is handed over as it is; a scalar or null is written
 *             into a new block); free it with shmobj_obj_free(). NULL: the
 *             item is freed.
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL list
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_ERANGE no item at i (an empty list included)
 * @retval SHMOBJ_ENOMEM no room for the block of a scalar item (nothing
 *         changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s, or
 *         was in the middle of an append without the lock for some
 *         seconds
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the list's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_pop(const shmobj_view *list, int64_t i, shmobj_ref *out);

/**
 * @brief Delete the item at position i (its child is freed). O(n - i).
 * @param[in] list view of a list
 * @param[in] i position
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL list
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ENOMEM the segment is full, and a place an append
 *         reserved lies in a chunk not made yet (its appender died before
 *         it made it): nothing changed
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s, or
 *         was in the middle of an append without the lock for some
 *         seconds
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the list's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_delete(const shmobj_view *list, size_t i);

/**
 * @brief Replace the item at position i (the old item's child is freed).
 * @param[in] list view of a list
 * @param[in] i position
 * @param[in] val the new item, of any kind
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_EOWNED val adopts (SHMOBJ_VAL_ADOPT()) an object that a
 *         container owns already (nothing changed)
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s, or
 *         was in the middle of an append without the lock for some
 *         seconds
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the list's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_set(const shmobj_view *list, size_t i,
                                const shmobj_value *val);

/**
 * @brief Remove every item of a list, dict or set (children freed); the
 *        list keeps its chunks, the dict or set drops its body.
 * @param[in] c view of a growable list, mutable dict or mutable set
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE c is not a mutable container
 * @retval SHMOBJ_ENOMEM a list: the segment is full, and a place an append
 *         reserved lies in a chunk not made yet (its appender died before
 *         it made it): nothing changed
 * @retval SHMOBJ_ESTALE the container's block was freed
 * @retval SHMOBJ_ECORRUPT the container is damaged
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s,
 *         or (a dict) was in the middle of an add without the lock
 *         (shmobj_mdict_int_add()) for some seconds, or (a list) of an
 *         append without the lock for some seconds (nothing changed)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the container's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mut_clear(const shmobj_view *c);

/**
 * @brief View of the item at position i of a list (see "Views of items").
 * @param[in] list view of a list
 * @param[in] i position
 * @param[out] item view of the item
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s while
 *         this reader waited for it, or was in the middle of appending item
 *         i without the lock for some seconds
 * @note Thread- and process-safe; lock-free unless writers keep the list
 *       changing for many tries. An append counts its item in the length
 *       only once the item is written, so a read never waits for one; in
 *       a list last appended to by a library of list format 2 (before
 *       its next locked write) an item whose append is under way may be
 *       counted: it is waited for, and one whose appender died there
 *       reads as null. O(1).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_get(const shmobj_view *list, size_t i, shmobj_view *item);

/**
 * @brief The int64 item at position i of a list, without a view.
 * @param[in] list view of a list
 * @param[in] i position
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE list is not a growable list, or the item is not an int
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s while
 *         this reader waited for it, or was in the middle of appending item
 *         i without the lock for some seconds
 * @note Thread- and process-safe; lock-free as shmobj_mlist_get(). O(1).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mlist_get_int(const shmobj_view *list, size_t i, int64_t *out);

/**
 * @brief Set the value of a key of a mutable dict (insert or replace; the
 *        old value's child is freed). O(1) expected.
 * @param[in] dict view of a dict
 * @param[in] key an INT, STR or BYTES value
 * @param[in] val the value, of any kind
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, a key of another kind, invalid UTF-8
 *         or a bad description
 * @retval SHMOBJ_ETYPE dict is not a mutable dict
 * @retval SHMOBJ_EOWNED val adopts (SHMOBJ_VAL_ADOPT()) an object that a
 *         container owns already (nothing changed)
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ERANGE the dict holds 2^31 pair places
 * @retval SHMOBJ_ESTALE the dict's block was freed
 * @retval SHMOBJ_ECORRUPT the dict is damaged
 * @retval SHMOBJ_EBUSY a live process held the dict's lock for 10 s, or was
 *         in the middle of an add without the lock (shmobj_mdict_int_add())
 *         for some seconds (nothing changed)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the dict's lock). An int set over an int
 *       takes no lock when no other process is adding to or setting the
 *       same dict that way and no writer is changing it (one atomic store).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mdict_set(const shmobj_view *dict, const shmobj_value *key,
                                const shmobj_value *val);

/**
 * @brief View of the value of a key of a mutable dict. O(1) expected.
 * @param[in] dict view of a dict
 * @param[in] key an INT, STR or BYTES value
 * @param[out] val view of the value (see "Views of items")
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key of another kind
 * @retval SHMOBJ_ETYPE dict is not a mutable dict
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the dict's block was freed
 * @retval SHMOBJ_ECORRUPT the dict is damaged
 * @retval SHMOBJ_EBUSY a live process held the dict's lock for 10 s while
 *         this reader waited for it
 * @note Thread- and process-safe; lock-free unless writers keep the dict
 *       changing for many tries.
 * @since 0.2
 */
SHMOBJ_API int shmobj_mdict_get(const shmobj_view *dict, const shmobj_value *key,
                                shmobj_view *val);

/**
 * @brief The int64 value of a key of a mutable dict, without a view.
 * @param[in] dict view of a dict
 * @param[in] key a key prepared by shmobj_key_init()
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key not prepared
 * @retval SHMOBJ_ETYPE dict is not a mutable dict, or the value is not an int
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the dict's block was freed
 * @retval SHMOBJ_ECORRUPT the dict is damaged
 * @retval SHMOBJ_EBUSY a live process held the dict's lock for 10 s while
 *         this reader waited for it
 * @note Thread- and process-safe; lock-free as shmobj_mdict_get().
 * @since 0.2
 */
SHMOBJ_API int shmobj_mdict_get_int(const shmobj_view *dict, const shmobj_key *key,
                                    int64_t *out);

/**
 * @brief Add to the int64 value of a key of a mutable dict
 *        (`d[key] += delta`) in one call.
 *
 * The key must hold an int already: an absent key is SHMOBJ_ENOTFOUND
 * (set it first with shmobj_mdict_set()), unlike shmobj_map_add(), which
 * creates it; and `old` is the value before the add, where
 * shmobj_map_add() gives the value after.
 * @param[in] dict view of a dict
 * @param[in] key a key prepared by shmobj_key_init()
 * @param[in] delta amount (wraps around like two's complement)
 * @param[out] old the value before; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL dict or key, or a key not prepared
 * @retval SHMOBJ_ETYPE dict is not a mutable dict, or the value is not an int
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the dict's block was freed
 * @retval SHMOBJ_ECORRUPT the dict is damaged
 * @retval SHMOBJ_EBUSY a live process held the dict's lock for 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe: concurrent adds lose nothing. An add
 *       takes no lock when no other process is adding to the same dict
 *       and no writer is changing it (one atomic fetch-add on the value,
 *       done the moment it completes); otherwise it takes the dict's lock.
 * @since 0.2
 */
SHMOBJ_API int shmobj_mdict_int_add(const shmobj_view *dict, const shmobj_key *key,
                                    int64_t delta, int64_t *old);

/**
 * @brief Delete a key of a mutable dict or a member of a mutable set (a
 *        child of the key or value is freed). O(1) expected.
 * @param[in] c view of a dict or set
 * @param[in] key an INT, STR or BYTES value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a key of another kind
 * @retval SHMOBJ_ETYPE c is not a mutable dict or set
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the container's block was freed
 * @retval SHMOBJ_ECORRUPT the container is damaged
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the container's lock). A key found
 *       absent by a lock-free read (as shmobj_mut_contains()) returns
 *       SHMOBJ_ENOTFOUND without the lock.
 * @since 0.2
 */
SHMOBJ_API int shmobj_mut_delete(const shmobj_view *c, const shmobj_value *key);

/**
 * @brief Is a key in a mutable dict, or a member in a mutable set?
 * @param[in] c view of a dict or set
 * @param[in] key an INT, STR or BYTES value
 * @retval 0 present
 * @retval SHMOBJ_ENOTFOUND absent
 * @retval SHMOBJ_EINVAL NULL argument or a key of another kind
 * @retval SHMOBJ_ETYPE c is not a mutable dict or set
 * @retval SHMOBJ_ESTALE the container's block was freed
 * @retval SHMOBJ_ECORRUPT the container is damaged
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s
 *         while this reader waited for it
 * @note Thread- and process-safe; lock-free as shmobj_mdict_get().
 * @since 0.2
 */
SHMOBJ_API int shmobj_mut_contains(const shmobj_view *c, const shmobj_value *key);

/**
 * @brief Add a member to a mutable set. O(1) expected.
 * @param[in] set view of a set
 * @param[in] key an INT, STR or BYTES value
 * @retval 0 added
 * @retval SHMOBJ_EEXIST already a member (nothing changed)
 * @retval SHMOBJ_EINVAL NULL argument, a key of another kind or invalid UTF-8
 * @retval SHMOBJ_ETYPE set is not a mutable set
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ERANGE the set holds 2^31 member places
 * @retval SHMOBJ_ESTALE the set's block was freed
 * @retval SHMOBJ_ECORRUPT the set is damaged
 * @retval SHMOBJ_EBUSY a live process held the set's lock for 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (the set's lock).
 * @since 0.2
 */
SHMOBJ_API int shmobj_mset_add(const shmobj_view *set, const shmobj_value *key);

/**
 * @brief A cursor over a mutable dict or set, in the caller's memory (see
 *        "Iteration"). Private fields; no resource is held, so nothing needs
 *        closing.
 */
typedef struct shmobj_miter {
    shmobj_view c;       /**< private: the container */
    uint64_t next_order; /**< private: the smallest insertion order not yet returned */
    uint64_t reserved;   /**< private */
} shmobj_miter;

/**
 * @brief Start iterating a mutable dict or set.
 * @param[in] c view of a dict or set
 * @param[out] it the cursor
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE c is not a mutable dict or set
 * @note Thread-safe; touches no segment.
 * @since 0.2
 */
SHMOBJ_API int shmobj_miter_init(const shmobj_view *c, shmobj_miter *it);

/**
 * @brief The next key (and its value) of an iteration.
 * @param[in,out] it the cursor
 * @param[out] key view of the key or member (read-only); may be NULL
 * @param[out] val view of a dict's value (a set's is null); may be NULL
 * @retval 0 success
 * @retval SHMOBJ_ENOTFOUND no more keys
 * @retval SHMOBJ_EINVAL NULL cursor
 * @retval SHMOBJ_ESTALE the container's block was freed
 * @retval SHMOBJ_ECORRUPT the container is damaged (damaged insertion
 *         orders included: an iteration always ends, within as many calls
 *         as the container has places, with SHMOBJ_ENOTFOUND or this)
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s
 *         while this reader waited for it
 * @note Thread- and process-safe; lock-free as shmobj_mdict_get(). O(log n)
 *       per call (a search of the insertion orders), and O(n) once, in the
 *       call that ends the iteration (the orders proven). The views returned
 *       follow "Views of items": a scalar key or value lies in the body,
 *       so a rebuild by another process makes a view of it SHMOBJ_ESTALE.
 *       The cursor is plain caller memory: copy it before the call, and
 *       call again from the copy to read the same key anew.
 * @since 0.2
 */
SHMOBJ_API int shmobj_miter_next(shmobj_miter *it, shmobj_view *key, shmobj_view *val);

/** @} */

/* ---- JSON ------------------------------------------------------------- */

/**
 * @brief Write a value as compact JSON into a caller's buffer.
 *
 * Strings are escaped (control characters as \\uXXXX, invalid UTF-8 as
 * U+FFFD); doubles print the fewest significant digits that read back as
 * the same double, positional while the decimal exponent is in [-4, 16)
 * (0.1, 3000.0, 0.0001, with ".0" when integral) and as d.ddde+XX beyond
 * (1e+16, 5e-324, 1e-07), and null when not finite; dict keys that are not
 * strings print as strings ("5", "$bytes:0a0b"); bytes print as
 * {"$bytes":N} (with "hex" when N <= 32); a buffer prints as
 * {"$buffer":"f32","shape":[2,3]} without its data; sets and tuples as
 * arrays; structs with names as objects, without as arrays.
 *
 * The work is bounded by the segment's size, not the graph's: each value
 * printed costs one unit, each string (value or key) and bytes key one
 * more per 64 bytes, out of a budget of (the segment's mapped bytes) / 16
 * + 64 units; a well-formed graph costs less (each of its values takes 16
 * bytes of the segment, each string its bytes). A damaged graph
 * that names one large string from many slots stops with SHMOBJ_ECORRUPT
 * after at most about 25 bytes of output per byte of the segment, plus
 * 25 KB.
 *
 * @param[in] view value
 * @param[out] buf destination (may be NULL when cap is 0)
 * @param[in] cap bytes at buf
 * @param[out] len length of the JSON text without the NUL (also on
 *             SHMOBJ_ENOBUFS; on an error, of the text produced before it);
 *             may be NULL
 * @retval 0 success: buf holds the text and a NUL
 * @retval SHMOBJ_ENOBUFS cap < *len + 1; buf holds a NUL-terminated prefix
 * @retval SHMOBJ_EINVAL NULL view
 * @retval SHMOBJ_ESTALE the view's block or an item's was freed
 * @retval SHMOBJ_ECORRUPT the graph is damaged, too deep, or costs more
 *         than the budget above
 * @note Thread- and process-safe; lock-free.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_json(const shmobj_view *view, char *buf, size_t cap,
                                size_t *len);

/**
 * @brief Write a value as compact JSON to a stream (format of
 *        shmobj_view_json()).
 * @param[in] view value
 * @param[in] f stream
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the view's block or an item's was freed
 * @retval SHMOBJ_ECORRUPT the graph is damaged, too deep, or costs more
 *         than the budget of shmobj_view_json()
 * @retval SHMOBJ_ESYS writing failed (errno is kept)
 * @note Thread- and process-safe; lock-free.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_json_write(const shmobj_view *view, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_OBJECT_H */
