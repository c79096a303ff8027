/* `ferry part verify`: checks MergeTree part folders against their checksums.txt, the way a
 * receiving agent checks a part that was sent to it. */
#include "cli.h"
#include "ferry/part_verify.h"
#include "ferry/strutil.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

const char cmd_part_usage[] =
    "usage: ferry part verify [--json] [--verbose] PART_DIR...\n"
    "\n"
    "Checks each MergeTree part folder against its checksums.txt: every listed file must be\n"
    "present with the listed size and ClickHouse file hash (CityHash v1.0.2 over 2048-byte\n"
    "blocks), projections are checked against their own checksums.txt, and a file that\n"
    "checksums.txt does not list is reported unless ClickHouse writes it unlisted (columns.txt,\n"
    "metadata_version.txt, ...). Reads checksums.txt format versions 2, 3 and 4.\n"
    "\n"
    "  --json      one JSON object: {\"ok\": BOOL, \"parts\": [{\"path\", \"ok\", \"files\",\n"
    "              \"bytes_hashed\", \"problems\": [{\"name\", \"status\", ...}], \"error\"}]}\n"
    "  --verbose   list every file, not only the damaged ones\n"
    "\n"
    "Exit status: 0 every part intact, 1 a part is damaged (or its checksums.txt is), 2 bad\n"
    "usage or a PART_DIR that is not a part folder.\n";

static json_t *file_json(const ferry_part_file_result *f)
{
    char eh[33], ah[33];
    ferry_checksum_hex(f->expected_hash, eh);
    ferry_checksum_hex(f->actual_hash, ah);
    json_t *o = json_pack("{s:s, s:s}", "name", f->name, "status",
                          ferry_part_file_status_name(f->status));
    if (f->status != FERRY_PART_FILE_UNEXPECTED) {
        json_object_set_new(o, "expected_size", json_integer((json_int_t)f->expected_size));
        json_object_set_new(o, "expected_hash", json_string(eh));
    }
    if (f->status != FERRY_PART_FILE_MISSING) {
        json_object_set_new(o, "actual_size", json_integer((json_int_t)f->actual_size));
        if (f->status == FERRY_PART_FILE_OK || f->status == FERRY_PART_FILE_HASH_MISMATCH)
            json_object_set_new(o, "actual_hash", json_string(ah));
    }
    if (f->message)
        json_object_set_new(o, "message", json_string(f->message));
    return o;
}

static void print_file(const ferry_part_file_result *f)
{
    char eh[33], ah[33];
    ferry_checksum_hex(f->expected_hash, eh);
    ferry_checksum_hex(f->actual_hash, ah);
    printf("  %-14s %s", ferry_part_file_status_name(f->status), f->name);
    switch (f->status) {
    case FERRY_PART_FILE_SIZE_MISMATCH:
        printf(": %llu bytes, checksums.txt says %llu", (unsigned long long)f->actual_size,
               (unsigned long long)f->expected_size);
        break;
    case FERRY_PART_FILE_HASH_MISMATCH:
        printf(": hash %s, checksums.txt says %s", ah, eh);
        break;
    case FERRY_PART_FILE_MISSING:
        printf(": listed in checksums.txt (%llu bytes), not in the folder",
               (unsigned long long)f->expected_size);
        break;
    case FERRY_PART_FILE_UNEXPECTED:
        printf(": not listed in checksums.txt");
        break;
    case FERRY_PART_FILE_UNREADABLE:
        printf(": %s", f->message ? f->message : "cannot be read");
        break;
    default:
        printf(" (%llu bytes, %s)", (unsigned long long)f->actual_size, ah);
        break;
    }
    printf("\n");
}

static int verify(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"verbose", no_argument, NULL, 'v'},
                                         {NULL, 0, NULL, 0}};
    bool json = false, verbose = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
        if (c == 'j')
            json = true;
        else if (c == 'v')
            verbose = true;
        else
            return cli_usage_error("part verify", "unknown option");
    }
    if (optind >= argc)
        return cli_usage_error("part verify", "give at least one part folder");
    /* Bad input is refused before anything is printed. */
    for (int i = optind; i < argc; i++) {
        struct stat st;
        char sums[4096];
        snprintf(sums, sizeof sums, "%s/checksums.txt", argv[i]);
        if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "ferry part verify: %s is not a folder; give a part's folder (the "
                    "one holding checksums.txt)\n", argv[i]);
            return 2;
        }
        if (stat(sums, &st) != 0) {
            fprintf(stderr, "ferry part verify: %s has no checksums.txt: not a MergeTree part "
                    "folder\n", argv[i]);
            return 2;
        }
    }
    bool all_ok = true;
    json_t *parts = json_array();
    for (int i = optind; i < argc; i++) {
        ferry_part_verify_report rep;
        ferry_err err = {0};
        int rc = ferry_part_verify_dir(argv[i], &rep, &err);
        bool ok = rc == FERRY_OK && rep.n_bad == 0;
        all_ok = all_ok && ok;
        if (json) {
            json_t *problems = json_array();
            for (size_t k = 0; k < rep.n_files; k++)
                if (verbose || rep.files[k].status != FERRY_PART_FILE_OK)
                    json_array_append_new(problems, file_json(&rep.files[k]));
            json_t *p = json_pack("{s:s, s:b, s:I, s:I, s:o}", "path", argv[i], "ok", ok,
                                  "files", (json_int_t)rep.n_files, "bytes_hashed",
                                  (json_int_t)rep.bytes_hashed, verbose ? "files_detail" :
                                  "problems", problems);
            if (rc)
                json_object_set_new(p, "error", json_string(err.msg));
            json_array_append_new(parts, p);
        } else if (rc) {
            printf("%s: DAMAGED: %s\n", argv[i], err.msg);
        } else {
            char hashed[32];
            ferry_fmt_bytes(rep.bytes_hashed, hashed, sizeof hashed);
            if (ok)
                printf("%s: ok (%zu files, %s hashed)\n", argv[i], rep.n_files, hashed);
            else
                printf("%s: DAMAGED (%zu of %zu files)\n", argv[i], rep.n_bad, rep.n_files);
            for (size_t k = 0; k < rep.n_files; k++)
                if (verbose || rep.files[k].status != FERRY_PART_FILE_OK)
                    print_file(&rep.files[k]);
        }
        ferry_part_verify_report_free(&rep);
    }
    if (json) {
        json_t *o = json_pack("{s:b, s:o}", "ok", all_ok, "parts", parts);
        char *s = json_dumps(o, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(o);
    } else {
        json_decref(parts);
    }
    return all_ok ? 0 : 1;
}

int cmd_part(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("part", "missing subcommand (verify)");
    if (!strcmp(argv[1], "verify"))
        return verify(argc - 1, argv + 1);
    return cli_usage_error("part", "unknown subcommand '%s' (expected verify)", argv[1]);
}
