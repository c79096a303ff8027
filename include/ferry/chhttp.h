/* Pure pieces of ClickHouse's HTTP interface, for servers that speak it (the lab node): which
 * URL parameters are settings, how an error message maps to an HTTP status, where a query's
 * FORMAT clause is, and how to quote setting values. No I/O. */
#ifndef FERRY_CHHTTP_H
#define FERRY_CHHTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/buf.h"

enum ferry_ch_param_kind {
    FERRY_CH_PARAM_PROTOCOL, /* query, database, default_format, user, password, query_id, ... */
    FERRY_CH_PARAM_QUERY,    /* param_<name>: a value for a {name:Type} placeholder */
    FERRY_CH_PARAM_SETTING,  /* anything else is a ClickHouse setting for this request */
};
enum ferry_ch_param_kind ferry_ch_param_kind(const char *name);

/* A setting or parameter name ClickHouse could accept: [A-Za-z_][A-Za-z0-9_.]*, at most 256. */
bool ferry_ch_name_ok(const char *name);

/* Appends `'value'` with ClickHouse string-literal escaping (backslash, quote, control bytes). */
int ferry_ch_quote_string(ferry_buf *out, const char *value);

/* Parses ClickHouse's error text "Code: 62. DB::Exception: ... (SYNTAX_ERROR) ...": returns the
 * code (0 when the text has none) and copies the symbolic name (the last parenthesised
 * upper-case word) into name ("" when absent). */
int ferry_ch_error_parse(const char *msg, char *name, size_t namesz);

/* The HTTP status ClickHouse's own server sends for an error (its exceptionCodeToHTTPStatus):
 * 401 REQUIRED_PASSWORD; 403 authentication and access errors; 400 parse and bad-argument
 * errors; 404 unknown table/function/database/setting/format...; 413, 501, 503, 411, 408, 415
 * for their codes; 500 otherwise. Decided by name, so no code table is needed. */
unsigned ferry_ch_error_http_status(const char *name);

/* The identifier after the last top-level FORMAT keyword (outside strings, quoted names and
 * comments), copied into fmt; false when the query has none. */
bool ferry_ch_find_format(const char *sql, size_t len, char *fmt, size_t fmtsz,
                          size_t *format_kw_pos);

/* For an INSERT whose text ends with "FORMAT <name>" (optionally followed by white space or
 * ';'), copies the statement before FORMAT into *insert (caller frees) and the name into fmt.
 * False for anything else (then send the whole text to ClickHouse as one query). */
bool ferry_ch_split_insert(const char *sql, size_t len, char **insert, char *fmt, size_t fmtsz);

/* True when sql starts (after white space and comments) with the keyword kw (case-insensitive). */
bool ferry_ch_starts_with_keyword(const char *sql, size_t len, const char *kw);

/* The INSERT that reads its rows from a file, for an insert split by ferry_ch_split_insert:
 * "<insert> FROM INFILE '<path>' [SETTINGS ...] FORMAT <fmt>". ClickHouse's grammar puts FROM
 * INFILE before a SETTINGS clause, so one at the top level of insert is moved after it.
 * Appends to out; 0 or -1 (out of memory). */
int ferry_ch_insert_from_infile(ferry_buf *out, const char *insert, const char *path,
                                const char *fmt);

#endif
