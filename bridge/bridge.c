/*
 * A bridge's life: attach to the segment, connect to NATS (credentials and
 * TLS as the C client takes them, reconnecting for ever once connected),
 * start one thread per route, report counters, stop. Errors at start are
 * told in a sentence with the server's own words (a refused credential is
 * SHMOBJ_EACCES before any route starts); after the start a lost server is
 * no error: the client reconnects and the routes retry what was not
 * acknowledged.
 */
#include "bridge-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t bridge__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bridge__log(struct shmobj_bridge *b, const char *fmt, ...)
{
    if (b->log == NULL)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&b->log_lock);
    b->log(b->log_arg, line);
    pthread_mutex_unlock(&b->log_lock);
}

void bridge__route_error(struct route *r, const char *fmt, ...)
{
    char msg[sizeof r->err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->b->log_lock);
    memcpy(r->err, msg, sizeof msg);
    pthread_mutex_unlock(&r->b->log_lock);
    bridge__log(r->b, "route %s: %s", r->c->id, msg);
}

int bridge__status_of_nats(natsStatus s)
{
    switch (s) {
    case NATS_OK: return 0;
    case NATS_NO_MEMORY: return SHMOBJ_ENOMEM;
    case NATS_TIMEOUT: return SHMOBJ_ETIMEDOUT;
    case NATS_NOT_PERMITTED:
    case NATS_CONNECTION_AUTH_FAILED: return SHMOBJ_EACCES;
    case NATS_INVALID_ARG: return SHMOBJ_EINVAL;
    case NATS_NOT_FOUND: return SHMOBJ_ENOTFOUND;
    case NATS_MAX_PAYLOAD: return SHMOBJ_ERANGE;
    case NATS_NO_SERVER_SUPPORT: return SHMOBJ_ENOTSUP;
    default: return SHMOBJ_ESYS;
    }
}

/* The stream of a route: made when missing, with the route's subject and
 * a de-duplication window of 2 minutes (JetStream's default); an existing
 * stream is used as it is. */
int bridge__stream_ensure(struct route *r, jsCtx *js, bool wildcard_ok)
{
    (void)wildcard_ok;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, r->c->stream, NULL, &jerr);
    if (s == NATS_OK) {
        jsStreamInfo_Destroy(si);
        return 0;
    }
    if (s != NATS_NOT_FOUND)
        goto bad;
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = r->c->stream;
    const char *subj[1] = {r->c->subject};
    sc.Subjects = subj;
    sc.SubjectsLen = 1;
    sc.Duplicates = 120 * (int64_t)1000000000;
    sc.Replicas = r->c->replicas;
    s = js_AddStream(&si, js, &sc, NULL, &jerr);
    if (s == NATS_OK) {
        jsStreamInfo_Destroy(si);
        return 0;
    }
    /* another bridge made it meanwhile */
    if (js_GetStreamInfo(&si, js, r->c->stream, NULL, NULL) == NATS_OK) {
        jsStreamInfo_Destroy(si);
        return 0;
    }
bad:
    bridge__route_error(r, "stream %s: %s (%s)", r->c->stream, natsStatus_GetText(s),
                        nats_GetLastError(NULL));
    return bridge__status_of_nats(s) != SHMOBJ_ESYS ? bridge__status_of_nats(s)
                                                     : SHMOBJ_ESYS;
}

static void on_disconnect(natsConnection *nc, void *arg)
{
    (void)nc;
    struct shmobj_bridge *b = arg;
    atomic_fetch_add(&b->disconnects, 1);
    if (!atomic_load(&b->stop)) /* not the bridge's own close */
        bridge__log(b, "disconnected from the NATS server; reconnecting");
}

static void on_reconnect(natsConnection *nc, void *arg)
{
    (void)nc;
    struct shmobj_bridge *b = arg;
    atomic_fetch_add(&b->reconnects, 1);
    bridge__log(b, "reconnected to the NATS server");
}

/* The client's callbacks run on its own thread, after the call that
 * caused them returned: the closed one comes last, and only then may the
 * bridge they are given be freed. */
static void on_closed(natsConnection *nc, void *arg)
{
    (void)nc;
    struct shmobj_bridge *b = arg;
    atomic_store(&b->closed, true);
}

int bridge__fail(char *err, size_t err_len, int rc, const char *fmt, ...)
{
    if (err != NULL && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int connect_nats(struct shmobj_bridge *b, char *err, size_t err_len)
{
    const struct shmobj_bridge_config *c = b->conf;
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    const char *what = "options";
    if (s == NATS_OK) {
        /* a comma-separated list: every server of a cluster */
        char *urls = strdup(c->url);
        const char *list[16];
        int n = 0;
        if (urls == NULL)
            s = NATS_NO_MEMORY;
        for (char *p = urls ? strtok(urls, ",") : NULL; p != NULL && n < 16;
             p = strtok(NULL, ","))
            list[n++] = p;
        if (s == NATS_OK)
            s = natsOptions_SetServers(o, list, n);
        free(urls);
        what = "url";
    }
    if (s == NATS_OK && c->creds != NULL && access(c->creds, R_OK) != 0) {
        int e = errno;
        natsOptions_Destroy(o);
        return bridge__fail(err, err_len, e == ENOENT ? SHMOBJ_ENOTFOUND : SHMOBJ_EACCES,
                    "credentials file %s: %s", c->creds, strerror(e));
    }
    if (s == NATS_OK && c->creds != NULL) {
        s = natsOptions_SetUserCredentialsFromFiles(o, c->creds, NULL);
        what = "credentials file";
    }
    if (s == NATS_OK && (c->tls || c->tls_ca || c->tls_cert)) {
        s = natsOptions_SetSecure(o, true);
        what = "tls";
    }
    if (s == NATS_OK && c->tls_ca != NULL) {
        s = natsOptions_LoadCATrustedCertificates(o, c->tls_ca);
        what = "tls-ca";
    }
    if (s == NATS_OK && (c->tls_cert != NULL || c->tls_key != NULL)) {
        s = natsOptions_LoadCertificatesChain(o, c->tls_cert, c->tls_key);
        what = "tls-cert/tls-key";
    }
    if (s == NATS_OK) {
        what = "options";
        s = natsOptions_SetName(o, c->name);
    }
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(o, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(o, 100);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, 2000);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(o, on_disconnect, b);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(o, on_reconnect, b);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(o, on_closed, b);
    if (s == NATS_OK) {
        what = "connect";
        s = natsConnection_Connect(&b->nc, o);
    }
    natsOptions_Destroy(o);
    if (s == NATS_OK)
        return 0;
    const char *text = nats_GetLastError(NULL);
    int rc = bridge__status_of_nats(s);
    if (text != NULL && (strstr(text, "Authorization") || strstr(text, "authorization") ||
                         strstr(text, "Authentication")))
        rc = SHMOBJ_EACCES;
    if (s == NATS_NO_SERVER)
        rc = SHMOBJ_ETIMEDOUT;
    return bridge__fail(err, err_len, rc, "NATS %s (%s): %s%s%s", what, c->url,
                natsStatus_GetText(s), text ? ": " : "", text ? text : "");
}

static void log_stderr_free(struct shmobj_bridge *b)
{
    pthread_mutex_destroy(&b->log_lock);
}

void shmobj_bridge_stop(shmobj_bridge *b)
{
    if (b == NULL)
        return;
    atomic_store(&b->stop, true);
    for (unsigned i = 0; i < b->nroutes; i++)
        if (b->routes[i].started)
            pthread_join(b->routes[i].thread, NULL);
    /* closed first: no ack handler runs after this, so the rings can go;
     * the disconnected and closed callbacks may still be queued: wait
     * (bounded) until the closed one, the last, ran */
    if (b->nc != NULL) {
        natsConnection_Close(b->nc);
        for (unsigned ms = 0; ms < 5000 && !atomic_load(&b->closed); ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    for (unsigned i = 0; i < b->nroutes; i++) {
        struct route *r = &b->routes[i];
        if (r->js != NULL)
            jsCtx_Destroy(r->js);
        pthread_mutex_destroy(&r->lock);
        free(r->ring);
    }
    if (b->nc != NULL)
        natsConnection_Destroy(b->nc);
    shmobj_segment_close(b->seg);
    free(b->routes);
    shmobj_bridge_config_free(b->conf);
    log_stderr_free(b);
    free(b);
}

static int copy_conf(const shmobj_bridge_config *in, shmobj_bridge_config **out)
{
    shmobj_bridge_config *c = calloc(1, sizeof *c);
    if (c == NULL)
        return SHMOBJ_ENOMEM;
    *c = *in;
    c->url = in->url ? strdup(in->url) : NULL;
    c->creds = in->creds ? strdup(in->creds) : NULL;
    c->tls_ca = in->tls_ca ? strdup(in->tls_ca) : NULL;
    c->tls_cert = in->tls_cert ? strdup(in->tls_cert) : NULL;
    c->tls_key = in->tls_key ? strdup(in->tls_key) : NULL;
    c->routes = malloc((in->nroutes ? in->nroutes : 1) * sizeof *c->routes);
    if ((in->url && !c->url) || (in->creds && !c->creds) || (in->tls_ca && !c->tls_ca) ||
        (in->tls_cert && !c->tls_cert) || (in->tls_key && !c->tls_key) || !c->routes) {
        shmobj_bridge_config_free(c);
        return SHMOBJ_ENOMEM;
    }
    memcpy(c->routes, in->routes, in->nroutes * sizeof *c->routes);
    for (unsigned i = 0; i < c->nroutes; i++)
        if (c->routes[i].durable[0] == 0) {
            snprintf(c->routes[i].durable, sizeof c->routes[i].durable, "%.30s-%.30s",
                     c->name, c->routes[i].id);
            bridge__sanitize(c->routes[i].durable);
        }
    *out = c;
    return 0;
}

int shmobj_bridge_start(const shmobj_bridge_config *cfg, shmobj_bridge_log_fn log,
                        void *log_arg, shmobj_bridge **out, char *err, size_t err_len)
{
    if (cfg == NULL || out == NULL)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no configuration");
    if (cfg->segment[0] == 0)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no segment given (segment NAME)");
    if (cfg->url == NULL)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no NATS server given (url URL)");
    if (cfg->nroutes == 0)
        return bridge__fail(err, err_len, SHMOBJ_EINVAL, "no route given (route ...)");
    struct shmobj_bridge *b = calloc(1, sizeof *b);
    if (b == NULL)
        return SHMOBJ_ENOMEM;
    pthread_mutex_init(&b->log_lock, NULL);
    b->log = log;
    b->log_arg = log_arg;
    int rc = copy_conf(cfg, &b->conf);
    if (rc != 0) {
        log_stderr_free(b);
        free(b);
        return rc;
    }
    b->routes = calloc(cfg->nroutes, sizeof *b->routes);
    if (b->routes == NULL) {
        shmobj_bridge_stop(b);
        return SHMOBJ_ENOMEM;
    }
    b->nroutes = cfg->nroutes;
    for (unsigned i = 0; i < b->nroutes; i++) {
        b->routes[i].b = b;
        b->routes[i].c = &b->conf->routes[i];
        pthread_mutex_init(&b->routes[i].lock, NULL);
    }
    rc = shmobj_segment_open(b->conf->segment, SHMOBJ_BACKEND_SHM, 5000000000, &b->seg);
    if (rc != 0) {
        bridge__fail(err, err_len, rc, "segment %s: %s", b->conf->segment, shmobj_strerror(rc));
        shmobj_bridge_stop(b);
        return rc;
    }
    rc = connect_nats(b, err, err_len);
    if (rc == 0) {
        /* JetStream must answer before any route starts */
        jsCtx *js = NULL;
        jsAccountInfo *ai = NULL;
        jsErrCode jerr = 0;
        natsStatus s = natsConnection_JetStream(&js, b->nc, NULL);
        /* a cluster that is still electing its JetStream leader answers
         * late: up to 10 s */
        int64_t until = bridge__now_ns() + 10000000000;
        while (s == NATS_OK) {
            s = js_GetAccountInfo(&ai, js, NULL, &jerr);
            if ((s != NATS_TIMEOUT && s != NATS_NO_RESPONDERS) || bridge__now_ns() > until)
                break;
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);
        }
        if (s == NATS_TIMEOUT) {
            /* a server (or cluster) that answers slowly: the routes retry */
            bridge__log(b, "JetStream did not answer within 10 s; the routes will retry");
        } else if (s != NATS_OK) {
            const char *text = nats_GetLastError(NULL);
            rc = bridge__fail(err, err_len, s == NATS_NO_RESPONDERS || s == NATS_NOT_FOUND ||
                                        jerr == JSNotEnabledErr ||
                                        jerr == JSNotEnabledForAccountErr
                                        ? SHMOBJ_ENOTSUP : SHMOBJ_ESYS,
                      "JetStream at %s: %s%s%s (is the server run with -js?)",
                      b->conf->url, natsStatus_GetText(s), text ? ": " : "",
                      text ? text : "");
        }
        jsAccountInfo_Destroy(ai);
        jsCtx_Destroy(js);
    }
    if (rc != 0) {
        shmobj_bridge_stop(b);
        return rc;
    }
    for (unsigned i = 0; i < b->nroutes; i++) {
        struct route *r = &b->routes[i];
        void *(*fn)(void *) = r->c->kind == ROUTE_QUEUE_OUT || r->c->kind == ROUTE_TOPIC_OUT
                                  ? bridge__route_out
                              : r->c->kind == ROUTE_MAP_KV ? bridge__route_kv
                                                           : bridge__route_in;
        if (pthread_create(&r->thread, NULL, fn, r) != 0) {
            rc = bridge__fail(err, err_len, SHMOBJ_ESYS, "cannot start a thread: %s",
                      strerror(errno));
            shmobj_bridge_stop(b);
            return rc;
        }
        r->started = true;
    }
    bridge__log(b, "bridge %s: segment %s, %u route%s, NATS %s", b->conf->name,
                b->conf->segment, b->nroutes, b->nroutes == 1 ? "" : "s", b->conf->url);
    *out = b;
    return 0;
}

unsigned shmobj_bridge_route_count(const shmobj_bridge *b)
{
    return b ? b->nroutes : 0;
}

int shmobj_bridge_stats_get(shmobj_bridge *b, unsigned i, shmobj_bridge_stats *st,
                            const char **name)
{
    if (b == NULL || st == NULL)
        return SHMOBJ_EINVAL;
    if (i >= b->nroutes)
        return SHMOBJ_ERANGE;
    struct route_stats *s = &b->routes[i].st;
    st->msgs = atomic_load(&s->msgs);
    st->bytes = atomic_load(&s->bytes);
    st->inflight = atomic_load(&s->inflight);
    st->retried = atomic_load(&s->retried);
    st->failed = atomic_load(&s->failed);
    if (name != NULL)
        *name = b->routes[i].c->id;
    return 0;
}

int shmobj_bridge_status_line(shmobj_bridge *b, char *buf, size_t cap)
{
    if (b == NULL || buf == NULL || cap == 0)
        return SHMOBJ_EINVAL;
    size_t n = 0;
    buf[0] = 0;
    n += (size_t)snprintf(buf, cap, "bridge %s%s", b->conf->name,
                          natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED
                              ? "" : " (reconnecting)");
    for (unsigned i = 0; i < b->nroutes && n < cap; i++) {
        shmobj_bridge_stats st;
        const char *name;
        shmobj_bridge_stats_get(b, i, &st, &name);
        pthread_mutex_lock(&b->log_lock);
        n += (size_t)snprintf(buf + n, cap - n,
                              " | %s msgs=%llu bytes=%llu inflight=%llu retried=%llu "
                              "failed=%llu%s%s",
                              name, (unsigned long long)st.msgs,
                              (unsigned long long)st.bytes,
                              (unsigned long long)st.inflight,
                              (unsigned long long)st.retried,
                              (unsigned long long)st.failed,
                              b->routes[i].err[0] ? " last-error=" : "",
                              b->routes[i].err);
        pthread_mutex_unlock(&b->log_lock);
    }
    return 0;
}

int shmobj_bridge_check(shmobj_bridge *b)
{
    if (b == NULL)
        return SHMOBJ_EINVAL;
    return atomic_load(&b->failed_rc);
}

int shmobj_bridge_obj_encode(shmobj_segment *seg, shmobj_ref ref, void **data,
                             size_t *len)
{
    if (seg == NULL || data == NULL || len == NULL)
        return SHMOBJ_EINVAL;
    struct bridge_buf buf = {NULL, 0, 0, SIZE_MAX / 2};
    int rc = bridge__cbor_encode(seg, ref, &buf);
    if (rc != 0) {
        free(buf.data);
        return rc;
    }
    *data = buf.data;
    *len = buf.len;
    return 0;
}

int shmobj_bridge_obj_decode(shmobj_segment *seg, const void *data, size_t len,
                             shmobj_ref *ref)
{
    if (seg == NULL || ref == NULL || (data == NULL && len > 0))
        return SHMOBJ_EINVAL;
    return bridge__cbor_decode(seg, data, len, ref);
}
