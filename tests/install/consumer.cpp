/* Built against an installed libshmobj through pkg-config: proves the
 * headers, the .pc file and the shared library work together. */
#include <shmobj.h>
#include <cstdio>
#include <cstring>

int main(void)
{
    if (shmobj_version() != SHMOBJ_VERSION_NUMBER)
        return 1;
    if (strcmp(shmobj_errname(SHMOBJ_ENOMEM), "SHMOBJ_ENOMEM") != 0)
        return 2;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 1 << 20;
    shmobj_segment *seg = nullptr;
    int rc = shmobj_segment_create("install-check", &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", shmobj_strerror(rc));
        return 3;
    }
    shmobj_segment_close(seg);
    puts("ok");
    return 0;
}
