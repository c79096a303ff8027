/* ferry doctor's checks on a live cluster (include/ferry/doctor.h). */
#include "ferry/doctor.h"
#include "flow/doctor_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "ferry/fleet.h"
#include "ferry/grants.h"
#include "ferry/sqlguard.h"
#include "ferry/log.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/tier.h"

void doctor_finding(json_t *checks, const char *check, const char *status, const char *server,
                    const char *fix, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:s, s:s, s:s}", "check", check, "status", status, "message", msg);
    if (server)
        json_object_set_new(o, "server", json_string(server));
    if (fix)
        json_object_set_new(o, "fix", json_string(fix));
    json_array_append_new(checks, o);
}

/* A store handle that signs with role `cred`'s credentials but lets every operation through
 * ferry's own role check (opened as janitor), so the store itself decides: the canary probe. */
int doctor_open_probe(ferry_fleet *fl, const char *cred, ferry_objstore **out, ferry_err *err)
{
    ferry_buf text = FERRY_BUF_INIT;
    ferry_buf_puts(&text, "[object_store]\n");
    for (size_t i = 0; i < fl->cfg.n; i++) {
        const ferry_config_entry *e = &fl->cfg.entries[i];
        if (!strcmp(e->section, "object_store") && !e->subsection) {
            ferry_buf_printf(&text, "%s = ", e->key);
            ferry_buf_puts(&text, "\"");
            for (const char *c = e->value; *c; c++) {
                if (*c == '"' || *c == '\\')
                    ferry_buf_putc(&text, '\\');
                ferry_buf_putc(&text, *c);
            }
            ferry_buf_puts(&text, "\"\n");
        }
    }
    const char *ak = ferry_config_get(&fl->cfg, "credentials", cred, "access_key_id");
    const char *sk = ferry_config_get(&fl->cfg, "credentials", cred, "secret_access_key_file");
    int rc;
    if (!ak || !sk) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [credentials \"%s\"] is missing",
                           fl->config_path, cred);
        goto out;
    }
    ferry_buf_printf(&text, "[credentials \"janitor\"]\naccess_key_id = \"%s\"\n"
                            "secret_access_key_file = \"%s\"\n", ak, sk);
    ferry_config cfg = {0};
    if ((rc = ferry_config_parse(ferry_buf_cstr(&text), fl->config_path, &cfg, err)) == FERRY_OK)
        rc = ferry_objstore_open_from_config(&cfg, FERRY_ROLE_JANITOR, out, err);
    ferry_config_free(&cfg);
out:
    ferry_buf_free(&text);
    return rc;
}

static void check_delete_refused(ferry_fleet *fl, json_t *checks)
{
    const char *type = ferry_config_get(&fl->cfg, "object_store", NULL, "type");
    if (!type || strcmp(type, "s3")) {
        doctor_finding(checks, "delete_refused", "skipped", NULL, NULL,
                "a local object store has no credentials: ClickHouse's deletes there are stopped "
                "by file permissions (or the lab's delete guard), which doctor cannot test");
        return;
    }
    ferry_objstore *up = NULL, *ch = NULL, *upprobe = NULL, *jan = NULL;
    ferry_err e = {0};
    unsigned char rnd[8];
    RAND_bytes(rnd, sizeof rnd);
    char key[700];
    snprintf(key, sizeof key, "%sferry-doctor/canary-%02x%02x%02x%02x%02x%02x%02x%02x",
             ferry_fleet_store_prefix(fl), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
             rnd[6], rnd[7]);
    const char *fix_ch = "remove s3:DeleteObject (and DeleteObjectVersion) from the ClickHouse "
                         "credential's policy; only the janitor may delete "
                         "(docs/object-store.md)";
    if (ferry_fleet_store(fl, FERRY_ROLE_UPLOADER, &up, &e) ||
        ferry_objstore_put(up, key, "ferry doctor canary\n", 20, &e)) {
        doctor_finding(checks, "delete_refused", "fail", NULL,
                "give the uploader credential s3:PutObject on the prefix (docs/object-store.md)",
                "cannot create the canary %s with the uploader role: %s", key, e.msg);
        goto out;
    }
    bool ok = true;
    const char *creds[2] = {"clickhouse", "uploader"};
    ferry_objstore **probes[2] = {&ch, &upprobe};
    for (int i = 0; i < 2; i++) {
        ferry_err pe = {0};
        if (doctor_open_probe(fl, creds[i], probes[i], &pe)) {
            ok = false;
            doctor_finding(checks, "delete_refused", "fail", NULL, NULL,
                    "cannot open the store with the %s credential: %s", creds[i], pe.msg);
            continue;
        }
        int rc = ferry_objstore_delete(*probes[i], key, &pe);
        if (rc == FERRY_OK) {
            ok = false;
            doctor_finding(checks, "delete_refused", "fail", NULL, fix_ch,
                    "the %s credential DELETED the canary %s: the store lets it delete shared "
                    "objects", creds[i], key);
            /* put it back so the janitor step below still has something to remove */
            ferry_objstore_put(up, key, "ferry doctor canary\n", 20, &pe);
        } else if (rc != FERRY_EAUTH) {
            ok = false;
            doctor_finding(checks, "delete_refused", "fail", NULL, NULL,
                    "the delete with the %s credential failed, but not as refused (%s): cannot "
                    "tell whether the store enforces permissions", creds[i], pe.msg);
        }
    }
    ferry_object_info info = {0};
    if (ferry_fleet_store(fl, FERRY_ROLE_JANITOR, &jan, &e) ||
        ferry_objstore_head(jan, key, &info, &e)) {
        ok = false;
        doctor_finding(checks, "delete_refused", "fail", NULL,
                "give the janitor credential s3:GetObject (HEAD) and s3:DeleteObject",
                "the janitor cannot see the canary %s: %s", key, e.msg);
    } else if (ferry_objstore_delete(jan, key, &e)) {
        ok = false;
        doctor_finding(checks, "delete_refused", "fail", NULL,
                "give the janitor credential s3:DeleteObject (docs/object-store.md)",
                "the janitor cannot delete the canary %s: %s", key, e.msg);
    }
    if (ok)
        doctor_finding(checks, "delete_refused", "pass", NULL, NULL,
                "the store refused deletes by the clickhouse and uploader credentials; the "
                "janitor deleted the canary");
out:
    ferry_objstore_close(up);
    ferry_objstore_close(ch);
    ferry_objstore_close(upprobe);
    ferry_objstore_close(jan);
}

static void check_versioning(ferry_fleet *fl, json_t *checks)
{
    ferry_objstore *jan = NULL;
    ferry_err e = {0};
    char status[64] = "";
    int rc = ferry_fleet_store(fl, FERRY_ROLE_JANITOR, &jan, &e);
    if (!rc)
        rc = ferry_objstore_versioning(jan, status, sizeof status, &e);
    const char *fix = "enable versioning (aws s3api put-bucket-versioning --versioning-"
                      "configuration Status=Enabled; mc version enable) and add a "
                      "NoncurrentVersionExpiration lifecycle rule (docs/object-store.md)";
    if (rc == FERRY_EUNSUPPORTED)
        doctor_finding(checks, "versioning", "unsupported", NULL, NULL,
                "unknown: %s; there is no second safety net against an accidental delete or "
                "overwrite", e.msg);
    else if (rc)
        doctor_finding(checks, "versioning", "fail", NULL,
                "give the janitor credential s3:GetBucketVersioning",
                "cannot read the bucket's versioning: %s", e.msg);
    else if (!strcmp(status, "Enabled"))
        doctor_finding(checks, "versioning", "pass", NULL, NULL, "bucket versioning is enabled");
    else
        doctor_finding(checks, "versioning", "fail", NULL, fix, "bucket versioning is %s",
                status[0] ? status : "off (never enabled)");
    ferry_objstore_close(jan);
}

/* The newest pointer format a server's ClickHouse reads (5 from 23.11 on, 4 before). */
static int newest_pointer_format(const ferry_ch_version *v)
{
    ferry_err ignored = {0};
    return ferry_agent_pointer_version_ok(5, v, &ignored) == FERRY_OK ? 5 : 4;
}

/* Adds the server's version and the pointer formats it reads to the finding just added. */
static void note_server_version(json_t *checks, const ferry_ch_version *v)
{
    json_t *o = json_array_get(checks, json_array_size(checks) - 1);
    json_object_set_new(o, "clickhouse", json_string(v->text));
    json_object_set_new(o, "reads_pointer_formats",
                        json_pack("[i,i]", 1, newest_pointer_format(v)));
}

/* Every server against the pin, then the cluster as a whole: servers of different ClickHouse
 * versions (a rolling upgrade under way) are reported as one "mixed" finding naming each
 * server's version and the pointer formats it reads. */
static void check_versions(ferry_fleet *fl, json_t *checks)
{
    const char *pinned = fl->settings.clickhouse_version;
    ferry_ch_version *vs = calloc(fl->n_servers ? fl->n_servers : 1, sizeof *vs);
    bool *known = calloc(fl->n_servers ? fl->n_servers : 1, sizeof *known);
    if (!vs || !known) {
        doctor_finding(checks, "clickhouse_version", "fail", NULL, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < fl->n_servers; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        ferry_ch_version *v = &vs[i];
        ferry_err e = {0};
        if (ferry_ch_server_version(s->ch, v, &e)) {
            doctor_finding(checks, "clickhouse_version", "fail", s->name, "start the server or fix "
                    "[shard] replicas", "cannot ask %s for its version: %s", s->name, e.msg);
            continue;
        }
        known[i] = true;
        size_t pl = strlen(pinned);
        bool same = !strncmp(v->text, pinned, pl) && (v->text[pl] == '\0' || v->text[pl] == '.');
        char fix[256];
        snprintf(fix, sizeof fix, "run ClickHouse %s on every server, or test the new version "
                 "in the lab and re-pin [cluster] clickhouse_version", pinned);
        if (!same) {
            doctor_finding(checks, "clickhouse_version", "fail", s->name, fix,
                    "%s runs ClickHouse %s; the cluster pins %s (pointer files are an internal "
                    "format; this server reads pointer formats 1 to %d)", s->name, v->text,
                    pinned, newest_pointer_format(v));
            note_server_version(checks, v);
            continue;
        }
        if (ferry_agent_pointer_version_ok((int)fl->settings.pointer_format, v, &e)) {
            doctor_finding(checks, "clickhouse_version", "fail", s->name,
                    "pin a pointer_format the server reads", "%s", e.msg);
            note_server_version(checks, v);
            continue;
        }
        doctor_finding(checks, "clickhouse_version", "pass", s->name, NULL,
                "%s runs ClickHouse %s (pinned %s), reads pointer format %u (formats 1 to %d)",
                s->name, v->text, pinned, fl->settings.pointer_format, newest_pointer_format(v));
        note_server_version(checks, v);
    }
    /* the cluster: one version everywhere, or a mixed one named server by server */
    ferry_buf msg = FERRY_BUF_INIT;
    size_t distinct = 0;
    for (size_t i = 0; i < fl->n_servers; i++) {
        if (!known[i])
            continue;
        bool first = true;
        for (size_t k = 0; k < i; k++)
            if (known[k] && !strcmp(vs[k].text, vs[i].text))
                first = false;
        if (!first)
            continue;
        distinct++;
        ferry_buf_printf(&msg, "%s%s on", msg.len ? "; " : "", vs[i].text);
        for (size_t k = i; k < fl->n_servers; k++)
            if (known[k] && !strcmp(vs[k].text, vs[i].text))
                ferry_buf_printf(&msg, " %s", fl->servers[k].name);
        ferry_buf_printf(&msg, " (reads pointer formats 1 to %d)", newest_pointer_format(&vs[i]));
    }
    if (distinct > 1)
        doctor_finding(checks, "clickhouse_version", "fail", NULL,
                "finish the rolling upgrade one server at a time, then re-pin "
                "[cluster] clickhouse_version (docs/operations.md, \"Upgrading ClickHouse\")",
                "mixed cluster: ClickHouse %s; the cluster pins %s and pointer format %u. "
                "Until one version runs everywhere, tiering refuses servers not at the pin",
                ferry_buf_cstr(&msg), pinned, fl->settings.pointer_format);
    ferry_buf_free(&msg);
out:
    free(vs);
    free(known);
}

/* Whether db.t is a table ferry keeps beside a managed table in the same database: the staging
 * table of moves, repairs and tiering (ferry_tier_staging_name: "<table>_ferry_staging"), the
 * load table of read-only loads beside it ("<table>_ferry_staging_load") or tiering's empty twin
 * (ferry_tier_empty_name: "<table>_ferry_empty"). Ferry's own, so not an
 * unmanaged table. */
bool doctor_is_ferry_table(const ferry_fleet *fl, const char *db, const char *t)
{
    for (size_t i = 0; i < fl->n_tables; i++) {
        char want[FERRY_NAME_MAX + 32], twin[FERRY_NAME_MAX + 32];
        ferry_err ignored = {0};
        if (strcmp(fl->tables[i].database, db))
            continue;
        char load[FERRY_NAME_MAX + 48];
        bool staging = ferry_tier_staging_name(fl->tables[i].name, want, sizeof want,
                                               &ignored) == FERRY_OK;
        snprintf(load, sizeof load, "%s_load", want); /* the read-only loads' (staging_load.c) */
        if ((staging && (!strcmp(want, t) || !strcmp(load, t))) ||
            (ferry_tier_empty_name(fl->tables[i].name, twin, sizeof twin, &ignored) ==
                 FERRY_OK && !strcmp(twin, t)))
            return true;
    }
    return false;
}

static void check_unmanaged(ferry_fleet *fl, json_t *checks)
{
    static const char sql[] =
        "SELECT database, name, storage_policy FROM system.tables WHERE storage_policy IN "
        "(SELECT policy_name FROM system.storage_policies ARRAY JOIN disks AS disk WHERE disk IN "
        "(SELECT name FROM system.disks WHERE is_remote)) AND database NOT IN ('system', "
        "'INFORMATION_SCHEMA', 'information_schema') ORDER BY database, name "
        "FORMAT TabSeparated";
    for (size_t i = 0; i < fl->n_servers; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        ferry_err e = {0};
        ferry_ch_rows rows = {0};
        int rc = ferry_guarded_rows(s->ch, sql, &rows, &e);
        if (rc) {
            doctor_finding(checks, "unmanaged_cold", "fail", s->name, NULL,
                    "cannot read %s's storage policies: %s", s->name, e.msg);
            continue;
        }
        size_t bad = 0, staging = 0;
        for (size_t r = 0; r < rows.n_rows; r++) {
            const char *db = ferry_ch_rows_get(&rows, r, 0), *t = ferry_ch_rows_get(&rows, r, 1),
                       *pol = ferry_ch_rows_get(&rows, r, 2);
            const ferry_table_def *td = ferry_fleet_table_find(fl, t);
            if (td && !strcmp(td->database, db))
                continue;
            if (doctor_is_ferry_table(fl, db, t)) {
                staging++;
                continue;
            }
            bad++;
            doctor_finding(checks, "unmanaged_cold", "fail", s->name,
                    "add a [table] section for it (ferry init), or move its data off the "
                    "object-storage disk and give it a local policy",
                    "%s: table %s.%s uses storage policy '%s' with an object-storage disk, but "
                    "ferry does not manage it: retention and moves do not know what it "
                    "references", s->name, db, t, pol);
        }
        if (!bad)
            doctor_finding(checks, "unmanaged_cold", "pass", s->name, NULL,
                    "%s: every table on an object-storage policy is managed (%zu tables, %zu of "
                    "them ferry's staging and empty twin tables)", s->name, rows.n_rows, staging);
        ferry_ch_rows_free(&rows);
    }
}

/* The identity the catalog records for each shard is the one ferry router sends every client's
 * query with (docs/security.md, "The shard identity"): from its SHOW GRANTS FINAL, it must read
 * and insert the managed tables, kill queries (the router cancels reads past a user's
 * max_execution_time) and read URLs (pipelined merges read partials with url()); it must not
 * drop or truncate them, delete rows, reach the object store or local files, see secrets, back
 * up to disks or manage users. Read-only: nothing is tried. */
static void check_shard_grants(ferry_fleet *fl, json_t **checks_out)
{
    json_t *checks = *checks_out;
    static const struct {
        const char *priv;
        bool on_tables; /* checked on each managed table (else globally) */
        bool wanted;
        const char *why;
    } rules[] = {
        {"SELECT", true, true, "the router reads the managed tables"},
        {"INSERT", true, true, "the router writes the managed tables"},
        {"KILL QUERY", false, true, "the router cancels reads past a user's max_execution_time"},
        {"URL", false, true, "servers read merged partials from the router with url()"},
        {"DROP TABLE", true, false, "a client's query must never drop a managed table"},
        {"DROP DATABASE", true, false, "a client's query must never drop a database"},
        {"TRUNCATE", true, false, "a client's query must never truncate a managed table"},
        {"ALTER DELETE", true, false, "deletes make ClickHouse remove shared cold objects"},
        {"S3", false, false, "s3() would reach the object store"},
        {"FILE", false, false, "file() would read the server's files"},
        {"BACKUP", false, false, "BACKUP writes to disks, the object store's included"},
        {"NAMED COLLECTION", false, false, "named collections hold credentials"},
        {"SHOW NAMED COLLECTIONS SECRETS", false, false, "they show credentials"},
        {"displaySecretsInShowAndSelect", false, false, "it shows the disks' credentials"},
        {"CREATE USER", false, false, "access management is not the router's"},
    };
    for (size_t i = 0; i < fl->n_servers; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        ferry_buf out = FERRY_BUF_INIT;
        ferry_err e = {0};
        ferry_grants *g = NULL;
        int rc = ferry_guarded_exec(s->ch, "SHOW GRANTS FINAL FORMAT TabSeparated", &out, &e);
        if (!rc)
            rc = ferry_grants_parse(ferry_buf_cstr(&out), &g, &e);
        if (rc) {
            doctor_finding(checks, "shard_grants", "fail", s->name, NULL,
                    "cannot read the grants of %s's ClickHouse user: %s", s->name, e.msg);
            ferry_buf_free(&out);
            continue;
        }
        size_t bad = 0;
        for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
            for (size_t t = 0; t < (rules[k].on_tables ? fl->n_tables : 1); t++) {
                const char *db = rules[k].on_tables ? fl->tables[t].database : NULL;
                const char *tb = rules[k].on_tables ? fl->tables[t].name : NULL;
                bool has = ferry_grants_allow(g, rules[k].priv, db, tb);
                if (has == rules[k].wanted)
                    continue;
                bad++;
                char what[300], fix[400];
                if (db && !strcmp(rules[k].priv, "DROP DATABASE"))
                    snprintf(what, sizeof what, "%s ON %s.*", rules[k].priv, db);
                else if (db)
                    snprintf(what, sizeof what, "%s ON %s.%s", rules[k].priv, db, tb);
                else
                    snprintf(what, sizeof what, "%s ON *.*", rules[k].priv);
                snprintf(fix, sizeof fix, "%s %s %s the shard's ClickHouse user "
                         "(docs/security.md, \"The shard identity\")",
                         rules[k].wanted ? "GRANT" : "REVOKE", what,
                         rules[k].wanted ? "TO" : "FROM");
                doctor_finding(checks, "shard_grants", "fail", s->name, fix,
                        "%s: the shard's ClickHouse user %s %s (%s)", s->name,
                        has ? "has" : "lacks", what, rules[k].why);
            }
        }
        if (!bad)
            doctor_finding(checks, "shard_grants", "pass", s->name, NULL,
                    "%s: the shard's ClickHouse user reads and inserts the managed tables, may "
                    "kill queries and read URLs, and may not drop, truncate or delete, reach the "
                    "object store or files, see secrets, back up or manage users", s->name);
        ferry_grants_free(g);
        ferry_buf_free(&out);
    }
}

/* A ZooKeeper catalog without digest authentication has open ACLs: anyone who reaches the
 * ensemble reads and changes routes and users (docs/catalog.md, "ZooKeeper ACLs"). */
static void check_catalog_acl(ferry_fleet *fl, json_t *checks)
{
    const char *url = ferry_config_get(&fl->cfg, "cluster", NULL, "catalog");
    if (!url || strncmp(url, "zk://", 5) != 0) {
        doctor_finding(checks, "catalog_acl", "skipped", NULL, NULL,
                "the catalog is not on ZooKeeper (a SQLite file is protected by its permissions)");
        return;
    }
    const char *q = strchr(url, '?');
    if (q && (strstr(q, "?auth_file=") || strstr(q, "&auth_file=")))
        doctor_finding(checks, "catalog_acl", "pass", NULL, NULL,
                "the catalog's znodes are created with a creator-only digest ACL (auth_file)");
    else
        doctor_finding(checks, "catalog_acl", "fail", NULL,
                "add ?auth_file=/abs/path (a 600 file 'user:password') to [cluster] catalog on "
                "every host, then move the catalog to a new chroot (docs/catalog.md)",
                "the catalog's znodes have ZooKeeper's open ACL: anyone reaching the ensemble "
                "can read and change routes and users");
}

int ferry_doctor_run(ferry_fleet *fl, json_t **report, ferry_err *err)
{
    return ferry_doctor_run_skip(fl, NULL, report, err);
}

int ferry_doctor_run_skip(ferry_fleet *fl, const char *skip, json_t **report, ferry_err *err)
{
    static const char *const names[] = {"delete_refused", "versioning", "clickhouse_version",
                                        "unmanaged_cold", "shard_grants", "catalog_acl",
                                        "object_access", "tier_holds", "broken_parts"};
    for (const char *p = skip; p && *p;) {
        size_t l = strcspn(p, ",");
        bool known = false;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            known = known || (strlen(names[k]) == l && !strncmp(names[k], p, l));
        if (!known)
            return ferry_err_set(err, FERRY_EINVAL, "--skip: '%.*s' is not a check (%s, %s, %s, "
                                 "%s, %s, %s, %s, %s, %s)", (int)l, p, names[0], names[1],
                                 names[2], names[3], names[4], names[5], names[6], names[7],
                                 names[8]);
        p += l + (p[l] == ',');
    }
    json_t *checks = json_array();
    if (!checks)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!ferry_list_has(skip ? skip : "", "delete_refused"))
        check_delete_refused(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "versioning"))
        check_versioning(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "clickhouse_version"))
        check_versions(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "unmanaged_cold"))
        check_unmanaged(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "shard_grants"))
        check_shard_grants(fl, &checks);
    if (!ferry_list_has(skip ? skip : "", "catalog_acl"))
        check_catalog_acl(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "object_access"))
        doctor_check_object_access(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "tier_holds"))
        doctor_check_tier_holds(fl, checks);
    if (!ferry_list_has(skip ? skip : "", "broken_parts"))
        doctor_check_broken_parts(fl, checks);
    bool ok = true;
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c)
    if (!strcmp(json_string_value(json_object_get(c, "status")), "fail"))
        ok = false;
    *report = json_pack("{s:b, s:o}", "ok", ok, "checks", checks);
    ferry_err terr = {0}; /* the cluster's tally (include/ferry/tally.h) is bookkeeping */
    if (*report && ferry_tally_doctor_put(fl->cat, *report, (int64_t)time(NULL), &terr))
        FLOG_WARN("msg=\"doctor not recorded in the cluster's tally\" err=\"%s\"", terr.msg);
    return FERRY_OK;
}
