/* ferry doctor's broken_parts check (doctor_int.h): folders ClickHouse set aside as broken in
 * detached/ (`broken-on-start_*`, `broken_*`, `covered-by-broken_*`). ClickHouse does so when a
 * part cannot be loaded at start: a pointer file emptied by a kill -9 while ClickHouse rewrote it
 * (ClickHouse #113179), or a part it committed with an empty or short file when its disk filled
 * (docs/reliability.md). The rows of such a part are served nowhere on that server, nothing in
 * ClickHouse says so after its start log, and the sweep cannot know which objects an emptied
 * pointer file named. In a managed table that fails the doctor; in ferry's staging tables it is
 * a warning, since the unfinished job that owns the folder removes it when it resumes. */
#define _DEFAULT_SOURCE
#include "flow/doctor_int.h"

#include <stdio.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/sqlguard.h"

#define CHECK "broken_parts"
#define NAMED_MAX 5 /* folders named in one finding */

void doctor_check_broken_parts(ferry_fleet *fl, json_t *checks)
{
    static const char sql[] =
        "SELECT database, table, name FROM system.detached_parts WHERE (startsWith(name, "
        "'broken') OR startsWith(name, 'covered-by-broken')) AND database NOT IN ('system', "
        "'INFORMATION_SCHEMA', 'information_schema') ORDER BY database, table, name "
        "FORMAT TabSeparated";
    for (size_t i = 0; i < fl->n_servers; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        ferry_err e = {0};
        ferry_ch_rows rows = {0};
        if (ferry_guarded_rows(s->ch, sql, &rows, &e)) {
            doctor_finding(checks, CHECK, "fail", s->name, NULL,
                           "cannot read %s's detached parts: %s", s->name, e.msg);
            continue;
        }
        ferry_buf managed = FERRY_BUF_INIT, staging = FERRY_BUF_INIT;
        size_t n_managed = 0, n_staging = 0;
        for (size_t r = 0; r < rows.n_rows; r++) {
            const char *db = ferry_ch_rows_get(&rows, r, 0), *t = ferry_ch_rows_get(&rows, r, 1),
                       *name = ferry_ch_rows_get(&rows, r, 2);
            const ferry_table_def *td = ferry_fleet_table_find(fl, t);
            bool is_managed = td && !strcmp(td->database, db);
            if (!is_managed && !doctor_is_ferry_table(fl, db, t))
                continue; /* not ferry's table: not its business */
            ferry_buf *b = is_managed ? &managed : &staging;
            size_t *n = is_managed ? &n_managed : &n_staging;
            if ((*n)++ < NAMED_MAX)
                ferry_buf_printf(b, "%s%s.%s/detached/%s", *n > 1 ? ", " : "", db, t, name);
        }
        if (n_managed)
            doctor_finding(checks, CHECK, "fail", s->name,
                           "if a tier job or a move of the partition's slice is unfinished, "
                           "resume it (`ferry tier`, `ferry move --resume`): it mends the "
                           "partition; for a slice with replicas run `ferry repair`; otherwise "
                           "restore the rows from the folder's files or a backup. Then remove "
                           "the folder",
                           "%s: %zu part folder(s) of managed tables set aside as broken by "
                           "ClickHouse (%s%s): their rows are not served from this server",
                           s->name, n_managed, ferry_buf_cstr(&managed),
                           n_managed > NAMED_MAX ? ", ..." : "");
        if (n_staging)
            doctor_finding(checks, CHECK, "warn", s->name,
                           "resume the unfinished tier job, move or repair on this server: it "
                           "removes them",
                           "%s: %zu part folder(s) of ferry's staging tables set aside as broken "
                           "by ClickHouse (%s%s)", s->name, n_staging, ferry_buf_cstr(&staging),
                           n_staging > NAMED_MAX ? ", ..." : "");
        if (!n_managed && !n_staging)
            doctor_finding(checks, CHECK, "pass", s->name, NULL,
                           "%s: no part of a managed or staging table set aside as broken",
                           s->name);
        ferry_buf_free(&managed);
        ferry_buf_free(&staging);
        ferry_ch_rows_free(&rows);
    }
}
