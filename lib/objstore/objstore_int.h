/* Private to lib/objstore: the backend interface (a table of function pointers, one table per
 * backend, like curl's lib/vtls) and the handle layout. The generic layer (objstore.c) checks
 * roles and arguments before a backend is called, so backends only do the storage work. */
#ifndef FERRY_OBJSTORE_INT_H
#define FERRY_OBJSTORE_INT_H

#include "ferry/objstore.h"

#include "ferry/buf.h"

/* The bytes of a put or a part: memory (data != NULL) or a range of a file read with pread. */
typedef struct objstore_body {
    const char *data;
    int fd;
    uint64_t offset;
    uint64_t len;
} objstore_body;

typedef struct objstore_part {
    int number;
    char etag[80];
} objstore_part;

struct ferry_objstore_mpu {
    char *key;
    char *upload_id;
    objstore_part *parts; /* kept sorted by number */
    size_t n, cap;
};

typedef struct objstore_ops {
    const char *kind;
    int (*put)(ferry_objstore *st, const char *key, const objstore_body *body, ferry_err *err);
    /* length 0 = to the end; the generic layer has checked offset/length arithmetic */
    int (*get)(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
               ferry_objstore_sink sink, void *ud, ferry_err *err);
    int (*head)(ferry_objstore *st, const char *key, ferry_object_info *info, ferry_err *err);
    int (*list)(ferry_objstore *st, const char *prefix, const char *token, size_t max_keys,
                ferry_object_list *out, ferry_err *err);
    int (*del)(ferry_objstore *st, const char *key, ferry_err *err);
    /* fills mpu->upload_id */
    int (*mpu_begin)(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err);
    int (*mpu_part)(ferry_objstore *st, ferry_objstore_mpu *mpu, int number,
                    const objstore_body *body, char etag[80], ferry_err *err);
    int (*mpu_complete)(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err);
    int (*mpu_abort)(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err);
    /* GetBucketVersioning (NULL: the backend has none) */
    int (*versioning)(ferry_objstore *st, char *status, size_t statussz, ferry_err *err);
    void (*close)(ferry_objstore *st);
} objstore_ops;

struct ferry_objstore {
    const objstore_ops *ops;
    ferry_objstore_role role;
    uint64_t mp_threshold, mp_part_size;
    char desc[512];
    void *impl; /* the backend's state */
};

extern const objstore_ops objstore_local_ops;
extern const objstore_ops objstore_s3_ops;

/* Backend constructors: fill st->impl and st->desc. */
int objstore_local_init(ferry_objstore *st, const char *root, ferry_err *err);
int objstore_s3_init(ferry_objstore *st, const ferry_objstore_s3_options *opts, ferry_err *err);

/* Appends an info to a list (takes ownership of key). */
int objstore_list_push(ferry_object_list *l, size_t *cap, char *key, uint64_t size, time_t mtime,
                       const char *etag);

/* Reads body bytes [pos, pos+n) of b into dst (pread for files); FERRY_EIO on a short file. */
int objstore_body_read(const objstore_body *b, uint64_t pos, void *dst, size_t n, ferry_err *err);

/* S3's XML answers, read with expat (s3xml.c). Elements are named by their path from the root
 * ("Error/Code"); anything that is not well-formed XML, or has a DOCTYPE, is FERRY_EREMOTE.
 *
 * objstore_xml_value: the text of the first element at path into out (*found says whether there
 * was one) and, when root is not NULL, the root element's name. what names the request in
 * messages. objstore_xml_error: "Code: Message" of an <Error> answer ("" when it has neither).
 * objstore_xml_list: a ListObjectsV2 answer appended to out (next_token set when truncated);
 * keys are decoded when the answer says <EncodingType>url</EncodingType>, and a listing whose
 * keys could have been changed by XML's line-break rules is refused.
 * objstore_url_decode_key: decodes S3's encoding-type=url form encoding in place ('+' is a
 * space); a bad escape or a NUL byte is FERRY_EREMOTE. */
int objstore_xml_value(const char *what, const char *body, size_t len, const char *path,
                       ferry_buf *out, bool *found, char *root, size_t rootsz, ferry_err *err);
void objstore_xml_error(const char *body, size_t len, char *out, size_t outsz);
int objstore_xml_list(const char *body, size_t len, ferry_object_list *out, ferry_err *err);
int objstore_url_decode_key(char *s, ferry_err *err);

#endif
