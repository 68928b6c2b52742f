/* shmobj dump: roots as JSON. Objects are the library's own JSON
 * (shmobj_view_json_write()); queues, maps, topics and raw blocks are
 * described by an object with one "$kind" member, maps with their
 * entries and topics with their subscribers (bounded by -e). The whole
 * text is built in memory first, so a dump that fails half-way prints
 * only its error, and what it prints is one valid JSON value. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shmobj-tool.h"

static const char *const usage_dump =
    "usage: shmobj dump [--pretty] [--json] [-e N] NAME [ROOT]\n"
    "\n"
    "Writes the root ROOT as JSON; without ROOT, one JSON object with every\n"
    "root by name. Objects are their JSON (mutable containers with all\n"
    "their items); the others are described:\n"
    "  {\"$queue\":{\"capacity\":..,\"depth\":..,\"puts\":..,\"takes\":..,\n"
    "              \"consumers_waiting\":..,\"producers_waiting\":..}}\n"
    "  {\"$map\":{\"count\":..,\"entries\":{KEY:VALUE,...}}}  keys and values\n"
    "      that are text are strings; other keys are \"$bytes:HEX\", other\n"
    "      values {\"$bytes\":LEN,\"hex\":\"..\"} (8 bytes also \"int64\");\n"
    "      \"truncated\":true when -e left entries out\n"
    "  {\"$topic\":{\"published\":..,\"kept\":..,\"capacity\":..,\"history\":..,\n"
    "              \"loans\":..,\"missed\":..,\"subscribers\":[{\"token\":..,\n"
    "              \"pid\":..,\"lag\":..,\"held\":..,\"missed\":..,\"dead\":..}]}}\n"
    "  {\"$raw\":BYTES}, {\"$stale\":true}\n"
    "The output is one JSON value (jq reads it).\n"
    "  --pretty, -p  indent the output\n"
    "  --json        JSON output (the default; accepted for scripts)\n"
    "  -e N, --entries N  at most N map entries and subscribers per root\n"
    "                     (default 1000; 'all' every one)\n";

static int dump_queue(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f)
{
    shmobj_queue *q = NULL;
    shmobj_queue_stats st = {.struct_size = sizeof st};
    int rc = shmobj_queue_open(seg, ri->name, &q);
    if (rc == 0)
        rc = shmobj_queue_stats_get(q, &st);
    shmobj_queue_close(q);
    if (rc != 0)
        return rc;
    fprintf(f, "{\"$queue\":{\"capacity\":%" PRIu32 ",\"depth\":%" PRIu64
               ",\"puts\":%" PRIu64 ",\"takes\":%" PRIu64
               ",\"consumers_waiting\":%" PRIu32 ",\"producers_waiting\":%" PRIu32
               "}}",
            st.capacity, st.depth, st.puts, st.takes, st.consumers_waiting,
            st.producers_waiting);
    return 0;
}

static int dump_map(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f,
                    uint64_t entries)
{
    shmobj_map *m;
    uint64_t count = 0;
    int rc = shmobj_map_open(seg, ri->name, &m);
    if (rc != 0)
        return rc;
    rc = shmobj_map_count(m, &count);
    if (rc == 0) {
        fprintf(f, "{\"$map\":{\"count\":%" PRIu64 ",", count);
        rc = shmobj_tool_map_entries_json(f, m, entries);
        fputs("}}", f);
    }
    shmobj_map_close(m);
    return rc;
}

static int dump_service(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f)
{
    uint32_t pending;
    int rc = shmobj_tool_service_pending(seg, ri->name, &pending);
    if (rc == 0)
        fprintf(f, "{\"$service\":{\"pending\":%" PRIu32 "}}", pending);
    return rc;
}

static int dump_topic(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f,
                      uint64_t entries)
{
    shmobj_topic *t;
    int rc = shmobj_topic_open(seg, ri->name, &t);
    if (rc != 0)
        return rc;
    shmobj_topic_stats st;
    shmobj_topic_sub_info *subs = NULL;
    size_t n = 0;
    rc = shmobj_topic_stats_get(t, &st);
    if (rc == 0)
        rc = shmobj_tool_topic_subs(t, &subs, &n);
    if (rc == 0) {
        fprintf(f, "{\"$topic\":{\"published\":%" PRIu64 ",\"kept\":%" PRIu64
                   ",\"capacity\":%" PRIu32 ",\"history\":%" PRIu32
                   ",\"loans\":%" PRIu32 ",\"missed\":%" PRIu64 ",\"subscribers\":[",
                st.published, st.retained, st.capacity, st.history, st.loans,
                st.missed);
        for (size_t i = 0; i < n && i < entries; i++) {
            const shmobj_topic_sub_info *s = &subs[i];
            bool dead = s->flags & SHMOBJ_TOPIC_SUB_DEAD;
            fprintf(f, "%s{\"token\":%" PRIu32 ",\"pid\":%" PRIu32 ",\"lag\":%" PRIu64
                       ",\"held\":%" PRIu64 ",\"missed\":%" PRIu64 ",\"dead\":%s}",
                    i ? "," : "", s->token,
                    dead ? 0 : shmobj_tool_token_pid(seg, s->token), s->lag,
                    s->held, s->missed, dead ? "true" : "false");
        }
        fputc(']', f);
        if (n > entries)
            fputs(",\"truncated\":true", f);
        fputs("}}", f);
    }
    free(subs);
    shmobj_topic_close(t);
    return rc;
}

static int dump_root(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f,
                     uint64_t entries)
{
    switch (ri->kind) {
    case SHMOBJ_ROOT_OBJECT: {
        shmobj_view v;
        int rc = shmobj_obj_get(seg, ri->ref, &v);
        if (rc == 0)
            rc = shmobj_view_json_write(&v, f);
        return rc;
    }
    case SHMOBJ_ROOT_QUEUE:
        return dump_queue(seg, ri, f);
    case SHMOBJ_ROOT_MAP:
        return dump_map(seg, ri, f, entries);
    case SHMOBJ_ROOT_TOPIC:
        return dump_topic(seg, ri, f, entries);
    case SHMOBJ_ROOT_SERVICE:
        return dump_service(seg, ri, f);
    case SHMOBJ_ROOT_RAW:
        fprintf(f, "{\"$raw\":%" PRIu64 "}", ri->bytes);
        return 0;
    case SHMOBJ_ROOT_STALE:
        return SHMOBJ_ESTALE;
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* One root by name: its kind from the directory (past damaged entries). */
static int dump_one(shmobj_segment *seg, const struct target *t,
                    const char *root, FILE *f, uint64_t entries)
{
    shmobj_ref ref;
    int rc = shmobj_segment_root_get(seg, root, &ref);
    shmobj_root_info ri = {.struct_size = sizeof ri};
    uint32_t cur = 0;
    while (rc == 0) {
        int r = shmobj_segment_root_next(seg, &cur, &ri);
        if (r == SHMOBJ_ECORRUPT)
            continue;
        if (r != 0) {
            rc = r;
            break;
        }
        if (strcmp(ri.name, root) == 0)
            break;
    }
    if (rc == 0)
        rc = dump_root(seg, &ri, f, entries);
    if (rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_EINVAL)
        fprintf(stderr, "%s: %s: no root named '%s'\n", shmobj_tool_prog, t->arg,
                root);
    else if (rc != 0)
        fprintf(stderr, "%s: %s: root '%s': %s\n", shmobj_tool_prog, t->arg, root,
                shmobj_strerror(rc));
    return rc;
}

static int dump_all(shmobj_segment *seg, const struct target *t, FILE *f,
                    uint64_t entries)
{
    int rc = 0, r;
    fputc('{', f);
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    bool first = true;
    while (rc == 0 &&
           (r = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
        if (r != 0) {
            rc = r;
            fprintf(stderr, "%s: %s: root directory entry %" PRIu32 ": %s\n",
                    shmobj_tool_prog, t->arg, cur - 1, shmobj_strerror(r));
            break;
        }
        if (!first)
            fputc(',', f);
        first = false;
        shmobj_tool_json_name(f, ri.name);
        fputc(':', f);
        r = dump_root(seg, &ri, f, entries);
        if (r == SHMOBJ_ESTALE) {
            fputs("{\"$stale\":true}", f);
        } else if (r != 0) {
            rc = r;
            fprintf(stderr, "%s: %s: root '%s': %s\n", shmobj_tool_prog, t->arg,
                    ri.name, shmobj_strerror(r));
        }
    }
    fputc('}', f);
    return rc;
}

int shmobj_tool_dump(int argc, char **argv)
{
    bool pretty = false;
    uint64_t entries = 1000;
    const char *args[2];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (shmobj_tool_is_help(argv[i]))
            return shmobj_tool_usage(usage_dump, false);
        int o = shmobj_tool_entries_opt("dump", usage_dump, argc, argv, &i, &entries);
        if (o < 0)
            return EXIT_CANNOT;
        if (o > 0)
            continue;
        if (strcmp(argv[i], "--pretty") == 0 || strcmp(argv[i], "-p") == 0)
            pretty = true;
        else if (strcmp(argv[i], "--json") == 0)
            continue;
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return shmobj_tool_usage_bad("dump", usage_dump, "unknown option '%s'",
                                         argv[i]);
        else if (nargs < 2)
            args[nargs++] = argv[i];
        else
            return shmobj_tool_usage_bad("dump", usage_dump, "too many arguments");
    }
    if (nargs < 1)
        return shmobj_tool_usage_bad("dump", usage_dump, "NAME missing");
    struct target t;
    if (!shmobj_tool_target_parse(args[0], &t))
        return shmobj_tool_why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = shmobj_tool_attach(&t, SHMOBJ_SEGMENT_RDONLY, &seg);
    if (status != 0)
        return status;
    /* Compact JSON into memory first: --pretty re-indents it, and a dump
     * that fails half-way prints nothing but its error. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", shmobj_tool_prog, strerror(errno));
        shmobj_segment_close(seg);
        return EXIT_CANNOT;
    }
    int rc = nargs == 2 ? dump_one(seg, &t, args[1], f, entries)
                        : dump_all(seg, &t, f, entries);
    if (fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "%s: %s\n", shmobj_tool_prog, strerror(errno));
        rc = SHMOBJ_ENOMEM;
    }
    if (rc == 0) {
        if (pretty)
            shmobj_tool_json_pretty(text, len, stdout);
        else
            fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
    }
    free(text);
    shmobj_segment_close(seg);
    if (rc == 0)
        return 0;
    return rc == SHMOBJ_ECORRUPT ? EXIT_DAMAGED : EXIT_CANNOT;
}
