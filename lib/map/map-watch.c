/* Watches of a map's key (shmobj/watch.h): the map names the key by its
 * control block and the key's seeded hash, the same words its writers
 * report after each change (map_changed() in map-internal.h); the table
 * of watches and the handle's calls are the segment's (seg-watch.c),
 * reached through the space. A destroyed map is the free of its control
 * block, which the segment reports to the map's watches itself. */
#include "map-internal.h"
#include "shmobj/watch.h"

int shmobj_watch_map_key(shmobj_map *map, const void *key, size_t key_len,
                         shmobj_watch **out)
{
    if (!key_ok(map, key, key_len) || out == NULL)
        return SHMOBJ_EINVAL;
    if (map->sp->readonly)
        return SHMOBJ_ERDONLY;
    int rc = map_stale(map);
    if (rc != 0)
        return rc;
    if (map->sp->ops->watch_open == NULL)
        return SHMOBJ_ENOTSUP;
    return map->sp->ops->watch_open(map->sp, map->ctl_ref, map_hash(map, key, key_len), 0,
                                    out);
}
