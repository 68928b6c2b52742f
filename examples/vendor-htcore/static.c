/* The other vendoring switch: SHMOBJ_HTCORE_STATIC makes every function of
 * the core static, and the source file is included into this translation
 * unit, so nothing of it is visible to the linker at all. */
#include <stdio.h>

#define SHMOBJ_HTCORE_STATIC
#include "shmobj_htcore.c"

#include "golden.h"

int main(void)
{
    if (golden_check() != 0) {
        fprintf(stderr, "golden vectors differ from libshmobj's\n");
        return 1;
    }
    printf("golden vectors match (static copy)\n");
    return 0;
}
