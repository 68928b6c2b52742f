/*
 * shmobj-bridge: the command around libshmobj-bridge (doc/bridge.md). Reads a configuration file and/or `--KEY VALUE` options
 * (the same keys), starts the bridge, prints a status line every --status
 * seconds and on SIGUSR1, and stops on SIGINT or SIGTERM.
 * Exit: 0 stopped by a signal, 1 bad configuration or failed start (the
 * reason on stderr), 2 a route ended on an error.
 */
#include "shmobj-bridge.h"

#include <nats/nats.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_flag, status_flag;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        status_flag = 1;
    else
        stop_flag = 1;
}

static void log_stderr(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "shmobj-bridge: %s\n", line);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: shmobj-bridge [-c FILE] [--segment NAME] [--url URL[,URL...]]\n"
            "         [--creds FILE] [--tls on] [--tls-ca FILE] [--tls-cert FILE]\n"
            "         [--tls-key FILE] [--name ID] [--route 'SPEC']... [--status SECONDS]\n"
            "routes:  queue:Q -> stream:STREAM/SUBJECT   topic:T -> stream:STREAM/SUBJECT\n"
            "         stream:STREAM/SUBJECT -> queue:Q   stream:STREAM/SUBJECT -> topic:T\n"
            "         map:M -> kv:BUCKET (export)  map:M <- kv:BUCKET (import)  map:M <-> kv:BUCKET\n"
            "options: name= durable= dead= window= batch= capacity= replicas= ack-wait-ms= interval-ms=\n");
}

int main(int argc, char **argv)
{
    shmobj_bridge_config *cfg;
    char err[1024];
    double status_every = 0;
    if (shmobj_bridge_config_new(&cfg) != 0) {
        fprintf(stderr, "shmobj-bridge: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            shmobj_bridge_config_free(cfg);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            shmobj_bridge_config_free(cfg);
            return 1;
        }
        const char *v = argv[++i];
        int rc;
        if (strcmp(a, "-c") == 0) {
            rc = shmobj_bridge_config_file(cfg, v, err, sizeof err);
        } else if (strcmp(a, "--status") == 0) {
            char *end;
            status_every = strtod(v, &end);
            rc = *end != 0 || status_every < 0 ? -1 : 0;
            snprintf(err, sizeof err, "--status takes seconds, not '%s'", v);
        } else if (strncmp(a, "--", 2) == 0) {
            char line[1024];
            snprintf(line, sizeof line, "%s %s", a + 2, v);
            rc = shmobj_bridge_config_line(cfg, line, err, sizeof err);
        } else {
            snprintf(err, sizeof err, "unknown argument '%s'", a);
            rc = -1;
        }
        if (rc != 0) {
            fprintf(stderr, "shmobj-bridge: %s\n", err);
            shmobj_bridge_config_free(cfg);
            return 1;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    shmobj_bridge *b;
    int rc = shmobj_bridge_start(cfg, log_stderr, NULL, &b, err, sizeof err);
    shmobj_bridge_config_free(cfg);
    if (rc != 0) {
        fprintf(stderr, "shmobj-bridge: %s (%s)\n", err, shmobj_errname(rc));
        return 1;
    }
    struct timespec last;
    clock_gettime(CLOCK_MONOTONIC, &last);
    int code = 0;
    char line[4096];
    while (!stop_flag) {
        struct timespec ts = {0, 20000000}, now;
        nanosleep(&ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double since = (double)(now.tv_sec - last.tv_sec) +
                       (double)(now.tv_nsec - last.tv_nsec) / 1e9;
        if (status_flag || (status_every > 0 && since >= status_every)) {
            status_flag = 0;
            last = now;
            shmobj_bridge_status_line(b, line, sizeof line);
            printf("%s\n", line);
            fflush(stdout);
        }
        if ((rc = shmobj_bridge_check(b)) != 0) {
            fprintf(stderr, "shmobj-bridge: a route ended: %s\n", shmobj_strerror(rc));
            code = 2;
            break;
        }
    }
    shmobj_bridge_status_line(b, line, sizeof line);
    printf("%s\n", line);
    fflush(stdout);
    shmobj_bridge_stop(b);
    nats_Close(); /* the client's threads and buffers, before exit */
    return code;
}
