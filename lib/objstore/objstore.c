/* Object store: the generic layer over the backends. It owns the role rules (checked here,
 * before any backend code runs), argument checks, splitting large file uploads into multipart
 * uploads, and opening a store from a ferry config with only one role's secret. */
#include "objstore/objstore_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

#define MIB (1024ULL * 1024ULL)
#define MAX_KEY_BYTES 1024
#define MAX_PARTS 10000

/* ---- roles ------------------------------------------------------------------------------ */

enum op { OP_READ, OP_LIST, OP_HEAD, OP_CREATE, OP_DELETE, OP_BUCKET_SETTINGS };

static const char *const ROLE_NAMES[] = {"clickhouse", "uploader", "janitor"};

const char *ferry_objstore_role_name(ferry_objstore_role role)
{
    return (unsigned)role < 3 ? ROLE_NAMES[role] : "unknown";
}

bool ferry_objstore_role_parse(const char *name, ferry_objstore_role *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, ROLE_NAMES[i]) == 0) {
            *out = (ferry_objstore_role)i;
            return true;
        }
    return false;
}

/* The whole permission table: which role may do what. */
static bool role_allows(ferry_objstore_role role, enum op op)
{
    switch (role) {
    case FERRY_ROLE_CLICKHOUSE: return op != OP_DELETE && op != OP_BUCKET_SETTINGS;
    case FERRY_ROLE_UPLOADER: return op == OP_CREATE;
    case FERRY_ROLE_JANITOR:
        return op == OP_DELETE || op == OP_LIST || op == OP_HEAD || op == OP_BUCKET_SETTINGS;
    }
    return false;
}

static int check_role(const ferry_objstore *st, enum op op, ferry_err *err)
{
    static const char *const verbs[] = {"read objects", "list objects", "read object metadata",
                                        "create objects", "delete", "read bucket settings"};
    if (role_allows(st->role, op))
        return FERRY_OK;
    return ferry_err_set(err, FERRY_EAUTH, "the %s role cannot %s (%s)",
                         ferry_objstore_role_name(st->role), verbs[op], st->desc);
}

static int check_key(const char *key, ferry_err *err)
{
    if (!key || !*key)
        return ferry_err_set(err, FERRY_EINVAL, "object key is empty");
    if (strlen(key) > MAX_KEY_BYTES)
        return ferry_err_set(err, FERRY_EINVAL, "object key is longer than %d bytes: %.60s...",
                             MAX_KEY_BYTES, key);
    return FERRY_OK;
}

/* ---- open / close ----------------------------------------------------------------------- */

static int new_handle(ferry_objstore_role role, ferry_objstore **out, ferry_err *err)
{
    if ((unsigned)role > FERRY_ROLE_JANITOR)
        return ferry_err_set(err, FERRY_EINVAL, "unknown object store role %d", (int)role);
    ferry_objstore *st = calloc(1, sizeof *st);
    if (!st)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    st->role = role;
    st->mp_threshold = 64 * MIB;
    st->mp_part_size = 16 * MIB;
    *out = st;
    return FERRY_OK;
}

int ferry_objstore_open_local(const char *root, ferry_objstore_role role, ferry_objstore **out,
                              ferry_err *err)
{
    ferry_objstore *st = NULL;
    int rc = new_handle(role, &st, err);
    if (rc)
        return rc;
    st->ops = &objstore_local_ops;
    if ((rc = objstore_local_init(st, root, err))) {
        free(st);
        return rc;
    }
    *out = st;
    return FERRY_OK;
}

int ferry_objstore_open_s3(const ferry_objstore_s3_options *opts, ferry_objstore_role role,
                           ferry_objstore **out, ferry_err *err)
{
    ferry_objstore *st = NULL;
    int rc = new_handle(role, &st, err);
    if (rc)
        return rc;
    st->ops = &objstore_s3_ops;
    if ((rc = objstore_s3_init(st, opts, err))) {
        free(st);
        return rc;
    }
    *out = st;
    return FERRY_OK;
}

void ferry_objstore_close(ferry_objstore *st)
{
    if (!st)
        return;
    st->ops->close(st);
    free(st);
}

ferry_objstore_role ferry_objstore_role_of(const ferry_objstore *st) { return st->role; }
const char *ferry_objstore_kind(const ferry_objstore *st) { return st->ops->kind; }
const char *ferry_objstore_describe(const ferry_objstore *st) { return st->desc; }

int ferry_objstore_set_multipart(ferry_objstore *st, uint64_t threshold, uint64_t part_size,
                                 ferry_err *err)
{
    if (part_size < 5 * MIB || part_size > 5ULL * 1024 * MIB)
        return ferry_err_set(err, FERRY_EINVAL,
                             "multipart part size must be between 5 MiB and 5 GiB (S3's limits)");
    st->mp_threshold = threshold;
    st->mp_part_size = part_size;
    return FERRY_OK;
}

/* ---- config ----------------------------------------------------------------------------- */

static const char *const OBJECT_STORE_KEYS[] = {"type", "path", "endpoint", "bucket", "region",
                                                "url_style", "prefix", NULL};
static const char *const CREDENTIAL_KEYS[] = {"access_key_id", "secret_access_key_file", NULL};

/* Reads the secret file named by [credentials "<role>"] secret_access_key_file. Messages name
 * the file and line of the config, never the file's contents. *secret: caller wipes and frees. */
static int read_secret(const ferry_config *cfg, const char *role, char **secret, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(cfg, "credentials", role,
                                                    "secret_access_key_file");
    if (!e || !e->value[0])
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [credentials \"%s\"] secret_access_key_file is required for an "
                             "s3 object store", cfg->path ? cfg->path : "config", role);
    char *data = NULL;
    size_t len = 0;
    ferry_err ferr = {0};
    int rc = ferry_read_file(e->value, &data, &len, &ferr);
    if (rc)
        return ferry_err_set(err, rc == FERRY_ENOTFOUND ? FERRY_EINVAL : rc,
                             "%s:%d: credentials.%s.secret_access_key_file: %s",
                             cfg->path ? cfg->path : "config", e->line, role, ferr.msg);
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
        data[--len] = '\0';
    if (len == 0 || memchr(data, '\n', len)) {
        OPENSSL_cleanse(data, len);
        free(data);
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%d: credentials.%s.secret_access_key_file: %s must hold the secret "
                             "on one line", cfg->path ? cfg->path : "config", e->line, role,
                             e->value);
    }
    struct stat sb;
    if (stat(e->value, &sb) == 0 && (sb.st_mode & 077))
        FLOG_WARN("secret file is readable by group or others; chmod 600 it path=%s role=%s",
                  e->value, role);
    *secret = data;
    return FERRY_OK;
}

int ferry_objstore_open_from_config(const ferry_config *cfg, ferry_objstore_role role,
                                    ferry_objstore **out, ferry_err *err)
{
    const char *path = cfg->path ? cfg->path : "config";
    const char *rname = ferry_objstore_role_name(role);
    char *secret = NULL;
    int rc;
    if ((rc = ferry_config_check_keys(cfg, "object_store", OBJECT_STORE_KEYS, err)) ||
        (rc = ferry_config_check_keys(cfg, "credentials", CREDENTIAL_KEYS, err)))
        return rc;
    const char *type = ferry_config_get(cfg, "object_store", NULL, "type");
    if (!type || strcmp(type, "local") == 0) {
        const char *root;
        if ((rc = ferry_config_require(cfg, "object_store", NULL, "path", &root, err)))
            return rc;
        if ((rc = ferry_objstore_open_local(root, role, out, err)))
            ferry_err_prefix(err, "%s: [object_store]: ", path);
        return rc;
    }
    if (strcmp(type, "s3") != 0) {
        const ferry_config_entry *e = ferry_config_find(cfg, "object_store", NULL, "type");
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%d: object_store.type: '%s' is not a store type (expected local "
                             "or s3)", path, e ? e->line : 0, type);
    }
    ferry_objstore_s3_options o = {0};
    if ((rc = ferry_config_require(cfg, "object_store", NULL, "endpoint", &o.endpoint, err)) ||
        (rc = ferry_config_require(cfg, "object_store", NULL, "bucket", &o.bucket, err)))
        return rc;
    o.region = ferry_config_get(cfg, "object_store", NULL, "region");
    const char *style = ferry_config_get(cfg, "object_store", NULL, "url_style");
    if (style && strcmp(style, "virtual") == 0) {
        o.virtual_host = true;
    } else if (style && strcmp(style, "path") != 0) {
        const ferry_config_entry *e = ferry_config_find(cfg, "object_store", NULL, "url_style");
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%d: object_store.url_style: '%s' (expected path or virtual)",
                             path, e ? e->line : 0, style);
    }
    const ferry_config_entry *akid = ferry_config_find(cfg, "credentials", rname,
                                                       "access_key_id");
    if (!akid || !akid->value[0])
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [credentials \"%s\"] access_key_id is required for an s3 object "
                             "store opened with the %s role", path, rname, rname);
    o.access_key_id = akid->value;
    if ((rc = read_secret(cfg, rname, &secret, err)))
        return rc;
    o.secret_access_key = secret;
    rc = ferry_objstore_open_s3(&o, role, out, err);
    if (rc)
        ferry_err_prefix(err, "%s: [object_store]: ", path);
    OPENSSL_cleanse(secret, strlen(secret));
    free(secret);
    return rc;
}

/* ---- operations ------------------------------------------------------------------------- */

int ferry_objstore_put(ferry_objstore *st, const char *key, const void *data, size_t len,
                       ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_CREATE, err)) || (rc = check_key(key, err)))
        return rc;
    objstore_body b = {data ? data : "", -1, 0, len};
    return st->ops->put(st, key, &b, err);
}

int ferry_objstore_put_fd(ferry_objstore *st, const char *key, int fd, ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_CREATE, err)) || (rc = check_key(key, err)))
        return rc;
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return ferry_err_set(err, FERRY_EIO, "put %s: fstat: %s", key, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ferry_err_set(err, FERRY_EINVAL, "put %s: the source is not a regular file", key);
    uint64_t size = (uint64_t)sb.st_size;
    if (size <= st->mp_threshold) {
        objstore_body b = {NULL, fd, 0, size};
        return st->ops->put(st, key, &b, err);
    }
    uint64_t parts = (size + st->mp_part_size - 1) / st->mp_part_size;
    if (parts > MAX_PARTS)
        return ferry_err_set(err, FERRY_EINVAL,
                             "put %s: %llu parts needed, more than S3's %d; raise the part size",
                             key, (unsigned long long)parts, MAX_PARTS);
    ferry_objstore_mpu *mpu = NULL;
    if ((rc = ferry_objstore_mpu_begin(st, key, &mpu, err)))
        return rc;
    for (uint64_t i = 0; i < parts; i++) {
        uint64_t off = i * st->mp_part_size;
        uint64_t n = size - off < st->mp_part_size ? size - off : st->mp_part_size;
        if ((rc = ferry_objstore_mpu_part_fd(st, mpu, (int)i + 1, fd, off, n, err))) {
            ferry_err keep = *err;
            ferry_err ignored = {0};
            if (ferry_objstore_mpu_abort(st, mpu, &ignored) == FERRY_EUNSUPPORTED)
                FLOG_WARN("incomplete multipart upload left behind (store has no abort) key=%s",
                          key);
            *err = keep;
            return rc;
        }
    }
    return ferry_objstore_mpu_complete(st, mpu, err);
}

int ferry_objstore_get(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                       ferry_objstore_sink sink, void *ud, ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_READ, err)) || (rc = check_key(key, err)))
        return rc;
    if (length && offset > UINT64_MAX - length)
        return ferry_err_set(err, FERRY_EINVAL, "get %s: byte range overflows", key);
    return st->ops->get(st, key, offset, length, sink, ud, err);
}

static int fd_sink(void *ud, const void *data, size_t len)
{
    int fd = *(int *)ud;
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int ferry_objstore_get_fd(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                          int fd, ferry_err *err)
{
    return ferry_objstore_get(st, key, offset, length, fd_sink, &fd, err);
}

static int buf_sink(void *ud, const void *data, size_t len)
{
    return ferry_buf_append(ud, data, len);
}

int ferry_objstore_get_mem(ferry_objstore *st, const char *key, char **data, size_t *len,
                           ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    int rc = ferry_objstore_get(st, key, 0, 0, buf_sink, &b, err);
    if (rc) {
        ferry_buf_free(&b);
        return rc;
    }
    *len = b.len;
    *data = ferry_buf_detach(&b);
    return *data ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

int ferry_objstore_head(ferry_objstore *st, const char *key, ferry_object_info *info,
                        ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_HEAD, err)) || (rc = check_key(key, err)))
        return rc;
    memset(info, 0, sizeof *info);
    return st->ops->head(st, key, info, err);
}

int ferry_objstore_list(ferry_objstore *st, const char *prefix, const char *token,
                        size_t max_keys, ferry_object_list *out, ferry_err *err)
{
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = check_role(st, OP_LIST, err)))
        return rc;
    if (max_keys == 0)
        max_keys = 1000;
    if (max_keys > 1000)
        return ferry_err_set(err, FERRY_EINVAL, "list: max-keys %zu is above 1000", max_keys);
    if (token && !*token)
        token = NULL;
    rc = st->ops->list(st, prefix ? prefix : "", token, max_keys, out, err);
    if (rc)
        ferry_object_list_free(out);
    return rc;
}

void ferry_object_list_free(ferry_object_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].key);
    free(l->items);
    free(l->next_token);
    memset(l, 0, sizeof *l);
}

int objstore_list_push(ferry_object_list *l, size_t *cap, char *key, uint64_t size, time_t mtime,
                       const char *etag)
{
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        ferry_object_info *it = realloc(l->items, nc * sizeof *it);
        if (!it)
            return FERRY_ENOMEM;
        l->items = it;
        *cap = nc;
    }
    ferry_object_info *o = &l->items[l->n++];
    memset(o, 0, sizeof *o);
    o->key = key;
    o->size = size;
    o->mtime = mtime;
    snprintf(o->etag, sizeof o->etag, "%s", etag ? etag : "");
    return FERRY_OK;
}

int ferry_objstore_delete(ferry_objstore *st, const char *key, ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_DELETE, err)) || (rc = check_key(key, err)))
        return rc;
    return st->ops->del(st, key, err);
}

int ferry_objstore_versioning(ferry_objstore *st, char *status, size_t statussz,
                              ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_BUCKET_SETTINGS, err)))
        return rc;
    if (!st->ops->versioning)
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "a %s store has no versioning (%s)",
                             st->ops->kind, st->desc);
    return st->ops->versioning(st, status, statussz, err);
}

static void mpu_free(ferry_objstore_mpu *mpu)
{
    if (!mpu)
        return;
    free(mpu->key);
    free(mpu->upload_id);
    free(mpu->parts);
    free(mpu);
}

int ferry_objstore_mpu_begin(ferry_objstore *st, const char *key, ferry_objstore_mpu **out,
                             ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_CREATE, err)) || (rc = check_key(key, err)))
        return rc;
    ferry_objstore_mpu *mpu = calloc(1, sizeof *mpu);
    if (!mpu || !(mpu->key = strdup(key))) {
        mpu_free(mpu);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if ((rc = st->ops->mpu_begin(st, mpu, err))) {
        mpu_free(mpu);
        return rc;
    }
    *out = mpu;
    return FERRY_OK;
}

static int mpu_part(ferry_objstore *st, ferry_objstore_mpu *mpu, int number,
                    const objstore_body *b, ferry_err *err)
{
    int rc;
    if ((rc = check_role(st, OP_CREATE, err)))
        return rc;
    if (number < 1 || number > MAX_PARTS)
        return ferry_err_set(err, FERRY_EINVAL, "multipart %s: part number %d is not in 1..%d",
                             mpu->key, number, MAX_PARTS);
    char etag[80] = "";
    if ((rc = st->ops->mpu_part(st, mpu, number, b, etag, err)))
        return rc;
    /* Keep parts sorted by number; uploading a number again replaces it, as on S3. */
    size_t i = 0;
    while (i < mpu->n && mpu->parts[i].number < number)
        i++;
    if (i < mpu->n && mpu->parts[i].number == number) {
        snprintf(mpu->parts[i].etag, sizeof mpu->parts[i].etag, "%s", etag);
        return FERRY_OK;
    }
    if (mpu->n == mpu->cap) {
        size_t nc = mpu->cap ? mpu->cap * 2 : 16;
        objstore_part *p = realloc(mpu->parts, nc * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        mpu->parts = p;
        mpu->cap = nc;
    }
    memmove(mpu->parts + i + 1, mpu->parts + i, (mpu->n - i) * sizeof *mpu->parts);
    mpu->parts[i].number = number;
    snprintf(mpu->parts[i].etag, sizeof mpu->parts[i].etag, "%s", etag);
    mpu->n++;
    return FERRY_OK;
}

int ferry_objstore_mpu_part(ferry_objstore *st, ferry_objstore_mpu *mpu, int part_number,
                            const void *data, size_t len, ferry_err *err)
{
    objstore_body b = {data ? data : "", -1, 0, len};
    return mpu_part(st, mpu, part_number, &b, err);
}

int ferry_objstore_mpu_part_fd(ferry_objstore *st, ferry_objstore_mpu *mpu, int part_number,
                               int fd, uint64_t offset, uint64_t len, ferry_err *err)
{
    objstore_body b = {NULL, fd, offset, len};
    return mpu_part(st, mpu, part_number, &b, err);
}

int ferry_objstore_mpu_complete(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    int rc = check_role(st, OP_CREATE, err);
    if (rc == FERRY_OK && mpu->n == 0)
        rc = ferry_err_set(err, FERRY_EINVAL, "multipart %s: no parts were uploaded", mpu->key);
    if (rc == FERRY_OK)
        rc = st->ops->mpu_complete(st, mpu, err);
    mpu_free(mpu);
    return rc;
}

int ferry_objstore_mpu_abort(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    int rc = check_role(st, OP_CREATE, err);
    if (rc == FERRY_OK)
        rc = st->ops->mpu_abort(st, mpu, err);
    mpu_free(mpu);
    return rc;
}

/* ---- shared helpers --------------------------------------------------------------------- */

int objstore_body_read(const objstore_body *b, uint64_t pos, void *dst, size_t n, ferry_err *err)
{
    if (b->data) {
        memcpy(dst, b->data + pos, n);
        return FERRY_OK;
    }
    char *d = dst;
    while (n) {
        ssize_t r = pread(b->fd, d, n, (off_t)(b->offset + pos));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_err_set(err, FERRY_EIO, "reading the source file: %s", strerror(errno));
        if (r == 0)
            return ferry_err_set(err, FERRY_EIO,
                                 "the source file shrank while it was being uploaded");
        d += r;
        n -= (size_t)r;
        pos += (uint64_t)r;
    }
    return FERRY_OK;
}
