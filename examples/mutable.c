/* A mutable dict and a growable list changed by several processes at once,
 * and a link followed after its target was freed.
 *
 *   mutable [WORKERS] [COUNT]
 *
 * The parent puts one fixed dict holding three mutable containers, empty:
 * "seen" (a mutable dict), "totals" (a mutable dict whose key "events" it
 * sets to 0, since shmobj_mdict_int_add() adds only to a key that holds an
 * int) and "log" (a growable list). It forks WORKERS processes that, COUNT
 * times each and all at once, set a key of "seen", delete every third one,
 * add 1 to totals["events"] and append to "log" (an int, and every eighth
 * time a string, which becomes a child the list owns). The parent checks
 * that nothing was lost, iterates "seen", checks the whole tree, and frees
 * it with one call (every child goes with it).
 *
 * Then a link: a dict holding SHMOBJ_VAL_LINK() of another object does
 * not own it; once that object is freed, shmobj_view_follow() gives
 * SHMOBJ_ESTALE, never another object's bytes.
 *
 * The segment is a memfd: it has no name to clean up, and the forked
 * workers share it through the handle they inherit. */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *who, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", who, what, shmobj_strerror(rc));
    return 1;
}

/* Views of the three containers inside the root object. */
struct parts {
    shmobj_view top, seen, totals, log;
};

static int parts_get(shmobj_segment *seg, shmobj_ref root, struct parts *p)
{
    int rc = shmobj_obj_get(seg, root, &p->top);
    if (rc == 0)
        rc = shmobj_field_get(&p->top, "seen", &p->seen);
    if (rc == 0)
        rc = shmobj_field_get(&p->top, "totals", &p->totals);
    if (rc == 0)
        rc = shmobj_field_get(&p->top, "log", &p->log);
    return rc;
}

static int worker(shmobj_segment *seg, shmobj_ref root, int id, long count)
{
    struct parts p;
    int rc = parts_get(seg, root, &p); /* views made before the fork work too */
    shmobj_key k_events;
    shmobj_value d_events = SHMOBJ_VAL_STR("events");
    if (rc == 0)
        rc = shmobj_key_init(&k_events, &d_events);
    for (long i = 0; i < count && rc == 0; i++) {
        char key[48];
        snprintf(key, sizeof key, "worker%d-item%ld", id, i);
        shmobj_value k = SHMOBJ_VAL_STR(key);
        shmobj_value val = SHMOBJ_VAL_INT(i);
        rc = shmobj_mdict_set(&p.seen, &k, &val);
        if (rc == 0 && i % 3 == 0)
            rc = shmobj_mut_delete(&p.seen, &k);
        if (rc == 0)
            rc = shmobj_mdict_int_add(&p.totals, &k_events, 1, NULL);
        shmobj_value item = SHMOBJ_VAL_INT(id * count + i);
        if (rc == 0)
            rc = shmobj_mlist_append(&p.log, &item);
        shmobj_value note = SHMOBJ_VAL_STR("a string: a child the list owns");
        if (rc == 0 && i % 8 == 0)
            rc = shmobj_mlist_append(&p.log, &note);
    }
    if (rc != 0)
        return fail("worker", "change", rc);
    return 0;
}

static int containers(shmobj_segment *seg, int workers, long count)
{
    shmobj_value desc = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("seen"), SHMOBJ_VAL_MDICT(),
        SHMOBJ_VAL_STR("totals"), SHMOBJ_VAL_MDICT(),
        SHMOBJ_VAL_STR("log"), SHMOBJ_VAL_MLIST());
    shmobj_ref root;
    struct parts p;
    int rc = shmobj_obj_put(seg, &desc, &root);
    if (rc != 0)
        return fail("parent", "put", rc);
    rc = parts_get(seg, root, &p);
    shmobj_value d_events = SHMOBJ_VAL_STR("events"), zero = SHMOBJ_VAL_INT(0);
    if (rc == 0)
        rc = shmobj_mdict_set(&p.totals, &d_events, &zero);
    if (rc != 0)
        return fail("parent", "set up", rc);
    pid_t pids[64];
    int started = 0, ok = 1;
    for (; started < workers; started++) {
        pids[started] = fork();
        if (pids[started] < 0)
            break;
        if (pids[started] == 0)
            _exit(worker(seg, root, started, count));
    }
    for (int i = 0; i < started; i++) {
        int st;
        ok &= waitpid(pids[i], &st, 0) == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    ok &= started == workers;
    shmobj_key k_events;
    int64_t events = -1;
    size_t seen_len = 0, log_len = 0, iterated = 0;
    rc = shmobj_key_init(&k_events, &d_events);
    if (rc == 0)
        rc = shmobj_mdict_get_int(&p.totals, &k_events, &events);
    if (rc == 0)
        rc = shmobj_view_len(&p.seen, &seen_len);
    if (rc == 0)
        rc = shmobj_view_len(&p.log, &log_len);
    shmobj_miter it;
    if (rc == 0)
        rc = shmobj_miter_init(&p.seen, &it);
    shmobj_view key, val;
    while (rc == 0 && (rc = shmobj_miter_next(&it, &key, &val)) == 0)
        iterated++;
    if (rc == SHMOBJ_ENOTFOUND) /* the end of the iteration */
        rc = 0;
    if (rc == 0)
        rc = shmobj_obj_check(seg, root);
    long kept = count - (count + 2) / 3; /* every third key was deleted */
    long notes = (count + 7) / 8;
    if (rc == 0 && (!ok || events != workers * count ||
                    seen_len != (size_t)(workers * kept) || iterated != seen_len ||
                    log_len != (size_t)(workers * (count + notes))))
        rc = SHMOBJ_ECORRUPT;
    if (rc == 0)
        printf("%d workers at once: %" PRId64 " events, %zu keys seen (iterated %zu), "
               "%zu items logged\n", workers, events, seen_len, iterated, log_len);
    int rc2 = shmobj_obj_free(seg, root); /* the containers and every child */
    if (rc != 0)
        return fail("parent", "check", rc);
    return rc2 != 0 ? fail("parent", "free", rc2) : 0;
}

static int link_after_free(shmobj_segment *seg)
{
    shmobj_ref target, holder;
    shmobj_value tdesc = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2));
    int rc = shmobj_obj_put(seg, &tdesc, &target);
    if (rc != 0)
        return fail("link", "put target", rc);
    shmobj_value hdesc = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("latest"), SHMOBJ_VAL_LINK(target));
    rc = shmobj_obj_put(seg, &hdesc, &holder);
    shmobj_view h, link, t;
    if (rc == 0)
        rc = shmobj_obj_get(seg, holder, &h);
    if (rc == 0)
        rc = shmobj_field_get(&h, "latest", &link);
    if (rc == 0) /* a view of the link becomes a view of its target */
        rc = shmobj_view_follow(&link, &t);
    if (rc == 0 && shmobj_view_type(&t) != SHMOBJ_TYPE_LIST)
        rc = SHMOBJ_ETYPE;
    if (rc == 0) /* the target's owner frees it; the link does not keep it */
        rc = shmobj_obj_free(seg, target);
    int after = rc == 0 ? shmobj_view_follow(&link, &t) : rc;
    if (rc == 0 && after != SHMOBJ_ESTALE)
        rc = after == 0 ? SHMOBJ_ECORRUPT : after;
    if (rc == 0)
        printf("a link followed after its target was freed: %s\n", shmobj_errname(after));
    int rc2 = shmobj_obj_free(seg, holder); /* frees the dict, not the target */
    if (rc != 0)
        return fail("link", "follow", rc);
    return rc2 != 0 ? fail("link", "free holder", rc2) : 0;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4;
    long count = argc > 2 ? atol(argv[2]) : 5000;
    if (workers < 1 || workers > 64 || count < 1) {
        fprintf(stderr, "usage: %s [WORKERS 1..64] [COUNT]\n", argv[0]);
        return 2;
    }
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 4u << 20;
    o.max_size = 1ull << 30; /* the containers grow: so may the segment */
    shmobj_segment *seg;
    int rc = shmobj_segment_create("mutable-example", &o, &seg);
    if (rc != 0)
        return fail("parent", "create segment", rc);
    int bad = containers(seg, workers, count);
    if (!bad)
        bad = link_after_free(seg);
    shmobj_segment_close(seg);
    return bad;
}
