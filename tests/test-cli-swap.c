/* A preloaded stand-in for shmobj_segment_peek that, once the real peek
 * has looked at a name, renames another file over that name: what a
 * program creating a segment under the same name between `shmobj rm`'s
 * look and its removal does, made to happen every time.
 *
 *   LD_PRELOAD=test-cli-swap.so
 *   SHMOBJ_TEST_SWAP_FROM=PATH  the file moved over the name
 *   SHMOBJ_TEST_SWAP_TO=PATH    the name's path (/dev/shm/NAME for shm)
 *   SHMOBJ_TEST_SWAP_DONE=PATH  created once the swap was made, so that the
 *                               test can tell a swap from a build where the
 *                               tool's call was not interposed (static)
 *
 * The swap is made once, after the first peek; the peek's own answer is
 * returned unchanged. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shmobj.h>

int shmobj_segment_peek(const char *name, unsigned backend,
                        shmobj_segment_peek_info *info)
{
    static int swapped;
    int (*real)(const char *, unsigned, shmobj_segment_peek_info *);
    void *sym = dlsym(RTLD_NEXT, "shmobj_segment_peek");
    if (sym == NULL)
        return SHMOBJ_ESYS;
    memcpy(&real, &sym, sizeof real); /* ISO C has no object-to-function cast */
    int rc = real(name, backend, info);
    const char *from = getenv("SHMOBJ_TEST_SWAP_FROM");
    const char *to = getenv("SHMOBJ_TEST_SWAP_TO");
    const char *done = getenv("SHMOBJ_TEST_SWAP_DONE");
    if (!swapped && from != NULL && to != NULL && rename(from, to) == 0) {
        swapped = 1;
        if (done != NULL) {
            int fd = open(done, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (fd >= 0)
                close(fd);
        }
    }
    return rc;
}
