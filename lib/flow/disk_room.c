/* Inode room on a server's local disks (disk_room.h): the check the move's and the tier swap's
 * room guards make next to their bytes check. */
#include "disk_room.h"

#include <stdio.h>
#include <string.h>

#include "ferry/config.h"

int ferry_min_free_inodes(const struct ferry_config *cfg, uint64_t *out, ferry_err *err)
{
    *out = FERRY_MIN_FREE_INODES_DEFAULT;
    if (!cfg)
        return FERRY_OK;
    return ferry_config_u64(cfg, "cluster", NULL, "min_free_inodes",
                            FERRY_MIN_FREE_INODES_DEFAULT, out, err);
}

int ferry_inode_room(json_t *status, bool (*wanted)(const char *disk, void *arg), void *arg,
                     uint64_t need, uint64_t min_free, const char *who, const char *what,
                     ferry_err *err)
{
    json_t *d;
    size_t i;
    json_array_foreach(json_object_get(status, "disks"), i, d)
    {
        json_t *fi = json_object_get(d, "free_inodes");
        const char *name = json_string_value(json_object_get(d, "name"));
        if (json_is_true(json_object_get(d, "remote")) || !json_is_integer(fi) ||
            json_integer_value(fi) < 0 || (wanted && !wanted(name ? name : "", arg)))
            continue;
        uint64_t have = (uint64_t)json_integer_value(fi);
        if (have >= need && have - need >= min_free)
            continue;
        return ferry_err_set(err, FERRY_EIO,
                             "%s: disk '%s' (%s) has %llu free inodes; %s needs about %llu plus "
                             "[cluster] min_free_inodes = %llu kept free (a file system out of "
                             "inodes fails every write, whatever bytes it has free)",
                             who, name ? name : "?",
                             json_string_value(json_object_get(d, "path")) ?: "?",
                             (unsigned long long)have, what, (unsigned long long)need,
                             (unsigned long long)min_free);
    }
    return FERRY_OK;
}
