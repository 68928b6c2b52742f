/* Small helpers of the peer benchmark programs (C1, H1, E1), on top of
 * bench-util.h (protocol, pinning, output format, checksum): a clock in
 * seconds, exit-77 skips and fatal errors usable from deep inside a run, a
 * deterministic shuffle, exec of the C++ Boost helper next to the program,
 * and a minimal RESP client plus a private redis-server launcher.
 *
 * Redis transport: the private server listens on a unix-domain socket (and
 * on a loopback TCP port, which only names the server: the socket's path
 * is made from the port, so two servers alive at once never share a
 * path, and a client forked or exec'd with nothing but the port finds the
 * socket). Clients connect through the socket, which is what Redis
 * advises for clients on the same host and what the other local subjects
 * are compared with; BENCH_REDIS_TRANSPORT=tcp in the environment makes
 * them use the TCP port instead (for comparing the two; bench/run never
 * sets it).
 *
 * Header-only (static functions); compiles as C11 and as C++ (the Boost
 * peers include it). Nothing here is part of the library: these programs
 * measure other software, and must not depend on libshmobj.
 */
#ifndef SHMOBJ_BENCH_PEERS_UTIL_H
#define SHMOBJ_BENCH_PEERS_UTIL_H

#include "bench-util.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#if defined(__GNUC__)
#define PEERS_UNUSED __attribute__((unused))
#else
#define PEERS_UNUSED
#endif

/* Exit status meaning "subject not available here" (the runner shows it as
 * skipped). */
#define PEERS_SKIP BENCH_SKIP

PEERS_UNUSED static double peers_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Pin the calling process to the k-th allowed CPU (0 and 1 for the two
 * processes of a pair). */
PEERS_UNUSED static void peers_pin(int k)
{
    (void)bench_pin(k);
}

/* One BENCH line, in bench-util.h's format. */
PEERS_UNUSED static void peers_report(const char *workload, const char *subject,
                                      const char *metric, double value)
{
    bench_ctx ctx;
    ctx.workload = workload;
    ctx.subject = subject;
    ctx.quick = 0;
    ctx.arg = 0;
    bench_report(&ctx, metric, value);
}

/* Print the reason on stderr and exit 77 (skipped) or 1 (failed), from
 * however deep inside a run: bench-util.h's messages, then exit(). */
#define peers_skip(...) exit(bench_skip(__VA_ARGS__))
#define peers_die(...) exit(bench_fail(__VA_ARGS__))

/* Wait for a child with a deadline (seconds); kill it when it overruns.
 * Returns its exit status, or -1 when it did not exit normally. */
PEERS_UNUSED static int peers_wait_child(pid_t pid, double timeout_s)
{
    int st = bench_wait(pid, (int)(timeout_s * 1000));
    return st >= 0 && st < 128 ? st : -1;
}

/* xorshift64*: deterministic shuffles for the random-order phases. */
PEERS_UNUSED static uint64_t peers_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

PEERS_UNUSED static void peers_shuffle_u32(uint32_t *a, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(peers_rand(&s) % i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* The command line, kept by peers_main() for peers_exec_sibling(). */
PEERS_UNUSED static char **peers_argv;

/* bench_main() of a peer program that may exec a sibling with its own
 * arguments. */
PEERS_UNUSED static int peers_main(int argc, char **argv, const bench_entry *table)
{
    peers_argv = argv;
    return bench_main(argc, argv, table);
}

/* bench_main() of a helper that a listed program execs for some of its
 * subjects (the Boost peers): its own --list is empty, so no subject is
 * listed twice. */
PEERS_UNUSED static int peers_helper_main(int argc, char **argv, const bench_entry *table)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return 0;
    return bench_main(argc, argv, table);
}

/* Replace this process by the program `name` in the same directory, with
 * the same arguments (the Boost peers are separate C++ programs); exits 77
 * when it was not built. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
PEERS_UNUSED static void peers_exec_sibling(const char *name, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 64);
    char *slash = n > 0 ? (self[n] = 0, strrchr(self, '/')) : NULL;
    if (!slash || strlen(name) >= 63)
        peers_skip("cannot locate %s", name);
    strcpy(slash + 1, name);
    if (access(self, X_OK) != 0)
        peers_skip("boost: Boost.Interprocess not installed (%s not built)", name);
    fflush(stdout);
    fflush(stderr);
    execv(self, argv);
    peers_skip("exec %s: %s", self, strerror(errno));
}

/* ---- Redis: a private server and a minimal RESP client ------------------ */

struct peers_redis {
    int fd;
    char *rbuf; /* receive buffer */
    size_t rcap, rlen, rpos;
    char *wbuf; /* queued commands, flushed by peers_redis_flush */
    size_t wcap, wlen;
};

struct peers_redis_server {
    pid_t pid;
    int port;
};

/* A port nobody listens on right now (the kernel picks it). */
PEERS_UNUSED static int peers_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* The unix-domain socket of the private server that holds `port`:
 * $TMPDIR (or /tmp when unset or too long for a socket address). */
PEERS_UNUSED static void peers_redis_sock_path(int port, char *buf, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    struct sockaddr_un a;
    if (!dir || !*dir || strlen(dir) + 40 > sizeof a.sun_path)
        dir = "/tmp";
    snprintf(buf, cap, "%s/shmobj-bench-redis-%d.sock", dir, port);
}

/* Whether clients use the TCP port instead of the socket (see the top). */
PEERS_UNUSED static int peers_redis_tcp(void)
{
    const char *t = getenv("BENCH_REDIS_TRANSPORT");
    return t && strcmp(t, "tcp") == 0;
}

/* Connect to the private server of `port`: through its unix-domain
 * socket, or its TCP port with BENCH_REDIS_TRANSPORT=tcp. */
PEERS_UNUSED static int peers_redis_connect(struct peers_redis *c, int port)
{
    memset(c, 0, sizeof *c);
    int tcp = peers_redis_tcp();
    c->fd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
    if (c->fd < 0)
        return -1;
    int rc;
    if (tcp) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        rc = connect(c->fd, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        peers_redis_sock_path(port, a.sun_path, sizeof a.sun_path);
        rc = connect(c->fd, (struct sockaddr *)&a, sizeof a);
    }
    if (rc != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    if (tcp) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    c->rcap = 1 << 20;
    c->rbuf = (char *)malloc(c->rcap);
    c->wcap = 1 << 16;
    c->wbuf = (char *)malloc(c->wcap);
    if (!c->rbuf || !c->wbuf)
        peers_die("out of memory");
    return 0;
}

PEERS_UNUSED static void peers_redis_close(struct peers_redis *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->rbuf);
    free(c->wbuf);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static void peers_redis_wreserve(struct peers_redis *c, size_t more)
{
    if (c->wlen + more <= c->wcap)
        return;
    while (c->wlen + more > c->wcap)
        c->wcap *= 2;
    c->wbuf = (char *)realloc(c->wbuf, c->wcap);
    if (!c->wbuf)
        peers_die("out of memory");
}

static void peers_redis_wraw(struct peers_redis *c, const void *p, size_t n)
{
    peers_redis_wreserve(c, n);
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
}

/* Queue one command given as argc binary-safe arguments. */
PEERS_UNUSED static void peers_redis_cmdv(struct peers_redis *c, int argc,
                                          const char *const *argv, const size_t *lens)
{
    char hdr[32];
    int n = snprintf(hdr, sizeof hdr, "*%d\r\n", argc);
    peers_redis_wraw(c, hdr, (size_t)n);
    for (int i = 0; i < argc; i++) {
        n = snprintf(hdr, sizeof hdr, "$%zu\r\n", lens[i]);
        peers_redis_wraw(c, hdr, (size_t)n);
        peers_redis_wraw(c, argv[i], lens[i]);
        peers_redis_wraw(c, "\r\n", 2);
    }
}

/* Queue a command of up to 3 C-string/binary args (len 0 => strlen). */
PEERS_UNUSED static void peers_redis_cmd3(struct peers_redis *c, const char *a0,
                                          const char *a1, size_t l1,
                                          const char *a2, size_t l2)
{
    const char *argv[3] = {a0, a1, a2};
    size_t lens[3] = {strlen(a0), a1 ? (l1 ? l1 : strlen(a1)) : 0,
                      a2 ? (l2 ? l2 : strlen(a2)) : 0};
    peers_redis_cmdv(c, a2 ? 3 : (a1 ? 2 : 1), argv, lens);
}

PEERS_UNUSED static void peers_redis_flush(struct peers_redis *c)
{
    size_t off = 0;
    while (off < c->wlen) {
        ssize_t w = write(c->fd, c->wbuf + off, c->wlen - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            peers_die("redis: write: %s", strerror(errno));
        }
        off += (size_t)w;
    }
    c->wlen = 0;
}

/* Make sure at least `need` unread bytes are buffered. */
static void peers_redis_fill(struct peers_redis *c, size_t need)
{
    if (c->rlen - c->rpos >= need)
        return;
    if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    while (c->rcap < need + 1) {
        c->rcap *= 2;
        c->rbuf = (char *)realloc(c->rbuf, c->rcap);
        if (!c->rbuf)
            peers_die("out of memory");
    }
    while (c->rlen < need) {
        ssize_t r = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            peers_die("redis: read: %s", strerror(errno));
        }
        if (r == 0)
            peers_die("redis: connection closed");
        c->rlen += (size_t)r;
    }
}

/* Read one "\r\n"-terminated line; returns a pointer into the buffer
 * (valid until the next read) and its length without CRLF. */
static const char *peers_redis_line(struct peers_redis *c, size_t *len)
{
    size_t scanned = 0; /* bytes after rpos known to hold no '\n' */
    for (;;) {
        char *p = (char *)memchr(c->rbuf + c->rpos + scanned, '\n',
                                 c->rlen - c->rpos - scanned);
        if (p) {
            const char *line = c->rbuf + c->rpos;
            size_t l = (size_t)(p - line);
            if (l == 0 || line[l - 1] != '\r')
                peers_die("redis: malformed reply");
            c->rpos += l + 1;
            *len = l - 1;
            return line;
        }
        scanned = c->rlen - c->rpos;
        peers_redis_fill(c, scanned + 1);
    }
}

/* One reply element. For bulk strings `str`/`len` point into the receive
 * buffer (valid until the next read call); for integers `num` is set; for
 * arrays `num` is the element count (elements are read by further calls).
 * type: '+', '-', ':', '$' (len -1 => nil), '*'. */
struct peers_reply {
    char type;
    long long num;
    const char *str;
    long long len;
};

PEERS_UNUSED static struct peers_reply peers_redis_read(struct peers_redis *c)
{
    struct peers_reply r;
    size_t l;
    const char *line = peers_redis_line(c, &l);
    memset(&r, 0, sizeof r);
    r.type = line[0];
    switch (r.type) {
    case '+':
    case '-':
        r.str = line + 1;
        r.len = (long long)l - 1;
        if (r.type == '-')
            peers_die("redis: error reply: %.*s", (int)r.len, r.str);
        break;
    case ':':
    case '*':
        r.num = strtoll(line + 1, NULL, 10);
        break;
    case '$':
        r.len = strtoll(line + 1, NULL, 10);
        if (r.len >= 0) {
            peers_redis_fill(c, (size_t)r.len + 2);
            r.str = c->rbuf + c->rpos;
            c->rpos += (size_t)r.len + 2;
        }
        break;
    default:
        peers_die("redis: unexpected reply type '%c'", r.type);
    }
    return r;
}

/* Is an executable of this name in $PATH? */
PEERS_UNUSED static int peers_in_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        char buf[4096];
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, path, n);
            buf[n] = '/';
            strcpy(buf + n + 1, name);
            if (access(buf, X_OK) == 0)
                return 1;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return 0;
}

struct peers_redis_args {
    const char *port, *sock;
    int cpu;
};

/* The server's process: pinned, quiet, no persistence. */
PEERS_UNUSED static int peers_redis_exec(void *arg)
{
    const struct peers_redis_args *a = (const struct peers_redis_args *)arg;
    peers_pin(a->cpu);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
    }
    execlp("redis-server", "redis-server", "--port", a->port, "--bind", "127.0.0.1",
           "--unixsocket", a->sock, "--unixsocketperm", "700", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
           "--logfile", "", "--loglevel", "warning", (char *)NULL);
    return 127;
}

/* Start a private redis-server, without any persistence, pinned to `cpu`,
 * listening on a unix-domain socket (and on 127.0.0.1 at a free port, the
 * server's name: see the top); wait until it answers PING. Exits 77 when
 * redis-server is not installed or does not come up. */
PEERS_UNUSED static void peers_redis_start(struct peers_redis_server *s, int cpu)
{
    if (!peers_in_path("redis-server"))
        peers_skip("redis: redis-server not installed");
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = peers_free_port();
        if (port <= 0)
            peers_skip("redis: cannot find a free port");
        char portstr[16], sock[108];
        snprintf(portstr, sizeof portstr, "%d", port);
        peers_redis_sock_path(port, sock, sizeof sock);
        /* a server killed before it could remove its socket left the path;
         * the port was free, so no live server holds it */
        unlink(sock);
        /* bench_fork: the server never outlives the benchmark, even when
         * the benchmark is killed */
        struct peers_redis_args args = {portstr, sock, cpu};
        pid_t pid = bench_fork(peers_redis_exec, &args);
        if (pid < 0)
            peers_skip("redis: fork: %s", strerror(errno));
        double end = peers_now() + 5.0;
        while (peers_now() < end) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid)
                break; /* died: port taken or not installed; retry */
            struct peers_redis c;
            if (peers_redis_connect(&c, port) == 0) {
                peers_redis_cmd3(&c, "PING", NULL, 0, NULL, 0);
                peers_redis_flush(&c);
                struct peers_reply r = peers_redis_read(&c);
                peers_redis_close(&c);
                if (r.type == '+') {
                    s->pid = pid;
                    s->port = port;
                    return;
                }
            }
            usleep(5000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        unlink(sock);
    }
    peers_skip("redis: redis-server did not start");
}

/* SIGKILL, not SIGTERM: the server keeps nothing on disk, and a SIGTERM
 * waits for its next 10 Hz housekeeping tick (about 100 ms a run). */
PEERS_UNUSED static void peers_redis_stop(struct peers_redis_server *s)
{
    if (s->pid <= 0)
        return;
    char sock[108];
    peers_redis_sock_path(s->port, sock, sizeof sock);
    kill(s->pid, SIGKILL);
    (void)peers_wait_child(s->pid, 5.0);
    unlink(sock);
    s->pid = 0;
}

/* INFO memory -> used_memory in bytes (-1 when not found). */
PEERS_UNUSED static long long peers_redis_used_memory(struct peers_redis *c)
{
    peers_redis_cmd3(c, "INFO", "memory", 0, NULL, 0);
    peers_redis_flush(c);
    struct peers_reply r = peers_redis_read(c);
    if (r.type != '$' || r.len < 0)
        return -1;
    const char *k = "used_memory:";
    const char *end = r.str + r.len;
    for (const char *p = r.str; p + strlen(k) < end; p++) {
        if ((p == r.str || p[-1] == '\n') && memcmp(p, k, strlen(k)) == 0)
            return strtoll(p + strlen(k), NULL, 10);
    }
    return -1;
}

#endif /* SHMOBJ_BENCH_PEERS_UTIL_H */
