/* Subscribers: join, leave, take, release, blocking waits and the pollable
 * descriptor.
 *
 * Invariants kept here:
 * - Join and leave happen under the topic's lock: a record's cursors and
 *   serial are written before its token (release), so a reclaim, which
 *   runs under the same lock, never sees a record half made.
 * - A take reads the slot of its next sequence, checks that the slot holds
 *   that sequence, and only then moves next past it (a store under
 *   SHMOBJ_TOPIC_BLOCK, where only the subscriber moves it; a CAS under
 *   SHMOBJ_TOPIC_OVERWRITE, where a publisher may move it forward past
 *   messages it did not take). The message's bytes are read only after
 *   that: a message taken is between held and next, which no reclaim
 *   passes, so its block stays until it is released.
 * - A release moves held forward (never back), then looks at pub_waiters
 *   after a seq_cst fence (see topic-pub.c).
 * - A taker that sleeps counts itself in sub_waiters and sets sleepy,
 *   then looks at head once more after a seq_cst fence; a publisher stores
 *   head, then looks at sub_waiters and sleepy after a seq_cst fence: one
 *   sees the other. The publisher that clears sleepy wakes every sleeper,
 *   so publishers make no system call while no taker went to sleep since
 *   the last wake-up. */
#include <stdlib.h>

#include "mix.h"
#include "os-notify.h"
#include "step.h"
#include "topic-int.h"

/* Spin of a blocking take before it sleeps, by default. */
#define TAKE_SPIN_NS 20000
/* A sleeping taker's slice: it looks at the segment's name in between. */
#define TAKE_SLICE_NS (100 * 1000 * 1000ull)
/* Takes that find their slot overwritten before they moved past it: each
 * means a publisher moved the cursor meanwhile, which it does at most once
 * per quarter ring; more is damage. */
#define TAKE_RETRIES 1000

void shmobj__topic_wake_publishers(shmobj_topic *t)
{
    struct shmobj__topic_hdr *h = t->hdr;
    atomic_fetch_add_explicit(&h->rel_event, 1, memory_order_release);
    shmobj__os_futex_wake(&h->rel_event, INT32_MAX);
}

/* ---- join and leave ------------------------------------------------------- */

static int find_record(shmobj_topic *t, uint32_t *idx)
{
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    for (uint32_t i = 0; i < hwm; i++)
        if (atomic_load_explicit(&t->subs[i].token, memory_order_relaxed) == 0) {
            *idx = i;
            return 0;
        }
    if (hwm < t->subs_max) {
        *idx = hwm;
        return 0;
    }
    return SHMOBJ_EFULL;
}

int shmobj_topic_subscribe(shmobj_topic *t, shmobj_topic_sub **out)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    uint64_t me = t->sp->ops->live->token(t->sp);
    if (me == 0)
        return SHMOBJ_EFULL; /* no attachment slot for this process */
    shmobj_topic_sub *s = calloc(1, sizeof *s);
    if (s == NULL)
        return SHMOBJ_ENOMEM;
    int rc = shmobj__topic_lock(t, 0);
    if (rc != 0) {
        free(s);
        return rc;
    }
    SHMOBJ__STEP("topic.join.locked");
    struct shmobj__topic_hdr *h = t->hdr;
    uint32_t idx = 0;
    rc = find_record(t, &idx);
    if (rc == SHMOBJ_EFULL) {
        /* records of dead subscribers */
        rc = shmobj__topic_repair_locked(t, UINT64_MAX, NULL);
        if (rc == 0)
            rc = find_record(t, &idx);
    }
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    if (rc == 0 && (tail > head || head - tail > t->capacity))
        rc = SHMOBJ_ECORRUPT;
    if (rc != 0) {
        shmobj__topic_unlock(t);
        free(s);
        return rc;
    }
    uint64_t start = head >= t->history ? head - t->history : 0;
    if (start < tail)
        start = tail;
    struct shmobj__topic_subrec *r = &t->subs[idx];
    uint64_t serial = shmobj__mix64(t->ident ^ (me << 20) ^
                                    atomic_fetch_add(&t->serials, 1) ^
                                    shmobj__os_now_ns());
    atomic_store_explicit(&r->next, start, memory_order_relaxed);
    atomic_store_explicit(&r->held, start, memory_order_relaxed);
    atomic_store_explicit(&r->missed, 0, memory_order_relaxed);
    atomic_store_explicit(&r->notify, TOPIC_NOTIFY_NONE, memory_order_relaxed);
    atomic_store_explicit(&r->serial, serial, memory_order_relaxed);
    if (idx == atomic_load_explicit(&h->sub_hwm, memory_order_relaxed))
        atomic_store_explicit(&h->sub_hwm, idx + 1, memory_order_release);
    atomic_store_explicit(&r->token, me, memory_order_release);
    SHMOBJ__STEP("topic.join.recorded");
    shmobj__topic_unlock(t);
    atomic_fetch_add_explicit(&t->holds, 1, memory_order_relaxed);
    s->t = t;
    s->rec = r;
    s->serial = serial;
    s->next = start;
    s->held = start;
    s->spin_ns = TAKE_SPIN_NS;
    s->nrfd = -1;
    s->nwfd = -1;
    *out = s;
    return 0;
}

void shmobj_topic_unsubscribe(shmobj_topic_sub *s)
{
    if (s == NULL)
        return;
    shmobj_topic *t = s->t;
    struct shmobj__topic_subrec *r = s->rec;
    if (shmobj__topic_live(t) == 0 && shmobj__topic_lock(t, 0) == 0) {
        SHMOBJ__STEP("topic.leave.locked");
        if (atomic_load_explicit(&r->serial, memory_order_relaxed) == s->serial &&
            atomic_load_explicit(&r->token, memory_order_relaxed) != 0) {
            if (atomic_exchange_explicit(&r->notify, TOPIC_NOTIFY_NONE,
                                         memory_order_acq_rel) == TOPIC_NOTIFY_ARMED)
                atomic_fetch_sub_explicit(&t->hdr->armed, 1, memory_order_relaxed);
            atomic_store_explicit(&r->token, 0, memory_order_release);
        }
        SHMOBJ__STEP("topic.leave.cleared");
        shmobj__topic_unlock(t);
        /* what it held may free the publishers waiting for it */
        if (atomic_load_explicit(&t->hdr->pub_waiters, memory_order_seq_cst) != 0)
            shmobj__topic_wake_publishers(t);
    }
    shmobj__os_notify_destroy(s->nrfd); /* and unlinks its FIFO */
    shmobj__os_notify_close(s->nwfd);
    free(s);
    shmobj__topic_release(t);
}

int shmobj_topic_spin_set(shmobj_topic_sub *s, int64_t spin_ns)
{
    if (s == NULL)
        return SHMOBJ_EINVAL;
    s->spin_ns = spin_ns < 0 ? 0 : spin_ns;
    return 0;
}

/* ---- take and release ------------------------------------------------------ */

/* Whether the record is still this subscriber's. */
static int sub_status(shmobj_topic_sub *s)
{
    if (shmobj__topic_usable(s->t) != 0)
        return SHMOBJ_ESTALE;
    struct shmobj__topic_subrec *r = s->rec;
    if (atomic_load_explicit(&r->serial, memory_order_relaxed) != s->serial ||
        atomic_load_explicit(&r->token, memory_order_relaxed) == 0)
        return SHMOBJ_ESTALE; /* taken back by repair, maybe joined again */
    return 0;
}

/* Raise a shared cursor to v (never lower it). */
static void cursor_raise(_Atomic uint64_t *c, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);
    for (unsigned k = 0; k < 64 && cur < v; k++)
        if (atomic_compare_exchange_weak_explicit(c, &cur, v, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return;
}

/* Take one message without waiting: 0, SHMOBJ_EEMPTY or an error. */
static int take_one(shmobj_topic_sub *s, shmobj_topic_msg *msg)
{
    shmobj_topic *t = s->t;
    struct shmobj__topic_subrec *r = s->rec;
    int rc = sub_status(s);
    if (rc != 0)
        return rc;
    bool overwrite = t->policy == SHMOBJ_TOPIC_OVERWRITE;
    uint64_t missed = 0;
    for (unsigned tries = 0; tries < TAKE_RETRIES; tries++) {
        uint64_t n = atomic_load_explicit(&r->next, memory_order_acquire);
        if (n != s->next) {
            /* only a publisher of an overwriting topic moves it, forward */
            if (!overwrite || n < s->next) {
                /* or the record was taken back and joined again since */
                rc = sub_status(s);
                return rc != 0 ? rc : SHMOBJ_ECORRUPT;
            }
            missed += n - s->next;
            s->next = n;
            if (s->taken == 0 && s->held < n) {
                /* it held nothing: the publisher that moved next moves
                 * held too, unless it died in between */
                s->held = n;
                cursor_raise(&r->held, n);
            }
        }
        uint64_t head = atomic_load_explicit(&t->hdr->head, memory_order_acquire);
        if (n >= head) {
            if (n > head)
                return SHMOBJ_ECORRUPT;
            s->missed_pending += missed;
            return SHMOBJ_EEMPTY;
        }
        struct shmobj__topic_slot *sl = &t->slots[n & (t->capacity - 1)];
        uint64_t seq = atomic_load_explicit(&sl->seq, memory_order_acquire);
        shmobj__ref ref = atomic_load_explicit(&sl->ref, memory_order_relaxed);
        uint64_t len = atomic_load_explicit(&sl->len, memory_order_relaxed);
        uint64_t kind = atomic_load_explicit(&sl->kind, memory_order_relaxed);
        if (seq != n + 1) {
            if (overwrite)
                continue; /* overwritten: our cursor moved, read it again */
            return SHMOBJ_ECORRUPT;
        }
        SHMOBJ__STEP("topic.take.read");
        if (overwrite) {
            uint64_t e = n;
            if (!atomic_compare_exchange_strong_explicit(&r->next, &e, n + 1,
                                                         memory_order_seq_cst,
                                                         memory_order_acquire))
                continue;
        } else {
            atomic_store_explicit(&r->next, n + 1, memory_order_release);
        }
        SHMOBJ__STEP("topic.take.claimed");
        s->next = n + 1;
        s->taken++;
        /* the message is ours until released: now check and read it. A
         * loan is checked by its header (the topic's stamp, its size), on
         * the lines the reader reads anyway; the heap's own check reads
         * the heap's header, which every allocation writes, and is kept
         * for blocks handed over by reference. */
        void *data = NULL;
        if (kind == TOPIC_KIND_LOAN) {
            /* the slot's length is the segment's: header + len must not
             * wrap round to a short range */
            uint64_t span;
            rc = shmobj__add_ok(SHMOBJ__TOPIC_MSG_HEADER, len, &span)
                     ? shmobj__space_at(t->sp, shmobj__ref_off(ref), span, &data)
                     : SHMOBJ_ECORRUPT;
            const struct shmobj__topic_msghdr *mh = data;
            if (rc == 0 && (((uintptr_t)data & 63u) != 0 ||
                            mh->stamp != shmobj__topic_stamp(t->ident) ||
                            len > mh->size))
                rc = SHMOBJ_ECORRUPT;
            if (rc == 0)
                data = (uint8_t *)data + SHMOBJ__TOPIC_MSG_HEADER;
        } else if (kind == TOPIC_KIND_BLOCK) {
            uint64_t usable = 0;
            rc = t->sp->ops->check(t->sp, ref, &usable);
            if (rc == 0 && len > usable)
                rc = SHMOBJ_ECORRUPT;
            if (rc == 0)
                rc = shmobj__space_at(t->sp, shmobj__ref_off(ref), len, &data);
        } else {
            rc = SHMOBJ_ECORRUPT;
        }
        if (rc != 0) {
            rc = SHMOBJ_ECORRUPT;
            data = NULL;
        }
        msg->data = data;
        msg->len = len;
        msg->ref = ref;
        msg->seq = n;
        msg->missed = missed + s->missed_pending;
        s->missed_pending = 0;
        return rc;
    }
    return SHMOBJ_ECORRUPT;
}

int shmobj_topic_take(shmobj_topic_sub *s, shmobj_topic_msg *msg,
                      int64_t timeout_ns)
{
    if (s == NULL || msg == NULL)
        return SHMOBJ_EINVAL;
    int rc = take_one(s, msg);
    if (rc != SHMOBJ_EEMPTY || timeout_ns == 0)
        return rc;
    shmobj_topic *t = s->t;
    struct shmobj__topic_hdr *h = t->hdr;
    uint64_t start = shmobj__os_now_ns();
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    if (s->spin_ns > 0) {
        uint64_t spin_end = start + (uint64_t)s->spin_ns;
        for (unsigned i = 0;; i++) {
            if (atomic_load_explicit(&h->head, memory_order_acquire) >
                atomic_load_explicit(&s->rec->next, memory_order_relaxed)) {
                rc = take_one(s, msg);
                if (rc != SHMOBJ_EEMPTY)
                    return rc;
            }
            __builtin_ia32_pause();
            if ((i & 63) == 63) {
                uint64_t now = shmobj__os_now_ns();
                if (now >= spin_end || now >= deadline)
                    break;
            }
        }
    }
    for (;;) {
        atomic_fetch_add_explicit(&h->sub_waiters, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&h->sleepy, memory_order_relaxed) == 0)
            atomic_store_explicit(&h->sleepy, 1, memory_order_seq_cst);
        SHMOBJ__STEP("topic.take.sleepy");
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t ev = atomic_load_explicit(&h->pub_event, memory_order_seq_cst);
        rc = take_one(s, msg);
        if (rc == SHMOBJ_EEMPTY) {
            uint64_t now = shmobj__os_now_ns();
            if (now >= deadline)
                rc = SHMOBJ_ETIMEDOUT;
            else if (!t->sp->ops->live->linked(t->sp))
                rc = SHMOBJ_EREPLACED;
            else {
                uint64_t until = now + TAKE_SLICE_NS;
                (void)shmobj__os_futex_wait(&h->pub_event, ev,
                                            until < deadline ? until : deadline);
            }
        }
        atomic_fetch_sub_explicit(&h->sub_waiters, 1, memory_order_relaxed);
        if (rc != SHMOBJ_EEMPTY)
            return rc;
    }
}

int shmobj_topic_try_take(shmobj_topic_sub *s, shmobj_topic_msg *msg)
{
    return shmobj_topic_take(s, msg, 0);
}

int shmobj_topic_take_batch(shmobj_topic_sub *s, shmobj_topic_msg *msgs,
                            unsigned max, unsigned *n, int64_t timeout_ns)
{
    if (s == NULL || msgs == NULL || n == NULL || max == 0)
        return SHMOBJ_EINVAL;
    *n = 0;
    int rc = shmobj_topic_take(s, &msgs[0], timeout_ns);
    if (rc != 0)
        return rc;
    unsigned k = 1;
    while (k < max && take_one(s, &msgs[k]) == 0)
        k++;
    *n = k;
    return 0;
}

int shmobj_topic_release(shmobj_topic_sub *s, const shmobj_topic_msg *msg)
{
    if (s == NULL || msg == NULL)
        return SHMOBJ_EINVAL;
    uint64_t upto = msg->seq + 1;
    if (msg->seq >= s->next)
        return SHMOBJ_EINVAL; /* not taken (yet) by this subscriber */
    if (upto <= s->held)
        return 0; /* released already, with a later one */
    int rc = sub_status(s);
    if (rc != 0)
        return rc;
    struct shmobj__topic_subrec *r = s->rec;
    s->held = upto;
    s->taken = s->next - upto;
    if (s->t->policy == SHMOBJ_TOPIC_OVERWRITE)
        cursor_raise(&r->held, upto);
    else
        atomic_store_explicit(&r->held, upto, memory_order_release);
    SHMOBJ__STEP("topic.release.held");
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->t->hdr->pub_waiters, memory_order_relaxed) != 0)
        shmobj__topic_wake_publishers(s->t);
    return 0;
}

/* ---- the pollable descriptor ------------------------------------------------- */

void shmobj__topic_notify_fire(shmobj_topic *t)
{
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        uint32_t expect = TOPIC_NOTIFY_ARMED;
        if (atomic_load_explicit(&r->notify, memory_order_relaxed) != expect ||
            !atomic_compare_exchange_strong_explicit(&r->notify, &expect,
                                                     TOPIC_NOTIFY_IDLE,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        atomic_fetch_sub_explicit(&t->hdr->armed, 1, memory_order_seq_cst);
        int wfd = -1;
        if (shmobj__os_notify_open(atomic_load(&r->npid), atomic_load(&r->nfd),
                                   atomic_load(&r->nino), &wfd) == 0) {
            shmobj__os_notify_signal(wfd);
            shmobj__os_notify_close(wfd);
        }
    }
}

int shmobj_topic_notify_fd(shmobj_topic_sub *s, int *fd)
{
    if (s == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    int rc = sub_status(s);
    if (rc != 0)
        return rc;
    if (s->nrfd >= 0) {
        *fd = s->nrfd;
        return 0;
    }
    if (!shmobj__os_notify_supported())
        return SHMOBJ_ENOTSUP;
    uint64_t ino;
    rc = shmobj__os_notify_create(&s->nrfd, &s->nwfd, &ino);
    if (rc != 0)
        return rc;
    struct shmobj__topic_subrec *r = s->rec;
    atomic_store_explicit(&r->npid, shmobj__os_pid(), memory_order_relaxed);
    atomic_store_explicit(&r->nfd, s->nrfd, memory_order_relaxed);
    atomic_store_explicit(&r->nino, ino, memory_order_relaxed);
    atomic_store_explicit(&r->notify, TOPIC_NOTIFY_IDLE, memory_order_release);
    *fd = s->nrfd;
    return 0;
}

int shmobj_topic_notify_arm(shmobj_topic_sub *s)
{
    if (s == NULL)
        return SHMOBJ_EINVAL;
    if (s->nrfd < 0)
        return SHMOBJ_EINVAL;
    int rc = sub_status(s);
    if (rc != 0)
        return rc;
    struct shmobj__topic_subrec *r = s->rec;
    struct shmobj__topic_hdr *h = s->t->hdr;
    shmobj__os_notify_drain(s->nrfd);
    uint32_t expect = TOPIC_NOTIFY_IDLE;
    if (atomic_compare_exchange_strong_explicit(&r->notify, &expect,
                                                TOPIC_NOTIFY_ARMED,
                                                memory_order_acq_rel,
                                                memory_order_relaxed))
        atomic_fetch_add_explicit(&h->armed, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->head, memory_order_acquire) >
        atomic_load_explicit(&r->next, memory_order_relaxed)) {
        /* a message is there already: be readable now */
        expect = TOPIC_NOTIFY_ARMED;
        if (atomic_compare_exchange_strong_explicit(&r->notify, &expect,
                                                    TOPIC_NOTIFY_IDLE,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed))
            atomic_fetch_sub_explicit(&h->armed, 1, memory_order_seq_cst);
        shmobj__os_notify_signal(s->nwfd);
    }
    return 0;
}
