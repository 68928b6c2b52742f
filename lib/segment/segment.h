/* The segment handle and what the layers above (queue, map) use of it:
 * the shared space, the segment lock, the attachment token. */
#ifndef SHMOBJ_SEGMENT_INTERNAL_H
#define SHMOBJ_SEGMENT_INTERNAL_H

#include <stdbool.h>

#include "os.h"
#include "seg-layout.h"
#include "shmobj/segment.h"
#include "space.h"

/* This handle's allocation cache in this process (seg-cache.h): blocks it
 * freed, kept used in the heap with CACHED set (arena-internal.h), that
 * its next allocations of their sizes take back without the segment
 * lock. Process memory; guarded by `busy`, a try-lock (a thread that
 * finds it taken uses the locked heap instead, so nobody waits on it). */
#define SHMOBJ__SEG_CACHE_CLASSES 64 /* size classes, one bit each in bitmap */
#define SHMOBJ__SEG_CACHE_DEPTH 32   /* blocks per class */
struct shmobj__seg_cache {
    _Atomic uint32_t busy;   /* 1 while a thread uses the cache */
    /* shmobj__os_forks_seen() and the handle's token of the blocks held:
     * a forked child finds them different and forgets the blocks, which
     * stay its parent's */
    uint32_t forks;
    uint32_t token;
    uint64_t bytes;          /* sum of the class floors of the blocks */
    /* bit c: count[c] != 0. Written with the try-lock held; read also
     * without it (relaxed), by an allocation that finds its classes empty
     * and so takes neither the try-lock nor the cache */
    _Atomic uint64_t bitmap;
    uint64_t reclaim_ns;     /* when this handle last walked the heap for
                                dead processes' cached blocks */
    uint8_t count[SHMOBJ__SEG_CACHE_CLASSES];
    /* header offset | generation << 48 of each block, a stack per class */
    uint64_t slot[SHMOBJ__SEG_CACHE_CLASSES][SHMOBJ__SEG_CACHE_DEPTH];
};

struct shmobj_segment {
    /* First member: a shmobj_segment * is a struct shmobj__space * (see
     * space.h); the layers above reach the segment only through it. */
    struct shmobj__space space;
    struct shmobj__seg_header *hdr; /* == space.base */
    uint64_t max_size;              /* bytes of address space mapped */
    /* Granule of the object's sizes and mappings: the hugetlbfs page, or
     * the system page (os fd_page_size). */
    uint64_t page;
    /* What shmobj_segment_info reports: `page`, or the transparent huge
     * page size when the mapping was advised for them and allowed. */
    uint64_t page_size;
    /* Transparent huge pages asked for: growth reserves through the
     * mapping (os fd_grow_mapped) so the new pages can be huge. */
    bool thp;
    int fd;                         /* backing object, owned */
    unsigned backend;
    char *name;                     /* copy of the name; NULL for memfd */
    /* The handle's own open file description of the object, on which it
     * holds its slot's OFD lock (and the creator's). Separate from fd so
     * that a forked child can drop it without touching the mapping's. */
    _Atomic int live_fd;
    uint32_t proc_slot;             /* this handle's process table entry */
    _Atomic uint32_t token;         /* its token there (seg-layout.h) */
    /* live_fd is not a description of its own (none could be opened):
     * others' locks through it look like ours, so nobody is judged dead
     * through it (seg-procs.c). */
    bool live_shared;
    bool creator;                   /* holds SHMOBJ__SEG_LIVE_CREATOR */
    /* shmobj__os_fork_generation() the token belongs to; while a forked
     * child re-attaches, ATTACHING is or-ed in (seg-procs.c). */
    _Atomic uint32_t attached_gen;
    /* Serialises this process's growth of its view (extend). */
    shmobj__os_pmutex view_lock;
    /* Lock owners lately judged alive (seg-lock.c): entry token % 64 holds
     * token << 32 | the millisecond (mod 2^32) until which the verdict
     * stands, so that the waits on a busy lock make one liveness probe (a
     * system call) per owner per few milliseconds, not one per wait.
     * Relaxed: a lost or stale entry costs one probe more. */
    _Atomic uint64_t owners_seen[64];
    /* The heap page (offset / page) this process last read ahead of its
     * allocations (seg-heap.c, touch_ahead): a hint, relaxed; a stale
     * value (a fork, another thread) costs one read more or one fewer. */
    _Atomic uint64_t ahead_page;
    struct shmobj__seg_cache cache;
};
_Static_assert(offsetof(struct shmobj_segment, space) == 0,
               "the layers above convert a segment handle to its space "
               "(shmobj__space_of_seg in space.h)");


/* Detach and free the handle once the last hold on its space is released
 * (the space's drop). */
void shmobj__segment_drop(struct shmobj__space *sp);

/* The space of a handle, and back. */
static inline struct shmobj__space *shmobj__segment_space(shmobj_segment *s)
{
    return &s->space;
}

/* Take the segment lock, waiting at most SHMOBJ__OS_LOCK_DEFAULT_NS (then
 * SHMOBJ_EBUSY) or until `deadline` (then SHMOBJ_ETIMEDOUT); when its
 * previous owner died, repair what it guards (arena free lists, growth)
 * before returning 0. SHMOBJ_ECORRUPT when the lock word is damaged. */
int shmobj__segment_lock(shmobj_segment *seg);
int shmobj__segment_lock_until(shmobj_segment *seg, uint64_t deadline);
void shmobj__segment_unlock(shmobj_segment *seg);

/* Any lock word of this segment (seg-lock.c): as shmobj__os_lock_acquire
 * with this handle's token and the process table as liveness oracle; a
 * deadline of 0 means the default bound (SHMOBJ_EBUSY past it). */
int shmobj__seg_lock_word(shmobj_segment *seg, shmobj__os_lock *l,
                          uint64_t deadline);
void shmobj__seg_unlock_word(shmobj_segment *seg, shmobj__os_lock *l);
/* Release a lock whose repair failed so that the next locker is handed
 * SHMOBJ_EOWNERDEAD and tries again. */
void shmobj__seg_unlock_broken(shmobj_segment *seg, shmobj__os_lock *l);
extern const struct shmobj__space_live_ops shmobj__segment_live_ops;

/* Tests only: called, when set, at each step of shmobj_segment_create()
 * with the step's number (SHMOBJ__SEG_STEP_*), so a test can kill the
 * creator exactly there. Never set by the library. */
enum {
    SHMOBJ__SEG_STEP_CREATED = 1,  /* the name exists, nothing else */
    SHMOBJ__SEG_STEP_LOCKED = 2,   /* the creator's OFD lock is held */
    SHMOBJ__SEG_STEP_SIZED = 3,    /* sized and reserved, header all zero */
    SHMOBJ__SEG_STEP_MAGIC = 4,    /* magic and format version written */
    SHMOBJ__SEG_STEP_HEAP = 5,     /* header and heap written, not sealed */
    SHMOBJ__SEG_STEP_ATTACHED = 6, /* sealed and attached, not READY */
    SHMOBJ__SEG_STEP_READY = 7,    /* READY published */
};
extern void (*shmobj__seg_create_hook)(int step);

/* Tests only: called, when set, by an open and a peek right after they
 * read the object's size, so a test can grow the segment exactly there.
 * Never set by the library. */
extern void (*shmobj__seg_open_hook)(void);

/* Tests only: called, when set, by every lock of a segment (the segment
 * lock, the map's shard locks, the queue's retire lock) once it is taken
 * and again just before it is released, so a kill test can stop the
 * holder inside its critical section. Never set by the library. */
enum {
    SHMOBJ__SEG_LOCK_TAKEN = 1,     /* taken (0 or SHMOBJ_EOWNERDEAD) */
    SHMOBJ__SEG_LOCK_RELEASING = 2, /* its changes made, not released */
};
extern void (*shmobj__seg_lock_hook)(shmobj_segment *seg, shmobj__os_lock *l,
                                     int phase);

/* False when the segment's name has been removed or now names another
 * object (a replaced segment): waits that time out on such a segment
 * return SHMOBJ_EREPLACED instead of SHMOBJ_ETIMEDOUT. */
bool shmobj__segment_linked(shmobj_segment *seg);

/* ---- attachment slots (seg-procs.c) ---- */

/* Claim a slot for a new handle (live_fd already open). */
int shmobj__seg_procs_attach(shmobj_segment *seg);
/* Give the slot back (a no-op in a forked child for an inherited handle). */
void shmobj__seg_procs_detach(shmobj_segment *seg);
/* This handle's token in this process: a forked child attaches anew on
 * first use. 0 when it cannot (then the caller reports SHMOBJ_EFULL or
 * the error of the attach, see shmobj__seg_procs_self). */
int shmobj__seg_procs_self(shmobj_segment *seg, uint32_t *token);
/* SHMOBJ__OS_OWNER_* of a token. */
int shmobj__seg_procs_state(shmobj_segment *seg, uint32_t token);
/* Handles attached now, other than the slot `except` (UINT32_MAX: none). */
unsigned shmobj__seg_procs_count(shmobj_segment *seg, uint32_t except);
/* Open a second description of the object behind seg->fd (the same file,
 * checked by inode), or return -1 when none can be had. */
int shmobj__seg_reopen(shmobj_segment *seg);

/* Make [0, end) of the segment usable in this process (space.ops.extend). */
int shmobj__segment_extend(struct shmobj__space *sp, uint64_t end);

/* Header validation shared by open and the fuzz/corruption tests:
 * SHMOBJ_EVERSION, SHMOBJ_ELAYOUT or SHMOBJ_ECORRUPT when the header of
 * `file_size` bytes cannot be used. */
int shmobj__seg_header_validate(const struct shmobj__seg_header *h,
                                uint64_t file_size);
/* The same for the object behind fd, whose size *file_size was read
 * before the header: the size is read again when the segment grew since
 * (*file_size is updated). */
int shmobj__seg_header_validate_fd(const struct shmobj__seg_header *h, int fd,
                                   uint64_t *file_size);
void shmobj__seg_header_seal(struct shmobj__seg_header *h);
uint64_t shmobj__seg_layout_signature(void);

/* A look without attaching (seg-peek.c): shmobj_segment_peek() checks the
 * arguments and has the os layer call this with a read-only descriptor
 * of the object and a struct shmobj__seg_peek as ctx. */
struct shmobj__seg_peek {
    unsigned backend;               /* the backend the name was given for */
    shmobj_segment_peek_info *info; /* zeroed but for struct_size */
};
int shmobj__seg_peek_fd(int fd, void *ctx);

/* The space operations of a segment (seg-heap.c). */
extern const struct shmobj__space_ops shmobj__segment_space_ops;

/* ---- watches (seg-watch.c) ---- */

/* space.ops.watch_open and space.ops.changed (space.h). */
int shmobj__seg_watch_open(struct shmobj__space *sp, shmobj__ref obj, uint64_t key,
                           unsigned flags, shmobj_watch **out);
void shmobj__seg_watch_changed(struct shmobj__space *sp, uint64_t obj, uint64_t key,
                               unsigned flags);
/* The word of the header page that says whether anything is watched
 * (space.watch_used); a zero word when base is NULL. */
const _Atomic uint64_t *shmobj__seg_watch_used(void *base);

/* ---- the heap's growth and repair (seg-grow.c) ---- */

/* Prepare the heap of a new segment of `size` bytes. */
int shmobj__seg_heap_init(shmobj_segment *seg, uint64_t size);

/* Repair after a lock owner died. */
int shmobj__seg_heap_repair(shmobj_segment *seg);

/* Widen this process's view to the heap's published size. */
int shmobj__seg_sync_view(shmobj_segment *seg);

/* Grow the segment so that a free block of `fit` bytes lies at the heap's
 * end (lock held). SHMOBJ_ENOMEM when even the maximum size cannot. */
int shmobj__seg_heap_grow(shmobj_segment *seg, uint64_t fit);

/* The bytes of the segment this process maps now. */
static inline uint64_t shmobj__seg_mapped(shmobj_segment *seg)
{
    return atomic_load_explicit(&seg->space.mapped, memory_order_acquire);
}

/* Raise the heap's untouched mark (see `untouched` in seg-layout.h) past
 * `end`. With the segment lock held. A mark of 0 (unknown) stays 0. */
static inline __attribute__((always_inline)) void
shmobj__seg_untouched_raise(shmobj_segment *seg, uint64_t end)
{
    uint64_t u = atomic_load_explicit(&seg->hdr->untouched, memory_order_relaxed);
    if (__builtin_expect(end > u && u != 0, 0) &&
        shmobj__align_up(end, SHMOBJ__SEG_UNTOUCHED_STEP, &end))
        atomic_store_explicit(&seg->hdr->untouched, end, memory_order_relaxed);
}

/* ---- allocation caches (seg-cache.c) ---- */

/* Give this handle's cached blocks back to the heap, with the segment
 * lock held; a no-op when another thread uses the cache or it holds a
 * parent's blocks (a forked child). True when it gave any back. */
bool shmobj__seg_cache_flush_locked(shmobj_segment *seg);
/* With the segment lock held, after an allocation found no block: give
 * back this handle's cached blocks, and (at most every 100 ms per handle)
 * those of dead processes, by a rebuild.
 * True when the allocation is worth trying again. */
bool shmobj__seg_cache_reclaim_locked(shmobj_segment *seg);
/* The repair's rebuild of the heap, which also frees the cached blocks of
 * dead processes (lock held). */
int shmobj__seg_cache_rebuild(shmobj_segment *seg);
/* The judge shmobj__arena_rebuild_reclaim() asks (ctx: the segment). */
bool shmobj__seg_cache_owner_dead(void *ctx, uint32_t token);
/* Before the handle detaches: give its cached blocks back. */
void shmobj__seg_cache_close(shmobj_segment *seg);

#endif /* SHMOBJ_SEGMENT_INTERNAL_H */
