/* Users of `ferry router` in the catalog (include/ferry/users.h): validation of what an operator
 * gives, the salted hash, and one compare-and-set per change. */
#include "ferry/users.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog_int.h"
#include "ferry/auth.h"
#include "ferry/strutil.h"

static int salted(const ferry_password *pw, ferry_user *u, ferry_err *err)
{
    if ((pw->text != NULL) == (pw->sha256_hex != NULL))
        return ferry_err_set(err, FERRY_EINVAL, "give the password as a file or as its "
                             "SHA-256, exactly one of them");
    if (pw->text && !pw->len)
        return ferry_err_set(err, FERRY_EINVAL, "the password is empty (users need one)");
    int rc = ferry_auth_new_salt(u->salt, err);
    if (!rc)
        rc = pw->text ? ferry_auth_hash_password(u->salt, pw->text, pw->len, u->hash, err)
                      : ferry_auth_hash_from_sha256(u->salt, pw->sha256_hex, u->hash, err);
    return rc;
}

/* Calls check(name) for each non-empty, trimmed item of a comma-separated list, and adds the
 * item to out (size bytes) when it passes: a normalised list (no spaces, no duplicates). what
 * names the list in the message when out is too small. */
typedef int (*item_check_fn)(ferry_catalog *c, const char *name, ferry_err *err);

static int each_item(ferry_catalog *c, const char *list, item_check_fn check, const char *what,
                     char *out, size_t size, ferry_err *err)
{
    out[0] = '\0';
    char *copy = strdup(list);
    if (!copy)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && !rc;
         t = strtok_r(NULL, ",", &save)) {
        char *name = ferry_trim(t);
        if (!*name)
            continue;
        rc = check(c, name, err);
        if (!rc && !ferry_list_add(out, size, name))
            rc = ferry_err_set(err, FERRY_EINVAL, "the %s list is longer than %zu bytes", what,
                               size - 1);
    }
    free(copy);
    return rc;
}

/* A registered tenant. */
static int tenant_ok(ferry_catalog *c, const char *name, ferry_err *err)
{
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a tenant name", name);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_TENANT);
    snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "%s", name);
    int rc = ferry_catalog_get(c, &r, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant '%s' is not registered (ferry tenant add "
                           "%s)", name, name);
    return rc;
}

/* db.table with identifier-like names. */
static int table_ok(ferry_catalog *c, const char *name, ferry_err *err)
{
    (void)c;
    const char *dot = strchr(name, '.');
    bool ok = dot && dot != name && dot[1] && !strchr(dot + 1, '.');
    for (const char *p = name; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             *p == '_' || *p == '.';
    return ok ? FERRY_OK
              : ferry_err_set(err, FERRY_EINVAL, "'%s' is not a table as DATABASE.TABLE "
                              "(letters, digits and _)", name);
}

/* A comma-separated list of registered tenants, normalised (no spaces, no duplicates). */
static int check_tenants(ferry_catalog *c, const char *list, char *out, size_t size,
                         ferry_err *err)
{
    int rc = each_item(c, list, tenant_ok, "tenant", out, size, err);
    if (!rc && !out[0])
        rc = ferry_err_set(err, FERRY_EINVAL, "a user bound to tenants needs at least one "
                           "(--tenants T1,T2; --admin for a user of every tenant)");
    return rc;
}

/* db.table,... with identifier-like names, normalised. */
static int check_tables(const char *list, char *out, size_t size, ferry_err *err)
{
    return each_item(NULL, list, table_ok, "table", out, size, err);
}

static int apply_limits(const ferry_user_limits *lim, ferry_user *u, ferry_err *err)
{
    int rc = FERRY_OK;
    if (!lim)
        return FERRY_OK;
    if (lim->set_tables)
        rc = check_tables(lim->tables, u->tables, sizeof u->tables, err);
    if (!rc && lim->set_networks) {
        ferry_cidr *v = NULL;
        size_t n = 0;
        rc = ferry_cidr_list_parse(lim->networks, &v, &n, err);
        free(v);
        if (!rc && strlen(lim->networks) >= sizeof u->networks)
            rc = ferry_err_set(err, FERRY_EINVAL, "the network list is longer than %zu bytes",
                               sizeof u->networks - 1);
        /* stored as given, without spaces */
        size_t k = 0;
        for (const char *p = lim->networks; !rc && *p; p++)
            if (*p != ' ')
                u->networks[k++] = *p;
        if (!rc)
            u->networks[k] = '\0';
    }
    if (lim->set_max_concurrent)
        u->max_concurrent = lim->max_concurrent;
    if (lim->set_max_rps)
        u->max_rps = lim->max_rps;
    if (lim->set_max_execution_ms)
        u->max_execution_ms = lim->max_execution_ms;
    if (lim->set_queue_wait_ms)
        u->queue_wait_ms = lim->queue_wait_ms;
    return rc;
}

int ferry_user_add(ferry_catalog *c, const char *name, const ferry_password *pw, bool admin,
                   const char *tenants, const ferry_user_limits *lim, ferry_user *out,
                   ferry_err *err)
{
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a user name (1..127 characters of "
                             "A-Z a-z 0-9 _ . -)", name);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_USER);
    ferry_user *u = &r.u.user;
    snprintf(u->name, sizeof u->name, "%s", name);
    u->admin = admin;
    int rc = admin ? FERRY_OK : check_tenants(c, tenants ? tenants : "", u->tenants,
                                               sizeof u->tenants, err);
    if (!rc)
        rc = apply_limits(lim, u, err);
    if (!rc)
        rc = salted(pw, u, err);
    if (!rc)
        rc = ferry_catalog_create(c, &r, err);
    if (rc == FERRY_ECONFLICT)
        rc = ferry_err_set(err, FERRY_ECONFLICT, "user %s exists (ferry user set-password, "
                           "set-tenants or set-limits change it)", name);
    if (!rc && out)
        *out = *u;
    OPENSSL_cleanse(u->hash, sizeof u->hash);
    return rc;
}

/* Reads the user, lets change() edit it, writes it back by CAS. */
static int update(ferry_catalog *c, const char *name, int (*change)(ferry_catalog *, ferry_user *,
                                                                     const void *, ferry_err *),
                  const void *arg, ferry_user *out, ferry_err *err)
{
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a user name", name);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_USER);
    snprintf(r.u.user.name, sizeof r.u.user.name, "%s", name);
    int rc = ferry_catalog_get(c, &r, err);
    if (rc == FERRY_ENOTFOUND)
        return ferry_err_set(err, FERRY_ENOTFOUND, "there is no user %s (ferry user list)", name);
    if (!rc)
        rc = change(c, &r.u.user, arg, err);
    if (!rc)
        rc = ferry_catalog_update(c, &r, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "user %s changed meanwhile; run again: ", name);
    if (!rc && out)
        *out = r.u.user;
    return rc;
}

typedef struct tenants_arg {
    bool admin;
    const char *tenants;
} tenants_arg;

static int change_tenants(ferry_catalog *c, ferry_user *u, const void *arg, ferry_err *err)
{
    const tenants_arg *a = arg;
    u->admin = a->admin;
    if (a->admin) {
        u->tenants[0] = '\0';
        return FERRY_OK;
    }
    return check_tenants(c, a->tenants ? a->tenants : "", u->tenants, sizeof u->tenants, err);
}

int ferry_user_set_tenants(ferry_catalog *c, const char *name, bool admin, const char *tenants,
                           ferry_user *out, ferry_err *err)
{
    tenants_arg a = {admin, tenants};
    return update(c, name, change_tenants, &a, out, err);
}

static int change_password(ferry_catalog *c, ferry_user *u, const void *arg, ferry_err *err)
{
    (void)c;
    return salted(arg, u, err);
}

int ferry_user_set_password(ferry_catalog *c, const char *name, const ferry_password *pw,
                            ferry_err *err)
{
    return update(c, name, change_password, pw, NULL, err);
}

static int change_limits(ferry_catalog *c, ferry_user *u, const void *arg, ferry_err *err)
{
    (void)c;
    return apply_limits(arg, u, err);
}

int ferry_user_set_limits(ferry_catalog *c, const char *name, const ferry_user_limits *lim,
                          ferry_user *out, ferry_err *err)
{
    return update(c, name, change_limits, lim, out, err);
}

int ferry_user_remove(ferry_catalog *c, const char *name, ferry_err *err)
{
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a user name", name);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_USER);
    snprintf(r.u.user.name, sizeof r.u.user.name, "%s", name);
    int rc = ferry_catalog_delete(c, &r, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "there is no user %s (ferry user list)", name);
    return rc;
}

static json_t *list_json(const char *list)
{
    json_t *a = json_array();
    char *copy = strdup(list);
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
    free(copy);
    return a;
}

json_t *ferry_user_json(const ferry_user *u)
{
    return json_pack("{s:s, s:b, s:o, s:o, s:o, s:I, s:I, s:I, s:I}", "name", u->name, "admin",
                     u->admin, "tenants", list_json(u->tenants), "tables", list_json(u->tables),
                     "networks", list_json(u->networks), "max_concurrent",
                     (json_int_t)u->max_concurrent, "max_rps", (json_int_t)u->max_rps,
                     "max_execution_ms", (json_int_t)u->max_execution_ms, "queue_wait_ms",
                     (json_int_t)u->queue_wait_ms);
}
