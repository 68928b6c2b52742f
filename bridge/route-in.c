/*
 * Inbound routes: a durable JetStream consumer feeding a local queue
 * or topic. A message is acknowledged only after the local put returned 0,
 * so a bridge killed anywhere loses nothing: the consumer delivers again
 * what was not acknowledged. To keep such a redelivery from being put a
 * second time, the route records in the state map what it put, after the
 * put and before the ack: a floor (key "in:ROUTE", a stream sequence at or
 * below which every message of the consumer was put) and the sequences
 * put above it (keys "in:ROUTE:" + 8-byte sequence). A message at or below
 * the floor, or among those above it, is acknowledged and skipped (a
 * redelivery after a lost ack, also one of a server that lost the
 * consumer's ack floor in a crash and delivers it as new). Deliveries need
 * not come in order: one lost on its way (a cluster node that dies with
 * it) comes again after the ack wait, behind later ones, and is put then.
 * The floor rises over consecutive sequences, and over the gaps of other
 * subjects of the stream with the server's own ack floor, asked for at most
 * once a second while sequences above the floor are kept.
 * Only a kill between a put and that record puts one message twice.
 *
 * Backpressure: a full queue (or a topic whose slowest subscriber is a ring
 * behind) makes the route wait in slices, telling JetStream the message is
 * in progress so it is not delivered again meanwhile. The consumer's
 * MaxAckPending is the route's batch: JetStream sends no more than that
 * ahead of the bridge's acks, so the bridge never buffers beyond it. (A
 * push consumer with that bound rather than pull requests: each message
 * arrives without the round trip of a request, and the C client's fetch
 * of this version wrote past its list when a server came back mid-fetch.)
 */
#include "bridge-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLICE_NS 50000000

struct in {
    struct route *r;
    shmobj_queue *q;
    shmobj_topic *t;
    shmobj_map *state;
    natsSubscription *sub;
    char key[BRIDGE_NAME_MAX + 4];
    size_t key_len;
    uint64_t floor;  /* every message of the consumer at or below it was put */
    uint64_t *above; /* sequences above the floor that were put, ascending */
    size_t nabove, cap_above;
    int64_t floor_asked; /* when the server's ack floor was last asked for */
};

#define FLOOR_ASK_NS 1000000000

/* The state key of a sequence put above the floor: "in:ROUTE:" + 8 bytes. */
static size_t above_key(const struct in *o, uint64_t seq, char *k)
{
    memcpy(k, o->key, o->key_len);
    k[o->key_len] = ':';
    for (int i = 0; i < 8; i++)
        k[o->key_len + 1 + (size_t)i] = (char)(seq >> (56 - 8 * i));
    return o->key_len + 9;
}

static bool above_has(const struct in *o, uint64_t seq)
{
    size_t lo = 0, hi = o->nabove;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->above[mid] == seq)
            return true;
        if (o->above[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static bool put_before(const struct in *o, uint64_t seq)
{
    return seq <= o->floor || above_has(o, seq);
}

/* Drop the sequences above the floor that it now covers, and let it rise
 * over those that follow it without a gap; records the floor. */
static void floor_settle(struct in *o)
{
    char k[BRIDGE_NAME_MAX + 16];
    size_t i = 0;
    for (; i < o->nabove && o->above[i] <= o->floor + 1; i++)
        if (o->above[i] == o->floor + 1)
            o->floor++;
    /* the floor first: a kill in between leaves keys it covers, never a
     * sequence put and recorded nowhere */
    shmobj_map_set(o->state, o->key, o->key_len, &o->floor, sizeof o->floor);
    for (size_t j = 0; j < i; j++)
        shmobj_map_del(o->state, k, above_key(o, o->above[j], k));
    if (i > 0) {
        memmove(o->above, o->above + i, (o->nabove - i) * sizeof *o->above);
        o->nabove -= i;
    }
}

/* Record that seq was put (before its ack). */
static void mark_put(struct in *o, uint64_t seq)
{
    if (seq == o->floor + 1) {
        o->floor = seq;
        if (o->nabove == 0) {
            shmobj_map_set(o->state, o->key, o->key_len, &o->floor, sizeof o->floor);
            return;
        }
        floor_settle(o);
        return;
    }
    if (o->nabove == o->cap_above) {
        size_t cap = o->cap_above ? 2 * o->cap_above : 64;
        uint64_t *a = realloc(o->above, cap * sizeof *a);
        if (a == NULL) /* not recorded: a redelivery of it is put again */
            return;
        o->above = a;
        o->cap_above = cap;
    }
    size_t pos = o->nabove;
    while (pos > 0 && o->above[pos - 1] > seq)
        pos--;
    memmove(o->above + pos + 1, o->above + pos, (o->nabove - pos) * sizeof *o->above);
    o->above[pos] = seq;
    o->nabove++;
    char k[BRIDGE_NAME_MAX + 16];
    shmobj_map_set(o->state, k, above_key(o, seq, k), "", 0);
}

/* While sequences above the floor are kept, ask the server (at most once a
 * second) for the consumer's ack floor: every message at or below it was
 * acknowledged, so put (or refused for good), and the floor may rise over
 * the sequences of other subjects. */
static void floor_ask(struct in *o)
{
    struct route *r = o->r;
    int64_t now = bridge__now_ns();
    if (o->nabove == 0 || now - o->floor_asked < FLOOR_ASK_NS)
        return;
    o->floor_asked = now;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 1000;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    if (js_GetConsumerInfo(&ci, r->js, r->c->stream, r->c->durable, &jo, &jerr) != NATS_OK)
        return;
    if (ci->AckFloor.Stream > o->floor) {
        o->floor = ci->AckFloor.Stream;
        floor_settle(o);
    }
    jsConsumerInfo_Destroy(ci);
}

/* Read the floor and the sequences above it a previous run recorded. */
static int floor_load(struct in *o)
{
    size_t vl = 0;
    if (shmobj_map_get(o->state, o->key, o->key_len, &o->floor, sizeof o->floor, &vl) != 0 ||
        vl != sizeof o->floor)
        o->floor = 0;
    shmobj_map_iter *it;
    int rc = shmobj_map_iter_open(o->state, &it);
    if (rc != 0)
        return rc;
    const void *k, *v;
    size_t kl;
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    while ((rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl)) != SHMOBJ_ENOTFOUND) {
        const unsigned char *kb = k;
        if (rc != 0 || kl != o->key_len + 9 || memcmp(k, o->key, o->key_len) != 0 ||
            kb[o->key_len] != ':')
            continue;
        if (n == cap) {
            uint64_t *a = realloc(seqs, (cap ? 2 * cap : 64) * sizeof *a);
            if (a == NULL) {
                shmobj_map_iter_close(it);
                free(seqs);
                return SHMOBJ_ENOMEM;
            }
            seqs = a;
            cap = cap ? 2 * cap : 64;
        }
        uint64_t seq = 0;
        for (int i = 0; i < 8; i++)
            seq = seq << 8 | kb[o->key_len + 1 + (size_t)i];
        seqs[n++] = seq;
    }
    shmobj_map_iter_close(it);
    for (size_t i = 1; i < n; i++) /* few: insertion sort */
        for (size_t j = i; j > 0 && seqs[j - 1] > seqs[j]; j--) {
            uint64_t t = seqs[j];
            seqs[j] = seqs[j - 1];
            seqs[j - 1] = t;
        }
    o->above = seqs;
    o->nabove = n;
    o->cap_above = cap;
    if (n > 0)
        floor_settle(o);
    return 0;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    nanosleep(&ts, NULL);
}

/* Put one message locally; 0, or an error that is for good (the message is
 * refused), or SHMOBJ_ETIMEDOUT when the route is stopping. */
static int put_local(struct in *o, natsMsg *m)
{
    struct route *r = o->r;
    const char *data = natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    const char *enc = NULL;
    bool cbor = natsMsgHeader_Get(m, BRIDGE_HDR_ENCODING, &enc) == NATS_OK && enc != NULL;
    if (cbor && strcmp(enc, BRIDGE_ENC_CBOR) != 0)
        return SHMOBJ_ENOTSUP;
    int64_t progress = bridge__now_ns();
    shmobj_ref ref = 0;
    bool told = false;
    for (;;) {
        int rc;
        if (o->t != NULL) {
            rc = shmobj_topic_publish(o->t, data, len, SLICE_NS);
        } else if (cbor) {
            if (ref == 0 && (rc = bridge__cbor_decode(r->b->seg, data, len, &ref)) != 0 &&
                rc != SHMOBJ_ENOMEM)
                return rc;
            rc = ref ? shmobj_queue_put_timed(o->q, ref, SLICE_NS) : SHMOBJ_ENOMEM;
        } else {
            rc = shmobj_queue_put_copy(o->q, data, len, 0, SLICE_NS, NULL);
        }
        if (rc == 0)
            return 0;
        if (rc != SHMOBJ_ETIMEDOUT && rc != SHMOBJ_EFULL && rc != SHMOBJ_ENOMEM) {
            if (ref != 0)
                shmobj_obj_free(r->b->seg, ref);
            return rc;
        }
        /* full (or the segment is): wait, and keep the message ours */
        if (!told) {
            atomic_fetch_add(&r->st.retried, 1);
            told = true;
        }
        if (atomic_load(&r->b->stop)) {
            if (ref != 0)
                shmobj_obj_free(r->b->seg, ref);
            return SHMOBJ_ETIMEDOUT;
        }
        if (bridge__now_ns() - progress > (int64_t)r->c->ack_wait_ms * 1000000 / 3) {
            natsMsg_InProgress(m, NULL);
            progress = bridge__now_ns();
        }
        if (rc == SHMOBJ_ENOMEM)
            sleep_ns(SLICE_NS);
    }
}

static int open_local(struct in *o)
{
    struct route *r = o->r;
    shmobj_segment *seg = r->b->seg;
    int rc;
    if (r->c->kind == ROUTE_QUEUE_IN) {
        rc = shmobj_queue_open_or_create(seg, r->c->local, r->c->capacity, 0, &o->q);
    } else {
        shmobj_topic_config tc;
        shmobj_topic_config_init(&tc);
        rc = shmobj_topic_open_or_create(seg, r->c->local, &tc, &o->t);
    }
    if (rc == 0)
        rc = shmobj_map_open_or_create(seg, BRIDGE_STATE_MAP, &o->state);
    if (rc != 0)
        bridge__route_error(r, "%s %s: %s", o->t || r->c->kind == ROUTE_TOPIC_IN
                            ? "topic" : "queue", r->c->local, shmobj_strerror(rc));
    o->key_len = (size_t)snprintf(o->key, sizeof o->key, "in:%s", r->c->id);
    if (rc == 0 && (rc = floor_load(o)) != 0)
        bridge__route_error(r, "state of %s: %s", o->key, shmobj_strerror(rc));
    return rc;
}

static int subscribe(struct in *o)
{
    struct route *r = o->r;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = r->c->stream;
    so.ManualAck = true;
    so.Config.Durable = r->c->durable;
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = (int64_t)r->c->ack_wait_ms * 1000000;
    /* the server sends no more than a batch the bridge has not acked: the
     * bridge never holds more than that */
    so.Config.MaxAckPending = r->c->batch;
    so.Config.MaxDeliver = -1;
    jsErrCode jerr = 0;
    natsStatus s = js_SubscribeSync(&o->sub, r->js, r->c->subject, NULL, &so, &jerr);
    if (s != NATS_OK) {
        bridge__route_error(r, "consumer %s on %s: %s (%s)", r->c->durable, r->c->stream,
                            natsStatus_GetText(s), nats_GetLastError(NULL));
        return bridge__status_of_nats(s);
    }
    return 0;
}

static int route_in(struct in *o)
{
    struct route *r = o->r;
    struct shmobj_bridge *b = r->b;
    natsStatus s = natsConnection_JetStream(&r->js, b->nc, NULL);
    if (s != NATS_OK)
        return bridge__status_of_nats(s);
    int rc;
    if ((rc = open_local(o)) != 0)
        return rc;
    while (bridge__stream_ensure(r, r->js, true) != 0 || subscribe(o) != 0) {
        if (atomic_load(&b->stop))
            return 0;
        sleep_ns(500000000);
    }
    while (!atomic_load(&b->stop)) {
        natsMsg *m = NULL;
        floor_ask(o);
        s = natsSubscription_NextMsg(&m, o->sub, 50);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            /* the server is away: the client reconnects, the consumer stays */
            sleep_ns(100000000);
            continue;
        }
        jsMsgMetaData *md = NULL;
        uint64_t seq = 0;
        if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
            seq = md->Sequence.Stream;
            jsMsgMetaData_Destroy(md);
        }
        if (seq != 0 && put_before(o, seq)) {
            natsMsg_Ack(m, NULL); /* put already; its ack was lost */
            natsMsg_Destroy(m);
            continue;
        }
        rc = put_local(o, m);
        if (rc == SHMOBJ_ETIMEDOUT) { /* stopping: delivered again later */
            natsMsg_Destroy(m);
            break;
        }
        if (rc != 0) {
            atomic_fetch_add(&r->st.failed, 1);
            bridge__route_error(r, "stream message %" PRIu64 " refused: %s", seq,
                                shmobj_strerror(rc));
            natsMsg_Term(m, NULL);
            natsMsg_Destroy(m);
            continue;
        }
        if (seq != 0)
            mark_put(o, seq);
        natsMsg_Ack(m, NULL);
        atomic_fetch_add(&r->st.msgs, 1);
        atomic_fetch_add(&r->st.bytes, (uint64_t)natsMsg_GetDataLength(m));
        natsMsg_Destroy(m);
    }
    return 0;
}

void *bridge__route_in(void *arg)
{
    struct in o;
    memset(&o, 0, sizeof o);
    o.r = arg;
    int rc = route_in(&o);
    if (rc != 0) {
        int zero = 0;
        atomic_compare_exchange_strong(&o.r->b->failed_rc, &zero, rc);
    }
    /* destroyed without an unsubscribe: the durable consumer stays */
    natsSubscription_Destroy(o.sub);
    shmobj_queue_close(o.q);
    shmobj_topic_close(o.t);
    shmobj_map_close(o.state);
    free(o.above);
    return NULL;
}
