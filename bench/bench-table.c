/* bench-table: tables, records of one shape stored row after row
 * (shmobj/table.h), against the same records one block each (E1 and C1
 * of doc/benchmarks.md).
 *
 * E1-rows: 100,000 records of a 40-byte C struct (id int64, a b c
 *   doubles, n int64) put into a segment, then every field of every record
 *   read back and verified, then freed; Kobj/s over ~1 s (0.2 s with
 *   --quick) for put + full read, and bytes/obj: the heap the 100,000
 *   records hold (arena headers included), divided by 100,000.
 *     shmobj-rows        a table of capacity 100,000 (one chunk), each
 *                        record appended alone (shmobj_table_append, n 1:
 *                        one lock each) and copied back into the struct
 *                        (shmobj_table_get)
 *     shmobj-rows-grown  the same from a table of capacity 1,024 that
 *                        grows by chunks (1,024, 2,048, ... rows: 127 Ki
 *                        rows made for 100,000)
 *     shmobj-rows-batch  the table of shmobj-rows filled by appends of
 *                        1,000 rows, read back by runs in place
 *                        (shmobj_table_row_get)
 *     shmobj-shape       one record per block (shmobj_record_put_fields),
 *                        opened from its reference, its five fields read
 *                        by position (shmobj_item_int_get and views),
 *                        freed one by one
 *
 * C1 shmobj-rows: the C1 workload of bench-object.c with the 3,000 records
 *   as the rows of one table (name and inventory as strings of 16 and 32
 *   bytes in the row); a second process, pinned to another CPU, adds 1 to
 *   the 9 numeric fields of every row by position
 *   (shmobj_table_int_add; the positions looked up by name once), pass
 *   after pass for ~1 s; this process reads every value back and counts
 *   the lost increments. Metrics: Mincr/s, lost-increments. */
#include "bench-util.h"

#include <stdatomic.h>

#include "shmobj.h"
#include "bench-segment.h"

#define E1R_N 100000

static double target_s(const bench_ctx *ctx)
{
    return ctx->quick ? 0.2 : 1.0;
}

static double now_s(void)
{
    return (double)bench_now_ns() * 1e-9;
}

static uint64_t heap_used(shmobj_segment *seg)
{
    shmobj_arena_stats a = {.struct_size = sizeof a};
    return shmobj_arena_stats_get(seg, &a) == 0 ? a.used_bytes : 0;
}

/* ---- E1-rows ------------------------------------------------------------- */

struct r40 {
    int64_t id;
    double a, b, c;
    int64_t n;
};
_Static_assert(sizeof(struct r40) == 40, "the issue's 40-byte struct");

enum { E1R_ROWS = 1, E1R_GROWN = 2, E1R_BATCH = 3, E1R_SHAPE = 4 };

static struct r40 r40_of(int64_t i)
{
    return (struct r40){i, (double)i * 0.5, 1.0, -2.0, -i};
}

static int r40_ok(const struct r40 *r, int64_t i)
{
    return r->id == i && r->a == (double)i * 0.5 && r->b == 1.0 && r->c == -2.0 && r->n == -i;
}

/* One pass of the table subjects: put, read, free; the heap the rows held
 * into *bytes. Returns the records read back wrong. */
static uint64_t e1r_table_pass(shmobj_segment *seg, shmobj_ref shape, int kind,
                               const struct r40 *src, uint64_t *bytes)
{
    shmobj_ref t;
    shmobj_view v;
    uint64_t bad = 0, h0 = heap_used(seg);
    if (shmobj_table_put(seg, shape, sizeof(struct r40), kind == E1R_GROWN ? 1024 : E1R_N,
                         &t) != 0 ||
        shmobj_obj_get(seg, t, &v) != 0)
        return E1R_N;
    if (kind == E1R_BATCH) {
        for (int i = 0; i < E1R_N; i += 1000)
            bad += shmobj_table_append(&v, src + i, 1000, sizeof *src, NULL) != 0;
    } else {
        for (int i = 0; i < E1R_N; i++) {
            struct r40 r = r40_of(i);
            bad += shmobj_table_append(&v, &r, 1, sizeof r, NULL) != 0;
        }
    }
    *bytes = heap_used(seg) - h0;
    if (kind == E1R_BATCH) {
        for (uint64_t i = 0; i < E1R_N;) {
            const void *p;
            uint64_t run;
            if (shmobj_table_row_get(&v, i, &p, &run) != 0)
                return E1R_N;
            for (uint64_t j = 0; j < run; j++)
                bad += !r40_ok((const struct r40 *)p + j, (int64_t)(i + j));
            i += run;
        }
    } else {
        for (int i = 0; i < E1R_N; i++) {
            struct r40 r;
            bad += shmobj_table_get(&v, (uint64_t)i, &r, sizeof r) != 0 || !r40_ok(&r, i);
        }
    }
    bad += shmobj_obj_free(seg, t) != 0;
    return bad;
}

/* One pass of shmobj-shape: a record per block. */
static uint64_t e1r_shape_pass(shmobj_segment *seg, shmobj_ref shape, const shmobj_field *fl,
                               shmobj_ref *refs, uint64_t *bytes)
{
    uint64_t bad = 0, h0 = heap_used(seg);
    for (int i = 0; i < E1R_N; i++) {
        struct r40 r = r40_of(i);
        if (shmobj_record_put_fields(seg, shape, fl, 5, &r, &refs[i]) != 0)
            return E1R_N;
    }
    *bytes = heap_used(seg) - h0;
    for (int i = 0; i < E1R_N; i++) {
        shmobj_view v, it;
        struct r40 r;
        if (shmobj_obj_get(seg, refs[i], &v) != 0 || shmobj_item_int_get(&v, 0, &r.id) != 0 ||
            shmobj_view_item(&v, 1, &it) != 0 || shmobj_double_get(&it, &r.a) != 0 ||
            shmobj_view_item(&v, 2, &it) != 0 || shmobj_double_get(&it, &r.b) != 0 ||
            shmobj_view_item(&v, 3, &it) != 0 || shmobj_double_get(&it, &r.c) != 0 ||
            shmobj_item_int_get(&v, 4, &r.n) != 0)
            bad++;
        else
            bad += !r40_ok(&r, i);
        bad += shmobj_obj_free(seg, refs[i]) != 0;
    }
    return bad;
}

static int run_e1r(const bench_ctx *ctx)
{
    char name[96];
    int kind = (int)ctx->arg;
    const shmobj_field fl[] = {
        SHMOBJ_FIELD_OF(struct r40, id, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct r40, a, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct r40, b, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct r40, c, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct r40, n, SHMOBJ_TYPE_INT),
    };
    shmobj_segment *seg = bench_segment_new(name, sizeof name, "table", 64u << 20, 0);
    shmobj_ref shape;
    struct r40 *src = malloc(E1R_N * sizeof *src);
    shmobj_ref *refs = malloc(E1R_N * sizeof *refs);
    if (seg == NULL || src == NULL || refs == NULL || shmobj_shape_put(seg, fl, 5, &shape) != 0)
        return bench_fail("E1-rows: no segment or shape");
    for (int i = 0; i < E1R_N; i++)
        src[i] = r40_of(i);
    uint64_t objs = 0, bad = 0, bytes = 0;
    double t0 = now_s(), t, target = target_s(ctx);
    do {
        bad += kind == E1R_SHAPE ? e1r_shape_pass(seg, shape, fl, refs, &bytes)
                                 : e1r_table_pass(seg, shape, kind, src, &bytes);
        objs += E1R_N;
        t = now_s();
    } while (t - t0 < target);
    if (shmobj_shape_free(seg, shape) != 0)
        bad++;
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    free(src);
    free(refs);
    if (bad != 0)
        return bench_fail("E1-rows: %llu records read back wrong", (unsigned long long)bad);
    bench_report(ctx, "Kobj/s", (double)objs / (t - t0) / 1e3);
    bench_report(ctx, "bytes/obj", (double)bytes / E1R_N);
    return 0;
}

/* ---- C1 shmobj-rows ------------------------------------------------------- */

#define C1_RECORDS 3000
#define C1_FIELDS 9
#define C1_COUNTERS (C1_RECORDS * C1_FIELDS)

/* The C1 record as a C struct: the 9 numeric fields and two strings. */
struct c1row {
    int64_t id;
    char name[16];
    int64_t health, mana, pos_x, pos_y, pos_z, rot_x, rot_y, rot_z;
    char inventory[32];
};

static const char *const c1_num_names[C1_FIELDS] = {
    "id", "health", "mana", "pos_x", "pos_y", "pos_z", "rot_x", "rot_y", "rot_z"};

static int64_t c1_init(int r, int f)
{
    return f == 0 ? (int64_t)r : (int64_t)r * 100 + f * 10;
}

static int64_t c1_expect_part(int k, uint64_t total)
{
    return (int64_t)(total / C1_COUNTERS) + ((uint64_t)k < total % C1_COUNTERS ? 1 : 0);
}

struct c1_shared {
    _Atomic int go;
    _Atomic int ready;
    uint64_t increments;
    double seconds;
    int failed;
};

struct c1_arg {
    const char *name;
    double target;
    struct c1_shared *sh;
};

static int c1_child(void *p)
{
    struct c1_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view t;
    size_t at[C1_FIELDS];
    bench_pin(1);
    int rc = shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, INT64_C(10000000000), &seg);
    if (rc == 0)
        rc = shmobj_segment_root_get(seg, "c1", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &t);
    /* the fields' positions, by name, once */
    for (int f = 0; rc == 0 && f < C1_FIELDS; f++)
        rc = shmobj_table_index(&t, c1_num_names[f], &at[f]);
    a->sh->failed = rc;
    atomic_store(&a->sh->ready, 1);
    if (rc != 0)
        return 1;
    while (!atomic_load(&a->sh->go))
        bench_spin_once();
    uint64_t total = 0;
    double t0 = now_s(), tn;
    do {
        for (uint64_t r = 0; r < C1_RECORDS; r++)
            for (int f = 0; f < C1_FIELDS; f++)
                if (shmobj_table_int_add(&t, r, at[f], 1, NULL) != 0)
                    a->sh->failed = -1;
        total += C1_COUNTERS;
        tn = now_s();
    } while (tn - t0 < a->target && a->sh->failed == 0);
    a->sh->increments = total;
    a->sh->seconds = tn - t0;
    shmobj_segment_close(seg);
    return a->sh->failed != 0;
}

static int run_c1_rows(const bench_ctx *ctx)
{
    char name[96];
    const shmobj_field fl[] = {
        SHMOBJ_FIELD_OF(struct c1row, id, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct c1row, name),
        SHMOBJ_FIELD_OF(struct c1row, health, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, mana, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, pos_x, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, pos_y, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, pos_z, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, rot_x, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, rot_y, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct c1row, rot_z, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct c1row, inventory),
    };
    bench_pin(0);
    shmobj_segment *seg = bench_segment_new(name, sizeof name, "table", 16u << 20, 0);
    shmobj_ref shape, ref;
    shmobj_view t;
    if (seg == NULL || shmobj_shape_put(seg, fl, 11, &shape) != 0 ||
        shmobj_table_put(seg, shape, sizeof(struct c1row), C1_RECORDS, &ref) != 0 ||
        shmobj_obj_get(seg, ref, &t) != 0)
        return bench_fail("C1 rows: no segment, shape or table");
    for (int r = 0; r < C1_RECORDS; r++) {
        struct c1row row;
        memset(&row, 0, sizeof row);
        int64_t *num[C1_FIELDS] = {&row.id, &row.health, &row.mana, &row.pos_x, &row.pos_y,
                                   &row.pos_z, &row.rot_x, &row.rot_y, &row.rot_z};
        for (int f = 0; f < C1_FIELDS; f++)
            *num[f] = c1_init(r, f);
        snprintf(row.name, sizeof row.name, "player-%d", r);
        snprintf(row.inventory, sizeof row.inventory, "sword,shield,potion");
        if (shmobj_table_append(&t, &row, 1, sizeof row, NULL) != 0)
            return bench_fail("C1 rows: append");
    }
    if (shmobj_segment_root_set(seg, "c1", ref) != 0)
        return bench_fail("C1 rows: root");
    struct c1_shared *sh = bench_shared_alloc(sizeof *sh);
    if (sh == NULL)
        return bench_fail("mmap failed");
    struct c1_arg a = {name, target_s(ctx), sh};
    pid_t pid = bench_fork(c1_child, &a);
    if (pid < 0)
        return bench_fail("fork failed");
    while (!atomic_load(&sh->ready))
        bench_spin_once();
    atomic_store(&sh->go, 1);
    int st = bench_wait(pid, (int)(60000 + a.target * 10000));
    if (st != 0 || sh->failed != 0)
        return bench_fail("C1 rows: incrementer failed (%d, %d)", st, sh->failed);
    uint64_t lost = 0;
    size_t at[C1_FIELDS];
    for (int f = 0; f < C1_FIELDS; f++)
        if (shmobj_table_index(&t, c1_num_names[f], &at[f]) != 0)
            return bench_fail("C1 rows: field");
    for (int r = 0; r < C1_RECORDS; r++) {
        struct c1row row;
        char want_name[16];
        snprintf(want_name, sizeof want_name, "player-%d", r);
        if (shmobj_table_get(&t, (uint64_t)r, &row, sizeof row) != 0 ||
            strcmp(row.name, want_name) != 0)
            return bench_fail("C1 rows: row %d unreadable", r);
        for (int f = 0; f < C1_FIELDS; f++) {
            int64_t x, want = c1_init(r, f) + c1_expect_part(r * C1_FIELDS + f, sh->increments);
            if (shmobj_table_int_get(&t, (uint64_t)r, at[f], &x) != 0)
                return bench_fail("C1 rows: field unreadable");
            lost += x > want ? (uint64_t)(x - want) : (uint64_t)(want - x);
        }
    }
    bench_report(ctx, "Mincr/s", (double)sh->increments / sh->seconds / 1e6);
    bench_report(ctx, "lost-increments", (double)lost);
    bench_shared_free(sh, sizeof *sh);
    shmobj_obj_free(seg, ref);
    if (shmobj_shape_free(seg, shape) != 0)
        return bench_fail("C1 rows: shape still in use after the table went");
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return 0;
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"E1-rows", "shmobj-rows", run_e1r, E1R_ROWS},
        {"E1-rows", "shmobj-rows-grown", run_e1r, E1R_GROWN},
        {"E1-rows", "shmobj-rows-batch", run_e1r, E1R_BATCH},
        {"E1-rows", "shmobj-shape", run_e1r, E1R_SHAPE},
        {"C1", "shmobj-rows", run_c1_rows, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
