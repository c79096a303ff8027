/* Users of `ferry router` in the catalog (docs/security.md): adding, changing and removing
 * them. Each change is one compare-and-set on the user's record; the catalog raises the routing
 * version with it, so every running router takes it within one routing-version wait. Passwords
 * are taken as text or as their SHA-256 and stored salted (include/ferry/auth.h); nothing here
 * prints or logs them. */
#ifndef FERRY_USERS_H
#define FERRY_USERS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

/* A password as given: exactly one of text (with its length) or sha256_hex. */
typedef struct ferry_password {
    const char *text;
    size_t len;
    const char *sha256_hex;
} ferry_password;

/* What set-limits changes: each field applies when its `set_` flag is true. */
typedef struct ferry_user_limits {
    bool set_tables, set_networks, set_max_concurrent, set_max_rps, set_max_execution_ms,
        set_queue_wait_ms;
    const char *tables;   /* db.table,... ("" clears) */
    const char *networks; /* CIDR,... ("" = any address) */
    uint32_t max_concurrent, max_rps, max_execution_ms, queue_wait_ms;
} ferry_user_limits;

/* Creates user name: admin, or bound to tenants (comma-separated, each registered). Limits as
 * given (only the set ones; the rest 0 / ""). FERRY_EINVAL naming what is wrong (a bad name, an
 * unknown tenant, a malformed network or table, an empty password), FERRY_ECONFLICT when the
 * user exists. *out (may be NULL) gets the record written. */
int ferry_user_add(ferry_catalog *c, const char *name, const ferry_password *pw, bool admin,
                   const char *tenants, const ferry_user_limits *lim, ferry_user *out,
                   ferry_err *err);
/* Makes the user an admin (admin true) or binds it to tenants (replacing its list). */
int ferry_user_set_tenants(ferry_catalog *c, const char *name, bool admin, const char *tenants,
                           ferry_user *out, ferry_err *err);
/* A new password (a new salt too). */
int ferry_user_set_password(ferry_catalog *c, const char *name, const ferry_password *pw,
                            ferry_err *err);
int ferry_user_set_limits(ferry_catalog *c, const char *name, const ferry_user_limits *lim,
                          ferry_user *out, ferry_err *err);
/* FERRY_ENOTFOUND when there is no such user. */
int ferry_user_remove(ferry_catalog *c, const char *name, ferry_err *err);

/* The user as `ferry user --json` shows it, without its salt and hash: {name, admin, tenants,
 * tables, networks (arrays), max_concurrent, max_rps, max_execution_ms, queue_wait_ms}. Caller
 * decrefs. */
json_t *ferry_user_json(const ferry_user *u);

#endif
