/* H1 peers: a hash table of many items, done by other means than libshmobj.
 *
 * The workload (doc/benchmarks.md, H1): set n items, get all n in random order
 * checking every value, iterate all. Workloads:
 *   H1-64  64-byte keys and 64-byte values, both "%064d" (value of i*7+3),
 *          n = 1,000,000 (200,000 with --quick);
 *   H1-16  16-byte keys "%016d", 8-byte values (little-endian i*7+3),
 *          n = 1,000,000 (200,000 with --quick).
 * Keys, values and the random get order are prepared before any timing.
 *
 * Subjects:
 *   private-table  an open-addressing table in private memory written for
 *                  the benchmark: the ceiling (see the section below).
 *   private-table-huge  the same table with its slot array and entry arena
 *                  in private memory advised for transparent huge pages
 *                  (madvise MADV_HUGEPAGE on 2 MiB-aligned mappings): what
 *                  huge pages give the ceiling. Skipped (77) when the
 *                  kernel allows no transparent huge pages for it.
 *   lmdb           LMDB in a fresh directory on tmpfs (/dev/shm): write
 *                  transactions of 10,000 puts each, one read transaction
 *                  for the gets, a cursor for the iteration.
 *   boost          Boost.Interprocess unordered_map in managed_shared_memory;
 *                  lives in bench-peers-h1-boost (C++), which this execs.
 *   redis          SET / GET one round trip each, SCAN for the iteration,
 *                  against a private redis-server; far fewer items (10,000,
 *                  5,000 with --quick; said on stderr) since each operation
 *                  costs a round trip to the server.
 *   redis-P64      the same with 64 commands per round trip, all n items.
 *
 * Metrics: set-Mops/s, get-Mops/s, iter-Mops/s, bytes/item (memory the
 * structure uses, divided by n), keys-seen (distinct keys the iteration
 * returned; must equal n).
 */
#include "peers-util.h"

/* The library's unaligned loads (lib/common/bytes.h: header-only, libc
 * only), so the table's hash reads keys as the library's does; nothing of
 * the library is linked. */
#include "bytes.h"

#include <dirent.h>

#ifndef PEERS_NO_LMDB
#include <lmdb.h>
#endif

/* ---- the data set -------------------------------------------------------- */

struct h1_data {
    const char *workload;
    size_t n, klen, vlen;
    char *keys; /* n * klen bytes, key i at keys + i * klen */
    char *vals; /* n * vlen bytes */
    uint32_t *order; /* random permutation of 0..n-1 for the gets */
};

static void h1_prepare(struct h1_data *d, const char *workload, size_t n)
{
    d->workload = workload;
    d->n = n;
    if (strcmp(workload, "H1-64") == 0) {
        d->klen = 64;
        d->vlen = 64;
    } else {
        d->klen = 16;
        d->vlen = 8;
    }
    d->keys = malloc(n * d->klen);
    d->vals = malloc(n * d->vlen);
    d->order = malloc(n * sizeof *d->order);
    if (!d->keys || !d->vals || !d->order)
        peers_die("out of memory");
    bench_h1_fill(d->keys, d->vals, n, d->klen, d->vlen);
    for (size_t i = 0; i < n; i++)
        d->order[i] = (uint32_t)i;
    peers_shuffle_u32(d->order, n, 0x5eed1234abcdULL);
}

static int h1_done(struct h1_data *d, int rc)
{
    free(d->keys);
    free(d->vals);
    free(d->order);
    return rc;
}

static void h1_report(const struct h1_data *d, const char *subject, size_t n,
                      double t_set, double t_get, double t_iter, double bytes,
                      size_t seen)
{
    peers_report(d->workload, subject, "set-Mops/s", (double)n / t_set / 1e6);
    peers_report(d->workload, subject, "get-Mops/s", (double)n / t_get / 1e6);
    peers_report(d->workload, subject, "iter-Mops/s", (double)n / t_iter / 1e6);
    peers_report(d->workload, subject, "bytes/item", (double)(long long)(bytes / (double)n + 0.5));
    peers_report(d->workload, subject, "keys-seen", (double)seen);
}

/* ---- private-table -------------------------------------------------------
 *
 * What a competent C programmer writes in an afternoon: linear probing over
 * a power-of-two array of 8-byte slots {32 bits of the hash, entry ref},
 * grown by doubling at 3/4 load (the slots keep enough hash bits to rehash
 * without touching the entries). Entries {u32 klen, u32 vlen, key, value}
 * are appended to one arena (8-byte aligned), so the slot array stays small
 * and dense; iteration walks the slot array and reads each entry it
 * points to (what an iterator over an open-addressing table does; walking
 * the arena instead would only work without deletions). The hash is a
 * wyhash-style multiply-fold over 16-byte blocks. bytes/item counts the
 * slot array plus the arena bytes in use (the arena's unused tail is never
 * touched, so it costs no memory).
 */

__extension__ typedef unsigned __int128 pt_u128;

static inline uint64_t pt_mum(uint64_t a, uint64_t b)
{
    pt_u128 r = (pt_u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t pt_hash(const void *key, size_t len)
{
    const uint8_t *p = key;
    const uint64_t s0 = 0xa0761d6478bd642fULL, s1 = 0xe7037ed1a0b428dbULL,
                   s2 = 0x8ebc6af09c88c6e3ULL;
    uint64_t seed = 0x9e3779b97f4a7c15ULL ^ pt_mum(len ^ s0, s1);
    size_t n = len;
    while (n > 16) {
        seed = pt_mum(shmobj__load64(p) ^ s1, shmobj__load64(p + 8) ^ seed);
        p += 16;
        n -= 16;
    }
    uint64_t a = 0, b = 0;
    if (n >= 8) {
        a = shmobj__load64(p);
        b = shmobj__load64(p + n - 8);
    } else if (n >= 4) {
        a = shmobj__load32(p);
        b = shmobj__load32(p + n - 4);
    } else if (n > 0) {
        a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
    }
    return pt_mum(s2 ^ len, pt_mum(a ^ s1, b ^ seed));
}

struct pt_slot {
    uint32_t h;   /* low 32 bits of the key's hash (home = h & mask) */
    uint32_t ref; /* 1 + arena offset / 8; 0 = empty */
};

struct pt_table {
    struct pt_slot *slots;
    size_t mask;  /* capacity - 1 */
    size_t count;
    uint8_t *arena;
    size_t used, cap; /* arena bytes in use / allocated */
    int huge;         /* memory from pt_mem(): THP-advised mappings */
};

/* ---- memory of private-table-huge ----------------------------------------
 * Zeroed anonymous mappings, 2 MiB-aligned and advised MADV_HUGEPAGE, so
 * the kernel backs them with transparent huge pages. */
#define PT_HUGE (2u << 20)

static size_t pt_round(size_t bytes)
{
    return (bytes + PT_HUGE - 1) & ~(size_t)(PT_HUGE - 1);
}

static void *pt_mem(size_t bytes)
{
    size_t len = pt_round(bytes), room = len + PT_HUGE;
    uint8_t *r = mmap(NULL, room, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        peers_die("out of memory");
    uint8_t *p = (uint8_t *)(((uintptr_t)r + PT_HUGE - 1) & ~(uintptr_t)(PT_HUGE - 1));
    if (p > r)
        munmap(r, (size_t)(p - r));
    if (p + len < r + room)
        munmap(p + len, (size_t)(r + room - (p + len)));
    (void)madvise(p, len, MADV_HUGEPAGE);
    return p;
}

static void pt_mem_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, pt_round(bytes));
}

/* As realloc does for large blocks: move the pages, copy nothing. */
static void *pt_mem_grow(void *p, size_t old, size_t bytes)
{
    void *q = mremap(p, pt_round(old), pt_round(bytes), MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        peers_die("out of memory");
    (void)madvise(q, pt_round(bytes), MADV_HUGEPAGE);
    return q;
}

struct pt_entry {
    uint32_t klen, vlen;
    /* key bytes, then value bytes */
};

static inline struct pt_entry *pt_at(const struct pt_table *t, uint32_t ref)
{
    return (struct pt_entry *)(t->arena + (size_t)(ref - 1) * 8);
}

static void pt_init(struct pt_table *t, size_t cap, int huge)
{
    memset(t, 0, sizeof *t);
    t->huge = huge;
    t->mask = cap - 1;
    t->cap = huge ? PT_HUGE : 1 << 20;
    t->slots = huge ? pt_mem(cap * sizeof *t->slots) : calloc(cap, sizeof *t->slots);
    t->arena = huge ? pt_mem(t->cap) : malloc(t->cap);
    if (!t->slots || !t->arena)
        peers_die("out of memory");
}

static void pt_free(struct pt_table *t)
{
    if (t->huge) {
        pt_mem_free(t->slots, (t->mask + 1) * sizeof *t->slots);
        pt_mem_free(t->arena, t->cap);
        return;
    }
    free(t->slots);
    free(t->arena);
}

static void pt_grow(struct pt_table *t)
{
    size_t cap = (t->mask + 1) * 2, mask = cap - 1;
    struct pt_slot *s = t->huge ? pt_mem(cap * sizeof *s) : calloc(cap, sizeof *s);
    if (!s)
        peers_die("out of memory");
    for (size_t i = 0; i <= t->mask; i++) {
        struct pt_slot e = t->slots[i];
        if (!e.ref)
            continue;
        size_t j = e.h & mask;
        while (s[j].ref)
            j = (j + 1) & mask;
        s[j] = e;
    }
    if (t->huge)
        pt_mem_free(t->slots, (t->mask + 1) * sizeof *t->slots);
    else
        free(t->slots);
    t->slots = s;
    t->mask = mask;
}

/* Find the slot of key, or the empty slot where it would go. */
static inline struct pt_slot *pt_find(const struct pt_table *t, const void *key,
                                      size_t klen, uint32_t h)
{
    size_t i = h & t->mask;
    for (;;) {
        struct pt_slot *s = &t->slots[i];
        if (!s->ref)
            return s;
        if (s->h == h) {
            struct pt_entry *e = pt_at(t, s->ref);
            if (e->klen == klen && memcmp(e + 1, key, klen) == 0)
                return s;
        }
        i = (i + 1) & t->mask;
    }
}

static void pt_set(struct pt_table *t, const void *key, size_t klen,
                   const void *val, size_t vlen)
{
    if ((t->count + 1) * 4 > (t->mask + 1) * 3)
        pt_grow(t);
    uint32_t h = (uint32_t)pt_hash(key, klen);
    struct pt_slot *s = pt_find(t, key, klen, h);
    if (s->ref) {
        struct pt_entry *e = pt_at(t, s->ref);
        if (e->vlen == vlen) { /* same size: overwrite in place */
            memcpy((uint8_t *)(e + 1) + klen, val, vlen);
            return;
        }
    } else {
        t->count++;
    }
    size_t need = (sizeof(struct pt_entry) + klen + vlen + 7) & ~(size_t)7;
    if (t->used + need > t->cap) {
        size_t old = t->cap;
        while (t->used + need > t->cap)
            t->cap *= 2;
        t->arena = t->huge ? pt_mem_grow(t->arena, old, t->cap) : realloc(t->arena, t->cap);
        if (!t->arena)
            peers_die("out of memory");
    }
    struct pt_entry *e = (struct pt_entry *)(t->arena + t->used);
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    memcpy(e + 1, key, klen);
    memcpy((uint8_t *)(e + 1) + klen, val, vlen);
    s->h = h;
    s->ref = (uint32_t)(t->used / 8 + 1);
    t->used += need;
}

static inline const void *pt_get(const struct pt_table *t, const void *key,
                                 size_t klen, size_t *vlen)
{
    uint32_t h = (uint32_t)pt_hash(key, klen);
    struct pt_slot *s = pt_find(t, key, klen, h);
    if (!s->ref)
        return NULL;
    struct pt_entry *e = pt_at(t, s->ref);
    *vlen = e->vlen;
    return (const uint8_t *)(e + 1) + klen;
}

/* Whether anonymous memory gets transparent huge pages when advised. */
static int pt_thp_allowed(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    return strstr(line, "[always]") || strstr(line, "[madvise]");
}

static int h1_private(const struct h1_data *d, int huge)
{
    const char *subject = huge ? "private-table-huge" : "private-table";
    if (huge && !pt_thp_allowed())
        peers_skip("private-table-huge: transparent huge pages are disabled");
    struct pt_table t;
    pt_init(&t, 1024, huge);
    size_t n = d->n;

    double t0 = peers_now();
    for (size_t i = 0; i < n; i++)
        pt_set(&t, d->keys + i * d->klen, d->klen, d->vals + i * d->vlen, d->vlen);
    double t1 = peers_now();
    struct timespec c1, c2;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    size_t bad = 0;
    for (size_t j = 0; j < n; j++) {
        size_t i = d->order[j], vlen = 0;
        const void *v = pt_get(&t, d->keys + i * d->klen, d->klen, &vlen);
        if (!v || vlen != d->vlen || memcmp(v, d->vals + i * d->vlen, vlen) != 0)
            bad++;
    }
    double t2 = peers_now();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c2);
    /* diagnostic: CPU time per get, which a loaded machine's waits do not
     * inflate (the BENCH figures are wall-clock) */
    fprintf(stderr, "%s: %.1f ns of CPU per get\n", subject,
            ((double)(c2.tv_sec - c1.tv_sec) * 1e9 + (double)(c2.tv_nsec - c1.tv_nsec)) / (double)n);
    /* Iterate the table: every occupied slot, reading its key and value. */
    struct bench_h1_iter it;
    if (bench_h1_iter_init(&it, n) != 0)
        peers_die("out of memory");
    for (size_t i = 0; i <= t.mask; i++) {
        uint32_t ref = t.slots[i].ref;
        if (!ref)
            continue;
        const struct pt_entry *e = pt_at(&t, ref);
        const uint8_t *k = (const uint8_t *)(e + 1);
        bench_h1_visit(&it, k, e->klen, k + e->klen, e->vlen);
    }
    double t3 = peers_now();
    if (bad)
        peers_die("%s: %zu wrong values", subject, bad);
    if (it.sum == 0)
        fprintf(stderr, "%s: checksum 0\n", subject);
    double bytes = (double)((t.mask + 1) * sizeof(struct pt_slot) + t.used);
    h1_report(d, subject, n, t1 - t0, t2 - t1, t3 - t2, bytes, it.distinct);
    bench_h1_iter_done(&it);
    pt_free(&t);
    return 0;
}

/* ---- lmdb ---------------------------------------------------------------- */

#ifndef PEERS_NO_LMDB
static void lmdb_check(int rc, const char *what)
{
    if (rc != 0)
        peers_die("lmdb: %s: %s", what, mdb_strerror(rc));
}

static void rmdir_all(const char *dir)
{
    DIR *dd = opendir(dir);
    if (dd) {
        struct dirent *de;
        while ((de = readdir(dd)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(dd);
    }
    rmdir(dir);
}

/* The database directory goes on every way out, exit() from peers_die
 * included. */
static char h1_lmdb_dir[] = "/dev/shm/shmobj-bench-lmdb-XXXXXX";

static void h1_lmdb_cleanup(void)
{
    rmdir_all(h1_lmdb_dir);
}

static int h1_lmdb(const struct h1_data *d)
{
    char *dir = h1_lmdb_dir;
    if (!mkdtemp(dir))
        peers_skip("lmdb: cannot create a directory on /dev/shm: %s", strerror(errno));
    atexit(h1_lmdb_cleanup);
    size_t n = d->n;
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn;
    lmdb_check(mdb_env_create(&env), "env_create");
    lmdb_check(mdb_env_set_mapsize(env, (size_t)n * (d->klen + d->vlen + 64) * 4 + (64u << 20)),
               "set_mapsize");
    int rc = mdb_env_open(env, dir, MDB_NOSYNC | MDB_NOMETASYNC | MDB_WRITEMAP, 0600);
    if (rc != 0)
        peers_skip("lmdb: env_open: %s", mdb_strerror(rc));
    lmdb_check(mdb_txn_begin(env, NULL, 0, &txn), "txn_begin");
    lmdb_check(mdb_dbi_open(txn, NULL, 0, &dbi), "dbi_open");
    lmdb_check(mdb_txn_commit(txn), "commit");

    const size_t batch = 10000;
    double t0 = peers_now();
    for (size_t i0 = 0; i0 < n; i0 += batch) {
        lmdb_check(mdb_txn_begin(env, NULL, 0, &txn), "txn_begin");
        size_t end = i0 + batch < n ? i0 + batch : n;
        for (size_t i = i0; i < end; i++) {
            MDB_val k = {d->klen, d->keys + i * d->klen};
            MDB_val v = {d->vlen, d->vals + i * d->vlen};
            lmdb_check(mdb_put(txn, dbi, &k, &v, 0), "put");
        }
        lmdb_check(mdb_txn_commit(txn), "commit");
    }
    double t1 = peers_now();
    size_t bad = 0;
    lmdb_check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "txn_begin");
    for (size_t j = 0; j < n; j++) {
        size_t i = d->order[j];
        MDB_val k = {d->klen, d->keys + i * d->klen}, v;
        if (mdb_get(txn, dbi, &k, &v) != 0 || v.mv_size != d->vlen ||
            memcmp(v.mv_data, d->vals + i * d->vlen, d->vlen) != 0)
            bad++;
    }
    double t2 = peers_now();
    MDB_cursor *cur;
    MDB_val k, v;
    struct bench_h1_iter it;
    if (bench_h1_iter_init(&it, n) != 0)
        peers_die("out of memory");
    lmdb_check(mdb_cursor_open(txn, dbi, &cur), "cursor_open");
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        bench_h1_visit(&it, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
    double t3 = peers_now();
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    size_t seen = it.distinct;
    uint64_t sum = it.sum;
    bench_h1_iter_done(&it);
    if (sum == 0)
        fprintf(stderr, "lmdb: checksum 0\n");

    MDB_envinfo info;
    MDB_stat st;
    mdb_env_info(env, &info);
    mdb_env_stat(env, &st);
    double bytes = (double)(info.me_last_pgno + 1) * st.ms_psize;
    mdb_env_close(env);
    if (bad)
        peers_die("lmdb: %zu wrong values", bad);
    h1_report(d, "lmdb", n, t1 - t0, t2 - t1, t3 - t2, bytes, seen);
    return 0;
}
#else
static int h1_lmdb(const struct h1_data *d)
{
    (void)d;
    peers_skip("lmdb: not installed (liblmdb not found at build time)");
}
#endif

/* ---- redis --------------------------------------------------------------- */

static int h1_redis(const struct h1_data *d, const char *subject, int pipeline)
{
    size_t n = d->n;
    struct peers_redis_server srv;
    peers_redis_start(&srv, 0);
    peers_pin(1);
    struct peers_redis c;
    if (peers_redis_connect(&c, srv.port) != 0)
        peers_die("redis: connect: %s", strerror(errno));
    long long mem0 = peers_redis_used_memory(&c);

    /* set */
    double t0 = peers_now();
    for (size_t i0 = 0; i0 < n; i0 += (size_t)pipeline) {
        size_t end = i0 + (size_t)pipeline < n ? i0 + (size_t)pipeline : n;
        for (size_t i = i0; i < end; i++) {
            const char *argv[3] = {"SET", d->keys + i * d->klen, d->vals + i * d->vlen};
            size_t lens[3] = {3, d->klen, d->vlen};
            peers_redis_cmdv(&c, 3, argv, lens);
        }
        peers_redis_flush(&c);
        for (size_t i = i0; i < end; i++) {
            struct peers_reply r = peers_redis_read(&c);
            if (r.type != '+')
                peers_die("redis: SET: unexpected reply");
        }
    }
    double t1 = peers_now();
    long long mem1 = peers_redis_used_memory(&c);

    /* get, random order, each value checked */
    size_t bad = 0;
    double t2 = peers_now();
    for (size_t j0 = 0; j0 < n; j0 += (size_t)pipeline) {
        size_t end = j0 + (size_t)pipeline < n ? j0 + (size_t)pipeline : n;
        for (size_t j = j0; j < end; j++) {
            size_t i = d->order[j];
            const char *argv[2] = {"GET", d->keys + i * d->klen};
            size_t lens[2] = {3, d->klen};
            peers_redis_cmdv(&c, 2, argv, lens);
        }
        peers_redis_flush(&c);
        for (size_t j = j0; j < end; j++) {
            size_t i = d->order[j];
            struct peers_reply r = peers_redis_read(&c);
            if (r.type != '$' || r.len != (long long)d->vlen ||
                memcmp(r.str, d->vals + i * d->vlen, d->vlen) != 0)
                bad++;
        }
    }
    double t3 = peers_now();

    /* iterate: SCAN (keys only); count distinct keys */
    uint8_t *mark = calloc(n, 1);
    if (!mark)
        peers_die("out of memory");
    size_t seen = 0;
    char cursor[32] = "0";
    double t4 = peers_now();
    do {
        const char *argv[4] = {"SCAN", cursor, "COUNT", "1000"};
        size_t lens[4] = {4, strlen(cursor), 5, 4};
        peers_redis_cmdv(&c, 4, argv, lens);
        peers_redis_flush(&c);
        struct peers_reply r = peers_redis_read(&c);
        if (r.type != '*' || r.num != 2)
            peers_die("redis: SCAN: unexpected reply");
        r = peers_redis_read(&c);
        if (r.type != '$' || r.len <= 0 || r.len >= (long long)sizeof cursor)
            peers_die("redis: SCAN: bad cursor");
        memcpy(cursor, r.str, (size_t)r.len);
        cursor[r.len] = 0;
        r = peers_redis_read(&c);
        if (r.type != '*')
            peers_die("redis: SCAN: unexpected reply");
        for (long long e = 0, ne = r.num; e < ne; e++) {
            struct peers_reply k = peers_redis_read(&c);
            size_t i = k.type == '$' && k.len == (long long)d->klen
                           ? bench_h1_key_index(k.str, d->klen)
                           : SIZE_MAX;
            if (i < n && !mark[i]) {
                mark[i] = 1;
                seen++;
            }
        }
    } while (strcmp(cursor, "0") != 0);
    double t5 = peers_now();
    free(mark);

    peers_redis_close(&c);
    peers_redis_stop(&srv);
    if (bad)
        peers_die("redis: %zu wrong values", bad);
    h1_report(d, subject, n, t1 - t0, t3 - t2, t5 - t4,
              mem0 >= 0 && mem1 > mem0 ? (double)(mem1 - mem0) : 0, seen);
    return 0;
}

/* ---- the protocol ------------------------------------------------------- */

static int h1_run(const bench_ctx *ctx)
{
    const char *w = ctx->workload, *s = ctx->subject;
    size_t n = ctx->quick ? 200000 : 1000000;
    struct h1_data d;
    switch (ctx->arg) {
    case 0:
        h1_prepare(&d, w, n);
        return h1_done(&d, h1_private(&d, 0));
    case 5:
        h1_prepare(&d, w, n);
        return h1_done(&d, h1_private(&d, 1));
    case 1:
        h1_prepare(&d, w, n);
        return h1_done(&d, h1_lmdb(&d));
    case 2:
        peers_exec_sibling("bench-peers-h1-boost", peers_argv);
    case 3: {
        size_t rn = ctx->quick ? 5000 : 10000;
        fprintf(stderr, "redis: %zu items instead of %zu (one round trip per operation)\n",
                rn, n);
        h1_prepare(&d, w, rn);
        return h1_done(&d, h1_redis(&d, s, 1));
    }
    default:
        h1_prepare(&d, w, n);
        return h1_done(&d, h1_redis(&d, s, 64));
    }
}

static const bench_entry h1_table[] = {
    {"H1-64", "private-table", h1_run, 0},
    {"H1-64", "private-table-huge", h1_run, 5},
    {"H1-64", "lmdb", h1_run, 1},
    {"H1-64", "boost", h1_run, 2},
    {"H1-64", "redis", h1_run, 3},
    {"H1-64", "redis-P64", h1_run, 4},
    {"H1-16", "private-table", h1_run, 0},
    {"H1-16", "lmdb", h1_run, 1},
    {"H1-16", "boost", h1_run, 2},
    {"H1-16", "redis", h1_run, 3},
    {"H1-16", "redis-P64", h1_run, 4},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    return peers_main(argc, argv, h1_table);
}
