/* Vendoring the hash-table core: this program is built from
 * lib/htcore/shmobj_htcore.[ch] alone (no libshmobj), as strict C99, with
 * every symbol renamed by SHMOBJ_HTCORE_PREFIX=myapp_ (see meson.build).
 *
 * It keeps a table of word counts in a static array (no allocation), then
 * rebuilds the golden table of libshmobj's tests and checks that this copy
 * produces the very same bytes: a vendored copy and the library agree. */
#include <stdio.h>
#include <string.h>

#include "shmobj_htcore.h"

#include "golden.h"

#define WORD_BYTES 16

/* 64 words at most: about 2 KiB, aligned for the 64-bit header fields. */
static union {
    uint64_t align;
    unsigned char bytes[64 + 128 + 128 * (WORD_BYTES + 4)];
} table_mem;

static int count_words(void)
{
    static const char *text[] = {"the", "quick", "brown", "fox", "jumps",
                                 "over", "the", "lazy", "dog", "the", "end"};
    shmobj_htcore t;
    unsigned i;
    uint32_t n;
    char key[WORD_BYTES];
    if (shmobj_htcore_footprint(64, WORD_BYTES + 4) > sizeof table_mem.bytes)
        return 1;
    if (shmobj_htcore_init(&t, table_mem.bytes, sizeof table_mem.bytes, 64,
                           WORD_BYTES, 4, 2024) != SHMOBJ_HTCORE_OK)
        return 1;
    for (i = 0; i < sizeof text / sizeof text[0]; i++) {
        memset(key, 0, sizeof key);
        strncpy(key, text[i], sizeof key - 1);
        if (shmobj_htcore_get(&t, key, &n) != SHMOBJ_HTCORE_OK)
            n = 0;
        n++;
        if (shmobj_htcore_put(&t, key, &n) != SHMOBJ_HTCORE_OK)
            return 1;
    }
    memset(key, 0, sizeof key);
    strcpy(key, "the");
    if (shmobj_htcore_get(&t, key, &n) != SHMOBJ_HTCORE_OK || n != 3)
        return 1;
    printf("%lu distinct words, \"the\" seen %lu times\n",
           (unsigned long)shmobj_htcore_count(&t), (unsigned long)n);
    return 0;
}

int main(void)
{
    if (count_words() != 0) {
        fprintf(stderr, "word count failed\n");
        return 1;
    }
    if (golden_check() != 0) {
        fprintf(stderr, "golden vectors differ from libshmobj's\n");
        return 1;
    }
    printf("golden vectors match\n");
    return 0;
}
