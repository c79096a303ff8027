/* SHOW GRANTS of a ClickHouse user, evaluated (include/ferry/grants.h). Pure. */
#include "ferry/grants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ferry/strutil.h"

typedef struct grant {
    bool revoke;
    char priv[64];  /* upper-cased unless a function name (dictGet, displaySecrets...) */
    char db[128];   /* "*" = any */
    char table[128];/* "*" = any */
} grant;

struct ferry_grants {
    grant *v;
    size_t n, cap;
};

/* The privileges each group contains, as ClickHouse documents them (only what doctor asks). */
static const struct {
    const char *priv;
    const char *groups[6];
} implied[] = {
    {"DROP TABLE", {"DROP"}},
    {"DROP DATABASE", {"DROP"}},
    {"TRUNCATE", {"TRUNCATE TABLE"}},
    {"ALTER DELETE", {"ALTER", "ALTER TABLE", "DELETE"}},
    {"FILE", {"SOURCES"}},
    {"URL", {"SOURCES"}},
    {"S3", {"SOURCES"}},
    {"REMOTE", {"SOURCES"}},
    {"SHOW NAMED COLLECTIONS SECRETS", {"NAMED COLLECTION ADMIN", "NAMED COLLECTION CONTROL"}},
    {"NAMED COLLECTION", {"NAMED COLLECTION ADMIN", "NAMED COLLECTION CONTROL",
                          "USE NAMED COLLECTION"}},
    {"CREATE USER", {"ACCESS MANAGEMENT"}},
    {"KILL QUERY", {NULL}},
    {"BACKUP", {NULL}},
};

static const char *const sources[] = {"FILE", "URL", "S3", "REMOTE", "HDFS", "AZURE", "MONGO",
                                      "MYSQL", "POSTGRES", "SQLITE", "ODBC", "JDBC", "HIVE",
                                      "KAFKA", "NATS", "RABBITMQ", "REDIS", NULL};

static bool is_source(const char *s)
{
    for (const char *const *p = sources; *p; p++)
        if (!strcasecmp(*p, s))
            return true;
    return false;
}

static int add(ferry_grants *g, bool revoke, const char *priv, const char *db, const char *table)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        grant *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        g->v = v;
        g->cap = cap;
    }
    grant *x = &g->v[g->n++];
    x->revoke = revoke;
    snprintf(x->priv, sizeof x->priv, "%s", priv);
    snprintf(x->db, sizeof x->db, "%s", db);
    snprintf(x->table, sizeof x->table, "%s", table);
    return FERRY_OK;
}

/* Unquotes an identifier part (`x` or "x") in place. */
static char *unquote(char *s)
{
    s = ferry_trim(s);
    size_t n = strlen(s);
    if (n >= 2 && (s[0] == '`' || s[0] == '"') && s[n - 1] == s[0]) {
        s[n - 1] = '\0';
        s++;
    }
    return s;
}

/* One statement: GRANT privs ON target TO ... / REVOKE privs ON target FROM ... */
static int parse_line(ferry_grants *g, char *line)
{
    bool revoke;
    if (!strncasecmp(line, "GRANT ", 6))
        revoke = false;
    else if (!strncasecmp(line, "REVOKE ", 7))
        revoke = true;
    else
        return FERRY_OK;
    char *privs = line + (revoke ? 7 : 6);
    /* " ON " splits privileges from the target (a privilege never contains it) */
    char *on = NULL;
    for (char *p = privs; (p = strcasestr(p, " ON ")); p += 4)
        on = on ? on : p;
    if (!on)
        return FERRY_OK; /* GRANT role TO user: FINAL lists the role's grants already */
    *on = '\0';
    char *target = on + 4;
    char *end = strcasestr(target, revoke ? " FROM " : " TO ");
    if (end)
        *end = '\0';
    target = ferry_trim(target);
    char db[128] = "*", table[128] = "*";
    char tbuf[256];
    snprintf(tbuf, sizeof tbuf, "%s", target);
    char *src = NULL;
    char *paren0 = strchr(tbuf, '('); /* READ ON S3('regex'): the filter may hold dots */
    if (paren0)
        *paren0 = '\0';
    char *dot = strchr(tbuf, '.');
    if (dot) {
        *dot = '\0';
        snprintf(db, sizeof db, "%s", unquote(tbuf));
        snprintf(table, sizeof table, "%s", unquote(dot + 1));
    } else {
        char *paren = strchr(tbuf, '('); /* READ ON S3('regex') */
        if (paren)
            *paren = '\0';
        char *t = unquote(tbuf);
        if (is_source(t))
            src = t;
        /* ON * (named collections, table engines) or ON name: any */
    }
    /* privileges: comma-separated, each maybe with a column list "SELECT(a, b)" */
    int depth = 0;
    char *start = privs;
    for (char *p = privs;; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')')
            depth--;
        if (*p && !(*p == ',' && depth == 0))
            continue;
        char item[128];
        size_t l = (size_t)(p - start);
        if (l >= sizeof item)
            l = sizeof item - 1;
        memcpy(item, start, l);
        item[l] = '\0';
        char *paren = strchr(item, '(');
        if (paren)
            *paren = '\0';
        char *name = ferry_trim(item);
        if (*name) {
            int rc;
            if (src && (!strcasecmp(name, "READ") || !strcasecmp(name, "WRITE")))
                rc = add(g, revoke, src, "*", "*"); /* GRANT READ ON S3 = the S3 source */
            else
                rc = add(g, revoke, name, db, table);
            if (rc)
                return rc;
        }
        if (!*p)
            break;
        start = p + 1;
    }
    return FERRY_OK;
}

int ferry_grants_parse(const char *text, ferry_grants **out, ferry_err *err)
{
    *out = NULL;
    ferry_grants *g = calloc(1, sizeof *g);
    char *copy = strdup(text);
    int rc = FERRY_OK;
    if (!g || !copy) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save))
        rc = parse_line(g, ferry_trim(line));
    if (rc)
        ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    free(copy);
    if (rc)
        ferry_grants_free(g);
    else
        *out = g;
    return rc;
}

void ferry_grants_free(ferry_grants *g)
{
    if (!g)
        return;
    free(g->v);
    free(g);
}

/* Whether the granted name covers privilege priv. */
static bool covers(const char *granted, const char *priv)
{
    if (!strcasecmp(granted, priv) || !strcasecmp(granted, "ALL") ||
        !strcasecmp(granted, "ALL PRIVILEGES"))
        return true;
    for (size_t i = 0; i < sizeof implied / sizeof implied[0]; i++) {
        if (strcasecmp(implied[i].priv, priv))
            continue;
        for (size_t k = 0; k < 6 && implied[i].groups[k]; k++)
            if (!strcasecmp(implied[i].groups[k], granted))
                return true;
    }
    return false;
}

static bool target_covers(const grant *x, const char *db, const char *table)
{
    if (strcmp(x->db, "*") && (!db || strcmp(x->db, db)))
        return false;
    if (strcmp(x->table, "*") && (!table || strcmp(x->table, table)))
        return false;
    return true;
}

bool ferry_grants_allow(const ferry_grants *g, const char *privilege, const char *db,
                        const char *table)
{
    bool allowed = false;
    for (size_t i = 0; i < g->n; i++) {
        const grant *x = &g->v[i];
        if (!covers(x->priv, privilege))
            continue;
        if (x->revoke) {
            /* a partial revoke removes it from what it names (a narrower one from a table) */
            if (target_covers(x, db, table))
                allowed = false;
        } else if (target_covers(x, db, table)) {
            allowed = true;
        }
    }
    return allowed;
}
