/* Typed reads of a field by name: shmobj_field_get() followed by the
 * scalar read of its type, for callers that know a record's layout and
 * want one call per field. They keep no state and add no rule: each is the
 * two calls it replaces, so their errors are the union of both. */
#include "shmobj/error.h"
#include "shmobj/object.h"

/* One reader per scalar type: the field's view, then the type's read. */
#define FIELD_READER(fn, type, reader)                                        \
    int fn(const shmobj_view *view, const char *name, type *out)            \
    {                                                                        \
        shmobj_view f;                                                       \
        if (out == NULL)                                                     \
            return SHMOBJ_EINVAL;                                            \
        int rc = shmobj_field_get(view, name, &f);                           \
        return rc != 0 ? rc : reader(&f, out);                                \
    }

FIELD_READER(shmobj_field_int_get, int64_t, shmobj_int_get)
FIELD_READER(shmobj_field_uint_get, uint64_t, shmobj_uint_get)
FIELD_READER(shmobj_field_double_get, double, shmobj_double_get)
FIELD_READER(shmobj_field_bool_get, int, shmobj_bool_get)

int shmobj_field_str_get(const shmobj_view *view, const char *name,
                         const char **s, size_t *len)
{
    shmobj_view f;
    if (s == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_str_get(&f, s, len);
}
