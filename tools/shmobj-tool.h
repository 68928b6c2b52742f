/* What the pieces of the shmobj tool share: one source per command
 * (cmd-ls.c, cmd-stat.c, cmd-dump.c, cmd-check.c, cmd-rm.c, cmd-top.c),
 * the naming of segments, messages and small formatting in shmobj.c, the
 * rendering of map entries, object members and topic subscribers in
 * render.c, and the JSON indenter in json-pretty.c. */
#ifndef SHMOBJ_TOOL_H
#define SHMOBJ_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <shmobj.h>

#define EXIT_DAMAGED 1
#define EXIT_CANNOT 2

extern const char *shmobj_tool_prog;

/* ---- naming a segment (shmobj.c) ------------------------------------------ */

/* A NAME on the command line: a POSIX shm name ("demo", "/demo" or
 * "/dev/shm/demo"), or a path to a file-backed segment (any other name
 * with a slash in it). */
struct target {
    const char *arg; /* as given, for messages */
    char name[4096];
    unsigned backend;
};

bool shmobj_tool_target_parse(const char *arg, struct target *t);
/* Say why a segment cannot be used; the exit status that goes with it. */
int shmobj_tool_why(const struct target *t, int rc);
/* Attach to look (flags: SHMOBJ_SEGMENT_RDONLY for the commands that only
 * read); a message and an exit status when that cannot be done. */
int shmobj_tool_attach(const struct target *t, unsigned flags, shmobj_segment **seg);

/* ---- usage and small formatting (shmobj.c) -------------------------------- */

bool shmobj_tool_is_help(const char *a);
int shmobj_tool_usage(const char *text, bool error);
int shmobj_tool_usage_bad(const char *cmd, const char *text, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *shmobj_tool_plural(uint64_t n);
/* "8.0 MiB"; with `tight`, "8.0MiB" (one word, for a column) */
const char *shmobj_tool_bytes(uint64_t n, char *buf, size_t len, bool tight);
const char *shmobj_tool_time(uint64_t ns, char *buf, size_t len);
const char *shmobj_tool_backend_name(unsigned b);
/* Names of enum shmobj_root_kind and enum shmobj_type values. */
const char *shmobj_tool_kind_name(unsigned kind);
const char *shmobj_tool_type_name(int type);

/* The bound of listed entries (map entries, members, subscribers) given
 * by "-e N" / "--entries N" / "--entries=N" ("all": no bound). Returns 1
 * when argv[*i] was that option (moving *i past its value), 0 when it was
 * not, -1 (after the message) when its value is bad. */
int shmobj_tool_entries_opt(const char *cmd, const char *usage, int argc,
                            char **argv, int *i, uint64_t *entries);
#define SHMOBJ_TOOL_ENTRIES_ALL UINT64_MAX

/* ---- rendering (render.c) -------------------------------------------------- */

/* Bytes of a map's key or value for people: a quoted string when they are
 * text (UTF-8 without control characters but tab and newlines), shown up
 * to `max` bytes; else hex (up to `max` bytes), and for 8 bytes the int64
 * they hold too (shmobj_map_add()'s counters). */
void shmobj_tool_bytes_text(FILE *f, const void *p, size_t n, size_t max);
/* The same as JSON: a key is a string, "$bytes:<hex>" when not text (as
 * the library writes bytes keys); a value is a string, or
 * {"$bytes":N,"hex":"..."} (the first 256 bytes, "truncated":true past
 * them) with "int64" for 8 bytes. */
void shmobj_tool_bytes_json(FILE *f, const void *p, size_t n, bool key);
/* A JSON string of a C string (root names). */
void shmobj_tool_json_name(FILE *f, const char *s);

/* Up to `max` entries of map `m` as lines "<indent>KEY = VALUE"; a last
 * line says how many more there are. Returns 0 or the iteration's error. */
int shmobj_tool_map_entries_text(FILE *f, shmobj_map *m, uint64_t max,
                                 const char *indent);
/* Up to `max` entries as the members of a JSON object ("entries":{...},
 * and "truncated":true when more were left out). */
int shmobj_tool_map_entries_json(FILE *f, shmobj_map *m, uint64_t max);

/* The size of a value for a one-line summary: "len N" for a container (a
 * mutable one too), its dtype and shape for a buffer, its JSON text
 * (cut at about 60 bytes) for a scalar or a string. */
void shmobj_tool_value_brief(FILE *f, const shmobj_view *v);
/* Up to `max` members of a container value, one a line:
 * "<indent>KEY  TYPE  BRIEF" (or "[i]" for lists and sets). */
void shmobj_tool_members_text(FILE *f, const shmobj_view *v, uint64_t max,
                              const char *indent);

/* The subscribers of a topic, in a malloc'ed array (*subs, *n); the
 * caller frees it. */
int shmobj_tool_topic_subs(shmobj_topic *t, shmobj_topic_sub_info **subs,
                           size_t *n);
/* The calls waiting in the service named `name` (opened and closed here). */
int shmobj_tool_service_pending(shmobj_segment *seg, const char *name, uint32_t *pending);
/* The pid of the handle of token `token`, 0 when none is attached. */
uint32_t shmobj_tool_token_pid(shmobj_segment *seg, uint32_t token);
/* One subscriber for people: "pid P token T: lag L, held H, missed M". */
void shmobj_tool_sub_text(FILE *f, shmobj_segment *seg,
                          const shmobj_topic_sub_info *s);

/* ---- the JSON indenter (json-pretty.c) ------------------------------------- */

/* Write compact JSON text (as shmobj_view_json_write() makes it) indented
 * by two spaces per level, one member or item per line. */
void shmobj_tool_json_pretty(const char *text, size_t len, FILE *out);

/* ---- the commands ------------------------------------------------------------ */

int shmobj_tool_ls(int argc, char **argv);
int shmobj_tool_stat(int argc, char **argv);
int shmobj_tool_dump(int argc, char **argv);
int shmobj_tool_check(int argc, char **argv);
int shmobj_tool_rm(int argc, char **argv);
int shmobj_tool_top(int argc, char **argv);

#endif /* SHMOBJ_TOOL_H */
