/* What a ClickHouse user may do, from its `SHOW GRANTS FINAL` (doctor's shard_grants check,
 * docs/security.md "The shard identity"). Pure: parses the statements and answers whether a
 * privilege is granted on a table, with ClickHouse's privilege groups (ALL, DROP, ALTER,
 * SOURCES, NAMED COLLECTION ADMIN, ACCESS MANAGEMENT) and partial revokes applied in order.
 * Unknown statements are ignored; column-level grants count as granted. */
#ifndef FERRY_GRANTS_H
#define FERRY_GRANTS_H

#include <stdbool.h>

#include "ferry/err.h"

typedef struct ferry_grants ferry_grants;

/* text: SHOW GRANTS output, one statement per line. *out owned by the caller. */
int ferry_grants_parse(const char *text, ferry_grants **out, ferry_err *err);
void ferry_grants_free(ferry_grants *g);
/* Whether privilege (e.g. "SELECT", "DROP TABLE", "KILL QUERY", "S3", "BACKUP",
 * "SHOW NAMED COLLECTIONS SECRETS", "displaySecretsInShowAndSelect", "CREATE USER") is granted
 * on db.table (NULL db / table: global privileges, checked against *.*). */
bool ferry_grants_allow(const ferry_grants *g, const char *privilege, const char *db,
                        const char *table);

#endif
