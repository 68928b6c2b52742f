/* shmobj check: the whole segment, one line per part checked saying what
 * was found and where (the root's name and kind, its block's offset, what
 * it holds), damage as the offset of the first bad byte with the root
 * whose block holds it, and a last line that sums up.
 *
 * The roots are read first, so that a heap problem can be placed in the
 * block of a root; a damaged entry of the directory is a problem of its
 * own and does not stop the walk. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shmobj-tool.h"

static const char *const usage_check =
    "usage: shmobj check NAME\n"
    "\n"
    "Checks the whole segment: the heap's blocks and free lists, the root\n"
    "directory, every map (tables, entries, retired memory), every queue\n"
    "(ring header, slots, positions, retire FIFO), every topic (header,\n"
    "counters, subscriber records) and every object graph.\n"
    "Prints one line per part: what it is, where its block starts (offset\n"
    "in the segment) and what was found: 'ok' with what it holds, or\n"
    "'damaged at offset N' (the first bad byte found, and the root whose\n"
    "block holds it). Raw blocks are the application's bytes: not checked.\n"
    "exit status: 0 consistent, 1 damaged, 2 could not check.\n";

/* A root as the directory gave it, with where its block lies. */
struct root {
    shmobj_root_info ri;
    uint64_t off; /* its reference's offset: the block's usable bytes */
};

struct check_state {
    const struct target *t;
    struct root *roots;
    size_t nroots;
    unsigned bad;
    unsigned queues, maps, objects, topics, services, others;
    bool incomplete;
};

static uint64_t ref_off(shmobj_ref r)
{
    return r & ((UINT64_C(1) << 48) - 1);
}

/* Block headers are 16 bytes before the usable bytes (doc/format-arena.md). */
#define BLOCK_HEADER 16u

/* " (byte K of the block of queue 'jobs')" when a root's block holds off. */
static void place(const struct check_state *cs, uint64_t off)
{
    for (size_t i = 0; i < cs->nroots; i++) {
        const struct root *r = &cs->roots[i];
        if (r->ri.bytes == 0 || r->off < BLOCK_HEADER)
            continue;
        if (off >= r->off - BLOCK_HEADER && off < r->off) {
            printf(" (the header of the block of %s '%s')",
                   shmobj_tool_kind_name(r->ri.kind), r->ri.name);
            return;
        }
        if (off >= r->off && off - r->off < r->ri.bytes) {
            printf(" (byte %" PRIu64 " of the block of %s '%s')", off - r->off,
                   shmobj_tool_kind_name(r->ri.kind), r->ri.name);
            return;
        }
    }
}

static void damaged(struct check_state *cs, const char *what, const char *name,
                    uint64_t off, int rc)
{
    cs->bad++;
    printf("%s%s%s%s: damaged at offset %" PRIu64 " (0x%" PRIx64 ")", what,
           name ? " '" : "", name ? name : "", name ? "'" : "", off, off);
    place(cs, off);
    printf(": %s\n", shmobj_strerror(rc));
}

/* The start of an "ok" line: kind 'name' at offset N (0xN), SIZE: ok */
static void ok_head(const struct root *r)
{
    char b[32];
    printf("%s '%s' at offset %" PRIu64 " (0x%" PRIx64 "), %s: ",
           shmobj_tool_kind_name(r->ri.kind), r->ri.name, r->off, r->off,
           shmobj_tool_bytes(r->ri.bytes, b, sizeof b, false));
}

static int check_queue(shmobj_segment *seg, const struct root *r,
                       struct check_state *cs)
{
    cs->queues++;
    uint64_t bad = r->off;
    shmobj_queue *q;
    shmobj_queue_stats st = {.struct_size = sizeof st};
    int rc = shmobj_queue_open(seg, r->ri.name, &q);
    if (rc == 0) {
        rc = shmobj_queue_check(q, &bad);
        if (rc == 0)
            rc = shmobj_queue_stats_get(q, &st);
        shmobj_queue_close(q);
    }
    if (rc == 0) {
        ok_head(r);
        printf("ok, %" PRIu64 " message%s of %" PRIu32 " waiting\n", st.depth,
               shmobj_tool_plural(st.depth), st.capacity);
    } else if (rc != SHMOBJ_EBUSY) {
        damaged(cs, "queue", r->ri.name, bad, rc);
    }
    return rc;
}

static int check_map(shmobj_segment *seg, const struct root *r,
                     struct check_state *cs)
{
    cs->maps++;
    shmobj_map *m;
    uint64_t count = 0;
    int rc = shmobj_map_open(seg, r->ri.name, &m);
    if (rc == 0) {
        rc = shmobj_map_check(m);
        if (rc == 0)
            rc = shmobj_map_count(m, &count);
        shmobj_map_close(m);
    }
    if (rc == 0) {
        ok_head(r);
        printf("ok, %" PRIu64 " entr%s\n", count, count == 1 ? "y" : "ies");
    } else if (rc != SHMOBJ_EBUSY && rc != SHMOBJ_EFULL) {
        damaged(cs, "map", r->ri.name, r->off, rc);
    }
    return rc;
}

static int check_topic(shmobj_segment *seg, const struct root *r,
                       struct check_state *cs)
{
    cs->topics++;
    shmobj_topic *t;
    shmobj_topic_stats st;
    shmobj_topic_sub_info *subs = NULL;
    size_t n = 0, dead = 0;
    int rc = shmobj_topic_open(seg, r->ri.name, &t);
    if (rc == 0) {
        rc = shmobj_topic_stats_get(t, &st);
        if (rc == 0)
            rc = shmobj_tool_topic_subs(t, &subs, &n);
        shmobj_topic_close(t);
    }
    for (size_t i = 0; i < n; i++)
        dead += (subs[i].flags & SHMOBJ_TOPIC_SUB_DEAD) != 0;
    free(subs);
    if (rc == 0) {
        ok_head(r);
        printf("ok, %" PRIu64 " published, %zu subscriber%s", st.published,
               n - dead, shmobj_tool_plural(n - dead));
        if (dead)
            printf(", %zu record%s of dead subscribers (freed by the next "
                   "repair: not damage)",
                   dead, shmobj_tool_plural(dead));
        printf("\n");
    } else if (rc != SHMOBJ_EBUSY && rc != SHMOBJ_ENOMEM) {
        damaged(cs, "topic", r->ri.name, r->off, rc);
    }
    return rc;
}

static int check_service(shmobj_segment *seg, const struct root *r,
                         struct check_state *cs)
{
    cs->services++;
    uint32_t pending = 0;
    int rc = shmobj_tool_service_pending(seg, r->ri.name, &pending);
    if (rc == 0) {
        ok_head(r);
        printf("ok, %" PRIu32 " call%s waiting\n", pending, shmobj_tool_plural(pending));
    } else if (rc != SHMOBJ_EBUSY && rc != SHMOBJ_ENOMEM) {
        damaged(cs, "service", r->ri.name, r->off, rc);
    }
    return rc;
}

static int check_root(shmobj_segment *seg, const struct root *r,
                      struct check_state *cs)
{
    int rc = 0;
    switch (r->ri.kind) {
    case SHMOBJ_ROOT_QUEUE:
        return check_queue(seg, r, cs);
    case SHMOBJ_ROOT_MAP:
        return check_map(seg, r, cs);
    case SHMOBJ_ROOT_TOPIC:
        return check_topic(seg, r, cs);
    case SHMOBJ_ROOT_SERVICE:
        return check_service(seg, r, cs);
    case SHMOBJ_ROOT_OBJECT: {
        cs->objects++;
        rc = shmobj_obj_check(seg, r->ri.ref);
        shmobj_view v;
        if (rc == 0 && shmobj_obj_get(seg, r->ri.ref, &v) == 0) {
            ok_head(r);
            printf("ok, %s ", shmobj_tool_type_name(shmobj_view_type(&v)));
            shmobj_tool_value_brief(stdout, &v);
            printf("\n");
        } else if (rc != 0) {
            damaged(cs, "object", r->ri.name, r->off, rc);
        }
        return rc;
    }
    case SHMOBJ_ROOT_STALE:
        /* the application freed what it had published and kept the name:
         * a dangling root, not damage of the segment */
        cs->others++;
        printf("root '%s': names a freed block (a dangling root, not damage)\n",
               r->ri.name);
        return 0;
    case SHMOBJ_ROOT_BAD:
        damaged(cs, "root", r->ri.name, r->off, SHMOBJ_ECORRUPT);
        return SHMOBJ_ECORRUPT;
    default:
        cs->others++;
        ok_head(r);
        printf("not checked (a raw block: its bytes are the application's)\n");
        return 0;
    }
}

/* Read the directory into cs->roots; damaged entries are counted. */
static void read_roots(shmobj_segment *seg, struct check_state *cs)
{
    static struct root roots[256];
    cs->roots = roots;
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    int rc;
    while ((rc = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
        if (rc == SHMOBJ_ECORRUPT) {
            cs->bad++;
            printf("root directory: entry %" PRIu32 " damaged (its name)\n",
                   cur - 1);
            continue;
        }
        if (rc != 0) {
            fprintf(stderr, "%s: %s: root directory: %s\n", shmobj_tool_prog,
                    cs->t->arg, shmobj_strerror(rc));
            cs->incomplete = true;
            break;
        }
        if (cs->nroots >= sizeof roots / sizeof roots[0])
            break;
        roots[cs->nroots].ri = ri;
        roots[cs->nroots].off = ref_off(ri.ref);
        cs->nroots++;
    }
}

int shmobj_tool_check(int argc, char **argv)
{
    if (argc == 2 && shmobj_tool_is_help(argv[1]))
        return shmobj_tool_usage(usage_check, false);
    if (argc != 2)
        return shmobj_tool_usage_bad("check", usage_check,
                                     argc < 2 ? "NAME missing" : "one NAME expected");
    struct target t;
    if (!shmobj_tool_target_parse(argv[1], &t))
        return shmobj_tool_why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = shmobj_tool_attach(&t, 0, &seg);
    if (status == EXIT_DAMAGED)
        printf("header: damaged at offset 0 (0x0)\n");
    if (status != 0)
        return status;
    struct check_state cs = {.t = &t};
    shmobj_segment_info si = {.struct_size = sizeof si};
    if (shmobj_segment_info_get(seg, &si) == 0 && (si.flags & SHMOBJ_SEGMENT_INFO_READONLY))
        printf("%s: read-only: not repaired (this user may only read it)\n", t.arg);
    uint64_t bad = 0;
    shmobj_arena_stats hs = {.struct_size = sizeof hs};
    int rc = shmobj_arena_check(seg, &bad);
    if (rc == 0 || rc == SHMOBJ_ECORRUPT)
        read_roots(seg, &cs);
    if (rc == SHMOBJ_ECORRUPT) {
        damaged(&cs, "heap", NULL, bad, rc);
    } else if (rc != 0) {
        fprintf(stderr, "%s: %s: heap: %s\n", shmobj_tool_prog, t.arg,
                shmobj_strerror(rc));
        cs.incomplete = true;
    } else if (shmobj_arena_stats_get(seg, &hs) == 0) {
        char a[32], b[32];
        printf("heap: ok, %" PRIu64 " block%s in use (%s), %" PRIu64
               " free (%s)\n",
               hs.used_blocks, shmobj_tool_plural(hs.used_blocks),
               shmobj_tool_bytes(hs.used_bytes, a, sizeof a, false), hs.free_blocks,
               shmobj_tool_bytes(hs.free_bytes, b, sizeof b, false));
    }
    for (size_t i = 0; i < cs.nroots; i++) {
        rc = check_root(seg, &cs.roots[i], &cs);
        if (rc == SHMOBJ_EBUSY || rc == SHMOBJ_EFULL || rc == SHMOBJ_ENOMEM) {
            fprintf(stderr, "%s: %s: %s '%s': %s\n", shmobj_tool_prog, t.arg,
                    shmobj_tool_kind_name(cs.roots[i].ri.kind),
                    cs.roots[i].ri.name, shmobj_strerror(rc));
            cs.incomplete = true;
        }
    }
    shmobj_segment_close(seg);
    if (cs.bad > 0) {
        printf("%s: damaged (%u problem%s)\n", t.arg, cs.bad,
               shmobj_tool_plural(cs.bad));
        return EXIT_DAMAGED;
    }
    if (cs.incomplete)
        return EXIT_CANNOT;
    size_t roots = cs.nroots;
    printf("%s: ok: heap, %zu root%s (%u queue%s, %u map%s, %u object%s, ",
           t.arg, roots, shmobj_tool_plural(roots), cs.queues,
           shmobj_tool_plural(cs.queues), cs.maps, shmobj_tool_plural(cs.maps),
           cs.objects, shmobj_tool_plural(cs.objects));
    if (cs.topics)
        printf("%u topic%s, ", cs.topics, shmobj_tool_plural(cs.topics));
    if (cs.services)
        printf("%u service%s, ", cs.services, shmobj_tool_plural(cs.services));
    printf("%u other%s)\n", cs.others, shmobj_tool_plural(cs.others));
    return 0;
}
