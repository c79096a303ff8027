/* Error values: every fallible function returns a ferry error code and, when it fails, fills a
 * caller-owned ferry_err with a message meant for a person (what, where, how to fix). */
#ifndef FERRY_ERR_H
#define FERRY_ERR_H

#include <stddef.h>

enum ferry_code {
    FERRY_OK = 0,
    FERRY_EINVAL,    /* bad input from the user: exit code 2 */
    FERRY_EIO,       /* local I/O failed */
    FERRY_ENOMEM,
    FERRY_ENOTFOUND, /* a named thing does not exist */
    FERRY_ECONFLICT, /* compare-and-set lost, or the thing already exists */
    FERRY_ETIMEOUT,
    FERRY_EREMOTE,   /* a server answered with an error */
    FERRY_ECONNECT,  /* a server could not be reached */
    FERRY_EAUTH,     /* credentials refused */
    FERRY_EUNSUPPORTED,
    FERRY_EINTERNAL,
    FERRY_EACCESS    /* the caller is not allowed to do this (a bound user, a foreign tenant) */
};

#define FERRY_ERR_MSG_MAX 1024

typedef struct ferry_err {
    int code;
    char msg[FERRY_ERR_MSG_MAX];
} ferry_err;

/* Records code and a printf-style message; returns code so callers can write
 * `return ferry_err_set(err, FERRY_EINVAL, "...")`. err may be NULL. */
int ferry_err_set(ferry_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context ("reading x.tsv: ") to an existing message; keeps the code. */
int ferry_err_prefix(ferry_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void ferry_err_clear(ferry_err *err);

/* A short name for a code, e.g. "invalid input". */
const char *ferry_code_name(int code);

/* The process exit status for an error code: 2 for bad input, 1 otherwise, 0 for FERRY_OK. */
int ferry_exit_status(int code);

#endif
