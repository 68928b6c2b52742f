/* The segment handle and what the layers above (queue, map) use of it:
 * the shared space, the robust segment lock, the process identity. */
#ifndef SHMOBJ_SEGMENT_INTERNAL_H
#define SHMOBJ_SEGMENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "os.h"
#include "seg-layout.h"
#include "shmobj/segment.h"
#include "space.h"

struct shmobj_segment {
    /* First member: a shmobj_segment * is a struct shmobj__space * (see
     * space.h); the layers above reach the segment only through it. */
    struct shmobj__space space;
    struct shmobj__seg_header *hdr; /* == space.base */
    uint64_t max_size;              /* bytes of address space mapped */
    int fd;                         /* backing object, owned */
    unsigned backend;
    uint32_t proc_slot;             /* this handle's process table entry */
    shmobj__os_proc self;           /* identity recorded in that entry */
    /* Serialises this process's growth of its view (extend). */
    pthread_mutex_t view_lock;
};

/* The space of a handle, and back. */
static inline struct shmobj__space *shmobj__segment_space(shmobj_segment *s)
{
    return &s->space;
}

/* Take the segment lock; when its previous owner died, repair what it
 * guards (arena free lists, growth, process table) before returning 0. */
int shmobj__segment_lock(shmobj_segment *seg);
void shmobj__segment_unlock(shmobj_segment *seg);

/* Make [0, end) of the segment usable in this process (space.ops.extend). */
int shmobj__segment_extend(struct shmobj__space *sp, uint64_t end);

/* Header validation shared by open and the fuzz/corruption tests:
 * SHMOBJ_EVERSION, SHMOBJ_ELAYOUT or SHMOBJ_ECORRUPT when the header of
 * `file_size` bytes cannot be used. */
int shmobj__seg_header_validate(const struct shmobj__seg_header *h,
                                uint64_t file_size);
void shmobj__seg_header_seal(struct shmobj__seg_header *h);
uint64_t shmobj__seg_layout_signature(void);

/* The space operations of a segment (seg-heap.c). */
extern const struct shmobj__space_ops shmobj__segment_space_ops;

/* Prepare the heap of a new segment of `size` bytes (seg-heap.c). */
int shmobj__seg_heap_init(shmobj_segment *seg, uint64_t size);

/* Repair after a lock owner died (seg-heap.c). */
int shmobj__seg_heap_repair(shmobj_segment *seg);

#endif /* SHMOBJ_SEGMENT_INTERNAL_H */
