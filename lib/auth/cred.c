/* The credentials of one HTTP request, taken as ClickHouse's HTTP interface takes them (see
 * include/ferry/auth.h). Pure: the router hands over the headers and parameters it received. */
#include "ferry/auth.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const scheme_names[] = {"X-ClickHouse HTTP headers", "Authorization HTTP header",
                                           "authentication via parameters"};

static int mixed(ferry_err *err, enum ferry_auth_source a, enum ferry_auth_source b)
{
    return ferry_err_set(err, FERRY_EAUTH,
                         "Invalid authentication: it is not allowed to use %s and %s "
                         "simultaneously",
                         scheme_names[a], scheme_names[b]);
}

static int set_user(ferry_auth_cred *out, const char *user, size_t len, const char *from,
                    ferry_err *err)
{
    if (len == 0)
        return ferry_err_set(err, FERRY_EAUTH, "Got an empty user name from %s", from);
    if (len >= sizeof out->user || memchr(user, '\0', len))
        return ferry_err_set(err, FERRY_EAUTH, "Invalid authentication: the user name from %s "
                             "is longer than %zu bytes or holds a NUL byte", from,
                             sizeof out->user - 1);
    memcpy(out->user, user, len);
    out->user[len] = '\0';
    return FERRY_OK;
}

static int set_password(ferry_auth_cred *out, const char *pw, size_t len, ferry_err *err)
{
    out->password = malloc(len + 1);
    if (!out->password)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(out->password, pw, len);
    out->password[len] = '\0';
    out->password_len = len;
    return FERRY_OK;
}

/* Authorization: Basic base64(user:password); the user ends at the first ':' (Poco's
 * HTTPBasicCredentials). */
static int from_basic(const char *auth, ferry_auth_cred *out, ferry_err *err)
{
    while (*auth == ' ')
        auth++;
    size_t sl = strcspn(auth, " ");
    if (sl != 5 || strncasecmp(auth, "Basic", 5))
        return ferry_err_set(err, FERRY_EAUTH,
                             "Invalid authentication: '%.*s' HTTP Authorization scheme is not "
                             "supported",
                             (int)(sl > 32 ? 32 : sl), auth);
    const char *b64 = auth + sl;
    while (*b64 == ' ')
        b64++;
    size_t n = strlen(b64);
    while (n && b64[n - 1] == ' ')
        n--;
    if (n > 8192)
        return ferry_err_set(err, FERRY_EAUTH, "Invalid authentication: Basic credentials "
                             "longer than 8192 bytes");
    char enc[8193];
    memcpy(enc, b64, n);
    enc[n] = '\0';
    unsigned char *dec = malloc(n + 1);
    if (!dec)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t dl = 0;
    int rc = FERRY_OK;
    if (!ferry_base64_decode(enc, dec, &dl)) {
        rc = ferry_err_set(err, FERRY_EAUTH, "Invalid authentication: the Basic credentials "
                           "are not base64");
        goto out;
    }
    unsigned char *colon = memchr(dec, ':', dl);
    size_t ul = colon ? (size_t)(colon - dec) : dl;
    rc = set_user(out, (const char *)dec, ul, scheme_names[FERRY_AUTH_FROM_BASIC], err);
    if (!rc)
        rc = colon ? set_password(out, (const char *)colon + 1, dl - ul - 1, err)
                   : set_password(out, "", 0, err);
out:
    OPENSSL_cleanse(dec, n + 1);
    OPENSSL_cleanse(enc, sizeof enc);
    free(dec);
    return rc;
}

int ferry_auth_parse(const ferry_auth_request *in, ferry_auth_cred *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    bool headers = (in->header_user && *in->header_user) || (in->header_key && *in->header_key);
    bool basic = in->authorization != NULL;
    bool params = in->param_user || in->param_password;
    if (headers) {
        out->source = FERRY_AUTH_FROM_HEADERS;
        if (basic)
            return mixed(err, FERRY_AUTH_FROM_HEADERS, FERRY_AUTH_FROM_BASIC);
        if (params)
            return mixed(err, FERRY_AUTH_FROM_HEADERS, FERRY_AUTH_FROM_PARAMS);
        const char *u = in->header_user ? in->header_user : "";
        int rc = set_user(out, u, strlen(u), scheme_names[FERRY_AUTH_FROM_HEADERS], err);
        const char *k = in->header_key ? in->header_key : "";
        out->given = true;
        return rc ? rc : set_password(out, k, strlen(k), err);
    }
    if (basic) {
        out->source = FERRY_AUTH_FROM_BASIC;
        if (params)
            return mixed(err, FERRY_AUTH_FROM_BASIC, FERRY_AUTH_FROM_PARAMS);
        out->given = true;
        return from_basic(in->authorization, out, err);
    }
    out->source = FERRY_AUTH_FROM_PARAMS;
    out->given = params;
    const char *u = in->param_user ? in->param_user : "default";
    int rc = set_user(out, u, strlen(u), scheme_names[FERRY_AUTH_FROM_PARAMS], err);
    const char *p = in->param_password ? in->param_password : "";
    return rc ? rc : set_password(out, p, strlen(p), err);
}

void ferry_auth_cred_free(ferry_auth_cred *c)
{
    if (!c)
        return;
    if (c->password) {
        OPENSSL_cleanse(c->password, c->password_len + 1);
        free(c->password);
    }
    memset(c, 0, sizeof *c);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool ferry_base64_decode(const char *in, unsigned char *out, size_t *len)
{
    size_t n = strlen(in), o = 0;
    *len = 0;
    if (n % 4)
        return false;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)in[i + k];
            if (c == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad) /* a character after '=' */
                return false;
            v[k] = b64_value(c);
            if (v[k] < 0)
                return false;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)w;
    }
    out[o] = '\0';
    *len = o;
    return true;
}
