/* Named services in a segment: create, open, close, destroy; the call
 * table; freeing what a call carries; the repair of calls whose client is
 * gone.
 *
 * Invariants kept here:
 * - A service's block (header and call table) is published as the root
 *   NAME only once it is complete, and after its queue NAME/calls exists:
 *   a handle that opened NAME finds the queue.
 * - A call is freed by exactly one process: the one whose CAS moved its
 *   state to CLOSED (the client collecting its answer or learning its
 *   server died, a server finding it given up, the repair). That process
 *   frees the response, the request and the call, in that order, then
 *   clears the call's table entry. A death between those steps leaves a
 *   reference to a freed block, which the heap's generation refuses
 *   (a second free is SHMOBJ_ESTALE and ignored), and at worst the entry,
 *   which the repair clears once it finds its call freed.
 * - The repair frees a call only when its client is dead or gave up and
 *   no live server holds it. */
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "service-int.h"
#include "shmobj/object.h"
#include "step.h"

static int name_ok(const char *name)
{
    if (name == NULL)
        return SHMOBJ_EINVAL;
    size_t n = strnlen(name, SHMOBJ_SERVICE_NAME_MAX + 1);
    return n == 0 || n > SHMOBJ_SERVICE_NAME_MAX ? SHMOBJ_EINVAL : 0;
}

static void queue_name(char out[SHMOBJ_ROOT_NAME_MAX + 1], const char *name)
{
    size_t n = strlen(name); /* checked by name_ok() */
    memcpy(out, name, n);
    memcpy(out + n, SHMOBJ__SVC_QUEUE_SUFFIX, sizeof SHMOBJ__SVC_QUEUE_SUFFIX);
}

static uint64_t block_bytes(uint32_t slots)
{
    return sizeof(struct shmobj__svc_hdr) +
           (uint64_t)slots * sizeof(struct shmobj__svc_slot);
}

static uint64_t new_ident(shmobj_ref ref)
{
    static _Atomic uint64_t seq;
    uint64_t x = shmobj__mix64(ref ^ shmobj__mix64(shmobj__os_now_ns() ^
                                                   ((uint64_t)shmobj__os_pid() << 32) ^
                                                   atomic_fetch_add(&seq, 1)));
    return x != 0 ? x : 1;
}

bool shmobj__svc_stale(shmobj_service *svc)
{
    return shmobj__space_closed(svc->sp) ||
           atomic_load_explicit(&svc->hdr->ident, memory_order_relaxed) != svc->ident;
}

/* Validate the service's block ref and make a handle (without its queue). */
static int handle_new(shmobj_segment *seg, shmobj_ref ref, shmobj_service **out)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp->ops->live == NULL)
        return SHMOBJ_ENOTSUP;
    uint64_t usable = 0;
    void *mem;
    int rc = shmobj__space_block(sp, ref, &mem, &usable);
    if (rc != 0)
        return rc;
    struct shmobj__svc_hdr *h = mem;
    if (usable < sizeof *h || h->magic != SHMOBJ__SVC_MAGIC)
        return SHMOBJ_ETYPE;
    uint32_t slots = h->slots;
    if (h->version != SHMOBJ__SVC_VERSION || slots < 4 ||
        slots > 2 * SHMOBJ_SERVICE_CAPACITY_MAX || usable < block_bytes(slots))
        return SHMOBJ_ECORRUPT;
    uint64_t ident = atomic_load_explicit(&h->ident, memory_order_acquire);
    if (ident == 0)
        return SHMOBJ_ESTALE;
    shmobj_service *svc = calloc(1, sizeof *svc);
    if (svc == NULL)
        return SHMOBJ_ENOMEM;
    svc->sp = sp;
    svc->seg = seg;
    svc->ref = ref;
    svc->hdr = h;
    svc->slots = (struct shmobj__svc_slot *)(h + 1);
    svc->nslots = slots;
    svc->ident = ident;
    *out = svc;
    return 0;
}

int shmobj_service_create(shmobj_segment *seg, const char *name,
                          uint32_t capacity, unsigned flags,
                          shmobj_service **out)
{
    if (seg == NULL || out == NULL || flags != 0 || name_ok(name) != 0 ||
        capacity < 2 || capacity > SHMOBJ_SERVICE_CAPACITY_MAX ||
        (capacity & (capacity - 1)) != 0)
        return SHMOBJ_EINVAL;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp->ops->live == NULL)
        return SHMOBJ_ENOTSUP;
    if (shmobj__space_writable(sp) != 0)
        return SHMOBJ_ERDONLY;
    char qname[SHMOBJ_ROOT_NAME_MAX + 1];
    queue_name(qname, name);
    shmobj_ref probe;
    int rc = shmobj_segment_root_get(seg, name, &probe);
    if (rc == 0)
        return SHMOBJ_EEXIST;
    if (rc != SHMOBJ_ENOTFOUND)
        return rc;
    shmobj_queue *q = NULL;
    rc = shmobj_queue_create(seg, qname, capacity, 0, &q);
    if (rc != 0)
        return rc;
    /* a creator that dies from here on leaves the queue's name without the
     * service's: shmobj_service_destroy() removes it */
    SHMOBJ__STEP("service.create.queued");
    uint32_t slots = 2 * capacity;
    uint64_t size = block_bytes(slots);
    shmobj_ref ref = 0;
    rc = sp->ops->alloc(sp, size, 64, &ref);
    void *mem = NULL;
    if (rc == 0)
        rc = shmobj__space_at(sp, shmobj__ref_off(ref), size, &mem);
    if (rc == 0) {
        memset(mem, 0, size);
        struct shmobj__svc_hdr *h = mem;
        h->magic = SHMOBJ__SVC_MAGIC;
        h->version = SHMOBJ__SVC_VERSION;
        h->slots = slots;
        h->capacity = capacity;
        shmobj_ref qref = 0;
        (void)shmobj_segment_root_get(seg, qname, &qref);
        h->queue = qref;
        atomic_store_explicit(&h->ident, new_ident(ref), memory_order_release);
    }
    shmobj_service *svc = NULL;
    if (rc == 0)
        rc = handle_new(seg, ref, &svc);
    /* published last, and only if the name is still free */
    if (rc == 0)
        rc = shmobj_segment_root_add(seg, name, ref);
    if (rc != 0) {
        free(svc);
        if (ref != 0)
            sp->ops->free(sp, ref);
        shmobj_queue_close(q);
        (void)shmobj_queue_destroy(seg, qname);
        return rc;
    }
    svc->q = q;
    shmobj__space_hold(sp);
    *out = svc;
    return 0;
}

int shmobj_service_open(shmobj_segment *seg, const char *name,
                        int64_t timeout_ns, shmobj_service **out)
{
    if (seg == NULL || out == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = timeout_ns == 0 ? shmobj_segment_root_get(seg, name, &ref)
                             : shmobj_segment_root_wait(seg, name, timeout_ns, &ref);
    if (rc != 0)
        return rc;
    shmobj_service *svc;
    rc = handle_new(seg, ref, &svc);
    if (rc != 0)
        return rc;
    char qname[SHMOBJ_ROOT_NAME_MAX + 1];
    queue_name(qname, name);
    rc = shmobj_queue_open(seg, qname, &svc->q);
    if (rc != 0) {
        free(svc);
        return rc == SHMOBJ_ENOTFOUND ? SHMOBJ_ESTALE
                                      : rc == SHMOBJ_ETYPE ? SHMOBJ_ECORRUPT : rc;
    }
    shmobj__space_hold(svc->sp);
    (void)shmobj_service_repair(svc, NULL);
    *out = svc;
    return 0;
}

/* Rounds of an open-or-create, and how long each open waits for a
 * concurrent creator to publish the name (its queue is made first). */
#define OPEN_OR_CREATE_ROUNDS 16
#define OPEN_OR_CREATE_WAIT_NS (10 * 1000 * 1000)

int shmobj_service_open_or_create(shmobj_segment *seg, const char *name,
                                  uint32_t capacity, unsigned flags,
                                  shmobj_service **out)
{
    for (unsigned i = 0; i < OPEN_OR_CREATE_ROUNDS; i++) {
        int rc = shmobj_service_create(seg, name, capacity, flags, out);
        if (rc != SHMOBJ_EEXIST)
            return rc;
        rc = shmobj_service_open(seg, name, OPEN_OR_CREATE_WAIT_NS, out);
        if (rc != SHMOBJ_ENOTFOUND && rc != SHMOBJ_ETIMEDOUT && rc != SHMOBJ_ESTALE)
            return rc;
    }
    return SHMOBJ_EEXIST;
}

void shmobj_service_close(shmobj_service *svc)
{
    if (svc == NULL)
        return;
    shmobj_queue_close(svc->q);
    struct shmobj__space *sp = svc->sp;
    free(svc);
    shmobj__space_release(sp);
}

int shmobj_service_destroy(shmobj_segment *seg, const char *name)
{
    if (seg == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (shmobj__space_closed(sp))
        return SHMOBJ_ESTALE;
    shmobj_ref ref;
    char qname[SHMOBJ_ROOT_NAME_MAX + 1];
    queue_name(qname, name);
    int rc = shmobj_segment_root_get(seg, name, &ref);
    if (rc == SHMOBJ_ENOTFOUND)
        /* only the queue of a creator that died half-way, or nothing */
        return shmobj_queue_destroy(seg, qname) == 0 ? 0 : SHMOBJ_ENOTFOUND;
    if (rc != 0)
        return rc;
    shmobj_service *svc;
    rc = handle_new(seg, ref, &svc);
    if (rc != 0)
        return rc;
    /* from here every handle's next look at the ident fails */
    atomic_store_explicit(&svc->hdr->ident, 0, memory_order_relaxed);
    (void)shmobj_queue_destroy(seg, qname);
    for (uint32_t i = 0; i < svc->nslots; i++) {
        struct shmobj__svc_slot *s = &svc->slots[i];
        uint64_t c = atomic_load_explicit(&s->call, memory_order_acquire);
        struct shmobj__svc_call *call;
        if (c != 0 && shmobj__svc_call_at(svc, c, &call) == 0)
            shmobj__svc_retire(svc, c, call,
                               SHMOBJ__SVC_FREE_REQ | SHMOBJ__SVC_FREE_RESP);
        atomic_fetch_add_explicit(&s->wake, 1, memory_order_release);
        shmobj__os_futex_wake(&s->wake, INT32_MAX);
    }
    free(svc);
    rc = shmobj_segment_root_del(seg, name);
    if (rc != 0)
        return rc;
    return sp->ops->free(sp, ref);
}

/* ---- calls and what they carry ------------------------------------------- */

int shmobj__svc_call_at(shmobj_service *svc, shmobj_ref ref,
                        struct shmobj__svc_call **out)
{
    uint64_t usable = 0;
    int rc = svc->sp->ops->check(svc->sp, ref, &usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
    void *mem;
    if (usable < sizeof(struct shmobj__svc_call) ||
        shmobj__space_at(svc->sp, shmobj__ref_off(ref), sizeof(struct shmobj__svc_call),
                         &mem) != 0)
        return SHMOBJ_ECORRUPT;
    struct shmobj__svc_call *c = mem;
    if (c->magic != SHMOBJ__SVC_CALL_MAGIC || c->ident != svc->ident ||
        c->slot >= svc->nslots)
        return SHMOBJ_ECORRUPT;
    *out = c;
    return 0;
}

int shmobj__svc_bytes_make(shmobj_service *svc, const void *data, size_t len,
                           shmobj_ref *out)
{
    shmobj_ref ref;
    int rc = svc->sp->ops->alloc(svc->sp, sizeof(struct shmobj__svc_bytes) + len,
                                 16, &ref);
    if (rc != 0)
        return rc;
    void *mem;
    rc = shmobj__space_at(svc->sp, shmobj__ref_off(ref),
                          sizeof(struct shmobj__svc_bytes) + len, &mem);
    if (rc != 0) {
        svc->sp->ops->free(svc->sp, ref);
        return rc;
    }
    struct shmobj__svc_bytes *b = mem;
    b->magic = SHMOBJ__SVC_BYTES_MAGIC;
    b->len = len;
    if (len > 0)
        memcpy(b + 1, data, len);
    *out = ref;
    return 0;
}

int shmobj__svc_bytes_view(shmobj_service *svc, shmobj_ref ref,
                           const void **data, size_t *len)
{
    uint64_t usable = 0;
    int rc = svc->sp->ops->check(svc->sp, ref, &usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
    void *mem;
    if (usable < sizeof(struct shmobj__svc_bytes) ||
        shmobj__space_at(svc->sp, shmobj__ref_off(ref), usable, &mem) != 0)
        return SHMOBJ_ECORRUPT;
    struct shmobj__svc_bytes *b = mem;
    uint64_t n = b->len; /* read once, then checked */
    if (b->magic != SHMOBJ__SVC_BYTES_MAGIC ||
        n > usable - sizeof(struct shmobj__svc_bytes))
        return SHMOBJ_ECORRUPT;
    *data = b + 1;
    *len = (size_t)n;
    return 0;
}

int shmobj__svc_msg_check(shmobj_service *svc, const shmobj_service_msg *m)
{
    unsigned known = SHMOBJ_SERVICE_OBJECT | SHMOBJ_SERVICE_BYTES;
    if ((m->flags & ~known) != 0 || m->flags == known)
        return SHMOBJ_EINVAL;
    if (m->flags & SHMOBJ_SERVICE_BYTES)
        return (m->data == NULL && m->len > 0) || m->len > SHMOBJ_SERVICE_BYTES_MAX
                   ? SHMOBJ_EINVAL : 0;
    if (m->ref == SHMOBJ_REF_NULL || svc->sp->ops->check(svc->sp, m->ref, NULL) != 0)
        return SHMOBJ_EINVAL;
    return 0;
}

void shmobj__svc_msg_free(shmobj_service *svc, shmobj_ref ref, uint32_t flags)
{
    if (ref == SHMOBJ_REF_NULL)
        return;
    /* a second free of the same reference is refused by the heap's
     * generation (SHMOBJ_ESTALE): nothing to do then */
    if (flags & SHMOBJ_SERVICE_OBJECT)
        (void)shmobj_obj_free(svc->seg, ref);
    else
        (void)svc->sp->ops->free(svc->sp, ref);
}

int shmobj_service_release(shmobj_service *svc, shmobj_service_msg *msg)
{
    if (svc == NULL || msg == NULL || msg->ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_writable(svc->sp) != 0)
        return SHMOBJ_ERDONLY;
    if (msg->call != SHMOBJ_REF_NULL) /* a request taken: answer nothing */
        return shmobj__svc_answer(svc, msg, 0, 0, false);
    int rc = msg->flags & SHMOBJ_SERVICE_OBJECT ? shmobj_obj_free(svc->seg, msg->ref)
                                                : svc->sp->ops->free(svc->sp, msg->ref);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
    memset(msg, 0, sizeof *msg);
    return 0;
}

/* ---- the call table -------------------------------------------------------- */

/* Note the call in a free entry of the table (its `slot` field written
 * first: the entry is how the repair finds it). */
int shmobj__svc_slot_claim(shmobj_service *svc, shmobj_ref call,
                           struct shmobj__svc_call *c)
{
    uint32_t n = svc->nslots;
    uint32_t start = atomic_fetch_add_explicit(&svc->hdr->hint, 1,
                                               memory_order_relaxed);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (start + k) % n;
        struct shmobj__svc_slot *s = &svc->slots[i];
        uint64_t zero = 0;
        if (atomic_load_explicit(&s->call, memory_order_relaxed) != 0)
            continue;
        c->slot = i;
        if (atomic_compare_exchange_strong_explicit(&s->call, &zero, call,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed))
            return 0;
    }
    return SHMOBJ_EFULL;
}

/* Free a call the caller claimed (its state CLOSED by the caller's CAS, or
 * the service being destroyed): the parts named (its response, its
 * request), the call, then its entry. */
void shmobj__svc_retire(shmobj_service *svc, shmobj_ref ref,
                        struct shmobj__svc_call *c, unsigned parts)
{
    uint32_t slot = c->slot; /* read again: bounded again below */
    shmobj_ref resp = atomic_load_explicit(&c->resp, memory_order_acquire);
    uint32_t resp_flags = atomic_load_explicit(&c->resp_flags, memory_order_relaxed);
    shmobj_ref req = atomic_load_explicit(&c->req, memory_order_relaxed);
    uint32_t req_flags = c->req_flags;
    if (parts & SHMOBJ__SVC_FREE_RESP)
        shmobj__svc_msg_free(svc, resp, resp_flags);
    if (parts & SHMOBJ__SVC_FREE_REQ)
        shmobj__svc_msg_free(svc, req, req_flags);
    SHMOBJ__STEP("service.retire.parts");
    (void)svc->sp->ops->free(svc->sp, ref);
    SHMOBJ__STEP("service.retire.call");
    uint64_t expect = ref;
    if (slot < svc->nslots)
        atomic_compare_exchange_strong_explicit(&svc->slots[slot].call, &expect, 0,
                                                memory_order_release,
                                                memory_order_relaxed);
}

/* ---- repair ------------------------------------------------------------------ */

int shmobj_service_repair(shmobj_service *svc, uint32_t *freed)
{
    if (svc == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    if (shmobj__space_writable(svc->sp) != 0)
        return SHMOBJ_ERDONLY;
    uint32_t token = svc->sp->ops->live->token(svc->sp);
    if (token == 0)
        return SHMOBJ_ENOTSUP;
    uint32_t n = 0;
    for (uint32_t i = 0; i < svc->nslots; i++) {
        struct shmobj__svc_slot *s = &svc->slots[i];
        uint64_t ref = atomic_load_explicit(&s->call, memory_order_acquire);
        if (ref == 0)
            continue;
        struct shmobj__svc_call *c;
        int rc = shmobj__svc_call_at(svc, ref, &c);
        if (rc != 0) {
            /* its freer died between the call's free and the entry's */
            if (rc == SHMOBJ_ESTALE)
                atomic_compare_exchange_strong_explicit(&s->call, &ref, 0,
                                                        memory_order_release,
                                                        memory_order_relaxed);
            continue;
        }
        uint64_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        unsigned kind = st & SHMOBJ__SVC_STATE;
        if ((uint16_t)(st >> 16) != shmobj__ref_gen(ref))
            continue; /* freed and reused under our feet */
        if (kind == SHMOBJ__SVC_CLOSED) {
            /* claimed for freeing: finish it only if its claimer died */
            if (shmobj__space_token_holder_alive(svc->sp, st >> 32))
                continue;
        } else {
            bool client_gone = (st & SHMOBJ__SVC_GONE) != 0 ||
                               !shmobj__space_token_alive(svc->sp, c->client);
            if (!client_gone)
                continue;
            if (kind == SHMOBJ__SVC_TAKEN &&
                shmobj__space_token_alive(svc->sp, st >> 32))
                continue; /* its server will answer and free it */
        }
        uint64_t closed = shmobj__svc_state(token, (uint16_t)(st >> 16),
                                            SHMOBJ__SVC_CLOSED);
        if (!atomic_compare_exchange_strong_explicit(&c->state, &st, closed,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        SHMOBJ__STEP("service.repair.claimed");
        /* an answered call's request was freed by its server; a second
         * free of one is refused by its generation anyway */
        shmobj__svc_retire(svc, ref, c,
                           kind == SHMOBJ__SVC_REPLIED
                               ? SHMOBJ__SVC_FREE_RESP
                               : SHMOBJ__SVC_FREE_REQ | SHMOBJ__SVC_FREE_RESP);
        n++;
    }
    if (freed != NULL)
        *freed = n;
    return 0;
}

int shmobj_service_pending(shmobj_service *svc, uint32_t *count)
{
    if (svc == NULL || count == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    uint32_t n = 0;
    for (uint32_t i = 0; i < svc->nslots; i++)
        n += atomic_load_explicit(&svc->slots[i].call, memory_order_relaxed) != 0;
    *count = n;
    return 0;
}

int shmobj_service_notify_fd(shmobj_service *svc, int *fd)
{
    if (svc == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    return shmobj_queue_notify_fd(svc->q, fd);
}

int shmobj_service_notify_arm(shmobj_service *svc)
{
    if (svc == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__svc_stale(svc))
        return SHMOBJ_ESTALE;
    return shmobj_queue_notify_arm(svc->q);
}
