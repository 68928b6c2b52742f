/**
 * @file shmobj/table.h
 * @brief Tables: records of one shape stored row after row, as the C
 *        struct the shape was made from lays them out.
 *
 * A record of a shape (shmobj/object.h, "Shapes and records") holds one
 * 16-byte slot per field in a block of its own: flexible, but 100,000
 * records of a 40-byte struct of five fields take about 11 MB. A *table*
 * holds many records of one shape as plain rows: the bytes of the C struct
 * whose field table made the shape (SHMOBJ_FIELD_OF() records each field's
 * offset), `row_size` bytes apart, so the same 100,000 rows take 4 MB. A
 * row is appended from that struct and read back into it with one copy;
 * its int and double fields are updated in place with atomics, like a
 * record's, by any number of processes; a column reads as a strided
 * array (::shmobj_buffer_info) with no copy at all.
 *
 * **Layout.** The shape's fields give the layout: each field lies at its
 * offset (::shmobj_field.offset) in the row. Kinds and their bytes:
 * SHMOBJ_TYPE_BOOL one byte (a C `bool`, 0 or 1); SHMOBJ_TYPE_INT and
 * SHMOBJ_TYPE_UINT an `int64_t` or `uint64_t`; SHMOBJ_TYPE_DOUBLE a
 * `double`; SHMOBJ_TYPE_LINK a ::shmobj_ref (8 bytes: a weak reference, 0
 * for none, never followed by the table); SHMOBJ_TYPE_STR a
 * `char[capacity]` (UTF-8 up to its first NUL, or all of it) and
 * SHMOBJ_TYPE_BYTES a `uint8_t[capacity]`, both with a capacity of 1 or
 * more. The 8-byte kinds lie at offsets that are multiples of 8 in a row
 * whose size is one too (what a C compiler gives a struct holding them);
 * fields do not overlap and fit in the row. A shape with another kind (any
 * object), a string without a capacity, or offsets that do not fit is
 * refused by shmobj_table_put() with SHMOBJ_EINVAL.
 *
 * **Growth.** Rows live in chunks that never move: the first holds the
 * capacity given to shmobj_table_put(), and each next one twice the rows
 * of the one before (made by the append that needs it). So a row's address
 * stays valid for the table's life, row i is found in O(1), and a table
 * created with the capacity it will need takes one chunk: its rows cost
 * their bytes and nothing else. A table that grows holds at most twice the
 * rows it uses.
 *
 * **Appends** take the table's lock (the library's lock: bounded waits, a
 * dead holder detected by the next appender, which needs no repair): the
 * rows are written past the length and published by one store of it, so
 * a reader never sees a row half written, nothing appended is lost, and
 * each process's rows keep the order of its calls. A process killed in an
 * append leaves the table as it was before the call (at most the chunk it
 * had just allocated leaks). Readers, row copies, column views and the
 * atomic updates of fields take no lock.
 *
 * **Lifetime.** A table is an object: shmobj_obj_get() gives its view
 * (type SHMOBJ_TYPE_TABLE; shmobj_view_len() its rows, shmobj_view_key()
 * its field names), shmobj_obj_check() validates it whole, JSON prints it
 * as `{"$table":[names],"rows":[[fields of row 0],...]}`, and
 * shmobj_obj_free() frees it with its chunks.
 * It holds one use of its shape (shmobj_shape_free() is refused while it
 * exists). Pointers returned by shmobj_table_row_get() and
 * shmobj_table_column_get() stay valid until the table is freed; like a
 * buffer's data they are not checked again when the caller reads them.
 *
 * **Untrusted segments.** Every call checks what it reads: the table's
 * control block, its shape, each field's place in the row and each chunk's
 * place in the segment; a damaged table gives SHMOBJ_ECORRUPT, never an
 * access outside the segment or the caller's memory (an append reads
 * exactly n x row_size bytes of the caller's, a copy writes exactly
 * row_size).
 */
#ifndef SHMOBJ_TABLE_H
#define SHMOBJ_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/object.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief What shmobj_table_info_get() tells about a table. */
typedef struct shmobj_table_info {
    uint32_t struct_size; /**< sizeof(shmobj_table_info), set by the caller */
    uint32_t row_size;    /**< bytes of a row */
    uint32_t fields;      /**< fields of the shape */
    uint32_t chunks;      /**< chunks made */
    shmobj_ref shape;     /**< the shape */
    uint64_t rows;        /**< rows appended (the length) */
    uint64_t capacity;    /**< rows the chunks made hold */
} shmobj_table_info;

/**
 * @brief Build an empty table of a shape in the segment.
 * @param[in] seg segment
 * @param[in] shape the shape (shmobj_shape_put()), whose fields' kinds and
 *            offsets lay a row out (see "Layout")
 * @param[in] row_size bytes of a row: sizeof the C struct, 1 to 65536
 * @param[in] capacity rows of the first chunk, 1 to 2^32 (the rows the
 *            table holds before it grows)
 * @param[out] table reference to the table, owned by the caller (free it
 *             with shmobj_obj_free())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, row_size or capacity out of range,
 *         a field the table cannot hold or that does not fit (see
 *         "Layout"), or shape names no block of this segment
 * @retval SHMOBJ_ETYPE shape is not a shape
 * @retval SHMOBJ_ESTALE the shape was freed or is being freed
 * @retval SHMOBJ_ENOMEM the segment is full, or the first chunk would be
 *         larger than a block can be (2^46 bytes)
 * @retval SHMOBJ_EBUSY another live process held the segment lock for 10 s
 * @retval SHMOBJ_ECORRUPT the shape or the segment's heap is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe. The table is private to the caller until
 *       it publishes the reference.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_put(shmobj_segment *seg, shmobj_ref shape, size_t row_size,
                                uint64_t capacity, shmobj_ref *table);

/**
 * @brief Append n rows, copied from an array of C structs.
 * @param[in] table view of a table
 * @param[in] rows n rows of row_size bytes each, back to back
 * @param[in] n rows, 1 or more
 * @param[in] row_size the table's row size (sizeof the struct)
 * @param[out] first the index of the first row appended (may be NULL)
 * @retval 0 success: the n rows are the table's, consecutive
 * @retval SHMOBJ_EINVAL NULL argument, n 0, row_size not the table's, a
 *         string field that is not UTF-8 or a bool field neither 0 nor 1
 *         (nothing appended)
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ENOMEM the segment is full, or the next chunk would be
 *         larger than a block can be (nothing appended)
 * @retval SHMOBJ_EBUSY a live process held the table's lock (or, while a
 *         chunk is made, the segment lock) for 10 s
 * @retval SHMOBJ_ECORRUPT the table or its lock word is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe: the table's lock is held while the rows
 *       are written; they become visible together, with one store of the
 *       length. Each process's rows keep the order of its calls.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_append(const shmobj_view *table, const void *rows, size_t n,
                                   size_t row_size, uint64_t *first);

/**
 * @brief The number of rows of a table.
 * @param[in] table view of a table
 * @param[out] rows rows appended so far
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1). Every row below it is whole.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_len(const shmobj_view *table, uint64_t *rows);

/**
 * @brief Copy row i into a C struct.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[out] out row_size bytes of the caller's
 * @param[in] row_size the table's row size (sizeof the struct)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, or row_size not the table's
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ERANGE row >= the length
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1). Each 8-byte field is copied with
 *       one atomic load, so a field updated meanwhile reads as before or
 *       after the update, never torn; fields updated during the copy may
 *       come from different moments.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_get(const shmobj_view *table, uint64_t row, void *out,
                                size_t row_size);

/**
 * @brief The address of row i in this process, and how many rows lie
 *        after it contiguously: a view of a row, or of a run of rows.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[out] p this process's address of the row (row_size bytes)
 * @param[out] run rows from `row` on at p, p + row_size, ... (the rest of
 *             its chunk, at most up to the length; 1 or more); may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ERANGE row >= the length
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1). Borrowed: valid until the table
 *       is freed (rows never move). Iterate a table with
 *       `for (i = 0; i < len; i += run)`. The int and double fields may be
 *       updated by other processes while the caller reads them; read those
 *       with shmobj_table_int_get() or atomic loads when that matters.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_row_get(const shmobj_view *table, uint64_t row, const void **p,
                                    uint64_t *run);

/**
 * @brief The position of a field, by name, for the calls that take one.
 * @param[in] table view of a table
 * @param[in] name NUL-terminated field name
 * @param[out] field its position in the shape, 0 .. fields - 1
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ENOTFOUND the shape has no such field
 * @retval SHMOBJ_ESTALE the table or its shape was freed
 * @retval SHMOBJ_ECORRUPT the table or its shape is damaged
 * @note Thread- and process-safe. Look names up once, outside loops.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_index(const shmobj_view *table, const char *name, size_t *field);

/**
 * @brief A column over a run of rows, as a strided array in place: the
 *        field of rows first, first + 1, ... to the end of first's chunk
 *        (at most up to the length).
 *
 * A BOOL field gives dtype SHMOBJ_DTYPE_BOOL, INT SHMOBJ_DTYPE_I64, UINT
 * and LINK SHMOBJ_DTYPE_U64, DOUBLE SHMOBJ_DTYPE_F64, each of one
 * dimension (shape[0] rows, strides[0] the row size); a STR or BYTES field
 * gives SHMOBJ_DTYPE_U8 in two dimensions (shape {rows, capacity}, strides
 * {row size, 1}). `data` is the field of row `first` (aligned to its
 * kind's size, not to 64 bytes), `nbytes` the bytes from it to the end of
 * the run's last element. A whole column is read run after run:
 * `for (i = 0; i < len; i += info.shape[0])`.
 *
 * @param[in] table view of a table
 * @param[in] field the field's position (shmobj_table_index())
 * @param[in] first the run's first row
 * @param[in,out] info struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ERANGE field >= the fields of the shape, or first >= the
 *         length
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1). Borrowed like
 *       shmobj_table_row_get()'s pointer; the memory is the rows'
 *       themselves (writable shared memory that the library does not
 *       synchronise beyond its own atomic calls).
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_column_get(const shmobj_view *table, size_t field, uint64_t first,
                                       shmobj_buffer_info *info);

/**
 * @brief Size, length, capacity and shape of a table.
 * @param[in] table view of a table
 * @param[in,out] info struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ETYPE table is not a table
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_info_get(const shmobj_view *table, shmobj_table_info *info);

/**
 * @brief Read an INT (or UINT, as its bits) field of row i, atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position (shmobj_table_index())
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not INT or UINT
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1), lock-free (an acquire load).
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_int_get(const shmobj_view *table, uint64_t row, size_t field,
                                    int64_t *out);

/**
 * @brief Store into an INT (or UINT, as its bits) field of row i,
 *        atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[in] x the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not INT or UINT
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, O(1), lock-free (a release store).
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_int_set(const shmobj_view *table, uint64_t row, size_t field,
                                    int64_t x);

/**
 * @brief Add to an INT (or UINT, wrapping) field of row i, atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[in] delta what to add
 * @param[out] old the value before the add (may be NULL)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL table
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not INT or UINT
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, O(1), lock-free (one fetch-add, acq_rel):
 *       no increment is lost, whatever the number of processes adding.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_int_add(const shmobj_view *table, uint64_t row, size_t field,
                                    int64_t delta, int64_t *old);

/**
 * @brief Compare-and-swap an INT (or UINT, as its bits) field of row i.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[in,out] expected the value expected; on SHMOBJ_EBUSY, the value
 *                found
 * @param[in] desired the value stored when the field held *expected
 * @retval 0 success: desired was stored
 * @retval SHMOBJ_EBUSY the field did not hold *expected (nothing stored)
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not INT or UINT
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, O(1), lock-free (acq_rel).
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_int_cas(const shmobj_view *table, uint64_t row, size_t field,
                                    int64_t *expected, int64_t desired);

/**
 * @brief Read a DOUBLE field of row i, atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[out] out the value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not DOUBLE
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @note Thread- and process-safe, O(1), lock-free.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_double_get(const shmobj_view *table, uint64_t row, size_t field,
                                       double *out);

/**
 * @brief Store into a DOUBLE field of row i, atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[in] x the new value
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL table
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not DOUBLE
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, O(1), lock-free.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_double_set(const shmobj_view *table, uint64_t row, size_t field,
                                       double x);

/**
 * @brief Add to a DOUBLE field of row i, atomically.
 * @param[in] table view of a table
 * @param[in] row the row's index
 * @param[in] field the field's position
 * @param[in] delta what to add
 * @param[out] old the value before the add (may be NULL)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL table
 * @retval SHMOBJ_ETYPE table is not a table, or the field is not DOUBLE
 * @retval SHMOBJ_ERANGE row >= the length, or field >= the fields
 * @retval SHMOBJ_ESTALE the table was freed (see ::shmobj_view)
 * @retval SHMOBJ_ECORRUPT the table is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, O(1), lock-free (a compare-and-swap
 *       loop): no add is lost.
 * @since 0.4
 */
SHMOBJ_API int shmobj_table_double_add(const shmobj_view *table, uint64_t row, size_t field,
                                       double delta, double *old);

#ifdef __cplusplus
}
#endif

#endif /* SHMOBJ_TABLE_H */
