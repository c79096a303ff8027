/* Password hashes of ferry router's users (include/ferry/auth.h): SHA-256(salt || SHA-256(pw)),
 * hex, compared in constant time. The inner SHA-256 is what ClickHouse's password_sha256_hex
 * holds, so an operator can hand ferry that instead of the password. */
#include "ferry/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "ferry/strutil.h"

/* Exactly n bytes of hex (2n digits) into out; false otherwise. */
static bool unhex(const char *s, unsigned char *out, size_t n)
{
    if (!s || strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        int hi = ferry_hex_digit(s[2 * i]), lo = ferry_hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static void tohex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int ferry_auth_new_salt(char *out, ferry_err *err)
{
    unsigned char b[FERRY_AUTH_SALT_HEX / 2];
    if (RAND_bytes(b, sizeof b) != 1)
        return ferry_err_set(err, FERRY_EINTERNAL, "cannot draw random bytes for a salt");
    tohex(b, sizeof b, out);
    return FERRY_OK;
}

void ferry_auth_sha256_hex(const void *data, size_t len, char *out)
{
    unsigned char md[32];
    unsigned int ml = 0;
    EVP_Digest(data, len, md, &ml, EVP_sha256(), NULL);
    tohex(md, sizeof md, out);
}

/* SHA-256(salt || inner) into out (hex). */
static void outer(const unsigned char *salt, const unsigned char inner[32], char *out)
{
    unsigned char buf[FERRY_AUTH_SALT_HEX / 2 + 32], md[32];
    unsigned int ml = 0;
    memcpy(buf, salt, FERRY_AUTH_SALT_HEX / 2);
    memcpy(buf + FERRY_AUTH_SALT_HEX / 2, inner, 32);
    EVP_Digest(buf, sizeof buf, md, &ml, EVP_sha256(), NULL);
    tohex(md, sizeof md, out);
    OPENSSL_cleanse(buf, sizeof buf);
}

int ferry_auth_hash_password(const char *salt_hex, const void *password, size_t len, char *out,
                             ferry_err *err)
{
    unsigned char salt[FERRY_AUTH_SALT_HEX / 2], inner[32];
    unsigned int ml = 0;
    if (!unhex(salt_hex, salt, sizeof salt))
        return ferry_err_set(err, FERRY_EINVAL, "a salt must be %d hex digits",
                             FERRY_AUTH_SALT_HEX);
    EVP_Digest(password, len, inner, &ml, EVP_sha256(), NULL);
    outer(salt, inner, out);
    OPENSSL_cleanse(inner, sizeof inner);
    return FERRY_OK;
}

int ferry_auth_hash_from_sha256(const char *salt_hex, const char *sha256_hex, char *out,
                                ferry_err *err)
{
    unsigned char salt[FERRY_AUTH_SALT_HEX / 2], inner[32];
    if (!unhex(salt_hex, salt, sizeof salt))
        return ferry_err_set(err, FERRY_EINVAL, "a salt must be %d hex digits",
                             FERRY_AUTH_SALT_HEX);
    if (!unhex(sha256_hex, inner, sizeof inner))
        return ferry_err_set(err, FERRY_EINVAL, "a password SHA-256 must be 64 hex digits "
                             "(e.g. `printf %%s \"$PASSWORD\" | sha256sum`)");
    outer(salt, inner, out);
    OPENSSL_cleanse(inner, sizeof inner);
    return FERRY_OK;
}

bool ferry_auth_verify(const char *salt_hex, const char *hash_hex, const void *password,
                       size_t len)
{
    unsigned char salt[FERRY_AUTH_SALT_HEX / 2], want[32], inner[32], got_bin[32];
    char got[FERRY_AUTH_HASH_HEX + 1];
    unsigned int ml = 0;
    /* the same work whatever the record looks like: hash first, judge after */
    bool salt_ok = unhex(salt_hex, salt, sizeof salt);
    if (!salt_ok)
        memset(salt, 0, sizeof salt);
    bool want_ok = unhex(hash_hex, want, sizeof want);
    if (!want_ok)
        memset(want, 0, sizeof want);
    EVP_Digest(password, len, inner, &ml, EVP_sha256(), NULL);
    outer(salt, inner, got);
    unhex(got, got_bin, sizeof got_bin);
    bool same = CRYPTO_memcmp(got_bin, want, sizeof want) == 0;
    OPENSSL_cleanse(inner, sizeof inner);
    return same && salt_ok && want_ok;
}
