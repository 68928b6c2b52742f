/* What the pieces of the shmobj tool share. */
#ifndef SHMOBJ_TOOL_H
#define SHMOBJ_TOOL_H

#include <stddef.h>
#include <stdio.h>

/* Names of enum shmobj_root_kind and enum shmobj_type values. */
const char *shmobj_tool_kind_name(unsigned kind);
const char *shmobj_tool_type_name(int type);

/* Write compact JSON text (as shmobj_view_json_write() makes it) indented
 * by two spaces per level, one member or item per line. */
void shmobj_tool_json_pretty(const char *text, size_t len, FILE *out);

#endif /* SHMOBJ_TOOL_H */
