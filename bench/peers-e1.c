/* E1 peer: encoding the seed's company record with msgpack-c.
 *
 * The record: {"websites": ["https://a.example.com", "https://b.example.com"],
 * "avg_salary": 3000.0, "employees": 10, "in_a_good_state": true,
 * "data": 4 KiB of bytes}. One object = pack it into a msgpack_sbuffer
 * (cleared and reused, as a msgpack user would), unpack it with
 * msgpack_unpack_next into a reused msgpack_unpacked, then walk every field
 * of the result and read it: the strings are compared, the numbers and the
 * flag checked, and the 4 KiB of "data" summed so nothing is
 * skipped (bench_sum64, the loop every E1 subject uses). Any mismatch
 * fails the run.
 *
 * Metrics: Kobj/s (pack + unpack + walk, thousands of objects per second,
 * over about 1 s, 0.2 s with --quick) and bytes/obj (the encoded size).
 */
#include "peers-util.h"

#ifndef PEERS_NO_MSGPACK
#include <msgpack.h>

#define E1_DATA 4096

static const char *const e1_sites[2] = {"https://a.example.com", "https://b.example.com"};

static void e1_pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void e1_pack(msgpack_packer *pk, const uint8_t *data)
{
    msgpack_pack_map(pk, 5);
    e1_pack_str(pk, "websites");
    msgpack_pack_array(pk, 2);
    e1_pack_str(pk, e1_sites[0]);
    e1_pack_str(pk, e1_sites[1]);
    e1_pack_str(pk, "avg_salary");
    msgpack_pack_double(pk, 3000.0);
    e1_pack_str(pk, "employees");
    msgpack_pack_int(pk, 10);
    e1_pack_str(pk, "in_a_good_state");
    msgpack_pack_true(pk);
    e1_pack_str(pk, "data");
    msgpack_pack_bin(pk, E1_DATA);
    msgpack_pack_bin_body(pk, data, E1_DATA);
}

static int e1_key_is(const msgpack_object *k, const char *s)
{
    size_t n = strlen(s);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
           memcmp(k->via.str.ptr, s, n) == 0;
}

static int e1_str_is(const msgpack_object *o, const char *s)
{
    return e1_key_is(o, s);
}

/* Read every field; returns the number of fields found correct (5 when
 * all are) and adds the sum of the data bytes to *sum. */
static int e1_walk(const msgpack_object *root, uint64_t *sum)
{
    int good = 0;
    if (root->type != MSGPACK_OBJECT_MAP)
        return 0;
    for (uint32_t i = 0; i < root->via.map.size; i++) {
        const msgpack_object *k = &root->via.map.ptr[i].key;
        const msgpack_object *v = &root->via.map.ptr[i].val;
        if (e1_key_is(k, "websites")) {
            good += v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == 2 &&
                    e1_str_is(&v->via.array.ptr[0], e1_sites[0]) &&
                    e1_str_is(&v->via.array.ptr[1], e1_sites[1]);
        } else if (e1_key_is(k, "avg_salary")) {
            good += (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32) &&
                    v->via.f64 == 3000.0;
        } else if (e1_key_is(k, "employees")) {
            good += v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == 10;
        } else if (e1_key_is(k, "in_a_good_state")) {
            good += v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
        } else if (e1_key_is(k, "data")) {
            if (v->type == MSGPACK_OBJECT_BIN && v->via.bin.size == E1_DATA) {
                *sum += bench_sum64(v->via.bin.ptr, E1_DATA);
                good++;
            }
        }
    }
    return good;
}

static int e1_msgpack(double target)
{
    uint8_t data[E1_DATA];
    for (size_t j = 0; j < E1_DATA; j++)
        data[j] = (uint8_t)(j * 31 + 7);
    uint64_t want = bench_sum64(data, E1_DATA);
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_unpacked und;
    msgpack_unpacked_init(&und);

    uint64_t objs = 0, sum = 0, bad = 0;
    size_t size = 0;
    double t0 = peers_now(), t;
    do {
        for (int i = 0; i < 256; i++) {
            msgpack_sbuffer_clear(&sbuf);
            e1_pack(&pk, data);
            size_t off = 0;
            if (msgpack_unpack_next(&und, sbuf.data, sbuf.size, &off) !=
                    MSGPACK_UNPACK_SUCCESS ||
                off != sbuf.size) {
                bad++;
                continue;
            }
            if (e1_walk(&und.data, &sum) != 5)
                bad++;
        }
        objs += 256;
        size = sbuf.size;
        t = peers_now();
    } while (t - t0 < target);
    msgpack_unpacked_destroy(&und);
    msgpack_sbuffer_destroy(&sbuf);
    if (bad || sum != want * objs)
        peers_die("msgpack: %llu objects read back wrong", (unsigned long long)bad);
    peers_report("E1", "msgpack", "Kobj/s", (double)objs / (t - t0) / 1e3);
    peers_report("E1", "msgpack", "bytes/obj", (double)size);
    return 0;
}
#else
static int e1_msgpack(double target)
{
    (void)target;
    peers_skip("msgpack: not installed (msgpack-c not found at build time)");
}
#endif

static int e1_run(const bench_ctx *ctx)
{
    return e1_msgpack(ctx->quick ? 0.2 : 1.0);
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"E1", "msgpack", e1_run, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
