/* Segment header: checksum, layout signature and validation.
 *
 * Nothing in a header is trusted until validate() has passed: a segment may
 * come from another build, another format version or a damaged file. */
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "segment.h"
#include "shmobj/version.h"

/* FNV-1a, 64-bit: enough to catch damage, not meant against forgery (a
 * hostile writer with access to the segment can do worse anyway). */
static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static uint64_t header_checksum(const struct shmobj__seg_header *h)
{
    size_t from = offsetof(struct shmobj__seg_header, header_size);
    size_t to = offsetof(struct shmobj__seg_header, checksum);
    return fnv1a((const char *)h + from, to - from);
}

/* The lock format: bump when the meaning of a lock word changes, so a
 * process of another build cannot misread the segment's locks. */
#define LOCK_FORMAT SHMOBJ__OS_LOCK_FORMAT

uint64_t shmobj__seg_layout_signature(void)
{
    /* Bits 0-7 pointer size, 8-15 alignment of 64-bit atomics, 16-23 size
     * of a lock, 24 big-endian, 32-39 the lock format: any difference means
     * another process would misread our shared structures. The locks are
     * the library's own (os-lock.c), so the C library no longer matters. */
    uint64_t sig = (uint64_t)sizeof(void *);
    sig |= (uint64_t)alignof(_Atomic uint64_t) << 8;
    sig |= (uint64_t)SHMOBJ__OS_LOCK_SIZE << 16;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    sig |= UINT64_C(1) << 24;
#endif
    sig |= LOCK_FORMAT << 32;
    return sig;
}

void shmobj__seg_header_seal(struct shmobj__seg_header *h)
{
    h->checksum = header_checksum(h);
}

int shmobj__seg_header_validate(const struct shmobj__seg_header *h,
                                uint64_t file_size)
{
    if (h->magic == SHMOBJ__SEG_MAGIC_SWAPPED)
        return SHMOBJ_ELAYOUT; /* written on a machine of the other byte order */
    if (h->magic != SHMOBJ__SEG_MAGIC)
        return SHMOBJ_ECORRUPT;
    if (h->format_version != SHMOBJ_FORMAT_VERSION)
        return SHMOBJ_EVERSION;
    if (h->header_size != sizeof(struct shmobj__seg_header))
        return SHMOBJ_ECORRUPT;
    if (h->checksum != header_checksum(h))
        return SHMOBJ_ECORRUPT;
    if (h->layout_sig != shmobj__seg_layout_signature())
        return SHMOBJ_ELAYOUT;
    /* Checksummed, but a deliberate writer could still lie: check that the
     * fixed offsets are what this format defines and sizes are sane. */
    if (h->arena_off != SHMOBJ__SEG_ARENA_OFF ||
        h->procs_off != SHMOBJ__SEG_PROCS_OFF ||
        h->roots_off != SHMOBJ__SEG_ROOTS_OFF ||
        h->procs_max != SHMOBJ__SEG_PROCS || h->roots_max != SHMOBJ__SEG_ROOTS)
        return SHMOBJ_ECORRUPT;
    if (h->max_size > SHMOBJ__SEG_MAX_SIZE || h->max_size < file_size ||
        file_size <= SHMOBJ__SEG_ARENA_OFF)
        return SHMOBJ_ECORRUPT;
    uint64_t size = atomic_load_explicit(&h->size, memory_order_acquire);
    if (size > file_size || size <= SHMOBJ__SEG_ARENA_OFF)
        return SHMOBJ_ECORRUPT;
    return 0;
}

int shmobj__seg_header_validate_fd(const struct shmobj__seg_header *h, int fd,
                                   uint64_t *file_size)
{
    /* The object only grows, and a grower makes it larger before it writes
     * the header's size: a size past the one read means a growth since,
     * so read it again. Each retry follows a real growth, which a segment's
     * maximum bounds; the count bounds the time whatever the bytes say. */
    for (int tries = 0;; tries++) {
        int rc = shmobj__seg_header_validate(h, *file_size);
        uint64_t now;
        if (rc != SHMOBJ_ECORRUPT || tries == 64 ||
            shmobj__os_fd_size(fd, &now) != 0 || now <= *file_size)
            return rc;
        *file_size = now;
    }
}
