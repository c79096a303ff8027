/* The ClickHouse HTTP client: one libcurl easy handle per client (one kept-alive connection),
 * POST requests with the statement in the body (or in ?query= when an INSERT sends data),
 * streaming of the response to a callback with a held-back tail so an exception written after
 * the 200 never reaches the caller as data, error decoding, and retries decided by the pure
 * policy in proto.c. */
#include "clickhouse_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/curl_easy.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

/* Bytes of the response kept back from on_data until more arrive, so an in-band exception at
 * the end can be cut off. Exception texts are far shorter. */
#define HOLD_WINDOW (64 * 1024)
#define ERR_BODY_MAX (64 * 1024)
/* In-memory bodies up to this size are handed to libcurl whole (CURLOPT_POSTFIELDS), which
 * sends them with the headers; libcurl does that below 64 KiB. */
#define SMALL_BODY_MAX (60 * 1024)

struct ferry_ch_client {
    CURL *curl;
    ferry_ch_wire *wire; /* plain-socket transport for http:// (NULL: libcurl carries all) */
    char *url;      /* validated base URL, no credentials */
    char *redacted; /* for messages */
    char *user;
    char *password;
    char *database;
    long connect_timeout_ms;
    long read_timeout_ms;
    int max_attempts;
    long backoff_ms;
    ferry_ch_stats stats;
    /* system.columns of the system database, "table\tcolumn\n" lines; loaded lazily */
    ferry_buf sys_columns;
    bool sys_columns_loaded;
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void ferry_ch_client_free(ferry_ch_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    ferry_ch_wire_free(c->wire);
    free(c->url);
    free(c->redacted);
    free(c->user);
    free_secret(c->password);
    free(c->database);
    ferry_buf_free(&c->sys_columns);
    free(c);
}

int ferry_ch_client_new(const ferry_ch_options *opt, ferry_ch_client **out, ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_buf check = FERRY_BUF_INIT;
    *out = NULL;
    ferry_ch_client *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    rc = ferry_ch_build_url(opt->url, NULL, 0, &check, err);
    if (rc)
        goto out;
    c->url = strdup(opt->url);
    char red[1024];
    c->redacted = strdup(ferry_redact_url(opt->url, red, sizeof red));
    c->user = dup_or_null(opt->user && *opt->user ? opt->user : NULL);
    c->password = dup_or_null(opt->password);
    c->database = dup_or_null(opt->database && *opt->database ? opt->database : NULL);
    c->connect_timeout_ms = opt->connect_timeout_ms > 0 ? opt->connect_timeout_ms : 5000;
    c->read_timeout_ms = opt->read_timeout_ms > 0 ? opt->read_timeout_ms : 300000;
    c->max_attempts = opt->max_attempts > 0 ? opt->max_attempts : 3;
    c->backoff_ms = opt->backoff_ms > 0 ? opt->backoff_ms : 100;
    if (!c->url || !c->redacted || (opt->user && *opt->user && !c->user) ||
        (opt->password && !c->password)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory creating a ClickHouse client");
        goto out;
    }
    /* its options are set again for every transfer (transfer_curl) */
    rc = ferry_curl_new(c->connect_timeout_ms, NULL, &c->curl, err);
    if (rc) {
        ferry_err_prefix(err, "creating a ClickHouse client: ");
        goto out;
    }
    rc = ferry_ch_wire_new(c->url, c->user, c->password, &c->wire, err);
out:
    ferry_buf_free(&check);
    if (rc)
        ferry_ch_client_free(c);
    else
        *out = c;
    return rc;
}

const char *ferry_ch_client_url(const ferry_ch_client *c)
{
    return c->redacted;
}

ferry_buf *ferry_ch_client_sys_cache(ferry_ch_client *c, bool **loaded)
{
    *loaded = &c->sys_columns_loaded;
    return &c->sys_columns;
}

void ferry_ch_client_stats(const ferry_ch_client *c, ferry_ch_stats *out)
{
    *out = c->stats;
}

ssize_t ferry_ch_read_fd(void *buf, size_t cap, void *arg)
{
    int fd = *(const int *)arg;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

int ferry_ch_rewind_fd(void *arg)
{
    int fd = *(const int *)arg;
    return lseek(fd, 0, SEEK_SET) == 0 ? 0 : -1;
}

/* Query ids must be unique, not secret: a per-thread counter run through splitmix64 (a
 * bijection, so one thread never repeats an id) from a seed taken once from the kernel. OpenSSL's
 * RAND_bytes cost ~60 us per call on the router's hot path (its DRBG re-keys per call). */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static _Thread_local bool qid_seeded;
static pthread_once_t qid_once = PTHREAD_ONCE_INIT;
/* A child of fork() would repeat its parent's sequence (the forking thread's state is copied):
 * it seeds its own. */
static void qid_reseed_in_child(void) { qid_seeded = false; }
static void qid_register_atfork(void) { pthread_atfork(NULL, NULL, qid_reseed_in_child); }

int ferry_ch_random_uuid(char out[37])
{
    static _Thread_local uint64_t seed[2], counter;
    if (!qid_seeded) {
        pthread_once(&qid_once, qid_register_atfork);
        if (RAND_bytes((unsigned char *)seed, sizeof seed) != 1)
            return FERRY_EINTERNAL;
        qid_seeded = true;
    }
    counter++;
    uint64_t hi = splitmix64(seed[0] ^ counter), lo = splitmix64(seed[1] + counter);
    unsigned char b[16];
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(hi >> (56 - 8 * i));
        b[8 + i] = (unsigned char)(lo >> (56 - 8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
    return FERRY_OK;
}

void ferry_ch_scrub(char *s, const char *secret)
{
    size_t n = secret ? strlen(secret) : 0;
    if (n < 3)
        return;
    char *p;
    while ((p = strstr(s, secret)) != NULL) {
        memmove(p + 3, p + n, strlen(p + n) + 1);
        memcpy(p, "***", 3);
    }
}

/* ---- one transfer -------------------------------------------------------------------------- */

typedef struct xfer {
    ferry_ch_client *c;
    const ferry_ch_query *q;
    bool binary;
    /* request body */
    const char *mem;
    size_t mem_len, mem_off;
    bool reader_used;
    bool body_failed;
    int body_errno;
    /* response */
    long status;
    bool got_response; /* any header or body byte */
    int hdr_code;      /* X-ClickHouse-Exception-Code */
    char tag[64];      /* X-ClickHouse-Exception-Tag */
    char server_qid[128];
    ferry_buf hold;      /* held-back tail of a 200 body */
    size_t scanned;      /* hold bytes already searched for the tag marker */
    bool in_exception;   /* a tagged exception marker was seen: nothing more is data */
    bool delivered_any;
    uint64_t delivered;
    ferry_buf err_body;  /* body of a non-200 response (capped) */
    int user_rc;         /* what on_data returned when it stopped the query */
    /* read timeout */
    long read_timeout_ms;
    long long last_activity_ms;
    curl_off_t last_dl, last_ul;
    bool timed_out;
    ferry_ch_wire_io *io; /* the plain-socket transfer, when it carries this one */
} xfer;

/* One header of the final response (name and value trimmed). */
static int take_header(xfer *x, const char *name, size_t klen, const char *v, size_t vlen)
{
    x->got_response = true;
    x->last_activity_ms = (long long)ferry_clock_ms_u64();
    char val[128];
    if (vlen >= sizeof val)
        vlen = sizeof val - 1;
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    if (klen == 27 && !strncasecmp(name, "X-ClickHouse-Exception-Code", klen)) {
        x->hdr_code = atoi(val);
    } else if (klen == 26 && !strncasecmp(name, "X-ClickHouse-Exception-Tag", klen)) {
        if (vlen < sizeof x->tag)
            memcpy(x->tag, val, vlen + 1);
    } else if (klen == 21 && !strncasecmp(name, "X-ClickHouse-Query-Id", klen)) {
        snprintf(x->server_qid, sizeof x->server_qid, "%s", val);
    }
    return FERRY_OK;
}

/* libcurl's header callback: one raw header line, or a status line. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    xfer *x = arg;
    size_t len = size * n;
    x->got_response = true;
    x->last_activity_ms = (long long)ferry_clock_ms_u64();
    if (len >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (after 100 Continue) */
        x->hdr_code = 0;
        x->tag[0] = '\0';
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t klen = (size_t)(colon - p);
    const char *v = colon + 1;
    size_t vlen = len - klen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    take_header(x, p, klen, v, vlen);
    return len;
}

/* Hands n bytes from the front of hold to on_data and drops them from hold. */
static int deliver(xfer *x, size_t n)
{
    if (n == 0)
        return FERRY_OK;
    int rc = FERRY_OK;
    if (x->q->on_data)
        rc = x->q->on_data(x->hold.data, n, x->q->on_data_arg);
    x->delivered += n;
    x->delivered_any = true;
    memmove(x->hold.data, x->hold.data + n, x->hold.len - n);
    x->hold.len -= n;
    x->hold.data[x->hold.len] = '\0';
    x->scanned = x->scanned > n ? x->scanned - n : 0;
    return rc;
}

/* Response body bytes (de-chunked). Returns FERRY_OK or a code that stops the transfer
 * (x->user_rc says why when it was on_data's or memory's doing). */
static int take_body(xfer *x, const char *p, size_t len)
{
    x->got_response = true;
    x->last_activity_ms = (long long)ferry_clock_ms_u64();
    if (x->status == 0) {
        if (x->io)
            x->status = x->io->parser->status;
        else
            curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &x->status);
    }
    x->c->stats.bytes_received += len;
    if (x->status != 200) {
        size_t room = x->err_body.len < ERR_BODY_MAX ? ERR_BODY_MAX - x->err_body.len : 0;
        if (ferry_buf_append(&x->err_body, p, len < room ? len : room))
            return FERRY_ENOMEM;
        return FERRY_OK;
    }
    if (ferry_buf_append(&x->hold, p, len)) {
        x->user_rc = FERRY_ENOMEM;
        return FERRY_ENOMEM;
    }
    if (x->in_exception)
        return FERRY_OK;
    if (x->tag[0]) {
        size_t back = strlen(x->tag) + 20; /* the marker may straddle two chunks */
        size_t from = x->scanned > back ? x->scanned - back : 0;
        ssize_t m = ferry_ch_find_tag_marker(x->hold.data + from, x->hold.len - from, x->tag);
        x->scanned = x->hold.len;
        if (m >= 0) {
            size_t cut = from + (size_t)m; /* drop the "\r\n" that opens the block */
            if (cut >= 2 && !memcmp(x->hold.data + cut - 2, "\r\n", 2))
                cut -= 2;
            else if (cut >= 1 && x->hold.data[cut - 1] == '\n')
                cut -= 1;
            x->in_exception = true;
            int rc = deliver(x, cut);
            if (rc) {
                x->user_rc = rc;
                return rc;
            }
            return FERRY_OK;
        }
    }
    if (x->hold.len > 4 * HOLD_WINDOW) {
        int rc = deliver(x, x->hold.len - HOLD_WINDOW);
        if (rc) {
            x->user_rc = rc;
            return rc;
        }
    }
    return FERRY_OK;
}

static size_t on_write(char *p, size_t size, size_t n, void *arg)
{
    size_t len = size * n;
    return take_body(arg, p, len) == FERRY_OK ? len : 0;
}

static int wire_on_header(void *arg, const char *name, size_t nlen, const char *value,
                          size_t vlen)
{
    xfer *x = arg;
    if (x->status == 0)
        x->status = x->io->parser->status;
    return take_header(x, name, nlen, value, vlen);
}

static int wire_on_body(void *arg, const char *data, size_t len)
{
    xfer *x = arg;
    int rc = take_body(x, data, len);
    if (rc)
        x->io->stopped = true;
    return rc;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    xfer *x = arg;
    size_t cap = size * n;
    if (x->mem) {
        size_t left = x->mem_len - x->mem_off;
        size_t k = left < cap ? left : cap;
        memcpy(buf, x->mem + x->mem_off, k);
        x->mem_off += k;
        x->c->stats.bytes_sent += k;
        return k;
    }
    x->reader_used = true;
    ssize_t got = x->q->body_reader(buf, cap, x->q->body_reader_arg);
    if (got < 0) {
        x->body_failed = true;
        x->body_errno = errno;
        return CURL_READFUNC_ABORT;
    }
    x->c->stats.bytes_sent += (uint64_t)got;
    x->last_activity_ms = (long long)ferry_clock_ms_u64();
    return (size_t)got;
}

static int on_seek(void *arg, curl_off_t offset, int origin)
{
    xfer *x = arg;
    if (origin != SEEK_SET || offset != 0)
        return CURL_SEEKFUNC_CANTSEEK;
    if (x->mem) {
        x->mem_off = 0;
        return CURL_SEEKFUNC_OK;
    }
    if (!x->reader_used)
        return CURL_SEEKFUNC_OK;
    if (x->q->body_rewind && x->q->body_rewind(x->q->body_reader_arg) == 0) {
        x->reader_used = false;
        return CURL_SEEKFUNC_OK;
    }
    return CURL_SEEKFUNC_CANTSEEK;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)ultotal;
    xfer *x = arg;
    long long t = (long long)ferry_clock_ms_u64();
    if (dlnow != x->last_dl || ulnow != x->last_ul) {
        x->last_dl = dlnow;
        x->last_ul = ulnow;
        x->last_activity_ms = t;
        return 0;
    }
    if (t - x->last_activity_ms > x->read_timeout_ms) {
        x->timed_out = true;
        return 1;
    }
    return 0;
}

static bool has_dedup_token(const ferry_ch_query *q)
{
    for (size_t i = 0; i < q->n_settings; i++)
        if (!strcmp(q->settings[i].name, "insert_deduplication_token") &&
            q->settings[i].value && *q->settings[i].value)
            return true;
    return q->sql && strcasestr(q->sql, "insert_deduplication_token") != NULL;
}

static bool is_auth_code(int code)
{
    /* UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, IP_ADDRESS_NOT_ALLOWED,
     * AUTHENTICATION_FAILED */
    return code == 192 || code == 193 || code == 194 || code == 195 || code == 516;
}

static void status_message(ferry_ch_status *st, const char *text, const char *password)
{
    snprintf(st->message, sizeof st->message, "%s", text);
    ferry_ch_scrub(st->message, password);
}

/* The message for a transfer a callback stopped (on_data, or memory), or a failed body read. */
static int local_stop(ferry_ch_client *c, xfer *x, enum ferry_ch_failure *failure, ferry_err *err)
{
    *failure = FERRY_CH_FAIL_LOCAL;
    if (x->body_failed)
        return ferry_err_set(err, FERRY_EIO, "ClickHouse at %s: reading the INSERT data "
                             "failed: %s", c->redacted, strerror(x->body_errno));
    return ferry_err_set(err, x->user_rc, "ClickHouse at %s: reading the result stopped after "
                         "%llu bytes (%s)", c->redacted, (unsigned long long)x->delivered,
                         ferry_code_name(x->user_rc));
}

/* One attempt through the plain-socket transport (statements and in-memory bodies to
 * http:// servers). Returns FERRY_OK once a whole response is in (x->status says which). */
static int transfer_wire(ferry_ch_client *c, xfer *x, const char *url, ferry_ch_status *st,
                         enum ferry_ch_failure *failure, ferry_err *err)
{
    ferry_ch_wire_io io = {
        /* the request target: the URL from its path on (ferry_ch_build_url gives one) */
        .target = url + 7 + strcspn(url + 7, "/"),
        .body = x->mem_len ? x->mem : "",
        .body_len = x->mem_len,
        .connect_timeout_ms = c->connect_timeout_ms,
        .read_timeout_ms = x->read_timeout_ms,
        .on_header = wire_on_header,
        .on_body = wire_on_body,
        .arg = x,
    };
    x->io = &io;
    x->last_activity_ms = (long long)ferry_clock_ms_u64();
    int rc = ferry_ch_wire_exchange(c->wire, &io, failure, c->redacted, err);
    x->io = NULL;
    if (x->status == 0 && io.parser)
        x->status = io.parser->status;
    c->stats.connects += (uint64_t)io.connects;
    if (io.bytes_sent)
        c->stats.bytes_sent += x->mem_len;
    st->num_connects = io.connects;
    st->http_status = x->status;
    if (x->status)
        c->stats.queries++;
    if (rc && io.stopped && x->user_rc)
        return local_stop(c, x, failure, err);
    if (rc && io.timed_out) {
        ferry_err_set(err, FERRY_ETIMEOUT, "ClickHouse at %s: no data for %ld ms (read timeout) "
                      "after %llu bytes of the result; query id %s", c->redacted,
                      x->read_timeout_ms, (unsigned long long)(x->delivered + x->hold.len),
                      st->query_id);
    }
    return rc;
}

/* One attempt through libcurl. Returns FERRY_OK once a whole response is in. */
static int transfer_curl(ferry_ch_client *c, xfer *x, const char *url,
                         struct curl_slist *headers, ferry_ch_status *st,
                         enum ferry_ch_failure *failure, ferry_err *err)
{
    CURL *h = c->curl;
    char curl_msg[CURL_ERROR_SIZE] = "";
    curl_easy_reset(h);
    ferry_curl_common(h, c->connect_timeout_ms, curl_msg);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    if (x->mem && x->mem == x->q->sql && x->mem_len <= SMALL_BODY_MAX) {
        /* A statement sent as the body (no data) goes out in the same send() as the headers:
         * one packet, one wake-up of the server instead of two (a read callback makes libcurl
         * send the headers first and the body in a second call). Bodies that are data (INSERT)
         * keep the read callback. */
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->mem_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->mem_len ? x->mem : "");
        c->stats.bytes_sent += x->mem_len;
    } else {
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, x);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         x->mem ? (curl_off_t)x->mem_len : (curl_off_t)-1);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
    if (c->user || c->password) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, c->user ? c->user : "default");
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->password ? c->password : "");
    }
    x->last_activity_ms = (long long)ferry_clock_ms_u64();

    CURLcode cc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    long connects = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
    c->stats.connects += (uint64_t)connects;
    st->num_connects = connects;
    st->http_status = x->status;
    if (x->status)
        c->stats.queries++;

    const char *who = c->redacted;
    if (cc != CURLE_OK) {
        const char *why = curl_msg[0] ? curl_msg : curl_easy_strerror(cc);
        if (x->user_rc || x->body_failed)
            return local_stop(c, x, failure, err);
        if (x->timed_out) {
            *failure = FERRY_CH_FAIL_TIMEOUT;
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "ClickHouse at %s: no data for %ld ms (read timeout) after "
                                 "%llu bytes of the result; query id %s", who, x->read_timeout_ms,
                                 (unsigned long long)(x->delivered + x->hold.len), st->query_id);
        }
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            *failure = FERRY_CH_FAIL_CONNECT;
            return ferry_err_set(err, FERRY_ECONNECT,
                                 "cannot connect to ClickHouse at %s: %s; is the server "
                                 "running and the URL right?", who, why);
        case CURLE_OPERATION_TIMEDOUT:
            if (!x->got_response && connects == 0) {
                curl_off_t ct = 0;
                curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &ct);
                if (ct == 0) {
                    *failure = FERRY_CH_FAIL_CONNECT;
                    return ferry_err_set(err, FERRY_ETIMEOUT,
                                         "cannot connect to ClickHouse at %s within %ld ms: %s",
                                         who, c->connect_timeout_ms, why);
                }
            }
            *failure = FERRY_CH_FAIL_TIMEOUT;
            return ferry_err_set(err, FERRY_ETIMEOUT, "ClickHouse at %s: timed out: %s", who,
                                 why);
        case CURLE_GOT_NOTHING:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
            if (!x->got_response) {
                *failure = FERRY_CH_FAIL_NO_REPLY;
                return ferry_err_set(err, FERRY_ECONNECT,
                                     "ClickHouse at %s closed the connection before answering "
                                     "(%s); the statement may or may not have run", who, why);
            }
            *failure = FERRY_CH_FAIL_PARTIAL;
            return ferry_err_set(err, FERRY_ECONNECT,
                                 "connection to ClickHouse at %s broke after %llu bytes of the "
                                 "response (%s): the server may have stopped; the result is "
                                 "incomplete", who,
                                 (unsigned long long)(x->delivered + x->hold.len +
                                                      x->err_body.len), why);
        default:
            *failure = FERRY_CH_FAIL_LOCAL;
            return ferry_err_set(err, FERRY_EIO, "ClickHouse at %s: HTTP request failed: %s",
                                 who, why);
        }
    }
    return FERRY_OK;
}

/* Runs one attempt; returns a ferry code and sets *failure for the retry policy. */
static int attempt_once(ferry_ch_client *c, xfer *x, const char *url,
                        struct curl_slist *headers, ferry_ch_status *st,
                        enum ferry_ch_failure *failure, ferry_err *err)
{
    c->stats.attempts++;
    /* Larger bodies stay with libcurl: a server that refuses a request early (bad
     * credentials) answers and closes while a big body is still being sent, and libcurl still
     * reads that answer; small requests are sent whole before anything can come back. */
    bool wire = c->wire && x->mem && x->mem_len <= SMALL_BODY_MAX;
    int rc = wire ? transfer_wire(c, x, url, st, failure, err)
                  : transfer_curl(c, x, url, headers, st, failure, err);
    if (rc)
        return rc;
    const char *who = c->redacted;

    if (x->status != 200) {
        *failure = FERRY_CH_FAIL_SERVER;
        const char *body = ferry_buf_cstr(&x->err_body);
        int code = x->hdr_code ? x->hdr_code : ferry_ch_exception_code(body, x->err_body.len);
        st->ch_code = code;
        status_message(st, body, c->password);
        ferry_chomp(st->message);
        if (x->status == 401 || x->status == 403 || is_auth_code(code))
            return ferry_err_set(err, FERRY_EAUTH,
                                 "ClickHouse at %s refused the credentials of user '%s' (HTTP "
                                 "%ld, code %d): %s", who, c->user ? c->user : "default",
                                 x->status, code, st->message);
        return ferry_err_set(err, FERRY_EREMOTE, "ClickHouse at %s: HTTP %ld, code %d: %s", who,
                             x->status, code, st->message[0] ? st->message : "(no message)");
    }

    /* 200: the tail may hold an exception written after the data had started. */
    int code = 0;
    char msg[FERRY_CH_MSG_MAX];
    ssize_t at = ferry_ch_find_trailer(x->hold.data ? x->hold.data : "", x->hold.len,
                                       !x->delivered_any, x->tag[0] ? x->tag : NULL, x->binary,
                                       &code, msg, sizeof msg);
    size_t data_len = at >= 0 ? (size_t)at : x->hold.len;
    rc = deliver(x, data_len);
    if (rc) {
        *failure = FERRY_CH_FAIL_LOCAL;
        return ferry_err_set(err, rc, "ClickHouse at %s: reading the result stopped (%s)", who,
                             ferry_code_name(rc));
    }
    if (at >= 0) {
        *failure = FERRY_CH_FAIL_SERVER;
        st->ch_code = code;
        st->in_band = true;
        status_message(st, msg, c->password);
        return ferry_err_set(err, FERRY_EREMOTE,
                             "ClickHouse at %s: the query failed after %llu bytes of the result "
                             "had been sent (code %d): %s; the result is incomplete", who,
                             (unsigned long long)x->delivered, code, st->message);
    }
    return FERRY_OK;
}

static int ch_exec(ferry_ch_client *c, const ferry_ch_query *q, ferry_ch_status *st_out,
                   ferry_err *err);

/* Every statement, with its time, at debug level (FERRY_LOG_LEVEL=debug): where a flow's time
 * goes. Only the statement's head up to its first string literal is logged (literals can hold
 * tokens or keys). */
int ferry_ch_exec(ferry_ch_client *c, const ferry_ch_query *q, ferry_ch_status *st_out,
                  ferry_err *err)
{
    if (!ferry_log_enabled(FERRY_LOG_DEBUG))
        return ch_exec(c, q, st_out, err);
    double t0 = ferry_clock_ms();
    int rc = ch_exec(c, q, st_out, err);
    double ms = ferry_clock_ms() - t0;
    const char *sql = q->sql ? q->sql : "";
    size_t n = strcspn(sql, "'\n");
    FLOG_DEBUG("msg=\"clickhouse statement\" url=%s ms=%.1f rc=%d sql=\"%.*s\"", c->redacted,
               ms, rc, (int)(n > 120 ? 120 : n), sql);
    return rc;
}

static int ch_exec(ferry_ch_client *c, const ferry_ch_query *q, ferry_ch_status *st_out,
                   ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_ch_status st_local;
    ferry_ch_status *st = st_out ? st_out : &st_local;
    memset(st, 0, sizeof *st);
    ferry_buf url = FERRY_BUF_INIT;
    ferry_ch_setting *params = NULL;
    struct curl_slist *headers = NULL;
    xfer x;
    memset(&x, 0, sizeof x);

    if (!q->sql || !*q->sql) {
        rc = ferry_err_set(err, FERRY_EINVAL, "empty query");
        goto out;
    }
    bool has_body = q->body || q->body_reader;
    if (q->body && q->body_reader) {
        rc = ferry_err_set(err, FERRY_EINVAL, "a query has either a body or a body reader");
        goto out;
    }
    if (q->query_id && *q->query_id) {
        snprintf(st->query_id, sizeof st->query_id, "%s", q->query_id);
    } else if (ferry_ch_random_uuid(st->query_id)) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "no random bytes for a query id");
        goto out;
    }
    params = calloc(q->n_settings + 4, sizeof *params);
    if (!params) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t np = 0;
    params[np++] = (ferry_ch_setting){"query_id", st->query_id};
    const char *db = q->database ? q->database : c->database;
    if (db)
        params[np++] = (ferry_ch_setting){"database", db};
    if (q->format)
        params[np++] = (ferry_ch_setting){"default_format", q->format};
    for (size_t i = 0; i < q->n_settings; i++)
        params[np++] = q->settings[i];
    if (has_body)
        params[np++] = (ferry_ch_setting){"query", q->sql};
    rc = ferry_ch_build_url(c->url, params, np, &url, err);
    if (rc)
        goto out;
    /* No "Expect: 100-continue" round trip for bodies; ClickHouse reads them as they come. */
    headers = curl_slist_append(NULL, "Expect:");
    if (!headers) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }

    ferry_ch_retry_case rcase = {
        .kind = ferry_ch_statement_kind(q->sql),
        .has_dedup_token = has_dedup_token(q),
        .caller_idempotent = q->idempotent,
        .max_attempts = c->max_attempts,
    };
    for (int attempt = 1;; attempt++) {
        ferry_buf_free(&x.hold);
        ferry_buf_free(&x.err_body);
        memset(&x, 0, sizeof x);
        x.c = c;
        x.q = q;
        x.binary = ferry_ch_format_is_binary(q->format);
        x.read_timeout_ms = q->read_timeout_ms > 0 ? q->read_timeout_ms : c->read_timeout_ms;
        if (has_body) {
            x.mem = q->body;
            x.mem_len = q->body ? q->body_len : 0;
        } else {
            x.mem = q->sql;
            x.mem_len = strlen(q->sql);
        }
        st->attempts = attempt;
        st->ch_code = 0;
        st->in_band = false;
        st->message[0] = '\0';
        enum ferry_ch_failure failure = FERRY_CH_FAIL_LOCAL;
        rc = attempt_once(c, &x, ferry_buf_cstr(&url), headers, st, &failure, err);
        st->bytes_received = x.delivered;
        if (x.server_qid[0])
            snprintf(st->query_id, sizeof st->query_id, "%s", x.server_qid);
        if (rc == FERRY_OK)
            break;
        rcase.failure = failure;
        rcase.attempt = attempt;
        rcase.body_replayable = x.mem != NULL || !x.reader_used ||
                                (q->body_rewind && q->body_rewind(q->body_reader_arg) == 0);
        rcase.data_delivered = x.delivered_any;
        if (!ferry_ch_should_retry(&rcase))
            break;
        long delay = ferry_ch_backoff_ms(attempt, c->backoff_ms);
        FLOG_DEBUG("clickhouse retry url=%s attempt=%d delay_ms=%ld error=\"%s\"", c->redacted,
                   attempt, delay, err ? err->msg : "");
        c->stats.retries++;
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
    if (rc && st->attempts > 1)
        ferry_err_prefix(err, "after %d attempts: ", st->attempts);
out:
    if (err && rc)
        ferry_ch_scrub(err->msg, c->password);
    ferry_buf_free(&x.hold);
    ferry_buf_free(&x.err_body);
    curl_slist_free_all(headers);
    free(params);
    ferry_buf_free(&url);
    return rc;
}

static int collect(const void *data, size_t len, void *arg)
{
    return ferry_buf_append(arg, data, len) ? FERRY_ENOMEM : FERRY_OK;
}

int ferry_ch_query_buf(ferry_ch_client *c, const char *sql, const char *format, ferry_buf *out,
                       ferry_ch_status *st, ferry_err *err)
{
    ferry_ch_query q = {.sql = sql, .format = format, .on_data = collect, .on_data_arg = out};
    return ferry_ch_exec(c, &q, st, err);
}

int ferry_ch_query_rows(ferry_ch_client *c, const char *sql, ferry_ch_rows *rows,
                        ferry_ch_status *st, ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    memset(rows, 0, sizeof *rows);
    int rc = ferry_ch_query_buf(c, sql, "TabSeparated", &b, st, err);
    if (rc) {
        ferry_buf_free(&b);
        return rc;
    }
    size_t len = b.len;
    char *text = ferry_buf_detach(&b);
    rc = ferry_ch_rows_parse(text, len, rows, err);
    if (rc)
        ferry_err_prefix(err, "ClickHouse at %s: ", c->redacted);
    return rc;
}
