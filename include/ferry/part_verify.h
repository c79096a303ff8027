/* Checking a MergeTree part folder against its checksums.txt: every listed file present with
 * the listed size and ClickHouse file hash, and no file that ClickHouse would not expect. This
 * does file I/O (reads the whole part); the format itself is in ferry/checksums.h. */
#ifndef FERRY_PART_VERIFY_H
#define FERRY_PART_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/checksums.h"
#include "ferry/err.h"

enum ferry_part_file_status {
    FERRY_PART_FILE_OK = 0,
    FERRY_PART_FILE_MISSING,       /* listed, not in the folder */
    FERRY_PART_FILE_SIZE_MISMATCH, /* listed size differs (hash not computed then) */
    FERRY_PART_FILE_HASH_MISMATCH, /* size right, content differs */
    FERRY_PART_FILE_UNEXPECTED,    /* in the folder, not listed, not one of the known extras */
    FERRY_PART_FILE_UNREADABLE     /* could not be read (detail in message) */
};

typedef struct ferry_part_file_result {
    char *name;                /* owned; relative to the part folder ("p.proj/a.bin" inside a
                                  projection) */
    int status;                /* enum ferry_part_file_status */
    uint64_t expected_size;    /* from checksums.txt (0 for UNEXPECTED) */
    uint64_t actual_size;      /* on disk (0 for MISSING) */
    uint64_t expected_hash[2];
    uint64_t actual_hash[2];   /* computed only when the sizes agree */
    char *message;             /* owned; NULL unless UNREADABLE */
} ferry_part_file_result;

typedef struct ferry_part_verify_report {
    size_t n_files;                 /* one per listed file, then one per unexpected file */
    ferry_part_file_result *files;  /* owned */
    size_t n_bad;                   /* files whose status is not OK */
    uint64_t bytes_hashed;
} ferry_part_verify_report;

/* Verifies the part folder dir against dir/checksums.txt. A projection (a listed name that is
 * a folder, "NAME.proj") is verified recursively against its own checksums.txt.
 * Returns FERRY_OK when the check ran, whatever it found: look at report->n_bad. Errors:
 * FERRY_ENOTFOUND (dir or its checksums.txt missing), FERRY_EINVAL / FERRY_EUNSUPPORTED
 * (checksums.txt unreadable as such, message names the file), FERRY_EIO. Free the report with
 * ferry_part_verify_report_free in every case. */
int ferry_part_verify_dir(const char *dir, ferry_part_verify_report *report, ferry_err *err);

void ferry_part_verify_report_free(ferry_part_verify_report *report);

/* ClickHouse's file hash and the size of one file, read in chunks. */
int ferry_part_hash_file(const char *path, uint64_t hash[2], uint64_t *size, ferry_err *err);

/* "ok", "missing", "size mismatch", "hash mismatch", "unexpected", "unreadable". */
const char *ferry_part_file_status_name(int status);

#endif
