/* S3's XML answers (listings, errors, multipart initiation, versioning) read with expat, a real
 * XML parser: entities and numeric character references, CDATA sections, attributes, namespaces
 * and nesting are handled by the parser, so a key is read exactly as the store sent it or the
 * answer is refused. The sweep decides what to delete from listed keys: a misread key must
 * never happen, an error is always preferred. Elements are matched by their full path from the
 * root ("ListBucketResult/Contents/Key"), never by a name found anywhere. See objstore_int.h. */
#include "objstore/objstore_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <expat.h>

#include "ferry/strutil.h"

#define XML_MAX_DEPTH 32
#define XML_MAX_TEXT (64u * 1024) /* one element's text: keys are at most 1 KiB in S3 */

typedef struct xml_walk xml_walk;
/* Called at the end of every element with its path from the root and its text (the character
 * data since its start tag or its last child's end tag, entities decoded). */
typedef int (*xml_end_fn)(xml_walk *w, const char *path, const char *text, size_t len);

struct xml_walk {
    XML_Parser p;
    ferry_buf path;
    size_t lens[XML_MAX_DEPTH + 1]; /* path length before each open element */
    int depth;
    ferry_buf text;
    xml_end_fn on_end;
    void *ud;
    int rc;
    ferry_err *err;
    const char *what; /* for messages: "s3 list" */
};

static void stop(xml_walk *w, int rc)
{
    if (w->rc == FERRY_OK)
        w->rc = rc;
    XML_StopParser(w->p, XML_FALSE);
}

/* Element names without a namespace prefix ("s3:Key" -> "Key"). */
static const char *local_name(const char *name)
{
    const char *c = strrchr(name, ':');
    return c ? c + 1 : name;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    xml_walk *w = ud;
    (void)attrs; /* S3 puts nothing ferry needs in attributes */
    if (w->depth >= XML_MAX_DEPTH) {
        ferry_err_set(w->err, FERRY_EREMOTE, "%s: the answer nests more than %d elements",
                      w->what, XML_MAX_DEPTH);
        stop(w, FERRY_EREMOTE);
        return;
    }
    w->lens[w->depth++] = w->path.len;
    if ((w->path.len && ferry_buf_putc(&w->path, '/')) ||
        ferry_buf_puts(&w->path, local_name(name))) {
        ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
        stop(w, FERRY_ENOMEM);
        return;
    }
    ferry_buf_reset(&w->text);
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    xml_walk *w = ud;
    (void)name; /* expat has checked that it matches the start tag */
    int rc = w->on_end ? w->on_end(w, ferry_buf_cstr(&w->path), ferry_buf_cstr(&w->text),
                                   w->text.len)
                       : FERRY_OK;
    if (rc) {
        stop(w, rc);
        return;
    }
    w->path.len = w->lens[--w->depth];
    if (w->path.data)
        w->path.data[w->path.len] = '\0';
    ferry_buf_reset(&w->text);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    xml_walk *w = ud;
    if (w->text.len + (size_t)len > XML_MAX_TEXT) {
        ferry_err_set(w->err, FERRY_EREMOTE, "%s: an element's text is over %u bytes", w->what,
                      XML_MAX_TEXT);
        stop(w, FERRY_EREMOTE);
        return;
    }
    if (ferry_buf_append(&w->text, s, (size_t)len)) {
        ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
        stop(w, FERRY_ENOMEM);
    }
}

/* S3 never sends a document type declaration; one could declare entities. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal)
{
    xml_walk *w = ud;
    (void)name, (void)sysid, (void)pubid, (void)has_internal;
    ferry_err_set(w->err, FERRY_EREMOTE, "%s: the answer has a document type declaration, "
                  "which S3 never sends", w->what);
    stop(w, FERRY_EREMOTE);
}

/* Parses body[0..len), calling on_end for every element. FERRY_EREMOTE for anything that is not
 * well-formed XML (the message says where). */
static int xml_walk_run(const char *what, const char *body, size_t len, xml_end_fn fn, void *ud,
                        ferry_err *err)
{
    xml_walk w = {.path = FERRY_BUF_INIT, .text = FERRY_BUF_INIT, .on_end = fn, .ud = ud,
                  .err = err, .what = what};
    if (len > (size_t)INT32_MAX)
        return ferry_err_set(err, FERRY_EREMOTE, "%s: the answer is over 2 GiB", what);
    if (!(w.p = XML_ParserCreate("UTF-8")))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    XML_SetUserData(w.p, &w);
    XML_SetElementHandler(w.p, on_start, on_end);
    XML_SetCharacterDataHandler(w.p, on_text);
    XML_SetStartDoctypeDeclHandler(w.p, on_doctype);
    if (XML_Parse(w.p, body, (int)len, XML_TRUE) == XML_STATUS_ERROR && w.rc == FERRY_OK)
        w.rc = ferry_err_set(err, FERRY_EREMOTE, "%s: the answer is not well-formed XML: %s "
                             "at line %lu, column %lu", what,
                             XML_ErrorString(XML_GetErrorCode(w.p)),
                             (unsigned long)XML_GetCurrentLineNumber(w.p),
                             (unsigned long)XML_GetCurrentColumnNumber(w.p) + 1);
    XML_ParserFree(w.p);
    ferry_buf_free(&w.path);
    ferry_buf_free(&w.text);
    return w.rc;
}

/* ---- one value ----------------------------------------------------------------------------- */

typedef struct value_walk {
    const char *want;
    ferry_buf *out;
    bool found;
    char root[64];
} value_walk;

static int value_end(xml_walk *w, const char *path, const char *text, size_t len)
{
    value_walk *v = w->ud;
    if (!strchr(path, '/'))
        snprintf(v->root, sizeof v->root, "%s", path);
    if (v->found || strcmp(path, v->want))
        return FERRY_OK;
    v->found = true;
    if (ferry_buf_append(v->out, text, len))
        return ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

int objstore_xml_value(const char *what, const char *body, size_t len, const char *path,
                       ferry_buf *out, bool *found, char *root, size_t rootsz, ferry_err *err)
{
    value_walk v = {.want = path, .out = out};
    ferry_buf_reset(out);
    int rc = xml_walk_run(what, body, len, value_end, &v, err);
    if (found)
        *found = rc == FERRY_OK && v.found;
    if (root)
        snprintf(root, rootsz, "%s", rc == FERRY_OK ? v.root : "");
    return rc;
}

void objstore_xml_error(const char *body, size_t len, char *out, size_t outsz)
{
    ferry_buf code = FERRY_BUF_INIT, msg = FERRY_BUF_INIT;
    ferry_err ignored = {0};
    bool has_code = false, has_msg = false;
    objstore_xml_value("s3 error", body, len, "Error/Code", &code, &has_code, NULL, 0, &ignored);
    objstore_xml_value("s3 error", body, len, "Error/Message", &msg, &has_msg, NULL, 0, &ignored);
    snprintf(out, outsz, "%s%s%s", has_code ? ferry_buf_cstr(&code) : "",
             has_msg && msg.len ? ": " : "", has_msg ? ferry_buf_cstr(&msg) : "");
    ferry_buf_free(&code);
    ferry_buf_free(&msg);
}

/* ---- listings ------------------------------------------------------------------------------- */

typedef struct list_walk {
    ferry_object_list *out;
    size_t cap;
    bool root_ok;
    /* the <Contents> being read */
    char *key;
    bool has_key, has_size;
    uint64_t size;
    time_t mtime;
    char etag[80];
    /* top level */
    bool truncated;
    char *token;
    char encoding[16];
} list_walk;

/* "2013-05-24T00:00:00.000Z" -> seconds since the epoch (0 when unreadable). */
static time_t parse_iso8601(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    return end ? timegm(&tm) : 0;
}

static int list_end(xml_walk *w, const char *path, const char *text, size_t len)
{
    list_walk *l = w->ud;
    if (!strcmp(path, "ListBucketResult")) {
        l->root_ok = true;
        return FERRY_OK;
    }
    if (!ferry_starts_with(path, "ListBucketResult/"))
        return FERRY_OK;
    path += strlen("ListBucketResult/");
    if (!strcmp(path, "Contents/Key")) {
        /* a key holding a NUL byte cannot be a C string: refuse rather than cut it */
        if (memchr(text, '\0', len))
            return ferry_err_set(w->err, FERRY_EREMOTE, "%s: a key holds a NUL byte", w->what);
        free(l->key);
        if (!(l->key = ferry_strndup(text, len)))
            return ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
        l->has_key = true;
    } else if (!strcmp(path, "Contents/Size")) {
        char num[32];
        snprintf(num, sizeof num, "%.*s", (int)(len < 31 ? len : 31), text);
        if (len > 30 || !ferry_parse_u64(num, &l->size))
            return ferry_err_set(w->err, FERRY_EREMOTE, "%s: bad <Size> '%s'", w->what, num);
        l->has_size = true;
    } else if (!strcmp(path, "Contents/LastModified")) {
        char ts[64];
        snprintf(ts, sizeof ts, "%.*s", (int)(len < 63 ? len : 63), text);
        l->mtime = parse_iso8601(ts);
    } else if (!strcmp(path, "Contents/ETag")) {
        if (len >= 2 && text[0] == '"' && text[len - 1] == '"') {
            text++;
            len -= 2;
        }
        snprintf(l->etag, sizeof l->etag, "%.*s", (int)(len < 79 ? len : 79), text);
    } else if (!strcmp(path, "Contents")) {
        if (!l->has_key || !l->has_size)
            return ferry_err_set(w->err, FERRY_EREMOTE, "%s: a <Contents> entry has no %s",
                                 w->what, l->has_key ? "<Size>" : "<Key>");
        if (objstore_list_push(l->out, &l->cap, l->key, l->size, l->mtime, l->etag))
            return ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
        l->key = NULL;
        l->has_key = l->has_size = false;
        l->size = 0;
        l->mtime = 0;
        l->etag[0] = '\0';
    } else if (!strcmp(path, "IsTruncated")) {
        if (len == 4 && !memcmp(text, "true", 4))
            l->truncated = true;
        else if (len == 5 && !memcmp(text, "false", 5))
            l->truncated = false;
        else
            return ferry_err_set(w->err, FERRY_EREMOTE, "%s: bad <IsTruncated> '%.*s'", w->what,
                                 (int)(len < 16 ? len : 16), text);
    } else if (!strcmp(path, "NextContinuationToken")) {
        free(l->token);
        if (!(l->token = ferry_strndup(text, len)))
            return ferry_err_set(w->err, FERRY_ENOMEM, "out of memory");
    } else if (!strcmp(path, "EncodingType")) {
        snprintf(l->encoding, sizeof l->encoding, "%.*s", (int)(len < 15 ? len : 15), text);
    }
    return FERRY_OK;
}

int objstore_url_decode_key(char *s, ferry_err *err)
{
    /* S3's encoding-type=url is form encoding: '+' is a space, a '+' itself comes as %2B
     * (botocore decodes it with unquote_plus too) */
    char *r = s, *w = s;
    while (*r) {
        if (*r == '+') {
            *w++ = ' ';
            r++;
        } else if (*r == '%') {
            int hi = ferry_hex_digit(r[1]), lo = hi < 0 ? -1 : ferry_hex_digit(r[2]);
            if (hi < 0 || lo < 0)
                return ferry_err_set(err, FERRY_EREMOTE, "a URL-encoded key has a bad escape "
                                     "'%.3s'", r);
            if (hi == 0 && lo == 0)
                return ferry_err_set(err, FERRY_EREMOTE, "a URL-encoded key holds a NUL byte");
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return FERRY_OK;
}

int objstore_xml_list(const char *body, size_t len, ferry_object_list *out, ferry_err *err)
{
    list_walk l = {.out = out};
    int rc = xml_walk_run("s3 list", body, len, list_end, &l, err);
    if (rc == FERRY_OK && !l.root_ok)
        rc = ferry_err_set(err, FERRY_EREMOTE, "s3 list: the answer is not a ListBucketResult");
    if (rc == FERRY_OK && l.truncated && (!l.token || !*l.token))
        rc = ferry_err_set(err, FERRY_EREMOTE,
                           "s3 list: truncated answer without a NextContinuationToken");
    if (rc == FERRY_OK && l.encoding[0] && strcmp(l.encoding, "url"))
        rc = ferry_err_set(err, FERRY_EREMOTE, "s3 list: unknown <EncodingType> '%s'",
                           l.encoding);
    for (size_t i = 0; rc == FERRY_OK && i < out->n; i++) {
        if (l.encoding[0]) {
            if ((rc = objstore_url_decode_key(out->items[i].key, err)))
                ferry_err_prefix(err, "s3 list: ");
        } else if (strchr(out->items[i].key, '\n') && memchr(body, '\r', len)) {
            /* without encoding-type=url (a store that ignores it) a carriage return in a key
             * arrives raw, and XML reads it as a line feed: the key cannot be known */
            rc = ferry_err_set(err, FERRY_EREMOTE, "s3 list: the store sent keys unencoded "
                               "(it ignores encoding-type=url) and one holds a line break XML "
                               "may have changed; the listing cannot be trusted");
        }
    }
    if (rc == FERRY_OK && l.truncated) {
        out->next_token = l.token;
        l.token = NULL;
    }
    free(l.key);
    free(l.token);
    return rc;
}
