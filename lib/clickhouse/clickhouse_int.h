/* Private pieces shared by the ClickHouse client's files. */
#ifndef FERRY_CLICKHOUSE_INT_H
#define FERRY_CLICKHOUSE_INT_H

#include "ferry/clickhouse.h"

/* Fills out (37 bytes) with a random version-4 UUID. */
int ferry_ch_random_uuid(char out[37]);

/* Replaces every occurrence of secret (when at least 3 characters long) in s by "***". */
void ferry_ch_scrub(char *s, const char *secret);

/* The client's cache of system.columns ("table\tcolumn\n" lines) and its loaded flag. */
ferry_buf *ferry_ch_client_sys_cache(ferry_ch_client *c, bool **loaded);

/* Does system.<table> have column <column>? Answers from a per-client cache of
 * system.columns for the system database, loaded on first use. */
int ferry_ch_system_has_column(ferry_ch_client *c, const char *table, const char *column,
                               bool *has, ferry_err *err);
/* Does system.<table> exist? (Same cache.) */
int ferry_ch_system_has_table(ferry_ch_client *c, const char *table, bool *has, ferry_err *err);

#endif
