/* Object storage: one interface, two backends (S3 with SigV4, and a local directory laid out
 * like ClickHouse's local blob storage), and three credential roles.
 *
 * Roles are part of the handle. A handle holds only its own role's secret and refuses what its
 * role may not do, before any request is made (FERRY_EAUTH):
 *   clickhouse  get, head, list, put (create), multipart       - never delete
 *   uploader    put (create), multipart (including abort)      - nothing else
 *   janitor     delete, list, head (to find and check what it deletes), read bucket settings
 *
 * Keys are object keys relative to the bucket (S3) or the root directory (local). The local
 * backend also accepts absolute paths inside its root, as ClickHouse's v5 pointer files for
 * local blob storage write them, and refuses anything that would resolve outside the root.
 *
 * A handle is not thread-safe: use one per thread (the S3 backend keeps one connection alive
 * per handle). Every function returns a ferry error code and fills err; messages never contain
 * secrets. Delete is idempotent: deleting a missing key succeeds (as on S3). */
#ifndef FERRY_OBJSTORE_H
#define FERRY_OBJSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ferry/config.h"
#include "ferry/err.h"

typedef enum ferry_objstore_role {
    FERRY_ROLE_CLICKHOUSE,
    FERRY_ROLE_UPLOADER,
    FERRY_ROLE_JANITOR
} ferry_objstore_role;

/* "clickhouse", "uploader", "janitor". */
const char *ferry_objstore_role_name(ferry_objstore_role role);
/* Parses a role name; false when unknown. */
bool ferry_objstore_role_parse(const char *name, ferry_objstore_role *out);

typedef struct ferry_objstore ferry_objstore;
typedef struct ferry_objstore_mpu ferry_objstore_mpu; /* one multipart upload in progress */

typedef struct ferry_object_info {
    char *key;      /* owned (NULL from head, which knows the key already) */
    uint64_t size;
    time_t mtime;   /* last modified, seconds since the epoch (UTC) */
    char etag[80];  /* opaque version tag without quotes ("" if the store gave none) */
} ferry_object_info;

typedef struct ferry_object_list {
    ferry_object_info *items; /* owned, sorted by key */
    size_t n;
    char *next_token;         /* owned; NULL when this was the last page */
} ferry_object_list;

typedef struct ferry_objstore_s3_options {
    const char *endpoint;          /* "http://127.0.0.1:9000", "https://s3.eu-west-1.amazonaws.com" */
    const char *bucket;
    const char *region;            /* default "us-east-1" */
    bool virtual_host;             /* bucket.host/key instead of host/bucket/key */
    const char *access_key_id;
    const char *secret_access_key; /* copied into the handle; wiped on close */
    const char *ca_file;           /* optional CA bundle for HTTPS */
    long timeout_seconds;          /* whole-request timeout; 0 = none (large objects) */
    long connect_timeout_seconds;  /* default 10 */
} ferry_objstore_s3_options;

/* Opens a handle. *out is owned by the caller (ferry_objstore_close). */
int ferry_objstore_open_local(const char *root, ferry_objstore_role role, ferry_objstore **out,
                              ferry_err *err);
int ferry_objstore_open_s3(const ferry_objstore_s3_options *opts, ferry_objstore_role role,
                           ferry_objstore **out, ferry_err *err);
/* From a ferry config: [object_store] (type local|s3, path, endpoint, bucket, region,
 * url_style, prefix) and, for s3, [credentials "<role>"] access_key_id and
 * secret_access_key_file. Reads only that role's secret file. */
int ferry_objstore_open_from_config(const ferry_config *cfg, ferry_objstore_role role,
                                    ferry_objstore **out, ferry_err *err);
void ferry_objstore_close(ferry_objstore *st);

ferry_objstore_role ferry_objstore_role_of(const ferry_objstore *st);
/* "local" or "s3". */
const char *ferry_objstore_kind(const ferry_objstore *st);
/* A printable location without credentials: "s3://bucket (http://host:port)" or "local:/dir/". */
const char *ferry_objstore_describe(const ferry_objstore *st);
/* For put_fd: files larger than threshold go up as multipart uploads of part_size bytes
 * (part_size >= 5 MiB). Defaults: 64 MiB and 16 MiB. */
int ferry_objstore_set_multipart(ferry_objstore *st, uint64_t threshold, uint64_t part_size,
                                 ferry_err *err);

/* Creates key with data[0..len). The object appears whole or not at all. Never replaces an
 * object: a key that exists is FERRY_ECONFLICT (S3: If-None-Match: * on the PUT and on
 * CompleteMultipartUpload, answered 412; local: link(2), which fails on an existing name). A
 * store that ignores If-None-Match (s3rver does) overwrites: callers that must not rely on it
 * check the key first (the agent's upload does). */
int ferry_objstore_put(ferry_objstore *st, const char *key, const void *data, size_t len,
                       ferry_err *err);
/* Same, streaming the whole regular file open on fd (read with pread from offset 0; the file
 * position is not used). Large files become multipart uploads (ferry_objstore_set_multipart). */
int ferry_objstore_put_fd(ferry_objstore *st, const char *key, int fd, ferry_err *err);

/* Receives object bytes in order; return 0 to continue, non-zero to stop (the get then fails
 * with FERRY_EIO unless the callback set err itself). */
typedef int (*ferry_objstore_sink)(void *ud, const void *data, size_t len);

/* Reads length bytes from offset (length 0 = to the end). A range past the end of the object
 * is FERRY_EINVAL; a missing key FERRY_ENOTFOUND. */
int ferry_objstore_get(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                       ferry_objstore_sink sink, void *ud, ferry_err *err);
/* Same, appending to fd (write(2) at its current position). */
int ferry_objstore_get_fd(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                          int fd, ferry_err *err);
/* Whole object into memory: *data (caller frees) and *len. */
int ferry_objstore_get_mem(ferry_objstore *st, const char *key, char **data, size_t *len,
                           ferry_err *err);

/* Size, last-modified and etag of key; FERRY_ENOTFOUND when missing. info->key is NULL. */
int ferry_objstore_head(ferry_objstore *st, const char *key, ferry_object_info *info,
                        ferry_err *err);

/* One page of the keys starting with prefix, in key order: at most max_keys (1..1000; 0 means
 * 1000). Pass NULL as token for the first page and out->next_token for the following ones.
 * *out is owned by the caller (ferry_object_list_free). */
int ferry_objstore_list(ferry_objstore *st, const char *prefix, const char *token,
                        size_t max_keys, ferry_object_list *out, ferry_err *err);
void ferry_object_list_free(ferry_object_list *l);

/* Deletes key (janitor role only). Succeeds when the key is already gone. */
int ferry_objstore_delete(ferry_objstore *st, const char *key, ferry_err *err);

/* The bucket's versioning status (janitor role; S3 GetBucketVersioning): "Enabled",
 * "Suspended", or "" when it was never enabled. FERRY_EUNSUPPORTED for a store without
 * versioning (a local directory, or an S3-protocol server that does not implement it). */
int ferry_objstore_versioning(ferry_objstore *st, char *status, size_t statussz,
                              ferry_err *err);

/* Multipart upload: begin, upload parts numbered 1..10000 (each but the last >= 5 MiB on S3),
 * then complete (the object appears) or abort. complete and abort free *mpu whatever happens.
 * Abort returns FERRY_EUNSUPPORTED on stores without AbortMultipartUpload (s3rver answers 405);
 * the parts then stay until a bucket lifecycle rule removes incomplete uploads. */
int ferry_objstore_mpu_begin(ferry_objstore *st, const char *key, ferry_objstore_mpu **mpu,
                             ferry_err *err);
int ferry_objstore_mpu_part(ferry_objstore *st, ferry_objstore_mpu *mpu, int part_number,
                            const void *data, size_t len, ferry_err *err);
/* Same, with bytes [offset, offset+len) of fd (pread). */
int ferry_objstore_mpu_part_fd(ferry_objstore *st, ferry_objstore_mpu *mpu, int part_number,
                               int fd, uint64_t offset, uint64_t len, ferry_err *err);
int ferry_objstore_mpu_complete(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err);
int ferry_objstore_mpu_abort(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err);

#endif
