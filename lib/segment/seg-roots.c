/* Named roots: a fixed directory of (name, reference) pairs in the segment
 * so that unrelated processes find shared objects by name. Small (128
 * entries) and scanned linearly under the segment lock: lookups are rare
 * (once per object and process), so simplicity wins over speed.
 *
 * Every change of the directory (add, set, delete) bumps the header's
 * root_seq under the lock and then wakes every sleeper on it, so a process
 * that starts before the creator of the root it needs sleeps in
 * shmobj_segment_root_wait() until the directory changes, never polling.
 * The waiter reads root_seq before its look-up: a change after the look-up
 * leaves the word different from what the waiter passes to the futex, and
 * the wait returns at once. Bytes of the directory are never trusted
 * beyond its bounds: a name is compared within its field, and a damaged
 * word costs at most a spurious wake-up, each bounded by the deadline. */
#include <string.h>

#include "extstruct.h"
#include "segment.h"

/* Tell the sleepers of shmobj_segment_root_wait() the directory changed:
 * the bump under the lock, the wake after the unlock (a woken waiter then
 * finds the lock free). The wake is unconditional: it costs one system
 * call per change (about 200 ns; an add and a delete together went from
 * 90 to 490 ns), and a change of roots is rare next to what it publishes,
 * while a "someone sleeps" mark a damaged or foreign write cleared would
 * lose a wake-up and leave a waiter without a deadline asleep for ever. */
static void roots_changed(shmobj_segment *seg)
{
    atomic_fetch_add_explicit(&seg->hdr->root_seq, 1, memory_order_release);
}

static void roots_wake(shmobj_segment *seg)
{
    shmobj__os_futex_wake(&seg->hdr->root_seq, INT32_MAX);
}

static struct shmobj__seg_root *roots(shmobj_segment *seg)
{
    return (struct shmobj__seg_root *)(seg->space.base + SHMOBJ__SEG_ROOTS_OFF);
}

static bool root_name_ok(const char *name)
{
    if (name == NULL)
        return false;
    size_t n = strnlen(name, SHMOBJ__SEG_ROOT_NAME);
    return n > 0 && n < SHMOBJ__SEG_ROOT_NAME;
}

/* The entry holding name, or NULL. The stored name may be unterminated in
 * a damaged segment; comparing at most the field's width stays inside it. */
static struct shmobj__seg_root *find(shmobj_segment *seg, const char *name)
{
    struct shmobj__seg_root *r = roots(seg);
    for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS; i++)
        if (r[i].ref != 0 && strncmp(r[i].name, name, SHMOBJ__SEG_ROOT_NAME) == 0)
            return &r[i];
    return NULL;
}

/* Publish ref under name; with `replace` false an existing name is left
 * alone and reported, so two creators racing for one name cannot both win.
 * A reference to a freed block (its generation no longer the block's) is
 * refused; the check runs under the lock every free takes, so the block
 * cannot be freed between the check and the publish. */
static int root_put(shmobj_segment *seg, const char *name, shmobj_ref ref,
                    bool replace)
{
    if (seg == NULL || !root_name_ok(name) || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    if (seg->space.readonly)
        return SHMOBJ_ERDONLY;
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    if (seg->space.ops->check(&seg->space, ref, NULL) == SHMOBJ_ESTALE) {
        shmobj__segment_unlock(seg);
        return SHMOBJ_ESTALE;
    }
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL && !replace) {
        shmobj__segment_unlock(seg);
        return SHMOBJ_EEXIST;
    }
    if (e == NULL) {
        struct shmobj__seg_root *r = roots(seg);
        for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS && e == NULL; i++)
            if (r[i].ref == 0)
                e = &r[i];
        if (e != NULL) {
            /* ref stays 0 until the name is complete: a writer killed here
             * leaves a free entry, not a half-named root. */
            memset(e->name, 0, sizeof e->name);
            memcpy(e->name, name, strlen(name));
        }
    }
    if (e != NULL) {
        __atomic_store_n(&e->ref, ref, __ATOMIC_RELEASE);
        roots_changed(seg);
    }
    shmobj__segment_unlock(seg);
    if (e == NULL)
        return SHMOBJ_EFULL;
    roots_wake(seg);
    return 0;
}

int shmobj_segment_root_set(shmobj_segment *seg, const char *name,
                            shmobj_ref ref)
{
    return root_put(seg, name, ref, true);
}

int shmobj_segment_root_add(shmobj_segment *seg, const char *name,
                            shmobj_ref ref)
{
    return root_put(seg, name, ref, false);
}

/* A read-only handle may not take the lock, so it reads the directory
 * as a sequence-counter reader: root_seq before and after, the result
 * kept only when no change was published in between. Every change bumps
 * root_seq after it is made, under the lock; an entry is renamed only
 * while its ref is 0 and after a delete's bump, so a name torn by a
 * change is always followed by a bump before the second look. A writer
 * stopped inside its change leaves root_seq as it was and the entry it
 * writes unpublished (ref 0), so the reader never waits on it. Tries
 * that keep meeting changes end in SHMOBJ_EBUSY. */
#define RO_TRIES 1000

static int ro_lookup(shmobj_segment *seg, const char *name, shmobj_ref *ref)
{
    struct shmobj__seg_root *r = roots(seg);
    for (unsigned t = 0; t < RO_TRIES; t++) {
        uint32_t q =
            atomic_load_explicit(&seg->hdr->root_seq, memory_order_acquire);
        shmobj_ref found = 0;
        for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS && found == 0; i++) {
            shmobj_ref v = __atomic_load_n(&r[i].ref, __ATOMIC_ACQUIRE);
            if (v != 0 && strncmp(r[i].name, name, SHMOBJ__SEG_ROOT_NAME) == 0)
                found = v;
        }
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&seg->hdr->root_seq, memory_order_relaxed) == q) {
            if (found == 0)
                return SHMOBJ_ENOTFOUND;
            *ref = found;
            return 0;
        }
        shmobj__os_yield();
    }
    return SHMOBJ_EBUSY;
}

/* Look name up under the lock, taken until `deadline` (0: the default
 * bound). */
static int root_lookup(shmobj_segment *seg, const char *name, uint64_t deadline,
                       shmobj_ref *ref)
{
    if (seg->space.readonly)
        return ro_lookup(seg, name, ref);
    int rc = shmobj__segment_lock_until(seg, deadline);
    if (rc != 0)
        return rc;
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL)
        *ref = e->ref;
    shmobj__segment_unlock(seg);
    return e != NULL ? 0 : SHMOBJ_ENOTFOUND;
}

int shmobj_segment_root_get(shmobj_segment *seg, const char *name,
                            shmobj_ref *ref)
{
    if (seg == NULL || !root_name_ok(name) || ref == NULL)
        return SHMOBJ_EINVAL;
    return root_lookup(seg, name, 0, ref);
}

int shmobj_segment_root_wait(shmobj_segment *seg, const char *name,
                             int64_t timeout_ns, shmobj_ref *ref)
{
    if (seg == NULL || !root_name_ok(name) || ref == NULL)
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    /* Without a deadline the lock keeps its default bound (SHMOBJ_EBUSY):
     * a stuck holder is an error to report, not something to wait for. */
    uint64_t lock_deadline = deadline == UINT64_MAX ? 0 : deadline;
    for (;;) {
        uint32_t seq =
            atomic_load_explicit(&seg->hdr->root_seq, memory_order_acquire);
        int rc = root_lookup(seg, name, lock_deadline, ref);
        if (rc != SHMOBJ_ENOTFOUND)
            return rc;
        if (shmobj__os_now_ns() >= deadline)
            return SHMOBJ_ETIMEDOUT;
        /* 0 when woken or when the word had already moved: look again.
         * Past the deadline, one last look-up above settles a change that
         * raced with the timeout, then the check before reports it. */
        rc = shmobj__os_futex_wait(&seg->hdr->root_seq, seq, deadline);
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT)
            return rc;
    }
}

int shmobj_segment_root_del(shmobj_segment *seg, const char *name)
{
    if (seg == NULL || !root_name_ok(name))
        return SHMOBJ_EINVAL;
    if (seg->space.readonly)
        return SHMOBJ_ERDONLY;
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL) {
        __atomic_store_n(&e->ref, 0, __ATOMIC_RELEASE);
        roots_changed(seg);
    }
    shmobj__segment_unlock(seg);
    if (e == NULL)
        return SHMOBJ_ENOTFOUND;
    roots_wake(seg);
    return 0;
}

/* ---- walking the directory (tools) ---- */

/* The first bytes of each kind's block, as doc/format-queue.md,
 * format-map.md, format-object.md, format-topic.md and format-service.md
 * give them. The segment layer cannot see those layers' headers (the
 * direction of dependence), so the values are repeated here;
 * tests/test-introspect.c pins each against its home by creating one root
 * of every kind. */
#define KIND_QUEUE_MAGIC UINT32_C(0x474e5251)        /* "QRNG", u32 at 0 */
#define KIND_MAP_MAGIC UINT64_C(0x31304d4a424f4d53)  /* "SMOBJM01", u64 at 0 */
#define KIND_OBJECT_MAGIC UINT32_C(0x4a424f53)       /* "SOBJ", u32 at 0 */
#define KIND_TOPIC_MAGIC UINT32_C(0x43504f54)        /* "TOPC", u32 at 0 */
#define KIND_SERVICE_MAGIC UINT64_C(0x3130435653484d53) /* "SHMSVC01", u64 at 0 */

/* What ref names, judged after the lock is given back: the check is
 * lock-free and the first word is only compared, so a block freed
 * meanwhile costs at most a wrong kind for that entry. */
static void root_kind(shmobj_segment *seg, shmobj_ref ref,
                      shmobj_root_info *info)
{
    uint64_t usable = 0;
    int rc = seg->space.ops->check(&seg->space, ref, &usable);
    info->bytes = rc == 0 ? usable : 0;
    if (rc == SHMOBJ_ESTALE) {
        info->kind = SHMOBJ_ROOT_STALE;
        return;
    }
    void *p;
    if (rc != 0 ||
        shmobj__space_at(&seg->space, shmobj__ref_off(ref), 8, &p) != 0) {
        info->kind = SHMOBJ_ROOT_BAD;
        return;
    }
    info->kind = SHMOBJ_ROOT_RAW;
    if (usable < 8)
        return;
    uint64_t w = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
    if (w == KIND_MAP_MAGIC)
        info->kind = SHMOBJ_ROOT_MAP;
    else if ((uint32_t)w == KIND_QUEUE_MAGIC)
        info->kind = SHMOBJ_ROOT_QUEUE;
    else if ((uint32_t)w == KIND_OBJECT_MAGIC)
        info->kind = SHMOBJ_ROOT_OBJECT;
    else if ((uint32_t)w == KIND_TOPIC_MAGIC)
        info->kind = SHMOBJ_ROOT_TOPIC;
    else if (w == KIND_SERVICE_MAGIC)
        info->kind = SHMOBJ_ROOT_SERVICE;
}

int shmobj_segment_root_next(shmobj_segment *seg, uint32_t *cursor,
                             shmobj_root_info *out)
{
    if (seg == NULL || cursor == NULL || out == NULL ||
        !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    shmobj_root_info ours = {.struct_size = sizeof ours}, *info = &ours;
    bool ro = seg->space.readonly;
    struct shmobj__seg_root *r = roots(seg);
    uint32_t i;
    shmobj_ref ref;
    size_t n;
    /* read-only: one entry read as ro_lookup() reads the directory */
    for (unsigned t = 0;; t++) {
        if (ro && t == RO_TRIES)
            return SHMOBJ_EBUSY;
        uint32_t q = 0;
        if (ro)
            q = atomic_load_explicit(&seg->hdr->root_seq, memory_order_acquire);
        int rc = ro ? 0 : shmobj__segment_lock(seg);
        if (rc != 0)
            return rc;
        i = *cursor;
        while (i < SHMOBJ__SEG_ROOTS &&
               __atomic_load_n(&r[i].ref, __ATOMIC_ACQUIRE) == 0)
            i++;
        ref = 0;
        n = 0;
        if (i < SHMOBJ__SEG_ROOTS) {
            ref = __atomic_load_n(&r[i].ref, __ATOMIC_ACQUIRE);
            n = strnlen(r[i].name, SHMOBJ__SEG_ROOT_NAME);
            if (n < SHMOBJ__SEG_ROOT_NAME) {
                memset(info->name, 0, sizeof info->name);
                memcpy(info->name, r[i].name, n);
            }
        }
        if (!ro) {
            shmobj__segment_unlock(seg);
            break;
        }
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&seg->hdr->root_seq, memory_order_relaxed) == q &&
            (i >= SHMOBJ__SEG_ROOTS || ref != 0))
            break;
        shmobj__os_yield();
    }
    if (i >= SHMOBJ__SEG_ROOTS) {
        *cursor = SHMOBJ__SEG_ROOTS;
        return SHMOBJ_ENOTFOUND;
    }
    *cursor = i + 1;
    if (n == 0 || n >= SHMOBJ__SEG_ROOT_NAME)
        return SHMOBJ_ECORRUPT;
    info->ref = ref;
    root_kind(seg, ref, info);
    shmobj__ext_out(out, info, sizeof *info);
    return 0;
}
