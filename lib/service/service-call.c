/* A client's call and a server's take and reply (doc/protocols.md,
 * "Services").
 *
 * Invariants kept here:
 * - Every change of a call's state word is a CAS that expects the call's
 *   generation in the word: a process holding a reference to a call freed
 *   and reused since changes nothing.
 * - The client owns its call until it gives up (the gone flag, set by its
 *   CAS) or collects the answer; a server owns it from its claim (TAKEN,
 *   with its token) to its answer (REPLIED, published by a release CAS
 *   after the response was stored and the request freed). After its
 *   answer a server touches only the call's entry in the table (which
 *   lives as long as the service), never the call, which its client may
 *   free at once.
 * - A server that died holding a call is told by its token in the state
 *   word: the client's wait judges it once per quiet slice. */
#include <string.h>

#include "service-int.h"
#include "step.h"

/* A client's wait looks at its server's liveness after each slice in which
 * nothing woke it. */
#define WAIT_SLICE_NS (100 * 1000 * 1000ull)

static uint64_t deadline_of(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return UINT64_MAX;
    uint64_t now = shmobj__os_now_ns();
    return (uint64_t)timeout_ns > UINT64_MAX - now ? UINT64_MAX
                                                   : now + (uint64_t)timeout_ns;
}

/* CLOSED, claimed by `token` (the repair finishes the work of a claimer
 * that died) */
static uint64_t closed_state(uint64_t st, uint32_t token)
{
    return shmobj__svc_state(token, (uint16_t)(st >> 16), SHMOBJ__SVC_CLOSED);
}

/* ---- client --------------------------------------------------------------- */

/* The answer is there (REPLIED seen in st): hand the response over and
 * free the call. */
static int collect(shmobj_service *svc, shmobj_ref ref,
                   struct shmobj__svc_call *c, uint64_t st,
                   shmobj_service_msg *resp)
{
    shmobj_ref r = atomic_load_explicit(&c->resp, memory_order_relaxed);
    uint32_t flags = atomic_load_explicit(&c->resp_flags, memory_order_relaxed);
    SHMOBJ__STEP("service.call.collect");
    /* ours alone: only a gone or dead client's call is claimed by another */
    atomic_compare_exchange_strong_explicit(&c->state, &st, closed_state(st, c->client),
                                            memory_order_acq_rel,
                                            memory_order_relaxed);
    shmobj_service_msg m = {.ref = r, .flags = flags};
    int rc = 0;
    if (r == SHMOBJ_REF_NULL) {
        shmobj__svc_retire(svc, ref, c, 0);
        return SHMOBJ_ENOTFOUND; /* the server released it unanswered */
    }
    if (flags & SHMOBJ_SERVICE_BYTES)
        rc = shmobj__svc_bytes_view(svc, r, &m.data, &m.len);
    shmobj__svc_retire(svc, ref, c, rc == 0 ? 0 : SHMOBJ__SVC_FREE_RESP);
    if (rc != 0)
        return SHMOBJ_ECORRUPT;
    *resp = m;
    return 0;
}

/* The server holding the call (TAKEN in st) died: free the call and what
 * it carries. */
static int peer_dead(shmobj_service *svc, shmobj_ref ref,
                     struct shmobj__svc_call *c, uint64_t st)
{
    if (!atomic_compare_exchange_strong_explicit(&c->state, &st,
                                                 closed_state(st, c->client),
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 1; /* it moved: look again */
    /* its server may have stored a response before it died */
    shmobj__svc_retire(svc, ref, c, SHMOBJ__SVC_FREE_REQ | SHMOBJ__SVC_FREE_RESP);
    return SHMOBJ_EPEERDEAD;
}

static bool server_dead(shmobj_service *svc, uint64_t st)
{
    return (st & SHMOBJ__SVC_STATE) == SHMOBJ__SVC_TAKEN &&
           !shmobj__space_token_alive(svc->sp, st >> 32);
}

/* Wait for the answer to the call in table entry s until the deadline. */
static int call_wait(shmobj_service *svc, shmobj_ref ref,
                     struct shmobj__svc_call *c, struct shmobj__svc_slot *s,
                     uint64_t deadline, shmobj_service_msg *resp)
{
    bool quiet = false, gone_name = false;
    for (;;) {
        uint32_t w = atomic_load_explicit(&s->wake, memory_order_acquire);
        uint64_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        if ((st & SHMOBJ__SVC_STATE) == SHMOBJ__SVC_REPLIED)
            return collect(svc, ref, c, st, resp);
        if (atomic_load_explicit(&svc->hdr->ident, memory_order_relaxed) != svc->ident)
            return SHMOBJ_ESTALE; /* destroyed: the call went with it */
        if (shmobj__space_closed(svc->sp))
            break; /* the segment handle closed: give the call up */
        if (quiet && server_dead(svc, st)) {
            int rc = peer_dead(svc, ref, c, st);
            if (rc <= 0)
                return rc;
            continue;
        }
        if (quiet && !svc->sp->ops->live->linked(svc->sp)) {
            gone_name = true; /* the segment's name moved on: so did its peers */
            break;
        }
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            break;
        uint64_t until = deadline - now > WAIT_SLICE_NS ? now + WAIT_SLICE_NS
                                                        : deadline;
        SHMOBJ__STEP("service.call.wait");
        quiet = shmobj__os_futex_wait(&s->wake, w, until) == SHMOBJ_ETIMEDOUT;
    }
    /* give up: from the gone flag on, the call is no longer ours */
    for (;;) {
        uint64_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        unsigned kind = st & SHMOBJ__SVC_STATE;
        if (kind == SHMOBJ__SVC_REPLIED)
            return collect(svc, ref, c, st, resp);
        if (server_dead(svc, st)) {
            int rc = peer_dead(svc, ref, c, st);
            if (rc <= 0)
                return rc;
            continue;
        }
        if (kind == SHMOBJ__SVC_CLOSED)
            return SHMOBJ_ECORRUPT; /* nobody else closes a live client's call */
        if (atomic_compare_exchange_strong_explicit(&c->state, &st,
                                                    st | SHMOBJ__SVC_GONE,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            SHMOBJ__STEP("service.call.gone");
            return shmobj__space_closed(svc->sp) ? SHMOBJ_ESTALE
                   : gone_name                    ? SHMOBJ_EREPLACED
                                                  : SHMOBJ_ETIMEDOUT;
        }
    }
}

int shmobj_service_call(shmobj_service *svc, const shmobj_service_msg *req,
                        int64_t timeout_ns, shmobj_service_msg *resp)
{
    if (svc == NULL || req == NULL || resp == NULL ||
        (timeout_ns <= 0 && timeout_ns != SHMOBJ_FOREVER))
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    int rc = shmobj__space_writable(svc->sp);
    if (rc == 0)
        rc = shmobj__svc_msg_check(svc, req);
    if (rc != 0)
        return rc;
    uint32_t token = svc->sp->ops->live->token(svc->sp);
    if (token == 0)
        return SHMOBJ_ENOTSUP;
    uint64_t deadline = deadline_of(timeout_ns);
    shmobj_ref rq = req->ref;
    bool made = false;
    if (req->flags & SHMOBJ_SERVICE_BYTES) {
        rc = shmobj__svc_bytes_make(svc, req->data, req->len, &rq);
        if (rc != 0)
            return rc;
        made = true;
    }
    shmobj_ref ref;
    rc = svc->sp->ops->alloc(svc->sp, sizeof(struct shmobj__svc_call), 64, &ref);
    struct shmobj__svc_call *c = NULL;
    if (rc == 0) {
        void *mem;
        rc = shmobj__space_at(svc->sp, shmobj__ref_off(ref), sizeof *c, &mem);
        if (rc != 0)
            svc->sp->ops->free(svc->sp, ref);
        c = mem;
    }
    if (rc != 0) {
        if (made)
            svc->sp->ops->free(svc->sp, rq);
        return rc;
    }
    memset(c, 0, sizeof *c);
    c->magic = SHMOBJ__SVC_CALL_MAGIC;
    c->ident = svc->ident;
    c->client = token;
    atomic_store_explicit(&c->req, rq, memory_order_relaxed);
    c->req_flags = req->flags;
    atomic_store_explicit(&c->state,
                          shmobj__svc_state(0, shmobj__ref_gen(ref),
                                            SHMOBJ__SVC_PENDING),
                          memory_order_relaxed);
    rc = shmobj__svc_slot_claim(svc, ref, c);
    if (rc == SHMOBJ_EFULL && shmobj_service_repair(svc, NULL) == 0)
        rc = shmobj__svc_slot_claim(svc, ref, c);
    if (rc == 0) {
        SHMOBJ__STEP("service.call.noted");
        uint64_t now = shmobj__os_now_ns();
        int64_t left = deadline == UINT64_MAX ? SHMOBJ_FOREVER
                       : now >= deadline      ? 0
                                              : (int64_t)(deadline - now);
        rc = shmobj_queue_put_timed(svc->q, ref, left);
        if (rc == SHMOBJ_EFULL)
            rc = SHMOBJ_ETIMEDOUT;
        if (rc != 0) {
            /* not sent: ours alone (repair spares a live client's call) */
            uint64_t st = atomic_load_explicit(&c->state, memory_order_relaxed);
            atomic_store_explicit(&c->state, closed_state(st, token),
                                  memory_order_relaxed);
            shmobj__svc_retire(svc, ref, c, made ? SHMOBJ__SVC_FREE_REQ : 0);
            return rc;
        }
    } else {
        svc->sp->ops->free(svc->sp, ref);
        if (made)
            svc->sp->ops->free(svc->sp, rq);
        return rc;
    }
    SHMOBJ__STEP("service.call.sent");
    uint32_t slot = c->slot; /* ours: written by this call before its claim */
    return call_wait(svc, ref, c, &svc->slots[slot % svc->nslots], deadline, resp);
}

/* ---- server --------------------------------------------------------------- */

/* Claim the call ref taken from the queue: 0 and the request in *req, or 1
 * when it is not to be served (given up, freed, damaged). */
static int claim(shmobj_service *svc, shmobj_ref ref, uint32_t token,
                 shmobj_service_msg *req)
{
    struct shmobj__svc_call *c;
    if (shmobj__svc_call_at(svc, ref, &c) != 0)
        return 1;
    uint16_t tag = shmobj__ref_gen(ref);
    shmobj_service_msg m = {.ref = atomic_load_explicit(&c->req, memory_order_relaxed),
                            .flags = c->req_flags, .call = ref};
    if ((m.flags & SHMOBJ_SERVICE_BYTES) &&
        shmobj__svc_bytes_view(svc, m.ref, &m.data, &m.len) != 0)
        return 1; /* left to its client's timeout and the repair */
    for (;;) {
        uint64_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        if ((uint16_t)(st >> 16) != tag ||
            (st & SHMOBJ__SVC_STATE) != SHMOBJ__SVC_PENDING)
            return 1;
        if (st & SHMOBJ__SVC_GONE) {
            if (atomic_compare_exchange_strong_explicit(&c->state, &st,
                                                        closed_state(st, token),
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed)) {
                shmobj__svc_retire(svc, ref, c, SHMOBJ__SVC_FREE_REQ);
                return 1;
            }
            continue;
        }
        if (atomic_compare_exchange_strong_explicit(
                &c->state, &st, shmobj__svc_state(token, tag, SHMOBJ__SVC_TAKEN),
                memory_order_acq_rel, memory_order_relaxed)) {
            *req = m;
            return 0;
        }
    }
}

int shmobj_service_take(shmobj_service *svc, int64_t timeout_ns,
                        shmobj_service_msg *req)
{
    if (svc == NULL || req == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    if (shmobj__space_writable(svc->sp) != 0)
        return SHMOBJ_ERDONLY;
    uint32_t token = svc->sp->ops->live->token(svc->sp);
    if (token == 0)
        return SHMOBJ_ENOTSUP;
    uint64_t deadline = deadline_of(timeout_ns);
    for (;;) {
        shmobj_ref ref;
        int rc;
        if (timeout_ns == 0) {
            rc = shmobj_queue_try_take(svc->q, &ref);
        } else {
            uint64_t now = shmobj__os_now_ns();
            if (now >= deadline)
                return SHMOBJ_ETIMEDOUT;
            rc = shmobj_queue_take_timed(svc->q, &ref,
                                         deadline == UINT64_MAX
                                             ? SHMOBJ_FOREVER
                                             : (int64_t)(deadline - now));
        }
        if (rc != 0)
            return rc == SHMOBJ_ESTALE || shmobj__svc_stale(svc) ? SHMOBJ_ESTALE : rc;
        SHMOBJ__STEP("service.take.taken");
        if (claim(svc, ref, token, req) == 0)
            return 0;
    }
}

/* Answer the call req->call with r (0: no answer, the request released):
 * store it, free the request, publish, wake the client. */
int shmobj__svc_answer(shmobj_service *svc, shmobj_service_msg *req,
                       shmobj_ref r, uint32_t flags, bool made)
{
    struct shmobj__svc_call *c;
    int rc = shmobj__svc_call_at(svc, req->call, &c);
    if (rc != 0)
        return rc;
    uint32_t token = svc->sp->ops->live->token(svc->sp);
    uint16_t tag = shmobj__ref_gen(req->call);
    uint64_t st = atomic_load_explicit(&c->state, memory_order_acquire);
    if ((st & SHMOBJ__SVC_STATE) != SHMOBJ__SVC_TAKEN || (uint16_t)(st >> 16) != tag ||
        (uint32_t)(st >> 32) != token || token == 0)
        return SHMOBJ_EINVAL;
    if (made) {
        rc = shmobj__svc_bytes_make(svc, req->data, req->len, &r);
        if (rc != 0)
            return rc;
    }
    atomic_store_explicit(&c->resp_flags, flags, memory_order_relaxed);
    atomic_store_explicit(&c->resp, r, memory_order_relaxed);
    SHMOBJ__STEP("service.reply.stored");
    shmobj_ref rq = atomic_load_explicit(&c->req, memory_order_relaxed);
    if (rq != r) /* a request sent back as the response stays */
        shmobj__svc_msg_free(svc, rq, c->req_flags);
    SHMOBJ__STEP("service.reply.freed");
    uint32_t slot = c->slot; /* before the call goes; read again, so bounded */
    if (slot >= svc->nslots)
        return SHMOBJ_ECORRUPT;
    struct shmobj__svc_slot *s = &svc->slots[slot];
    for (;;) {
        if (st & SHMOBJ__SVC_GONE) {
            /* its client gave up: nobody collects the answer */
            if (atomic_compare_exchange_strong_explicit(&c->state, &st,
                                                        closed_state(st, token),
                                                        memory_order_acq_rel,
                                                        memory_order_acquire)) {
                shmobj__svc_retire(svc, req->call, c, SHMOBJ__SVC_FREE_RESP);
                break;
            }
            continue;
        }
        uint64_t done = (st & ~(uint64_t)SHMOBJ__SVC_STATE) | SHMOBJ__SVC_REPLIED;
        /* release: the response and the request's free come before */
        if (atomic_compare_exchange_strong_explicit(&c->state, &st, done,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            SHMOBJ__STEP("service.reply.published");
            atomic_fetch_add_explicit(&s->wake, 1, memory_order_release);
            shmobj__os_futex_wake(&s->wake, 1);
            break;
        }
        if ((st & SHMOBJ__SVC_STATE) != SHMOBJ__SVC_TAKEN)
            return SHMOBJ_ECORRUPT; /* only the holder moves a taken call */
    }
    memset(req, 0, sizeof *req);
    return 0;
}

int shmobj_service_reply(shmobj_service *svc, shmobj_service_msg *req,
                         const shmobj_service_msg *resp)
{
    if (svc == NULL || req == NULL || resp == NULL || req->call == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__space_writable(svc->sp);
    if (rc == 0)
        rc = shmobj__svc_msg_check(svc, resp);
    if (rc != 0)
        return rc;
    if (resp->flags & SHMOBJ_SERVICE_BYTES) {
        /* made by the answer once the call checked out */
        shmobj_service_msg m = *req;
        m.data = resp->data;
        m.len = resp->len;
        rc = shmobj__svc_answer(svc, &m, 0, resp->flags, true);
        if (rc == 0)
            memset(req, 0, sizeof *req);
        return rc;
    }
    return shmobj__svc_answer(svc, req, resp->ref, resp->flags, false);
}
