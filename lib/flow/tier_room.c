/* Room on the disks before a tier swap (docs/operations.md, "Room on the disks"): the bytes
 * unreserved on the table's local policy disks, which ClickHouse needs for the empty part that
 * covers what a swap removes, and the inodes the wave's parts and pointer files take. Split from
 * tier_steps.c, whose REPLACE step asks it before a swap not begun yet. */
#include "flow/tier_int.h"
#include "flow/disk_room.h"

#include <stdio.h>
#include <string.h>

#include "ferry/strutil.h"

/* ClickHouse 26.7 writes an empty part covering what REPLACE (and DETACH, DROP) removes,
 * reserving 1 MiB on the table's policy; the cold volume reserves nothing (the lab's and
 * docs/operations.md's max_data_part_size_bytes = 1), so with the hot disk full that part
 * cannot be written: DETACH fails before it changes anything, but REPLACE has already swapped
 * in memory, reports NOT_ENOUGH_SPACE, and a restart before the replaced parts are removed
 * brings them back next to the cold ones (rows twice; tests/integration/hot_full_cold_guard.sh).
 * So no swap starts while a local disk of the table's policy has less than this unreserved. */
#define TIER_SWAP_MIN_ROOM (16ull << 20)

/* Whether disk is one of the lines of the list (a policy's local disks, one per line). */
static bool disk_listed(const char *disk, void *arg)
{
    const char *list = arg;
    size_t n = strlen(disk);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, disk, n))
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* Inodes too (disk_room.h): the wave's parts land on the policy's local disks as staging parts
 * and pointer files, and a file system out of inodes fails the swap's covering part as one out
 * of bytes does. The agent's status has each local disk's free inodes. */
static int check_inodes(tier_ctx *ctx, tier_wave *w, const char *policy, ferry_err *err)
{
    uint64_t min_inodes = 0;
    int rc = ferry_min_free_inodes(&ctx->cfg, &min_inodes, err);
    ferry_buf sql = FERRY_BUF_INIT, disks = FERRY_BUF_INIT;
    ferry_agent_status_info st = {0};
    if (rc)
        return rc;
    ferry_buf_puts(&sql, "SELECT arrayJoin((SELECT groupArrayArray(disks) FROM "
                         "system.storage_policies WHERE policy_name = ");
    ferry_sql_quote(policy, &sql);
    ferry_buf_puts(&sql, ")) AS d FORMAT TabSeparated");
    if ((rc = tier_sql(w->srv, ferry_buf_cstr(&sql), &disks, err)))
        goto out;
    if ((rc = ferry_agent_status(w->srv->conn.ag, &st, err))) {
        ferry_err_prefix(err, "%s: agent status: ", w->srv->shard.name);
        goto out;
    }
    char who[2 * FERRY_NAME_MAX], what[4 * FERRY_NAME_MAX];
    snprintf(who, sizeof who, "%s", w->srv->shard.name);
    snprintf(what, sizeof what, "tiering %zu partition(s) of %s.%s", w->n, w->db, w->table);
    rc = ferry_inode_room(&st, disk_listed, disks.data ? disks.data : (char *)"",
                          (uint64_t)w->n * FERRY_INODES_PER_PART, min_inodes, who, what, err);
    if (rc) {
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, "; nothing was swapped, the next run resumes "
                 "once there is room");
    }
out:
    ferry_agent_status_info_free(&st);
    ferry_buf_free(&sql);
    ferry_buf_free(&disks);
    return rc;
}

int tier_check_room(tier_ctx *ctx, tier_wave *w, ferry_err *err)
{
    char policy[FERRY_NAME_MAX];
    bool exists = false, remote = false;
    int rc = tier_table_policy(w->srv, w->db, w->table, &exists, policy, sizeof policy, &remote,
                               err);
    if (rc || !exists)
        return rc;
    if ((rc = check_inodes(ctx, w, policy, err)))
        return rc;
    ferry_buf sql = FERRY_BUF_INIT, out = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "SELECT name, unreserved_space FROM system.disks WHERE NOT is_remote AND "
                         "has((SELECT groupArrayArray(disks) FROM system.storage_policies WHERE "
                         "policy_name = ");
    ferry_sql_quote(policy, &sql);
    ferry_buf_puts(&sql, "), name) ORDER BY unreserved_space LIMIT 1 FORMAT TabSeparated");
    if (!(rc = tier_sql(w->srv, ferry_buf_cstr(&sql), &out, err)) && out.data) {
        char *tab = strchr(out.data, '\t');
        uint64_t room = 0;
        if (tab) {
            *tab = '\0';
            ferry_chomp(tab + 1);
            ferry_parse_u64(tab + 1, &room);
            if (room < TIER_SWAP_MIN_ROOM)
                rc = ferry_err_set(err, FERRY_EIO, "%s: disk %s of %s.%s has %llu bytes "
                                   "unreserved, less than the %llu a swap needs (ClickHouse writes "
                                   "an empty covering part there); nothing was swapped, the next "
                                   "run resumes once there is room", w->srv->shard.name,
                                   out.data, w->db, w->table, (unsigned long long)room,
                                   (unsigned long long)TIER_SWAP_MIN_ROOM);
        }
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&out);
    return rc;
}
