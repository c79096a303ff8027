/* The node agent's client (libcurl): JSON calls to /agent/v1/<op> with a bearer token, and the
 * part stream a source agent sends to a target agent's receive endpoint (files read with pread,
 * each followed by its xxh3-64, the body length computed up front). */
#include "ferry/testknob.h"
#include "agent_client/client_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/curl_easy.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

/* the TCP (and TLS) connect to an agent */
#define AGENT_CONNECT_TIMEOUT_MS 10000L

int ferry_agent_client_new(const char *url, const char *token, long timeout_ms,
                           ferry_agent_client **out, ferry_err *err)
{
    if (!url || (!ferry_starts_with(url, "http://") && !ferry_starts_with(url, "https://")) ||
        strchr(url, '@') || strchr(url, '?'))
        return ferry_err_set(err, FERRY_EINVAL, "agent URL must be http(s)://host:port without "
                             "credentials or query");
    if (!token || !*token || strchr(token, '\n') || strchr(token, '\r'))
        return ferry_err_set(err, FERRY_EINVAL, "agent token must be one non-empty line");
    ferry_agent_client *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* its options are set again for every request (perform) */
    int rc = ferry_curl_new(AGENT_CONNECT_TIMEOUT_MS, NULL, &c->curl, err);
    if (rc) {
        ferry_agent_client_free(c);
        return rc;
    }
    c->base = strdup(url);
    size_t alen = strlen(token) + 32;
    c->auth = malloc(alen);
    if (!c->base || !c->auth) {
        ferry_agent_client_free(c);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    snprintf(c->auth, alen, "Authorization: Bearer %s", token);
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/')
        c->base[--n] = '\0';
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 600000;
    *out = c;
    return FERRY_OK;
}

void ferry_agent_client_set_timeout(ferry_agent_client *c, long timeout_ms)
{
    if (c)
        c->timeout_ms = timeout_ms > 0 ? timeout_ms : 600000;
}

void ferry_agent_client_free(ferry_agent_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base);
    if (c->auth) {
        OPENSSL_cleanse(c->auth, strlen(c->auth));
        free(c->auth);
    }
    free(c);
}

static size_t collect(char *p, size_t sz, size_t nm, void *ud)
{
    ferry_buf *b = ud;
    if (b->len + sz * nm > (64u << 20))
        return 0;
    return ferry_buf_append(b, p, sz * nm) == 0 ? sz * nm : 0;
}

int ferry_agent_code_for_status(long status)
{
    if (status == 400 || status == 405 || status == 422)
        return FERRY_EINVAL;
    if (status == 401 || status == 403)
        return FERRY_EAUTH;
    if (status == 404)
        return FERRY_ENOTFOUND;
    if (status == 409)
        return FERRY_ECONFLICT;
    return FERRY_EREMOTE;
}

/* Runs the prepared request and decodes the answer. */
static int perform(ferry_agent_client *c, const char *what, struct curl_slist *hdrs,
                   json_t **resp, long *http_status, ferry_err *err)
{
    ferry_buf body = FERRY_BUF_INIT;
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *h = c->curl;
    *resp = NULL;
    if (http_status)
        *http_status = 0;
    ferry_curl_common(h, AGENT_CONNECT_TIMEOUT_MS, errbuf); /* curl_easy_reset dropped them */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    CURLcode cc = curl_easy_perform(h);
    int rc = FERRY_OK;
    long status = 0;
    char safe_url[512];
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    double secs = 0;
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &secs);
    /* every request counts, answered or not (ferry_agent_client_stats_get) */
    c->stats.requests++;
    c->stats.ms += secs * 1e3;
    c->last_status = status;
    /* every agent request with its time (FERRY_LOG_LEVEL=debug): where a flow's time goes; a
     * slow one always, so an operator (and the benchmarks) can see where a flow waited */
    if (secs * 1e3 >= FERRY_AGENT_SLOW_MS) {
        c->stats.slow++;
        if (c->name[0])
            ferry_log(FERRY_LOG_INFO, "msg=\"slow agent call\" shard=%s ms=%.0f op=%s", c->name,
                      secs * 1e3, what);
        else
            ferry_log(FERRY_LOG_INFO, "msg=\"slow agent call\" ms=%.0f op=%s", secs * 1e3, what);
    } else {
        FLOG_DEBUG("msg=\"agent request\" op=%s status=%ld ms=%.1f", what, status, secs * 1e3);
    }
    if (http_status)
        *http_status = status;
    ferry_redact_url(c->base, safe_url, sizeof safe_url);
    if (cc != CURLE_OK && status == 0) {
        rc = ferry_err_set(err, cc == CURLE_OPERATION_TIMEDOUT ? FERRY_ETIMEOUT : FERRY_ECONNECT,
                           "agent %s (%s): %s", safe_url, what,
                           errbuf[0] ? errbuf : curl_easy_strerror(cc));
        goto out;
    }
    json_t *j = body.len ? json_loadb(body.data, body.len, 0, NULL) : NULL;
    if (status >= 200 && status < 300 && cc == CURLE_OK) {
        if (!json_is_object(j)) {
            json_decref(j);
            rc = ferry_err_set(err, FERRY_EREMOTE, "agent %s (%s): the answer is not JSON",
                               safe_url, what);
            goto out;
        }
        *resp = j;
        goto out;
    }
    const char *msg = json_string_value(json_object_get(j, "error"));
    rc = ferry_err_set(err, cc != CURLE_OK ? FERRY_ECONNECT : ferry_agent_code_for_status(status),
                       "agent %s (%s): HTTP %ld: %s", safe_url, what, status,
                       msg ? msg : cc != CURLE_OK ? curl_easy_strerror(cc) : "no error text");
    *resp = j;
out:
    curl_easy_reset(h);
    ferry_buf_free(&body);
    return rc;
}

int ferry_agent_call(ferry_agent_client *c, const char *op, json_t *req, json_t **resp,
                     long *http_status, ferry_err *err)
{
    char url[2048];
    c->last_status = 0;
    snprintf(url, sizeof url, "%s" FERRY_AGENT_PREFIX "%s", c->base, op);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    if (req && !body)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    struct curl_slist *hdrs = curl_slist_append(NULL, c->auth);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    int rc = perform(c, op, hdrs, resp, http_status, err);
    curl_slist_free_all(hdrs);
    free(body);
    return rc;
}

/* ---- the part stream ------------------------------------------------------------------------ */

enum { PH_MAGIC, PH_HDR, PH_DATA, PH_HASH, PH_END, PH_DONE };

typedef struct send_state {
    const ferry_agent_send_file *files;
    size_t n, i;
    int phase;
    uint64_t off;
    char pend[600];
    size_t pend_len, pend_off;
    XXH3_state_t *xxh;
    const char *corrupt_file; /* test-only fault injection */
    uint64_t corrupt_off;
    uint64_t sent;
    int read_errno;
} send_state;

static void set_pending(send_state *s, const char *text)
{
    snprintf(s->pend, sizeof s->pend, "%s", text);
    s->pend_len = strlen(s->pend);
    s->pend_off = 0;
}

/* Prepares the next header (or trailer) line; returns false at the end. */
static void next_phase(send_state *s)
{
    char line[600];
    switch (s->phase) {
    case PH_MAGIC:
        s->phase = PH_HDR;
        s->i = 0;
        break;
    case PH_DATA:
        snprintf(line, sizeof line, "H %016" PRIx64 "\n", (uint64_t)XXH3_64bits_digest(s->xxh));
        set_pending(s, line);
        s->phase = PH_HASH;
        return;
    case PH_HASH:
        s->i++;
        s->phase = PH_HDR;
        break;
    case PH_END:
        s->phase = PH_DONE;
        return;
    default:
        break;
    }
    if (s->phase == PH_HDR) {
        if (s->i >= s->n) {
            snprintf(line, sizeof line, "E %zu\n", s->n);
            set_pending(s, line);
            s->phase = PH_END;
            return;
        }
        const ferry_agent_send_file *f = &s->files[s->i];
        if (f->part) /* a batch: the files from here on are this part's */
            snprintf(line, sizeof line, "P %s\nF %" PRIu64 " %s\n", f->part, f->size, f->name);
        else
            snprintf(line, sizeof line, "F %" PRIu64 " %s\n", f->size, f->name);
        set_pending(s, line);
        XXH3_64bits_reset(s->xxh);
        s->off = 0;
    }
}

static size_t send_read(char *buf, size_t sz, size_t nm, void *ud)
{
    send_state *s = ud;
    size_t cap = sz * nm;
    for (;;) {
        if (s->phase == PH_DONE)
            return 0;
        if (s->pend_off < s->pend_len) {
            size_t take = s->pend_len - s->pend_off;
            if (take > cap)
                take = cap;
            memcpy(buf, s->pend + s->pend_off, take);
            s->pend_off += take;
            s->sent += take;
            return take;
        }
        if (s->phase == PH_HDR) { /* its line went out: now the data */
            s->phase = PH_DATA;
        }
        if (s->phase == PH_DATA) {
            const ferry_agent_send_file *f = &s->files[s->i];
            if (s->off < f->size) {
                uint64_t left = f->size - s->off;
                size_t want = left < cap ? (size_t)left : cap;
                ssize_t r = f->data ? (ssize_t)want : pread(f->fd, buf, want, (off_t)s->off);
                if (f->data)
                    memcpy(buf, f->data + s->off, want);
                if (r <= 0) {
                    s->read_errno = r < 0 ? errno : EIO;
                    return CURL_READFUNC_ABORT;
                }
                XXH3_64bits_update(s->xxh, buf, (size_t)r);
                if (s->corrupt_file && !strcmp(s->corrupt_file, f->name) &&
                    s->corrupt_off >= s->off && s->corrupt_off < s->off + (uint64_t)r) {
                    buf[s->corrupt_off - s->off] ^= 0x5a; /* after hashing: "in transit" */
                    FLOG_WARN("agent: test fault injection: flipped byte %" PRIu64 " of %s",
                              s->corrupt_off, f->name);
                }
                s->off += (uint64_t)r;
                s->sent += (uint64_t)r;
                return (size_t)r;
            }
        }
        next_phase(s);
    }
}

/* part NULL: a batch (API 5), each part named by its first file's `part` */
static int send_stream(ferry_agent_client *c, const char *db, const char *table,
                       const char *part, const char *kind, const char *disk,
                       const ferry_agent_send_file *files, size_t n, json_t **resp,
                       long *http_status, uint64_t *bytes_sent, ferry_err *err)
{
    ferry_buf url = FERRY_BUF_INIT;
    send_state s = {.files = files, .n = n, .phase = PH_MAGIC};
    int rc = FERRY_OK;
    char *e1 = curl_easy_escape(c->curl, db, 0), *e2 = curl_easy_escape(c->curl, table, 0),
         *e3 = curl_easy_escape(c->curl, part ? part : "", 0),
         *e4 = curl_easy_escape(c->curl, kind, 0),
         *e5 = disk ? curl_easy_escape(c->curl, disk, 0) : NULL;
    struct curl_slist *hdrs = NULL;
    char corrupt[300] = "";
    s.xxh = XXH3_createState();
    if (!s.xxh || !e1 || !e2 || !e3 || !e4 || (disk && !e5)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    const char *inj = ferry_test_knob("FERRY_AGENT_TEST_CORRUPT_SEND");
    if (inj && *inj) {
        snprintf(corrupt, sizeof corrupt, "%s", inj);
        char *colon = strchr(corrupt, ':');
        if (colon) {
            *colon = '\0';
            ferry_parse_u64(colon + 1, &s.corrupt_off);
        }
        s.corrupt_file = corrupt;
    }
    if (part)
        ferry_buf_printf(&url, "%s" FERRY_AGENT_PREFIX "receive?database=%s&table=%s&part=%s"
                         "&kind=%s", c->base, e1, e2, e3, e4);
    else
        ferry_buf_printf(&url, "%s" FERRY_AGENT_PREFIX "receive?database=%s&table=%s&batch=1"
                         "&kind=%s", c->base, e1, e2, e4);
    if (e5)
        ferry_buf_printf(&url, "&disk=%s", e5);
    /* The exact body length: magic, per file header + bytes + hash line, end line. */
    uint64_t total = strlen("ferry-part 1\n");
    char line[600];
    for (size_t i = 0; i < n; i++) {
        if (!part && i == 0 && !files[i].part) {
            rc = ferry_err_set(err, FERRY_EINVAL, "a batch must name the part of its first file");
            goto out;
        }
        if (!part && files[i].part)
            total += strlen("P \n") + strlen(files[i].part);
        total += (uint64_t)snprintf(line, sizeof line, "F %" PRIu64 " %s\n", files[i].size,
                                    files[i].name) + files[i].size + 19;
    }
    total += (uint64_t)snprintf(line, sizeof line, "E %zu\n", n);
    set_pending(&s, "ferry-part 1\n");
    hdrs = curl_slist_append(NULL, c->auth);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/x-ferry-part");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c->curl, CURLOPT_URL, ferry_buf_cstr(&url));
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, send_read);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, &s);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)total);
    rc = perform(c, "receive", hdrs, resp, http_status, err);
    if (rc && s.read_errno)
        ferry_err_prefix(err, "reading the part's files (%s): ", strerror(s.read_errno));
    if (bytes_sent)
        *bytes_sent = s.sent;
out:
    curl_slist_free_all(hdrs);
    curl_free(e1);
    curl_free(e2);
    curl_free(e3);
    curl_free(e4);
    curl_free(e5);
    if (s.xxh)
        XXH3_freeState(s.xxh);
    ferry_buf_free(&url);
    return rc;
}

int ferry_agent_send_part(ferry_agent_client *c, const char *db, const char *table,
                          const char *part, const char *kind, const char *disk,
                          const ferry_agent_send_file *files, size_t n, json_t **resp,
                          long *http_status, uint64_t *bytes_sent, ferry_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (files[i].part)
            return ferry_err_set(err, FERRY_EINVAL, "the stream of one part names no part per "
                                 "file");
    return send_stream(c, db, table, part, kind, disk, files, n, resp, http_status, bytes_sent,
                       err);
}

int ferry_agent_send_parts(ferry_agent_client *c, const char *db, const char *table,
                           const char *disk, const ferry_agent_send_file *files, size_t n,
                           json_t **resp, long *http_status, uint64_t *bytes_sent,
                           ferry_err *err)
{
    return send_stream(c, db, table, NULL, "pointer", disk, files, n, resp, http_status,
                       bytes_sent, err);
}

/* ---- the client's name and counters (ferry/agent_ops.h) ---------------------------------- */

void ferry_agent_client_set_name(ferry_agent_client *c, const char *name)
{
    if (c)
        snprintf(c->name, sizeof c->name, "%s", name ? name : "");
}

void ferry_agent_client_stats_get(const ferry_agent_client *c, ferry_agent_client_stats *out)
{
    memset(out, 0, sizeof *out);
    if (c)
        *out = c->stats;
}

long ferry_agent_client_last_status(const ferry_agent_client *c)
{
    return c ? c->last_status : 0;
}
