/* How the tool shows what a root holds: a map's keys and values (bytes
 * the application chose, text or not), the members of an object with the
 * size of each container (mutable ones too), and a topic's subscribers.
 *
 * The JSON written here must stay valid whatever the bytes are: strings
 * are escaped, only valid UTF-8 passes as text, anything else is hex.
 * Every listing is bounded by the caller's count, and every read goes
 * through the public API, so a damaged segment gives an error code here,
 * never a read outside it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shmobj-tool.h"

/* ---- bytes ------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if not. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t need;
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef)
        need = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 4;
    else
        return 0;
    if (n < need)
        return 0;
    for (size_t i = 1; i < need; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* overlong, surrogate and past U+10FFFF forms */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return need;
}

/* Text: valid UTF-8 whose control characters are tabs and newlines only
 * (an empty value is text too). */
static bool is_text(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
        if (p[i] == 0x7f)
            return false;
        size_t l = utf8_seq(p + i, n - i);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

static void hex(FILE *f, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", p[i]);
}

/* Text as a JSON string body (no quotes); valid UTF-8 passes as it is. */
static void json_chars(FILE *f, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

static int64_t int64_of(const unsigned char *p)
{
    int64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

void shmobj_tool_bytes_text(FILE *f, const void *p, size_t n, size_t max)
{
    const unsigned char *b = p;
    size_t shown = n < max ? n : max;
    if (is_text(b, n)) {
        /* cut at a whole character */
        while (shown < n && shown > 0 && (b[shown] & 0xc0) == 0x80)
            shown--;
        fputc('"', f);
        json_chars(f, b, shown);
        fputc('"', f);
    } else {
        fputs("0x", f);
        hex(f, b, shown);
    }
    if (shown < n)
        fprintf(f, "... (%zu bytes)", n);
    else if (n == 8 && !is_text(b, n))
        fprintf(f, " (int64 %" PRId64 ")", int64_of(b));
}

#define JSON_HEX_MAX 256

void shmobj_tool_bytes_json(FILE *f, const void *p, size_t n, bool key)
{
    const unsigned char *b = p;
    if (is_text(b, n)) {
        fputc('"', f);
        json_chars(f, b, n);
        fputc('"', f);
        return;
    }
    if (key) {
        fputs("\"$bytes:", f);
        hex(f, b, n);
        fputc('"', f);
        return;
    }
    fprintf(f, "{\"$bytes\":%zu,\"hex\":\"", n);
    hex(f, b, n < JSON_HEX_MAX ? n : JSON_HEX_MAX);
    fputc('"', f);
    if (n > JSON_HEX_MAX)
        fputs(",\"truncated\":true", f);
    if (n == 8)
        fprintf(f, ",\"int64\":%" PRId64, int64_of(b));
    fputc('}', f);
}

void shmobj_tool_json_name(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* ---- map entries ----------------------------------------------------------------- */

/* Calls fn for up to max entries; *more says whether any was left out. */
static int map_walk(shmobj_map *m, uint64_t max, bool *more,
                    void (*fn)(FILE *, const void *, size_t, const void *,
                               size_t, uint64_t, const char *),
                    FILE *f, const char *indent)
{
    shmobj_map_iter *it;
    int rc = shmobj_map_iter_open(m, &it);
    if (rc != 0)
        return rc;
    uint64_t n = 0;
    *more = false;
    for (;;) {
        const void *k, *v;
        size_t kl, vl;
        rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl);
        if (rc == SHMOBJ_ENOTFOUND) {
            rc = 0;
            break;
        }
        if (rc != 0)
            break;
        if (n >= max) {
            *more = true;
            break;
        }
        fn(f, k, kl, v, vl, n, indent);
        n++;
    }
    shmobj_map_iter_close(it);
    return rc;
}

static void entry_text(FILE *f, const void *k, size_t kl, const void *v,
                       size_t vl, uint64_t n, const char *indent)
{
    (void)n;
    fputs(indent, f);
    shmobj_tool_bytes_text(f, k, kl, 48);
    fputs(" = ", f);
    shmobj_tool_bytes_text(f, v, vl, 64);
    fputc('\n', f);
}

int shmobj_tool_map_entries_text(FILE *f, shmobj_map *m, uint64_t max,
                                 const char *indent)
{
    bool more = false;
    int rc = map_walk(m, max, &more, entry_text, f, indent);
    uint64_t count = 0;
    if (rc == 0 && more && shmobj_map_count(m, &count) == 0)
        fprintf(f, "%s... more entries (%" PRIu64 " in all; -e N or -e all "
                   "shows more)\n",
                indent, count);
    else if (rc != 0)
        fprintf(f, "%s(entries: %s)\n", indent, shmobj_strerror(rc));
    return rc;
}

static void entry_json(FILE *f, const void *k, size_t kl, const void *v,
                       size_t vl, uint64_t n, const char *indent)
{
    (void)indent;
    if (n > 0)
        fputc(',', f);
    shmobj_tool_bytes_json(f, k, kl, true);
    fputc(':', f);
    shmobj_tool_bytes_json(f, v, vl, false);
}

int shmobj_tool_map_entries_json(FILE *f, shmobj_map *m, uint64_t max)
{
    bool more = false;
    fputs("\"entries\":{", f);
    int rc = map_walk(m, max, &more, entry_json, f, "");
    fputc('}', f);
    if (more)
        fputs(",\"truncated\":true", f);
    return rc;
}

/* ---- object members ------------------------------------------------------------ */

static bool is_container(int type)
{
    switch (type) {
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_RECORD:
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        return true;
    default:
        return false;
    }
}

void shmobj_tool_value_brief(FILE *f, const shmobj_view *v)
{
    int type = shmobj_view_type(v);
    size_t len;
    if (type == SHMOBJ_TYPE_BUFFER) {
        shmobj_buffer_info bi = {.struct_size = sizeof bi};
        if (shmobj_buffer_get(v, &bi) == 0) {
            fprintf(f, "%s[", shmobj_dtype_name(bi.dtype));
            for (uint32_t d = 0; d < bi.ndim; d++)
                fprintf(f, "%s%" PRIu64, d ? "," : "", bi.shape[d]);
            fputc(']', f);
        }
        return;
    }
    if (is_container(type)) {
        int rc = shmobj_view_len(v, &len);
        if (rc == 0)
            fprintf(f, "len %zu", len);
        else
            fprintf(f, "(%s)", shmobj_strerror(rc));
        return;
    }
    /* a scalar, a string, bytes, a link: its JSON, cut */
    char buf[64];
    size_t need = 0;
    int rc = shmobj_view_json(v, buf, sizeof buf, &need);
    if (rc == 0 || rc == SHMOBJ_ENOBUFS)
        fprintf(f, "%s%s", buf, rc == SHMOBJ_ENOBUFS ? "..." : "");
    else
        fprintf(f, "(%s)", shmobj_strerror(rc));
}

static void member_line(FILE *f, const char *indent, const shmobj_view *key,
                        size_t i, const shmobj_view *item)
{
    fputs(indent, f);
    char kb[48];
    size_t need;
    if (key != NULL) {
        int rc = shmobj_view_json(key, kb, sizeof kb, &need);
        fprintf(f, "%-20s", rc == 0 ? kb : rc == SHMOBJ_ENOBUFS ? "(long key)" : "(bad key)");
    } else {
        snprintf(kb, sizeof kb, "[%zu]", i);
        fprintf(f, "%-20s", kb);
    }
    if (item == NULL) {
        fputc('\n', f);
        return;
    }
    fprintf(f, " %-7s ", shmobj_tool_type_name(shmobj_view_type(item)));
    shmobj_tool_value_brief(f, item);
    fputc('\n', f);
}

void shmobj_tool_members_text(FILE *f, const shmobj_view *v, uint64_t max,
                              const char *indent)
{
    int type = shmobj_view_type(v);
    size_t len = 0;
    if (!is_container(type) || shmobj_view_len(v, &len) != 0)
        return;
    uint64_t shown = 0;
    int rc = 0;
    if (type == SHMOBJ_TYPE_MDICT || type == SHMOBJ_TYPE_MSET) {
        shmobj_miter it;
        rc = shmobj_miter_init(v, &it);
        while (rc == 0 && shown < max) {
            shmobj_view k, item;
            rc = shmobj_miter_next(&it, &k, &item);
            if (rc == 0)
                member_line(f, indent, type == SHMOBJ_TYPE_MDICT ? &k : NULL,
                            shown, type == SHMOBJ_TYPE_MDICT ? &item : &k);
            if (rc == 0)
                shown++;
        }
        if (rc == SHMOBJ_ENOTFOUND)
            rc = 0;
    } else {
        bool keyed = type == SHMOBJ_TYPE_DICT || type == SHMOBJ_TYPE_RECORD ||
                     type == SHMOBJ_TYPE_STRUCT;
        for (size_t i = 0; rc == 0 && i < len && shown < max; i++) {
            shmobj_view k, item;
            bool has_key = keyed && shmobj_view_key(v, i, &k) == 0;
            rc = type == SHMOBJ_TYPE_MLIST ? shmobj_mlist_get(v, i, &item)
                 : type == SHMOBJ_TYPE_SET ? shmobj_view_key(v, i, &item)
                                           : shmobj_view_item(v, i, &item);
            if (rc == SHMOBJ_ERANGE) { /* a list that shrank meanwhile */
                rc = 0;
                break;
            }
            if (rc == 0) {
                member_line(f, indent, has_key ? &k : NULL, i, &item);
                shown++;
            }
        }
    }
    if (rc != 0)
        fprintf(f, "%s(%s)\n", indent, shmobj_strerror(rc));
    else if (shown < len)
        fprintf(f, "%s... %zu more (-e N or -e all shows more)\n", indent,
                len - (size_t)shown);
}

/* ---- services -------------------------------------------------------------------- */

int shmobj_tool_service_pending(shmobj_segment *seg, const char *name, uint32_t *pending)
{
    shmobj_service *svc;
    int rc = shmobj_service_open(seg, name, 0, &svc);
    if (rc != 0)
        return rc;
    rc = shmobj_service_pending(svc, pending);
    shmobj_service_close(svc);
    return rc;
}

/* ---- topic subscribers ------------------------------------------------------------- */

int shmobj_tool_topic_subs(shmobj_topic *t, shmobj_topic_sub_info **subs,
                           size_t *n)
{
    *subs = NULL;
    *n = 0;
    size_t cap = 0;
    for (int tries = 0; tries < 8; tries++) {
        size_t count = 0;
        int rc = shmobj_topic_subscribers_get(t, *subs, cap, &count);
        if (rc == 0) {
            *n = count;
            return 0;
        }
        if (rc != SHMOBJ_ENOBUFS) {
            free(*subs);
            *subs = NULL;
            return rc;
        }
        cap = count + 16; /* room for some that join meanwhile */
        shmobj_topic_sub_info *more = realloc(*subs, cap * sizeof **subs);
        if (more == NULL) {
            free(*subs);
            *subs = NULL;
            return SHMOBJ_ENOMEM;
        }
        *subs = more;
    }
    free(*subs);
    *subs = NULL;
    return SHMOBJ_EBUSY;
}

/* The attached handles, read once and read again only when a token is
 * not among them (a handle attached since): a topic of many subscribers
 * costs one walk of the process table, not one per subscriber. */
uint32_t shmobj_tool_token_pid(shmobj_segment *seg, uint32_t token)
{
    static shmobj_segment_proc procs[1024];
    static size_t n;
    static shmobj_segment *of;
    for (int round = 0; round < 2; round++) {
        if (of == seg)
            for (size_t i = 0; i < n; i++)
                if (procs[i].token == token)
                    return procs[i].pid;
        if (round == 1)
            break;
        size_t count = 0;
        int rc = shmobj_segment_procs_get(seg, procs, 1024, &count);
        if (rc != 0 && rc != SHMOBJ_ENOBUFS)
            return 0;
        n = count < 1024 ? count : 1024;
        of = seg;
    }
    return 0;
}

void shmobj_tool_sub_text(FILE *f, shmobj_segment *seg,
                          const shmobj_topic_sub_info *s)
{
    if (s->flags & SHMOBJ_TOPIC_SUB_DEAD) {
        fprintf(f, "dead (its process is gone; repair frees its record), "
                   "token %" PRIu32 ": lag %" PRIu64 ", held %" PRIu64,
                s->token, s->lag, s->held);
    } else {
        uint32_t pid = shmobj_tool_token_pid(seg, s->token);
        fprintf(f, "pid %" PRIu32 " token %" PRIu32 ": lag %" PRIu64
                   ", held %" PRIu64,
                pid, s->token, s->lag, s->held);
    }
    fprintf(f, ", missed %" PRIu64 "%s", s->missed,
            (s->flags & SHMOBJ_TOPIC_SUB_ARMED) ? ", descriptor armed" : "");
}
