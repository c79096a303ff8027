/* Rendezvous hashes and scores: the two 64-bit hashes of "<slice id>:<shard>", the weighted
 * score, and the scorer that finds a slice's best shards quickly (and exactly).
 *
 * Speed matters here (1M slices x 100 shards is 10^8 pairs). These tricks change no result
 * (the unit tests compare each with the plain definition):
 *  - sha256 keys are at most 55 bytes in practice, i.e. one SHA-256 block, so we pad the block
 *    ourselves and run one compression (OpenSSL's SHA256_Transform, which uses the CPU's SHA
 *    instructions) instead of the generic init/update/final path. The block is prepared with
 *    the slice's "<slice id>:" once; each shard only patches in its name and the length.
 *  - xxh3 of a 17..128-byte key is a sum of independently mixed 16-byte blocks; the blocks
 *    inside "<slice id>:" are mixed once per slice (see xxh3_pair).
 *  - -w/ln(u) grows with u, so among shards of equal weight the best ones are those with the
 *    largest u; only those need the (slow) logarithm. See pl_top.
 *  - With distinct weights, a shard whose score bound cannot make the best few needs no
 *    logarithm either. */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Transform: deprecated, still the fastest way */
#include "placement/placement_int.h"

#include <assert.h>
#include <math.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* inline xxHash into the scoring loop (header-only mode) */
#include <xxhash.h>

bool ferry_hash_parse(const char *name, ferry_hash *out)
{
    if (!strcmp(name, "sha256")) {
        *out = FERRY_HASH_SHA256;
        return true;
    }
    if (!strcmp(name, "xxh3")) {
        *out = FERRY_HASH_XXH3;
        return true;
    }
    return false;
}

const char *ferry_hash_name(ferry_hash h)
{
    return h == FERRY_HASH_XXH3 ? "xxh3" : "sha256";
}

static uint64_t sha256_prefix64(const char *key, size_t len)
{
    if (len <= 55) {
        unsigned char block[64];
        memcpy(block, key, len);
        block[len] = 0x80;
        memset(block + len + 1, 0, 64 - len - 1);
        uint64_t bits = (uint64_t)len * 8;
        for (int k = 0; k < 8; k++)
            block[63 - k] = (unsigned char)(bits >> (8 * k));
        SHA256_CTX ctx;
        SHA256_Init(&ctx);
        SHA256_Transform(&ctx, block);
        return ((uint64_t)ctx.h[0] << 32) | ctx.h[1];
    }
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, len, md);
    uint64_t h = 0;
    for (int k = 0; k < 8; k++)
        h = (h << 8) | md[k];
    return h;
}

uint64_t ferry_hash64(ferry_hash h, const char *key, size_t len)
{
    if (h == FERRY_HASH_XXH3)
        return XXH3_64bits(key, len);
    return sha256_prefix64(key, len);
}

/* u's numerator, (double)h + 0.5, exactly as Python computes h + 0.5 for an int h. */
static inline double hash_u(uint64_t h)
{
    return (double)h + 0.5;
}

static inline double score_from_u(double hu, double weight)
{
    double u = hu / 18446744073709551616.0; /* 2^64: exact, a power of two */
    if (u >= 1.0)
        return INFINITY; /* the limit as u -> 1; Python would divide by zero here */
    return -weight / log(u);
}

double ferry_score_from_hash(uint64_t h, double weight)
{
    return score_from_u(hash_u(h), weight);
}

double ferry_score(ferry_hash h, const char *slice_id, const char *shard, double weight)
{
    char key[FERRY_SLICE_ID_MAX + FERRY_NAME_MAX + 8];
    size_t a = strlen(slice_id), b = strlen(shard);
    if (a + b + 1 > sizeof key) { /* longer than any valid id; still hash it correctly */
        char *big = malloc(a + b + 2);
        if (!big)
            return NAN;
        memcpy(big, slice_id, a);
        big[a] = ':';
        memcpy(big + a + 1, shard, b);
        double s = ferry_score_from_hash(ferry_hash64(h, big, a + b + 1), weight);
        free(big);
        return s;
    }
    memcpy(key, slice_id, a);
    key[a] = ':';
    memcpy(key + a + 1, shard, b);
    return ferry_score_from_hash(ferry_hash64(h, key, a + b + 1), weight);
}

/* The padded name of length len at dst: a fixed-size copy, the short one when it holds the name
 * (PL_NAME_COPY_SHORT); dst has room for FERRY_NAME_MAX bytes. */
static inline void put_name(void *dst, const char *padded, size_t len)
{
    if (len <= PL_NAME_COPY_SHORT)
        memcpy(dst, padded, PL_NAME_COPY_SHORT);
    else
        memcpy(dst, padded, FERRY_NAME_MAX);
}

static inline block16 read_block(const void *p)
{
    const unsigned char *b = p;
    return (block16){XXH_readLE64(b), XXH_readLE64(b + 8)};
}

/* ---- scorer ------------------------------------------------------------------------------- */

int pl_scorer_init(pl_scorer *s, const ferry_pl_cluster *c, ferry_hash hash, ferry_err *err)
{
    memset(s, 0, sizeof *s);
    s->hash = hash;
    s->n = c->n;
    s->names = calloc(c->n, sizeof *s->names);
    s->name_len = calloc(c->n, 1);
    s->weight = calloc(c->n, sizeof *s->weight);
    s->group = calloc(c->n, sizeof *s->group);
    s->padded = calloc(c->n, sizeof *s->padded);
    s->group_start = calloc(c->n + 1, sizeof *s->group_start);
    s->group_size = calloc(c->n + 1, sizeof *s->group_size);
    s->members = calloc(c->n + 1, sizeof *s->members);
    s->name_top = calloc(c->n + 1, sizeof *s->name_top);
    if (!s->names || !s->name_len || !s->weight || !s->group || !s->padded || !s->group_start ||
        !s->group_size || !s->members || !s->name_top) {
        pl_scorer_free(s);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->n; i++) {
        s->names[i] = c->shards[i].name;
        s->name_len[i] = (uint8_t)strlen(c->shards[i].name);
        memcpy(s->padded[i], c->shards[i].name, s->name_len[i]);
        if (s->name_len[i] <= 16) { /* the name as the last bytes of a 16-byte block */
            unsigned char top[16] = {0};
            memcpy(top + 16 - s->name_len[i], c->shards[i].name, s->name_len[i]);
            s->name_top[i] = read_block(top);
        }
        s->weight[i] = c->shards[i].weight;
        size_t g;
        for (g = 0; g < i; g++)
            if (s->weight[g] == s->weight[i])
                break;
        s->group[i] = g < i ? s->group[g] : (uint32_t)s->n_groups++;
        s->group_size[s->group[i]]++;
    }
    for (size_t g = 1; g < s->n_groups; g++)
        s->group_start[g] = s->group_start[g - 1] + s->group_size[g - 1];
    /* members: group by group, index order inside; group_size counts up again as it fills */
    memset(s->group_size, 0, s->n_groups * sizeof *s->group_size);
    for (uint32_t i = 0; i < c->n; i++) {
        uint32_t g = s->group[i];
        s->members[s->group_start[g] + s->group_size[g]++] = i;
    }
    return FERRY_OK;
}

void pl_scorer_free(pl_scorer *s)
{
    free(s->names);
    free(s->name_len);
    free(s->weight);
    free(s->group);
    free(s->padded);
    free(s->group_start);
    free(s->group_size);
    free(s->members);
    free(s->name_top);
    memset(s, 0, sizeof *s);
}

int pl_scratch_init(pl_scratch *x, const pl_scorer *s, size_t m, ferry_err *err)
{
    memset(x, 0, sizeof *x);
    x->hash = s->hash;
    x->key = x->buf + 16;
    x->m = m < s->n ? m : s->n;
    size_t groups = s->n_groups ? s->n_groups : 1;
    size_t merge = groups * x->m > s->n ? groups * x->m : s->n;
    x->gtop = calloc(groups * (x->m + 1), sizeof *x->gtop);
    x->glen = calloc(groups, sizeof *x->glen);
    x->gh = calloc(groups * (x->m + 1), sizeof *x->gh);
    x->merge = calloc(merge ? merge : 1, sizeof *x->merge);
    x->hashes = calloc(s->n ? s->n : 1, sizeof *x->hashes);
    x->surv = calloc(s->n ? s->n : 1, sizeof *x->surv);
    x->surv_hash = calloc(s->n ? s->n : 1, sizeof *x->surv_hash);
    x->group_cut = calloc(groups, sizeof *x->group_cut);
    if (!x->gtop || !x->glen || !x->merge || !x->gh || !x->hashes || !x->surv || !x->surv_hash ||
        !x->group_cut) {
        pl_scratch_free(x);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* A hash reaches the cut with probability about 3 (m + 1) / group size: enough survivors
     * almost always, few enough to sort cheaply. Any cut gives the same result. */
    for (size_t g = 0; g < s->n_groups; g++) {
        double want = 3.0 * (double)(x->m + 1), size = (double)s->group_size[g];
        x->group_cut[g] =
            want >= size ? 0 : (uint64_t)((1.0 - want / size) * 18446744073709551616.0);
    }
    return FERRY_OK;
}

void pl_scratch_free(pl_scratch *x)
{
    free(x->gtop);
    free(x->glen);
    free(x->gh);
    free(x->merge);
    free(x->hashes);
    free(x->surv);
    free(x->surv_hash);
    free(x->group_cut);
    memset(x, 0, sizeof *x);
}

/* ---- xxh3 with the prefix mixed once -------------------------------------------------------
 * In xxHash's frozen XXH3 format, XXH3_64bits (seed 0) of a key of 17..128 bytes is
 * (XXH3_len_17to128_64b)
 *     avalanche(len * PRIME64_1 + sum over j < ceil(len / 32) of
 *               mix(block at 16 j, secret + 32 j) + mix(block at len - 16 (j + 1), secret + 32 j + 16))
 * where a block is 16 key bytes. The front blocks that lie inside "<slice id>:" are the same
 * for every shard, so pl_set_slice mixes them once; for each shard only the blocks reaching
 * into its name are mixed, assembled in registers from the prefix and the zero-padded name
 * (copying the name behind the prefix and reading the block back would stall on store
 * forwarding). Other key lengths go to XXH3_64bits. The unit tests compare this with
 * XXH3_64bits for every prefix and name length. */

/* The 16 key bytes at offset o of prefix ++ name (name zero-padded to FERRY_NAME_MAX). */
static inline block16 key_block(const pl_scratch *x, const unsigned char *name, size_t o)
{
    size_t plen = x->prefix_len;
    if (o + 16 <= plen)
        return read_block(x->key + o);
    if (o >= plen)
        return read_block(name + (o - plen));
    /* d bytes from the end of the prefix, then the name: shift the prefix's last 16 bytes
     * down by 16 - d bytes and the name's first 16 up by d (little-endian: bytes at higher
     * offsets are the more significant). */
    unsigned d = (unsigned)(plen - o), down = 8 * (16 - d), up = 8 * d; /* 1 <= d <= 15 */
    block16 a = read_block(x->key + plen - 16), n = read_block(name), r;
    if (down < 64) {
        r.lo = (a.lo >> down) | (a.hi << (64 - down));
        r.hi = a.hi >> down;
    } else {
        r.lo = down == 64 ? a.hi : a.hi >> (down - 64);
        r.hi = 0;
    }
    if (up < 64) {
        r.lo |= n.lo << up;
        r.hi |= (n.hi << up) | (n.lo >> (64 - up));
    } else {
        r.hi |= up == 64 ? n.lo : n.lo << (up - 64);
    }
    return r;
}

static inline uint64_t mix_block(block16 b, const unsigned char *secret)
{
    return XXH3_mul128_fold64(b.lo ^ XXH_readLE64(secret), b.hi ^ XXH_readLE64(secret + 8));
}

static void xxh3_prepare(pl_scratch *x)
{
    for (size_t j = 0; j < 4 && 16 * (j + 1) <= x->prefix_len; j++)
        x->xxh3_prefix_mix[j] = mix_block(read_block(x->key + 16 * j), XXH3_kSecret + 32 * j);
    x->prefix_tail = read_block(x->key + x->prefix_len - 16); /* buf's zeros if shorter */
}

/* b >> (8 * k) for 1 <= k <= 16: the block without its k lowest bytes. */
static inline block16 shift_down(block16 b, unsigned k)
{
    if (k >= 16)
        return (block16){0, 0};
    if (k >= 8)
        return (block16){k == 8 ? b.hi : b.hi >> (8 * k - 64), 0};
    return (block16){(b.lo >> (8 * k)) | (b.hi << (64 - 8 * k)), b.hi >> (8 * k)};
}

/* XXH3_64bits of "<slice id>:<name of shard i>" for the current slice, any length. */
static uint64_t xxh3_pair_general(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    size_t plen = x->prefix_len, len = plen + s->name_len[i];
    const unsigned char *name = (const unsigned char *)s->padded[i];
    if (len < 17 || len > 128) {
        put_name(x->key + plen, (const char *)name, s->name_len[i]);
        return XXH3_64bits(x->key, len);
    }
    uint64_t acc = len * XXH_PRIME64_1;
    for (size_t j = 0; j < (len + 31) / 32; j++) {
        acc += 16 * (j + 1) <= plen ? x->xxh3_prefix_mix[j]
                                    : mix_block(key_block(x, name, 16 * j), XXH3_kSecret + 32 * j);
        acc += mix_block(key_block(x, name, len - 16 * (j + 1)), XXH3_kSecret + 32 * j + 16);
    }
    return XXH3_avalanche(acc);
}

/* The same, with the common case inlined into the scoring loop: a key of 17..32 bytes whose
 * prefix has 16+ bytes is one block from each end. The front one lies in the prefix (mixed
 * once); the back one is the prefix's last 16 - S bytes, then the S-byte name, which
 * pl_scorer_init stored already shifted into place (name_top). */
XXH_FORCE_INLINE uint64_t xxh3_pair(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    size_t plen = x->prefix_len, len = plen + s->name_len[i];
    if (len > 32 || plen < 16)
        return xxh3_pair_general(s, x, i);
    block16 b = shift_down(x->prefix_tail, s->name_len[i]);
    b.lo |= s->name_top[i].lo;
    b.hi |= s->name_top[i].hi;
    return XXH3_avalanche(len * XXH_PRIME64_1 + x->xxh3_prefix_mix[0] +
                          mix_block(b, XXH3_kSecret + 16));
}

/* ---- sha256 with the block prepared once per slice ------------------------------------------ */

static void sha256_prepare(pl_scratch *x)
{
    if (x->prefix_len < 55)
        memcpy(x->sha_block, x->key, x->prefix_len);
}

/* The first 8 bytes of SHA-256("<slice id>:<name of shard i>") for the current slice. */
static inline uint64_t sha256_pair(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    size_t plen = x->prefix_len, len = plen + s->name_len[i];
    if (len > 55) {
        put_name(x->key + plen, s->padded[i], s->name_len[i]);
        return sha256_prefix64(x->key, len);
    }
    /* The zero padding of the name supplies the zeros between the 0x80 and the length. */
    unsigned char *b = x->sha_block;
    memcpy(b + plen, s->padded[i], PL_NAME_COPY_SHORT);
    b[len] = 0x80;
    uint64_t bits = (uint64_t)len * 8;
    for (int k = 0; k < 8; k++)
        b[63 - k] = (unsigned char)(bits >> (8 * k));
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Transform(&ctx, b);
    return ((uint64_t)ctx.h[0] << 32) | ctx.h[1];
}

static inline uint64_t fast_pair_hash(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    return s->hash == FERRY_HASH_XXH3 ? xxh3_pair(s, x, i) : sha256_pair(s, x, i);
}

uint64_t pl_pair_hash(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    return fast_pair_hash(s, x, i);
}

void pl_set_slice(pl_scratch *x, const ferry_pl_slice *sl)
{
    size_t t = strlen(sl->tenant);
    memcpy(x->key, sl->tenant, t);
    memcpy(x->key + t, "/split", 6);
    t += 6;
    char digits[12];
    int nd = 0;
    uint32_t k = sl->split;
    do {
        digits[nd++] = (char)('0' + k % 10);
        k /= 10;
    } while (k);
    while (nd)
        x->key[t++] = digits[--nd];
    x->key[t++] = ':';
    x->prefix_len = t;
    if (x->hash == FERRY_HASH_XXH3)
        xxh3_prepare(x);
    else
        sha256_prepare(x);
}

static inline uint64_t pair_hash(const pl_scorer *s, pl_scratch *x, uint32_t i)
{
    memcpy(x->key + x->prefix_len, s->names[i], s->name_len[i]);
    return ferry_hash64(s->hash, x->key, x->prefix_len + s->name_len[i]);
}

double pl_pair_score(const pl_scorer *s, pl_scratch *x, uint32_t i, double weight)
{
    return ferry_score_from_hash(fast_pair_hash(s, x, i), weight);
}

static int cand_cmp(const void *a, const void *b)
{
    const pl_cand *x = a, *y = b;
    if (pl_ranks_before(x->score, x->shard, y->score, y->shard))
        return -1;
    if (pl_ranks_before(y->score, y->shard, x->score, x->shard))
        return 1;
    return 0;
}

void pl_rank_all(const pl_scorer *s, pl_scratch *x, pl_cand *out)
{
    for (uint32_t i = 0; i < s->n; i++) {
        out[i].shard = i;
        out[i].score = score_from_u(hash_u(pair_hash(s, x, i)), s->weight[i]);
    }
    qsort(out, s->n, sizeof *out, cand_cmp);
}

/* Inserts (score, shard) into list[0..*len) kept in rank order with at most cap entries.
 * Shards arrive in increasing index order, so an equal score goes after its equals. */
static inline void top_insert(pl_cand *list, size_t *len, size_t cap, double score,
                              uint32_t shard)
{
    size_t l = *len;
    if (l == cap && !(score > list[l - 1].score))
        return;
    size_t pos = l < cap ? l : cap - 1;
    while (pos > 0 && score > list[pos - 1].score) {
        list[pos] = list[pos - 1];
        pos--;
    }
    list[pos].score = score;
    list[pos].shard = shard;
    if (l < cap)
        *len = l + 1;
}

void pl_top(const pl_scorer *s, pl_scratch *x, pl_cand *out)
{
    size_t m = x->m, n = s->n, keep = m + 1;
    if (m >= n || s->n_groups * keep >= n) {
        /* Few shards per weight: score them all, keep the best m. The logarithm is skipped
         * when the shard cannot make the list: -ln(u) >= 1 - u, so its score is at most
         * w / (1 - u); if even that (with a margin far above the rounding error of the
         * computed score) does not beat the m-th best, top_insert would reject it anyway. */
        size_t len = 0;
        for (uint32_t i = 0; i < n; i++) {
            double hu = hash_u(fast_pair_hash(s, x, i));
            if (len == m) {
                double one_minus_u = 1.0 - hu / 18446744073709551616.0;
                if (s->weight[i] * (1 + 1e-9) < out[m - 1].score * one_minus_u)
                    continue;
            }
            top_insert(out, &len, m, score_from_u(hu, s->weight[i]), i);
        }
        return;
    }
    /* Per weight group, the m + 1 shards with the largest hash (u, hence the score, never
     * decreases with the hash), ties by index. One fused loop that inserted every hash into a
     * sorted list mispredicted a branch for about one shard in four, which also kept the CPU
     * from overlapping the hashes. So, per group:
     *  1. hash every shard and, without branches, collect those whose hash reaches the
     *     group's cut, set so that about 3 (m + 1) of the group's shards do;
     *  2. insertion-sort the few collected. If fewer than m + 1 reached the cut (rare), sort
     *     the whole group instead: the result is the same either way. */
    for (size_t g = 0; g < s->n_groups; g++) {
        size_t first = s->group_start[g], size = s->group_size[g], nc = 0;
        const uint32_t *members = s->members + first;
        uint64_t cut = x->group_cut[g], *hs = x->hashes + first, *ch = x->surv_hash + first;
        uint32_t *ci = x->surv + first;
        if (s->hash == FERRY_HASH_XXH3)
            for (size_t k = 0; k < size; k++) {
                uint64_t h = hs[k] = xxh3_pair(s, x, members[k]);
                ch[nc] = h;
                ci[nc] = members[k];
                nc += h >= cut;
            }
        else
            for (size_t k = 0; k < size; k++) {
                uint64_t h = hs[k] = sha256_pair(s, x, members[k]);
                ch[nc] = h;
                ci[nc] = members[k];
                nc += h >= cut;
            }
        if (nc < keep) { /* too few reached the cut */
            ch = hs;
            ci = (uint32_t *)members;
            nc = size;
        }
        uint64_t *gh = x->gh + g * keep;
        pl_cand *list = x->gtop + g * keep;
        size_t l = 0;
        for (size_t c = 0; c < nc; c++) {
            uint64_t h = ch[c];
            if (l == keep && h <= gh[keep - 1])
                continue;
            size_t pos = l < keep ? l : keep - 1;
            while (pos > 0 && h > gh[pos - 1]) {
                gh[pos] = gh[pos - 1];
                list[pos] = list[pos - 1];
                pos--;
            }
            gh[pos] = h;
            list[pos].shard = ci[c];
            if (l < keep)
                l++;
        }
        x->glen[g] = l;
    }
    for (size_t g = 0; g < s->n_groups; g++)
        for (size_t j = 0; j < x->glen[g]; j++)
            x->gtop[g * keep + j].score = hash_u(x->gh[g * keep + j]);
    size_t nm = 0;
    for (size_t g = 0; g < s->n_groups; g++) {
        pl_cand *list = x->gtop + g * keep;
        size_t len = x->glen[g];
        for (size_t j = 0; j < len; j++)
            list[j].score = score_from_u(list[j].score, s->weight[list[j].shard]);
        /* The score is monotone in u but not strictly: if the first shard left out could tie
         * the last one kept, the cut is not safe; rank this slice the slow way. */
        if (len == keep && list[keep - 1].score == list[keep - 2].score) {
            pl_rank_all(s, x, x->merge);
            memcpy(out, x->merge, m * sizeof *out);
            return;
        }
        /* Equal u keeps index order; equal scores from different u need index order too. */
        size_t take = len < m ? len : m;
        for (size_t a = 1; a < take; a++) /* a few, nearly sorted: insertion sort */
            for (size_t b = a; b > 0 && pl_ranks_before(list[b].score, list[b].shard,
                                                        list[b - 1].score, list[b - 1].shard);
                 b--) {
                pl_cand c = list[b];
                list[b] = list[b - 1];
                list[b - 1] = c;
            }
        memcpy(x->merge + nm, list, take * sizeof *list);
        nm += take;
    }
    size_t len = 0;
    for (size_t j = 0; j < nm; j++) {
        /* merge entries are not in index order across groups: insert by full rank order */
        pl_cand c = x->merge[j];
        if (len == m && !pl_ranks_before(c.score, c.shard, out[m - 1].score, out[m - 1].shard))
            continue;
        size_t pos = len < m ? len : m - 1;
        while (pos > 0 && pl_ranks_before(c.score, c.shard, out[pos - 1].score, out[pos - 1].shard)) {
            out[pos] = out[pos - 1];
            pos--;
        }
        out[pos] = c;
        if (len < m)
            len++;
    }
}

/* ---- all slices, in parallel ---------------------------------------------------------------- */

unsigned pl_threads_for(unsigned threads, size_t n_slices)
{
    if (threads < 1)
        threads = 1;
    if (threads > PL_THREADS_MAX)
        threads = PL_THREADS_MAX;
    /* below a thousand slices a thread each, starting threads costs more than it saves */
    if (n_slices < 1024 * (size_t)threads)
        threads = 1;
    return threads;
}

unsigned pl_run_threads(unsigned threads, void *(*fn)(void *), void *jobs, size_t job_size)
{
    assert(threads >= 1 && threads <= PL_THREADS_MAX);
    pthread_t tids[PL_THREADS_MAX];
    unsigned started = 1; /* job 0 runs on the calling thread */
    /* If a thread cannot be created, the others (at least this one) take its chunks. */
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, fn, (char *)jobs + started * job_size) != 0)
            break;
    fn(jobs);
    for (unsigned t = 1; t < started; t++)
        pthread_join(tids[t], NULL);
    return started;
}

typedef struct top_shared {
    const pl_scorer *s;
    const ferry_pl_inventory *inv;
    size_t m;
    uint32_t *out;
    atomic_size_t next; /* first slice not yet taken */
} top_shared;

typedef struct top_job {
    top_shared *sh;
    int rc;
    ferry_err err;
} top_job;

static void *top_worker(void *arg)
{
    top_job *j = arg;
    top_shared *sh = j->sh;
    size_t n = sh->inv->n;
    pl_scratch x;
    j->rc = pl_scratch_init(&x, sh->s, sh->m, &j->err);
    if (j->rc)
        return NULL;
    pl_cand top[PL_TOP_MAX];
    for (size_t begin, end; pl_chunk_take(&sh->next, n, &begin, &end);) {
        for (size_t i = begin; i < end; i++) {
            pl_set_slice(&x, &sh->inv->slices[i]);
            pl_top(sh->s, &x, top);
            for (size_t k = 0; k < x.m; k++)
                sh->out[i * x.m + k] = top[k].shard;
        }
    }
    pl_scratch_free(&x);
    return NULL;
}

int pl_top_all(const pl_scorer *s, const ferry_pl_inventory *inv, size_t m, unsigned threads,
               uint32_t *out, ferry_err *err)
{
    top_shared sh = {s, inv, m, out, 0};
    top_job jobs[PL_THREADS_MAX];
    threads = pl_threads_for(threads, inv->n);
    for (unsigned t = 0; t < threads; t++)
        jobs[t] = (top_job){&sh, 0, {0, ""}};
    unsigned ran = pl_run_threads(threads, top_worker, jobs, sizeof *jobs);
    for (unsigned t = 0; t < ran; t++)
        if (jobs[t].rc) {
            *err = jobs[t].err;
            return jobs[t].rc;
        }
    return FERRY_OK;
}
