/* ferry doctor's object_access check (doctor_int.h): what [cluster] clickhouse_object_access
 * promises, tried on the live cluster. In read-only mode ClickHouse's credential must not be
 * able to write at all: the store must refuse a PUT signed with it (the check never leaves an
 * object behind: one it did create goes at once, deleted by the janitor), and no server may merge
 * parts on an object-storage volume (a merge writes the merged part as new objects, the one
 * thing ferry's flows cannot route around; docs/object-store.md). */
#include "flow/doctor_int.h"

#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/sqlguard.h"

#define CHECK "object_access"

/* The store refuses a PUT signed with the clickhouse credential. */
static void check_put_refused(ferry_fleet *fl, json_t *checks)
{
    const char *type = ferry_config_get(&fl->cfg, "object_store", NULL, "type");
    if (!type || strcmp(type, "s3")) {
        doctor_finding(checks, CHECK, "skipped", NULL, NULL,
                       "read-only: a local object store has no credentials; make the cold disk's "
                       "blob directory read-only for the ClickHouse user (file permissions), "
                       "which doctor cannot test");
        return;
    }
    ferry_objstore *ch = NULL, *jan = NULL;
    ferry_err e = {0};
    unsigned char rnd[8];
    RAND_bytes(rnd, sizeof rnd);
    char key[700];
    snprintf(key, sizeof key, "%sferry-doctor/write-probe-%02x%02x%02x%02x%02x%02x%02x%02x",
             ferry_fleet_store_prefix(fl), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
             rnd[6], rnd[7]);
    /* the clickhouse role may PUT as far as ferry's own role check goes: the store decides */
    if (ferry_fleet_store(fl, FERRY_ROLE_CLICKHOUSE, &ch, &e)) {
        doctor_finding(checks, CHECK, "fail", NULL, NULL,
                       "cannot open the store with the clickhouse credential: %s", e.msg);
        return;
    }
    int rc = ferry_objstore_put(ch, key, "ferry doctor write probe\n", 25, &e);
    if (rc == FERRY_EAUTH) {
        doctor_finding(checks, CHECK, "pass", NULL, NULL,
                       "read-only: the store refused a PUT by the clickhouse credential (%s)",
                       e.msg);
    } else if (rc == FERRY_OK) {
        ferry_err de = {0};
        int drc = ferry_fleet_store(fl, FERRY_ROLE_JANITOR, &jan, &de);
        if (!drc)
            drc = ferry_objstore_delete(jan, key, &de);
        doctor_finding(checks, CHECK, "fail", NULL,
                       "allow the ClickHouse credential only s3:GetObject and s3:ListBucket "
                       "(docs/security.md, \"Read-only object access\"), or set "
                       "clickhouse_object_access = read-create",
                       "read-only is configured, but the clickhouse credential CREATED the probe "
                       "object %s%s%s", key,
                       drc ? "; the janitor could not delete it either: " : " (deleted again by "
                             "the janitor)",
                       drc ? de.msg : "");
    } else {
        doctor_finding(checks, CHECK, "fail", NULL, NULL,
                       "the PUT with the clickhouse credential failed, but not as refused (%s): "
                       "cannot tell whether the store enforces read-only access", e.msg);
    }
    ferry_objstore_close(ch);
    ferry_objstore_close(jan);
}

/* No object-storage volume of any server merges: prefer_not_to_merge on every volume that holds
 * a remote disk. */
static void check_no_cold_merges(ferry_fleet *fl, json_t *checks)
{
    static const char sql[] =
        "SELECT DISTINCT policy_name, volume_name FROM system.storage_policies ARRAY JOIN disks "
        "AS disk WHERE disk IN (SELECT name FROM system.disks WHERE is_remote) AND NOT "
        "prefer_not_to_merge ORDER BY policy_name, volume_name FORMAT TabSeparated";
    for (size_t i = 0; i < fl->n_servers; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        ferry_err e = {0};
        ferry_ch_rows rows = {0};
        int rc = ferry_guarded_rows(s->ch, sql, &rows, &e);
        if (rc)
            doctor_finding(checks, CHECK, "fail", s->name, NULL,
                           "cannot read %s's storage policies: %s", s->name, e.msg);
        for (size_t r = 0; !rc && r < rows.n_rows; r++)
            doctor_finding(checks, CHECK, "fail", s->name,
                           "set <prefer_not_to_merge>true</prefer_not_to_merge> on the volume "
                           "(docs/operations.md)",
                           "%s: volume '%s' of storage policy '%s' is on object storage and "
                           "merges parts: a merge writes new objects, which a read-only "
                           "credential refuses", s->name, ferry_ch_rows_get(&rows, r, 1),
                           ferry_ch_rows_get(&rows, r, 0));
        if (!rc && rows.n_rows == 0)
            doctor_finding(checks, CHECK, "pass", s->name, NULL,
                           "%s: no object-storage volume merges parts (prefer_not_to_merge)",
                           s->name);
        ferry_ch_rows_free(&rows);
    }
}

void doctor_check_object_access(ferry_fleet *fl, json_t *checks)
{
    bool ro = false;
    ferry_err e = {0};
    if (ferry_object_access_readonly(&fl->cfg, &ro, &e)) {
        doctor_finding(checks, CHECK, "fail", NULL, "clickhouse_object_access = read-create or "
                       "read-only", "%s", e.msg);
        return;
    }
    if (!ro) {
        doctor_finding(checks, CHECK, "pass", NULL, NULL,
                       "clickhouse_object_access = read-create: ClickHouse's credential reads, "
                       "lists and creates objects (never deletes: delete_refused); staging "
                       "tables are loaded with ATTACH PARTITION");
        return;
    }
    doctor_finding(checks, CHECK, "pass", NULL, NULL,
                   "clickhouse_object_access = read-only: ClickHouse's credential may only read "
                   "and list; staging tables are loaded through a load table (DETACH TABLE, "
                   "the pointer folders placed in its data directory, ATTACH TABLE, MOVE "
                   "PARTITION into staging)");
    check_put_refused(fl, checks);
    check_no_cold_merges(fl, checks);
}
