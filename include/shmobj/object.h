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
 *        shmobj_obj_put(). Fill it with the SHMOBJ_VAL_* macros (C only:
 *        they are compound literals; from C++ set the fields). 32 bytes.
 *
 * - NULL, BOOL, INT, UINT, DOUBLE: `v.b`, `v.i`, `v.u`, `v.d`.
 * - STR, BYTES: `v.s.ptr`, `v.s.len` (SHMOBJ_STRLEN: NUL-terminated).
 * - LIST, TUPLE, SET: `v.c.items[0 .. v.c.count)`.
 * - DICT: `v.c.items` holds 2 * `v.c.count` values: key, value, key, ...
 *   Keys are INT, STR or BYTES and distinct (so are set members).
 * - STRUCT: `v.c.items[0 .. v.c.count)`, `v.c.names` NULL or count distinct
 *   NUL-terminated field names.
 * - BUFFER: `v.buf` points to a ::shmobj_buffer_desc.
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
    } v; /**< the payload, by type */
} shmobj_value;

/** @brief Describe null. */
#define SHMOBJ_VAL_NULL ((shmobj_value){.type = SHMOBJ_TYPE_NULL})
/** @brief Describe a bool. */
#define SHMOBJ_VAL_BOOL(x) ((shmobj_value){.type = SHMOBJ_TYPE_BOOL, .v = {.b = !!(x)}})
/** @brief Describe an int64. */
#define SHMOBJ_VAL_INT(x) ((shmobj_value){.type = SHMOBJ_TYPE_INT, .v = {.i = (x)}})
/** @brief Describe a uint64. */
#define SHMOBJ_VAL_UINT(x) ((shmobj_value){.type = SHMOBJ_TYPE_UINT, .v = {.u = (x)}})
/** @brief Describe a double. */
#define SHMOBJ_VAL_DOUBLE(x) ((shmobj_value){.type = SHMOBJ_TYPE_DOUBLE, .v = {.d = (x)}})
/**
 * @brief Describe a string from a NUL-terminated C string (not NULL).
 * @note The argument is evaluated twice (pointer and strlen), so pass no
 *       expression with side effects; the length of a literal is a
 *       compile-time constant.
 */
#define SHMOBJ_VAL_STR(cstr) \
    ((shmobj_value){.type = SHMOBJ_TYPE_STR, .v = {.s = {(cstr), strlen(cstr)}}})
/** @brief Describe a string of n bytes of UTF-8. */
#define SHMOBJ_VAL_STRN(p, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_STR, .v = {.s = {(p), (n)}}})
/** @brief Describe n bytes. */
#define SHMOBJ_VAL_BYTES(p, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_BYTES, .v = {.s = {(p), (n)}}})
/** @brief Describe a list of n items from an array. */
#define SHMOBJ_VAL_LIST(items, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_LIST, .v = {.c = {(items), (n), NULL}}})
/** @brief Describe a tuple of n items from an array. */
#define SHMOBJ_VAL_TUPLE(items, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_TUPLE, .v = {.c = {(items), (n), NULL}}})
/** @brief Describe a set of n members from an array. */
#define SHMOBJ_VAL_SET(items, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_SET, .v = {.c = {(items), (n), NULL}}})
/** @brief Describe a dict of n pairs from an array of 2n values (k, v, ...). */
#define SHMOBJ_VAL_DICT(kv, n) \
    ((shmobj_value){.type = SHMOBJ_TYPE_DICT, .v = {.c = {(kv), (n), NULL}}})
/** @brief Describe a struct of n fields, names an array of n C strings or NULL. */
#define SHMOBJ_VAL_STRUCT(items, n, names) \
    ((shmobj_value){.type = SHMOBJ_TYPE_STRUCT, .v = {.c = {(items), (n), (names)}}})
/** @brief Describe a C-ordered buffer; data NULL leaves it to be filled in
 *         place. (The buffer description is a compound literal too.) */
#define SHMOBJ_VAL_BUFFER(dtype_, ndim_, shape_, data_) \
    ((shmobj_value){.type = SHMOBJ_TYPE_BUFFER, \
                    .v = {.buf = &(const shmobj_buffer_desc){(data_), 0, (shape_), \
                                                             NULL, (dtype_), (ndim_)}}})

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
 */
#define SHMOBJ_VAL_LIST_OF(...) SHMOBJ_VAL_LIST(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A tuple of the values given. */
#define SHMOBJ_VAL_TUPLE_OF(...) SHMOBJ_VAL_TUPLE(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A set of the values given. */
#define SHMOBJ_VAL_SET_OF(...) SHMOBJ_VAL_SET(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__))
/** @brief A dict of the values given as key, value, key, value, ... */
#define SHMOBJ_VAL_DICT_OF(...) SHMOBJ_VAL_DICT(SHMOBJ__VALS(__VA_ARGS__), SHMOBJ__NVALS(__VA_ARGS__) / 2)

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
    uint64_t word_;     /**< private: a short string key as a dict holds it */
} shmobj_key;

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
 *         names
 * @retval SHMOBJ_ENOMEM the segment has no block that large
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged
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
 * @retval SHMOBJ_ECORRUPT the object's header or tree is damaged (the blocks
 *         that could be reached are freed)
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
 * @return an enum shmobj_type value; 0 for a NULL view
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_type(const shmobj_view *view);

/**
 * @brief Length: items of a list, tuple, set, struct or dict (pairs), bytes
 *        of a string (without NUL), bytes, or a buffer's data.
 * @param[in] view a filled view
 * @param[out] len the length
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE a scalar or null has no length
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view)
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
 * @brief Value of a dict by string key, or field of a struct by name.
 * @param[in] view dict or named struct
 * @param[in] key NUL-terminated key
 * @param[out] item view of the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE view is not a dict or named struct
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the view's block was freed (see ::shmobj_view), or
 *         the value names a freed block
 * @retval SHMOBJ_ECORRUPT the index, a key or the value is damaged
 * @note Thread- and process-safe; lock-free. O(1) expected.
 * @since 0.1
 */
SHMOBJ_API int shmobj_view_get_str(const shmobj_view *view, const char *key,
                                   shmobj_view *item);

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
 * freed).
 *
 * @param[in,out] view the item; afterwards it shows the new value
 * @param[in] val description of the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE the value's kind does not fit the slot
 * @retval SHMOBJ_EACCES the item is immutable (tuple item, key, member)
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the block holding the slot was freed (see
 *         ::shmobj_view): nothing changed; or the new value is in place but
 *         the view could not be refreshed, because other processes replaced
 *         the value again each of the 64 times it tried
 * @retval SHMOBJ_ECORRUPT the slot is damaged (nothing changed), or the new
 *         value is in place but the old one is damaged (what could be
 *         reached of it was freed)
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
#define SHMOBJ_VAL_MLIST() ((shmobj_value){.type = SHMOBJ_TYPE_MLIST})
/** @brief Describe an empty mutable dict. */
#define SHMOBJ_VAL_MDICT() ((shmobj_value){.type = SHMOBJ_TYPE_MDICT})
/** @brief Describe an empty mutable set. */
#define SHMOBJ_VAL_MSET() ((shmobj_value){.type = SHMOBJ_TYPE_MSET})

/**
 * @brief Append an item to a growable list. Amortised O(1): items live in
 *        chunks that double in size and never move when the list grows.
 * @param[in] list view of a list
 * @param[in] val the item (scalars held inline, anything else built as a
 *            child)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad description
 * @retval SHMOBJ_ETYPE list is not a growable list
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s
 * @note Thread- and process-safe (the list's lock).
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
 * @retval SHMOBJ_ERANGE i > length
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s
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
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s
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
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s
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
 * @retval SHMOBJ_ERANGE i >= length
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ESTALE the list's block was freed
 * @retval SHMOBJ_ECORRUPT the list is damaged
 * @retval SHMOBJ_EBUSY a live process held the list's lock for 10 s
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
 * @retval SHMOBJ_ESTALE the container's block was freed
 * @retval SHMOBJ_ECORRUPT the container is damaged
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s
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
 *         this reader waited for it
 * @note Thread- and process-safe; lock-free unless writers keep the list
 *       changing for many tries. O(1).
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
 *         this reader waited for it
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
 * @retval SHMOBJ_ENOMEM the segment is full (nothing changed)
 * @retval SHMOBJ_ERANGE the dict holds 2^31 pair places
 * @retval SHMOBJ_ESTALE the dict's block was freed
 * @retval SHMOBJ_ECORRUPT the dict is damaged
 * @retval SHMOBJ_EBUSY a live process held the dict's lock for 10 s
 * @note Thread- and process-safe (the dict's lock).
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
 * @note Thread- and process-safe (the dict's lock): concurrent adds lose
 *       nothing.
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
 * @note Thread- and process-safe (the container's lock).
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
 * @retval SHMOBJ_ECORRUPT the container is damaged
 * @retval SHMOBJ_EBUSY a live process held the container's lock for 10 s
 *         while this reader waited for it
 * @note Thread- and process-safe; lock-free as shmobj_mdict_get(). O(log n)
 *       per call (a search of the insertion orders). The views returned
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
