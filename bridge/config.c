/*
 * The configuration: `KEY VALUE` lines and `route` lines (doc/bridge.md), from a file or the command line. Every line is checked
 * whole before anything is kept, so a bad line changes nothing; names are
 * checked against the limits of what they will name (a root of the
 * segment, a JetStream stream, a durable consumer).
 */
#include "bridge-internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int shmobj_bridge_config_new(shmobj_bridge_config **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    shmobj_bridge_config *c = calloc(1, sizeof *c);
    if (c == NULL)
        return SHMOBJ_ENOMEM;
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    snprintf(c->name, sizeof c->name, "%s", host);
    *out = c;
    return 0;
}

void shmobj_bridge_config_free(shmobj_bridge_config *c)
{
    if (c == NULL)
        return;
    free(c->url);
    free(c->creds);
    free(c->tls_ca);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->routes);
    free(c);
}

static int copy_name(char *dst, size_t cap, const char *src, size_t n)
{
    if (n == 0 || n >= cap)
        return SHMOBJ_ERANGE;
    memcpy(dst, src, n);
    dst[n] = 0;
    return 0;
}

/* A durable consumer's or a stream's name: letters, digits, - and _. */
static bool plain_name(const char *s)
{
    if (*s == 0)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
            return false;
    return true;
}

void bridge__sanitize(char *s)
{
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
            *s = '_';
}

enum end_kind { END_QUEUE = 1, END_TOPIC, END_MAP, END_STREAM, END_KV };

struct end {
    int kind;
    const char *name;
    size_t name_len;
    const char *subject; /* stream ends: after the '/' */
};

static int parse_end(const char *tok, struct end *e)
{
    static const struct { const char *pfx; int kind; } kinds[] = {
        {"queue:", END_QUEUE}, {"topic:", END_TOPIC}, {"map:", END_MAP},
        {"stream:", END_STREAM}, {"kv:", END_KV}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].pfx);
        if (strncmp(tok, kinds[i].pfx, n) != 0)
            continue;
        e->kind = kinds[i].kind;
        e->name = tok + n;
        e->name_len = strlen(e->name);
        e->subject = NULL;
        if (e->kind == END_STREAM) {
            const char *slash = strchr(e->name, '/');
            if (slash == NULL || slash[1] == 0)
                return SHMOBJ_EINVAL;
            e->subject = slash + 1;
            e->name_len = (size_t)(slash - e->name);
        }
        return e->name_len > 0 ? 0 : SHMOBJ_EINVAL;
    }
    return SHMOBJ_EINVAL;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != 0 || v < lo || v > hi)
        return SHMOBJ_EINVAL;
    *out = (uint32_t)v;
    return 0;
}

static int parse_route(shmobj_bridge_config *cfg, char **tok, int ntok,
                       char *err, size_t err_len)
{
    if (ntok < 3)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                    "a route is: route SOURCE ARROW DESTINATION [OPTION=VALUE...]");
    struct route_conf r;
    memset(&r, 0, sizeof r);
    r.window = 256;
    r.batch = 64;
    r.capacity = 1024;
    r.interval_ms = 100;
    r.replicas = 1;
    r.ack_wait_ms = 10000;
    struct end a, z;
    if (parse_end(tok[0], &a) != 0 || parse_end(tok[2], &z) != 0)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                    "route ends are queue:NAME, topic:NAME, map:NAME, "
                    "stream:STREAM/SUBJECT or kv:BUCKET (got '%s' and '%s')",
                    tok[0], tok[2]);
    const char *arrow = tok[1];
    const struct end *local, *remote;
    if (strcmp(arrow, "->") == 0 && (a.kind == END_QUEUE || a.kind == END_TOPIC) &&
        z.kind == END_STREAM) {
        r.kind = a.kind == END_QUEUE ? ROUTE_QUEUE_OUT : ROUTE_TOPIC_OUT;
        local = &a, remote = &z;
    } else if (strcmp(arrow, "->") == 0 && a.kind == END_STREAM &&
               (z.kind == END_QUEUE || z.kind == END_TOPIC)) {
        r.kind = z.kind == END_QUEUE ? ROUTE_QUEUE_IN : ROUTE_TOPIC_IN;
        local = &z, remote = &a;
    } else if ((a.kind == END_MAP && z.kind == END_KV) ||
               (a.kind == END_KV && z.kind == END_MAP)) {
        r.kind = ROUTE_MAP_KV;
        local = a.kind == END_MAP ? &a : &z;
        remote = a.kind == END_MAP ? &z : &a;
        bool map_first = a.kind == END_MAP;
        if (strcmp(arrow, "<->") == 0)
            r.kv_dir = KV_BOTH;
        else if (strcmp(arrow, "->") == 0)
            r.kv_dir = map_first ? KV_EXPORT : KV_IMPORT;
        else if (strcmp(arrow, "<-") == 0)
            r.kv_dir = map_first ? KV_IMPORT : KV_EXPORT;
        else
            return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                        "a map route's arrow is ->, <- or <-> (got '%s')", arrow);
    } else {
        return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                    "no route goes %s %s %s: routes are queue|topic -> stream, "
                    "stream -> queue|topic, map ->|<-|<-> kv", tok[0], arrow, tok[2]);
    }
    if (copy_name(r.local, sizeof r.local, local->name, local->name_len) != 0)
        return bridge__fail(err, err_len, SHMOBJ_ERANGE, "local name '%s': 1..%d bytes",
                    local->name, SHMOBJ_ROOT_NAME_MAX);
    if (copy_name(r.stream, sizeof r.stream, remote->name, remote->name_len) != 0 ||
        !plain_name(r.stream))
        return bridge__fail(err, err_len, SHMOBJ_ERANGE,
                    "stream or bucket name '%.*s': 1..%d letters, digits, - or _",
                    (int)remote->name_len, remote->name, BRIDGE_NAME_MAX - 1);
    if (remote->subject != NULL &&
        copy_name(r.subject, sizeof r.subject, remote->subject,
                  strlen(remote->subject)) != 0)
        return bridge__fail(err, err_len, SHMOBJ_ERANGE, "subject '%s' too long",
                    remote->subject);
    static const char *const kind_word[] = {"", "out", "topic-out", "in",
                                            "topic-in", "kv"};
    snprintf(r.id, sizeof r.id, "%.40s.%s", r.local, kind_word[r.kind]);
    for (int i = 3; i < ntok; i++) {
        char *eq = strchr(tok[i], '=');
        if (eq == NULL)
            return bridge__fail(err, err_len, SHMOBJ_EINVAL, "route option '%s' is not KEY=VALUE",
                        tok[i]);
        *eq = 0;
        const char *k = tok[i], *v = eq + 1;
        int rc = 0;
        if (strcmp(k, "name") == 0)
            rc = copy_name(r.id, sizeof r.id, v, strlen(v));
        else if (strcmp(k, "durable") == 0)
            rc = copy_name(r.durable, sizeof r.durable, v, strlen(v)) != 0 ||
                         !plain_name(r.durable) ? SHMOBJ_EINVAL : 0;
        else if (strcmp(k, "dead") == 0)
            rc = copy_name(r.dead, sizeof r.dead, v, strlen(v));
        else if (strcmp(k, "window") == 0)
            rc = parse_u32(v, 1, 65536, &r.window);
        else if (strcmp(k, "batch") == 0)
            rc = parse_u32(v, 1, 4096, &r.batch);
        else if (strcmp(k, "capacity") == 0)
            rc = parse_u32(v, 2, 1u << 20, &r.capacity);
        else if (strcmp(k, "ack-wait-ms") == 0)
            rc = parse_u32(v, 100, 3600000, &r.ack_wait_ms);
        else if (strcmp(k, "replicas") == 0)
            rc = parse_u32(v, 1, 5, &r.replicas);
        else if (strcmp(k, "interval-ms") == 0)
            rc = parse_u32(v, 1, 3600000, &r.interval_ms);
        else
            rc = SHMOBJ_ENOTFOUND;
        if (rc == SHMOBJ_ENOTFOUND)
            return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                        "unknown route option '%s' (name, durable, dead, window, "
                        "batch, capacity, replicas, ack-wait-ms, interval-ms)", k);
        if (rc != 0)
            return bridge__fail(err, err_len, SHMOBJ_EINVAL, "bad value '%s' of route option %s",
                        v, k);
    }
    struct route_conf *nr = realloc(cfg->routes, (cfg->nroutes + 1) * sizeof *nr);
    if (nr == NULL)
        return SHMOBJ_ENOMEM;
    for (unsigned i = 0; i < cfg->nroutes; i++)
        if (strcmp(nr[i].id, r.id) == 0) {
            cfg->routes = nr;
            return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                        "two routes named '%s': give one a name=NAME", r.id);
        }
    nr[cfg->nroutes++] = r;
    cfg->routes = nr;
    return 0;
}

static int set_str(char **dst, const char *v)
{
    char *s = strdup(v);
    if (s == NULL)
        return SHMOBJ_ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

int shmobj_bridge_config_line(shmobj_bridge_config *cfg, const char *line,
                              char *err, size_t err_len)
{
    if (cfg == NULL || line == NULL)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no configuration or no line");
    char buf[1024];
    if (strlen(line) >= sizeof buf)
        return bridge__fail(err, err_len, SHMOBJ_ERANGE, "line longer than %zu bytes",
                    sizeof buf - 1);
    strcpy(buf, line);
    char *tok[32];
    int ntok = 0;
    for (char *s = strtok(buf, " \t\r\n"); s != NULL; s = strtok(NULL, " \t\r\n")) {
        if (ntok == 0 && s[0] == '#')
            return 0;
        if (ntok == 32)
            return bridge__fail(err, err_len, SHMOBJ_EINVAL, "more than 32 words on a line");
        tok[ntok++] = s;
    }
    if (ntok == 0)
        return 0;
    const char *k = tok[0];
    if (strcmp(k, "route") == 0)
        return parse_route(cfg, tok + 1, ntok - 1, err, err_len);
    if (ntok != 2)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "'%s' takes one value", k);
    const char *v = tok[1];
    if (strcmp(k, "segment") == 0)
        return copy_name(cfg->segment, sizeof cfg->segment, v, strlen(v)) == 0
                   ? 0 : bridge__fail(err, err_len, SHMOBJ_ERANGE, "segment name too long");
    if (strcmp(k, "name") == 0) {
        if (copy_name(cfg->name, sizeof cfg->name, v, strlen(v)) != 0 || !plain_name(v))
            return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                        "bridge name '%s': 1..%d letters, digits, - or _", v,
                        BRIDGE_NAME_MAX - 1);
        return 0;
    }
    if (strcmp(k, "url") == 0)
        return set_str(&cfg->url, v);
    if (strcmp(k, "creds") == 0)
        return set_str(&cfg->creds, v);
    if (strcmp(k, "tls-ca") == 0)
        return set_str(&cfg->tls_ca, v);
    if (strcmp(k, "tls-cert") == 0)
        return set_str(&cfg->tls_cert, v);
    if (strcmp(k, "tls-key") == 0)
        return set_str(&cfg->tls_key, v);
    if (strcmp(k, "tls") == 0) {
        if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
            return bridge__fail(err, err_len, SHMOBJ_EINVAL, "tls is on or off");
        cfg->tls = strcmp(v, "on") == 0;
        return 0;
    }
    return bridge__fail(err, err_len, SHMOBJ_EINVAL,
                "unknown key '%s' (segment, url, creds, tls, tls-ca, tls-cert, "
                "tls-key, name, route)", k);
}

int shmobj_bridge_config_file(shmobj_bridge_config *cfg, const char *path,
                              char *err, size_t err_len)
{
    if (cfg == NULL || path == NULL)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no configuration or no path");
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        int e = errno;
        bridge__fail(err, err_len, 0, "%s: %s", path, strerror(e));
        errno = e;
        return e == ENOENT ? SHMOBJ_ENOTFOUND : SHMOBJ_ESYS;
    }
    char line[1024], sub[768];
    int rc = 0;
    for (unsigned n = 1; fgets(line, sizeof line, f) != NULL; n++) {
        rc = shmobj_bridge_config_line(cfg, line, sub, sizeof sub);
        if (rc != 0) {
            bridge__fail(err, err_len, rc, "%s:%u: %s", path, n, sub);
            break;
        }
    }
    fclose(f);
    return rc;
}
