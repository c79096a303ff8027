/* Error values: formatting and code names. */
#include "ferry/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ferry_err_set(ferry_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int ferry_err_prefix(ferry_err *err, const char *fmt, ...)
{
    if (!err)
        return FERRY_EINTERNAL;
    char prefix[FERRY_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strnlen(prefix, sizeof prefix - 1);
    size_t mlen = strnlen(err->msg, sizeof err->msg - 1);
    if (plen + mlen > sizeof err->msg - 1)
        mlen = sizeof err->msg - 1 - plen;
    memmove(err->msg + plen, err->msg, mlen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen + mlen] = '\0';
    return err->code;
}

void ferry_err_clear(ferry_err *err)
{
    if (err) {
        err->code = FERRY_OK;
        err->msg[0] = '\0';
    }
}

const char *ferry_code_name(int code)
{
    switch (code) {
    case FERRY_OK: return "ok";
    case FERRY_EINVAL: return "invalid input";
    case FERRY_EIO: return "i/o error";
    case FERRY_ENOMEM: return "out of memory";
    case FERRY_ENOTFOUND: return "not found";
    case FERRY_ECONFLICT: return "conflict";
    case FERRY_ETIMEOUT: return "timeout";
    case FERRY_EREMOTE: return "server error";
    case FERRY_ECONNECT: return "connection failed";
    case FERRY_EAUTH: return "authentication failed";
    case FERRY_EUNSUPPORTED: return "unsupported";
    case FERRY_EACCESS: return "access denied";
    default: return "internal error";
    }
}

int ferry_exit_status(int code)
{
    if (code == FERRY_OK)
        return 0;
    return code == FERRY_EINVAL ? 2 : 1;
}
