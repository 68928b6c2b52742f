/* bench-object: typed objects in a segment (doc/benchmarks.md, E1 and C1).
 *
 * E1 shmobj: the seed's company record {"websites": [2 URLs], "avg_salary":
 *   3000.0, "employees": 10, "in_a_good_state": true, "data": 4 KiB bytes}
 *   is put into a segment (measure, allocate once, write), opened from its
 *   reference, every field read through views (the URLs compared, the
 *   numbers and flag checked, the 4 KiB summed with bench_sum64(), the loop
 *   every E1 subject uses) and the object freed. Metrics: Kobj/s over ~1 s
 *   (0.2 s with --quick) and bytes/obj (the block, arena header included).
 * E1 shmobj-shape: the same record as a record of a shape made once per
 *   run (websites any object: a tuple of the two URLs inline, which the
 *   builder packs; avg_salary double;
 *   employees int; in_a_good_state bool; data bytes of capacity 4 KiB,
 *   inline): put, opened, every field read by a key prepared once
 *   (shmobj_view_get_key, the names found in the shape's index), freed.
 * E1 arena-floor: a reference line, not a peer: the same block allocated,
 *   zeroed, the 4 KiB copied in, summed and freed, with no encoding and no
 *   lookup: the speed no encoding on this heap can pass.
 *
 * E1-access shmobj-1 / shmobj-100000: the time to open a list from its
 *   reference and read its last int item, for a list of 1 and of 100,000
 *   items (metric read-ns): access cost does not depend on size.
 *
 * C1 (the seed's shared-dict workload, same rules as the peers in
 *   bench/peers-c1.c): 3,000 records of 11 fields (id, name, health, mana,
 *   pos x/y/z, rot x/y/z, inventory) built by this process in one list; a
 *   second process, pinned to another CPU, opens the segment by name and
 *   adds 1 to the 9 numeric fields of every record, pass after pass, for
 *   ~1 s (0.2 s with --quick); this process then reads every value back
 *   and counts any difference from the expected value as lost increments.
 *   Each increment resolves its field anew (record view from the list, then
 *   the field by index or by a lookup of its key in the record's index):
 *   nothing about the records is cached across increments but the list's
 *   view (the dict subject prepares its keys once: their hashes, not where
 *   they sit in a record).
 *     shmobj-struct  records are structs, fields by index
 *                    (shmobj_item_int_add)
 *     shmobj-dict    records are fixed dicts, fields by key string, the
 *                    keys prepared once (shmobj_key_init), each increment
 *                    one shmobj_view_key_int_add (index probe, key
 *                    compare, atomic add)
 *     shmobj-list    records are lists, fields by index
 *     shmobj-2proc   structs by index, both processes adding at once
 *     shmobj-shape   records of one shape (made once), fields by key
 *                    string prepared once, each increment one
 *                    shmobj_view_key_int_add (the shape's index probe, its
 *                    name compare, the record's slot)
 *   Metrics: Mincr/s, lost-increments. */
#include "bench-util.h"

#include <stdatomic.h>

#include "shmobj.h"
#include "bench-segment.h"

#define E1_DATA 4096
#define C1_RECORDS 3000
#define C1_ALL 11
#define C1_FIELDS 9
#define C1_COUNTERS (C1_RECORDS * C1_FIELDS)

static const char *const e1_sites[2] = {"https://a.example.com", "https://b.example.com"};

static const char *const c1_names[C1_ALL] = {
    "id", "name", "health", "mana", "pos_x", "pos_y", "pos_z",
    "rot_x", "rot_y", "rot_z", "inventory"};
/* The numeric fields, in the order the peers increment them. */
static const size_t c1_num[C1_FIELDS] = {0, 2, 3, 4, 5, 6, 7, 8, 9};

static double target_s(const bench_ctx *ctx)
{
    return ctx->quick ? 0.2 : 1.0;
}

static double now_s(void)
{
    return (double)bench_now_ns() * 1e-9;
}

static shmobj_segment *bench_segment(char *name, size_t len, uint64_t size)
{
    return bench_segment_new(name, len, "object", size, 0);
}

/* ---- E1 ---------------------------------------------------------------- */

static int str_is(const shmobj_view *v, const char *want)
{
    const char *s;
    size_t n;
    return shmobj_str_get(v, &s, &n) == 0 && n == strlen(want) && memcmp(s, want, n) == 0;
}

/* Read every field; the number found correct (5 when all are). */
static int e1_walk(shmobj_segment *seg, shmobj_ref ref, uint64_t *sum)
{
    shmobj_view v, it, s;
    int good = 0;
    size_t n;
    if (shmobj_obj_get(seg, ref, &v) != 0 || v.type != SHMOBJ_TYPE_DICT)
        return 0;
    if (shmobj_field_get(&v, "websites", &it) == 0 && shmobj_view_len(&it, &n) == 0 &&
        n == 2 && shmobj_view_item(&it, 0, &s) == 0 && str_is(&s, e1_sites[0]) &&
        shmobj_view_item(&it, 1, &s) == 0 && str_is(&s, e1_sites[1]))
        good++;
    double d;
    if (shmobj_field_get(&v, "avg_salary", &it) == 0 && shmobj_double_get(&it, &d) == 0 &&
        d == 3000.0)
        good++;
    int64_t x;
    if (shmobj_field_get(&v, "employees", &it) == 0 && shmobj_int_get(&it, &x) == 0 &&
        x == 10)
        good++;
    int b;
    if (shmobj_field_get(&v, "in_a_good_state", &it) == 0 && shmobj_bool_get(&it, &b) == 0 &&
        b == 1)
        good++;
    const void *p;
    if (shmobj_field_get(&v, "data", &it) == 0 && shmobj_bytes_get(&it, &p, &n) == 0 &&
        n == E1_DATA) {
        /* bench_sum64: the loop every E1 subject reads the data with. */
        *sum += bench_sum64(p, E1_DATA);
        good++;
    }
    return good;
}

static int e1_put(shmobj_segment *seg, const uint8_t *data, shmobj_ref *ref, size_t *size)
{
    /* The description lives on the stack, as a caller's would. */
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("websites"),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR(e1_sites[0]), SHMOBJ_VAL_STR(e1_sites[1])),
        SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0),
        SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT(10),
        SHMOBJ_VAL_STR("in_a_good_state"), SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_STR("data"), SHMOBJ_VAL_BYTES(data, E1_DATA));
    if (size != NULL && shmobj_obj_size(&rec, size) != 0)
        return -1;
    return shmobj_obj_put(seg, &rec, ref);
}

static int run_e1(const bench_ctx *ctx)
{
    char name[96];
    uint8_t data[E1_DATA];
    uint64_t want = 0, sum = 0, objs = 0, bad = 0;
    size_t size = 0;
    for (size_t j = 0; j < E1_DATA; j++)
        data[j] = (uint8_t)(j * 31 + 7);
    want = bench_sum64(data, E1_DATA);
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    if (seg == NULL)
        return bench_fail("E1: no segment");
    shmobj_ref ref;
    if (e1_put(seg, data, &ref, &size) != 0 || shmobj_obj_free(seg, ref) != 0)
        return bench_fail("E1: put failed");
    double t0 = now_s(), t, target = target_s(ctx);
    do {
        for (int i = 0; i < 256; i++) {
            if (e1_put(seg, data, &ref, NULL) != 0) {
                bad++;
                continue;
            }
            if (e1_walk(seg, ref, &sum) != 5)
                bad++;
            if (shmobj_obj_free(seg, ref) != 0)
                bad++;
        }
        objs += 256;
        t = now_s();
    } while (t - t0 < target);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    if (bad != 0 || sum != want * objs)
        return bench_fail("E1: %llu objects read back wrong", (unsigned long long)bad);
    bench_report(ctx, "Kobj/s", (double)objs / (t - t0) / 1e3);
    /* the block plus the arena's 16-byte block header */
    bench_report(ctx, "bytes/obj", (double)size + 16);
    return 0;
}

/* ---- E1 shmobj-shape ------------------------------------------------------ */

enum { E1S_WEBSITES, E1S_SALARY, E1S_EMPLOYEES, E1S_GOOD, E1S_DATA, E1S_N };

static const shmobj_field e1_fields[E1S_N] = {
    {"websites", SHMOBJ_TYPE_NULL, 0, 0},
    {"avg_salary", SHMOBJ_TYPE_DOUBLE, 0, 0},
    {"employees", SHMOBJ_TYPE_INT, 0, 0},
    {"in_a_good_state", SHMOBJ_TYPE_BOOL, 0, 0},
    {"data", SHMOBJ_TYPE_BYTES, E1_DATA, 0},
};

static int e1s_put(shmobj_segment *seg, shmobj_ref shape, const uint8_t *data, shmobj_ref *ref,
                   size_t *size)
{
    /* the websites are read, never replaced: a tuple, which the builder
     * packs (its strings back to back, no slot per item) */
    const shmobj_value items[E1S_N] = {
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(e1_sites[0]), SHMOBJ_VAL_STR(e1_sites[1])),
        SHMOBJ_VAL_DOUBLE(3000.0),
        SHMOBJ_VAL_INT(10),
        SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_BYTES(data, E1_DATA),
    };
    shmobj_value rec = SHMOBJ_VAL_RECORD(shape, items, E1S_N);
    if (size != NULL && shmobj_obj_size(&rec, size) != 0)
        return -1;
    return shmobj_obj_put(seg, &rec, ref);
}

/* Read every field by its prepared key; the number found correct. */
static int e1s_walk(shmobj_segment *seg, shmobj_ref ref, const shmobj_key *keys, uint64_t *sum)
{
    shmobj_view v, it, s;
    int good = 0;
    size_t n;
    if (shmobj_obj_get(seg, ref, &v) != 0 || v.type != SHMOBJ_TYPE_RECORD)
        return 0;
    if (shmobj_view_get_key(&v, &keys[E1S_WEBSITES], &it) == 0 && shmobj_view_len(&it, &n) == 0 &&
        n == 2 && shmobj_view_item(&it, 0, &s) == 0 && str_is(&s, e1_sites[0]) &&
        shmobj_view_item(&it, 1, &s) == 0 && str_is(&s, e1_sites[1]))
        good++;
    double d;
    if (shmobj_view_get_key(&v, &keys[E1S_SALARY], &it) == 0 && shmobj_double_get(&it, &d) == 0 &&
        d == 3000.0)
        good++;
    int64_t x;
    if (shmobj_view_get_key(&v, &keys[E1S_EMPLOYEES], &it) == 0 && shmobj_int_get(&it, &x) == 0 &&
        x == 10)
        good++;
    int b;
    if (shmobj_view_get_key(&v, &keys[E1S_GOOD], &it) == 0 && shmobj_bool_get(&it, &b) == 0 &&
        b == 1)
        good++;
    const void *p;
    if (shmobj_view_get_key(&v, &keys[E1S_DATA], &it) == 0 && shmobj_bytes_get(&it, &p, &n) == 0 &&
        n == E1_DATA) {
        *sum += bench_sum64(p, E1_DATA);
        good++;
    }
    return good;
}

static int run_e1_shape(const bench_ctx *ctx)
{
    char name[96];
    uint8_t data[E1_DATA];
    uint64_t want, sum = 0, objs = 0, bad = 0;
    size_t size = 0;
    shmobj_key keys[E1S_N];
    for (size_t j = 0; j < E1_DATA; j++)
        data[j] = (uint8_t)(j * 31 + 7);
    want = bench_sum64(data, E1_DATA);
    for (int f = 0; f < E1S_N; f++) {
        shmobj_value kd = SHMOBJ_VAL_STR(e1_fields[f].name);
        if (shmobj_key_init(&keys[f], &kd) != 0)
            return bench_fail("E1 shape: key");
    }
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    shmobj_ref shape, ref;
    if (seg == NULL || shmobj_shape_put(seg, e1_fields, E1S_N, &shape) != 0)
        return bench_fail("E1 shape: no segment or shape");
    if (e1s_put(seg, shape, data, &ref, &size) != 0 || shmobj_obj_free(seg, ref) != 0)
        return bench_fail("E1 shape: put failed");
    double t0 = now_s(), t, target = target_s(ctx);
    do {
        for (int i = 0; i < 256; i++) {
            if (e1s_put(seg, shape, data, &ref, NULL) != 0) {
                bad++;
                continue;
            }
            if (e1s_walk(seg, ref, keys, &sum) != 5)
                bad++;
            if (shmobj_obj_free(seg, ref) != 0)
                bad++;
        }
        objs += 256;
        t = now_s();
    } while (t - t0 < target);
    if (shmobj_shape_free(seg, shape) != 0)
        bad++;
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    if (bad != 0 || sum != want * objs)
        return bench_fail("E1 shape: %llu objects read back wrong", (unsigned long long)bad);
    bench_report(ctx, "Kobj/s", (double)objs / (t - t0) / 1e3);
    bench_report(ctx, "bytes/obj", (double)size + 16);
    return 0;
}

/* E1 arena-floor: what put + full read cannot go below on this heap. Per
 * object: one block of the E1 object's size from the arena, its bytes
 * other than the data zeroed (standing in for the encoding), the 4 KiB
 * copied in and summed (as every E1 subject reads it), the block freed.
 * No encoding and no lookup at all: its Kobj/s against msgpack's bounds
 * the ratio any encoding on the same allocator can reach. */
static int run_e1_floor(const bench_ctx *ctx)
{
    char name[96];
    uint8_t data[E1_DATA];
    uint64_t want, sum = 0, objs = 0;
    size_t size = 0;
    for (size_t j = 0; j < E1_DATA; j++)
        data[j] = (uint8_t)(j * 31 + 7);
    want = bench_sum64(data, E1_DATA);
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    shmobj_ref ref;
    if (seg == NULL || e1_put(seg, data, &ref, &size) != 0 || shmobj_obj_free(seg, ref) != 0)
        return bench_fail("E1 floor: no segment");
    double t0 = now_s(), t, target = target_s(ctx);
    do {
        for (int i = 0; i < 256; i++) {
            void *p;
            if (shmobj_arena_alloc(seg, size, 16, &ref, &p) != 0)
                return bench_fail("E1 floor: alloc failed");
            memset(p, 0, size - E1_DATA);
            memcpy((uint8_t *)p + size - E1_DATA, data, E1_DATA);
            sum += bench_sum64((uint8_t *)p + size - E1_DATA, E1_DATA);
            if (shmobj_arena_free(seg, ref) != 0)
                return bench_fail("E1 floor: free failed");
        }
        objs += 256;
        t = now_s();
    } while (t - t0 < target);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    if (sum != want * objs)
        return bench_fail("E1 floor: wrong sum");
    bench_report(ctx, "Kobj/s", (double)objs / (t - t0) / 1e3);
    bench_report(ctx, "bytes/obj", (double)size + 16);
    return 0;
}

/* ---- E1-access ----------------------------------------------------------- */

static int run_access(const bench_ctx *ctx)
{
    char name[96];
    size_t n = ctx->arg;
    shmobj_value *items = malloc(n * sizeof *items);
    if (items == NULL)
        return bench_fail("out of memory");
    for (size_t i = 0; i < n; i++)
        items[i] = SHMOBJ_VAL_INT((int64_t)i);
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    if (seg == NULL)
        return bench_fail("E1-access: no segment");
    shmobj_value list = SHMOBJ_VAL_LIST(items, n);
    shmobj_ref ref;
    if (shmobj_obj_put(seg, &list, &ref) != 0)
        return bench_fail("E1-access: put failed");
    free(items);
    uint64_t reads = ctx->quick ? 2000000 : 10000000, sum = 0;
    for (int warm = 0; warm < 2; warm++) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t r = 0; r < reads; r++) {
            shmobj_view v, it;
            int64_t x = -1;
            if (shmobj_obj_get(seg, ref, &v) != 0 || shmobj_view_item(&v, n - 1, &it) != 0 ||
                shmobj_int_get(&it, &x) != 0 || x != (int64_t)(n - 1))
                return bench_fail("E1-access: wrong value");
            sum += (uint64_t)x;
        }
        uint64_t dt = bench_now_ns() - t0;
        if (warm == 1)
            bench_report(ctx, "read-ns", (double)dt / (double)reads);
    }
    bench_keep(sum);
    shmobj_obj_free(seg, ref);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return 0;
}

/* ---- C1 ------------------------------------------------------------------ */

enum c1_kind { C1_STRUCT = 1, C1_DICT = 2, C1_LIST = 3, C1_2PROC = 4, C1_SHAPE = 5 };

static int64_t c1_init(int r, int f)
{
    return f == 0 ? (int64_t)r : (int64_t)r * 100 + f * 10;
}

/* Value counter k holds after `total` increments in record-then-field
 * order (a pass may stop part-way). */
static int64_t c1_expect_part(int k, uint64_t total)
{
    return (int64_t)(total / C1_COUNTERS) + ((uint64_t)k < total % C1_COUNTERS ? 1 : 0);
}

struct c1_shared {
    _Atomic int go;          /* set by the parent when both may start */
    _Atomic int ready;       /* set by the child when it has its views */
    uint64_t increments;     /* by the child */
    double seconds;          /* the child's timed span */
    int failed;              /* the child's error, 0 if none */
};

struct c1_arg {
    const char *name;
    int kind;
    double target;
    struct c1_shared *sh;
};

/* The view of field f (0..8) of record view rec. */
static inline int c1_field(int kind, const shmobj_view *rec, int f, shmobj_view *out)
{
    if (kind == C1_DICT || kind == C1_SHAPE)
        return shmobj_field_get(rec, c1_names[c1_num[f]], out);
    return shmobj_view_item(rec, c1_num[f], out);
}

/* Add 1 to every numeric field of every record, pass after pass, until
 * `target` seconds have gone by; returns the increments done. */
static int c1_increment(int kind, const shmobj_view *list, double target,
                        uint64_t *incs, double *secs)
{
    uint64_t total = 0;
    /* The keys are the program's constants: prepared once
     * (shmobj_key_init), looked up in each record on every increment. */
    shmobj_key keys[C1_FIELDS];
    for (int f = 0; f < C1_FIELDS; f++) {
        shmobj_value d = SHMOBJ_VAL_STR(c1_names[c1_num[f]]);
        if (shmobj_key_init(&keys[f], &d) != 0)
            return -1;
    }
    double t0 = now_s(), t;
    do {
        for (size_t r = 0; r < C1_RECORDS; r++) {
            shmobj_view rec;
            if (shmobj_view_item(list, r, &rec) != 0)
                return -1;
            if (kind == C1_DICT || kind == C1_SHAPE) {
                /* By key: probe the record's index, compare the key, add
                 * to the value found, for every increment. */
                for (int f = 0; f < C1_FIELDS; f++) {
                    if (shmobj_view_key_int_add(&rec, &keys[f], 1, NULL) != 0)
                        return -1;
                }
            } else {
                for (int f = 0; f < C1_FIELDS; f++) {
                    if (shmobj_item_int_add(&rec, c1_num[f], 1, NULL) != 0)
                        return -1;
                }
            }
        }
        total += C1_COUNTERS;
        t = now_s();
    } while (t - t0 < target);
    *incs = total;
    *secs = t - t0;
    return 0;
}

static int c1_child(void *p)
{
    struct c1_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view list;
    bench_pin(1);
    int rc = shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, INT64_C(10000000000), &seg);
    if (rc == 0)
        rc = shmobj_segment_root_get(seg, "c1", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &list);
    if (rc != 0) {
        a->sh->failed = rc;
        atomic_store(&a->sh->ready, 1);
        return 1;
    }
    atomic_store(&a->sh->ready, 1);
    while (!atomic_load(&a->sh->go))
        bench_spin_once();
    int kind = a->kind == C1_2PROC ? C1_STRUCT : a->kind;
    if (c1_increment(kind, &list, a->target, &a->sh->increments, &a->sh->seconds) != 0)
        a->sh->failed = -1;
    shmobj_segment_close(seg);
    return a->sh->failed != 0;
}

static int run_c1(const bench_ctx *ctx)
{
    int kind = (int)ctx->arg;
    int access = kind == C1_2PROC ? C1_STRUCT : kind;
    char name[96];
    static shmobj_value vals[C1_RECORDS][2 * C1_ALL], recs[C1_RECORDS];
    static char pname[C1_RECORDS][16];
    static shmobj_value inv[3];
    inv[0] = SHMOBJ_VAL_STR("sword");
    inv[1] = SHMOBJ_VAL_STR("shield");
    inv[2] = SHMOBJ_VAL_STR("potion");
    bench_pin(0);
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    if (seg == NULL)
        return bench_fail("C1: no segment");
    /* C1 shmobj-shape: one shape for every record, made once */
    shmobj_ref shape = SHMOBJ_REF_NULL;
    if (access == C1_SHAPE) {
        shmobj_field sf[C1_ALL];
        for (int j = 0; j < C1_ALL; j++)
            sf[j] = (shmobj_field){c1_names[j], SHMOBJ_TYPE_INT, 0, 0};
        sf[1].kind = SHMOBJ_TYPE_STR;
        sf[1].capacity = 16;
        sf[10].kind = SHMOBJ_TYPE_NULL;
        if (shmobj_shape_put(seg, sf, C1_ALL, &shape) != 0)
            return bench_fail("C1: shape");
    }
    for (int r = 0; r < C1_RECORDS; r++) {
        shmobj_value f[C1_ALL];
        snprintf(pname[r], sizeof pname[r], "player-%d", r);
        for (int j = 0; j < C1_FIELDS; j++)
            f[c1_num[j]] = SHMOBJ_VAL_INT(c1_init(r, j));
        f[1] = SHMOBJ_VAL_STR(pname[r]);
        f[10] = SHMOBJ_VAL_LIST(inv, 3);
        if (access == C1_SHAPE) {
            memcpy(vals[r], f, sizeof f);
            recs[r] = SHMOBJ_VAL_RECORD(shape, vals[r], C1_ALL);
        } else if (access == C1_DICT) {
            for (int j = 0; j < C1_ALL; j++) {
                vals[r][2 * j] = SHMOBJ_VAL_STR(c1_names[j]);
                vals[r][2 * j + 1] = f[j];
            }
            recs[r] = SHMOBJ_VAL_DICT(vals[r], C1_ALL);
        } else {
            memcpy(vals[r], f, sizeof f);
            recs[r] = access == C1_LIST ? SHMOBJ_VAL_LIST(vals[r], C1_ALL)
                                        : SHMOBJ_VAL_STRUCT(vals[r], C1_ALL, c1_names);
        }
    }
    shmobj_value top = SHMOBJ_VAL_LIST(recs, C1_RECORDS);
    shmobj_ref ref;
    shmobj_view list;
    int rc = shmobj_obj_put(seg, &top, &ref);
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "c1", ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &list);
    if (rc != 0)
        return bench_fail("C1: build: %s", shmobj_strerror(rc));

    struct c1_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return bench_fail("mmap failed");
    memset(sh, 0, sizeof *sh);
    struct c1_arg a = {name, kind, target_s(ctx), sh};
    pid_t pid = bench_fork(c1_child, &a);
    if (pid < 0)
        return bench_fail("fork failed");
    while (!atomic_load(&sh->ready))
        bench_spin_once();
    uint64_t mine = 0;
    double my_secs = 0;
    atomic_store(&sh->go, 1);
    if (kind == C1_2PROC && c1_increment(C1_STRUCT, &list, a.target, &mine, &my_secs) != 0)
        return bench_fail("C1: parent increments failed");
    int st = bench_wait(pid, (int)(60000 + a.target * 10000));
    if (st != 0 || sh->failed != 0)
        return bench_fail("C1: incrementer failed (%d, %d)", st, sh->failed);

    /* Read every record back through the same access path and verify. */
    uint64_t lost = 0;
    for (int r = 0; r < C1_RECORDS; r++) {
        shmobj_view rec, fv;
        const char *s;
        if (shmobj_view_item(&list, (size_t)r, &rec) != 0 ||
            shmobj_view_item(&rec, 1, &fv) != 0 || shmobj_str_get(&fv, &s, NULL) != 0 ||
            strcmp(s, pname[r]) != 0)
            return bench_fail("C1: record %d unreadable", r);
        for (int f = 0; f < C1_FIELDS; f++) {
            int64_t x, want;
            int k = r * C1_FIELDS + f;
            if (c1_field(access, &rec, f, &fv) != 0 || shmobj_int_get(&fv, &x) != 0)
                return bench_fail("C1: field unreadable");
            want = c1_init(r, f) + c1_expect_part(k, sh->increments) + c1_expect_part(k, mine);
            lost += x > want ? (uint64_t)(x - want) : (uint64_t)(want - x);
        }
    }
    double secs = sh->seconds > my_secs ? sh->seconds : my_secs;
    bench_report(ctx, "Mincr/s", (double)(sh->increments + mine) / secs / 1e6);
    bench_report(ctx, "lost-increments", (double)lost);
    munmap(sh, sizeof *sh);
    shmobj_obj_free(seg, ref);
    if (shape != SHMOBJ_REF_NULL && shmobj_shape_free(seg, shape) != 0)
        return bench_fail("C1: shape still in use after the records went");
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return 0;
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"E1", "shmobj", run_e1, 0},
        {"E1", "arena-floor", run_e1_floor, 0},
        {"E1", "shmobj-shape", run_e1_shape, 0},
        {"E1-access", "shmobj-1", run_access, 1},
        {"E1-access", "shmobj-100000", run_access, 100000},
        {"C1", "shmobj-struct", run_c1, C1_STRUCT},
        {"C1", "shmobj-dict", run_c1, C1_DICT},
        {"C1", "shmobj-list", run_c1, C1_LIST},
        {"C1", "shmobj-2proc", run_c1, C1_2PROC},
        {"C1", "shmobj-shape", run_c1, C1_SHAPE},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
