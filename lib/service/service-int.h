/* The service's shared bytes and its handle, shared by its two sources:
 *
 *   service.c       create, open, close, destroy; the call table; freeing
 *                   what a call carries; the repair
 *   service-call.c  the client's call and the server's take and reply
 *
 * A service is two roots: `NAME`, a block holding the header and the call
 * table, and `NAME/calls`, the queue of calls (lib/queue, used through its
 * public calls only). A call is a block of its own holding the words of
 * its protocol (doc/protocols.md, "Services"; doc/format-service.md). */
#ifndef SHMOBJ_SERVICE_INT_H
#define SHMOBJ_SERVICE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os.h"
#include "shmobj/queue.h"
#include "shmobj/segment.h"
#include "shmobj/service.h"
#include "space.h"

#define SHMOBJ__SVC_MAGIC UINT64_C(0x3130435653484d53)      /* "SHMSVC01" */
#define SHMOBJ__SVC_CALL_MAGIC UINT64_C(0x3143435653484d53) /* "SHMSVCC1" */
#define SHMOBJ__SVC_BYTES_MAGIC UINT64_C(0x3142435653484d53) /* "SHMSVCB1" */
#define SHMOBJ__SVC_VERSION 1u
#define SHMOBJ__SVC_QUEUE_SUFFIX "/calls"

/* The service's block: this header, then `slots` entries of the call
 * table. Written once by the creator before the root is published, except
 * `ident` (cleared by destroy). */
struct shmobj__svc_hdr {
    uint64_t magic;   /* SHMOBJ__SVC_MAGIC */
    uint32_t version; /* SHMOBJ__SVC_VERSION */
    uint32_t slots;   /* entries of the call table: twice the capacity */
    /* this creation's identity, never 0; destroy stores 0 (relaxed: a
     * waiter looks at it once per wait slice, it orders nothing) */
    _Atomic uint64_t ident;
    uint64_t queue;    /* the queue's block (informative: tools) */
    uint32_t capacity; /* the queue's capacity */
    /* where the next claim starts looking (a hint: relaxed, any value is
     * correct, taken modulo slots) */
    _Atomic uint32_t hint;
    uint8_t pad[24];
};
_Static_assert(sizeof(struct shmobj__svc_hdr) == 64, "svc header is one line");
_Static_assert(offsetof(struct shmobj__svc_hdr, ident) == 16, "svc ident");

/* One entry of the call table: which call it holds, and the word its
 * client sleeps on. */
struct shmobj__svc_slot {
    /* the call block, 0 when free. Claimed by the client's CAS 0 -> call
     * (acq_rel: the call's fields were written before), cleared by
     * whoever freed the call, CAS call -> 0, after its free */
    _Atomic uint64_t call;
    /* bumped (release) by a server after it answered the call of this
     * entry, then futex-woken; its client sleeps on it. In the table, not
     * in the call, since the client may free the call the moment the
     * answer is published: the server's wake touches only this word */
    _Atomic uint32_t wake;
    uint32_t pad;
};
_Static_assert(sizeof(struct shmobj__svc_slot) == 16, "svc slot is 16 bytes");

/* The state word of a call: the server's token in the high half, the
 * call block's generation in bits 16..31 (a CAS expecting it fails on a
 * block freed and reused since), the state and the gone flag below. */
enum {
    SHMOBJ__SVC_CLOSED = 0,  /* claimed by whoever frees it (its token) */
    SHMOBJ__SVC_PENDING = 1, /* in the queue */
    SHMOBJ__SVC_TAKEN = 2,   /* a server (its token) holds it */
    SHMOBJ__SVC_REPLIED = 3, /* the response is in the call */
    SHMOBJ__SVC_STATE = 3,   /* mask */
    SHMOBJ__SVC_GONE = 4,    /* its client gave up */
};

static inline uint64_t shmobj__svc_state(uint32_t token, uint16_t tag,
                                         unsigned st)
{
    return (uint64_t)token << 32 | (uint64_t)tag << 16 | st;
}

/* A call: one 64-byte block. Every field but `state` is written by the
 * client before the call is published (the table's CAS, then the queue),
 * except resp and resp_flags, written by the server that holds it (TAKEN)
 * before its release CAS to REPLIED. */
struct shmobj__svc_call {
    uint64_t magic;          /* SHMOBJ__SVC_CALL_MAGIC */
    _Atomic uint64_t state;  /* see above; every change is a CAS */
    uint64_t ident;          /* the service's ident at the call */
    uint32_t client;         /* the client's attachment token */
    uint32_t slot;           /* its entry in the call table */
    _Atomic uint64_t req;    /* the request's block */
    _Atomic uint64_t resp;   /* the response's block, 0 until answered */
    uint32_t req_flags;      /* shmobj_service_msg.flags of the request */
    _Atomic uint32_t resp_flags; /* of the response */
    uint64_t pad;
};
_Static_assert(sizeof(struct shmobj__svc_call) == 64, "svc call is one line");
_Static_assert(offsetof(struct shmobj__svc_call, state) == 8, "svc state");
_Static_assert(offsetof(struct shmobj__svc_call, req) == 32, "svc req");

/* A block of bytes (SHMOBJ_SERVICE_BYTES): this header, then len bytes. */
struct shmobj__svc_bytes {
    uint64_t magic; /* SHMOBJ__SVC_BYTES_MAGIC */
    uint64_t len;   /* bytes behind the header */
};
_Static_assert(sizeof(struct shmobj__svc_bytes) == 16, "svc bytes header");

struct shmobj_service {
    struct shmobj__space *sp;
    shmobj_segment *seg;
    shmobj_ref ref;               /* the service's block */
    struct shmobj__svc_hdr *hdr;  /* validated at open */
    struct shmobj__svc_slot *slots;
    uint32_t nslots;
    uint64_t ident;               /* hdr->ident at open */
    shmobj_queue *q;              /* the queue of calls */
};

/* service.c */
bool shmobj__svc_stale(shmobj_service *svc);
int shmobj__svc_call_at(shmobj_service *svc, shmobj_ref ref,
                        struct shmobj__svc_call **out);
int shmobj__svc_bytes_make(shmobj_service *svc, const void *data, size_t len,
                           shmobj_ref *out);
int shmobj__svc_bytes_view(shmobj_service *svc, shmobj_ref ref,
                           const void **data, size_t *len);
int shmobj__svc_msg_check(shmobj_service *svc, const shmobj_service_msg *m);
void shmobj__svc_msg_free(shmobj_service *svc, shmobj_ref ref, uint32_t flags);
int shmobj__svc_slot_claim(shmobj_service *svc, shmobj_ref call,
                           struct shmobj__svc_call *c);
/* service-call.c: answer a taken call with r (0: released unanswered);
 * with made, r is made from req->data and req->len (bytes) */
int shmobj__svc_answer(shmobj_service *svc, shmobj_service_msg *req,
                       shmobj_ref r, uint32_t flags, bool made);
/* what shmobj__svc_retire() frees besides the call */
#define SHMOBJ__SVC_FREE_RESP 1u
#define SHMOBJ__SVC_FREE_REQ 2u
void shmobj__svc_retire(shmobj_service *svc, shmobj_ref ref,
                        struct shmobj__svc_call *c, unsigned parts);

#endif /* SHMOBJ_SERVICE_INT_H */
