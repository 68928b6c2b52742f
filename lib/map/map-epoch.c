/* Epochs, read guards and the reader slots that count them.
 *
 * Invariants kept here:
 *  - A reader counts itself in active[e & 1] of its handle's slot for the
 *    epoch e it saw, and keeps the guard only if the epoch had not moved
 *    once it was counted (seq_cst on both sides), so an epoch advance
 *    that judged that parity empty cannot have missed it.
 *  - The epoch moves from e to e + 1 only when no claimed slot has
 *    active[(e + 1) & 1] set: no reader of epoch e - 1 remains. A slot is
 *    claimed (its bit set) before its first guard, so a reader the bitmap
 *    load missed entered at epoch e or later.
 *  - A slot is claimed by its bit (CAS), then token, then owner; given back
 *    in the reverse order. Only a slot whose owner is judged dead by its
 *    token is reaped, with one CAS of the whole owner word, so of two
 *    reapers, or a reaper and a new owner, one wins.
 *  - The owner's identity is the attachment token of the handle's segment
 *    (owner_self, owner_alive): the one place that knows it. */
#include <stdatomic.h>

#include "map-internal.h"
#include "step.h"

/* Enter: count ourselves in the parity of the current epoch, then confirm
 * the epoch did not move meanwhile (else a writer may have judged our
 * parity empty before we counted ourselves). seq_cst pairs with the
 * writer's loads in shmobj__map_epoch_advance(). *g gets epoch + 1 (never
 * 0); SHMOBJ_ESTALE (no guard) when the map is gone. */
int shmobj__map_guard_enter(shmobj_map *m, uint64_t *g)
{
    if (map_stale(m) != 0)
        return SHMOBJ_ESTALE;
    /* a read-only handle has no reader slot: it cannot pin what it reads */
    if (m->reader == NULL)
        return SHMOBJ_ERDONLY;
    _Atomic uint64_t *ep = &m->ctl->epoch;
    for (;;) {
        uint64_t e = atomic_load(ep);
        atomic_fetch_add(&m->reader->active[e & 1], 1);
        SHMOBJ__STEP("map.guard.counted");
        if (atomic_load(ep) == e) {
            *g = e + 1;
            return 0;
        }
        atomic_fetch_sub(&m->reader->active[e & 1], 1);
    }
}

/* Who owns a reader slot. The one place that knows what an owner's
 * identity is: the attachment token of the handle's segment (seg-procs.c),
 * alive while that handle is attached, in any PID namespace. The token
 * takes the low 32 bits of the owner word, the slot's claim count the
 * high 32, and the `token` field holds it again (non-zero while the slot
 * is claimed and complete). */
static int owner_self(struct shmobj__space *sp, uint64_t *ident)
{
    uint32_t t = sp->ops->live->token(sp);
    if (t == 0)
        return SHMOBJ_EFULL; /* the segment's attachment table is full */
    *ident = t;
    return 0;
}

static bool owner_alive(struct shmobj__space *sp, uint64_t token)
{
    return shmobj__space_token_alive(sp, token);
}

/* Give slot i back: its owner word was taken to 0 by the caller. */
void shmobj__map_reader_release(struct shmobj__map_ctl *c, unsigned i)
{
    struct shmobj__map_reader *r = &c->readers_[i];
    atomic_store(&r->active[0], 0);
    atomic_store(&r->active[1], 0);
    atomic_store(&r->token, 0);
    atomic_fetch_and(&c->claimed[i / 64], ~(UINT64_C(1) << (i % 64)));
}

/* Reset the slot of a reader process that died (holding guards or not).
 * Of two reapers, or a reaper and a new owner, the CAS on the owner word
 * lets one through. */
static void reader_reap(shmobj_map *m, unsigned i)
{
    struct shmobj__map_ctl *c = m->ctl;
    struct shmobj__map_reader *r = &c->readers_[i];
    uint64_t owner = atomic_load(&r->owner);
    if (owner == 0)
        return; /* free, being claimed, or being reaped */
    uint64_t token = atomic_load(&r->token);
    if (token == 0 || owner_alive(m->sp, token))
        return;
    if (atomic_compare_exchange_strong(&r->owner, &owner, 0))
        shmobj__map_reader_release(c, i);
}

/* Move the epoch from e to e + 1 when no reader of epoch e - 1 remains.
 * Only claimed slots are looked at (a slot is claimed before its first
 * guard, so a reader the bitmap load missed entered at epoch e or later). */
void shmobj__map_epoch_advance(shmobj_map *m, int check_liveness)
{
    struct shmobj__map_ctl *c = m->ctl;
    uint64_t e = atomic_load(&c->epoch);
    for (unsigned w = 0; w < SHMOBJ__MAP_CLAIM_WORDS; w++) {
        for (uint64_t bits = atomic_load(&c->claimed[w]); bits != 0; bits &= bits - 1) {
            unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);
            struct shmobj__map_reader *r = &c->readers_[i];
            if (atomic_load(&r->active[(e + 1) & 1]) != 0) {
                if (!check_liveness)
                    return;
                reader_reap(m, i);
                if (atomic_load(&r->active[(e + 1) & 1]) != 0)
                    return;
            }
        }
    }
    SHMOBJ__STEP("map.epoch.scanned");
    atomic_compare_exchange_strong(&c->epoch, &e, e + 1);
}

/* Claim a guard slot for this handle: set a clear bit of the bitmap, then
 * fill the slot. When every bit is set, reap the slots of dead owners
 * and look once more. */
int shmobj__map_reader_claim(shmobj_map *m)
{
    struct shmobj__map_ctl *c = m->ctl;
    uint64_t ident;
    int rc = owner_self(m->sp, &ident);
    if (rc != 0)
        return rc;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned w = 0; w < SHMOBJ__MAP_CLAIM_WORDS; w++) {
            uint64_t bits = atomic_load(&c->claimed[w]);
            if (pass == 1) {
                for (uint64_t b = bits; b != 0; b &= b - 1)
                    reader_reap(m, w * 64 + (unsigned)__builtin_ctzll(b));
                bits = atomic_load(&c->claimed[w]);
            }
            while (bits != UINT64_MAX) {
                unsigned j = (unsigned)__builtin_ctzll(~bits);
                if (!atomic_compare_exchange_strong(&c->claimed[w], &bits,
                                                    bits | (UINT64_C(1) << j)))
                    continue; /* bits reloaded */
                struct shmobj__map_reader *r = &c->readers_[w * 64 + j];
                uint64_t n = atomic_fetch_add(&r->claims, 1) + 1;
                atomic_store(&r->active[0], 0);
                atomic_store(&r->active[1], 0);
                atomic_store(&r->token, ident);
                atomic_store(&r->owner, (n << 32) | (ident & UINT32_MAX));
                m->reader = r;
                return 0;
            }
        }
    }
    return SHMOBJ_EFULL;
}
