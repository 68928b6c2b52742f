/* Indenting compact JSON for `shmobj dump --pretty`.
 *
 * The library writes compact JSON only (shmobj_view_json_write()); the
 * tool re-indents that text instead of printing values a second way, so
 * both outputs carry exactly the same values. The input is trusted to be
 * the library's output: the only state kept is whether the scan is inside
 * a string (where brackets, commas and colons are text) and the depth. */
#include <stdbool.h>

#include "shmobj-tool.h"

static void newline(FILE *out, unsigned depth)
{
    fputc('\n', out);
    for (unsigned i = 0; i < depth; i++)
        fputs("  ", out);
}

void shmobj_tool_json_pretty(const char *text, size_t len, FILE *out)
{
    unsigned depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            fputc(c, out);
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        switch (c) {
        case '"':
            in_str = true;
            fputc(c, out);
            break;
        case '{':
        case '[':
            fputc(c, out);
            /* an empty container stays on one line */
            if (i + 1 < len && (text[i + 1] == '}' || text[i + 1] == ']')) {
                fputc(text[++i], out);
                break;
            }
            newline(out, ++depth);
            break;
        case '}':
        case ']':
            newline(out, depth > 0 ? --depth : 0);
            fputc(c, out);
            break;
        case ',':
            fputc(c, out);
            newline(out, depth);
            break;
        case ':':
            fputs(": ", out);
            break;
        default:
            fputc(c, out);
            break;
        }
    }
}
