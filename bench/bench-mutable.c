/* bench-mutable: mutable containers (doc/benchmarks.md, L1, D1 and C1).
 *
 * L1 shmobj: a growable list as a named root; two processes (pinned to two
 *   CPUs) each append 2,000,000 int64 (200,000 with --quick), the value
 *   (process << 32 | sequence), one shmobj_mlist_append each; then this
 *   process reads every item back (shmobj_mlist_get_int), counts what is
 *   missing (lost-items) and checks that each process's items appear in
 *   its own order with no gap. Metrics: Mappend/s (all appends over the
 *   span from start to the last finish), Mread/s, lost-items.
 * L1 shmobj-1proc: the same 4,000,000 appends (400,000) made by one
 *   process alone: the rate of one appender with the list's end always
 *   its own, which two appenders taking turns at one end cannot pass.
 * D1 (two processes on one container of 100,000 string keys "key-%06d",
 *   each process on its own half of the keys, so that it keeps a model of
 *   every value it owns): each process draws an operation at random, a
 *   quarter each set (a random value), get (checked against the model),
 *   add 1 and delete, for 5 s (1 s with --quick). At the end every key is
 *   read back and compared with the owner's model: lost-updates counts the
 *   differences and the gets that disagreed. Metric: Mops/s (both
 *   processes' operations over the longer span).
 *     shmobj  a mutable dict (shmobj_mdict_set/get_int/int_add, shmobj_mut_delete)
 *     map     the shared map, for reference (shmobj_map_set/get/add/del)
 * C1 shmobj-mdict: the C1 workload of bench/bench-object.c (3,000 records
 *   of 11 fields in one list; a second process adds 1 to the 9 numeric
 *   fields of every record by key, pass after pass, for ~1 s, 0.2 s with
 *   --quick; then every value is read back and checked) with each record a
 *   mutable dict, each increment one shmobj_mdict_int_add with keys
 *   prepared once. Metrics: Mincr/s, lost-increments.
 * The peers (boost, redis-P64) are in bench/peers-mutable.c. */
#include "bench-util.h"

#include <stdatomic.h>

#include "shmobj.h"
#include "bench-segment.h"

static double secs(const bench_ctx *ctx, double full, double quick)
{
    return ctx->quick ? quick : full;
}

static shmobj_segment *bench_segment(char *name, size_t len, uint64_t size)
{
    return bench_segment_new(name, len, "mutable", size, size);
}

struct sync {
    _Atomic int ready, go;
    double t0[2], t1[2];
    uint64_t ops[2];
    uint64_t bad[2];
    int failed[2];
};

static struct sync *sync_new(void)
{
    struct sync *s = bench_shared_alloc(sizeof *s);
    return s;
}

/* ---- L1 -------------------------------------------------------------------- */

struct l1_arg {
    const char *name;
    int who;
    uint64_t n;
    struct sync *s;
};

static int l1_child(void *p)
{
    struct l1_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view l;
    bench_pin(a->who + 1);
    int rc = shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, INT64_C(10000000000), &seg);
    if (rc == 0)
        rc = shmobj_segment_root_get(seg, "l1", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &l);
    atomic_fetch_add(&a->s->ready, 1);
    if (rc != 0) {
        a->s->failed[a->who] = rc;
        return 1;
    }
    while (!atomic_load(&a->s->go))
        bench_spin_once();
    a->s->t0[a->who] = bench_now_ns() / 1e9;
    for (uint64_t i = 0; i < a->n; i++) {
        shmobj_value v = SHMOBJ_VAL_INT((int64_t)((uint64_t)a->who << 32 | i));
        rc = shmobj_mlist_append(&l, &v);
        if (rc != 0) {
            a->s->failed[a->who] = rc;
            return 1;
        }
    }
    a->s->t1[a->who] = bench_now_ns() / 1e9;
    shmobj_segment_close(seg);
    return 0;
}

static int run_l1(const bench_ctx *ctx)
{
    char name[96];
    int procs = (int)ctx->arg;
    uint64_t n = (ctx->quick ? 200000 : 2000000) * 2 / (uint64_t)procs;
    bench_pin(0);
    shmobj_segment *seg = bench_segment(name, sizeof name, (uint64_t)procs * n * 16 * 2 + (64u << 20));
    if (seg == NULL)
        return bench_fail("L1: no segment");
    shmobj_value d = SHMOBJ_VAL_MLIST();
    shmobj_ref ref;
    shmobj_view l;
    if (shmobj_obj_put(seg, &d, &ref) != 0 || shmobj_segment_root_set(seg, "l1", ref) != 0 ||
        shmobj_obj_get(seg, ref, &l) != 0)
        return bench_fail("L1: build");
    struct sync *s = sync_new();
    struct l1_arg a[2] = {{name, 0, n, s}, {name, 1, n, s}};
    pid_t pid[2];
    for (int i = 0; i < procs; i++)
        pid[i] = bench_fork(l1_child, &a[i]);
    while (atomic_load(&s->ready) < procs)
        bench_spin_once();
    atomic_store(&s->go, 1);
    for (int i = 0; i < procs; i++)
        if (bench_wait(pid[i], 600000) != 0 || s->failed[i] != 0)
            return bench_fail("L1: appender failed (%d)", s->failed[i]);
    double t0 = s->t0[0], t1 = s->t1[0];
    for (int i = 1; i < procs; i++) {
        t0 = s->t0[i] < t0 ? s->t0[i] : t0;
        t1 = s->t1[i] > t1 ? s->t1[i] : t1;
    }
    /* the reader: every item, each process's order */
    size_t len = 0;
    if (shmobj_view_len(&l, &len) != 0)
        return bench_fail("L1: len");
    uint64_t next[2] = {0, 0}, misorder = 0;
    double r0 = bench_now_ns() / 1e9;
    for (size_t i = 0; i < len; i++) {
        int64_t x;
        if (shmobj_mlist_get_int(&l, i, &x) != 0)
            return bench_fail("L1: read %zu", i);
        uint64_t who = (uint64_t)x >> 32, seq = (uint64_t)x & UINT32_MAX;
        if (who >= (uint64_t)procs || seq != next[who])
            misorder++;
        else
            next[who]++;
    }
    double r1 = bench_now_ns() / 1e9;
    if (misorder != 0)
        return bench_fail("L1: %llu items out of their process's order",
                          (unsigned long long)misorder);
    bench_report(ctx, "Mappend/s", (double)(procs * n) / (t1 - t0) / 1e6);
    bench_report(ctx, "Mread/s", (double)len / (r1 - r0) / 1e6);
    bench_report(ctx, "lost-items", (double)(procs * n - len));
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return 0;
}

/* ---- D1 -------------------------------------------------------------------- */

#define D1_KEYS 100000

enum { D1_SHMOBJ = 1, D1_MAP = 2 };

struct d1_arg {
    const char *name;
    int kind, who;
    double target;
    struct sync *s;
    int64_t *model; /* shared: the owner's value of each key, INT64_MIN: absent */
};

static int d1_key(int k, char *buf)
{
    return bench_d1_key(k, buf);
}

static int d1_child(void *p)
{
    struct d1_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view d;
    shmobj_map *m = NULL;
    bench_rng rng;
    uint64_t ops = 0, bad = 0;
    bench_pin(a->who + 1);
    bench_rng_seed(&rng, 1234 + (uint64_t)a->who);
    int rc = shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, INT64_C(10000000000), &seg);
    if (rc == 0 && a->kind == D1_SHMOBJ) {
        rc = shmobj_segment_root_get(seg, "d1", &ref);
        if (rc == 0)
            rc = shmobj_obj_get(seg, ref, &d);
    } else if (rc == 0) {
        rc = shmobj_map_open(seg, "d1", &m);
    }
    atomic_fetch_add(&a->s->ready, 1);
    if (rc != 0) {
        a->s->failed[a->who] = rc;
        return 1;
    }
    while (!atomic_load(&a->s->go))
        bench_spin_once();
    double t0 = bench_now_ns() / 1e9, t;
    do {
        for (int batch = 0; batch < 256; batch++) {
            uint64_t r = bench_rng_next(&rng);
            int k = (int)((r >> 8) % (D1_KEYS / 2)) * 2 + a->who;
            char kb[16];
            int kl = d1_key(k, kb);
            int64_t *mv = &a->model[k], x = 0;
            shmobj_value key = SHMOBJ_VAL_STRN(kb, (size_t)kl);
            switch (r & 3) {
            case 0: { /* set */
                int64_t v = (int64_t)(r >> 16);
                rc = a->kind == D1_SHMOBJ
                         ? shmobj_mdict_set(&d, &key, &SHMOBJ_VAL_INT(v))
                         : shmobj_map_set(m, kb, (size_t)kl, &v, sizeof v);
                *mv = v;
                break;
            }
            case 1: { /* get */
                if (a->kind == D1_SHMOBJ) {
                    shmobj_key pk;
                    rc = shmobj_key_init(&pk, &key);
                    if (rc == 0)
                        rc = shmobj_mdict_get_int(&d, &pk, &x);
                } else {
                    rc = shmobj_map_get(m, kb, (size_t)kl, &x, sizeof x, NULL);
                }
                if (rc == SHMOBJ_ENOTFOUND) {
                    bad += *mv != INT64_MIN;
                    rc = 0;
                } else if (rc == 0) {
                    bad += *mv != x;
                }
                break;
            }
            case 2: { /* add 1 (an absent key starts at 1) */
                if (a->kind == D1_SHMOBJ) {
                    shmobj_key pk;
                    rc = shmobj_key_init(&pk, &key);
                    if (rc == 0)
                        rc = shmobj_mdict_int_add(&d, &pk, 1, NULL);
                    if (rc == SHMOBJ_ENOTFOUND)
                        rc = shmobj_mdict_set(&d, &key, &SHMOBJ_VAL_INT(1));
                    *mv = *mv == INT64_MIN ? 1 : *mv + 1;
                } else {
                    /* the map's add starts an absent key at 0 */
                    rc = shmobj_map_add(m, kb, (size_t)kl, 1, NULL);
                    *mv = *mv == INT64_MIN ? 1 : *mv + 1;
                }
                break;
            }
            default: /* delete */
                rc = a->kind == D1_SHMOBJ ? shmobj_mut_delete(&d, &key)
                                          : shmobj_map_del(m, kb, (size_t)kl);
                if (rc == SHMOBJ_ENOTFOUND)
                    rc = 0;
                *mv = INT64_MIN;
                break;
            }
            if (rc != 0) {
                a->s->failed[a->who] = rc;
                return 1;
            }
            ops++;
        }
        t = bench_now_ns() / 1e9;
    } while (t - t0 < a->target);
    a->s->t0[a->who] = t0;
    a->s->t1[a->who] = t;
    a->s->ops[a->who] = ops;
    a->s->bad[a->who] = bad;
    if (m != NULL)
        shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static int run_d1(const bench_ctx *ctx)
{
    char name[96];
    int kind = (int)ctx->arg;
    bench_pin(0);
    shmobj_segment *seg = bench_segment(name, sizeof name, 256u << 20);
    if (seg == NULL)
        return bench_fail("D1: no segment");
    shmobj_view d;
    shmobj_ref ref = 0;
    shmobj_map *m = NULL;
    int64_t *model = bench_shared_alloc(sizeof(int64_t) * D1_KEYS);
    int rc;
    if (kind == D1_SHMOBJ) {
        shmobj_value dv = SHMOBJ_VAL_MDICT();
        rc = shmobj_obj_put(seg, &dv, &ref);
        if (rc == 0)
            rc = shmobj_segment_root_set(seg, "d1", ref);
        if (rc == 0)
            rc = shmobj_obj_get(seg, ref, &d);
    } else {
        rc = shmobj_map_create(seg, "d1", &m);
    }
    /* every key present at the start, value its number */
    for (int k = 0; rc == 0 && k < D1_KEYS; k++) {
        char kb[16];
        int kl = d1_key(k, kb);
        int64_t v = k;
        rc = kind == D1_SHMOBJ
                 ? shmobj_mdict_set(&d, &SHMOBJ_VAL_STRN(kb, (size_t)kl), &SHMOBJ_VAL_INT(v))
                 : shmobj_map_set(m, kb, (size_t)kl, &v, sizeof v);
        model[k] = v;
    }
    if (rc != 0)
        return bench_fail("D1: build: %s", shmobj_strerror(rc));
    struct sync *s = sync_new();
    double target = secs(ctx, 5.0, 1.0);
    struct d1_arg a[2] = {{name, kind, 0, target, s, model}, {name, kind, 1, target, s, model}};
    pid_t pid[2] = {bench_fork(d1_child, &a[0]), bench_fork(d1_child, &a[1])};
    while (atomic_load(&s->ready) < 2)
        bench_spin_once();
    atomic_store(&s->go, 1);
    for (int i = 0; i < 2; i++)
        if (bench_wait(pid[i], 120000) != 0 || s->failed[i] != 0)
            return bench_fail("D1: worker failed (%s)", shmobj_strerror(s->failed[i]));
    uint64_t lost = s->bad[0] + s->bad[1];
    for (int k = 0; k < D1_KEYS; k++) {
        char kb[16];
        int kl = d1_key(k, kb);
        int64_t x = 0;
        if (kind == D1_SHMOBJ) {
            shmobj_key pk;
            shmobj_value kv = SHMOBJ_VAL_STRN(kb, (size_t)kl);
            rc = shmobj_key_init(&pk, &kv);
            if (rc == 0)
                rc = shmobj_mdict_get_int(&d, &pk, &x);
        } else {
            rc = shmobj_map_get(m, kb, (size_t)kl, &x, sizeof x, NULL);
        }
        if (rc == SHMOBJ_ENOTFOUND)
            lost += model[k] != INT64_MIN;
        else if (rc == 0)
            lost += model[k] != x;
        else
            return bench_fail("D1: read back: %s", shmobj_strerror(rc));
    }
    double span = (s->t1[0] - s->t0[0]) > (s->t1[1] - s->t0[1]) ? s->t1[0] - s->t0[0]
                                                                 : s->t1[1] - s->t0[1];
    bench_report(ctx, "Mops/s", (double)(s->ops[0] + s->ops[1]) / span / 1e6);
    bench_report(ctx, "lost-updates", (double)lost);
    if (m != NULL)
        shmobj_map_close(m);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return lost != 0 ? bench_fail("D1: %llu lost updates", (unsigned long long)lost) : 0;
}

/* ---- C1 shmobj-mdict ------------------------------------------------------- */

#define C1_RECORDS 3000
#define C1_ALL 11
#define C1_FIELDS 9
#define C1_COUNTERS (C1_RECORDS * C1_FIELDS)

static const char *const c1_names[C1_ALL] = {
    "id", "name", "health", "mana", "pos_x", "pos_y", "pos_z",
    "rot_x", "rot_y", "rot_z", "inventory"};
static const size_t c1_num[C1_FIELDS] = {0, 2, 3, 4, 5, 6, 7, 8, 9};

static int64_t c1_init(int r, int f)
{
    return f == 0 ? (int64_t)r : (int64_t)r * 100 + f * 10;
}

static int64_t c1_expect_part(int k, uint64_t total)
{
    return (int64_t)(total / C1_COUNTERS) + ((uint64_t)k < total % C1_COUNTERS ? 1 : 0);
}

struct c1_arg {
    const char *name;
    double target;
    struct sync *s;
};

static int c1_child(void *p)
{
    struct c1_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view list;
    shmobj_key keys[C1_FIELDS];
    bench_pin(1);
    int rc = shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, INT64_C(10000000000), &seg);
    if (rc == 0)
        rc = shmobj_segment_root_get(seg, "c1", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &list);
    for (int f = 0; rc == 0 && f < C1_FIELDS; f++) {
        shmobj_value kd = SHMOBJ_VAL_STR(c1_names[c1_num[f]]);
        rc = shmobj_key_init(&keys[f], &kd);
    }
    atomic_fetch_add(&a->s->ready, 1);
    if (rc != 0) {
        a->s->failed[0] = rc;
        return 1;
    }
    while (!atomic_load(&a->s->go))
        bench_spin_once();
    uint64_t total = 0;
    double t0 = bench_now_ns() / 1e9, t;
    do {
        /* each increment resolves its field anew: the record's view from
         * the list, then the key in the record */
        for (size_t r = 0; r < C1_RECORDS; r++) {
            shmobj_view rec;
            if (shmobj_view_item(&list, r, &rec) != 0)
                return a->s->failed[0] = -1, 1;
            for (int f = 0; f < C1_FIELDS; f++)
                if (shmobj_mdict_int_add(&rec, &keys[f], 1, NULL) != 0)
                    return a->s->failed[0] = -2, 1;
        }
        total += C1_COUNTERS;
        t = bench_now_ns() / 1e9;
    } while (t - t0 < a->target);
    a->s->ops[0] = total;
    a->s->t0[0] = t0;
    a->s->t1[0] = t;
    shmobj_segment_close(seg);
    return 0;
}

static int run_c1(const bench_ctx *ctx)
{
    char name[96];
    static char pname[C1_RECORDS][16];
    static shmobj_value recs[C1_RECORDS];
    bench_pin(0);
    shmobj_segment *seg = bench_segment(name, sizeof name, 64u << 20);
    if (seg == NULL)
        return bench_fail("C1: no segment");
    for (int r = 0; r < C1_RECORDS; r++)
        recs[r] = SHMOBJ_VAL_MDICT();
    shmobj_value top = SHMOBJ_VAL_LIST(recs, C1_RECORDS);
    shmobj_ref ref;
    shmobj_view list;
    int rc = shmobj_obj_put(seg, &top, &ref);
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "c1", ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &list);
    shmobj_value inv[3] = {SHMOBJ_VAL_STR("sword"), SHMOBJ_VAL_STR("shield"),
                           SHMOBJ_VAL_STR("potion")};
    for (int r = 0; rc == 0 && r < C1_RECORDS; r++) {
        shmobj_view rec;
        snprintf(pname[r], sizeof pname[r], "player-%d", r);
        rc = shmobj_view_item(&list, (size_t)r, &rec);
        for (int j = 0; rc == 0 && j < C1_ALL; j++) {
            shmobj_value v = SHMOBJ_VAL_NULL;
            if (j == 1)
                v = SHMOBJ_VAL_STR(pname[r]);
            else if (j == 10)
                v = SHMOBJ_VAL_LIST(inv, 3);
            for (int f = 0; f < C1_FIELDS; f++)
                if (c1_num[f] == (size_t)j)
                    v = SHMOBJ_VAL_INT(c1_init(r, f));
            rc = shmobj_mdict_set(&rec, &SHMOBJ_VAL_STR(c1_names[j]), &v);
        }
    }
    if (rc != 0)
        return bench_fail("C1: build: %s", shmobj_strerror(rc));
    struct sync *s = sync_new();
    struct c1_arg a = {name, secs(ctx, 1.0, 0.2), s};
    pid_t pid = bench_fork(c1_child, &a);
    while (atomic_load(&s->ready) < 1)
        bench_spin_once();
    atomic_store(&s->go, 1);
    if (bench_wait(pid, 120000) != 0 || s->failed[0] != 0)
        return bench_fail("C1: incrementer failed (%d)", s->failed[0]);
    uint64_t lost = 0;
    for (int r = 0; r < C1_RECORDS; r++) {
        shmobj_view rec, fv;
        const char *str;
        if (shmobj_view_item(&list, (size_t)r, &rec) != 0 ||
            shmobj_view_get_str(&rec, "name", &fv) != 0 || shmobj_str_get(&fv, &str, NULL) != 0 ||
            strcmp(str, pname[r]) != 0)
            return bench_fail("C1: record %d unreadable", r);
        for (int f = 0; f < C1_FIELDS; f++) {
            int64_t x;
            int k = r * C1_FIELDS + f;
            if (shmobj_view_get_str(&rec, c1_names[c1_num[f]], &fv) != 0 ||
                shmobj_int_get(&fv, &x) != 0)
                return bench_fail("C1: field unreadable");
            int64_t want = c1_init(r, f) + c1_expect_part(k, s->ops[0]);
            lost += x > want ? (uint64_t)(x - want) : (uint64_t)(want - x);
        }
    }
    bench_report(ctx, "Mincr/s", (double)s->ops[0] / (s->t1[0] - s->t0[0]) / 1e6);
    bench_report(ctx, "lost-increments", (double)lost);
    shmobj_obj_free(seg, ref);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return 0;
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"L1", "shmobj", run_l1, 2},
        {"L1", "shmobj-1proc", run_l1, 1},
        {"D1", "shmobj", run_d1, D1_SHMOBJ},
        {"D1", "map", run_d1, D1_MAP},
        {"C1", "shmobj-mdict", run_c1, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
