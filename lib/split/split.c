/* The split function and the split-count policy (pure; see include/ferry/split.h). */
#include "ferry/split.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ferry/config.h"
#include "ferry/strutil.h"

/* Whether text is [+-]?[0-9]+; sets digits and nd to the digits without leading zeros. */
static bool integer_text(const char *t, size_t len, bool *neg, const char **digits, size_t *nd)
{
    size_t i = 0;
    *neg = false;
    if (i < len && (t[i] == '+' || t[i] == '-')) {
        *neg = t[i] == '-';
        i++;
    }
    if (i == len)
        return false;
    for (size_t j = i; j < len; j++)
        if (t[j] < '0' || t[j] > '9')
            return false;
    while (i + 1 < len && t[i] == '0')
        i++;
    *digits = t + i;
    *nd = len - i;
    if (*nd == 1 && **digits == '0')
        *neg = false;
    return true;
}

int ferry_split_canon(const char *text, size_t len, ferry_buf *out)
{
    bool neg;
    const char *d;
    size_t nd;
    if (integer_text(text, len, &neg, &d, &nd)) {
        if (neg && ferry_buf_putc(out, '-'))
            return FERRY_ENOMEM;
        return ferry_buf_append(out, d, nd);
    }
    return ferry_buf_append(out, text, len);
}

uint32_t ferry_split_of_canon(const char *canon, size_t len, uint32_t splits)
{
    if (splits <= 1)
        return 0;
    return (uint32_t)(XXH3_64bits(canon, len) % splits);
}

uint32_t ferry_split_of(const char *text, size_t len, uint32_t splits)
{
    if (splits <= 1)
        return 0;
    bool neg;
    const char *d;
    size_t nd;
    if (!integer_text(text, len, &neg, &d, &nd))
        return ferry_split_of_canon(text, len, splits);
    if (!neg)
        return ferry_split_of_canon(d, nd, splits);
    char small[256];
    if (nd + 1 <= sizeof small) {
        small[0] = '-';
        memcpy(small + 1, d, nd);
        return ferry_split_of_canon(small, nd + 1, splits);
    }
    ferry_buf b = {0};
    uint32_t s = 0;
    if (!ferry_split_canon(text, len, &b))
        s = ferry_split_of_canon(b.data, b.len, splits);
    ferry_buf_free(&b);
    return s;
}

void ferry_split_policy_default(ferry_split_policy *p)
{
    p->target_slice_bytes = 10ULL << 30;
    p->target_slice_rows_per_s = 50000;
    p->hysteresis = 0.25;
    p->max_splits = 64;
}

static uint32_t ceil_div_u64(uint64_t a, uint64_t b)
{
    uint64_t q = b ? a / b + (a % b != 0) : 0;
    return q > FERRY_SPLITS_MAX ? FERRY_SPLITS_MAX : (uint32_t)q;
}

void ferry_split_decide(const ferry_split_policy *p, const ferry_split_load *load,
                        ferry_split_decision *out)
{
    uint32_t cur = load->splits ? load->splits : 1;
    uint32_t want_bytes = ceil_div_u64(load->bytes, p->target_slice_bytes);
    uint32_t want_rate = 0;
    if (p->target_slice_rows_per_s > 0 && load->rows_per_s > 0) {
        double w = ceil(load->rows_per_s / p->target_slice_rows_per_s);
        want_rate = w > FERRY_SPLITS_MAX ? FERRY_SPLITS_MAX : (uint32_t)w;
    }
    uint32_t want = want_bytes > want_rate ? want_bytes : want_rate;
    if (want < 1)
        want = 1;
    if (want > p->max_splits)
        want = p->max_splits;
    double per_bytes = (double)load->bytes / cur;
    double per_rate = load->rows_per_s / cur;
    bool over_bytes = p->target_slice_bytes &&
                      per_bytes > (double)p->target_slice_bytes * (1 + p->hysteresis);
    bool over_rate = p->target_slice_rows_per_s > 0 &&
                     per_rate > p->target_slice_rows_per_s * (1 + p->hysteresis);
    memset(out, 0, sizeof *out);
    out->splits = cur;
    char a[32], b[32];
    if (want > cur && (over_bytes || over_rate)) {
        out->splits = want;
        out->raise = true;
        if (over_bytes)
            snprintf(out->reason, sizeof out->reason,
                     "%s per slice over %u split(s) > target %s + %.0f%%; %u split(s) wanted",
                     ferry_fmt_bytes((uint64_t)per_bytes, a, sizeof a), cur,
                     ferry_fmt_bytes(p->target_slice_bytes, b, sizeof b), p->hysteresis * 100,
                     want);
        else
            snprintf(out->reason, sizeof out->reason,
                     "%.0f rows/s per slice over %u split(s) > target %.0f + %.0f%%; %u split(s) "
                     "wanted",
                     per_rate, cur, p->target_slice_rows_per_s, p->hysteresis * 100, want);
    } else if (want > cur) {
        snprintf(out->reason, sizeof out->reason,
                 "%u split(s) wanted but within the hysteresis (%s and %.0f rows/s per slice)",
                 want, ferry_fmt_bytes((uint64_t)per_bytes, a, sizeof a), per_rate);
    } else if (cur >= p->max_splits && (over_bytes || over_rate)) {
        snprintf(out->reason, sizeof out->reason, "over target but at max_splits %u",
                 p->max_splits);
    } else {
        snprintf(out->reason, sizeof out->reason, "within targets (%s and %.0f rows/s per slice)",
                 ferry_fmt_bytes((uint64_t)per_bytes, a, sizeof a), per_rate);
    }
}

int ferry_split_policy_read(const ferry_config *cfg, ferry_split_policy *p, ferry_err *err)
{
    static const char *const keys[] = {"target_slice_bytes", "target_slice_rows_per_s",
                                       "hysteresis", "max_splits", NULL};
    ferry_split_policy_default(p);
    uint64_t n = 0;
    int rc = ferry_config_check_keys(cfg, "splits", keys, err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "splits", NULL, "target_slice_bytes", p->target_slice_bytes,
                                &p->target_slice_bytes, err);
    if (!rc && p->target_slice_bytes == 0)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [splits] target_slice_bytes must be > 0",
                           cfg->path);
    if (!rc)
        rc = ferry_config_double(cfg, "splits", NULL, "target_slice_rows_per_s",
                                 p->target_slice_rows_per_s, &p->target_slice_rows_per_s, err);
    if (!rc && p->target_slice_rows_per_s < 0)
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [splits] target_slice_rows_per_s must be >= 0 (0 ignores the rate)",
                           cfg->path);
    if (!rc)
        rc = ferry_config_double(cfg, "splits", NULL, "hysteresis", p->hysteresis, &p->hysteresis,
                                 err);
    if (!rc && (p->hysteresis < 0 || p->hysteresis > 10))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [splits] hysteresis must be in [0, 10]",
                           cfg->path);
    if (!rc)
        rc = ferry_config_u64(cfg, "splits", NULL, "max_splits", p->max_splits, &n, err);
    if (!rc && (n < 1 || n > FERRY_SPLITS_MAX))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [splits] max_splits must be 1..%d", cfg->path,
                           FERRY_SPLITS_MAX);
    if (!rc)
        p->max_splits = (uint32_t)n;
    return rc;
}
