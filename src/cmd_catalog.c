/* `ferry catalog export|import`: the whole catalog as one JSON dump, to back it up or to move
 * a cluster between the SQLite and ZooKeeper backends. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/lines.h"

const char cmd_catalog_usage[] =
    "usage: ferry catalog export [--json] [--config FILE | --catalog URL]\n"
    "       ferry catalog import FILE [--config FILE | --catalog URL]\n"
    "\n"
    "export prints every record of the catalog as one JSON document (sorted, so two catalogs\n"
    "with the same contents give the same bytes, whatever their backend); --json is accepted\n"
    "for symmetry, the dump is always JSON. Record versions are not exported; the routing\n"
    "version is. import loads such a dump (FILE, or - for stdin) into an empty catalog in one\n"
    "atomic batch; it refuses a catalog that already holds records.\n"
    "\n"
    "To move a cluster from SQLite to ZooKeeper:\n"
    "  ferry catalog export --catalog sqlite:/var/lib/ferry/catalog.db > dump.json\n"
    "  ferry catalog import --catalog zk://zk1:2181,zk2:2181/ferry dump.json\n"
    "then point [cluster] catalog at the new URL.\n"
    "\n"
    "  --config FILE     the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL     a catalog URL instead of the config's\n";

static char *read_all(const char *path, ferry_err *err)
{
    if (strcmp(path, "-") != 0) {
        char *data = NULL;
        size_t len = 0;
        if (ferry_read_file(path, &data, &len, err))
            return NULL;
        return data;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, stdin);
        len += n;
        if (n == 0)
            break;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (!buf) {
        ferry_err_set(err, FERRY_ENOMEM, "out of memory reading stdin");
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

int cmd_catalog(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"catalog", required_argument, NULL, 'C'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    if (argc < 2)
        return cli_usage_error("catalog", "needs a subcommand: export or import");
    const char *sub = argv[1];
    bool is_export = !strcmp(sub, "export"), is_import = !strcmp(sub, "import");
    if (!is_export && !is_import)
        return cli_usage_error("catalog", "unknown subcommand '%s' (export or import)", sub);
    const char *config = NULL, *catalog = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc - 1, argv + 1, "", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'C')
            catalog = optarg;
        else if (ch != 'j')
            return cli_usage_error("catalog", "unknown option");
    }
    int rest = argc - 1 - optind;
    if (is_export && rest != 0)
        return cli_usage_error("catalog", "export takes no arguments");
    if (is_import && rest != 1)
        return cli_usage_error("catalog", "import needs one FILE (or -)");
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    char *text = NULL;
    int rc = FERRY_OK;
    if (is_import) {
        text = read_all(argv[1 + optind], &err);
        if (!text) {
            rc = err.code ? err.code : FERRY_EIO;
            goto out;
        }
    }
    rc = cli_open_catalog(config, catalog, is_export, &cat, &err);
    if (rc)
        goto out;
    if (is_export) {
        rc = ferry_catalog_export(cat, &text, &err);
        if (!rc)
            puts(text);
    } else {
        rc = ferry_catalog_import(cat, text, &err);
        if (!rc)
            printf("imported %s into the %s catalog\n", argv[1 + optind],
                    ferry_catalog_backend(cat));
    }
out:
    free(text);
    ferry_catalog_close(cat);
    return rc ? cli_fail(is_export ? "catalog export" : "catalog import", &err) : 0;
}
