/* Two processes meet in one segment: the consumer starts first and waits
 * for the producer's segment; the producer waits until the consumer has
 * attached; then the consumer reads a block the producer wrote. */
#include <shmobj.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECOND INT64_C(1000000000)

static int consumer(const char *name)
{
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 10 * SECOND, &seg);
    if (rc != 0) {
        fprintf(stderr, "consumer: open: %s\n", shmobj_strerror(rc));
        return 1;
    }
    printf("consumer %d: attached to \"%s\"\n", (int)getpid(), name);
    shmobj_ref ref;
    while ((rc = shmobj_segment_root_get(seg, "greeting", &ref)) == SHMOBJ_ENOTFOUND)
        usleep(1000);
    void *p = NULL;
    if (rc == 0)
        rc = shmobj_arena_ptr(seg, ref, &p, NULL);
    if (rc == 0)
        printf("consumer %d: read \"%s\" in place\n", (int)getpid(), (char *)p);
    shmobj_segment_close(seg);
    return rc == 0 ? 0 : 1;
}

int main(void)
{
    char name[64];
    snprintf(name, sizeof name, "shmobj-demo-%d", (int)getpid());
    pid_t child = fork();
    if (child == 0)
        return consumer(name);

    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 16 << 20;
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "producer: create: %s\n", shmobj_strerror(rc));
        return 1;
    }
    printf("producer %d: created \"%s\"\n", (int)getpid(), name);
    rc = shmobj_segment_wait_attached(seg, 1, 10 * SECOND);
    printf("producer %d: consumer attached: %s\n", (int)getpid(),
           shmobj_strerror(rc));
    shmobj_ref ref;
    void *p;
    const char *msg = "hello from the producer";
    if (rc == 0)
        rc = shmobj_arena_alloc(seg, strlen(msg) + 1, 0, &ref);
    if (rc == 0)
        rc = shmobj_arena_ptr(seg, ref, &p, NULL);
    if (rc == 0) {
        memcpy(p, msg, strlen(msg) + 1);
        rc = shmobj_segment_root_set(seg, "greeting", ref);
    }
    int status = 1;
    waitpid(child, &status, 0);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
