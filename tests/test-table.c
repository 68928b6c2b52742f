/* Tables (shmobj/table.h): rows of one shape stored back to back. The
 * calls on one process, the layouts a table refuses, what 100,000 rows of
 * a 40-byte struct cost against records, columns as strided arrays,
 * atomic updates of fields, appenders in several processes (more than the
 * CPUs) losing nothing and keeping each process's order while readers
 * never see a torn row, an appender stopped or killed at each named step,
 * and damaged bytes answered with SHMOBJ_ECORRUPT, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>

#include <cmocka.h>

#include "format.h"
#include "shmobj.h"
#include "space.h"
#include "test-util.h"
#include "test-shared.h"
#include "test-stall.h"

#define MiB (UINT64_C(1) << 20)
/* SHMOBJ_FIELD_OF() as a constant initializer, for static tables */
#define FIELD(ctype, m, kind) {#m, (kind), 0, offsetof(ctype, m)}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
    return test_xorshift(&rng_state);
}

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 32 * MiB;
    o.max_size = 256 * MiB;
    test_name(f->name, sizeof f->name, "table");
    assert_int_equal(shmobj_segment_create(f->name, &o, &f->seg), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmobj_segment_close(f->seg);
    shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM);
    free(f);
    return 0;
}

/* The struct of most tests: every kind a table holds. */
struct pos {
    double x, y;
    int64_t hits;
    uint64_t flags;
    char tag[12];
    bool ok;
    uint8_t raw[3];
};

static const shmobj_field pos_fields[] = {
    FIELD(struct pos, x, SHMOBJ_TYPE_DOUBLE),
    FIELD(struct pos, y, SHMOBJ_TYPE_DOUBLE),
    FIELD(struct pos, hits, SHMOBJ_TYPE_INT),
    FIELD(struct pos, flags, SHMOBJ_TYPE_UINT),
    {"tag", SHMOBJ_TYPE_STR, 12, offsetof(struct pos, tag)},
    FIELD(struct pos, ok, SHMOBJ_TYPE_BOOL),
    {"raw", SHMOBJ_TYPE_BYTES, 3, offsetof(struct pos, raw)},
};
#define POS_N (sizeof pos_fields / sizeof pos_fields[0])

static struct pos pos_of(uint64_t i)
{
    struct pos p;
    memset(&p, 0, sizeof p);
    p.x = (double)i * 0.5;
    p.y = -(double)i;
    p.hits = (int64_t)i * 3;
    p.flags = i ^ UINT64_C(0xf0f0);
    snprintf(p.tag, sizeof p.tag, "row-%llu", (unsigned long long)i);
    p.ok = i % 2 == 0;
    p.raw[0] = (uint8_t)i;
    p.raw[1] = (uint8_t)(i >> 8);
    p.raw[2] = 0xee;
    return p;
}

static void pos_equal(const struct pos *a, const struct pos *b)
{
    assert_true(a->x == b->x && a->y == b->y);
    assert_int_equal(a->hits, b->hits);
    assert_int_equal(a->flags, b->flags);
    assert_string_equal(a->tag, b->tag);
    assert_int_equal(a->ok, b->ok);
    assert_memory_equal(a->raw, b->raw, 3);
}

/* A shape of pos and a table of it with `cap` rows in its first chunk. */
static shmobj_ref pos_table(shmobj_segment *seg, uint64_t cap, shmobj_ref *shape,
                            shmobj_view *v)
{
    shmobj_ref t;
    assert_int_equal(shmobj_shape_put(seg, pos_fields, POS_N, shape), 0);
    assert_int_equal(shmobj_table_put(seg, *shape, sizeof(struct pos), cap, &t), 0);
    assert_int_equal(shmobj_obj_get(seg, t, v), 0);
    return t;
}

static void test_table_append_get_grows_rows_never_move(void **state)
{
    struct fixture *f = *state;
    shmobj_ref shape, t;
    shmobj_view v;
    t = pos_table(f->seg, 4, &shape, &v);
    assert_int_equal(shmobj_view_type(&v), SHMOBJ_TYPE_TABLE);
    const void *row0 = NULL;
    for (uint64_t i = 0; i < 100; i++) {
        struct pos p = pos_of(i);
        uint64_t at = 999;
        assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, &at), 0);
        assert_int_equal(at, i);
        if (i == 0)
            assert_int_equal(shmobj_table_row_get(&v, 0, &row0, NULL), 0);
    }
    /* a batch: consecutive, across a chunk's end */
    struct pos batch[50];
    for (int j = 0; j < 50; j++)
        batch[j] = pos_of(100 + (uint64_t)j);
    uint64_t first;
    assert_int_equal(shmobj_table_append(&v, batch, 50, sizeof batch[0], &first), 0);
    assert_int_equal(first, 100);
    uint64_t len;
    size_t vlen;
    assert_int_equal(shmobj_table_len(&v, &len), 0);
    assert_int_equal(len, 150);
    assert_int_equal(shmobj_view_len(&v, &vlen), 0);
    assert_int_equal(vlen, 150);
    for (uint64_t i = 0; i < len; i++) {
        struct pos got, want = pos_of(i);
        assert_int_equal(shmobj_table_get(&v, i, &got, sizeof got), 0);
        pos_equal(&got, &want);
    }
    /* rows never move: row 0's address is the same after 5 chunks */
    const void *p0;
    assert_int_equal(shmobj_table_row_get(&v, 0, &p0, NULL), 0);
    assert_ptr_equal(p0, row0);
    /* iteration by runs: every row once, in order, each run contiguous */
    uint64_t seen = 0, runs = 0;
    for (uint64_t i = 0; i < len;) {
        const void *p;
        uint64_t run;
        assert_int_equal(shmobj_table_row_get(&v, i, &p, &run), 0);
        assert_true(run >= 1 && i + run <= len);
        for (uint64_t r = 0; r < run; r++) {
            const struct pos *q = (const struct pos *)p + r, want = pos_of(i + r);
            pos_equal(q, &want);
            seen++;
        }
        i += run;
        runs++;
    }
    assert_int_equal(seen, 150);
    assert_int_equal(runs, 6); /* chunks of 4, 8, 16, 32, 64, 128 rows */
    shmobj_table_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_table_info_get(&v, &info), 0);
    assert_int_equal(info.rows, 150);
    assert_int_equal(info.capacity, 4 + 8 + 16 + 32 + 64 + 128);
    assert_int_equal(info.chunks, 6);
    assert_int_equal(info.row_size, sizeof(struct pos));
    assert_int_equal(info.fields, POS_N);
    assert_int_equal(info.shape, shape);
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    /* the shape is in use while the table exists */
    assert_int_equal(shmobj_shape_free(f->seg, shape), SHMOBJ_EINUSE);
    uint64_t before = heap_used(f->seg);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    /* the block and its six chunks went */
    assert_true(heap_used(f->seg) < before - 150 * sizeof(struct pos));
    assert_int_equal(shmobj_table_len(&v, &len), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_table_get(&v, 0, &batch[0], sizeof batch[0]), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
}

static void test_table_fields_by_name_atomic_updates(void **state)
{
    struct fixture *f = *state;
    shmobj_ref shape, t;
    shmobj_view v;
    t = pos_table(f->seg, 16, &shape, &v);
    for (uint64_t i = 0; i < 10; i++) {
        struct pos p = pos_of(i);
        assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), 0);
    }
    size_t fx, fhits, fflags, ftag, fnone;
    assert_int_equal(shmobj_table_index(&v, "x", &fx), 0);
    assert_int_equal(shmobj_table_index(&v, "hits", &fhits), 0);
    assert_int_equal(shmobj_table_index(&v, "flags", &fflags), 0);
    assert_int_equal(shmobj_table_index(&v, "tag", &ftag), 0);
    assert_int_equal(fx, 0);
    assert_int_equal(fhits, 2);
    assert_int_equal(shmobj_table_index(&v, "nope", &fnone), SHMOBJ_ENOTFOUND);
    /* names as keys, like a record's */
    shmobj_view k;
    const char *s;
    assert_int_equal(shmobj_view_key(&v, 4, &k), 0);
    assert_int_equal(shmobj_str_get(&k, &s, NULL), 0);
    assert_string_equal(s, "tag");

    int64_t x, old;
    assert_int_equal(shmobj_table_int_add(&v, 7, fhits, 5, &old), 0);
    assert_int_equal(old, 21);
    assert_int_equal(shmobj_table_int_get(&v, 7, fhits, &x), 0);
    assert_int_equal(x, 26);
    assert_int_equal(shmobj_table_int_set(&v, 7, fhits, -4), 0);
    int64_t e = 0;
    assert_int_equal(shmobj_table_int_cas(&v, 7, fhits, &e, 9), SHMOBJ_EBUSY);
    assert_int_equal(e, -4);
    assert_int_equal(shmobj_table_int_cas(&v, 7, fhits, &e, 9), 0);
    assert_int_equal(shmobj_table_int_get(&v, 7, fhits, &x), 0);
    assert_int_equal(x, 9);
    /* a UINT field takes the int calls as its bits, wrapping */
    assert_int_equal(shmobj_table_int_set(&v, 1, fflags, 0), 0);
    assert_int_equal(shmobj_table_int_add(&v, 1, fflags, -1, NULL), 0);
    struct pos got;
    assert_int_equal(shmobj_table_get(&v, 1, &got, sizeof got), 0);
    assert_int_equal(got.flags, UINT64_MAX);
    double d, dold;
    assert_int_equal(shmobj_table_double_add(&v, 3, fx, 0.25, &dold), 0);
    assert_true(dold == 1.5);
    assert_int_equal(shmobj_table_double_get(&v, 3, fx, &d), 0);
    assert_true(d == 1.75);
    assert_int_equal(shmobj_table_double_set(&v, 3, fx, -8.0), 0);
    assert_int_equal(shmobj_table_get(&v, 3, &got, sizeof got), 0);
    assert_true(got.x == -8.0);
    /* wrong kinds, rows and fields */
    assert_int_equal(shmobj_table_int_add(&v, 0, fx, 1, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_table_double_add(&v, 0, fhits, 1, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_table_int_get(&v, 0, ftag, &x), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_table_int_add(&v, 10, fhits, 1, NULL), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_table_int_add(&v, 0, POS_N, 1, NULL), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_table_int_get(&v, 0, fhits, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_int_get(NULL, 0, fhits, &x), SHMOBJ_EINVAL);
    /* JSON: the names once, then each row's fields */
    char buf[4096];
    size_t n;
    assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, &n), 0);
    assert_memory_equal(buf, "{\"$table\":[\"x\",\"y\",\"hits\",\"flags\",\"tag\",\"ok\",\"raw\"],"
                             "\"rows\":[[0.0,-0.0,0,61680,\"row-0\",true,"
                             "{\"$bytes\":3,\"hex\":\"0000ee\"}],[",
                        100);
    assert_non_null(strstr(buf, ",9,61687,\"row-7\",false,"));
    assert_int_equal(buf[n - 1], '}');
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
}

static void test_table_column_strided_array(void **state)
{
    struct fixture *f = *state;
    shmobj_ref shape, t;
    shmobj_view v;
    t = pos_table(f->seg, 10, &shape, &v);
    uint64_t n = 1000;
    for (uint64_t i = 0; i < n; i++) {
        struct pos p = pos_of(i);
        assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), 0);
    }
    size_t fhits, ftag, fok;
    assert_int_equal(shmobj_table_index(&v, "hits", &fhits), 0);
    assert_int_equal(shmobj_table_index(&v, "tag", &ftag), 0);
    assert_int_equal(shmobj_table_index(&v, "ok", &fok), 0);
    /* a whole column, run after run, as an int64 array of stride
     * sizeof(struct pos) */
    int64_t sum = 0, want = 0;
    uint64_t oks = 0, rows = 0;
    for (uint64_t i = 0; i < n; i++)
        want += (int64_t)i * 3;
    for (uint64_t i = 0; i < n;) {
        shmobj_buffer_info b = {.struct_size = sizeof b}, bo = {.struct_size = sizeof bo};
        assert_int_equal(shmobj_table_column_get(&v, fhits, i, &b), 0);
        assert_int_equal(b.dtype, SHMOBJ_DTYPE_I64);
        assert_int_equal(b.ndim, 1);
        assert_int_equal(b.itemsize, 8);
        assert_int_equal(b.strides[0], (int64_t)sizeof(struct pos));
        assert_int_equal(b.nbytes, (b.shape[0] - 1) * sizeof(struct pos) + 8);
        for (uint64_t r = 0; r < b.shape[0]; r++)
            sum += *(const int64_t *)((const uint8_t *)b.data + r * (uint64_t)b.strides[0]);
        assert_int_equal(shmobj_table_column_get(&v, fok, i, &bo), 0);
        assert_int_equal(bo.dtype, SHMOBJ_DTYPE_BOOL);
        assert_int_equal(bo.shape[0], b.shape[0]);
        for (uint64_t r = 0; r < bo.shape[0]; r++)
            oks += *((const uint8_t *)bo.data + r * (uint64_t)bo.strides[0]);
        rows += b.shape[0];
        i += b.shape[0];
    }
    assert_int_equal(rows, n);
    assert_int_equal(sum, want);
    assert_int_equal(oks, n / 2);
    /* a string column: rows of capacity bytes */
    shmobj_buffer_info s = {.struct_size = sizeof s};
    assert_int_equal(shmobj_table_column_get(&v, ftag, 11, &s), 0);
    assert_int_equal(s.dtype, SHMOBJ_DTYPE_U8);
    assert_int_equal(s.ndim, 2);
    assert_int_equal(s.shape[1], 12);
    assert_int_equal(s.strides[1], 1);
    assert_int_equal(s.shape[0], 19); /* rows 11..29: the rest of chunk 1 */
    assert_string_equal((const char *)s.data + 2 * (uint64_t)s.strides[0], "row-13");
    assert_int_equal(shmobj_table_column_get(&v, ftag, n, &s), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_table_column_get(&v, POS_N, 0, &s), SHMOBJ_ERANGE);
    s.struct_size = 4;
    assert_int_equal(shmobj_table_column_get(&v, ftag, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
}

/* The struct of the issue: 40 bytes, five 8-byte fields. */
struct r40 {
    int64_t id;
    double a, b, c;
    int64_t n;
};

static void test_table_100k_rows_cost_their_bytes(void **state)
{
    struct fixture *f = *state;
    static const shmobj_field fl[] = {
        FIELD(struct r40, id, SHMOBJ_TYPE_INT),
        FIELD(struct r40, a, SHMOBJ_TYPE_DOUBLE),
        FIELD(struct r40, b, SHMOBJ_TYPE_DOUBLE),
        FIELD(struct r40, c, SHMOBJ_TYPE_DOUBLE),
        FIELD(struct r40, n, SHMOBJ_TYPE_INT),
    };
    _Static_assert(sizeof(struct r40) == 40, "a 40-byte struct");
    enum { N = 100000 };
    shmobj_ref shape, t;
    shmobj_view v;
    assert_int_equal(shmobj_shape_put(f->seg, fl, 5, &shape), 0);
    uint64_t h0 = heap_used(f->seg);
    assert_int_equal(shmobj_table_put(f->seg, shape, sizeof(struct r40), N, &t), 0);
    assert_int_equal(shmobj_obj_get(f->seg, t, &v), 0);
    struct r40 *rows = calloc(N, sizeof *rows);
    for (int i = 0; i < N; i++)
        rows[i] = (struct r40){i, i * 0.5, 1, 2, -i};
    assert_int_equal(shmobj_table_append(&v, rows, N, sizeof rows[0], NULL), 0);
    uint64_t table_bytes = heap_used(f->seg) - h0;
    /* 4,000,000 bytes of rows, and a block of 528 with two headers */
    assert_true(table_bytes >= 4000000 && table_bytes <= 4000000 + 1024);
    /* the same rows as records: a slot per field, a block each */
    uint64_t h1 = heap_used(f->seg);
    shmobj_ref *recs = calloc(N, sizeof *recs);
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_record_put_fields(f->seg, shape, fl, 5, &rows[i], &recs[i]), 0);
    uint64_t rec_bytes = heap_used(f->seg) - h1;
    print_message("100,000 rows of a 40-byte struct: table %llu bytes, records %llu bytes\n",
                  (unsigned long long)table_bytes, (unsigned long long)rec_bytes);
    assert_true(rec_bytes > 2 * table_bytes);
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_obj_free(f->seg, recs[i]), 0);
    struct r40 got;
    assert_int_equal(shmobj_table_get(&v, 77777, &got, sizeof got), 0);
    assert_memory_equal(&got, &rows[77777], sizeof got);
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
    free(rows);
    free(recs);
}

static void test_table_bad_input_refused(void **state)
{
    struct fixture *f = *state;
    shmobj_ref shape, t, s2, other;
    shmobj_view v, ov;
    /* a shape made for records alone: every offset 0, the fields overlap */
    static const shmobj_field zero[] = {{"a", SHMOBJ_TYPE_INT, 0, 0}, {"b", SHMOBJ_TYPE_INT, 0, 0}};
    assert_int_equal(shmobj_shape_put(f->seg, zero, 2, &s2), 0);
    assert_int_equal(shmobj_table_put(f->seg, s2, 16, 8, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_shape_free(f->seg, s2), 0);
    static const shmobj_field bads[][1] = {
        {{"any", SHMOBJ_TYPE_NULL, 0, 0}},   /* any object: no fixed bytes */
        {{"s", SHMOBJ_TYPE_STR, 0, 0}},      /* a string without capacity */
        {{"i", SHMOBJ_TYPE_INT, 0, 4}},      /* an int not aligned */
        {{"i", SHMOBJ_TYPE_INT, 0, 24}},     /* past the row */
        {{"s", SHMOBJ_TYPE_STR, 20, 8}},     /* a string past the row */
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        assert_int_equal(shmobj_shape_put(f->seg, bads[i], 1, &s2), 0);
        assert_int_equal(shmobj_table_put(f->seg, s2, 24, 8, &t), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_shape_free(f->seg, s2), 0); /* no use was kept */
    }
    /* a row size not a multiple of 8 with an 8-byte field */
    static const shmobj_field odd[] = {{"i", SHMOBJ_TYPE_INT, 0, 0}};
    assert_int_equal(shmobj_shape_put(f->seg, odd, 1, &s2), 0);
    assert_int_equal(shmobj_table_put(f->seg, s2, 12, 8, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(f->seg, s2, 0, 8, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(f->seg, s2, 65536 + 8, 8, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(f->seg, s2, 8, 0, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(f->seg, s2, 8, 8, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(NULL, s2, 8, 8, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_put(f->seg, SHMOBJ_REF_NULL, 8, 8, &t), SHMOBJ_EINVAL);
    /* a segment too small for the first chunk */
    assert_int_equal(shmobj_table_put(f->seg, s2, 65536, UINT64_C(1) << 32, &t), SHMOBJ_ENOMEM);
    assert_int_equal(shmobj_shape_free(f->seg, s2), 0);
    /* not a shape */
    assert_int_equal(shmobj_obj_put_int(f->seg, 5, &other), 0);
    assert_int_equal(shmobj_table_put(f->seg, other, 8, 8, &t), SHMOBJ_ETYPE);
    /* a freed shape */
    assert_int_equal(shmobj_shape_put(f->seg, odd, 1, &s2), 0);
    assert_int_equal(shmobj_shape_free(f->seg, s2), 0);
    assert_int_equal(shmobj_table_put(f->seg, s2, 8, 8, &t), SHMOBJ_ESTALE);

    t = pos_table(f->seg, 4, &shape, &v);
    struct pos p = pos_of(1), q;
    assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p - 8, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_append(&v, &p, 0, sizeof p, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_append(&v, NULL, 1, sizeof p, NULL), SHMOBJ_EINVAL);
    p.ok = 2; /* a bool byte neither 0 nor 1 */
    memcpy(&p.ok, &(uint8_t){2}, 1);
    assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), SHMOBJ_EINVAL);
    p = pos_of(1);
    p.tag[0] = (char)0xff; /* not UTF-8 */
    assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), SHMOBJ_EINVAL);
    p = pos_of(1);
    memset(p.tag, 'a', sizeof p.tag); /* all of the array, no NUL: taken */
    assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), 0);
    uint64_t len;
    assert_int_equal(shmobj_table_len(&v, &len), 0);
    assert_int_equal(len, 1); /* the refused appends left nothing */
    assert_int_equal(shmobj_table_get(&v, 1, &q, sizeof q), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_table_get(&v, 0, &q, sizeof q + 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_table_get(&v, 0, NULL, sizeof q), SHMOBJ_EINVAL);
    const void *rp;
    assert_int_equal(shmobj_table_row_get(&v, 1, &rp, NULL), SHMOBJ_ERANGE);
    char js[512];
    assert_int_equal(shmobj_view_json(&v, js, sizeof js, NULL), 0);
    assert_non_null(strstr(js, ",\"aaaaaaaaaaaa\","));
    /* calls on a view of something else */
    assert_int_equal(shmobj_obj_get(f->seg, other, &ov), 0);
    assert_int_equal(shmobj_table_len(&ov, &len), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_table_append(&ov, &p, 1, sizeof p, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_table_get(&ov, 0, &q, sizeof q), SHMOBJ_ETYPE);
    /* a stale view */
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_table_int_add(&v, 0, 2, 1, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
    assert_int_equal(shmobj_obj_free(f->seg, other), 0);
}

/* A table of 1-byte rows filling most of a small segment: the check and
 * the JSON printer charge a row by its bytes, so neither runs out of its
 * budget on a well-formed table, however small its rows. */
static void test_table_tiny_rows_check_json_within_budget(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    o.max_size = 4 * MiB;
    test_name(name, sizeof name, "tiny");
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    static const shmobj_field one[] = {{"b", SHMOBJ_TYPE_BOOL, 0, 0}};
    enum { N = 3 * 1000 * 1000 };
    shmobj_ref shape, t;
    shmobj_view v;
    assert_int_equal(shmobj_shape_put(seg, one, 1, &shape), 0);
    assert_int_equal(shmobj_table_put(seg, shape, 1, N, &t), 0);
    assert_int_equal(shmobj_obj_get(seg, t, &v), 0);
    uint8_t *rows = calloc(N, 1);
    for (int i = 0; i < N; i += 3)
        rows[i] = 1;
    assert_int_equal(shmobj_table_append(&v, rows, N, 1, NULL), 0);
    assert_int_equal(shmobj_obj_check(seg, t), 0);
    size_t len = 0;
    assert_int_equal(shmobj_view_json(&v, NULL, 0, &len), SHMOBJ_ENOBUFS);
    assert_true(len > (size_t)N * 5); /* every row printed */
    shmobj_buffer_info b = {.struct_size = sizeof b};
    assert_int_equal(shmobj_table_column_get(&v, 0, 0, &b), 0);
    assert_int_equal(b.shape[0], N);
    assert_int_equal(b.strides[0], 1);
    assert_memory_equal(b.data, rows, N); /* the column is the rows */
    free(rows);
    assert_int_equal(shmobj_obj_free(seg, t), 0);
    assert_int_equal(shmobj_shape_free(seg, shape), 0);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- appenders in several processes ------------------------------------ */

/* A row that proves itself whole: who wrote it, its number, and a check
 * word of both, with the padding between them. */
struct mp {
    int64_t who;
    int64_t seq;
    char pad[40];
    int64_t check;
};

static const shmobj_field mp_fields[] = {
    FIELD(struct mp, who, SHMOBJ_TYPE_INT),
    FIELD(struct mp, seq, SHMOBJ_TYPE_INT),
    FIELD(struct mp, check, SHMOBJ_TYPE_INT),
};

static int64_t mp_check(int64_t who, int64_t seq)
{
    return (int64_t)(((uint64_t)who * UINT64_C(0x9e3779b97f4a7c15)) ^ (uint64_t)seq ^ 0x5555);
}

static struct mp mp_row(int64_t who, int64_t seq)
{
    struct mp r;
    memset(&r, 0, sizeof r);
    r.who = who;
    r.seq = seq;
    memset(r.pad, (int)(seq & 0x7f), sizeof r.pad);
    r.check = mp_check(who, seq);
    return r;
}

struct mp_arg {
    const char *name;
    int who;
    int64_t rows;
    shmobj_ref table;
    _Atomic int *stop;
};

static int mp_open(const struct mp_arg *a, shmobj_segment **seg, shmobj_view *v)
{
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 10000 * TEST_MS, seg) != 0)
        return 1;
    return shmobj_obj_get(*seg, a->table, v) != 0;
}

/* Append rows 0..rows-1 of `who`, in batches of 1 to 7. */
static int mp_appender(void *p)
{
    struct mp_arg *a = p;
    shmobj_segment *seg;
    shmobj_view v;
    if (mp_open(a, &seg, &v) != 0)
        return 1;
    test_stall_pin((unsigned)a->who);
    uint64_t st = (uint64_t)a->who * 7919 + 1;
    for (int64_t s = 0; s < a->rows;) {
        struct mp b[7];
        int64_t n = (int64_t)(test_xorshift(&st) % 7) + 1;
        if (n > a->rows - s)
            n = a->rows - s;
        for (int64_t j = 0; j < n; j++)
            b[j] = mp_row(a->who, s + j);
        if (shmobj_table_append(&v, b, (size_t)n, sizeof b[0], NULL) != 0)
            return 2;
        s += n;
    }
    shmobj_segment_close(seg);
    return 0;
}

/* Read every row below the length, again and again: each whole. */
static int mp_reader(void *p)
{
    struct mp_arg *a = p;
    shmobj_segment *seg;
    shmobj_view v;
    if (mp_open(a, &seg, &v) != 0)
        return 1;
    while (!atomic_load(a->stop)) {
        uint64_t len;
        if (shmobj_table_len(&v, &len) != 0)
            return 2;
        for (uint64_t i = 0; i < len;) {
            const void *rp;
            uint64_t run;
            if (shmobj_table_row_get(&v, i, &rp, &run) != 0)
                return 3;
            for (uint64_t r = 0; r < run; r++) {
                struct mp got;
                memcpy(&got, (const struct mp *)rp + r, sizeof got);
                if (got.check != mp_check(got.who, got.seq))
                    return 4; /* a torn or unwritten row below the length */
            }
            i += run;
        }
    }
    shmobj_segment_close(seg);
    return 0;
}

/* Every row whole; each writer's rows 0..counts[w]-1 once each, in order. */
static void mp_verify(const shmobj_view *v, int writers, const int64_t *counts)
{
    uint64_t len, total = 0;
    int64_t next[16] = {0};
    assert_int_equal(shmobj_table_len(v, &len), 0);
    for (int w = 0; w < writers; w++)
        total += (uint64_t)counts[w];
    assert_int_equal(len, total);
    for (uint64_t i = 0; i < len; i++) {
        struct mp got;
        assert_int_equal(shmobj_table_get(v, i, &got, sizeof got), 0);
        assert_int_equal(got.check, mp_check(got.who, got.seq));
        assert_true(got.who >= 0 && got.who < writers);
        assert_int_equal(got.seq, next[got.who]); /* in the order of its calls */
        next[got.who]++;
    }
    for (int w = 0; w < writers; w++)
        assert_int_equal(next[w], counts[w]);
}

static void test_table_append_processes_nothing_lost_order_kept(void **state)
{
    struct fixture *f = *state;
    enum { W = 4, ROWS = 20000 };
    shmobj_ref shape, t;
    shmobj_view v;
    assert_int_equal(shmobj_shape_put(f->seg, mp_fields, 3, &shape), 0);
    assert_int_equal(shmobj_table_put(f->seg, shape, sizeof(struct mp), 64, &t), 0);
    assert_int_equal(shmobj_obj_get(f->seg, t, &v), 0);
    _Atomic int *stop = shared_page(4096);
    struct mp_arg args[W + 1];
    pid_t pids[W + 1];
    for (int w = 0; w <= W; w++) {
        args[w] = (struct mp_arg){f->name, w, ROWS, t, stop};
        pids[w] = test_child_start(w < W ? mp_appender : mp_reader, &args[w], 120);
    }
    for (int w = 0; w < W; w++)
        assert_int_equal(test_child_wait(pids[w]), 0);
    atomic_store(stop, 1);
    assert_int_equal(test_child_wait(pids[W]), 0);
    int64_t counts[W];
    for (int w = 0; w < W; w++)
        counts[w] = ROWS;
    mp_verify(&v, W, counts);
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
    munmap((void *)stop, 4096);
}

/* Appenders killed at random moments, again and again: the table stays
 * whole, each dead appender's rows a gap-free prefix of its own, and the
 * next appender takes the dead holder's lock over. */
static void test_table_append_killed_anywhere(void **state)
{
    struct fixture *f = *state;
    enum { ROUNDS = 12 };
    shmobj_ref shape, t;
    shmobj_view v;
    assert_int_equal(shmobj_shape_put(f->seg, mp_fields, 3, &shape), 0);
    assert_int_equal(shmobj_table_put(f->seg, shape, sizeof(struct mp), 8, &t), 0);
    assert_int_equal(shmobj_obj_get(f->seg, t, &v), 0);
    int64_t counts[ROUNDS + 1];
    for (int r = 0; r < ROUNDS; r++) {
        struct mp_arg a = {f->name, r, INT64_C(1) << 40, t, NULL};
        pid_t pid = test_child_start(mp_appender, &a, 60);
        test_sleep_ms(5 + (unsigned)(rnd() % 40));
        kill(pid, SIGKILL);
        assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
        /* what it left: count its rows (a prefix of its sequence) */
        uint64_t len;
        counts[r] = 0;
        assert_int_equal(shmobj_table_len(&v, &len), 0);
        for (uint64_t i = 0; i < len; i++) {
            struct mp got;
            assert_int_equal(shmobj_table_get(&v, i, &got, sizeof got), 0);
            counts[r] += got.who == r;
        }
    }
    /* an append after the last kill: it may find the lock held by the dead */
    struct mp row = mp_row(ROUNDS, 0);
    assert_int_equal(shmobj_table_append(&v, &row, 1, sizeof row, NULL), 0);
    counts[ROUNDS] = 1;
    mp_verify(&v, ROUNDS + 1, counts);
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
}

/* ---- an appender stopped or killed at each named step ------------------ */

static const char *const steps[] = {
    "table.append.locked",
    "table.append.chunk",
    "table.append.written",
    "table.append.published",
};

struct stall_arg {
    const char *name;
    shmobj_ref table;
    const char *step;
    enum test_stall_action action;
};

/* Append 40 rows (who 1) one at a time, armed to stop or die at the
 * step's arrival that opens chunk 2 (rows 24..55 of a table of 8 + 16 +
 * 32 rows: the 25th append), so the chunk step is met there too. */
static int stall_child(void *p)
{
    struct stall_arg *a = p;
    shmobj_segment *seg;
    shmobj_view v;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 10000 * TEST_MS, &seg) != 0 ||
        shmobj_obj_get(seg, a->table, &v) != 0)
        return 1;
    unsigned nth = strcmp(a->step, "table.append.chunk") == 0 ? 2 : 25;
    test_stall_arm(a->step, nth, a->action, 0);
    for (int64_t s = 0; s < 40; s++) {
        struct mp r = mp_row(1, s);
        if (shmobj_table_append(&v, &r, 1, sizeof r, NULL) != 0)
            return 2;
    }
    return test_stall.reached == 0 ? 3 : 0;
}

static void test_table_stall_every_step(void **state)
{
    struct fixture *f = *state;
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        for (int kill_it = 0; kill_it < 2; kill_it++) {
            shmobj_ref shape, t;
            shmobj_view v;
            assert_int_equal(shmobj_shape_put(f->seg, mp_fields, 3, &shape), 0);
            assert_int_equal(shmobj_table_put(f->seg, shape, sizeof(struct mp), 8, &t), 0);
            assert_int_equal(shmobj_obj_get(f->seg, t, &v), 0);
            struct stall_arg a = {f->name, t, steps[s],
                                  kill_it ? TEST_STALL_KILL : TEST_STALL_STOP};
            pid_t pid = test_child_start(stall_child, &a, 60);
            int64_t counts[2] = {0, 0};
            uint64_t len;
            if (!kill_it) {
                int st = 0;
                assert_int_equal(test_stall_wait_stopped(pid, 20000, &st), 1);
                /* readers go on while the appender is stopped: the rows
                 * published are whole, the length no further */
                assert_int_equal(shmobj_table_len(&v, &len), 0);
                assert_true(len >= 24 && len <= 25);
                counts[1] = (int64_t)len;
                mp_verify(&v, 2, counts);
                test_stall_resume(pid);
                assert_int_equal(test_child_wait(pid), 0);
                counts[1] = 40;
            } else {
                assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
                assert_int_equal(shmobj_table_len(&v, &len), 0);
                /* killed at its 25th append: 24 rows, or 25 once it had
                 * published */
                assert_int_equal(len, strcmp(steps[s], "table.append.published") == 0 ? 25 : 24);
                counts[1] = (int64_t)len;
            }
            /* the next appender gets the lock (taken over from the dead) */
            struct mp r = mp_row(0, 0);
            assert_int_equal(shmobj_table_append(&v, &r, 1, sizeof r, NULL), 0);
            counts[0] = 1;
            mp_verify(&v, 2, counts);
            assert_int_equal(shmobj_obj_check(f->seg, t), 0);
            assert_int_equal(shmobj_obj_free(f->seg, t), 0);
            assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
        }
    }
}

/* ---- damaged bytes ------------------------------------------------------- */

/* Every read call on v: none may crash; each answers 0 or a documented
 * code. */
static void read_all(const shmobj_view *v, shmobj_segment *seg, shmobj_ref t)
{
    uint64_t len = 0;
    struct pos p;
    const void *rp;
    uint64_t run;
    int64_t x;
    double d;
    size_t field;
    char js[8192];
    shmobj_buffer_info b = {.struct_size = sizeof b};
    shmobj_table_info info = {.struct_size = sizeof info};
    int rc = shmobj_table_len(v, &len);
    assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT);
    if (len > 40)
        len = 40;
    for (uint64_t i = 0; i < len + 2; i++) {
        rc = shmobj_table_get(v, i, &p, sizeof p);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ERANGE ||
                    rc == SHMOBJ_EINVAL);
        rc = shmobj_table_row_get(v, i, &rp, &run);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ERANGE);
        for (size_t fi = 0; fi < POS_N + 1; fi++) {
            rc = shmobj_table_int_add(v, i, fi, 0, &x);
            assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ERANGE ||
                        rc == SHMOBJ_ETYPE);
            rc = shmobj_table_double_get(v, i, fi, &d);
            assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ERANGE ||
                        rc == SHMOBJ_ETYPE);
            rc = shmobj_table_column_get(v, fi, i, &b);
            assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ERANGE);
        }
    }
    rc = shmobj_table_index(v, "hits", &field);
    assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ENOTFOUND);
    rc = shmobj_table_info_get(v, &info);
    assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT);
    rc = shmobj_view_json(v, js, sizeof js, NULL);
    assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ENOBUFS || rc == SHMOBJ_ERANGE);
    (void)seg;
    (void)t;
}

static void test_table_damaged_bytes_ecorrupt(void **state)
{
    struct fixture *f = *state;
    shmobj_ref shape, t;
    shmobj_view v;
    t = pos_table(f->seg, 8, &shape, &v);
    for (uint64_t i = 0; i < 30; i++) {
        struct pos p = pos_of(i);
        assert_int_equal(shmobj_table_append(&v, &p, 1, sizeof p, NULL), 0);
    }
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    uint8_t *base = shmobj__space_of_seg(f->seg)->base;
    uint64_t blk = t & ((UINT64_C(1) << 48) - 1);
    struct shmobj__table *ctl = (void *)(base + blk + SHMOBJ__PREFIX + 16);
    struct shmobj__table saved = *ctl;
    /* named damage: each refused by the check, read without a crash */
    struct {
        size_t off;
        uint64_t val;
        int width;
    } named[] = {
        {offsetof(struct shmobj__table, version), 2, 4},
        {offsetof(struct shmobj__table, row_size), 0, 4},
        {offsetof(struct shmobj__table, row_size), 7, 4},
        {offsetof(struct shmobj__table, row_size), 70000, 4},
        {offsetof(struct shmobj__table, chunk0), 0, 8},
        {offsetof(struct shmobj__table, chunk0), UINT64_C(1) << 40, 8},
        {offsetof(struct shmobj__table, chunk0), 9, 8},
        {offsetof(struct shmobj__table, len), 8 + 16 + 32 + 1, 8}, /* past the chunks */
        {offsetof(struct shmobj__table, len), UINT64_MAX, 8},
        {offsetof(struct shmobj__table, dir) + 8, 0, 8},
        {offsetof(struct shmobj__table, dir) + 8, 12345, 8},
        {offsetof(struct shmobj__table, dir) + 16, saved.dir[0], 8},
        {offsetof(struct shmobj__table, dir) + 0, (uint64_t)t, 8},
        {offsetof(struct shmobj__table, dir) + 8 * 39, saved.dir[1], 8},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        memcpy((uint8_t *)ctl + named[i].off, &named[i].val, (size_t)named[i].width);
        if (shmobj_obj_check(f->seg, t) != SHMOBJ_ECORRUPT)
            fail_msg("damage %zu was not found", i);
        shmobj_view dv;
        if (shmobj_obj_get(f->seg, t, &dv) == 0)
            read_all(&dv, f->seg, t);
        *ctl = saved;
    }
    /* the shape: two fields moved onto one another */
    uint8_t *so = base + (shape & ((UINT64_C(1) << 48) - 1)) + SHMOBJ__PREFIX;
    struct shmobj__field d1, d0;
    memcpy(&d0, so + 32, sizeof d0);
    memcpy(&d1, so + 32 + 16, sizeof d1);
    d1.c_off = 4; /* y over x, misaligned */
    memcpy(so + 32 + 16, &d1, sizeof d1);
    assert_int_equal(shmobj_obj_check(f->seg, t), SHMOBJ_ECORRUPT);
    read_all(&v, f->seg, t);
    d1.c_off = 0; /* y onto x */
    memcpy(so + 32 + 16, &d1, sizeof d1);
    assert_int_equal(shmobj_obj_check(f->seg, t), SHMOBJ_ECORRUPT);
    d1.c_off = offsetof(struct pos, y);
    memcpy(so + 32 + 16, &d1, sizeof d1);
    /* a bool of 2 and a string that is not UTF-8 in a published row */
    uint8_t *row;
    assert_int_equal(shmobj_table_row_get(&v, 3, (const void **)&row, NULL), 0);
    row[offsetof(struct pos, ok)] = 2;
    assert_int_equal(shmobj_obj_check(f->seg, t), SHMOBJ_ECORRUPT);
    row[offsetof(struct pos, ok)] = 0;
    row[offsetof(struct pos, tag)] = (char)0xc3;
    assert_int_equal(shmobj_obj_check(f->seg, t), SHMOBJ_ECORRUPT);
    read_all(&v, f->seg, t);
    snprintf((char *)row + offsetof(struct pos, tag), 12, "row-3");
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    /* random words anywhere in the control block and the first chunk */
    for (int round = 0; round < 3000; round++) {
        uint64_t *w = (uint64_t *)ctl + rnd() % (sizeof saved / 8);
        uint64_t keep = *w;
        uint64_t r = rnd();
        *w = r % 3 == 0 ? r : r % 3 == 1 ? keep ^ (UINT64_C(1) << (r >> 58)) : r & 0xffff;
        int rc = shmobj_obj_check(f->seg, t);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT);
        shmobj_view dv;
        if (shmobj_obj_get(f->seg, t, &dv) == 0 && round % 8 == 0)
            read_all(&dv, f->seg, t);
        *w = keep;
    }
    /* the lock word names nobody: an append is refused, never a hang */
    memcpy(ctl->lock, &(uint32_t){0x7fffffffu}, 4);
    struct pos p = pos_of(99);
    int rc = shmobj_table_append(&v, &p, 1, sizeof p, NULL);
    assert_true(rc == SHMOBJ_ECORRUPT || rc == 0);
    *ctl = saved;
    assert_int_equal(shmobj_obj_check(f->seg, t), 0);
    (void)d0;
    assert_int_equal(shmobj_obj_free(f->seg, t), 0);
    assert_int_equal(shmobj_shape_free(f->seg, shape), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_table_append_get_grows_rows_never_move),
        T(test_table_fields_by_name_atomic_updates),
        T(test_table_column_strided_array),
        T(test_table_100k_rows_cost_their_bytes),
        T(test_table_bad_input_refused),
        T(test_table_tiny_rows_check_json_within_budget),
        T(test_table_append_processes_nothing_lost_order_kept),
        T(test_table_append_killed_anywhere),
        T(test_table_stall_every_step),
        T(test_table_damaged_bytes_ecorrupt),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
