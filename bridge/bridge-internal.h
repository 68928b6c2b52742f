/*
 * What the bridge's files share: the configuration as parsed, the running
 * routes and their counters, the in-flight table of an outbound route, and
 * the calls each file offers the others. The bridge is a client of
 * libshmobj: it includes only the public headers (<shmobj.h>), which the
 * `layers` test checks.
 */
#ifndef SHMOBJ_BRIDGE_INTERNAL_H
#define SHMOBJ_BRIDGE_INTERNAL_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shmobj.h>

#include "shmobj-bridge.h"

/* Tags of profile cbor-1 (doc/bridge.md, "Encoding"): first-come
 * first-served CBOR tags, 0x534d00 + n ("SM"). */
#define SHMOBJ_CBOR_TAG_UINT 0x534d01u
#define SHMOBJ_CBOR_TAG_TUPLE 0x534d02u
#define SHMOBJ_CBOR_TAG_STRUCT 0x534d03u
#define SHMOBJ_CBOR_TAG_BOOLS 0x534d04u

/* The NATS header naming a message's encoding; absent means raw bytes. */
#define BRIDGE_HDR_ENCODING "Shmobj-Encoding"
#define BRIDGE_ENC_CBOR "cbor-1"
/* The map in each segment where routes keep their state (journal of
 * outbound queue routes, last stream sequence of inbound routes). */
#define BRIDGE_STATE_MAP "shmobj-bridge"

struct bridge_buf {
    unsigned char *data;
    size_t len, cap;
    size_t cap_limit; /* most bytes the buffer may hold */
};

int bridge__buf_reserve(struct bridge_buf *b, size_t more);
int bridge__cbor_encode(shmobj_segment *seg, shmobj_ref ref, struct bridge_buf *out);
int bridge__cbor_decode(shmobj_segment *seg, const void *data, size_t len,
                        shmobj_ref *ref);

enum route_kind {
    ROUTE_QUEUE_OUT = 1, /* queue -> stream */
    ROUTE_TOPIC_OUT,     /* topic -> stream */
    ROUTE_QUEUE_IN,      /* stream -> queue */
    ROUTE_TOPIC_IN,      /* stream -> topic */
    ROUTE_MAP_KV         /* map <-> kv bucket */
};

enum { KV_EXPORT = 1, KV_IMPORT = 2, KV_BOTH = 3 };

#define BRIDGE_NAME_MAX 64
#define BRIDGE_SUBJECT_MAX 256

struct route_conf {
    int kind;
    int kv_dir;
    char id[BRIDGE_NAME_MAX];          /* route name: state keys, msg ids */
    char local[SHMOBJ_ROOT_NAME_MAX + 1]; /* queue, topic or map name */
    char stream[BRIDGE_NAME_MAX];      /* JetStream stream (or KV bucket) */
    char subject[BRIDGE_SUBJECT_MAX];
    char durable[BRIDGE_NAME_MAX];     /* inbound: durable consumer name */
    char dead[SHMOBJ_ROOT_NAME_MAX + 1]; /* outbound queue: dead-letter queue */
    uint32_t window;   /* outbound: publishes awaiting their ack at most */
    uint32_t batch;    /* inbound: messages per fetch */
    uint32_t capacity; /* queue capacity when the bridge creates it */
    uint32_t interval_ms; /* map: how often local changes are looked for */
    uint32_t replicas;
    uint32_t ack_wait_ms; /* inbound: JetStream redelivers after this */    /* streams and buckets the bridge makes */
};

struct shmobj_bridge_config {
    char segment[SHMOBJ_NAME_MAX + 1];
    char name[BRIDGE_NAME_MAX]; /* this bridge: msg-id prefix, durables */
    char *url;
    char *creds;
    char *tls_ca, *tls_cert, *tls_key;
    bool tls;
    unsigned nroutes;
    struct route_conf *routes;
};

struct route_stats {
    _Atomic uint64_t msgs, bytes, inflight, retried, failed;
};

/* One in-flight publish of an outbound route, in a ring ordered by seq. */
struct flight {
    uint64_t seq;    /* local sequence: journal key, second half of the id */
    uint64_t epoch;  /* first half of the message id */
    shmobj_ref ref;  /* queue routes: the message taken */
    shmobj_topic_msg tmsg; /* topic routes: the message held */
    uint32_t len;
    uint8_t state;   /* FL_* */
};

enum { FL_FREE = 0, FL_SENT, FL_ACKED, FL_RETRY };

struct route {
    struct shmobj_bridge *b;
    const struct route_conf *c;
    pthread_t thread;
    bool started;
    struct route_stats st;
    char err[256];        /* the route's last error, for the status line */
    /* outbound: the in-flight ring and the lock the ack handler takes */
    pthread_mutex_t lock;
    struct flight *ring;
    uint32_t ring_cap;    /* power of two >= window */
    uint64_t head, tail;  /* ring positions: [head, tail) used */
    _Atomic uint32_t retries; /* flights the handler gave back to send again */
    jsCtx *js;
};

struct shmobj_bridge {
    struct shmobj_bridge_config *conf; /* a copy */
    shmobj_segment *seg;
    natsConnection *nc;
    atomic_bool stop;
    _Atomic int failed_rc;  /* first route error that ended a route */
    unsigned nroutes;
    struct route *routes;
    pthread_mutex_t log_lock;
    shmobj_bridge_log_fn log;
    void *log_arg;
    _Atomic uint64_t disconnects, reconnects;
    atomic_bool closed; /* the client's last callback ran: b may go */
};

void bridge__log(struct shmobj_bridge *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bridge__route_error(struct route *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Write the message fmt says into err (err_len bytes; NULL: none) and
 * return rc: the error path of the calls that explain their failures. */
int bridge__fail(char *err, size_t err_len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int bridge__status_of_nats(natsStatus s);
int bridge__stream_ensure(struct route *r, jsCtx *js, bool wildcard_ok);
int64_t bridge__now_ns(void);
void bridge__sanitize(char *s);

void *bridge__route_out(void *arg);
void *bridge__route_in(void *arg);
void *bridge__route_kv(void *arg);

#endif
