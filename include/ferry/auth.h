/* Authentication for `ferry router` (docs/security.md): the pure pieces, no I/O, unit-tested.
 *
 *   credentials  the user and password of an HTTP request, taken the way ClickHouse's HTTP
 *                interface takes them (X-ClickHouse-User / X-ClickHouse-Key headers, HTTP Basic,
 *                `user` / `password` URL parameters; mixing them is refused; none means user
 *                `default` with an empty password)
 *   passwords    stored as SHA-256(salt || SHA-256(password)) with a random 16-byte salt, so a
 *                ClickHouse password_sha256_hex can be recorded without knowing the password;
 *                compared in constant time (CRYPTO_memcmp)
 *   networks     CIDR lists (IPv4 and IPv6; an IPv4-mapped IPv6 address matches IPv4 ranges)
 *   throttle     failed logins per client address, bounded memory: after a few failures every
 *                attempt from that address waits longer (doubling, capped), the count decays
 *   rate         a token bucket (requests per second with a one-second burst)
 * Passwords are never copied into error messages. */
#ifndef FERRY_AUTH_H
#define FERRY_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

/* ---- credentials ---- */

#define FERRY_AUTH_USER_MAX 256

/* What a request carries; NULL when absent (a header or parameter sent empty is ""). */
typedef struct ferry_auth_request {
    const char *header_user;   /* X-ClickHouse-User */
    const char *header_key;    /* X-ClickHouse-Key */
    const char *authorization; /* the Authorization header */
    const char *param_user;    /* ?user= */
    const char *param_password;/* ?password= */
} ferry_auth_request;

enum ferry_auth_source {
    FERRY_AUTH_FROM_HEADERS, /* X-ClickHouse-User / X-ClickHouse-Key */
    FERRY_AUTH_FROM_BASIC,   /* Authorization: Basic */
    FERRY_AUTH_FROM_PARAMS,  /* user / password URL parameters, or nothing at all */
};

typedef struct ferry_auth_cred {
    char user[FERRY_AUTH_USER_MAX];
    char *password;            /* owned, NUL-terminated; wiped by ferry_auth_cred_free */
    size_t password_len;       /* a Basic password may hold NUL bytes: compare all of them */
    enum ferry_auth_source source;
    bool given;                /* false: nothing was sent (user "default", empty password) */
} ferry_auth_cred;

/* Takes the request's credentials as ClickHouse 26 does (src/Server/HTTP/
 * authenticateUserByHTTP.cpp): the headers when either is non-empty, else Authorization, else
 * the parameters (user defaults to "default"). FERRY_EAUTH with ClickHouse's message for a mix
 * of schemes ("Invalid authentication: it is not allowed to use X and Y simultaneously"), an
 * empty user name, an Authorization scheme other than Basic, malformed Basic credentials and
 * user names longer than FERRY_AUTH_USER_MAX - 1. *out is the caller's to free in every case. */
int ferry_auth_parse(const ferry_auth_request *in, ferry_auth_cred *out, ferry_err *err);
void ferry_auth_cred_free(ferry_auth_cred *c);

/* Strict base64 (RFC 4648, padding required when the length is not a multiple of 4) into out
 * (at least 3 * strlen(in) / 4 + 1 bytes; NUL-terminated, *len without it). false when
 * malformed. */
bool ferry_base64_decode(const char *in, unsigned char *out, size_t *len);

/* ---- passwords ---- */

#define FERRY_AUTH_SALT_HEX 32 /* 16 bytes */
#define FERRY_AUTH_HASH_HEX 64

/* A random salt (OpenSSL RAND_bytes) as hex into out[FERRY_AUTH_SALT_HEX + 1]. */
int ferry_auth_new_salt(char *out, ferry_err *err);
/* SHA-256(password) as hex into out[65] (what ClickHouse's password_sha256_hex holds). */
void ferry_auth_sha256_hex(const void *data, size_t len, char *out);
/* The stored hash for a password (hex SHA-256(salt || SHA-256(password))) into out[65].
 * FERRY_EINVAL when salt_hex is not 32 hex digits. */
int ferry_auth_hash_password(const char *salt_hex, const void *password, size_t len, char *out,
                             ferry_err *err);
/* The same from SHA-256(password) in hex (64 hex digits, either case), without the password. */
int ferry_auth_hash_from_sha256(const char *salt_hex, const char *sha256_hex, char *out,
                                ferry_err *err);
/* Whether password matches (salt, hash): the same work whatever the answer, and a
 * constant-time comparison. A malformed salt or hash never matches. */
bool ferry_auth_verify(const char *salt_hex, const char *hash_hex, const void *password,
                       size_t len);

/* ---- networks ---- */

typedef struct ferry_cidr {
    int family;        /* 4 or 6 */
    uint8_t addr[16];  /* network address, host bits zero */
    unsigned bits;     /* prefix length */
} ferry_cidr;

/* "10.0.0.0/8", "192.168.1.7" (= /32), "::1/128", "fd00::/8". FERRY_EINVAL naming the text for
 * a malformed address, a prefix beyond the family's width, or host bits set ("10.1.0.0/8":
 * write the network). */
int ferry_cidr_parse(const char *s, ferry_cidr *out, ferry_err *err);
/* A comma-separated list (spaces allowed around items); "" gives none. *out owned by the
 * caller (free()). */
int ferry_cidr_list_parse(const char *list, ferry_cidr **out, size_t *n, ferry_err *err);
/* A client address as text (dotted IPv4 or IPv6) into family/addr; false when not one. */
bool ferry_addr_parse(const char *s, int *family, uint8_t addr[16]);
/* Whether the address is inside the range; an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is
 * compared as IPv4. */
bool ferry_cidr_match(const ferry_cidr *c, int family, const uint8_t addr[16]);
/* Whether the address is a loopback one (127.0.0.0/8, ::1, IPv4-mapped loopback). */
bool ferry_addr_loopback(int family, const uint8_t addr[16]);

/* ---- throttling failed logins per client address ---- */

typedef struct ferry_auth_throttle ferry_auth_throttle;

typedef struct ferry_auth_throttle_policy {
    size_t slots;          /* addresses remembered at once (memory: slots x 40 bytes) */
    uint32_t free_failures;/* failures within the decay that cost nothing */
    uint64_t base_ms;      /* the first delay after them; doubles with every further failure */
    uint64_t max_ms;       /* the delay never exceeds this */
    uint64_t decay_ms;     /* one failure is forgotten per this much time without a failure */
} ferry_auth_throttle_policy;

/* NULL on allocation failure. Defaults for zero fields: 4096 slots, 5 free failures, 100 ms,
 * 5000 ms, 30000 ms. */
ferry_auth_throttle *ferry_auth_throttle_new(const ferry_auth_throttle_policy *p);
void ferry_auth_throttle_free(ferry_auth_throttle *t);
/* How long an attempt from addr must wait before its credentials are checked (0: none).
 * The wait applies to every attempt from a throttled address, right or wrong, so its timing
 * does not tell a guess that succeeded from one that failed; a success does not reset the
 * count (with one valid account an attacker could otherwise interleave logins to reset it):
 * failures only decay. */
uint64_t ferry_auth_throttle_delay(ferry_auth_throttle *t, int family, const uint8_t addr[16],
                                   uint64_t now_ms);
/* Records a failure (when the table is full, the entry that failed longest ago is replaced). */
void ferry_auth_throttle_fail(ferry_auth_throttle *t, int family, const uint8_t addr[16],
                              uint64_t now_ms);
/* Addresses remembered now (tests). */
size_t ferry_auth_throttle_count(const ferry_auth_throttle *t);

/* ---- request rate ---- */

/* A token bucket refilled at rate per second, holding at most rate tokens (a one-second burst).
 * Zero it to start full. */
typedef struct ferry_bucket {
    double tokens;
    uint64_t last_ms;
    bool started;
} ferry_bucket;

/* Takes one token: true when there was one. rate 0: unlimited (always true). */
bool ferry_bucket_take(ferry_bucket *b, uint32_t rate, uint64_t now_ms);

#endif
