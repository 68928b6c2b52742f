/* JSON dump of any value, for debugging and tools.
 *
 * Invariants kept here:
 * - The output is valid JSON whatever the segment holds: strings are
 *   escaped and invalid UTF-8 becomes U+FFFD; non-finite doubles print as
 *   null; buffers print their dtype and shape only.
 * - The walk reads through views only (checked paths) and is bounded in
 *   depth by SHMOBJ_OBJ_MAXDEPTH; a damaged or too-deep graph stops it with
 *   an error.
 * - The work and the output are bounded by the segment's size, whatever
 *   the graph: every value printed costs one unit of a budget of (mapped
 *   bytes) / 16 + 64, every string or bytes key or string value one more
 *   per 64 bytes (as shmobj_obj_check() charges strings), so a damaged
 *   graph whose slots all name one large string stops after printing it a
 *   bounded number of times. A well-formed graph costs less than the
 *   budget: each of its values takes 16 bytes of the segment and each
 *   string its bytes.
 * - Into a caller's buffer, output past the capacity is counted but not
 *   written, so the caller learns the length it needs. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer-interface.h"
#include "content-check.h"
#include "shmobj/table.h"

struct out {
    FILE *f;     /* stream, or NULL for the buffer */
    char *buf;   /* caller's buffer */
    size_t cap;  /* its bytes */
    size_t len;  /* bytes produced so far (also beyond cap) */
    int err;     /* first stream error */
    uint64_t budget; /* units left (a value, or 64 bytes of a string): bounds
                      * the work on a damaged graph whose items share
                      * subtrees or strings */
    struct shmobj__space *sp; /* the view's (NULL: none), to widen the budget */
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->f != NULL) {
        if (o->err == 0 && n > 0 && fwrite(s, 1, n, o->f) != n)
            o->err = SHMOBJ_ESYS;
    } else if (o->len < o->cap) {
        size_t room = o->cap - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    size_t need;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        need = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        need = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        need = 4;
    else
        return 0;
    if (n < need)
        return 0;
    return shmobj__utf8_ok(s, need) ? need : 0;
}

static void put_str(struct out *o, const uint8_t *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put(o, "\"", 1);
    size_t run = 0; /* start of bytes that need no escape */
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        size_t sl = c >= 0x80 ? utf8_seq(s + i, n - i) : 0;
        if (sl > 0) {
            i += sl; /* valid multi-byte UTF-8 passes through */
            continue;
        }
        put(o, (const char *)s + run, i - run);
        char esc[7];
        switch (c) {
        case '"': puts_(o, "\\\""); break;
        case '\\': puts_(o, "\\\\"); break;
        case '\n': puts_(o, "\\n"); break;
        case '\r': puts_(o, "\\r"); break;
        case '\t': puts_(o, "\\t"); break;
        case '\b': puts_(o, "\\b"); break;
        case '\f': puts_(o, "\\f"); break;
        default:
            if (c >= 0x80) {
                puts_(o, "\\ufffd");
            } else {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                put(o, esc, 6);
            }
        }
        i++;
        run = i;
    }
    put(o, (const char *)s + run, n - run);
    put(o, "\"", 1);
}

static void put_hex(struct out *o, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char two[2] = {hex[p[i] >> 4], hex[p[i] & 15]};
        put(o, two, 2);
    }
}

/* Does d printed with p significant digits (d.ddde+XX) read back as d? */
static int reads_back(double d, int p, char *tmp, size_t n)
{
    snprintf(tmp, n, "%.*e", p - 1, d);
    return strtod(tmp, NULL) == d;
}

static void put_double(struct out *o, double d)
{
    char tmp[40];
    if (!isfinite(d)) {
        puts_(o, "null");
        return;
    }
    /* The fewest significant digits that read back as d. If p digits do,
     * p + 1 do too (the nearest (p+1)-digit decimal is no farther from d
     * than the nearest p-digit one, and printf and strtod round
     * correctly), so a binary search over 1..17 finds it; 17 always do. */
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (reads_back(d, mid, tmp, sizeof tmp))
            hi = mid;
        else
            lo = mid + 1;
    }
    (void)reads_back(d, lo, tmp, sizeof tmp);
    /* Positional while the decimal exponent is in [-4, 16), as %g does with
     * enough precision for every digit before the point; else d.ddde+XX. */
    const char *e = strchr(tmp, 'e');
    long x = e != NULL ? strtol(e + 1, NULL, 10) : 0;
    if (x >= -4 && x < 16)
        snprintf(tmp, sizeof tmp, "%.*g", lo > x + 1 ? lo : (int)x + 1, d);
    /* A locale with a decimal comma must not leak into JSON. */
    for (char *c = tmp; *c != '\0'; c++) {
        if (*c == ',')
            *c = '.';
    }
    puts_(o, tmp);
    if (strpbrk(tmp, ".eE") == NULL)
        puts_(o, ".0");
}

static int dump(struct out *o, const shmobj_view *v, int depth);
static int dump_key(struct out *o, const shmobj_view *k);

/* Charge n units; SHMOBJ_ECORRUPT when the budget is spent. */
static int spend(struct out *o, uint64_t n)
{
    return shmobj__work_take(o->sp, &o->budget, n);
}

/* A string, as a value or as a key. */
static int dump_str(struct out *o, const shmobj_view *v)
{
    const char *s;
    int rc = shmobj_str_get(v, &s, NULL);
    if (rc != 0)
        return rc;
    put_str(o, (const uint8_t *)s, (size_t)v->len);
    return 0;
}

/* A key printed as a JSON object key. */
static int dump_key(struct out *o, const shmobj_view *k)
{
    char tmp[32];
    int rc = spend(o, 1 + (k->type == SHMOBJ_TYPE_INT ? 0 : k->len / 64));
    if (rc != 0)
        return rc;
    switch (k->type) {
    case SHMOBJ_TYPE_STR:
        return dump_str(o, k);
    case SHMOBJ_TYPE_INT: {
        int64_t x;
        rc = shmobj_int_get(k, &x);
        if (rc != 0)
            return rc;
        snprintf(tmp, sizeof tmp, "\"%" PRId64 "\"", x);
        puts_(o, tmp);
        return 0;
    }
    case SHMOBJ_TYPE_BYTES: {
        const void *p;
        rc = shmobj_bytes_get(k, &p, NULL);
        if (rc != 0)
            return rc;
        puts_(o, "\"$bytes:");
        put_hex(o, p, (size_t)k->len);
        puts_(o, "\"");
        return 0;
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* A shape: {"$shape":{"name":"kind",...}}. */
static int dump_shape(struct out *o, const shmobj_view *v)
{
    static const char *const kinds[] = {
        [SHMOBJ_TYPE_NULL] = "any", [SHMOBJ_TYPE_BOOL] = "bool", [SHMOBJ_TYPE_INT] = "int",
        [SHMOBJ_TYPE_UINT] = "uint", [SHMOBJ_TYPE_DOUBLE] = "double",
        [SHMOBJ_TYPE_STR] = "str", [SHMOBJ_TYPE_BYTES] = "bytes", [SHMOBJ_TYPE_LINK] = "link"};
    size_t n;
    int rc = shmobj_view_len(v, &n);
    if (rc != 0)
        return rc;
    puts_(o, "{\"$shape\":{");
    for (uint32_t i = 0; i < v->count; i++) {
        shmobj_view k;
        uint8_t kind = ((const uint8_t *)v->obj)[shmobj__shape_descs() + 16 * i];
        if (i > 0)
            puts_(o, ",");
        rc = shmobj_view_key(v, i, &k);
        if (rc == 0)
            rc = dump_key(o, &k);
        if (rc != 0)
            return rc;
        puts_(o, ":\"");
        puts_(o, kind < sizeof kinds / sizeof kinds[0] && kinds[kind] != NULL ? kinds[kind] : "?");
        puts_(o, "\"");
    }
    puts_(o, "}}");
    return 0;
}

/* One field of a table's row (shmobj__table_cell). */
static int dump_cell(struct out *o, const struct shmobj__cell *c)
{
    char tmp[48];
    int64_t i;
    double d;
    switch (c->kind) {
    case SHMOBJ_TYPE_BOOL:
        puts_(o, c->bits ? "true" : "false");
        return 0;
    case SHMOBJ_TYPE_INT:
        memcpy(&i, &c->bits, sizeof i);
        snprintf(tmp, sizeof tmp, "%" PRId64, i);
        break;
    case SHMOBJ_TYPE_UINT:
        snprintf(tmp, sizeof tmp, "%" PRIu64, c->bits);
        break;
    case SHMOBJ_TYPE_DOUBLE:
        memcpy(&d, &c->bits, sizeof d);
        put_double(o, d);
        return 0;
    case SHMOBJ_TYPE_LINK:
        if (c->bits == 0)
            snprintf(tmp, sizeof tmp, "null");
        else
            snprintf(tmp, sizeof tmp, "{\"$link\":%" PRIu64 "}",
                     c->bits & ((UINT64_C(1) << 48) - 1));
        break;
    case SHMOBJ_TYPE_STR:
        put_str(o, c->p, (size_t)c->n);
        return 0;
    default: /* BYTES */
        snprintf(tmp, sizeof tmp, "{\"$bytes\":%" PRIu64, c->n);
        puts_(o, tmp);
        if (c->n <= 32) {
            puts_(o, ",\"hex\":\"");
            put_hex(o, c->p, (size_t)c->n);
            puts_(o, "\"");
        }
        puts_(o, "}");
        return 0;
    }
    puts_(o, tmp);
    return 0;
}

/* A table: {"$table":[its field names],"rows":[[a row's fields],...]}.
 * Each row is read as it is when printed; rows appended meanwhile may or
 * may not be. The names are printed once (charged as keys), and a row
 * costs its bytes / 16 units: its text is at most a few times its bytes
 * (a field takes one byte at least), so a well-formed table is printed
 * within the budget however small its rows, and the output stays linear
 * in the segment's size whatever the shape's names. */
static int dump_table(struct out *o, const shmobj_view *v)
{
    shmobj_table_info info = {.struct_size = sizeof info};
    int rc = shmobj_table_info_get(v, &info);
    if (rc != 0)
        return rc;
    puts_(o, "{\"$table\":[");
    for (uint32_t f = 0; f < v->count; f++) {
        shmobj_view k;
        if (f > 0)
            puts_(o, ",");
        rc = shmobj_view_key(v, f, &k);
        if (rc == 0)
            rc = dump_key(o, &k);
        if (rc != 0)
            return rc;
    }
    puts_(o, "],\"rows\":[");
    for (uint64_t r = 0; r < info.rows; r++) {
        /* the units of bytes [r, r + 1) x row_size: row_size < 2^17 */
        rc = spend(o, ((r + 1) * info.row_size) / 16 - (r * info.row_size) / 16);
        if (rc != 0)
            return rc;
        puts_(o, r > 0 ? ",[" : "[");
        for (uint32_t f = 0; f < v->count; f++) {
            struct shmobj__cell c;
            if (f > 0)
                puts_(o, ",");
            rc = shmobj__table_cell(v, r, f, &c);
            if (rc == 0)
                rc = dump_cell(o, &c);
            if (rc != 0)
                return rc;
        }
        puts_(o, "]");
    }
    puts_(o, "]}");
    return 0;
}

/* A scalar, read by its kind's accessor (so with its checks) into the
 * union member of that kind, then printed. */
static int dump_scalar(struct out *o, const shmobj_view *v)
{
    char tmp[48];
    union {
        int b;
        int64_t i;
        uint64_t u;
        double d;
    } x;
    int rc = v->type == SHMOBJ_TYPE_BOOL   ? shmobj_bool_get(v, &x.b)
             : v->type == SHMOBJ_TYPE_INT  ? shmobj_int_get(v, &x.i)
             : v->type == SHMOBJ_TYPE_UINT ? shmobj_uint_get(v, &x.u)
                                           : shmobj_double_get(v, &x.d);
    if (rc != 0)
        return rc;
    if (v->type == SHMOBJ_TYPE_DOUBLE) {
        put_double(o, x.d);
        return 0;
    }
    if (v->type == SHMOBJ_TYPE_BOOL)
        snprintf(tmp, sizeof tmp, "%s", x.b ? "true" : "false");
    else if (v->type == SHMOBJ_TYPE_INT)
        snprintf(tmp, sizeof tmp, "%" PRId64, x.i);
    else
        snprintf(tmp, sizeof tmp, "%" PRIu64, x.u);
    puts_(o, tmp);
    return 0;
}

static int dump(struct out *o, const shmobj_view *v, int depth)
{
    char tmp[48];
    int rc;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    rc = spend(o, 1 + (v->type == SHMOBJ_TYPE_STR ? v->len / 64 : 0));
    if (rc != 0)
        return rc;
    switch (v->type) {
    case SHMOBJ_TYPE_NULL:
        /* nothing to read, but a view of a freed slot is stale all the same */
        if (v->slot != NULL &&
            !shmobj__blk_live(shmobj__space_of_seg(v->seg), v->slot_blk, v->slot_gen))
            return SHMOBJ_ESTALE;
        puts_(o, "null");
        return 0;
    case SHMOBJ_TYPE_BOOL:
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
        return dump_scalar(o, v);
    case SHMOBJ_TYPE_STR:
        return dump_str(o, v);
    case SHMOBJ_TYPE_BYTES: {
        const void *p;
        rc = shmobj_bytes_get(v, &p, NULL);
        if (rc != 0)
            return rc;
        snprintf(tmp, sizeof tmp, "{\"$bytes\":%" PRIu64, v->len);
        puts_(o, tmp);
        if (v->len <= 32) {
            puts_(o, ",\"hex\":\"");
            put_hex(o, p, (size_t)v->len);
            puts_(o, "\"");
        }
        puts_(o, "}");
        return 0;
    }
    case SHMOBJ_TYPE_BUFFER: {
        shmobj_buffer_info info = {.struct_size = sizeof info};
        rc = shmobj_buffer_get(v, &info);
        if (rc != 0)
            return rc;
        puts_(o, "{\"$buffer\":\"");
        puts_(o, shmobj_dtype_name(info.dtype));
        puts_(o, "\",\"shape\":[");
        for (uint32_t d = 0; d < info.ndim; d++) {
            snprintf(tmp, sizeof tmp, "%s%" PRIu64, d ? "," : "", info.shape[d]);
            puts_(o, tmp);
        }
        puts_(o, "]}");
        return 0;
    }
    case SHMOBJ_TYPE_LINK: {
        /* a link is marked, never followed: links may form cycles */
        shmobj_ref r;
        rc = shmobj_link_get(v, &r);
        if (rc != 0)
            return rc;
        snprintf(tmp, sizeof tmp, "{\"$link\":%" PRIu64 "}", r & ((UINT64_C(1) << 48) - 1));
        puts_(o, tmp);
        return 0;
    }
    case SHMOBJ_TYPE_SHAPE:
        return dump_shape(o, v);
    case SHMOBJ_TYPE_TABLE:
        return dump_table(o, v);
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_SET:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_RECORD:
    case SHMOBJ_TYPE_STRUCT: {
        int obj = v->type == SHMOBJ_TYPE_DICT || v->type == SHMOBJ_TYPE_RECORD ||
                  (v->type == SHMOBJ_TYPE_STRUCT && (v->flags & SHMOBJ__VIEW_NAMES));
        /* an empty container reads no item: check its block here */
        size_t n;
        rc = shmobj_view_len(v, &n);
        if (rc != 0)
            return rc;
        puts_(o, obj ? "{" : "[");
        for (uint32_t i = 0; i < v->count; i++) {
            shmobj_view item;
            if (i > 0)
                puts_(o, ",");
            if (obj) {
                shmobj_view k;
                rc = shmobj_view_key(v, i, &k);
                if (rc == 0)
                    rc = dump_key(o, &k);
                if (rc != 0)
                    return rc;
                puts_(o, ":");
            }
            rc = shmobj_view_item(v, i, &item);
            if (rc == 0)
                rc = dump(o, &item, depth + 1);
            if (rc != 0)
                return rc;
        }
        puts_(o, obj ? "}" : "]");
        return 0;
    }
    case SHMOBJ_TYPE_MLIST: {
        /* by index: each item as it is when printed */
        puts_(o, "[");
        for (size_t i = 0;; i++) {
            shmobj_view item;
            rc = shmobj_mlist_get(v, i, &item);
            if (rc == SHMOBJ_ERANGE)
                break;
            if (rc == 0 && i > 0)
                puts_(o, ",");
            if (rc == 0)
                rc = dump(o, &item, depth + 1);
            if (rc == 0)
                rc = spend(o, 1);
            if (rc != 0)
                return rc;
        }
        puts_(o, "]");
        return 0;
    }
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET: {
        /* in insertion order, every key present throughout printed once */
        int obj = v->type == SHMOBJ_TYPE_MDICT;
        shmobj_miter it;
        rc = shmobj_miter_init(v, &it);
        if (rc != 0)
            return rc;
        puts_(o, obj ? "{" : "[");
        for (int first = 1;; first = 0) {
            shmobj_view k, item;
            rc = shmobj_miter_next(&it, &k, &item);
            if (rc == SHMOBJ_ENOTFOUND)
                break;
            if (rc == 0 && !first)
                puts_(o, ",");
            if (rc == 0)
                rc = spend(o, 1);
            if (rc == 0)
                rc = obj ? dump_key(o, &k) : dump(o, &k, depth + 1);
            if (rc == 0 && obj) {
                puts_(o, ":");
                rc = dump(o, &item, depth + 1);
            }
            if (rc != 0)
                return rc;
        }
        puts_(o, obj ? "}" : "]");
        return 0;
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

static uint64_t budget_of(const shmobj_view *v)
{
    /* Every value takes 16 bytes of the segment at least, every string its
     * bytes. */
    struct shmobj__space *sp = shmobj__space_of_seg(v->seg);
    return sp == NULL ? 64 : shmobj__work_budget(sp);
}

int shmobj_view_json(const shmobj_view *view, char *buf, size_t cap, size_t *len)
{
    if (view == NULL || (buf == NULL && cap != 0))
        return SHMOBJ_EINVAL;
    struct out o = {NULL, buf, cap, 0, 0, budget_of(view), shmobj__space_of_seg(view->seg)};
    int rc = dump(&o, view, 0);
    if (len != NULL)
        *len = o.len;
    if (cap > 0)
        buf[o.len < cap ? o.len : cap - 1] = '\0';
    if (rc != 0)
        return rc;
    return o.len < cap ? 0 : SHMOBJ_ENOBUFS;
}

int shmobj_view_json_write(const shmobj_view *view, FILE *f)
{
    if (view == NULL || f == NULL)
        return SHMOBJ_EINVAL;
    struct out o = {f, NULL, 0, 0, 0, budget_of(view), shmobj__space_of_seg(view->seg)};
    int rc = dump(&o, view, 0);
    if (rc == 0 && o.err != 0)
        rc = o.err;
    return rc;
}
