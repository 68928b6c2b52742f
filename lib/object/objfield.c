/* Typed reads of a field by name: shmobj_field_get() followed by the
 * scalar read of its type, for callers that know a record's layout and
 * want one call per field. They keep no state and add no rule: each is the
 * two calls it replaces, so their errors are the union of both. */
#include "shmobj/error.h"
#include "shmobj/object.h"

int shmobj_field_int_get(const shmobj_view *view, const char *name, int64_t *out)
{
    shmobj_view f;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_int_get(&f, out);
}

int shmobj_field_uint_get(const shmobj_view *view, const char *name, uint64_t *out)
{
    shmobj_view f;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_uint_get(&f, out);
}

int shmobj_field_double_get(const shmobj_view *view, const char *name, double *out)
{
    shmobj_view f;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_double_get(&f, out);
}

int shmobj_field_bool_get(const shmobj_view *view, const char *name, int *out)
{
    shmobj_view f;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_bool_get(&f, out);
}

int shmobj_field_str_get(const shmobj_view *view, const char *name,
                         const char **s, size_t *len)
{
    shmobj_view f;
    if (s == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_field_get(view, name, &f);
    return rc != 0 ? rc : shmobj_str_get(&f, s, len);
}
