/*
 * Outbound routes: a local queue or topic to a JetStream subject.
 *
 * Nothing leaves the local side before JetStream acknowledged it. A queue
 * route is its queue's one consumer and keeps a journal in the segment's
 * state map (BRIDGE_STATE_MAP): key "j:ROUTE:" + the message's sequence
 * (8 bytes, big-endian), value its reference and the epoch of its id. For
 * each message it
 *   1. peeks at the head of the queue,
 *   2. writes the journal entry (the message is now the route's),
 *   3. takes the message (the one it peeked at, being the only consumer),
 *   4. publishes it with the id BRIDGE.ROUTE.EPOCH.SEQ (header Nats-Msg-Id),
 *   5. on JetStream's ack, deletes the entry and then marks the message done
 *      (a message block) or frees it (an object).
 * A bridge killed anywhere leaves every message taken and not acknowledged
 * in the journal, and the next start publishes them again with the same
 * ids: JetStream's de-duplication window drops those it had stored. Killed
 * between 2 and 3, the journal's newest entry names the queue's head: the
 * restart takes it under that entry instead of writing another. Killed
 * between the delete and the done of 5, one message block is leaked (never
 * sent twice). A topic route holds what it takes (a subscriber's messages
 * stay until it releases them) and releases, in order, what JetStream
 * acknowledged; its ids use the topic's own sequence, so a restart that
 * replays the topic's history is de-duplicated too.
 */
#include "bridge-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define SLICE_NS 50000000 /* a wait's slice: how soon a stop is seen */

struct out {
    struct route *r;
    shmobj_queue *q;
    shmobj_queue *dead;
    shmobj_topic *t;
    shmobj_topic_sub *sub;
    shmobj_map *state;
    uint64_t epoch, next_seq;
    uint32_t window; /* the route's, at most half a topic's ring */
    int64_t max_payload;
    struct bridge_buf enc;
    char subject_prefix[BRIDGE_NAME_MAX * 2 + 8];
};

struct jkey {
    char bytes[BRIDGE_NAME_MAX + 12];
    size_t len;
};

static void journal_key(const struct route *r, uint64_t seq, struct jkey *k)
{
    int n = snprintf(k->bytes, sizeof k->bytes - 8, "j:%s:", r->c->id);
    for (int i = 0; i < 8; i++)
        k->bytes[n + i] = (char)(seq >> (56 - 8 * i));
    k->len = (size_t)n + 8;
}

static int journal_set(struct out *o, uint64_t seq, shmobj_ref ref, uint64_t epoch)
{
    struct jkey k;
    uint64_t v[2] = {ref, epoch};
    journal_key(o->r, seq, &k);
    return shmobj_map_set(o->state, k.bytes, k.len, v, sizeof v);
}

static void journal_del(struct out *o, uint64_t seq)
{
    struct jkey k;
    journal_key(o->r, seq, &k);
    shmobj_map_del(o->state, k.bytes, k.len);
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    nanosleep(&ts, NULL);
}

/* ---- the ring of in-flight publishes, shared with the ack handler ------- */

static struct flight *ring_at(struct route *r, uint64_t pos)
{
    return &r->ring[pos & (r->ring_cap - 1)];
}

/* The flight of seq, or NULL; seqs rise from head to tail. Lock held. */
static struct flight *ring_find(struct route *r, uint64_t seq)
{
    uint64_t lo = r->head, hi = r->tail;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        struct flight *f = ring_at(r, mid);
        if (f->seq == seq)
            return f;
        if (f->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *arg)
{
    (void)js;
    (void)pa;
    struct route *r = arg;
    const char *id = NULL;
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != NULL) {
        const char *dot = strrchr(id, '.');
        uint64_t seq = dot ? strtoull(dot + 1, NULL, 10) : 0;
        pthread_mutex_lock(&r->lock);
        struct flight *f = ring_find(r, seq);
        if (f != NULL && f->state == FL_SENT) {
            f->state = pae == NULL ? FL_ACKED : FL_RETRY;
            atomic_fetch_sub(&r->st.inflight, 1);
            if (pae != NULL)
                atomic_fetch_add(&r->retries, 1);
        }
        pthread_mutex_unlock(&r->lock);
        if (pae != NULL)
            atomic_fetch_add(&r->st.retried, 1);
    }
    natsMsg_Destroy(msg);
}

/* ---- publishing ---------------------------------------------------------- */

/* The payload of a flight: a message block's bytes as they are, an
 * object's cbor-1 encoding, or a topic message's bytes. */
static int payload(struct out *o, struct flight *f, const void **p, size_t *len,
                   bool *cbor)
{
    *cbor = false;
    if (o->t != NULL) {
        *p = f->tmsg.data;
        *len = f->tmsg.len;
        return 0;
    }
    void *data;
    int rc = shmobj_queue_msg_data(o->q, f->ref, &data, len);
    if (rc == 0) {
        *p = data;
        return 0;
    }
    if (rc != SHMOBJ_ETYPE)
        return rc;
    o->enc.cap_limit = (size_t)o->max_payload + 1;
    rc = bridge__cbor_encode(o->r->b->seg, f->ref, &o->enc);
    if (rc == SHMOBJ_ERANGE && o->enc.len > 0)
        rc = 0; /* cut at the cap: reported as oversize below */
    *p = o->enc.data;
    *len = rc == SHMOBJ_ERANGE ? (size_t)o->max_payload + 1 : o->enc.len;
    *cbor = true;
    return rc == SHMOBJ_ERANGE ? 0 : rc;
}

/* Give the local side its message back for good: done or freed. */
static void release_local(struct out *o, shmobj_ref ref)
{
    int rc = shmobj_queue_msg_done(o->q, ref);
    if (rc == SHMOBJ_ETYPE) { /* an object: tracked, or ours to free */
        if (shmobj_queue_done(o->q, ref) != 0)
            shmobj_obj_free(o->r->b->seg, ref);
    }
}

/* A message that cannot go (too big, not encodable): told, counted, moved to
 * the dead-letter queue when the route has one, else given back. */
static void refuse(struct out *o, struct flight *f, int rc, size_t len)
{
    struct route *r = o->r;
    atomic_fetch_add(&r->st.failed, 1);
    if (rc == SHMOBJ_ERANGE)
        bridge__route_error(r, "message of %zu bytes is larger than the server's "
                            "max_payload (%" PRId64 " bytes)%s", len, o->max_payload,
                            o->dead ? ": moved to the dead-letter queue" : ": dropped");
    else
        bridge__route_error(r, "message cannot be sent: %s%s", shmobj_strerror(rc),
                            o->dead ? ": moved to the dead-letter queue" : ": dropped");
    if (o->t != NULL)
        return; /* released with the others, in order */
    if (o->dead == NULL || shmobj_queue_put_timed(o->dead, f->ref, SLICE_NS) != 0)
        release_local(o, f->ref);
    journal_del(o, f->seq);
}

static void publish(struct out *o, struct flight *f)
{
    struct route *r = o->r;
    const void *p;
    size_t len;
    bool cbor;
    int rc = payload(o, f, &p, &len, &cbor);
    if (rc == 0 && (int64_t)len > o->max_payload - 256)
        rc = SHMOBJ_ERANGE;
    if (rc != 0) {
        refuse(o, f, rc, len);
        f->state = FL_ACKED; /* leaves the ring with nothing more to do */
        f->ref = 0;
        return;
    }
    f->len = (uint32_t)len;
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, r->c->subject, NULL, p, (int)len);
    char id[160];
    if (o->t != NULL)
        snprintf(id, sizeof id, "%s.t.%" PRIu64, o->subject_prefix, f->seq);
    else
        snprintf(id, sizeof id, "%s.%016" PRIx64 ".%" PRIu64, o->subject_prefix,
                 f->epoch, f->seq);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
    if (s == NATS_OK && cbor)
        s = natsMsgHeader_Set(m, BRIDGE_HDR_ENCODING, BRIDGE_ENC_CBOR);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 5000; /* no ack in 5 s: the handler is told, we send again */
    pthread_mutex_lock(&r->lock);
    f->state = FL_SENT;
    atomic_fetch_add(&r->st.inflight, 1);
    pthread_mutex_unlock(&r->lock);
    if (s == NATS_OK)
        s = js_PublishMsgAsync(r->js, &m, &po);
    if (s != NATS_OK) {
        natsMsg_Destroy(m);
        pthread_mutex_lock(&r->lock);
        if (f->state == FL_SENT) {
            f->state = FL_RETRY;
            atomic_fetch_sub(&r->st.inflight, 1);
            atomic_fetch_add(&r->retries, 1);
        }
        pthread_mutex_unlock(&r->lock);
        atomic_fetch_add(&r->st.retried, 1);
        sleep_ns(10000000);
    }
}

/* Retire acknowledged flights from the head (in order, so a topic's
 * release covers only acknowledged messages) and send again those the
 * handler gave back. */
static void retire(struct out *o)
{
    struct route *r = o->r;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        if (r->head == r->tail || ring_at(r, r->head)->state != FL_ACKED) {
            pthread_mutex_unlock(&r->lock);
            break;
        }
        struct flight f = *ring_at(r, r->head);
        ring_at(r, r->head)->state = FL_FREE;
        r->head++;
        bool last = r->head == r->tail || ring_at(r, r->head)->state != FL_ACKED;
        pthread_mutex_unlock(&r->lock);
        if (o->t != NULL) {
            if (f.len > 0 || f.ref == 0) {
                atomic_fetch_add(&r->st.msgs, f.ref ? 1 : 0);
                atomic_fetch_add(&r->st.bytes, f.ref ? f.len : 0);
            }
            if (last)
                shmobj_topic_release(o->sub, &f.tmsg);
        } else if (f.ref != 0) {
            atomic_fetch_add(&r->st.msgs, 1);
            atomic_fetch_add(&r->st.bytes, f.len);
            journal_del(o, f.seq);
            release_local(o, f.ref);
        }
    }
    bool retried = false;
    if (atomic_load(&r->retries) == 0)
        return;
    for (uint64_t pos = r->head; pos < r->tail; pos++) {
        pthread_mutex_lock(&r->lock);
        struct flight *f = ring_at(r, pos);
        bool again = f->state == FL_RETRY;
        pthread_mutex_unlock(&r->lock);
        if (again) {
            atomic_fetch_sub(&r->retries, 1);
            if (!retried) /* the server refused or is away: not in a spin */
                sleep_ns(20000000);
            retried = true;
            publish(o, f);
        }
    }
}

static struct flight *ring_push(struct route *r, uint64_t seq, uint64_t epoch,
                                shmobj_ref ref)
{
    pthread_mutex_lock(&r->lock);
    struct flight *f = ring_at(r, r->tail);
    memset(f, 0, sizeof *f);
    f->seq = seq;
    f->epoch = epoch;
    f->ref = ref;
    f->state = FL_FREE;
    r->tail++;
    pthread_mutex_unlock(&r->lock);
    return f;
}

/* ---- the journal after a restart ---------------------------------------- */

struct jentry {
    uint64_t seq, ref, epoch;
};

static int cmp_jentry(const void *a, const void *b)
{
    const struct jentry *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Read the journal: every entry is a message taken and not acknowledged,
 * except possibly the newest, whose message may still be the queue's head.
 * Returns the entries sorted, and *untaken when the newest is at the head. */
static int journal_load(struct out *o, struct jentry **out, size_t *n, bool *untaken)
{
    char prefix[BRIDGE_NAME_MAX + 4];
    int plen = snprintf(prefix, sizeof prefix, "j:%s:", o->r->c->id);
    shmobj_map_iter *it;
    int rc = shmobj_map_iter_open(o->state, &it);
    if (rc != 0)
        return rc;
    size_t cap = 16, cnt = 0;
    struct jentry *e = malloc(cap * sizeof *e);
    const void *k, *v;
    size_t kl, vl;
    while (e != NULL && (rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl)) != SHMOBJ_ENOTFOUND) {
        if (rc != 0 || kl != (size_t)plen + 8 || memcmp(k, prefix, (size_t)plen) != 0 ||
            vl != 16)
            continue;
        if (cnt == cap) {
            struct jentry *ne = realloc(e, 2 * cap * sizeof *e);
            if (ne == NULL) {
                free(e);
                e = NULL;
                break;
            }
            e = ne;
            cap *= 2;
        }
        const unsigned char *kb = (const unsigned char *)k + plen;
        uint64_t seq = 0;
        for (int i = 0; i < 8; i++)
            seq = seq << 8 | kb[i];
        uint64_t val[2];
        memcpy(val, v, sizeof val);
        e[cnt++] = (struct jentry){seq, val[0], val[1]};
    }
    shmobj_map_iter_close(it);
    if (e == NULL)
        return SHMOBJ_ENOMEM;
    qsort(e, cnt, sizeof *e, cmp_jentry);
    shmobj_ref head = 0;
    *untaken = cnt > 0 && shmobj_queue_try_peek(o->q, &head) == 0 &&
               head == e[cnt - 1].ref;
    *out = e;
    *n = cnt;
    return 0;
}

/* ---- the route ----------------------------------------------------------- */

static int open_local(struct out *o)
{
    struct route *r = o->r;
    shmobj_segment *seg = r->b->seg;
    int rc;
    if (r->c->kind == ROUTE_QUEUE_OUT) {
        rc = shmobj_queue_open_or_create(seg, r->c->local, r->c->capacity, 0, &o->q);
    } else {
        shmobj_topic_config tc;
        shmobj_topic_config_init(&tc);
        rc = shmobj_topic_open_or_create(seg, r->c->local, &tc, &o->t);
    }
    if (rc == 0 && o->t != NULL)
        rc = shmobj_topic_subscribe(o->t, &o->sub);
    if (rc == 0 && r->c->dead[0] != 0)
        rc = shmobj_queue_open_or_create(seg, r->c->dead, r->c->capacity, 0, &o->dead);
    if (rc == 0)
        rc = shmobj_map_open_or_create(seg, BRIDGE_STATE_MAP, &o->state);
    if (rc != 0)
        bridge__route_error(r, "%s %s: %s", o->t ? "topic" : "queue", r->c->local,
                            shmobj_strerror(rc));
    return rc;
}

static int route_out(struct out *o)
{
    struct route *r = o->r;
    struct shmobj_bridge *b = r->b;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = r->c->window + 16;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.AckHandlerClosure = r;
    jo.PublishAsync.StallWait = 100;
    natsStatus s = natsConnection_JetStream(&r->js, b->nc, &jo);
    if (s != NATS_OK) {
        bridge__route_error(r, "JetStream: %s", natsStatus_GetText(s));
        return bridge__status_of_nats(s);
    }
    int rc;
    while ((rc = bridge__stream_ensure(r, r->js, false)) != 0) {
        if (atomic_load(&b->stop))
            return 0;
        sleep_ns(500000000); /* the server may be restarting */
    }
    o->max_payload = natsConnection_GetMaxPayload(b->nc);
    snprintf(o->subject_prefix, sizeof o->subject_prefix, "%s.%s", b->conf->name,
             r->c->id);
    if (getrandom(&o->epoch, sizeof o->epoch, 0) != (ssize_t)sizeof o->epoch)
        o->epoch = (uint64_t)bridge__now_ns() ^ (uint64_t)getpid() << 32;
    if ((rc = open_local(o)) != 0)
        return atomic_load(&b->stop) ? 0 : rc;

    struct jentry *je = NULL;
    size_t nje = 0;
    bool untaken = false;
    if (o->q != NULL && (rc = journal_load(o, &je, &nje, &untaken)) != 0) {
        bridge__route_error(r, "journal: %s", shmobj_strerror(rc));
        return rc;
    }
    o->window = r->c->window;
    shmobj_topic_stats ts;
    if (o->t != NULL && shmobj_topic_stats_get(o->t, &ts) == 0 && ts.capacity >= 4 &&
        o->window > ts.capacity / 2)
        o->window = ts.capacity / 2; /* never hold publishers up on our acks */
    uint32_t cap = 2;
    while (cap < o->window + nje + 1)
        cap *= 2;
    r->ring = calloc(cap, sizeof *r->ring);
    if (r->ring == NULL) {
        free(je);
        return SHMOBJ_ENOMEM;
    }
    r->ring_cap = cap;
    size_t resend = untaken ? nje - 1 : nje;
    o->next_seq = nje ? je[nje - 1].seq + 1 : 0;
    if (resend > 0)
        bridge__log(b, "route %s: sending again %zu message%s taken before a restart",
                    r->c->id, resend, resend == 1 ? "" : "s");
    for (size_t i = 0; i < resend; i++) {
        atomic_fetch_add(&r->st.retried, 1);
        publish(o, ring_push(r, je[i].seq, je[i].epoch, je[i].ref));
    }
    uint64_t pending_seq = untaken ? je[nje - 1].seq : 0;
    uint64_t pending_epoch = untaken ? je[nje - 1].epoch : 0;
    shmobj_ref pending_ref = untaken ? je[nje - 1].ref : 0;
    free(je);

    while (!atomic_load(&b->stop)) {
        retire(o);
        uint64_t used = r->tail - r->head;
        if (used >= o->window) {
            sleep_ns(200000);
            continue;
        }
        int64_t wait = atomic_load(&r->st.inflight) ? 1000000 : SLICE_NS;
        if (o->t != NULL) {
            shmobj_topic_msg msgs[64];
            unsigned n = 0, room = (unsigned)(o->window - used);
            rc = shmobj_topic_take_batch(o->sub, msgs, room < 64 ? room : 64, &n, wait);
            if (rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_EEMPTY)
                continue;
            if (rc != 0) {
                bridge__route_error(r, "topic %s: %s", r->c->local, shmobj_strerror(rc));
                return rc;
            }
            for (unsigned i = 0; i < n; i++) {
                if (msgs[i].missed)
                    bridge__route_error(r, "topic %s: %" PRIu64 " messages overwritten "
                                        "before the bridge took them", r->c->local,
                                        msgs[i].missed);
                atomic_fetch_add(&r->st.failed, msgs[i].missed);
                struct flight *f = ring_push(r, msgs[i].seq, 0, msgs[i].ref);
                f->tmsg = msgs[i];
                publish(o, f);
            }
            continue;
        }
        shmobj_ref head = 0, took = 0;
        rc = shmobj_queue_peek_timed(o->q, &head, wait);
        if (rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_EEMPTY)
            continue;
        if (rc != 0) {
            bridge__route_error(r, "queue %s: %s", r->c->local, shmobj_strerror(rc));
            return rc;
        }
        uint64_t seq, epoch;
        if (pending_ref != 0 && head == pending_ref) {
            seq = pending_seq;
            epoch = pending_epoch;
        } else {
            seq = o->next_seq++;
            epoch = o->epoch;
            if ((rc = journal_set(o, seq, head, epoch)) != 0) {
                bridge__route_error(r, "journal: %s", shmobj_strerror(rc));
                sleep_ns(SLICE_NS);
                continue;
            }
        }
        pending_ref = 0;
        rc = shmobj_queue_try_take(o->q, &took);
        if (rc != 0) { /* someone else took it: the journal entry goes */
            journal_del(o, seq);
            continue;
        }
        if (took != head) {
            /* another consumer took the head: the route is not the queue's
             * only consumer (see doc/bridge.md) */
            journal_del(o, seq);
            seq = o->next_seq++;
            journal_set(o, seq, took, epoch);
        }
        publish(o, ring_push(r, seq, epoch, took));
    }
    /* stopping: wait up to 2 s for the acks of what is in flight */
    int64_t until = bridge__now_ns() + 2000000000;
    while (r->tail != r->head && bridge__now_ns() < until) {
        retire(o);
        if (r->tail != r->head)
            sleep_ns(1000000);
    }
    return 0;
}

void *bridge__route_out(void *arg)
{
    struct out o;
    memset(&o, 0, sizeof o);
    o.r = arg;
    int rc = route_out(&o);
    if (rc != 0) {
        int zero = 0;
        atomic_compare_exchange_strong(&o.r->b->failed_rc, &zero, rc);
    }
    if (o.sub != NULL)
        shmobj_topic_unsubscribe(o.sub);
    shmobj_topic_close(o.t);
    shmobj_queue_close(o.q);
    shmobj_queue_close(o.dead);
    shmobj_map_close(o.state);
    free(o.enc.data);
    return NULL;
}
