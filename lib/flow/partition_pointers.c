/* The pointer files of one partition on one server (partition_pointers.h). */
#include "flow/partition_pointers.h"

#include <stdio.h>
#include <string.h>

/* The metadata path of disk in st (the agent's status), into out. */
static int disk_base(const ferry_agent_status_info *st, const char *label, const char *disk,
                     char *out, size_t outsz, ferry_err *err)
{
    for (size_t i = 0; i < st->n_disks; i++) {
        if (!st->disks[i].name || strcmp(st->disks[i].name, disk))
            continue;
        snprintf(out, outsz, "%s", st->disks[i].path ? st->disks[i].path : "");
        return FERRY_OK;
    }
    /* not ENOTFOUND: callers read that as "the table is not on this server" */
    return ferry_err_set(err, FERRY_EIO, "server %s: the agent's status lists no disk %s, which "
                         "holds a part", label, disk);
}

int ferry_partition_pointers_each(ferry_agent_client *ag, const char *label, const char *db,
                                  const char *table, const char *pid, ferry_part_pointers_fn fn,
                                  void *arg, ferry_err *err)
{
    ferry_agent_part_list pl = {0};
    ferry_agent_status_info st;
    bool have_status = false;
    /* the agent lists the detached folders of pid only (by their partition id) */
    int rc = ferry_agent_parts(ag, db, table, pid, &pl, err);
    if (rc)
        return rc;
    size_t n = pl.n_parts + pl.n_detached;
    for (size_t i = 0; i < n && !rc; i++) {
        bool active = i < pl.n_parts;
        const char *disk = active ? pl.parts[i].disk : pl.detached[i - pl.n_parts].disk;
        const char *path = active ? pl.parts[i].path : pl.detached[i - pl.n_parts].path;
        const char *name = active ? pl.parts[i].name : pl.detached[i - pl.n_parts].name;
        if (!disk || !path || !name || !ferry_agent_part_list_remote(&pl, disk))
            continue;
        if (!have_status) { /* once, and only when a part lies on object storage */
            if ((rc = ferry_agent_status(ag, &st, err)))
                break;
            have_status = true;
        }
        char base[4096];
        if ((rc = disk_base(&st, label, disk, base, sizeof base, err)))
            break;
        size_t bl = strlen(base);
        while (bl && base[bl - 1] == '/')
            base[--bl] = '\0';
        if (strncmp(path, base, bl) || path[bl] != '/') {
            rc = ferry_err_set(err, FERRY_EIO, "server %s: part path %s is not under the disk "
                               "path %s", label, path, base);
            break;
        }
        char under[4096];
        snprintf(under, sizeof under, "%s", path + bl + 1);
        size_t ul = strlen(under);
        while (ul && under[ul - 1] == '/')
            under[--ul] = '\0';
        ferry_agent_pointer_list pts = {0};
        rc = ferry_agent_pointers(ag, disk, under, &pts, err);
        if (!rc)
            rc = fn(arg, name, active, &pts, err);
        ferry_agent_pointer_list_free(&pts);
    }
    if (have_status)
        ferry_agent_status_info_free(&st);
    ferry_agent_part_list_free(&pl);
    return rc;
}
