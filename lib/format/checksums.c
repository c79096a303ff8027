/* Parsing ClickHouse's checksums.txt (format versions 2, 3 and 4), ClickHouse's chained file
 * hash, and its compressed block stream. Pure: bytes in, values out. */
#include "ferry/checksums.h"
#include "format/cityhash102.h"

#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ClickHouse refuses compressed blocks above 1 GiB; so do we. */
#define CH_MAX_BLOCK_SIZE 0x40000000u
#define CH_BLOCK_CHECKSUM 16
#define CH_BLOCK_HEADER 9
/* LZ4 cannot expand more than about 255 to 1; a larger claim is corrupt, and refusing it early
 * keeps a hostile header from making us allocate a gigabyte. */
#define LZ4_MAX_RATIO 255u
/* ClickHouse's readStringBinary limit. */
#define CH_MAX_STRING 0x40000000u

static const char HEADER[] = "checksums format version: ";

/* ---- ClickHouse's file hash ---- */

void ferry_part_hasher_init(ferry_part_hasher *h)
{
    h->state[0] = h->state[1] = 0;
    h->total = 0;
    h->pending = 0;
}

static void hasher_absorb(ferry_part_hasher *h, const unsigned char *block, size_t len)
{
    ferry_city128 s = ferry_cityhash102_128_seed(block, len, (ferry_city128){h->state[0],
                                                                             h->state[1]});
    h->state[0] = s.lo;
    h->state[1] = s.hi;
}

void ferry_part_hasher_update(ferry_part_hasher *h, const void *data, size_t len)
{
    const unsigned char *p = data;
    h->total += len;
    if (h->pending) {
        size_t take = FERRY_PART_HASH_BLOCK - h->pending;
        if (take > len)
            take = len;
        memcpy(h->block + h->pending, p, take);
        h->pending += take;
        p += take;
        len -= take;
        if (h->pending < FERRY_PART_HASH_BLOCK)
            return;
        hasher_absorb(h, h->block, FERRY_PART_HASH_BLOCK);
        h->pending = 0;
    }
    while (len >= FERRY_PART_HASH_BLOCK) {
        hasher_absorb(h, p, FERRY_PART_HASH_BLOCK);
        p += FERRY_PART_HASH_BLOCK;
        len -= FERRY_PART_HASH_BLOCK;
    }
    if (len) {
        memcpy(h->block, p, len);
        h->pending = len;
    }
}

void ferry_part_hasher_final(const ferry_part_hasher *h, uint64_t hash[2])
{
    if (!h->pending) {
        hash[0] = h->state[0];
        hash[1] = h->state[1];
        return;
    }
    ferry_city128 s = ferry_cityhash102_128_seed(h->block, h->pending,
                                                 (ferry_city128){h->state[0], h->state[1]});
    hash[0] = s.lo;
    hash[1] = s.hi;
}

void ferry_checksum_hex(const uint64_t hash[2], char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)hash[1], (unsigned long long)hash[0]);
}

/* ---- compressed blocks ---- */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static const char *method_name(unsigned m)
{
    switch (m) {
    case FERRY_CH_METHOD_NONE: return "NONE";
    case FERRY_CH_METHOD_LZ4: return "LZ4";
    case FERRY_CH_METHOD_ZSTD: return "ZSTD";
    case FERRY_CH_METHOD_MULTIPLE: return "Multiple";
    case 0x92: return "Delta";
    case 0x93: return "T64";
    case 0x94: return "DoubleDelta";
    case 0x95: return "Gorilla";
    default: return "unknown";
    }
}

int ferry_ch_decompress(const void *data, size_t len, ferry_buf *out, ferry_err *err)
{
    const unsigned char *p = data;
    size_t off = 0;
    int rc = FERRY_OK;
    size_t start_len = out->len;
    while (off < len) {
        size_t left = len - off;
        if (left < CH_BLOCK_CHECKSUM + CH_BLOCK_HEADER) {
            rc = ferry_err_set(err, FERRY_EINVAL, "compressed block at offset %zu is truncated: "
                               "%zu bytes left, a block header needs %d", off, left,
                               CH_BLOCK_CHECKSUM + CH_BLOCK_HEADER);
            goto out;
        }
        const unsigned char *blk = p + off + CH_BLOCK_CHECKSUM;
        unsigned method = blk[0];
        uint32_t csize = le32(blk + 1); /* header included */
        uint32_t dsize = le32(blk + 5);
        if (csize < CH_BLOCK_HEADER || csize > CH_MAX_BLOCK_SIZE || dsize > CH_MAX_BLOCK_SIZE) {
            rc = ferry_err_set(err, FERRY_EINVAL, "compressed block at offset %zu has impossible "
                               "sizes (compressed %u, uncompressed %u)", off, csize, dsize);
            goto out;
        }
        if (csize > left - CH_BLOCK_CHECKSUM) {
            rc = ferry_err_set(err, FERRY_EINVAL, "compressed block at offset %zu is truncated: "
                               "it claims %u bytes, %zu are left", off, csize,
                               left - CH_BLOCK_CHECKSUM);
            goto out;
        }
        ferry_city128 sum = ferry_cityhash102_128(blk, csize);
        uint64_t want_lo = le64(p + off), want_hi = le64(p + off + 8);
        if (sum.lo != want_lo || sum.hi != want_hi) {
            rc = ferry_err_set(err, FERRY_EINVAL, "compressed block at offset %zu is damaged: "
                               "checksum %016llx%016llx, computed %016llx%016llx", off,
                               (unsigned long long)want_hi, (unsigned long long)want_lo,
                               (unsigned long long)sum.hi, (unsigned long long)sum.lo);
            goto out;
        }
        const unsigned char *payload = blk + CH_BLOCK_HEADER;
        size_t plen = csize - CH_BLOCK_HEADER;
        if (method == FERRY_CH_METHOD_NONE) {
            if (plen != dsize) {
                rc = ferry_err_set(err, FERRY_EINVAL, "uncompressed block at offset %zu holds "
                                   "%zu bytes but claims %u", off, plen, dsize);
                goto out;
            }
            if (ferry_buf_append(out, payload, plen)) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory decompressing");
                goto out;
            }
        } else if (method == FERRY_CH_METHOD_LZ4) {
            if (plen > (size_t)INT32_MAX ||
                (uint64_t)dsize > (uint64_t)plen * LZ4_MAX_RATIO + 64) {
                rc = ferry_err_set(err, FERRY_EINVAL, "LZ4 block at offset %zu claims %u bytes "
                                   "from %zu: impossible", off, dsize, plen);
                goto out;
            }
            if (ferry_buf_reserve(out, (size_t)dsize)) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory decompressing");
                goto out;
            }
            int n = LZ4_decompress_safe((const char *)payload, out->data + out->len, (int)plen,
                                        (int)dsize);
            if (n < 0 || (uint32_t)n != dsize) {
                rc = ferry_err_set(err, FERRY_EINVAL, "LZ4 block at offset %zu does not "
                                   "decompress to its %u bytes", off, dsize);
                goto out;
            }
            out->len += dsize;
            out->data[out->len] = '\0';
        } else {
            rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "compressed block at offset %zu uses "
                               "codec 0x%02x (%s); ferry reads only NONE and LZ4 blocks", off,
                               method, method_name(method));
            goto out;
        }
        off += CH_BLOCK_CHECKSUM + (size_t)csize;
    }
out:
    if (rc) {
        out->len = start_len;
        if (out->data)
            out->data[out->len] = '\0';
    }
    return rc;
}

/* ---- checksums.txt ---- */

typedef struct reader {
    const unsigned char *p;
    size_t len, off;
    const char *what; /* for messages: "checksums.txt" or "checksums.txt (decompressed)" */
} reader;

static int truncated(reader *r, ferry_err *err, const char *field)
{
    return ferry_err_set(err, FERRY_EINVAL, "%s is truncated: %s missing at byte %zu", r->what,
                         field, r->off);
}

static int read_var_uint(reader *r, uint64_t *v, const char *field, ferry_err *err)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->off >= r->len)
            return truncated(r, err, field);
        unsigned char b = r->p[r->off++];
        if (i == 9 && (b & 0xfe))
            return ferry_err_set(err, FERRY_EINVAL, "%s: %s at byte %zu overflows 64 bits",
                                 r->what, field, r->off - 1);
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return FERRY_OK;
        }
    }
    return ferry_err_set(err, FERRY_EINVAL, "%s: %s at byte %zu is longer than 10 bytes",
                         r->what, field, r->off);
}

static int read_bytes(reader *r, void *dst, size_t n, const char *field, ferry_err *err)
{
    if (r->len - r->off < n)
        return truncated(r, err, field);
    memcpy(dst, r->p + r->off, n);
    r->off += n;
    return FERRY_OK;
}

static int read_hash(reader *r, uint64_t h[2], const char *field, ferry_err *err)
{
    unsigned char b[16];
    int rc = read_bytes(r, b, 16, field, err);
    if (rc)
        return rc;
    h[0] = le64(b);
    h[1] = le64(b + 8);
    return FERRY_OK;
}

/* Names become paths under the part folder: refuse anything that could leave it. */
static int check_name(const char *name, size_t len, const char *what, ferry_err *err)
{
    if (len == 0)
        return ferry_err_set(err, FERRY_EINVAL, "%s lists a file with an empty name", what);
    if (memchr(name, '\0', len))
        return ferry_err_set(err, FERRY_EINVAL, "%s lists a file name containing a NUL byte",
                             what);
    if (name[0] == '/')
        return ferry_err_set(err, FERRY_EINVAL, "%s lists an absolute path '%.*s'", what,
                             (int)(len > 200 ? 200 : len), name);
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && name[j] != '/')
            j++;
        if ((j - i == 1 && name[i] == '.') || (j - i == 2 && name[i] == '.' && name[i + 1] == '.')
            || j == i)
            return ferry_err_set(err, FERRY_EINVAL, "%s lists a file name '%.*s' that is not a "
                                 "plain relative path", what, (int)(len > 200 ? 200 : len), name);
        i = j + 1;
        if (j + 1 == len) /* trailing slash */
            return ferry_err_set(err, FERRY_EINVAL, "%s lists a file name '%.*s' that is not a "
                                 "plain relative path", what, (int)(len > 200 ? 200 : len), name);
    }
    return FERRY_OK;
}

static int dup_name(const char *name, size_t len, char **out, ferry_err *err)
{
    char *s = malloc(len + 1);
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(s, name, len);
    s[len] = '\0';
    *out = s;
    return FERRY_OK;
}

/* Room for the count entries the file claims, when what is left of it can hold them (each at
 * least min_entry bytes). */
static int alloc_entries(const reader *r, ferry_checksums *c, uint64_t count, size_t min_entry,
                         ferry_err *err)
{
    if (count > (r->len - r->off) / min_entry)
        return ferry_err_set(err, FERRY_EINVAL, "%s claims %llu files but holds only %zu more "
                             "bytes", r->what, (unsigned long long)count, r->len - r->off);
    c->entries = calloc(count ? count : 1, sizeof *c->entries);
    return c->entries ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* Version 3: the binary list (also the content of version 4's compressed stream). */
static int parse_v3(reader *r, ferry_checksums *c, ferry_err *err)
{
    uint64_t count;
    int rc = read_var_uint(r, &count, "the file count", err);
    if (rc)
        return rc;
    /* The smallest entry: 1-byte name length + 1 name byte + 1-byte size + hash + flag. */
    if ((rc = alloc_entries(r, c, count, 19, err)))
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        ferry_checksum_entry *e = &c->entries[i];
        uint64_t nlen;
        if ((rc = read_var_uint(r, &nlen, "a file name length", err)))
            return rc;
        if (nlen > CH_MAX_STRING || nlen > r->len - r->off)
            return truncated(r, err, "a file name");
        const char *name = (const char *)r->p + r->off;
        if ((rc = check_name(name, (size_t)nlen, r->what, err)))
            return rc;
        if ((rc = dup_name(name, (size_t)nlen, &e->name, err)))
            return rc;
        c->count = i + 1;
        r->off += (size_t)nlen;
        if ((rc = read_var_uint(r, &e->file_size, "a file size", err)) ||
            (rc = read_hash(r, e->file_hash, "a file hash", err)))
            return rc;
        unsigned char flag = 0;
        if ((rc = read_bytes(r, &flag, 1, "the compressed flag", err)))
            return rc;
        if (flag > 1)
            return ferry_err_set(err, FERRY_EINVAL, "%s: file '%s' has compressed flag %u "
                                 "(expected 0 or 1)", r->what, e->name, flag);
        e->is_compressed = flag;
        if (flag && ((rc = read_var_uint(r, &e->uncompressed_size, "an uncompressed size", err))
                     || (rc = read_hash(r, e->uncompressed_hash, "an uncompressed hash", err))))
            return rc;
    }
    if (r->off != r->len)
        return ferry_err_set(err, FERRY_EINVAL, "%s has %zu unexpected bytes after its %llu "
                             "files", r->what, r->len - r->off, (unsigned long long)count);
    return FERRY_OK;
}

/* ---- version 2: text ---- */

static int expect_text(reader *r, const char *lit, ferry_err *err)
{
    size_t n = strlen(lit);
    if (r->len - r->off < n || memcmp(r->p + r->off, lit, n) != 0)
        return ferry_err_set(err, FERRY_EINVAL, "%s: expected \"%s\" at byte %zu", r->what,
                             lit[0] == '\n' ? "\\n..." : lit, r->off);
    r->off += n;
    return FERRY_OK;
}

static int read_decimal(reader *r, uint64_t *v, const char *field, ferry_err *err)
{
    uint64_t x = 0;
    size_t start = r->off;
    while (r->off < r->len && r->p[r->off] >= '0' && r->p[r->off] <= '9') {
        unsigned d = r->p[r->off] - '0';
        if (x > (UINT64_MAX - d) / 10)
            return ferry_err_set(err, FERRY_EINVAL, "%s: %s at byte %zu overflows 64 bits",
                                 r->what, field, start);
        x = x * 10 + d;
        r->off++;
    }
    if (r->off == start)
        return ferry_err_set(err, FERRY_EINVAL, "%s: expected %s (a number) at byte %zu",
                             r->what, field, start);
    *v = x;
    return FERRY_OK;
}

static int read_decimal_hash(reader *r, uint64_t h[2], const char *field, ferry_err *err)
{
    int rc = read_decimal(r, &h[0], field, err);
    if (!rc)
        rc = expect_text(r, " ", err);
    if (!rc)
        rc = read_decimal(r, &h[1], field, err);
    return rc;
}

static int parse_v2(reader *r, ferry_checksums *c, ferry_err *err)
{
    uint64_t count;
    int rc;
    if ((rc = read_decimal(r, &count, "the file count", err)) ||
        (rc = expect_text(r, " files:\n", err)))
        return rc;
    /* Smallest text entry is well over 40 bytes. */
    if ((rc = alloc_entries(r, c, count, 40, err)))
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        ferry_checksum_entry *e = &c->entries[i];
        size_t start = r->off;
        while (r->off < r->len && r->p[r->off] != '\t' && r->p[r->off] != '\n')
            r->off++;
        const char *name = (const char *)r->p + start;
        if ((rc = check_name(name, r->off - start, r->what, err)) ||
            (rc = dup_name(name, r->off - start, &e->name, err)))
            return rc;
        c->count = i + 1;
        if ((rc = expect_text(r, "\n\tsize: ", err)) ||
            (rc = read_decimal(r, &e->file_size, "a file size", err)) ||
            (rc = expect_text(r, "\n\thash: ", err)) ||
            (rc = read_decimal_hash(r, e->file_hash, "a file hash", err)) ||
            (rc = expect_text(r, "\n\tcompressed: ", err)))
            return rc;
        if (r->off >= r->len)
            return truncated(r, err, "the compressed flag");
        e->is_compressed = r->p[r->off++] != '0';
        if (e->is_compressed &&
            ((rc = expect_text(r, "\n\tuncompressed size: ", err)) ||
             (rc = read_decimal(r, &e->uncompressed_size, "an uncompressed size", err)) ||
             (rc = expect_text(r, "\n\tuncompressed hash: ", err)) ||
             (rc = read_decimal_hash(r, e->uncompressed_hash, "an uncompressed hash", err))))
            return rc;
        if ((rc = expect_text(r, "\n", err)))
            return rc;
    }
    if (r->off != r->len)
        return ferry_err_set(err, FERRY_EINVAL, "%s has %zu unexpected bytes after its %llu "
                             "files", r->what, r->len - r->off, (unsigned long long)count);
    return FERRY_OK;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const ferry_checksum_entry *)a)->name, ((const ferry_checksum_entry *)b)->name);
}

void ferry_checksums_free(ferry_checksums *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->count; i++)
        free(c->entries[i].name);
    free(c->entries);
    c->entries = NULL;
    c->count = 0;
}

int ferry_checksums_parse(const void *data, size_t len, ferry_checksums *out, ferry_err *err)
{
    ferry_checksums c = {0};
    ferry_buf plain = FERRY_BUF_INIT;
    reader r = {data, len, 0, "checksums.txt"};
    int rc;
    memset(out, 0, sizeof *out);
    if (len == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "checksums.txt is empty");
        goto out;
    }
    if ((rc = expect_text(&r, HEADER, err))) {
        rc = ferry_err_set(err, FERRY_EINVAL, "checksums.txt does not start with \"%s\": not a "
                           "ClickHouse part checksums file", HEADER);
        goto out;
    }
    uint64_t version;
    if ((rc = read_decimal(&r, &version, "the format version", err)) ||
        (rc = expect_text(&r, "\n", err)))
        goto out;
    c.format_version = version > 1000 ? 1000 : (int)version;
    switch (version) {
    case 2:
        rc = parse_v2(&r, &c, err);
        break;
    case 3:
        rc = parse_v3(&r, &c, err);
        break;
    case 4: {
        if ((rc = ferry_ch_decompress(r.p + r.off, r.len - r.off, &plain, err))) {
            ferry_err_prefix(err, "checksums.txt: ");
            goto out;
        }
        reader inner = {(const unsigned char *)plain.data, plain.len, 0,
                        "checksums.txt (decompressed)"};
        rc = parse_v3(&inner, &c, err);
        break;
    }
    case 1:
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "checksums.txt format version 1 carries no "
                           "checksums (a part from before 2016); ClickHouse itself ignores it");
        break;
    case 5:
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "checksums format version 5 is the summary "
                           "form ClickHouse keeps in ZooKeeper, not a part's checksums.txt");
        break;
    default:
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "checksums.txt has unknown format version "
                           "%llu (ferry reads 2, 3 and 4)", (unsigned long long)version);
        break;
    }
    if (rc)
        goto out;
    if (c.count > 1)
        qsort(c.entries, c.count, sizeof *c.entries, cmp_entry);
    for (size_t i = 1; i < c.count; i++)
        if (!strcmp(c.entries[i - 1].name, c.entries[i].name)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "checksums.txt lists file '%s' twice",
                               c.entries[i].name);
            goto out;
        }
    *out = c;
    c = (ferry_checksums){0};
out:
    ferry_checksums_free(&c);
    ferry_buf_free(&plain);
    return rc;
}

const ferry_checksum_entry *ferry_checksums_find(const ferry_checksums *c, const char *name)
{
    size_t lo = 0, hi = c->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(name, c->entries[mid].name);
        if (d == 0)
            return &c->entries[mid];
        if (d < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

bool ferry_checksums_unlisted_file_ok(const char *name)
{
    /* The files ClickHouse writes beside checksums.txt without listing them (18.x to 26.x),
     * plus frozen_metadata.txt that FREEZE adds for zero-copy tables. */
    static const char *const unlisted[] = {
        "checksums.txt", "columns.txt", "default_compression_codec.txt", "metadata_version.txt",
        "columns_substreams.txt", "invalidated_system_columns.txt", "txn_version.txt",
        "frozen_metadata.txt", "delete-on-destroy.txt", NULL};
    for (int i = 0; unlisted[i]; i++)
        if (!strcmp(name, unlisted[i]))
            return true;
    return false;
}
