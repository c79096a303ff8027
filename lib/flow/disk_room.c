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

int ferry_inode_room(const ferry_agent_status_info *status,
                     bool (*wanted)(const char *disk, void *arg), void *arg, uint64_t need,
                     uint64_t min_free, const char *who, const char *what, ferry_err *err)
{
    for (size_t i = 0; i < status->n_disks; i++) {
        const ferry_agent_disk *d = &status->disks[i];
        if (d->remote || !d->has_inodes || (wanted && !wanted(d->name ? d->name : "", arg)))
            continue;
        uint64_t have = d->free_inodes;
        if (have >= need && have - need >= min_free)
            continue;
        return ferry_err_set(err, FERRY_EIO,
                             "%s: disk '%s' (%s) has %llu free inodes; %s needs about %llu plus "
                             "[cluster] min_free_inodes = %llu kept free (a file system out of "
                             "inodes fails every write, whatever bytes it has free)",
                             who, d->name ? d->name : "?", d->path ? d->path : "?",
                             (unsigned long long)have, what, (unsigned long long)need,
                             (unsigned long long)min_free);
    }
    return FERRY_OK;
}
