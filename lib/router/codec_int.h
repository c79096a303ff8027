/* Private to the router's row codecs (codec.c: formats, the codec, TSV / CSV, RowBinary and the
 * dispatch; codec_json.c: JSONEachRow). Pure. */
#ifndef FERRY_ROUTER_CODEC_INT_H
#define FERRY_ROUTER_CODEC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/router.h"

/* A RowBinary type, parsed from its ClickHouse name. */
enum bt_kind { BT_FIXED, BT_STRING, BT_FIXEDSTRING, BT_NULLABLE, BT_ARRAY, BT_MAP, BT_TUPLE };

typedef struct btype {
    enum bt_kind kind;
    size_t width;      /* BT_FIXED: bytes; BT_FIXEDSTRING: N */
    int int_sign;      /* BT_FIXED integers: 1 signed, 2 unsigned, 0 other */
    size_t n_children;
    struct btype *children;
} btype;

/* One field of a text row: where it is in the data, and whether it was quoted (CSV). */
typedef struct span {
    size_t off, len;
    bool quoted;
} span;

struct ferry_rt_codec {
    enum ferry_rt_format format;
    char *tenant_col, *split_col, *key_col;
    size_t max_row;
    /* The columns of the data (statement list, header, or table), and where ours are in it. */
    size_t n_cols;
    char **cols;
    btype *types; /* RowBinary: one per column */
    long tenant_idx, key_idx, split_idx;
    bool split_appended; /* the split column is not in the data: emit adds it */
    btype split_type;    /* RowBinary: the split column's type */
    bool have_split_type;
    bool header_pending;
    bool list_given;     /* the forwarded INSERT needs a column list */
    uint64_t rows;
    ferry_buf tenant_buf, key_buf;
    struct span *fields; /* text formats: the fields of the current row */
    size_t retry_len;    /* an incomplete row is looked at again once this many bytes are in */
};

/* codec_json.c: the next JSONEachRow row of the window (see ferry_rt_codec_next). */
int codec_json_next(ferry_rt_codec *c, const char *d, size_t len, bool eof, size_t *used,
                    ferry_rt_row *row, ferry_err *err);

#endif
