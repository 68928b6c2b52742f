/* Attachment slots: which handles are attached to a segment, and whether
 * the handle a token names is still there.
 *
 * One mechanism serves every "record owned by a live handle" of the
 * library (lock words, queue claims and sleepers, notify registrations,
 * map reader slots): the record holds a token, and the token's slot is
 * alive while an OFD lock on its byte of the backing object is held
 * (os-live.c). The kernel drops that lock when the handle's open file
 * description goes, so a process killed by any signal, in any PID
 * namespace, stops looking alive at once, and a pid that is reused means
 * nothing. Invariants:
 *
 *   - a slot is occupied by whoever holds its byte: claiming is taking the
 *     lock (no segment lock needed), and only the occupant writes the
 *     entry;
 *   - each claim advances the slot's generation, so the token of a dead
 *     occupant never matches the entry again (until 2^21 claims of one
 *     slot wrap it);
 *   - "alive" is the answer whenever liveness cannot be seen (the probe
 *     fails, or this handle shares its description with others and so
 *     cannot see their locks): nothing is reclaimed on a guess. */
#include <errno.h>
#include <stdlib.h>

#include "segment.h"

#define ATTACHING UINT32_C(0x80000000)

static struct shmobj__seg_proc *table(shmobj_segment *seg)
{
    return (struct shmobj__seg_proc *)(seg->space.base + SHMOBJ__SEG_PROCS_OFF);
}

static uint32_t next_token(uint32_t old, uint32_t slot)
{
    uint32_t gen = ((old >> SHMOBJ__SEG_SLOT_BITS) + 1) & SHMOBJ__SEG_GEN_MAX;
    if (gen == 0)
        gen = 1;
    return slot | gen << SHMOBJ__SEG_SLOT_BITS;
}

/* Take a free slot through description `fd`. A handle whose description
 * is shared (`shared`) cannot tell its sharers' locks from its own, so it
 * takes only slots that were given back cleanly (pid 0), never those of
 * handles that died. */
static int claim(shmobj_segment *seg, int fd, bool shared)
{
    struct shmobj__seg_proc *t = table(seg);
    uint32_t me = shmobj__os_pid();
    for (int pass = 0; pass < (shared ? 1 : 2); pass++) {
        for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS; i++) {
            uint32_t zero = 0;
            /* Pass 0 reserves a cleanly freed entry by its pid first, so
             * two sharers of one description cannot both take it. */
            if (pass == 0 && !atomic_compare_exchange_strong_explicit(
                                 &t[i].pid, &zero, me, memory_order_relaxed,
                                 memory_order_relaxed))
                continue;
            int rc = shmobj__os_live_hold(fd, SHMOBJ__SEG_LIVE_BASE + i);
            if (rc != 0) {
                /* Give the reservation back, unless the slot's holder (who
                 * took it meanwhile) has written its own pid there. */
                uint32_t mine = me;
                if (pass == 0)
                    atomic_compare_exchange_strong_explicit(
                        &t[i].pid, &mine, 0, memory_order_relaxed,
                        memory_order_relaxed);
                if (rc == SHMOBJ_EBUSY)
                    continue;
                return rc;
            }
            uint32_t tok = next_token(
                atomic_load_explicit(&t[i].token, memory_order_relaxed), i);
            atomic_store_explicit(&t[i].pid, me, memory_order_relaxed);
            atomic_store_explicit(&t[i].attached_ns, shmobj__os_realtime_ns(),
                                  memory_order_relaxed);
            /* Release: a checker that acquires the new token sees the
             * entry complete. */
            atomic_store_explicit(&t[i].token, tok, memory_order_release);
            seg->proc_slot = i;
            atomic_store_explicit(&seg->token, tok, memory_order_relaxed);
            return 0;
        }
    }
    return SHMOBJ_EFULL;
}

int shmobj__seg_procs_attach(shmobj_segment *seg)
{
    int rc = claim(seg, atomic_load(&seg->live_fd), seg->live_shared);
    if (rc != 0)
        return rc;
    atomic_store_explicit(&seg->attached_gen, shmobj__os_fork_generation(),
                          memory_order_release);
    atomic_fetch_add_explicit(&seg->hdr->attach_seq, 1, memory_order_release);
    shmobj__os_futex_wake(&seg->hdr->attach_seq, INT32_MAX);
    return 0;
}

void shmobj__seg_procs_detach(shmobj_segment *seg)
{
    if (seg->proc_slot == UINT32_MAX ||
        atomic_load_explicit(&seg->attached_gen, memory_order_acquire) !=
            shmobj__os_fork_generation())
        return; /* never attached, or inherited: the slot is the parent's */
    struct shmobj__seg_proc *e = &table(seg)[seg->proc_slot];
    if (atomic_load_explicit(&e->token, memory_order_acquire) ==
        atomic_load(&seg->token))
        atomic_store_explicit(&e->pid, 0, memory_order_relaxed);
    shmobj__os_live_drop(atomic_load(&seg->live_fd),
                         SHMOBJ__SEG_LIVE_BASE + seg->proc_slot);
    seg->proc_slot = UINT32_MAX;
    atomic_fetch_add_explicit(&seg->hdr->attach_seq, 1, memory_order_release);
    shmobj__os_futex_wake(&seg->hdr->attach_seq, INT32_MAX);
}

/* A forked child uses a handle it inherited: give it its own description
 * and slot, and let go of the parent's description so that the parent's
 * death is seen. One thread does it; others wait for it. */
static int reattach(shmobj_segment *seg, uint32_t gen, uint32_t *token)
{
    uint32_t a;
    for (;;) {
        a = atomic_load_explicit(&seg->attached_gen, memory_order_acquire);
        if (a == gen) {
            *token = atomic_load_explicit(&seg->token, memory_order_relaxed);
            return 0;
        }
        if (a == (gen | ATTACHING)) {
            shmobj__os_yield();
            continue;
        }
        /* An ATTACHING of an older generation was inherited half-done
         * from a thread that does not exist in this process: take over. */
        if (atomic_compare_exchange_weak_explicit(
                &seg->attached_gen, &a, gen | ATTACHING,
                memory_order_acquire, memory_order_relaxed))
            break;
    }
    int old = atomic_load(&seg->live_fd);
    int fd = shmobj__seg_reopen(seg);
    bool shared = fd < 0;
    int rc = claim(seg, shared ? old : fd, shared);
    if (rc == 0) {
        seg->live_shared = shared;
        seg->creator = false;
        if (!shared) {
            atomic_store(&seg->live_fd, fd);
            shmobj__os_fd_close(old);
        }
        *token = atomic_load_explicit(&seg->token, memory_order_relaxed);
        atomic_store_explicit(&seg->attached_gen, gen, memory_order_release);
        return 0;
    }
    if (!shared)
        shmobj__os_fd_close(fd);
    atomic_store_explicit(&seg->attached_gen, a & ~ATTACHING,
                          memory_order_release);
    return rc;
}

int shmobj__seg_procs_self(shmobj_segment *seg, uint32_t *token)
{
    /* A read-only handle has no slot and gets none: whatever asked for a
     * token meant to write a record or take a lock. */
    if (seg->space.readonly)
        return SHMOBJ_ERDONLY;
    uint32_t gen = shmobj__os_forks_seen(); /* registered by the attach */
    if (atomic_load_explicit(&seg->attached_gen, memory_order_acquire) == gen) {
        *token = atomic_load_explicit(&seg->token, memory_order_relaxed);
        return 0;
    }
    return reattach(seg, gen, token);
}

int shmobj__seg_procs_state(shmobj_segment *seg, uint32_t token)
{
    /* Probe through this process's own description: a forked child that
     * has not attached yet would otherwise look through its parent's. */
    uint32_t self = 0;
    /* A read-only handle holds no lock, so its description sees every
     * other's: it judges with no token of its own. */
    if (!seg->space.readonly && shmobj__seg_procs_self(seg, &self) != 0)
        return SHMOBJ__OS_OWNER_ALIVE;
    uint32_t slot = token & (SHMOBJ__SEG_PROCS - 1);
    if ((token >> SHMOBJ__SEG_SLOT_BITS) == 0 || (token >> 31) != 0)
        return SHMOBJ__OS_OWNER_BAD;
    if (token == self)
        return SHMOBJ__OS_OWNER_ALIVE; /* this handle */
    struct shmobj__seg_proc *e = &table(seg)[slot];
    if (atomic_load_explicit(&e->token, memory_order_acquire) != token)
        return SHMOBJ__OS_OWNER_DEAD; /* the slot has had another occupant */
    if (seg->live_shared)
        return SHMOBJ__OS_OWNER_ALIVE;
    return shmobj__os_live_probe(atomic_load(&seg->live_fd),
                                 SHMOBJ__SEG_LIVE_BASE + slot)
               ? SHMOBJ__OS_OWNER_ALIVE
               : SHMOBJ__OS_OWNER_DEAD;
}

unsigned shmobj__seg_procs_count(shmobj_segment *seg, uint32_t except)
{
    struct shmobj__seg_proc *t = table(seg);
    unsigned n = 0;
    for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS; i++) {
        /* pid 0: given back cleanly, or never used; no probe needed */
        if (i == except || atomic_load_explicit(&t[i].pid, memory_order_relaxed) == 0)
            continue;
        uint32_t tok = atomic_load_explicit(&t[i].token, memory_order_acquire);
        if (tok != 0 &&
            shmobj__seg_procs_state(seg, tok) == SHMOBJ__OS_OWNER_ALIVE)
            n++;
    }
    return n;
}

int shmobj__seg_reopen(shmobj_segment *seg)
{
    int fd;
    if (shmobj__os_fd_reopen(seg->fd, seg->backend == SHMOBJ_BACKEND_MEMFD
                                          ? NULL
                                          : seg->name,
                             seg->backend, &fd) != 0)
        return -1;
    return fd;
}

/* For tools: the slots whose handle is alive now. Nothing is written; a
 * slot is listed when its pid is set (a clean detach clears it) and its
 * token's byte is locked, the same test as shmobj__seg_procs_count(). */
/* The creator's handle is open: its OFD lock on SHMOBJ__SEG_LIVE_CREATOR
 * is held (by this handle, or seen through this handle's description). */
static bool creator_open(shmobj_segment *seg)
{
    return seg->creator ||
           (!seg->live_shared &&
            shmobj__os_live_probe(atomic_load(&seg->live_fd),
                                  SHMOBJ__SEG_LIVE_CREATOR) != 0);
}

int shmobj_segment_procs_get(shmobj_segment *seg, shmobj_segment_proc *procs,
                             size_t cap, size_t *count)
{
    if (seg == NULL || count == NULL || (procs == NULL && cap > 0))
        return SHMOBJ_EINVAL;
    struct shmobj__seg_proc *t = table(seg);
    uint32_t self = 0;
    (void)shmobj__seg_procs_self(seg, &self);
    size_t n = 0;
    for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS; i++) {
        uint32_t pid = atomic_load_explicit(&t[i].pid, memory_order_relaxed);
        if (pid == 0)
            continue;
        uint32_t tok = atomic_load_explicit(&t[i].token, memory_order_acquire);
        if (tok == 0 ||
            shmobj__seg_procs_state(seg, tok) != SHMOBJ__OS_OWNER_ALIVE)
            continue;
        if (n < cap) {
            shmobj_segment_proc *p = &procs[n];
            p->pid = pid;
            p->token = tok;
            p->attached_ns =
                atomic_load_explicit(&t[i].attached_ns, memory_order_relaxed);
            p->slot = i;
            p->flags = 0;
            if (tok == self && self != 0) {
                p->flags |= SHMOBJ_SEGMENT_PROC_SELF;
                if (seg->creator)
                    p->flags |= SHMOBJ_SEGMENT_PROC_CREATOR;
            } else if (pid == seg->hdr->creator_pid && creator_open(seg)) {
                p->flags |= SHMOBJ_SEGMENT_PROC_CREATOR;
            }
        }
        n++;
    }
    *count = n;
    return n > cap ? SHMOBJ_ENOBUFS : 0;
}
