/* Private: the pieces ferry doctor's checks share across files (doctor.c, doctor_access.c). */
#ifndef FERRY_DOCTOR_INT_H
#define FERRY_DOCTOR_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "ferry/err.h"
#include "ferry/fleet.h"
#include "ferry/objstore.h"

/* Appends one finding {check, status, server?, message, fix?} to checks. */
void doctor_finding(json_t *checks, const char *check, const char *status, const char *server,
                    const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* A store handle that signs with role `cred`'s credentials but lets every operation through
 * ferry's own role check, so the store itself decides what the credential may do. */
int doctor_open_probe(ferry_fleet *fl, const char *cred, ferry_objstore **out, ferry_err *err);

/* object_access: reports [cluster] clickhouse_object_access; in read-only mode, checks that the
 * clickhouse credential really cannot write (a PUT of a probe key must be refused by the store;
 * an object it did create is deleted at once by the janitor) and that no server merges parts on
 * an object-storage volume (a merge writes new objects). doctor_access.c. */
void doctor_check_object_access(ferry_fleet *fl, json_t *checks);

/* tier_holds: every unfinished tier job whose swap may have run and is not verified holds its
 * table's merges stopped (I6 in tier.c); reported with its age since its freeze (warn past 10
 * minutes, fail past an hour) and its last error. doctor_tier_holds.c. */
void doctor_check_tier_holds(ferry_fleet *fl, json_t *checks);

/* Whether db.t is a table ferry keeps beside a managed table (its staging, load or empty twin
 * table). doctor.c. */
bool doctor_is_ferry_table(const ferry_fleet *fl, const char *db, const char *t);

/* broken_parts: folders ClickHouse set aside as broken in detached/ of a managed table (fail:
 * their rows are not served) or of ferry's staging tables (warn: an unfinished job's resume
 * cleans them). doctor_broken_parts.c. */
void doctor_check_broken_parts(ferry_fleet *fl, json_t *checks);

#endif
