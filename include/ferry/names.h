/* The one rule for the names ferry keys its state by (shards, tenants in the catalog, tables,
 * servers, zones ...): the catalog stores them and the placement code hashes and compares them,
 * so both take their length limit from here and a name one accepts the other accepts too.
 * Pure; included by catalog.h and placement.h. */
#ifndef FERRY_NAMES_H
#define FERRY_NAMES_H

#include <stdbool.h>

/* A buffer that holds any valid name and its NUL: names are 1..FERRY_NAME_MAX - 1 bytes. */
#define FERRY_NAME_MAX 128
/* A zone name (a shard's failure domain) is shorter: at most this many bytes. */
#define FERRY_ZONE_NAME_MAX 63

/* The rule in words, for messages: "... is not a valid name (" FERRY_NAME_RULE ")". */
#define FERRY_NAME_RULE "1..127 characters of A-Z a-z 0-9 _ . -, not . or .."

/* 1..FERRY_NAME_MAX - 1 bytes of [A-Za-z0-9_.-], and neither "." nor ".." (names become path
 * segments in the catalog's keys). */
bool ferry_name_ok(const char *s);

#endif
