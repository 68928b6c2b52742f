/*
 * Map routes: a shared map mirrored to a JetStream key-value bucket.
 *
 * Import watches the bucket and applies every put and delete to the map.
 * Export looks for local changes every interval-ms: it walks the map and
 * compares each value's hash with the one it last exchanged with the
 * bucket (a table in the bridge's own memory), and sends what changed;
 * a key gone from the map since the last walk is deleted in the bucket.
 *
 * Both ways, the conflict rule: the bucket's revision wins. Each key's
 * table entry holds the bucket revision the map last agreed with; a local
 * change is sent with that revision as the expected last one (an update;
 * a create for a key the bucket never had), and when the bucket moved on
 * meanwhile (another host wrote it), the update is refused and the bucket's
 * value is written to the map instead: the local write is lost, counted as
 * retried. Deletes propagate both ways; a local delete carries no revision
 * (the C client has no conditional delete), so it wins over a concurrent
 * remote write it did not see.
 *
 * Keys: the bucket allows letters, digits and -/_=. in a key; a map key
 * that is not such a string (or starts with "_b.") crosses as "_b." and its
 * base64url form, and is decoded back on import.
 */
#include "bridge-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kent {
    struct kent *next;
    uint64_t rev, vhash, seen;
    size_t klen;
    unsigned char key[];
};

struct kv {
    struct route *r;
    shmobj_map *map;
    kvStore *store;
    kvWatcher *watch;
    struct kent **tab;
    size_t tab_cap, count;
    uint64_t gen;
    int64_t max_payload;
};

static uint64_t hash64(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static struct kent **kfind(struct kv *o, const void *k, size_t n)
{
    struct kent **pp = &o->tab[hash64(k, n) & (o->tab_cap - 1)];
    for (; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->klen == n && memcmp((*pp)->key, k, n) == 0)
            return pp;
    return pp;
}

static struct kent *kput(struct kv *o, const void *k, size_t n)
{
    if (o->count >= o->tab_cap) { /* grow: rehash into twice the buckets */
        size_t cap = o->tab_cap * 2;
        struct kent **t = calloc(cap, sizeof *t);
        if (t == NULL)
            return NULL;
        for (size_t i = 0; i < o->tab_cap; i++)
            for (struct kent *e = o->tab[i], *nx; e != NULL; e = nx) {
                nx = e->next;
                size_t b = hash64(e->key, e->klen) & (cap - 1);
                e->next = t[b];
                t[b] = e;
            }
        free(o->tab);
        o->tab = t;
        o->tab_cap = cap;
    }
    struct kent **pp = kfind(o, k, n);
    if (*pp != NULL)
        return *pp;
    struct kent *e = calloc(1, sizeof *e + n);
    if (e == NULL)
        return NULL;
    memcpy(e->key, k, n);
    e->klen = n;
    *pp = e;
    o->count++;
    return e;
}

static void kdel(struct kv *o, const void *k, size_t n)
{
    struct kent **pp = kfind(o, k, n);
    if (*pp != NULL) {
        struct kent *e = *pp;
        *pp = e->next;
        free(e);
        o->count--;
    }
}

/* ---- key names ------------------------------------------------------------ */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool kv_plain(const unsigned char *k, size_t n)
{
    if (n == 0 || k[0] == '.' || k[n - 1] == '.' || (n >= 3 && memcmp(k, "_b.", 3) == 0))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = k[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '-' || c == '/' || c == '_' ||
                  c == '=' || c == '.';
        if (!ok || (c == '.' && i > 0 && k[i - 1] == '.'))
            return false;
    }
    return true;
}

/* The bucket's name of a map key, in out (NUL-terminated), or NULL when it
 * does not fit. */
static char *kv_name(const void *key, size_t n, char *out, size_t cap)
{
    const unsigned char *k = key;
    if (kv_plain(k, n)) {
        if (n >= cap)
            return NULL;
        memcpy(out, k, n);
        out[n] = 0;
        return out;
    }
    if (3 + (n + 2) / 3 * 4 + 1 > cap)
        return NULL;
    size_t o = 0;
    memcpy(out, "_b.", 3);
    o = 3;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)k[i] << 16;
        if (i + 1 < n)
            w |= (uint32_t)k[i + 1] << 8;
        if (i + 2 < n)
            w |= k[i + 2];
        out[o++] = b64[w >> 18 & 63];
        out[o++] = b64[w >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64[w >> 6 & 63];
        if (i + 2 < n)
            out[o++] = b64[w & 63];
    }
    out[o] = 0;
    return out;
}

/* The map key of a bucket key, in out; its length, or -1 when malformed. */
static long map_name(const char *name, unsigned char *out, size_t cap)
{
    size_t n = strlen(name);
    if (n < 3 || memcmp(name, "_b.", 3) != 0) {
        if (n > cap)
            return -1;
        memcpy(out, name, n);
        return (long)n;
    }
    size_t o = 0;
    uint32_t w = 0;
    int bits = 0;
    for (const char *p = name + 3; *p; p++) {
        const char *c = strchr(b64, *p);
        if (c == NULL || *p == 0)
            return -1;
        w = w << 6 | (uint32_t)(c - b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (unsigned char)(w >> bits);
        }
    }
    return (long)o;
}

/* ---- import ----------------------------------------------------------------- */

static void apply_entry(struct kv *o, kvEntry *e)
{
    struct route *r = o->r;
    unsigned char key[1024];
    long kl = map_name(kvEntry_Key(e), key, sizeof key);
    if (kl < 0)
        return;
    uint64_t rev = kvEntry_Revision(e);
    struct kent **pp = kfind(o, key, (size_t)kl);
    if (*pp != NULL && (*pp)->rev >= rev)
        return; /* our own write coming back, or older than what we have */
    int rc;
    if (kvEntry_Operation(e) == kvOp_Put) {
        const void *v = kvEntry_Value(e);
        int vl = kvEntry_ValueLen(e);
        rc = shmobj_map_set(o->map, key, (size_t)kl, v, (size_t)vl);
        if (rc == 0) {
            struct kent *k = kput(o, key, (size_t)kl);
            if (k != NULL) {
                k->rev = rev;
                k->vhash = hash64(v, (size_t)vl);
                k->seen = o->gen;
            }
            atomic_fetch_add(&r->st.msgs, 1);
            atomic_fetch_add(&r->st.bytes, (uint64_t)vl);
        }
    } else {
        rc = shmobj_map_del(o->map, key, (size_t)kl);
        if (rc == SHMOBJ_ENOTFOUND)
            rc = 0;
        kdel(o, key, (size_t)kl);
        if (rc == 0)
            atomic_fetch_add(&r->st.msgs, 1);
    }
    if (rc != 0) {
        atomic_fetch_add(&r->st.failed, 1);
        bridge__route_error(r, "map %s: %s", r->c->local, shmobj_strerror(rc));
    }
}

/* ---- export ------------------------------------------------------------------ */

struct change {
    struct change *next;
    size_t klen, vlen;
    unsigned char *val;
    unsigned char key[];
};

static void export_one(struct kv *o, struct change *c)
{
    struct route *r = o->r;
    char name[1500];
    if (kv_name(c->key, c->klen, name, sizeof name) == NULL ||
        (int64_t)c->vlen > o->max_payload - 512) {
        atomic_fetch_add(&r->st.failed, 1);
        bridge__route_error(r, "key of %zu bytes with a value of %zu bytes does not fit "
                            "the bucket (max_payload %lld)", c->klen, c->vlen,
                            (long long)o->max_payload);
        struct kent *k = kput(o, c->key, c->klen);
        if (k != NULL) { /* not again until it changes */
            k->vhash = hash64(c->val, c->vlen);
            k->seen = o->gen;
        }
        return;
    }
    struct kent **pp = kfind(o, c->key, c->klen);
    uint64_t rev = 0;
    natsStatus s;
    if (r->c->kv_dir == KV_EXPORT)
        s = kvStore_Put(&rev, o->store, name, c->val, (int)c->vlen);
    else if (*pp != NULL && (*pp)->rev != 0)
        s = kvStore_Update(&rev, o->store, name, c->val, (int)c->vlen, (*pp)->rev);
    else
        s = kvStore_Create(&rev, o->store, name, c->val, (int)c->vlen);
    if (s == NATS_OK) {
        struct kent *k = kput(o, c->key, c->klen);
        if (k != NULL) {
            k->rev = rev;
            k->vhash = hash64(c->val, c->vlen);
            k->seen = o->gen;
        }
        atomic_fetch_add(&r->st.msgs, 1);
        atomic_fetch_add(&r->st.bytes, c->vlen);
        return;
    }
    if (*pp != NULL)
        (*pp)->seen = o->gen; /* not a local delete */
    if (r->c->kv_dir != KV_BOTH)
        return; /* sent again at the next walk */
    /* refused: the bucket moved on since the revision we knew. It wins. */
    kvEntry *e = NULL;
    s = kvStore_Get(&e, o->store, name);
    if (s == NATS_OK) {
        atomic_fetch_add(&r->st.retried, 1);
        if (*pp != NULL)
            (*pp)->rev = 0; /* let the bucket's entry apply */
        apply_entry(o, e);
        kvEntry_Destroy(e);
    } else if (s == NATS_NOT_FOUND) {
        /* deleted in the bucket after we knew it: the delete wins */
        atomic_fetch_add(&r->st.retried, 1);
        shmobj_map_del(o->map, c->key, c->klen);
        kdel(o, c->key, c->klen);
    }
}

static void scan_local(struct kv *o)
{
    struct route *r = o->r;
    o->gen++;
    shmobj_map_iter *it;
    if (shmobj_map_iter_open(o->map, &it) != 0)
        return;
    struct change *list = NULL;
    const void *k, *v;
    size_t kl, vl;
    int rc;
    bool complete = true;
    while ((rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl)) != SHMOBJ_ENOTFOUND) {
        if (rc != 0) {
            complete = false;
            if (rc == SHMOBJ_ESTALE)
                break;
            continue;
        }
        struct kent **pp = kfind(o, k, kl);
        uint64_t h = hash64(v, vl);
        if (*pp != NULL && (*pp)->vhash == h) {
            (*pp)->seen = o->gen;
            continue;
        }
        struct change *c = malloc(sizeof *c + kl + vl);
        if (c == NULL) {
            complete = false;
            continue;
        }
        c->klen = kl;
        c->vlen = vl;
        c->val = c->key + kl;
        memcpy(c->key, k, kl);
        memcpy(c->val, v, vl);
        c->next = list;
        list = c;
    }
    shmobj_map_iter_close(it);
    while (list != NULL) {
        struct change *c = list;
        list = c->next;
        export_one(o, c);
        free(c);
    }
    if (!complete)
        return; /* a key not seen may still be there: delete nothing */
    for (size_t i = 0; i < o->tab_cap; i++)
        for (struct kent *e = o->tab[i], *nx; e != NULL; e = nx) {
            nx = e->next;
            if (e->seen == o->gen)
                continue;
            char name[1500];
            if (kv_name(e->key, e->klen, name, sizeof name) != NULL) {
                natsStatus s = kvStore_Delete(o->store, name);
                if (s != NATS_OK) {
                    atomic_fetch_add(&r->st.retried, 1);
                    continue; /* the next walk tries again */
                }
                atomic_fetch_add(&r->st.msgs, 1);
            }
            kdel(o, e->key, e->klen);
        }
}

static int route_kv(struct kv *o)
{
    struct route *r = o->r;
    struct shmobj_bridge *b = r->b;
    natsStatus s = natsConnection_JetStream(&r->js, b->nc, NULL);
    if (s != NATS_OK)
        return bridge__status_of_nats(s);
    int rc = shmobj_map_open_or_create(b->seg, r->c->local, &o->map);
    if (rc != 0) {
        bridge__route_error(r, "map %s: %s", r->c->local, shmobj_strerror(rc));
        return rc;
    }
    o->tab_cap = 1024;
    o->tab = calloc(o->tab_cap, sizeof *o->tab);
    if (o->tab == NULL)
        return SHMOBJ_ENOMEM;
    o->max_payload = natsConnection_GetMaxPayload(b->nc);
    for (;;) {
        s = js_KeyValue(&o->store, r->js, r->c->stream);
        if (s == NATS_NOT_FOUND) {
            kvConfig kc;
            kvConfig_Init(&kc);
            kc.Bucket = r->c->stream;
            kc.History = 1;
            kc.Replicas = (int)r->c->replicas;
            s = js_CreateKeyValue(&o->store, r->js, &kc);
            if (s != NATS_OK)
                s = js_KeyValue(&o->store, r->js, r->c->stream);
        }
        if (s == NATS_OK && (r->c->kv_dir & KV_IMPORT))
            s = kvStore_WatchAll(&o->watch, o->store, NULL);
        if (s == NATS_OK)
            break;
        bridge__route_error(r, "bucket %s: %s (%s)", r->c->stream, natsStatus_GetText(s),
                            nats_GetLastError(NULL));
        kvStore_Destroy(o->store);
        o->store = NULL;
        for (int i = 0; i < 10; i++) {
            if (atomic_load(&b->stop))
                return 0;
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
    }
    bool initial = o->watch != NULL; /* the bucket's present values first */
    while (!atomic_load(&b->stop)) {
        int64_t until = bridge__now_ns() + (int64_t)r->c->interval_ms * 1000000;
        while (o->watch != NULL) {
            int64_t left = (until - bridge__now_ns()) / 1000000;
            if (left <= 0 || atomic_load(&b->stop))
                break;
            kvEntry *e = NULL;
            s = kvWatcher_Next(&e, o->watch, left < 50 ? left : 50);
            if (s == NATS_OK && e == NULL) {
                initial = false;
                continue;
            }
            if (s == NATS_OK) {
                apply_entry(o, e);
                kvEntry_Destroy(e);
            }
        }
        if (o->watch == NULL) {
            struct timespec ts = {0, (long)r->c->interval_ms % 1000 * 1000000};
            ts.tv_sec = r->c->interval_ms / 1000;
            nanosleep(&ts, NULL);
        }
        if ((r->c->kv_dir & KV_EXPORT) && !initial)
            scan_local(o);
    }
    return 0;
}

void *bridge__route_kv(void *arg)
{
    struct kv o;
    memset(&o, 0, sizeof o);
    o.r = arg;
    int rc = route_kv(&o);
    if (rc != 0) {
        int zero = 0;
        atomic_compare_exchange_strong(&o.r->b->failed_rc, &zero, rc);
    }
    if (o.watch != NULL) {
        kvWatcher_Stop(o.watch);
        kvWatcher_Destroy(o.watch);
    }
    kvStore_Destroy(o.store);
    shmobj_map_close(o.map);
    for (size_t i = 0; i < o.tab_cap && o.tab; i++)
        for (struct kent *e = o.tab[i], *nx; e != NULL; e = nx) {
            nx = e->next;
            free(e);
        }
    free(o.tab);
    return NULL;
}
