/* The oversubscribed soak of the mutable containers: far more processes
 * than CPUs (12 on a 2-CPU machine by default) change one growable list,
 * one mutable dict and one mutable set at once, every operation of each
 * mixed at random, first with no kill (each process ends by itself), then
 * with processes SIGKILLed at random moments and replaced.
 *
 * With more processes than CPUs the scheduler preempts processes anywhere
 * in a protocol, for whole time slices: the interleavings a test with one
 * process per CPU almost never meets (a process stalled between two steps
 * while two others trade a word) happen thousands of times a second.
 *
 * Every worker keeps its books in memory shared with the controller: what
 * each of its acknowledged calls changed, and the one call it is inside
 * (written before the call, cleared after it returned). A call that
 * returned 0 is acknowledged. At the end, with every worker gone, the
 * controller checks each container against the books:
 *
 *   - the list (appends, and inserts at random places; nothing removes
 *     from it): the library's check passes, every acknowledged append and
 *     insert is there exactly once, each instance's appends in its order,
 *     nothing else but at most the one in-flight item of a killed worker
 *     (or the null its reserved place reads as);
 *     and no worker ever saw the length go down;
 *   - the dict (each instance sets and deletes 8 keys of its own and adds
 *     to a counter of its own): every key holds its last acknowledged
 *     value or is absent after an acknowledged delete; each counter is its
 *     acknowledged adds; the dict's length is the keys the books hold;
 *   - the set (each instance adds and removes 8 members of its own): the
 *     same for membership;
 *   - a killed worker's one call in flight may have happened or not, and
 *     nothing else.
 *
 * SOAK_WORKERS sets the processes (default 12), CHAOS_SECONDS the length
 * of each half (default 2 s; .ci/run runs longer), SOAK_SEED the seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define MAX_WORKERS 32
#define MAX_INSTS 8192 /* instances over both halves (kills restart them) */
#define KEYS 8         /* dict keys and set members of one instance */
#define SEC INT64_C(1000000000)

enum op {
    OP_NONE,
    OP_APPEND,  /* list: item (inst, APPEND, app_acked) */
    OP_INSERT,  /* list: item (inst, INSERT, ins_acked) at a random place */
    OP_DSET,    /* dict: key j := value v */
    OP_DDEL,    /* dict: key j removed */
    OP_DMAKE,   /* dict: the counter made, at 0 */
    OP_DADD,    /* dict: counter += 1 */
    OP_SADD,    /* set: member j added */
    OP_SDEL,    /* set: member j removed */
    OP_NKINDS
};

/* One instance's books, written by its worker only; read by the
 * controller after the worker ended. */
struct book {
    uint64_t app_acked; /* appends acknowledged: items seq 0 .. app_acked-1 */
    uint64_t ins_acked; /* inserts acknowledged */
    uint64_t adds;      /* counter adds acknowledged */
    int64_t dval[KEYS]; /* last acknowledged value, -1 absent */
    uint8_t smem[KEYS]; /* member present */
    uint8_t counter;    /* counter made */
    uint8_t flight;     /* enum op of the call under way, OP_NONE outside */
    uint8_t flight_j;
    int64_t flight_v;
    uint64_t len_seen;  /* the longest list length it saw */
    uint64_t bad;       /* unexpected status codes and length decreases */
    int last_bad_rc;
    uint8_t bad_op;
};

struct shared {
    struct book inst[MAX_INSTS];
    _Atomic int stop; /* set by the controller: workers end by themselves */
};

struct soak {
    char name[96];
    shmobj_segment *seg;
    shmobj_ref list, dict, set;
    struct shared *sh;
    uint64_t seed;
    unsigned insts; /* instances started */
    uint64_t violations, kills;
};

static struct soak *g_s;

static void report(struct soak *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (s->violations < 20) {
        char buf[256];
        vsnprintf(buf, sizeof buf, fmt, ap);
        print_message("soak: violation: %s\n", buf);
    }
    va_end(ap);
    s->violations++;
}

/* A list item: instance, kind, sequence number within the kind. */
static int64_t item_of(unsigned inst, enum op kind, uint64_t seq)
{
    return (int64_t)((uint64_t)inst << 40 | (uint64_t)kind << 36 | seq);
}

static void dkey(char buf[32], unsigned inst, unsigned j) { snprintf(buf, 32, "k%u-%u", inst, j); }
static void ckey(char buf[32], unsigned inst) { snprintf(buf, 32, "c%u", inst); }
static void smember(char buf[32], unsigned inst, unsigned j) { snprintf(buf, 32, "s%u-%u", inst, j); }

static void bad(struct book *b, enum op op, int rc)
{
    b->bad++;
    b->last_bad_rc = rc;
    b->bad_op = (uint8_t)op;
}

/* One random operation, with its books. */
static void work_one(struct book *b, unsigned inst, uint64_t r, const shmobj_view *l,
                     const shmobj_view *d, const shmobj_view *st)
{
    /* appends half the time: the list's end changes hands often, between
     * processes that do other work in between */
    enum op op = r % 2 ? OP_APPEND : (enum op)(1 + (r >> 1) % (OP_NKINDS - 1));
    unsigned j = (unsigned)(r >> 8) % KEYS;
    char k[32];
    int rc;
    if (op == OP_DMAKE || (op == OP_DADD && !b->counter))
        op = b->counter ? OP_DADD : OP_DMAKE;
    b->flight_j = (uint8_t)j;
    atomic_signal_fence(memory_order_seq_cst);
    b->flight = (uint8_t)op;
    atomic_signal_fence(memory_order_seq_cst);
    switch (op) {
    case OP_APPEND:
        rc = shmobj_mlist_append(l, &SHMOBJ_VAL_INT(item_of(inst, op, b->app_acked)));
        if (rc == 0)
            b->app_acked++;
        break;
    case OP_INSERT: {
        size_t n = 0;
        rc = shmobj_view_len(l, &n);
        if (rc == 0) {
            if (n < b->len_seen)
                bad(b, OP_NONE, (int)n - (int)b->len_seen);
            b->len_seen = n;
            rc = shmobj_mlist_insert(l, (size_t)((r >> 16) % (n + 1)),
                                     &SHMOBJ_VAL_INT(item_of(inst, op, b->ins_acked)));
        }
        if (rc == 0)
            b->ins_acked++;
        break;
    }
    case OP_DSET:
        dkey(k, inst, j);
        b->flight_v = (int64_t)(r >> 20);
        rc = shmobj_mdict_set(d, &SHMOBJ_VAL_STR(k), &SHMOBJ_VAL_INT(b->flight_v));
        if (rc == 0)
            b->dval[j] = b->flight_v;
        break;
    case OP_DDEL:
        dkey(k, inst, j);
        rc = shmobj_mut_delete(d, &SHMOBJ_VAL_STR(k));
        if (rc == SHMOBJ_ENOTFOUND && b->dval[j] < 0)
            rc = 0;
        if (rc == 0)
            b->dval[j] = -1;
        break;
    case OP_DMAKE:
        ckey(k, inst);
        rc = shmobj_mdict_set(d, &SHMOBJ_VAL_STR(k), &SHMOBJ_VAL_INT(0));
        if (rc == 0)
            b->counter = 1;
        break;
    case OP_DADD: {
        shmobj_key key;
        ckey(k, inst);
        rc = shmobj_key_init(&key, &SHMOBJ_VAL_STR(k));
        if (rc == 0)
            rc = shmobj_mdict_int_add(d, &key, 1, NULL);
        if (rc == 0)
            b->adds++;
        break;
    }
    case OP_SADD:
        smember(k, inst, j);
        rc = shmobj_mset_add(st, &SHMOBJ_VAL_STR(k));
        if (rc == SHMOBJ_EEXIST && b->smem[j])
            rc = 0;
        if (rc == 0)
            b->smem[j] = 1;
        break;
    case OP_SDEL:
        smember(k, inst, j);
        rc = shmobj_mut_delete(st, &SHMOBJ_VAL_STR(k));
        if (rc == SHMOBJ_ENOTFOUND && !b->smem[j])
            rc = 0;
        if (rc == 0)
            b->smem[j] = 0;
        break;
    default:
        rc = 0;
        break;
    }
    atomic_signal_fence(memory_order_seq_cst);
    b->flight = OP_NONE;
    if (rc != 0)
        bad(b, op, rc);
}

struct worker_arg {
    struct soak *s;
    unsigned inst;
};

static int worker_main(void *p)
{
    struct worker_arg *a = p;
    struct soak *s = a->s;
    struct book *b = &s->sh->inst[a->inst];
    shmobj_segment *seg;
    int rc = shmobj_segment_open(s->name, SHMOBJ_BACKEND_SHM, 10 * SEC, &seg);
    if (rc != 0)
        return 10;
    shmobj_view l, d, st;
    if (shmobj_obj_get(seg, s->list, &l) != 0 || shmobj_obj_get(seg, s->dict, &d) != 0 ||
        shmobj_obj_get(seg, s->set, &st) != 0)
        return 11;
    uint64_t r = s->seed ^ ((uint64_t)a->inst * UINT64_C(0x9e3779b97f4a7c15));
    while (!atomic_load_explicit(&s->sh->stop, memory_order_relaxed))
        work_one(b, a->inst, test_xorshift(&r), &l, &d, &st);
    shmobj_segment_close(seg);
    return 0;
}

static pid_t start(struct soak *s)
{
    assert_true(s->insts < MAX_INSTS);
    /* the books start before the worker: it may be killed at once */
    for (unsigned j = 0; j < KEYS; j++)
        s->sh->inst[s->insts].dval[j] = -1;
    struct worker_arg a = {s, s->insts++};
    return test_child_start(worker_main, &a, 600);
}

/* ---- the controller's check ------------------------------------------- */

static void check_list(struct soak *s)
{
    int rc = shmobj_obj_check(s->seg, s->list);
    if (rc != 0)
        report(s, "list check: %s", shmobj_errname(rc));
    shmobj_view l;
    size_t n = 0;
    assert_int_equal(shmobj_obj_get(s->seg, s->list, &l), 0);
    assert_int_equal(shmobj_view_len(&l, &n), 0);
    /* seen[inst][kind]: a bitmap of the sequence numbers met */
    uint8_t **seen = calloc(s->insts * 2, sizeof *seen);
    uint64_t *last_app = calloc(s->insts, sizeof *last_app);
    assert_non_null(seen);
    assert_non_null(last_app);
    for (unsigned i = 0; i < s->insts; i++) {
        struct book *b = &s->sh->inst[i];
        seen[2 * i] = calloc(b->app_acked / 8 + 2, 1);
        seen[2 * i + 1] = calloc(b->ins_acked / 8 + 2, 1);
        last_app[i] = UINT64_MAX;
    }
    uint64_t extra = 0, nulls = 0;
    for (size_t p = 0; p < n; p++) {
        int64_t v;
        rc = shmobj_mlist_get_int(&l, p, &v);
        if (rc == SHMOBJ_ETYPE) {
            /* the place an appender killed after its reservation took
             * reads as a null (doc/format-object.md): one per kill at most */
            shmobj_view it;
            if (shmobj_view_item(&l, p, &it) == 0 && shmobj_view_type(&it) == SHMOBJ_TYPE_NULL) {
                nulls++;
                continue;
            }
        }
        if (rc != 0) {
            report(s, "list item %zu: %s", p, shmobj_errname(rc));
            continue;
        }
        uint64_t u = (uint64_t)v;
        unsigned inst = (unsigned)(u >> 40);
        unsigned kind = (unsigned)(u >> 36) & 15;
        uint64_t seq = u & ((UINT64_C(1) << 36) - 1);
        if (v < 0 || inst >= s->insts || (kind != OP_APPEND && kind != OP_INSERT)) {
            report(s, "list item %zu: %llx nobody appended", p, (unsigned long long)u);
            continue;
        }
        struct book *b = &s->sh->inst[inst];
        uint64_t acked = kind == OP_APPEND ? b->app_acked : b->ins_acked;
        if (seq > acked || (seq == acked && b->flight != kind)) {
            report(s, "list item %zu: instance %u's %s #%llu never acknowledged", p, inst,
                   kind == OP_APPEND ? "append" : "insert", (unsigned long long)seq);
            continue;
        }
        if (seq == acked)
            extra++;
        uint8_t *bits = seen[2 * inst + (kind == OP_INSERT)];
        if (bits[seq / 8] & (1u << seq % 8))
            report(s, "list item %zu: instance %u's item #%llu twice", p, inst,
                   (unsigned long long)seq);
        bits[seq / 8] |= (uint8_t)(1u << seq % 8);
        if (kind == OP_APPEND) {
            if (last_app[inst] != UINT64_MAX && seq <= last_app[inst])
                report(s, "list item %zu: instance %u's appends out of order (%llu after %llu)",
                       p, inst, (unsigned long long)seq, (unsigned long long)last_app[inst]);
            last_app[inst] = seq;
        }
    }
    uint64_t lost = 0;
    for (unsigned i = 0; i < s->insts; i++) {
        struct book *b = &s->sh->inst[i];
        for (int k = 0; k < 2; k++) {
            uint64_t acked = k ? b->ins_acked : b->app_acked;
            for (uint64_t q = 0; q < acked; q++)
                if (!(seen[2 * i + k][q / 8] & (1u << q % 8)))
                    lost++;
            free(seen[2 * i + k]);
        }
        if (b->len_seen != 0 && b->len_seen > n)
            report(s, "instance %u saw length %llu, the list ends with %zu", i,
                   (unsigned long long)b->len_seen, n);
    }
    if (lost)
        report(s, "list: %llu acknowledged items lost", (unsigned long long)lost);
    if (nulls > s->kills)
        report(s, "list: %llu nulls, more than the %llu kills", (unsigned long long)nulls,
               (unsigned long long)s->kills);
    print_message("soak: list of %zu items, %llu in flight at kills (%llu nulls), %llu lost\n",
                  n, (unsigned long long)extra, (unsigned long long)nulls,
                  (unsigned long long)lost);
    free(seen);
    free(last_app);
}

/* Does the dict (or set) hold key k as the books say? want: -1 absent,
 * else the value (any value for a set member: 0). alt: the other
 * acceptable state (the in-flight call's), or -2 for none. */
static void expect_key(struct soak *s, const shmobj_view *c, const char *k, int64_t want,
                       int64_t alt, bool is_set, uint64_t *present)
{
    int64_t got = -1;
    if (is_set) {
        int rc = shmobj_mut_contains(c, &SHMOBJ_VAL_STR(k));
        if (rc == 0)
            got = 0;
        else if (rc != SHMOBJ_ENOTFOUND)
            report(s, "set contains %s: %s", k, shmobj_errname(rc));
    } else {
        shmobj_key key;
        assert_int_equal(shmobj_key_init(&key, &SHMOBJ_VAL_STR(k)), 0);
        int rc = shmobj_mdict_get_int(c, &key, &got);
        if (rc == SHMOBJ_ENOTFOUND)
            got = -1;
        else if (rc != 0)
            report(s, "dict get %s: %s", k, shmobj_errname(rc));
    }
    if (got != want && got != alt)
        report(s, "%s %s: %lld, the books say %lld (or %lld)", is_set ? "set" : "dict", k,
               (long long)got, (long long)want, (long long)alt);
    if (got >= 0)
        (*present)++;
}

static void check_dict_set(struct soak *s)
{
    shmobj_view d, st;
    assert_int_equal(shmobj_obj_get(s->seg, s->dict, &d), 0);
    assert_int_equal(shmobj_obj_get(s->seg, s->set, &st), 0);
    int rc = shmobj_obj_check(s->seg, s->dict);
    if (rc != 0)
        report(s, "dict check: %s", shmobj_errname(rc));
    rc = shmobj_obj_check(s->seg, s->set);
    if (rc != 0)
        report(s, "set check: %s", shmobj_errname(rc));
    uint64_t in_dict = 0, in_set = 0, adds = 0;
    for (unsigned i = 0; i < s->insts; i++) {
        struct book *b = &s->sh->inst[i];
        char k[32];
        for (unsigned j = 0; j < KEYS; j++) {
            bool fl = b->flight_j == j;
            int64_t alt = -2;
            if (fl && b->flight == OP_DSET)
                alt = b->flight_v;
            else if (fl && b->flight == OP_DDEL)
                alt = -1;
            dkey(k, i, j);
            expect_key(s, &d, k, b->dval[j], alt, false, &in_dict);
            alt = -2;
            if (fl && b->flight == OP_SADD)
                alt = 0;
            else if (fl && b->flight == OP_SDEL)
                alt = -1;
            smember(k, i, j);
            expect_key(s, &st, k, b->smem[j] ? 0 : -1, alt, true, &in_set);
        }
        ckey(k, i);
        int64_t alt = b->flight == OP_DMAKE ? 0 : b->flight == OP_DADD ? (int64_t)b->adds + 1 : -2;
        expect_key(s, &d, k, b->counter ? (int64_t)b->adds : -1, alt, false, &in_dict);
        adds += b->adds;
    }
    size_t n = 0;
    assert_int_equal(shmobj_view_len(&d, &n), 0);
    if (n != in_dict)
        report(s, "dict holds %zu keys, the books %llu", n, (unsigned long long)in_dict);
    assert_int_equal(shmobj_view_len(&st, &n), 0);
    if (n != in_set)
        report(s, "set holds %zu members, the books %llu", n, (unsigned long long)in_set);
    print_message("soak: dict of %llu keys (%llu adds), set of %llu members\n",
                  (unsigned long long)in_dict, (unsigned long long)adds,
                  (unsigned long long)in_set);
}

static void check_books(struct soak *s, bool killed)
{
    for (unsigned i = 0; i < s->insts; i++) {
        struct book *b = &s->sh->inst[i];
        if (b->bad)
            report(s, "instance %u: %llu bad results, the last %s on op %u", i,
                   (unsigned long long)b->bad, b->last_bad_rc < 0 ? shmobj_errname(b->last_bad_rc) : "a shorter list",
                   (unsigned)b->bad_op);
        if (!killed && b->flight != OP_NONE)
            report(s, "instance %u ended inside op %u", i, (unsigned)b->flight);
    }
}

static unsigned env_unsigned(const char *name, unsigned dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? (unsigned)strtoul(v, NULL, 10) : dflt;
}

static int setup(void **state)
{
    struct soak *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->sh = mmap(NULL, sizeof *s->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(s->sh != MAP_FAILED);
    s->seed = env_unsigned("SOAK_SEED", (unsigned)getpid());
    test_name(s->name, sizeof s->name, "soak");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    o.max_size = 1024 * MiB;
    assert_int_equal(shmobj_segment_create(s->name, &o, &s->seg), 0);
    shmobj_value l = SHMOBJ_VAL_MLIST(), d = SHMOBJ_VAL_MDICT(), st = SHMOBJ_VAL_MSET();
    assert_int_equal(shmobj_obj_put(s->seg, &l, &s->list), 0);
    assert_int_equal(shmobj_obj_put(s->seg, &d, &s->dict), 0);
    assert_int_equal(shmobj_obj_put(s->seg, &st, &s->set), 0);
    g_s = s;
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    struct soak *s = *state;
    shmobj_segment_close(s->seg);
    shmobj_segment_destroy(s->name, SHMOBJ_BACKEND_SHM);
    munmap(s->sh, sizeof *s->sh);
    free(s);
    g_s = NULL;
    return 0;
}

/* Every worker works until told to stop and ends by itself: nothing may
 * be in flight, nothing lost, nothing extra. */
static void test_soak_oversubscribed_mutables_no_kills(void **state)
{
    struct soak *s = *state;
    unsigned nw = env_unsigned("SOAK_WORKERS", 12);
    unsigned secs = env_unsigned("CHAOS_SECONDS", 2);
    assert_true(nw <= MAX_WORKERS);
    pid_t pids[MAX_WORKERS];
    for (unsigned i = 0; i < nw; i++)
        pids[i] = start(s);
    test_sleep_ms(secs * 1000);
    atomic_store(&s->sh->stop, 1);
    for (unsigned i = 0; i < nw; i++)
        assert_int_equal(test_child_wait(pids[i]), 0);
    print_message("soak: %u processes for %u s, no kills\n", nw, secs);
    check_books(s, false);
    check_list(s);
    check_dict_set(s);
    assert_int_equal(s->violations, 0);
}

/* Workers are killed at random moments (a quarter within their first
 * millisecond, the rest from 1 to 40 ms) and replaced: every acknowledged
 * change stays, a killed call counts at most once. */
static void test_soak_oversubscribed_mutables_killed(void **state)
{
    struct soak *s = *state;
    unsigned nw = env_unsigned("SOAK_WORKERS", 12);
    unsigned secs = env_unsigned("CHAOS_SECONDS", 2);
    assert_true(nw <= MAX_WORKERS);
    pid_t pids[MAX_WORKERS];
    int64_t kill_at[MAX_WORKERS];
    uint64_t r = s->seed | 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t t = now.tv_sec * SEC + now.tv_nsec, end = t + (int64_t)secs * SEC;
    for (unsigned i = 0; i < nw; i++) {
        pids[i] = start(s);
        kill_at[i] = t + (int64_t)(1 + test_xorshift(&r) % 40) * 1000000;
    }
    while (t < end) {
        for (unsigned i = 0; i < nw; i++) {
            if (t < kill_at[i])
                continue;
            kill(pids[i], SIGKILL);
            assert_int_equal(test_child_wait(pids[i]), 128 + SIGKILL);
            s->kills++;
            if (s->insts >= MAX_INSTS - nw) {
                end = t;
                break;
            }
            pids[i] = start(s);
            uint64_t x = test_xorshift(&r);
            kill_at[i] = t + (int64_t)(x % 4 == 0 ? (x >> 8) % 1000 * 1000
                                                   : (1 + (x >> 8) % 40) * 1000000);
        }
        test_sleep_ms(1);
        clock_gettime(CLOCK_MONOTONIC, &now);
        t = now.tv_sec * SEC + now.tv_nsec;
    }
    for (unsigned i = 0; i < nw; i++) {
        if (pids[i] > 0 && kill(pids[i], SIGKILL) == 0) {
            test_child_wait(pids[i]);
            s->kills++;
        }
    }
    print_message("soak: %u processes, %llu kills, %u instances\n", nw,
                  (unsigned long long)s->kills, s->insts);
    check_books(s, true);
    check_list(s);
    check_dict_set(s);
    assert_int_equal(s->violations, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_soak_oversubscribed_mutables_no_kills, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_soak_oversubscribed_mutables_killed, setup,
                                        teardown),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
