/* Bulk reads for the ZooKeeper backend's scans: ZooKeeper's multiRead (opcode 22, ZooKeeper 3.6+
 * and ClickHouse Keeper) puts up to ZB_OPS gets or getChildren in one request, on a session of
 * its own spoken over a plain socket, because the C client (3.8) has no multiRead. A scan of a
 * million znodes is then about a thousand requests instead of a million: the server's request
 * pipeline and the client's completion thread are paid per request, and those were the cost
 * (docs/benchmarks.md, "ZooKeeper at a million slices"). The session is opened for one scan,
 * synced with the leader first (so it reads at least what the catalog's own session saw when the
 * scan began) and closed after it. A server that does not know multiRead (3.5) answers with an
 * error or closes the connection: zk_bulk_* then return ZUNIMPLEMENTED and the scan goes back to
 * one pipelined request per znode (zk.c); so does a level whose bulk read fails otherwise (lost
 * connection, no answer within the session timeout, an answer over 256 MB), after emptying its
 * slots. Wire format: ZooKeeper's jute encoding, big-endian. */
#include "catalog/zk_int.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ferry/lines.h"
#include "ferry/strutil.h"

#define ZB_OPS 1000              /* operations per multiRead */
#define ZB_REQ_BYTES (256 * 1024) /* well under the server's 1 MB jute.maxbuffer */
#define ZB_WINDOW 4              /* multiReads in flight */
#define ZB_MULTI_READ 22
#define ZB_GET_DATA 4
#define ZB_GET_CHILDREN 8
#define ZB_SYNC 9
#define ZB_AUTH 100
#define ZB_CLOSE (-11)
#define ZB_ERROR_RESULT (-1)

struct zk_bulk {
    int fd;
    int32_t xid;
};

/* ---- the wire ---------------------------------------------------------------------------- */

typedef struct zb_out {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} zb_out;

static void put(zb_out *o, const void *d, size_t n)
{
    if (o->oom)
        return;
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4096;
        while (cap < o->n + n)
            cap *= 2;
        unsigned char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, d, n);
    o->n += n;
}
static void put32(zb_out *o, int32_t v)
{
    uint32_t b = htonl((uint32_t)v);
    put(o, &b, 4);
}
static void put64(zb_out *o, int64_t v)
{
    uint64_t b = htobe64((uint64_t)v);
    put(o, &b, 8);
}
static void put8(zb_out *o, unsigned char v) { put(o, &v, 1); }
static void putbuf(zb_out *o, const char *s, size_t n)
{
    put32(o, (int32_t)n);
    put(o, s, n);
}

typedef struct zb_in {
    const unsigned char *p;
    size_t n, at;
    bool bad;
} zb_in;

static const unsigned char *take(zb_in *in, size_t n)
{
    if (in->bad || in->n - in->at < n) {
        in->bad = true;
        return NULL;
    }
    const unsigned char *p = in->p + in->at;
    in->at += n;
    return p;
}
static int32_t get32(zb_in *in)
{
    const unsigned char *p = take(in, 4);
    uint32_t b = 0;
    if (p)
        memcpy(&b, p, 4);
    return (int32_t)ntohl(b);
}
static int64_t get64(zb_in *in)
{
    const unsigned char *p = take(in, 8);
    uint64_t b = 0;
    if (p)
        memcpy(&b, p, 8);
    return (int64_t)be64toh(b);
}
static bool get8(zb_in *in)
{
    const unsigned char *p = take(in, 1);
    return p && *p;
}
/* A jute buffer or string: *len -1 for null. */
static const char *getbuf(zb_in *in, int32_t *len)
{
    *len = get32(in);
    if (*len < 0)
        return NULL;
    return (const char *)take(in, (size_t)*len);
}

static bool send_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}
static bool recv_all(int fd, unsigned char *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Sends o as one frame (the length first). */
static bool send_frame(int fd, zb_out *o)
{
    uint32_t len = htonl((uint32_t)o->n);
    return !o->oom && send_all(fd, (const unsigned char *)&len, 4) && send_all(fd, o->p, o->n);
}

/* Reads one frame into *buf (malloc'ed, caller frees). */
static bool recv_frame(int fd, unsigned char **buf, size_t *n)
{
    uint32_t len = 0;
    *buf = NULL;
    if (!recv_all(fd, (unsigned char *)&len, 4))
        return false;
    len = ntohl(len);
    if (len > 256u * 1024 * 1024)
        return false;
    *buf = malloc(len ? len : 1);
    *n = len;
    return *buf && recv_all(fd, *buf, len);
}

/* One request (header xid/type, body) and its reply's error code; the reply's body is left in
 * *reply (caller frees) with in positioned after the reply header. */
static int call(zk_bulk *b, int32_t type, zb_out *body, unsigned char **reply, zb_in *in)
{
    zb_out o = {0};
    int32_t xid = type == ZB_AUTH ? -4 : ++b->xid;
    put32(&o, xid);
    put32(&o, type);
    if (body)
        put(&o, body->p, body->n);
    bool ok = send_frame(b->fd, &o);
    free(o.p);
    size_t n = 0;
    *reply = NULL;
    if (!ok || !recv_frame(b->fd, reply, &n))
        return ZCONNECTIONLOSS;
    *in = (zb_in){*reply, n, 0, false};
    int32_t rx = get32(in);
    (void)get64(in); /* zxid */
    int32_t err = get32(in);
    if (in->bad || rx != xid)
        return ZMARSHALLINGERROR;
    return err;
}

/* ---- the session --------------------------------------------------------------------------- */

static int dial(const char *hosts, int timeout_ms)
{
    char list[1024];
    snprintf(list, sizeof list, "%s", hosts);
    char *save = NULL;
    for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(h, ':');
        if (!colon)
            continue;
        *colon = '\0';
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(h, colon + 1, &hints, &ai) != 0)
            continue;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0)
                continue;
            struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
            int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                freeaddrinfo(ai);
                return fd;
            }
            close(fd);
        }
        freeaddrinfo(ai);
    }
    return -1;
}

void zk_bulk_close(zk_bulk *b)
{
    if (!b)
        return;
    if (b->fd >= 0) {
        zb_out o = {0};
        put32(&o, ++b->xid);
        put32(&o, ZB_CLOSE);
        (void)send_frame(b->fd, &o); /* the answer is not awaited: the session ends either way */
        free(o.p);
        close(b->fd);
    }
    free(b);
}

int zk_bulk_open(cat_backend *be, zk_bulk **out)
{
    *out = NULL;
    zk_bulk *b = calloc(1, sizeof *b);
    if (!b)
        return ZSYSTEMERROR;
    int timeout = be->timeout_ms > 0 ? be->timeout_ms : 10000;
    b->fd = dial(be->hosts, timeout);
    if (b->fd < 0) {
        free(b);
        return ZCONNECTIONLOSS;
    }
    /* ConnectRequest: protocol 0, last zxid 0, timeout, session 0, a 16-byte password, rw */
    zb_out o = {0};
    static const char zeros[16] = {0};
    put32(&o, 0);
    put64(&o, 0);
    put32(&o, timeout);
    put64(&o, 0);
    putbuf(&o, zeros, sizeof zeros);
    put8(&o, 0);
    bool ok = send_frame(b->fd, &o);
    free(o.p);
    unsigned char *r = NULL;
    size_t n = 0;
    int zrc = ZOK;
    if (!ok || !recv_frame(b->fd, &r, &n)) {
        zrc = ZCONNECTIONLOSS;
    } else {
        zb_in in = {r, n, 0, false};
        (void)get32(&in);           /* protocol version */
        int32_t negotiated = get32(&in);
        (void)get64(&in);           /* session id */
        if (in.bad || negotiated <= 0)
            zrc = ZSESSIONEXPIRED;
    }
    free(r);
    if (!zrc && be->auth_file[0]) {
        char *secret = NULL;
        size_t len = 0;
        ferry_err e = {0};
        if (ferry_read_file(be->auth_file, &secret, &len, &e) != FERRY_OK) {
            zrc = ZAUTHFAILED;
        } else {
            while (len && (secret[len - 1] == '\n' || secret[len - 1] == '\r'))
                secret[--len] = '\0';
            zb_out a = {0};
            zb_in in;
            put32(&a, 0);
            putbuf(&a, "digest", 6);
            putbuf(&a, secret, len);
            explicit_bzero(secret, len);
            free(secret);
            zrc = call(b, ZB_AUTH, &a, &r, &in);
            if (a.p)
                explicit_bzero(a.p, a.n);
            free(a.p);
            free(r);
        }
    }
    if (!zrc) { /* read at least what the leader had committed when the scan began */
        zb_out s = {0};
        zb_in in;
        putbuf(&s, be->root, strlen(be->root));
        zrc = call(b, ZB_SYNC, &s, &r, &in);
        free(s.p);
        free(r);
    }
    if (zrc) {
        zk_bulk_close(b);
        return zrc;
    }
    *out = b;
    return ZOK;
}

/* ---- multiRead ------------------------------------------------------------------------------- */

/* The request for paths[from..*to) (as many as fit ZB_OPS and ZB_REQ_BYTES) into o. */
static void build(cat_backend *be, char *const *paths, size_t from, size_t n, bool kids,
                  size_t *to, zb_out *o)
{
    size_t i = from;
    for (; i < n && i - from < ZB_OPS && o->n < ZB_REQ_BYTES; i++) {
        char abs[PATH_MAX_LEN];
        zk_abspath(be, paths[i], abs, sizeof abs);
        put32(o, kids ? ZB_GET_CHILDREN : ZB_GET_DATA);
        put8(o, 0);
        put32(o, -1);
        putbuf(o, abs, strlen(abs));
        put8(o, 0); /* no watch */
    }
    put32(o, -1); /* the end */
    put8(o, 1);
    put32(o, -1);
    *to = i;
}

/* The answer to one multiRead into slots[from..to); borrow: the documents stay in the reply
 * (which the caller keeps), each NUL-terminated over the first byte of the Stat after it. */
static int parse(zb_in *in, bool kids, scan_slot *slots, size_t from, size_t to, bool borrow)
{
    for (size_t i = from;; i++) {
        int32_t type = get32(in);
        bool done = get8(in);
        int32_t err = get32(in);
        if (in->bad)
            return ZMARSHALLINGERROR;
        if (done)
            return i == to ? ZOK : ZMARSHALLINGERROR;
        if (i >= to)
            return ZMARSHALLINGERROR;
        scan_slot *s = &slots[i];
        if (type == ZB_ERROR_RESULT) {
            s->rc = get32(in);
            if (!s->rc)
                s->rc = err ? err : ZSYSTEMERROR;
            continue;
        }
        if (type != (kids ? ZB_GET_CHILDREN : ZB_GET_DATA))
            return ZMARSHALLINGERROR;
        if (kids) {
            int32_t count = get32(in);
            if (in->bad || count < 0 || (size_t)count > in->n)
                return ZMARSHALLINGERROR;
            s->rc = ZOK;
            if (!count)
                continue;
            s->kids.data = calloc((size_t)count, sizeof *s->kids.data);
            if (!s->kids.data)
                return ZSYSTEMERROR;
            for (int32_t k = 0; k < count; k++) {
                int32_t len;
                const char *name = getbuf(in, &len);
                if (!name)
                    return ZMARSHALLINGERROR;
                if (!(s->kids.data[s->kids.count] = ferry_strndup(name, (size_t)len)))
                    return ZSYSTEMERROR;
                s->kids.count++;
            }
        } else {
            int32_t len;
            const char *data = getbuf(in, &len);
            char *tail = (char *)in->p + in->at; /* the Stat's first byte, once read */
            /* Stat: czxid mzxid ctime mtime, version cversion aversion, ephemeralOwner,
             * dataLength numChildren, pzxid */
            for (int k = 0; k < 4; k++)
                (void)get64(in);
            int32_t version = get32(in);
            (void)get32(in);
            (void)get32(in);
            (void)get64(in);
            (void)get32(in);
            (void)get32(in);
            (void)get64(in);
            if (in->bad)
                return ZMARSHALLINGERROR;
            size_t dl = len > 0 ? (size_t)len : 0;
            if (borrow) {
                s->doc = data ? tail - dl : tail;
                tail[0] = '\0';
                s->borrowed = true;
            } else if (!(s->doc = ferry_strndup(data ? data : "", dl))) {
                return ZSYSTEMERROR;
            }
            s->doc_len = strnlen(s->doc, dl);
            s->version = version;
            s->rc = ZOK;
        }
    }
}

int zk_bulk_read(zk_bulk *b, cat_backend *be, char *const *paths, size_t n, bool kids,
                 scan_slot *slots, cat_flat *keep)
{
    bool borrow = keep && !kids;
    size_t sent = 0, answered = 0;
    size_t ends[ZB_WINDOW], firsts[ZB_WINDOW];
    int32_t xids[ZB_WINDOW];
    size_t head = 0, inflight = 0;
    int zrc = ZOK;
    while (!zrc && (answered < n || inflight)) {
        while (!zrc && sent < n && inflight < ZB_WINDOW) {
            zb_out o = {0};
            size_t to = sent;
            int32_t xid = ++b->xid;
            put32(&o, xid);
            put32(&o, ZB_MULTI_READ);
            build(be, paths, sent, n, kids, &to, &o);
            if (o.oom)
                zrc = ZSYSTEMERROR;
            else if (!send_frame(b->fd, &o))
                zrc = ZCONNECTIONLOSS;
            free(o.p);
            size_t k = (head + inflight) % ZB_WINDOW;
            firsts[k] = sent;
            ends[k] = to;
            xids[k] = xid;
            inflight++;
            sent = to;
        }
        if (zrc || !inflight)
            break;
        unsigned char *r = NULL;
        size_t len = 0;
        if (!recv_frame(b->fd, &r, &len)) {
            free(r);
            zrc = answered ? ZCONNECTIONLOSS : ZUNIMPLEMENTED; /* closed on the first: 3.5 */
            break;
        }
        zb_in in = {r, len, 0, false};
        int32_t rx = get32(&in);
        (void)get64(&in);
        int32_t err = get32(&in);
        if (in.bad || rx != xids[head])
            zrc = ZMARSHALLINGERROR;
        else if (err)
            zrc = answered ? err : ZUNIMPLEMENTED; /* e.g. an unknown opcode */
        else {
            if (borrow) { /* the reply is keep's from now on (freed when that fails) */
                if (cat_flat_block(keep, (char *)r))
                    zrc = ZSYSTEMERROR;
                r = NULL;
            }
            if (!zrc)
                zrc = parse(&in, kids, slots, firsts[head], ends[head], borrow);
        }
        free(r);
        answered = ends[head];
        head = (head + 1) % ZB_WINDOW;
        inflight--;
    }
    return zrc;
}
