/* Fuzz target: random bytes as an object block, fed to the validator and to
 * every reader. Nothing may crash or read outside the block's space; a graph
 * that shmobj_obj_check() accepts must also print and free cleanly.
 *
 * Built two ways: with libFuzzer (-fsanitize=fuzzer, fuzz/meson.build), and
 * with -DFUZZ_STANDALONE as a plain program (registered in suite 'fuzz')
 * that mutates a few thousand valid objects deterministically, so CI
 * without clang runs it under ASan; `fuzz-object-standalone --seeds DIR`
 * writes its seed objects as a starting corpus for libFuzzer.
 *
 * Mutable containers live in several blocks (the object block, list
 * chunks, dict and set bodies, children), so an input beginning with
 * "MUT:" is not an object block but a list of byte edits (u32 offset, u8
 * value; its top byte picks the block, the rest the byte in it) applied
 * to a graph of a growable list, a mutable dict and a
 * mutable set built afresh in a private space; then the validator, every
 * reader and the writers run over it (fuzz/corpus/fuzz-object/ holds such
 * inputs). The dict's and the set's orders arrays are regions of their
 * own, so edits damage them often, and an iteration over them must end
 * within the places the body could hold.
 *
 * The readers include every scalar's get, set, add and compare-and-swap
 * (a store of the value read, so a sound graph stays as checked), every
 * lookup by name and prepared key, the stream printer; the writers every
 * change of the mutable containers and shmobj_view_set() replacing an
 * item (the old value freed), on graphs the check accepted and refused. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmobj.h"
#include "space-heap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_shapes(const uint8_t *data, size_t size);

static uint64_t walk_budget;

static void walk(const shmobj_view *v, int depth)
{
    shmobj_view it, k;
    size_t n, idx;
    if (depth > SHMOBJ_OBJ_MAXDEPTH || walk_budget == 0)
        return;
    walk_budget--;
    switch (shmobj_view_type(v)) {
    case SHMOBJ_TYPE_INT: {
        int64_t x;
        if (shmobj_int_get(v, &x) == 0) {
            (void)shmobj_int_cas(v, &x, x);
            (void)shmobj_int_set(v, x);
        }
        (void)shmobj_int_add(v, 0, NULL);
        break;
    }
    case SHMOBJ_TYPE_UINT: {
        uint64_t u;
        if (shmobj_uint_get(v, &u) == 0) {
            (void)shmobj_uint_cas(v, &u, u);
            (void)shmobj_uint_set(v, u);
        }
        (void)shmobj_uint_add(v, 0, NULL);
        break;
    }
    case SHMOBJ_TYPE_DOUBLE: {
        double d;
        if (shmobj_double_get(v, &d) == 0)
            (void)shmobj_double_set(v, d);
        (void)shmobj_double_add(v, 0, NULL);
        break;
    }
    case SHMOBJ_TYPE_BOOL: {
        int b;
        if (shmobj_bool_get(v, &b) == 0)
            (void)shmobj_bool_set(v, b);
        break;
    }
    case SHMOBJ_TYPE_STR: {
        const char *s;
        if (shmobj_str_get(v, &s, &n) == 0 && s[n] != 0)
            abort(); /* views promise NUL termination */
        break;
    }
    case SHMOBJ_TYPE_BYTES: {
        const void *p;
        volatile uint8_t sink;
        if (shmobj_bytes_get(v, &p, &n) == 0 && n > 0)
            sink = ((const uint8_t *)p)[n - 1];
        (void)sink;
        break;
    }
    case SHMOBJ_TYPE_BUFFER: {
        shmobj_buffer_info info = {.struct_size = sizeof info};
        volatile uint8_t sink;
        if (shmobj_buffer_get(v, &info) == 0 && info.nbytes > 0)
            sink = ((uint8_t *)info.data)[0] + ((uint8_t *)info.data)[info.nbytes - 1];
        (void)sink;
        break;
    }
    default:
        break;
    }
    if (shmobj_view_len(v, &n) != 0 || shmobj_view_type(v) == SHMOBJ_TYPE_STR ||
        shmobj_view_type(v) == SHMOBJ_TYPE_BYTES ||
        shmobj_view_type(v) == SHMOBJ_TYPE_BUFFER)
        return;
    for (size_t i = 0; i < n && walk_budget > 0; i++) {
        int64_t xi;
        if (shmobj_view_item(v, i, &it) == 0)
            walk(&it, depth + 1);
        (void)shmobj_item_int_get(v, i, &xi);
        if (shmobj_view_type(v) == SHMOBJ_TYPE_MLIST)
            (void)shmobj_mlist_get_int(v, i, &xi);
        if (shmobj_view_key(v, i, &k) == 0) {
            shmobj_value kd;
            const void *p;
            size_t kn;
            int64_t x;
            if (k.type == SHMOBJ_TYPE_INT && shmobj_int_get(&k, &x) == 0)
                kd = SHMOBJ_VAL_INT(x);
            else if (k.type == SHMOBJ_TYPE_STR && shmobj_str_get(&k, (const char **)&p, &kn) == 0)
                kd = SHMOBJ_VAL_STRN(p, kn);
            else if (k.type == SHMOBJ_TYPE_BYTES && shmobj_bytes_get(&k, &p, &kn) == 0)
                kd = SHMOBJ_VAL_BYTES(p, kn);
            else
                continue;
            (void)shmobj_view_index(v, &kd, &idx);
            (void)shmobj_view_get(v, &kd, &it);
            /* by name and by a prepared key too: each kind of key slot
             * (short, medium, an object) has its inline comparison there */
            shmobj_key pk;
            if (k.type == SHMOBJ_TYPE_STR) {
                int64_t fi;
                double fd;
                const char *fs;
                size_t fn;
                (void)shmobj_field_get(v, p, &it);
                (void)shmobj_field_int_get(v, p, &fi);
                (void)shmobj_field_double_get(v, p, &fd);
                (void)shmobj_field_str_get(v, p, &fs, &fn);
            }
            if (shmobj_key_init(&pk, &kd) == 0) {
                (void)shmobj_view_get_key(v, &pk, &it);
                (void)shmobj_view_index_key(v, &pk, &idx);
                if (shmobj_view_type(v) == SHMOBJ_TYPE_MDICT) {
                    (void)shmobj_mdict_get_int(v, &pk, &x);
                    (void)shmobj_mdict_int_add(v, &pk, 0, NULL);
                }
            }
            if (shmobj_view_type(v) == SHMOBJ_TYPE_MDICT ||
                shmobj_view_type(v) == SHMOBJ_TYPE_MSET)
                (void)shmobj_mut_contains(v, &kd);
        }
    }
}

/* A fixed graph with every mutable kind: {"l": mlist, "d": mdict, "s":
 * mset}, items of several kinds (links and adopted objects among them), a
 * few deletions (holes), children. */
/* The blocks of the graph an edit may land in: the object block, the
 * list's chunks, the dict's and the set's bodies (not the arena's own
 * headers, which fuzz-arena covers). */
struct region {
    uint64_t off, len;
};
static struct region regions[48];
static unsigned nregions;
/* the regions of the dict's and the set's orders arrays, and the bound of
 * an iteration of each */
static unsigned orders_region[2];
static uint64_t iter_bound[2];

static void region_add(struct shmobj__space *sp, uint64_t ref, uint64_t len)
{
    uint64_t usable;
    if (ref != 0 && nregions < 48 && sp->ops->check(sp, ref, &usable) == 0)
        regions[nregions++] = (struct region){ref & ((UINT64_C(1) << 48) - 1),
                                              len != 0 && len < usable ? len : usable};
}

static void mut_regions(struct shmobj__space *sp, shmobj_ref r, const shmobj_view *l,
                        const shmobj_view *d, const shmobj_view *s)
{
    nregions = 0;
    region_add(sp, r, 0);
    /* the control block follows the object header (doc/format-object.md):
     * body at 88, the list's chunk directory after its 192 bytes */
    const uint8_t *lc = (const uint8_t *)l->obj + 16;
    for (unsigned k = 0; k < 40; k++) {
        uint64_t ref;
        memcpy(&ref, lc + 192 + 8 * k, 8);
        region_add(sp, ref, 0);
    }
    /* the list's growth block (retired2, at 160): its records and the
     * count its closers keep; the reservation counter and len are in the
     * control block, part of the object block above */
    uint64_t apps;
    memcpy(&apps, lc + 160, 8);
    region_add(sp, apps, 0);
    uint64_t body;
    memcpy(&body, (const uint8_t *)d->obj + 16 + 88, 8);
    region_add(sp, body, 0);
    memcpy(&body, (const uint8_t *)s->obj + 16 + 88, 8);
    region_add(sp, body, 0);
    /* the orders arrays of the dict's and the set's bodies, regions of
     * their own (doc/format-object.md: after the 32-byte header, the index
     * of cap words and the pcap pairs of 32 bytes), so that edits damage
     * them often: an iteration over damaged orders must still end */
    for (int k = 0; k < 2; k++) {
        const shmobj_view *c = k ? s : d;
        uint64_t cap, pcap, usable;
        memcpy(&body, (const uint8_t *)c->obj + 16 + 88, 8);
        if (sp->ops->check(sp, body, &usable) != 0)
            continue;
        uint64_t off = body & ((UINT64_C(1) << 48) - 1);
        memcpy(&cap, sp->base + off + 8, 8);
        memcpy(&pcap, sp->base + off + 16, 8);
        iter_bound[k] = usable / 40 + 2; /* pair places the block could hold */
        orders_region[k] = nregions;
        if (nregions < 48)
            regions[nregions++] = (struct region){off + 32 + 8 * cap + 32 * pcap, 8 * pcap};
    }
}

/* An iteration of the dict or set over a (perhaps damaged) graph ends
 * within the places its body could hold, with SHMOBJ_ENOTFOUND where the
 * check accepted the graph. */
static void iter_ends(const shmobj_view *v, int k, int checked)
{
    shmobj_view c, key, val;
    shmobj_miter it;
    int rc = 0;
    if (shmobj_view_get_str(v, k ? "s" : "d", &c) != 0 || shmobj_miter_init(&c, &it) != 0)
        return;
    for (uint64_t n = 0; n <= iter_bound[k] && (rc = shmobj_miter_next(&it, &key, &val)) == 0; n++)
        ;
    if (rc == 0)
        abort(); /* an iteration that does not end */
    if (checked == 0 && rc != SHMOBJ_ENOTFOUND)
        abort(); /* the check accepted what the iteration refused */
}

static int mut_build(shmobj_segment *seg, shmobj_ref *r, uint64_t *end)
{
    shmobj_value top = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("l"), SHMOBJ_VAL_MLIST(),
                                          SHMOBJ_VAL_STR("d"), SHMOBJ_VAL_MDICT(),
                                          SHMOBJ_VAL_STR("s"), SHMOBJ_VAL_MSET());
    shmobj_view v, l, d, s;
    if (shmobj_obj_put(seg, &top, r) != 0 || shmobj_obj_get(seg, *r, &v) != 0 ||
        shmobj_view_get_str(&v, "l", &l) != 0 || shmobj_view_get_str(&v, "d", &d) != 0 ||
        shmobj_view_get_str(&v, "s", &s) != 0)
        return -1;
    for (int i = 0; i < 40; i++) {
        char k[24];
        snprintf(k, sizeof k, i % 2 ? "key-%d" : "k%d", i);
        shmobj_value item = i % 3 == 0 ? SHMOBJ_VAL_INT(i)
                            : i % 3 == 1 ? SHMOBJ_VAL_STR(k)
                                         : SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_DOUBLE(i));
        if (shmobj_mlist_append(&l, &item) != 0 ||
            shmobj_mdict_set(&d, &SHMOBJ_VAL_STR(k), &item) != 0 ||
            shmobj_mset_add(&s, i % 2 ? &SHMOBJ_VAL_INT(i) : &SHMOBJ_VAL_BYTES(k, strlen(k))) != 0)
            return -1;
    }
    /* a link in each, and an object each adopted (its block their child) */
    shmobj_ref target, a1, a2;
    if (shmobj_obj_put(seg, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("target")), &target) != 0 ||
        shmobj_obj_put(seg, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)), &a1) != 0 ||
        shmobj_obj_put(seg, &SHMOBJ_VAL_STR("adopted by the dict"), &a2) != 0 ||
        shmobj_mlist_append(&l, &SHMOBJ_VAL_LINK(target)) != 0 ||
        shmobj_mlist_append(&l, &SHMOBJ_VAL_ADOPT(a1)) != 0 ||
        shmobj_mdict_set(&d, &SHMOBJ_VAL_STR("link"), &SHMOBJ_VAL_LINK(target)) != 0 ||
        shmobj_mdict_set(&d, &SHMOBJ_VAL_STR("adopted"), &SHMOBJ_VAL_ADOPT(a2)) != 0)
        return -1;
    if (shmobj_mut_delete(&d, &SHMOBJ_VAL_STR("k4")) != 0 ||
        shmobj_mut_delete(&s, &SHMOBJ_VAL_INT(7)) != 0 || shmobj_mlist_delete(&l, 3) != 0)
        return -1;
    *end = atomic_load(&((struct shmobj__space *)seg)->mapped);
    mut_regions((struct shmobj__space *)seg, *r, &l, &d, &s);
    return 0;
}

/* The writers over a (perhaps damaged) graph: each may fail, none may
 * crash. Returns how many failed. */
static int mut_write(const shmobj_view *v)
{
    shmobj_view l, d, s, it;
    shmobj_ref out = 0;
    int bad = 0;
    if (shmobj_view_get_str(v, "l", &l) != 0 || shmobj_view_get_str(v, "d", &d) != 0 ||
        shmobj_view_get_str(v, "s", &s) != 0)
        return 1;
    bad += shmobj_mlist_append(&l, &SHMOBJ_VAL_STR("appended")) != 0;
    bad += shmobj_mlist_insert(&l, 1, &SHMOBJ_VAL_INT(5)) != 0;
    bad += shmobj_mlist_pop(&l, 0, &out) != 0;
    if (out != 0)
        bad += shmobj_obj_free(v->seg, out) != 0;
    bad += shmobj_mlist_set(&l, 2, &SHMOBJ_VAL_NULL) != 0;
    bad += shmobj_mdict_set(&d, &SHMOBJ_VAL_STR("key-1"), &SHMOBJ_VAL_INT(1)) != 0;
    bad += shmobj_mdict_set(&d, &SHMOBJ_VAL_STR("new key"), &SHMOBJ_VAL_STR("x")) != 0;
    bad += shmobj_mut_delete(&d, &SHMOBJ_VAL_STR("k0")) != 0;
    bad += shmobj_mset_add(&s, &SHMOBJ_VAL_INT(1000)) != 0;
    bad += shmobj_mut_delete(&s, &SHMOBJ_VAL_INT(1)) != 0;
    shmobj_miter mi;
    if (shmobj_miter_init(&d, &mi) == 0)
        for (int n = 0; n < 100 && shmobj_miter_next(&mi, &it, &it) == 0; n++)
            ;
    bad += shmobj_mlist_delete(&l, 1) != 0;
    bad += shmobj_mlist_set(&l, 0, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("nested"))) != 0;
    if (shmobj_mdict_get(&d, &SHMOBJ_VAL_STR("key-3"), &it) == 0)
        (void)shmobj_view_set(&it, &SHMOBJ_VAL_STR("replaced"));
    bad += shmobj_mut_clear(&s) != 0;
    return bad;
}

/* Every read of a view the fuzzer makes: the walk of its graph and its
 * JSON into buf, which must not fail where the check (its result in
 * `checked`) accepted the graph. */
static void read_all(const shmobj_view *v, int checked, char *buf, size_t n)
{
    size_t len;
    walk_budget = 4096;
    walk(v, 0);
    int rc = shmobj_view_json(v, buf, n, &len);
    if (checked == 0 && rc != 0 && rc != SHMOBJ_ENOBUFS)
        abort(); /* check accepted what the printer refused */
    FILE *f = fopen("/dev/null", "w");
    if (f != NULL) {
        rc = shmobj_view_json_write(v, f);
        if (checked == 0 && rc != 0)
            abort(); /* the stream printer refused what the buffer's took */
        fclose(f);
    }
}

/* Replace the first item of a container (its old value freed), and of
 * its first item's: writers on a graph the check may have refused. */
static void replace_first(const shmobj_view *v, int checked)
{
    shmobj_view it, in;
    size_t n;
    if (shmobj_view_len(v, &n) != 0 || n == 0 || shmobj_view_item(v, 0, &it) != 0)
        return;
    if (shmobj_view_len(&it, &n) == 0 && n > 0 && shmobj_view_item(&it, 0, &in) == 0) {
        int rc = shmobj_view_set(&in, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
        if (checked == 0 && rc != 0 && rc != SHMOBJ_EACCES && rc != SHMOBJ_ETYPE)
            abort(); /* a sound slot refused a replace it documents */
    }
    (void)shmobj_view_set(&it, &SHMOBJ_VAL_NULL);
}

static int mut_input(const uint8_t *data, size_t size)
{
    struct shmobj__space *sp = space_heap_create(1u << 20);
    shmobj_segment *seg = (shmobj_segment *)sp;
    shmobj_ref r;
    uint64_t end;
    if (sp == NULL)
        return 0;
    if (mut_build(seg, &r, &end) != 0)
        abort(); /* the graph itself must build */
    for (size_t i = 4; i + 5 <= size; i += 5) {
        uint32_t off;
        memcpy(&off, data + i, 4);
        const struct region *g = &regions[(off >> 24) % nregions];
        uint64_t at = g->off + (off & 0xffffff) % g->len;
        if (at < end)
            sp->base[at] = data[i + 4];
    }
    int checked = shmobj_obj_check(seg, r);
    shmobj_view v;
    if (shmobj_obj_get(seg, r, &v) == 0) {
        char buf[4096];
        iter_ends(&v, 0, checked);
        iter_ends(&v, 1, checked);
        read_all(&v, checked, buf, sizeof buf);
        int bad = mut_write(&v);
        if (checked == 0 && bad == 0 && shmobj_obj_check(seg, r) != 0)
            abort(); /* writers that succeeded left a graph the check refuses */
    }
    /* Children are blocks of their own: an edit can make two slots name
     * one child, which the check accepts (a shared subtree) and the free
     * frees once, the second naming being stale by then. */
    int fr = shmobj_obj_free(seg, r);
    if (checked == 0 && fr != 0 && fr != SHMOBJ_ESTALE)
        abort();
    space_heap_destroy(sp);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    if (size >= 4 && memcmp(data, "MUT:", 4) == 0)
        return mut_input(data, size);
    struct shmobj__space *sp = space_heap_create(size + 65536);
    if (sp == NULL)
        return 0;
    shmobj_segment *seg = (shmobj_segment *)sp;
    shmobj_ref r;
    /* The first block of a fresh space always lands at the same offset with
     * the same generation, so payloads in the input can name it. */
    if (sp->ops->alloc(sp, size < 32 ? 32 : size, 64, &r) != 0) {
        space_heap_destroy(sp);
        return 0;
    }
    memcpy(sp->base + (r & ((UINT64_C(1) << 48) - 1)), data, size);

    int checked = shmobj_obj_check(seg, r);
    shmobj_view v;
    if (shmobj_obj_get(seg, r, &v) == 0) {
        char buf[512];
        read_all(&v, checked, buf, sizeof buf);
        if (checked == 0 && shmobj_obj_check(seg, r) != 0)
            abort(); /* readers changed nothing that matters */
        replace_first(&v, checked);
        if (checked == 0 && shmobj_obj_check(seg, r) != 0)
            abort(); /* a replace in a sound graph leaves it sound */
    }
    int fr = shmobj_obj_free(seg, r);
    /* (a well-formed block marked as adopted belongs to its container) */
    if (checked == 0 && fr != 0 && fr != SHMOBJ_EACCES)
        abort();
    space_heap_destroy(sp);
    fuzz_shapes(data, size);
    return 0;
}

/* ---- shapes, records and reference slots ----------------------------------
 * The input again, as a block put after a shape and a link target that
 * every fresh space holds at the same offsets, so a record in the input
 * (or a link) can name them: records are read, checked and printed against
 * a real shape, links followed. A graph the checker accepts must print and
 * free cleanly and leave the shape's use count as it found it. */

static const shmobj_field fuzz_fields[] = {
    {"id", SHMOBJ_TYPE_INT, 0, 0},         {"name", SHMOBJ_TYPE_STR, 16, 0},
    {"score", SHMOBJ_TYPE_DOUBLE, 0, 0},   {"ok", SHMOBJ_TYPE_BOOL, 0, 0},
    {"blob", SHMOBJ_TYPE_BYTES, 8, 0},     {"friend", SHMOBJ_TYPE_LINK, 0, 0},
    {"a_long_field_name", SHMOBJ_TYPE_NULL, 0, 0},
};
#define FUZZ_NFIELDS (sizeof fuzz_fields / sizeof fuzz_fields[0])

/* The fresh space every shape input runs in: the shape, then the target. */
static struct shmobj__space *shapes_space(shmobj_ref *shape, shmobj_ref *target)
{
    struct shmobj__space *sp = space_heap_create(256u << 10);
    shmobj_value t = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("target"));
    if (sp == NULL)
        return NULL;
    if (shmobj_shape_put((shmobj_segment *)sp, fuzz_fields, FUZZ_NFIELDS, shape) != 0 ||
        shmobj_obj_put((shmobj_segment *)sp, &t, target) != 0)
        abort(); /* a fresh space always holds them */
    return sp;
}

/* Read everything through the new kinds' calls: follow links, keys and
 * names of records, the shape of a record. */
static void walk_refs(const shmobj_view *v, int depth)
{
    shmobj_view it, f;
    shmobj_ref r;
    size_t n, i;
    if (depth > 8)
        return;
    if (shmobj_view_type(v) == SHMOBJ_TYPE_LINK) {
        r = 0;
        (void)shmobj_link_get(v, &r);
        /* a block's value is never followed further: a link found there
         * is the value of the block the link names (one that names its
         * own block, say) */
        if (shmobj_view_follow(v, &f) == 0 && shmobj_view_type(&f) == SHMOBJ_TYPE_LINK &&
            f.slot_blk != (r & ((UINT64_C(1) << 48) - 1)))
            abort();
        return;
    }
    if (shmobj_view_type(v) == SHMOBJ_TYPE_RECORD) {
        shmobj_key k;
        shmobj_value kd = SHMOBJ_VAL_STR("a_long_field_name"), ks = SHMOBJ_VAL_STR("id");
        (void)shmobj_record_shape(v, &r);
        if (shmobj_key_init(&k, &kd) == 0)
            (void)shmobj_view_get_key(v, &k, &f);
        if (shmobj_key_init(&k, &ks) == 0)
            (void)shmobj_view_key_int_add(v, &k, 0, NULL);
        (void)shmobj_field_get(v, "name", &f);
        (void)shmobj_view_index(v, &ks, &i);
    }
    if (shmobj_view_len(v, &n) != 0 || shmobj_view_type(v) == SHMOBJ_TYPE_STR ||
        shmobj_view_type(v) == SHMOBJ_TYPE_BYTES || shmobj_view_type(v) == SHMOBJ_TYPE_BUFFER)
        return;
    for (i = 0; i < n && i < 64; i++) {
        if (shmobj_view_key(v, i, &f) == 0)
            (void)shmobj_view_json(&f, NULL, 0, NULL);
        if (shmobj_view_item(v, i, &it) == 0) {
            (void)shmobj_item_int_add(v, i, 0, NULL);
            walk_refs(&it, depth + 1);
        }
    }
}

static uint64_t shape_uses(struct shmobj__space *sp, shmobj_ref shape)
{
    uint64_t u;
    memcpy(&u, sp->base + (shape & ((UINT64_C(1) << 48) - 1)) + 48, sizeof u);
    return u;
}

static void fuzz_shapes(const uint8_t *data, size_t size)
{
    shmobj_ref shape, target, r;
    if (size > (1u << 16))
        return;
    struct shmobj__space *sp = shapes_space(&shape, &target);
    if (sp == NULL)
        return;
    shmobj_segment *seg = (shmobj_segment *)sp;
    if (sp->ops->alloc(sp, size < 32 ? 32 : size, 16, &r) != 0) {
        space_heap_destroy(sp);
        return;
    }
    memcpy(sp->base + (r & ((UINT64_C(1) << 48) - 1)), data, size);
    /* a record in the input holds a use the input's bytes do not show */
    uint64_t uses0 = shape_uses(sp, shape);
    int checked = shmobj_obj_check(seg, r);
    shmobj_view v;
    if (shmobj_obj_get(seg, r, &v) == 0) {
        char buf[512];
        walk_refs(&v, 0);
        int rc = shmobj_view_json(&v, buf, sizeof buf, NULL);
        if (checked == 0 && rc != 0 && rc != SHMOBJ_ENOBUFS)
            abort(); /* check accepted what the printer refused */
    }
    (void)shmobj_obj_check(seg, shape);
    int fr = shmobj_obj_free(seg, r);
    if (checked == 0 && fr != 0 && fr != SHMOBJ_EACCES)
        abort();
    if (shape_uses(sp, shape) > uses0)
        abort(); /* reading or freeing never takes a use */
    (void)shmobj_shape_free(seg, shape);
    space_heap_destroy(sp);
}

#ifdef FUZZ_STANDALONE
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Build a seed object in a fresh space (so it sits where inputs are put)
 * and copy out its block. */
static size_t seed(const shmobj_value *val, uint8_t *out, size_t cap)
{
    struct shmobj__space *sp = space_heap_create(64u << 10);
    shmobj_ref r;
    size_t n = 0;
    if (sp == NULL || shmobj_obj_put((shmobj_segment *)sp, val, &r) != 0 ||
        shmobj_obj_size(val, &n) != 0)
        abort();
    const uint8_t *b = sp->base + (r & ((UINT64_C(1) << 48) - 1));
    if (n > cap)
        abort();
    memcpy(out, b, n);
    space_heap_destroy(sp);
    return n;
}

#define SHAPE_SEEDS 4

/* The shape inputs' seeds: put in the fresh space fuzz_shapes() runs in,
 * so the block lands where inputs are put and names the same shape and
 * target; returns its bytes. */
static size_t shapes_seed(int which, uint8_t *out, size_t cap)
{
    shmobj_ref shape, target, r, adopted;
    struct shmobj__space *sp = shapes_space(&shape, &target);
    shmobj_segment *seg = (shmobj_segment *)sp;
    size_t n = 0;
    if (sp == NULL)
        abort();
    shmobj_value items[FUZZ_NFIELDS] = {
        SHMOBJ_VAL_INT(7),         SHMOBJ_VAL_STR("bob"),
        SHMOBJ_VAL_DOUBLE(1.5),    SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_BYTES("\1\2", 2), SHMOBJ_VAL_LINK(target),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("sword"), SHMOBJ_VAL_LINK(target)),
    };
    shmobj_value rec = SHMOBJ_VAL_RECORD(shape, items, FUZZ_NFIELDS), v, list[4];
    shmobj_value three = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(3));
    shmobj_value urls = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("https://a"), SHMOBJ_VAL_STR(""),
                                            SHMOBJ_VAL_STR("https://b"));
    switch (which) {
    case 0: /* a record alone, its header the tree header */
        v = rec;
        break;
    case 1: /* records in a list, and an adopted object */
        if (shmobj_obj_put(seg, &three, &adopted) != 0)
            abort();
        list[0] = rec;
        list[1] = SHMOBJ_VAL_LINK(target);
        list[2] = SHMOBJ_VAL_ADOPT(adopted);
        list[3] = rec;
        v = SHMOBJ_VAL_LIST(list, 4);
        break;
    case 2: /* a link alone */
        v = SHMOBJ_VAL_LINK(target);
        break;
    default: /* a record alone holding a tuple of strings (its header in
              * the record's slot) */
        items[6] = urls;
        v = rec;
        break;
    }
    if (shmobj_obj_put(seg, &v, &r) != 0 || shmobj_obj_size(&v, &n) != 0)
        abort();
    const uint8_t *b = sp->base + (r & ((UINT64_C(1) << 48) - 1));
    if (n > cap)
        abort();
    memcpy(out, b, n);
    space_heap_destroy(sp);
    return n;
}

static uint64_t next(void);

/* Mutated shape inputs, as main() does for the others. */
static size_t shapes_rounds(int rounds)
{
    static uint8_t base[4096], input[4096];
    size_t inputs = 0;
    for (int round = 0; round < rounds; round++) {
        size_t n = shapes_seed(round % SHAPE_SEEDS, base, sizeof base);
        fuzz_shapes(base, n); /* the seed itself must pass */
        memcpy(input, base, n);
        int flips = 1 + (int)(next() % 6);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(next() % n);
            switch (next() % 4) {
            case 0: input[at] ^= (uint8_t)(1u << (next() % 8)); break;
            case 1: input[at] = (uint8_t)next(); break;
            case 2: input[at] = 0; break;
            default: input[at] = 0xff; break;
            }
        }
        if (round % 53 == 0)
            n = (size_t)(next() % n);
        fuzz_shapes(input, n);
        inputs += 2;
    }
    return inputs;
}

/* --seeds DIR: the shape inputs' seeds too. */
static int shapes_write_seeds(const char *dir)
{
    static uint8_t base[4096];
    for (int i = 0; i < SHAPE_SEEDS; i++) {
        char path[4096];
        size_t n = shapes_seed(i, base, sizeof base);
        snprintf(path, sizeof path, "%s/shape-seed-%d", dir, i);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(base, 1, n, f) != n)
            return 1;
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"id", "name", "position_"};
    uint64_t shape[2] = {3, 4};
    float fdata[12] = {0};
    uint8_t bytes[100] = {1, 2, 3};
    int rounds = argc == 2 ? atoi(argv[1]) : 4000;
    shmobj_value seeds[] = {
        SHMOBJ_VAL_DICT_OF(
            SHMOBJ_VAL_STR("websites"),
            SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("https://a"), SHMOBJ_VAL_STR("https://b")),
            SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0),
            SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT(10),
            SHMOBJ_VAL_STR("in_a_good_stat"), SHMOBJ_VAL_BOOL(0),
            SHMOBJ_VAL_STR("tags"), /* a packed tuple of strings */
            SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("red"), SHMOBJ_VAL_STR(""),
                                SHMOBJ_VAL_STR("\xc3\xa9t\xc3\xa9")),
            SHMOBJ_VAL_INT(7), SHMOBJ_VAL_BOOL(1),
            SHMOBJ_VAL_BYTES("k", 1), SHMOBJ_VAL_BYTES(bytes, sizeof bytes),
            SHMOBJ_VAL_STR("t"), SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F32, 2, shape, fdata)),
        SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("bob"),
                                       SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_DOUBLE(1),
                                                           SHMOBJ_VAL_NULL)),
                          3, names),
        SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("x"), SHMOBJ_VAL_BYTES("y", 1),
                          SHMOBJ_VAL_STR("medium_member")),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_UINT(3))),
                           SHMOBJ_VAL_STR("\xc3\xa9t\xc3\xa9")),
    };
    /* Seeds without a buffer get one, so every seed is allocated 64-aligned
     * like the fuzz input and lands at the same offset. */
    shmobj_value wrapped[sizeof seeds / sizeof seeds[0]][2];
    shmobj_value scalar_buf = SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_U8, 0, NULL, bytes);
    for (size_t s = 1; s < sizeof seeds / sizeof seeds[0]; s++) {
        wrapped[s][0] = seeds[s];
        wrapped[s][1] = scalar_buf;
        seeds[s] = SHMOBJ_VAL_LIST(wrapped[s], 2);
    }
    static uint8_t base[8192], input[8192];
    size_t inputs = 0;
    /* --corpus FILE...: run each file as one input (the seed corpus, and
     * findings kept as regressions) */
    if (argc > 2 && strcmp(argv[1], "--corpus") == 0) {
        for (int a = 2; a < argc; a++) {
            FILE *f = fopen(argv[a], "rb");
            size_t n = f != NULL ? fread(input, 1, sizeof input, f) : 0;
            if (f == NULL)
                return 1;
            fclose(f);
            LLVMFuzzerTestOneInput(input, n);
        }
        printf("fuzz-object: %d corpus inputs, no crash\n", argc - 2);
        return 0;
    }
    /* --seeds DIR: write the seed blocks as a corpus for libFuzzer. */
    if (argc > 2 && strcmp(argv[1], "--seeds") == 0) {
        for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
            char path[4096];
            size_t n = seed(&seeds[i], base, sizeof base);
            snprintf(path, sizeof path, "%s/seed-%zu", argv[2], i);
            FILE *f = fopen(path, "wb");
            if (f == NULL || fwrite(base, 1, n, f) != n)
                return 1;
            fclose(f);
        }
        return shapes_write_seeds(argv[2]);
    }
    for (int round = 0; round < rounds; round++) {
        const shmobj_value *sv = &seeds[(size_t)round % (sizeof seeds / sizeof seeds[0])];
        size_t n = seed(sv, base, sizeof base);
        LLVMFuzzerTestOneInput(base, n); /* the seed itself must pass */
        memcpy(input, base, n);
        int flips = 1 + (int)(next() % 8);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(next() % n);
            switch (next() % 4) {
            case 0: input[at] ^= (uint8_t)(1u << (next() % 8)); break;
            case 1: input[at] = (uint8_t)next(); break;
            case 2: input[at] = 0; break;
            default: input[at] = 0xff; break;
            }
        }
        /* now and then a truncated or random input */
        if (round % 97 == 0)
            n = (size_t)(next() % n);
        if (round % 89 == 0)
            for (size_t i = 32; i < n; i++)
                input[i] = (uint8_t)next();
        LLVMFuzzerTestOneInput(input, n);
        inputs += 2;
    }
    inputs += shapes_rounds(rounds / 4);
    /* mutable containers: random edits of their blocks */
    for (int round = 0; round < rounds / 4; round++) {
        uint8_t edits[4 + 5 * 8] = {'M', 'U', 'T', ':'};
        size_t n = 4 + 5 * (1 + (size_t)(next() % 8));
        for (size_t i = 4; i < n; i++)
            edits[i] = (uint8_t)next();
        LLVMFuzzerTestOneInput(edits, round == 0 ? 4 : n);
        inputs++;
    }
    /* the orders arrays of the dict and the set: edits aimed at them (the
     * region's index in the top byte of the offset), a byte or a whole
     * word at a time */
    for (int round = 0; round < rounds / 8; round++) {
        uint8_t edits[4 + 5 * 16] = {'M', 'U', 'T', ':'};
        size_t n = 4 + 5 * (1 + (size_t)(next() % 16));
        uint32_t word = (uint32_t)(next() % 64) * 8;
        for (size_t i = 4; i < n; i += 5) {
            uint32_t off = (uint32_t)orders_region[round % 2] << 24 |
                           (round % 3 == 0 ? word + (uint32_t)(i - 4) / 5 % 8
                                           : (uint32_t)(next() % 4096));
            memcpy(edits + i, &off, 4);
            edits[i + 4] = (uint8_t)(round % 5 == 0 ? 0xff : next());
        }
        LLVMFuzzerTestOneInput(edits, n);
        inputs++;
    }
    /* and each of the first 48 orders of each set to all ones, then to 0
     * (a cursor wrapped back to the start, a place gone back) */
    for (uint32_t k = 0; k < 2 * 2 * 48; k++) {
        uint8_t edits[4 + 5 * 8] = {'M', 'U', 'T', ':'};
        for (uint32_t j = 0; j < 8; j++) {
            uint32_t off = (uint32_t)orders_region[k % 2] << 24 | (k / 4 * 8 + j);
            memcpy(edits + 4 + 5 * j, &off, 4);
            edits[4 + 5 * j + 4] = k / 2 % 2 ? 0 : 0xff;
        }
        LLVMFuzzerTestOneInput(edits, sizeof edits);
        inputs++;
    }
    printf("fuzz-object: %zu inputs, no crash\n", inputs);
    return 0;
}
#endif
