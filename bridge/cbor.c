/*
 * The wire encoding of typed objects: CBOR (RFC 8949), profile "cbor-1"
 * (doc/bridge.md, "Encoding"). An object in a segment holds offsets, so its
 * own bytes mean nothing on another host; CBOR is a standard that any
 * language decodes, is self-delimiting, and has registered tags for the
 * kinds plain JSON lacks: byte strings, sets (tag 258), typed arrays and
 * n-dimensional arrays (RFC 8746, tags 40 and 64..86). The kinds CBOR has
 * no word for get tags of this profile (SHMOBJ_CBOR_TAG_*), so the
 * receiver rebuilds the same object: a uint stays a uint, a tuple a tuple.
 *
 * Both directions bound their work: the encoder by the depth limit of the
 * library (SHMOBJ_OBJ_MAXDEPTH) and the output cap, the decoder by the
 * input length (every length is checked against the bytes left before it
 * is used) and the same depth limit. Nothing here links anything but
 * libshmobj and libc.
 */
#include "bridge-internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- output buffer ------------------------------------------------------- */

int bridge__buf_reserve(struct bridge_buf *b, size_t more)
{
    if (more > b->cap_limit || b->len > b->cap_limit - more)
        return SHMOBJ_ERANGE;
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap = cap > SIZE_MAX / 2 ? b->len + more : cap * 2;
    unsigned char *p = realloc(b->data, cap);
    if (p == NULL)
        return SHMOBJ_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

static int put_bytes(struct bridge_buf *b, const void *p, size_t n)
{
    int rc = bridge__buf_reserve(b, n);
    if (rc == 0 && n > 0) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
    return rc;
}

static int put_head(struct bridge_buf *b, unsigned major, uint64_t x)
{
    unsigned char h[9];
    size_t n;
    h[0] = (unsigned char)(major << 5);
    if (x < 24) {
        h[0] |= (unsigned char)x;
        n = 1;
    } else if (x <= 0xff) {
        h[0] |= 24;
        h[1] = (unsigned char)x;
        n = 2;
    } else if (x <= 0xffff) {
        h[0] |= 25;
        h[1] = (unsigned char)(x >> 8);
        h[2] = (unsigned char)x;
        n = 3;
    } else if (x <= 0xffffffffu) {
        h[0] |= 26;
        for (int i = 0; i < 4; i++)
            h[1 + i] = (unsigned char)(x >> (24 - 8 * i));
        n = 5;
    } else {
        h[0] |= 27;
        for (int i = 0; i < 8; i++)
            h[1 + i] = (unsigned char)(x >> (56 - 8 * i));
        n = 9;
    }
    return put_bytes(b, h, n);
}

/* RFC 8746 typed-array tags, little-endian (this library's hosts are). */
static uint64_t dtype_tag(unsigned dtype)
{
    switch (dtype) {
    case SHMOBJ_DTYPE_U8: return 64;
    case SHMOBJ_DTYPE_U16: return 69;
    case SHMOBJ_DTYPE_U32: return 70;
    case SHMOBJ_DTYPE_U64: return 71;
    case SHMOBJ_DTYPE_I8: return 72;
    case SHMOBJ_DTYPE_I16: return 77;
    case SHMOBJ_DTYPE_I32: return 78;
    case SHMOBJ_DTYPE_I64: return 79;
    case SHMOBJ_DTYPE_F32: return 85;
    case SHMOBJ_DTYPE_F64: return 86;
    case SHMOBJ_DTYPE_BOOL: return SHMOBJ_CBOR_TAG_BOOLS;
    default: return 0;
    }
}

static unsigned tag_dtype(uint64_t tag)
{
    for (unsigned d = SHMOBJ_DTYPE_I8; d <= SHMOBJ_DTYPE_BOOL; d++)
        if (dtype_tag(d) == tag)
            return d;
    return 0;
}

/* A buffer: tag 40 [shape, typed array], the elements in C order. A strided
 * buffer is gathered element by element. */
static int enc_buffer(struct bridge_buf *b, const shmobj_view *v)
{
    shmobj_buffer_info bi;
    memset(&bi, 0, sizeof bi);
    bi.struct_size = sizeof bi;
    int rc = shmobj_buffer_get(v, &bi);
    if (rc != 0)
        return rc;
    uint64_t tag = dtype_tag(bi.dtype);
    if (tag == 0 || bi.ndim > SHMOBJ_BUFFER_MAXDIM || bi.itemsize == 0)
        return SHMOBJ_ECORRUPT;
    uint64_t count = 1;
    for (uint32_t i = 0; i < bi.ndim; i++) {
        if (bi.shape[i] != 0 && count > UINT64_MAX / bi.shape[i])
            return SHMOBJ_ECORRUPT;
        count *= bi.shape[i];
    }
    if (count > bi.nbytes / bi.itemsize + (bi.nbytes == 0))
        return SHMOBJ_ECORRUPT;
    if ((rc = put_head(b, 6, 40)) != 0 || (rc = put_head(b, 4, 2)) != 0 ||
        (rc = put_head(b, 4, bi.ndim)) != 0)
        return rc;
    for (uint32_t i = 0; i < bi.ndim; i++)
        if ((rc = put_head(b, 0, bi.shape[i])) != 0)
            return rc;
    uint64_t total = count * bi.itemsize;
    if ((rc = put_head(b, 6, tag)) != 0 || (rc = put_head(b, 2, total)) != 0)
        return rc;
    bool contiguous = true;
    int64_t want = (int64_t)bi.itemsize;
    for (int i = (int)bi.ndim - 1; i >= 0; i--) {
        if (bi.shape[i] > 1 && bi.strides[i] != want)
            contiguous = false;
        want *= (int64_t)bi.shape[i];
    }
    if (contiguous)
        return put_bytes(b, bi.data, (size_t)total);
    /* Gather: walk the index in C order (every element lies inside the
     * buffer's data, which the library checked against its block). */
    uint64_t idx[SHMOBJ_BUFFER_MAXDIM] = {0};
    for (uint64_t e = 0; e < count; e++) {
        int64_t off = 0;
        for (uint32_t i = 0; i < bi.ndim; i++)
            off += (int64_t)idx[i] * bi.strides[i];
        if (off < 0 || (uint64_t)off + bi.itemsize > bi.nbytes)
            return SHMOBJ_ECORRUPT;
        if ((rc = put_bytes(b, (const char *)bi.data + off, bi.itemsize)) != 0)
            return rc;
        for (int i = (int)bi.ndim - 1; i >= 0; i--) {
            if (++idx[i] < bi.shape[i])
                break;
            idx[i] = 0;
        }
    }
    return 0;
}

static int enc_value(struct bridge_buf *b, const shmobj_view *v, int depth);

static int enc_items(struct bridge_buf *b, const shmobj_view *v, size_t n,
                     bool keys, int depth)
{
    shmobj_view item;
    int rc;
    for (size_t i = 0; i < n; i++) {
        if (keys) {
            if ((rc = shmobj_view_key(v, i, &item)) != 0 ||
                (rc = enc_value(b, &item, depth + 1)) != 0)
                return rc;
        }
        if ((rc = shmobj_view_item(v, i, &item)) != 0 ||
            (rc = enc_value(b, &item, depth + 1)) != 0)
            return rc;
    }
    return 0;
}

static int enc_value(struct bridge_buf *b, const shmobj_view *v, int depth)
{
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ERANGE;
    int type = shmobj_view_type(v);
    int rc;
    size_t n = 0;
    switch (type) {
    case SHMOBJ_TYPE_NULL:
        return put_head(b, 7, 22);
    case SHMOBJ_TYPE_BOOL: {
        int x = 0;
        if ((rc = shmobj_bool_get(v, &x)) != 0)
            return rc;
        return put_head(b, 7, x ? 21 : 20);
    }
    case SHMOBJ_TYPE_INT: {
        int64_t x = 0;
        if ((rc = shmobj_int_get(v, &x)) != 0)
            return rc;
        return x >= 0 ? put_head(b, 0, (uint64_t)x)
                      : put_head(b, 1, (uint64_t)(-(x + 1)));
    }
    case SHMOBJ_TYPE_UINT: {
        uint64_t x = 0;
        if ((rc = shmobj_uint_get(v, &x)) != 0 ||
            (rc = put_head(b, 6, SHMOBJ_CBOR_TAG_UINT)) != 0)
            return rc;
        return put_head(b, 0, x);
    }
    case SHMOBJ_TYPE_DOUBLE: {
        double d = 0;
        if ((rc = shmobj_double_get(v, &d)) != 0)
            return rc;
        uint64_t w;
        memcpy(&w, &d, sizeof w);
        unsigned char h[9] = {0xfb};
        for (int i = 0; i < 8; i++)
            h[1 + i] = (unsigned char)(w >> (56 - 8 * i));
        return put_bytes(b, h, sizeof h);
    }
    case SHMOBJ_TYPE_STR: {
        const char *s;
        if ((rc = shmobj_str_get(v, &s, &n)) != 0 || (rc = put_head(b, 3, n)) != 0)
            return rc;
        return put_bytes(b, s, n);
    }
    case SHMOBJ_TYPE_BYTES: {
        const void *p;
        if ((rc = shmobj_bytes_get(v, &p, &n)) != 0 || (rc = put_head(b, 2, n)) != 0)
            return rc;
        return put_bytes(b, p, n);
    }
    case SHMOBJ_TYPE_BUFFER:
        return enc_buffer(b, v);
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_SET:
        if ((rc = shmobj_view_len(v, &n)) != 0)
            return rc;
        if (type == SHMOBJ_TYPE_TUPLE)
            rc = put_head(b, 6, SHMOBJ_CBOR_TAG_TUPLE);
        else if (type == SHMOBJ_TYPE_SET)
            rc = put_head(b, 6, 258);
        if (rc != 0 || (rc = put_head(b, 4, n)) != 0)
            return rc;
        if (type == SHMOBJ_TYPE_SET) { /* a set's members are its keys */
            shmobj_view item;
            for (size_t i = 0; i < n; i++)
                if ((rc = shmobj_view_key(v, i, &item)) != 0 ||
                    (rc = enc_value(b, &item, depth + 1)) != 0)
                    return rc;
            return 0;
        }
        return enc_items(b, v, n, false, depth);
    case SHMOBJ_TYPE_DICT:
        if ((rc = shmobj_view_len(v, &n)) != 0 || (rc = put_head(b, 5, n)) != 0)
            return rc;
        return enc_items(b, v, n, true, depth);
    case SHMOBJ_TYPE_STRUCT: {
        /* tag [names or null, items] */
        if ((rc = shmobj_view_len(v, &n)) != 0 ||
            (rc = put_head(b, 6, SHMOBJ_CBOR_TAG_STRUCT)) != 0 ||
            (rc = put_head(b, 4, 2)) != 0)
            return rc;
        shmobj_view key;
        bool named = n > 0 && shmobj_view_key(v, 0, &key) == 0;
        if (!named) {
            if ((rc = put_head(b, 7, 22)) != 0)
                return rc;
        } else {
            if ((rc = put_head(b, 4, n)) != 0)
                return rc;
            for (size_t i = 0; i < n; i++)
                if ((rc = shmobj_view_key(v, i, &key)) != 0 ||
                    (rc = enc_value(b, &key, depth + 1)) != 0)
                    return rc;
        }
        if ((rc = put_head(b, 4, n)) != 0)
            return rc;
        return enc_items(b, v, n, false, depth);
    }
    default:
        /* mutable containers, records, links: not in profile cbor-1 */
        return SHMOBJ_ENOTSUP;
    }
}

int bridge__cbor_encode(shmobj_segment *seg, shmobj_ref ref, struct bridge_buf *out)
{
    shmobj_view v;
    int rc = shmobj_obj_get(seg, ref, &v);
    if (rc != 0)
        return rc;
    out->len = 0;
    return enc_value(out, &v, 0);
}

/* ---- decoding ----------------------------------------------------------- */

/* The decoder builds a shmobj_value tree in private memory, from an arena of
 * chunks freed at once, then puts it with one shmobj_obj_put(). */
struct dec {
    const unsigned char *p, *end;
    struct chunk *chunks;
};

struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

static void *dec_alloc(struct dec *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct chunk *c = d->chunks;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + cap);
        if (c == NULL)
            return NULL;
        c->next = d->chunks;
        c->used = 0;
        c->cap = cap;
        d->chunks = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

static int get_head(struct dec *d, unsigned *major, uint64_t *x)
{
    if (d->p >= d->end)
        return SHMOBJ_ECORRUPT;
    unsigned ib = *d->p++;
    *major = ib >> 5;
    unsigned ai = ib & 31;
    if (ai < 24) {
        *x = ai;
        return 0;
    }
    if (ai > 27)
        return SHMOBJ_ECORRUPT; /* indefinite lengths are not in the profile */
    size_t n = (size_t)1 << (ai - 24);
    if ((size_t)(d->end - d->p) < n)
        return SHMOBJ_ECORRUPT;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | d->p[i];
    d->p += n;
    *x = v;
    return 0;
}

static int dec_value(struct dec *d, shmobj_value *out, int depth);

static int dec_array(struct dec *d, uint64_t n, shmobj_value **items, int depth)
{
    /* every item takes at least one byte: a count beyond the bytes left is
     * damage, and the allocation below stays bounded by the input */
    if (n > (uint64_t)(d->end - d->p))
        return SHMOBJ_ECORRUPT;
    *items = dec_alloc(d, (size_t)n * sizeof **items + 1);
    if (*items == NULL)
        return SHMOBJ_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        int rc = dec_value(d, &(*items)[i], depth + 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int dec_array_head(struct dec *d, uint64_t *n)
{
    unsigned major;
    int rc = get_head(d, &major, n);
    return rc != 0 ? rc : major == 4 ? 0 : SHMOBJ_ECORRUPT;
}

static int dec_buffer(struct dec *d, shmobj_value *out, int depth)
{
    uint64_t n, ndim, tag, len;
    unsigned major;
    int rc;
    if ((rc = dec_array_head(d, &n)) != 0 || n != 2 ||
        (rc = dec_array_head(d, &ndim)) != 0)
        return rc != 0 ? rc : SHMOBJ_ECORRUPT;
    if (ndim > SHMOBJ_BUFFER_MAXDIM)
        return SHMOBJ_ECORRUPT;
    uint64_t *shape = dec_alloc(d, sizeof *shape * (ndim + 1));
    shmobj_buffer_desc *bd = dec_alloc(d, sizeof *bd);
    if (shape == NULL || bd == NULL)
        return SHMOBJ_ENOMEM;
    uint64_t count = 1;
    for (uint64_t i = 0; i < ndim; i++) {
        if ((rc = get_head(d, &major, &shape[i])) != 0 || major != 0)
            return rc != 0 ? rc : SHMOBJ_ECORRUPT;
        if (shape[i] != 0 && count > UINT64_MAX / shape[i])
            return SHMOBJ_ECORRUPT;
        count *= shape[i];
    }
    if ((rc = get_head(d, &major, &tag)) != 0 || major != 6)
        return rc != 0 ? rc : SHMOBJ_ECORRUPT;
    unsigned dtype = tag_dtype(tag);
    if (dtype == 0)
        return SHMOBJ_ECORRUPT;
    if ((rc = get_head(d, &major, &len)) != 0 || major != 2 ||
        len > (uint64_t)(d->end - d->p) ||
        count > len / shmobj_dtype_size(dtype) + (len == 0) ||
        count * shmobj_dtype_size(dtype) != len)
        return rc != 0 ? rc : SHMOBJ_ECORRUPT;
    memset(bd, 0, sizeof *bd);
    bd->data = d->p;
    bd->nbytes = (size_t)len;
    bd->shape = ndim ? shape : NULL;
    bd->ndim = (uint32_t)ndim;
    bd->dtype = dtype;
    d->p += len;
    (void)depth;
    memset(out, 0, sizeof *out);
    out->type = SHMOBJ_TYPE_BUFFER;
    out->v.buf = bd;
    return 0;
}

static int dec_value(struct dec *d, shmobj_value *out, int depth)
{
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ERANGE;
    unsigned major;
    uint64_t x;
    const unsigned char *start = d->p;
    int rc = get_head(d, &major, &x);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof *out);
    switch (major) {
    case 0:
        if (x > INT64_MAX) {
            out->type = SHMOBJ_TYPE_UINT;
            out->v.u = x;
        } else {
            out->type = SHMOBJ_TYPE_INT;
            out->v.i = (int64_t)x;
        }
        return 0;
    case 1:
        if (x > INT64_MAX)
            return SHMOBJ_ERANGE;
        out->type = SHMOBJ_TYPE_INT;
        out->v.i = -(int64_t)x - 1;
        return 0;
    case 2:
    case 3:
        if (x > (uint64_t)(d->end - d->p))
            return SHMOBJ_ECORRUPT;
        out->type = major == 2 ? SHMOBJ_TYPE_BYTES : SHMOBJ_TYPE_STR;
        out->v.s.ptr = d->p;
        out->v.s.len = (size_t)x;
        d->p += x;
        return 0;
    case 4: {
        shmobj_value *items;
        if ((rc = dec_array(d, x, &items, depth)) != 0)
            return rc;
        out->type = SHMOBJ_TYPE_LIST;
        out->v.c.items = items;
        out->v.c.count = (size_t)x;
        return 0;
    }
    case 5: {
        shmobj_value *items;
        if (x > (uint64_t)(d->end - d->p) / 2)
            return SHMOBJ_ECORRUPT;
        if ((rc = dec_array(d, 2 * x, &items, depth)) != 0)
            return rc;
        out->type = SHMOBJ_TYPE_DICT;
        out->v.c.items = items;
        out->v.c.count = (size_t)x;
        return 0;
    }
    case 6:
        if (x == 40)
            return dec_buffer(d, out, depth);
        if (x == SHMOBJ_CBOR_TAG_UINT) {
            if ((rc = get_head(d, &major, &x)) != 0 || major != 0)
                return rc != 0 ? rc : SHMOBJ_ECORRUPT;
            out->type = SHMOBJ_TYPE_UINT;
            out->v.u = x;
            return 0;
        }
        if (x == SHMOBJ_CBOR_TAG_TUPLE || x == 258) {
            if ((rc = dec_value(d, out, depth + 1)) != 0)
                return rc;
            if (out->type != SHMOBJ_TYPE_LIST)
                return SHMOBJ_ECORRUPT;
            out->type = x == 258 ? SHMOBJ_TYPE_SET : SHMOBJ_TYPE_TUPLE;
            return 0;
        }
        if (x == SHMOBJ_CBOR_TAG_STRUCT) {
            uint64_t n, cnt;
            if ((rc = dec_array_head(d, &n)) != 0 || n != 2)
                return rc != 0 ? rc : SHMOBJ_ECORRUPT;
            const char **names = NULL;
            if (d->p < d->end && *d->p == 0xf6) {
                d->p++;
            } else {
                shmobj_value *nv;
                if ((rc = dec_array_head(d, &cnt)) != 0 ||
                    (rc = dec_array(d, cnt, &nv, depth)) != 0)
                    return rc;
                names = dec_alloc(d, sizeof *names * (cnt + 1));
                if (names == NULL)
                    return SHMOBJ_ENOMEM;
                for (uint64_t i = 0; i < cnt; i++) {
                    if (nv[i].type != SHMOBJ_TYPE_STR ||
                        memchr(nv[i].v.s.ptr, 0, nv[i].v.s.len) != NULL)
                        return SHMOBJ_ECORRUPT;
                    char *s = dec_alloc(d, nv[i].v.s.len + 1);
                    if (s == NULL)
                        return SHMOBJ_ENOMEM;
                    memcpy(s, nv[i].v.s.ptr, nv[i].v.s.len);
                    s[nv[i].v.s.len] = 0;
                    names[i] = s;
                }
                n = cnt;
            }
            shmobj_value *items;
            if ((rc = dec_array_head(d, &cnt)) != 0 ||
                (names != NULL && cnt != n) ||
                (rc = dec_array(d, cnt, &items, depth)) != 0)
                return rc != 0 ? rc : SHMOBJ_ECORRUPT;
            out->type = SHMOBJ_TYPE_STRUCT;
            out->v.c.items = items;
            out->v.c.count = (size_t)cnt;
            out->v.c.names = names;
            return 0;
        }
        return SHMOBJ_ENOTSUP;
    default: /* 7: simple values and floats */
        if (x == 20 || x == 21) {
            out->type = SHMOBJ_TYPE_BOOL;
            out->v.b = x == 21;
            return 0;
        }
        if (x == 22) {
            out->type = SHMOBJ_TYPE_NULL;
            return 0;
        }
        if (*start == 0xfb) {
            double v;
            memcpy(&v, &x, sizeof v);
            out->type = SHMOBJ_TYPE_DOUBLE;
            out->v.d = v;
            return 0;
        }
        if (*start == 0xfa) {
            uint32_t w = (uint32_t)x;
            float f;
            memcpy(&f, &w, sizeof f);
            out->type = SHMOBJ_TYPE_DOUBLE;
            out->v.d = f;
            return 0;
        }
        return SHMOBJ_ENOTSUP;
    }
}

int bridge__cbor_decode(shmobj_segment *seg, const void *data, size_t len,
                        shmobj_ref *ref)
{
    struct dec d = {data, (const unsigned char *)data + len, NULL};
    shmobj_value v;
    int rc = dec_value(&d, &v, 0);
    if (rc == 0 && d.p != d.end)
        rc = SHMOBJ_ECORRUPT; /* trailing bytes: not one value */
    if (rc == 0)
        rc = shmobj_obj_put(seg, &v, ref);
    while (d.chunks != NULL) {
        struct chunk *c = d.chunks;
        d.chunks = c->next;
        free(c);
    }
    return rc;
}
