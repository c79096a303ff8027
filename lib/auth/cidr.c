/* Client networks of ferry router's users (include/ferry/auth.h): CIDR ranges and their match.
 * Pure: addresses come in as text or bytes. */
#include "ferry/auth.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

bool ferry_addr_parse(const char *s, int *family, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (inet_pton(AF_INET, s, addr) == 1) {
        *family = 4;
        return true;
    }
    if (inet_pton(AF_INET6, s, addr) == 1) {
        *family = 6;
        return true;
    }
    return false;
}

static bool v4_mapped(const uint8_t a[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return !memcmp(a, prefix, sizeof prefix);
}

int ferry_cidr_parse(const char *s, ferry_cidr *out, ferry_err *err)
{
    char text[80];
    memset(out, 0, sizeof *out);
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof text)
        return ferry_err_set(err, FERRY_EINVAL, "'%.80s' is not a network (expected ADDR/BITS "
                             "such as 10.0.0.0/8 or fd00::/8)", s);
    memcpy(text, s, n + 1);
    char *slash = strchr(text, '/');
    uint64_t bits = 0;
    if (slash)
        *slash = '\0';
    if (!ferry_addr_parse(text, &out->family, out->addr))
        return ferry_err_set(err, FERRY_EINVAL, "network '%s': '%s' is not an IPv4 or IPv6 "
                             "address", s, text);
    unsigned width = out->family == 4 ? 32 : 128;
    if (slash && (!ferry_parse_u64(slash + 1, &bits) || bits > width))
        return ferry_err_set(err, FERRY_EINVAL, "network '%s': the prefix length must be 0..%u",
                             s, width);
    out->bits = slash ? (unsigned)bits : width;
    /* host bits must be zero: "10.1.0.0/8" is almost certainly a typo */
    for (unsigned i = out->bits; i < width; i++)
        if (out->addr[i / 8] & (0x80 >> (i % 8)))
            return ferry_err_set(err, FERRY_EINVAL, "network '%s' has host bits set (write the "
                                 "network address, e.g. the first address of the range)", s);
    return FERRY_OK;
}

int ferry_cidr_list_parse(const char *list, ferry_cidr **out, size_t *n, ferry_err *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    ferry_cidr *v = calloc(cap, sizeof *v);
    if (!v)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    const char *p = list;
    while (*p) {
        size_t l = strcspn(p, ",");
        char item[96];
        if (l >= sizeof item) {
            free(v);
            return ferry_err_set(err, FERRY_EINVAL, "network '%.*s...' is too long", 40, p);
        }
        memcpy(item, p, l);
        item[l] = '\0';
        char *t = ferry_trim(item);
        if (*t) {
            int rc = ferry_cidr_parse(t, &v[*n], err);
            if (rc) {
                free(v);
                *n = 0;
                return rc;
            }
            (*n)++;
        }
        p += l;
        if (*p == ',')
            p++;
    }
    *out = v;
    return FERRY_OK;
}

bool ferry_cidr_match(const ferry_cidr *c, int family, const uint8_t addr[16])
{
    uint8_t a[16];
    memcpy(a, addr, 16);
    if (family == 6 && c->family == 4 && v4_mapped(a)) {
        memmove(a, a + 12, 4);
        memset(a + 4, 0, 12);
        family = 4;
    }
    if (family != c->family)
        return false;
    unsigned full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(a, c->addr, full))
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (c->addr[full] & mask);
}

bool ferry_addr_loopback(int family, const uint8_t addr[16])
{
    if (family == 4)
        return addr[0] == 127;
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (!memcmp(addr, one, 16))
        return true;
    return v4_mapped(addr) && addr[12] == 127;
}
