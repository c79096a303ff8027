/* Authentication in the router (docs/security.md): every request to the ClickHouse interface
 * carries a user of the catalog (ClickHouse's ways to send one: X-ClickHouse-User/Key, HTTP
 * Basic, user/password URL parameters), checked against the salted hash of the snapshot the
 * router runs with, then against the user's client networks; a failure is answered as
 * ClickHouse answers it (AUTHENTICATION_FAILED, the same message whatever went wrong) after the
 * same amount of work, and repeated failures from one address are slowed down (a bounded table,
 * include/ferry/auth.h). The router's own endpoints (/ferry/router, /ferry/partial/) take an
 * admin user or the cluster's token; the shards read partials with a per-partial signature in
 * the url() they are given, so no secret appears in a query text.
 *
 * Users come with the routing snapshot (routing.c loads them at the same routing version), so
 * a password change or a removed user applies to the next request once the router has taken
 * the new version. Credentials the client sent are never logged and never forwarded. */
#include "router_int.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

/* A secret read from a file: the first line, without its line end. *out owned by the caller
 * (wipe before freeing). */
static int read_secret(const char *path, const char *what, char **out, ferry_err *err)
{
    int rc = ferry_read_secret_line(path, out, err);
    if (rc)
        return ferry_err_prefix(err, "%s: ", what);
    if (!**out)
        return ferry_err_set(err, FERRY_EINVAL, "%s: the file %s is empty", what, path);
    return FERRY_OK;
}

static void wipe_free(char *s)
{
    if (!s)
        return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

int rt_auth_init(ferry_router *r, const ferry_config *cfg, const char *listen_addr,
                 bool listen_explicit, ferry_err *err)
{
    pthread_mutex_init(&r->auth_mu, NULL);
    const char *mode = ferry_config_get(cfg, "router", NULL, "auth");
    if (!mode || !strcmp(mode, "catalog")) {
        r->auth = RT_AUTH_CATALOG;
    } else if (!strcmp(mode, "none")) {
        int fam;
        uint8_t a[16];
        if (!listen_explicit || !ferry_addr_parse(listen_addr, &fam, a) ||
            !ferry_addr_loopback(fam, a))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "%s: [router] auth = none is accepted only with an explicit "
                                 "listen address on the loopback interface (listen = "
                                 "127.0.0.1:PORT or --listen 127.0.0.1:PORT); the router would "
                                 "otherwise let anyone who reaches it read and write every "
                                 "tenant (listening on '%s')",
                                 cfg->path, listen_addr);
        r->auth = RT_AUTH_NONE;
        FLOG_WARN("msg=\"router: [router] auth = none: clients are not authenticated; every "
                  "request may read and write every tenant (loopback only)\" listen=%s",
                  listen_addr);
    } else {
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [router] auth = '%s': expected catalog (users from the "
                             "catalog, the default) or none (loopback only)",
                             cfg->path, mode);
    }
    int rc = FERRY_OK;
    const char *tok = ferry_config_get(cfg, "cluster", NULL, "router_token_file");
    if (tok && *tok)
        rc = read_secret(tok, "[cluster] router_token_file", &r->cluster_token, err);
    const char *pu = ferry_config_get(cfg, "router", NULL, "passthrough_user");
    snprintf(r->passthrough_user, sizeof r->passthrough_user, "%s", pu ? pu : "");
    const char *pp = ferry_config_get(cfg, "router", NULL, "passthrough_password_file");
    if (!rc && pp && *pp)
        rc = read_secret(pp, "[router] passthrough_password_file", &r->passthrough_password,
                         err);
    uint64_t v = 0;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "bound_insert_max_bytes", 64u << 20, &v,
                                err);
    if (!rc && (v < 1024 || v > (4ULL << 30)))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] bound_insert_max_bytes must be "
                           "1K..4G", cfg->path);
    r->bound_insert_max_bytes = (size_t)v;
    if (!rc && RAND_bytes(r->partial_key, sizeof r->partial_key) != 1)
        rc = ferry_err_set(err, FERRY_EINTERNAL, "cannot draw random bytes");
    /* failed logins per client address: free ones, then a doubling delay up to the maximum;
     * one failure forgotten per decay period */
    ferry_auth_throttle_policy tp = {0};
    uint64_t n = 0, secs = 0;
    if (!rc)
        rc = ferry_config_u64(cfg, "router", NULL, "login_free_failures", 5, &n, err);
    if (!rc && (n < 1 || n > 1000000))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] login_free_failures must be "
                           "1..1000000", cfg->path);
    tp.free_failures = (uint32_t)n;
    const char *md = ferry_config_get(cfg, "router", NULL, "login_max_delay");
    if (!rc && md && (!ferry_parse_duration(md, &secs) || secs == 0 || secs > 60))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] login_max_delay = '%s': expected a "
                           "duration from 1s to 60s", cfg->path, md);
    tp.max_ms = md ? secs * 1000 : 5000;
    const char *dc = ferry_config_get(cfg, "router", NULL, "login_failure_decay");
    if (!rc && dc && (!ferry_parse_duration(dc, &secs) || secs == 0))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] login_failure_decay = '%s': "
                           "expected a duration such as 30s", cfg->path, dc);
    tp.decay_ms = dc ? secs * 1000 : 30000;
    if (!rc && !(r->throttle = ferry_auth_throttle_new(&tp)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc)
        rc = rt_limits_new(r, &r->limits, err);
    return rc;
}

void rt_auth_free(ferry_router *r)
{
    wipe_free(r->cluster_token);
    wipe_free(r->passthrough_password);
    r->cluster_token = r->passthrough_password = NULL;
    ferry_auth_throttle_free(r->throttle);
    rt_limits_free(r->limits);
    OPENSSL_cleanse(r->partial_key, sizeof r->partial_key);
    pthread_mutex_destroy(&r->auth_mu);
}

/* ---- users of a snapshot ---- */

static int cmp_user(const void *a, const void *b)
{
    return strcmp(((const rt_user *)a)->rec.name, ((const rt_user *)b)->rec.name);
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A comma-separated list into a sorted array of copies. */
static int split_list(const char *list, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    char **v = calloc(cap, sizeof *v);
    if (!v)
        return FERRY_ENOMEM;
    const char *p = list;
    while (*p) {
        size_t l = strcspn(p, ",");
        if (l && !(v[(*n)++] = ferry_strndup(p, l))) {
            for (size_t i = 0; i + 1 < *n; i++)
                free(v[i]);
            free(v);
            *n = 0;
            return FERRY_ENOMEM;
        }
        p += l;
        if (*p == ',')
            p++;
    }
    qsort(v, *n, sizeof *v, cmp_strp);
    *out = v;
    return FERRY_OK;
}

void rt_users_free(rt_user *u, size_t n)
{
    for (size_t i = 0; u && i < n; i++) {
        free(u[i].nets);
        for (size_t k = 0; k < u[i].n_tenants; k++)
            free(u[i].tenants[k]);
        free(u[i].tenants);
        for (size_t k = 0; k < u[i].n_tables; k++)
            free(u[i].tables[k]);
        free(u[i].tables);
    }
    free(u);
}

int rt_users_build(const ferry_record_list *users, rt_user **out, size_t *n, ferry_err *err)
{
    *out = NULL;
    *n = 0;
    rt_user *v = calloc(users->n ? users->n : 1, sizeof *v);
    if (!v)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < users->n; i++) {
        rt_user *u = &v[i];
        u->rec = users->items[i].u.user;
        ferry_err perr = {0};
        if (ferry_cidr_list_parse(u->rec.networks, &u->nets, &u->n_nets, &perr) == FERRY_EINVAL) {
            u->unusable = true;
            FLOG_ERROR("msg=\"router: a user's networks cannot be read; its logins are refused "
                       "until the record is fixed (ferry user set-limits)\" user=%s err=\"%s\"",
                       u->rec.name, perr.msg);
        }
        if ((!u->nets && !u->unusable) || split_list(u->rec.tenants, &u->tenants, &u->n_tenants) ||
            split_list(u->rec.tables, &u->tables, &u->n_tables)) {
            rt_users_free(v, i + 1);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    }
    qsort(v, users->n, sizeof *v, cmp_user);
    *out = v;
    *n = users->n;
    return FERRY_OK;
}

static int cmp_name_user(const void *key, const void *elem)
{
    return strcmp(key, ((const rt_user *)elem)->rec.name);
}

static const rt_user *find_user(const rt_snapshot *s, const char *name)
{
    if (!s->n_users)
        return NULL;
    return bsearch(name, s->users, s->n_users, sizeof *s->users, cmp_name_user);
}

/* ---- requests ---- */

/* A user name as it may appear in a log line: printable ASCII without quotes, else replaced. */
static void log_name(const char *in, char *out, size_t size)
{
    size_t k = 0;
    for (; in[k] && k + 1 < size; k++)
        out[k] = in[k] >= 33 && in[k] < 127 && in[k] != '"' && in[k] != '\\' ? in[k] : '?';
    out[k] = '\0';
}

static void respond_auth_failed(ferry_router *r, ferry_http_req *req, const char *user,
                                const char *detail)
{
    rt_metrics_refused(r, RT_REFUSED_AUTH);
    if (detail)
        rt_respond_error(req, "AUTHENTICATION_FAILED", "%s", detail);
    else
        rt_respond_error(req, "AUTHENTICATION_FAILED",
                         "%s: Authentication failed: password is incorrect, or there is no "
                         "user with such name",
                         user);
}

/* The record every unknown user is checked against, so an unknown name costs what a wrong
 * password costs (the hash never matches: no password hashes to zeros). */
static const char dummy_salt[] = "00000000000000000000000000000000";
static const char dummy_hash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

/* The credentials check: throttle, hash, networks. true when the user may go on; *u set. */
static bool check_login(ferry_router *r, const ferry_auth_cred *c, int fam, const uint8_t *addr,
                        bool have_addr, const rt_snapshot *snap, const rt_user **u,
                        const char **why)
{
    const rt_user *found = find_user(snap, c->user);
    bool ok = ferry_auth_verify(found ? found->rec.salt : dummy_salt,
                                found ? found->rec.hash : dummy_hash, c->password,
                                c->password_len) &&
              found != NULL;
    *why = !found ? "no such user" : !ok ? "wrong password" : NULL;
    if (ok && found->unusable) {
        ok = false;
        *why = "the user's record cannot be enforced (networks)";
    }
    if (ok && found->n_nets) {
        bool in = false;
        for (size_t i = 0; have_addr && i < found->n_nets && !in; i++)
            in = ferry_cidr_match(&found->nets[i], fam, addr);
        if (!in) {
            ok = false;
            *why = "the client's address is outside the user's networks";
        }
    }
    *u = ok ? found : NULL;
    (void)r;
    return ok;
}

void rt_principal_free(ferry_router *r, rt_principal *p)
{
    if (!p)
        return;
    if (p->has_slot)
        rt_limits_leave(r->limits, p);
    rt_snapshot_put(p->snap);
    free(p);
}

/* Fills the principal's scope from its user (bound users). */
static void principal_scope(rt_principal *p)
{
    const rt_user *u = p->user;
    p->scope.tenants = (const char *const *)u->tenants;
    p->scope.n_tenants = u->n_tenants;
    p->scope.tables = (const char *const *)u->tables;
    p->scope.n_tables = u->n_tables;
    p->scope.database = "default";
}

rt_principal *rt_authenticate(ferry_router *r, ferry_http_req *req)
{
    rt_principal *p = calloc(1, sizeof *p);
    if (!p) {
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
        return NULL;
    }
    if (r->auth == RT_AUTH_NONE) {
        p->admin = p->anonymous = true;
        snprintf(p->name, sizeof p->name, "(auth = none)");
        return p;
    }
    char addr_text[64] = "?";
    int fam = 0;
    uint8_t addr[16] = {0};
    bool have_addr = ferry_http_client_addr(req, addr_text, sizeof addr_text) &&
                     ferry_addr_parse(addr_text, &fam, addr);
    ferry_auth_request in = {ferry_http_header(req, "X-ClickHouse-User"),
                             ferry_http_header(req, "X-ClickHouse-Key"),
                             ferry_http_header(req, "Authorization"),
                             ferry_http_arg(req, "user"),
                             ferry_http_arg(req, "password")};
    ferry_auth_cred c;
    ferry_err err = {0};
    int rc = ferry_auth_parse(&in, &c, &err);
    char shown[80];
    log_name(c.user[0] ? c.user : "?", shown, sizeof shown);
    if (rc) {
        FLOG_WARN("msg=\"router: authentication refused\" client=%s err=\"%s\"", addr_text,
                  rc == FERRY_EAUTH ? "malformed credentials" : "out of memory");
        respond_auth_failed(r, req, NULL, err.msg);
        goto fail;
    }
    /* an address that failed often waits before its credentials are even looked at, right or
     * wrong, so a guess that succeeded is not answered faster than one that failed */
    uint64_t delay = 0;
    if (have_addr) {
        pthread_mutex_lock(&r->auth_mu);
        delay = ferry_auth_throttle_delay(r->throttle, fam, addr, ferry_clock_ms_u64());
        pthread_mutex_unlock(&r->auth_mu);
    }
    if (delay)
        usleep((useconds_t)(delay * 1000));
    p->snap = rt_snapshot_get(r);
    const char *why = NULL;
    if (!p->snap || !check_login(r, &c, fam, addr, have_addr, p->snap, &p->user, &why)) {
        if (have_addr) {
            pthread_mutex_lock(&r->auth_mu);
            ferry_auth_throttle_fail(r->throttle, fam, addr, ferry_clock_ms_u64());
            pthread_mutex_unlock(&r->auth_mu);
        }
        FLOG_WARN("msg=\"router: authentication failed\" user=%s client=%s why=\"%s\" "
                  "slowed_ms=%llu",
                  shown, addr_text, why ? why : "no routing table", (unsigned long long)delay);
        respond_auth_failed(r, req, c.user, NULL);
        goto fail;
    }
    snprintf(p->name, sizeof p->name, "%s", c.user);
    p->admin = p->user->rec.admin;
    if (!p->admin)
        principal_scope(p);
    ferry_auth_cred_free(&c);
    char ename[64], emsg[512];
    if (rt_limits_enter(r->limits, p, ename, sizeof ename, emsg, sizeof emsg)) {
        FLOG_INFO("msg=\"router: request refused by a user limit\" user=%s client=%s err=%s",
                  shown, addr_text, ename);
        rt_respond_error(req, ename, "%s", emsg);
        rt_metrics_refused(r, RT_REFUSED_LIMIT);
        rt_principal_free(r, p);
        return NULL;
    }
    return p;
fail:
    ferry_auth_cred_free(&c);
    rt_principal_free(r, p);
    return NULL;
}

bool rt_auth_internal(ferry_router *r, ferry_http_req *req)
{
    if (r->auth == RT_AUTH_NONE)
        return true;
    /* the token as X-Ferry-Token (ferry's processes) or as a bearer token (Prometheus) */
    const char *tok = ferry_http_header(req, "X-Ferry-Token");
    const char *authz = ferry_http_header(req, "Authorization");
    if (!tok && authz && !strncasecmp(authz, "Bearer ", 7))
        tok = authz + 7;
    if (tok) {
        bool ok = r->cluster_token && strlen(tok) == strlen(r->cluster_token) &&
                  CRYPTO_memcmp(tok, r->cluster_token, strlen(tok)) == 0;
        if (ok)
            return true;
        char addr[64] = "?";
        ferry_http_client_addr(req, addr, sizeof addr);
        FLOG_WARN("msg=\"router: a request to the router's own endpoint carried a wrong "
                  "token\" client=%s path=%s", addr, ferry_http_path(req));
        respond_auth_failed(r, req, NULL, r->cluster_token
                                              ? "ferry router: the X-Ferry-Token is wrong"
                                              : "ferry router: this router has no [cluster] "
                                                "router_token_file; use an admin user");
        return false;
    }
    rt_principal *p = rt_authenticate(r, req);
    if (!p)
        return false;
    bool admin = p->admin;
    rt_principal_free(r, p);
    if (!admin)
        rt_respond_error(req, "ACCESS_DENIED",
                         "ferry router: %s needs an admin user or the cluster's token "
                         "(X-Ferry-Token from [cluster] router_token_file)",
                         ferry_http_path(req));
    return admin;
}

void rt_partial_sign(const ferry_router *r, const char *token, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    HMAC(EVP_sha256(), r->partial_key, sizeof r->partial_key, (const unsigned char *)token,
         strlen(token), md, &ml);
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < 32 && i < ml; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

bool rt_partial_sig_ok(const ferry_router *r, const char *token, const char *sig)
{
    char want[65];
    rt_partial_sign(r, token, want);
    return sig && strlen(sig) == 64 && CRYPTO_memcmp(sig, want, 64) == 0;
}
