/* Connections of a move to its shards: ClickHouse and node agent clients built from the catalog's
 * shard record and the config's credentials for it. */
#include "flow/move_env.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"

static int read_secret(const char *path, char **out, ferry_err *err)
{
    size_t len;
    int rc = ferry_read_file(path, out, &len, err);
    if (rc)
        return rc;
    ferry_chomp(*out);
    return FERRY_OK;
}

int mv_conn_open(const ferry_shard *sh, const struct ferry_config *cfg, mv_conn *c,
                 ferry_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", sh->name);
    snprintf(c->agent_url, sizeof c->agent_url, "%s", sh->agent);
    size_t n = strcspn(sh->replicas, ",");
    if (n >= sizeof c->ch_url)
        n = sizeof c->ch_url - 1;
    memcpy(c->ch_url, sh->replicas, n);
    c->ch_url[n] = '\0';
    char *comma = strchr(c->ch_url, ',');
    if (comma)
        *comma = '\0';
    char *password = NULL;
    int rc = FERRY_OK;
    const char *user = cfg ? ferry_config_get(cfg, "shard", sh->name, "user") : NULL;
    const char *pwf = cfg ? ferry_config_get(cfg, "shard", sh->name, "password_file") : NULL;
    const char *tokf = cfg ? ferry_config_get(cfg, "shard", sh->name, "agent_token_file") : NULL;
    if (!c->ch_url[0] || !c->agent_url[0]) {
        rc = ferry_err_set(err, FERRY_EINVAL, "shard %s has no %s in the catalog", sh->name,
                           !c->ch_url[0] ? "replicas" : "agent");
        goto out;
    }
    if (!tokf || !*tokf) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "the config has no agent_token_file for [shard \"%s\"]; add it (the "
                           "file holding that shard's agent token)", sh->name);
        goto out;
    }
    if ((rc = read_secret(tokf, &c->token, err)))
        goto out;
    if (pwf && *pwf && (rc = read_secret(pwf, &password, err)))
        goto out;
    ferry_ch_options co = {.url = c->ch_url, .user = user && *user ? user : NULL,
                           .password = password, .read_timeout_ms = 600000};
    if ((rc = ferry_ch_client_new(&co, &c->ch, err)))
        goto out;
    rc = ferry_agent_client_new(c->agent_url, c->token, 600000, &c->ag, err);
out:
    if (password) {
        memset(password, 0, strlen(password));
        free(password);
    }
    if (rc) {
        ferry_err_prefix(err, "shard %s: ", sh->name);
        mv_conn_close(c);
    }
    return rc;
}

void mv_conn_close(mv_conn *c)
{
    ferry_ch_client_free(c->ch);
    ferry_agent_client_free(c->ag);
    if (c->token) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
    }
    memset(c, 0, sizeof *c);
}

int mv_sql(mv_conn *c, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    ferry_buf out = FERRY_BUF_INIT;
    int rc = ferry_guarded_exec(c->ch, sql, &out, err);
    if (rc) {
        ferry_err_prefix(err, "%s: ", c->name);
        ferry_buf_free(&out);
        return rc;
    }
    if (!rows) {
        ferry_buf_free(&out);
        return FERRY_OK;
    }
    /* ferry_ch_rows_parse takes the text over */
    size_t len = out.len;
    char *text = out.data ? out.data : strdup("");
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    rc = ferry_ch_rows_parse(text, len, rows, err);
    if (rc) {
        ferry_ch_rows_free(rows);
        ferry_err_prefix(err, "%s: ", c->name);
    }
    return rc;
}

int mv_agent(mv_conn *c, const char *op, json_t *req, json_t **resp, long *status,
             ferry_err *err)
{
    long st = 0;
    json_t *r = NULL;
    int rc = ferry_agent_call(c->ag, op, req, &r, &st, err);
    if (status)
        *status = st;
    if (rc) {
        ferry_err_prefix(err, "agent of %s (%s): ", c->name, op);
        json_decref(r);
        r = NULL;
    }
    if (resp)
        *resp = r;
    else
        json_decref(r);
    return rc;
}
