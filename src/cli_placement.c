/* Shared pieces of the placement commands: common options, loading inventory files (file
 * reading here, parsing in the library), and per-shard JSON summaries. */
#include "cli_placement.h"
#include "cli.h"
#include "ferry/lines.h"
#include "ferry/strutil.h"

#include <stdlib.h>
#include <unistd.h>

void cli_place_common_init(cli_place_common *c)
{
    ferry_pl_opts d = FERRY_PL_OPTS_DEFAULT;
    c->opts = d;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->opts.threads = cpus > 0 ? (unsigned)(cpus > 64 ? 64 : cpus) : 1;
    c->json = false;
}

/* One of the shared options: 0, or 2 after a usage error; -1 when opt is not one of them. */
static int place_option(const char *cmd, cli_place_common *c, int opt, const char *arg)
{
    uint64_t u;
    double d;
    switch (opt) {
    case OPT_HASH:
        if (!ferry_hash_parse(arg, &c->opts.hash))
            return cli_usage_error(cmd, "--hash: unknown hash '%s' (use sha256 or xxh3)", arg);
        return 0;
    case OPT_RF:
        if (!ferry_parse_u64(arg, &u) || u < 1 || u > 64)
            return cli_usage_error(cmd, "--rf: '%s' is not a replication factor (1 to 64)", arg);
        c->opts.rf = (unsigned)u;
        return 0;
    case OPT_FILL:
        if (!ferry_parse_double(arg, &d) || !(d > 0 && d <= 1))
            return cli_usage_error(cmd, "--fill: '%s' must be a number in (0, 1], e.g. 0.85",
                                   arg);
        c->opts.fill = d;
        return 0;
    case OPT_THREADS:
        if (!ferry_parse_u64(arg, &u) || u < 1 || u > 256)
            return cli_usage_error(cmd, "--threads: '%s' is not a thread count (1 to 256)", arg);
        c->opts.threads = (unsigned)u;
        return 0;
    case OPT_JSON:
        c->json = true;
        return 0;
    default:
        return -1;
    }
}

int cli_place_next_option(const char *cmd, int argc, char **argv, const struct option *opts,
                          cli_place_common *c, int *status)
{
    opterr = 0;
    *status = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "", opts, NULL);
        if (opt == -1) {
            if (optind < argc)
                *status = cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
            return 0;
        }
        if (opt == '?' || opt == ':') {
            *status = cli_usage_error(cmd, "unknown option or missing value: %s",
                                      argv[optind - 1]);
            return 0;
        }
        int rc = place_option(cmd, c, opt, optarg);
        if (rc < 0)
            return opt;
        if (rc) {
            *status = rc;
            return 0;
        }
    }
}

static int read_input(const char *path, char **text, ferry_err *err)
{
    int rc = ferry_read_file(path, text, NULL, err);
    if (rc == FERRY_ENOTFOUND || rc == FERRY_EIO)
        err->code = rc = FERRY_EINVAL; /* a path the user gave: bad input */
    return rc;
}

int cli_load_cluster(const char *path, ferry_pl_cluster *out, ferry_err *err)
{
    char *text = NULL;
    int rc = read_input(path, &text, err);
    if (!rc)
        rc = ferry_pl_cluster_parse(text, path, out, err);
    free(text);
    return rc;
}

int cli_load_inventory(const char *path, ferry_pl_inventory *out, ferry_err *err)
{
    char *text = NULL;
    int rc = read_input(path, &text, err);
    if (!rc)
        rc = ferry_pl_inventory_parse(text, path, out, err);
    free(text);
    return rc;
}

json_t *cli_layout_shards_json(const ferry_pl_layout *l)
{
    json_t *arr = json_array();
    for (size_t s = 0; s < l->cluster->n; s++) {
        const ferry_pl_shard *sh = &l->cluster->shards[s];
        json_t *o =
            json_pack("{s:s, s:f, s:I, s:I}", "name", sh->name, "weight", sh->weight, "replicas",
                      (json_int_t)l->shard_replicas[s], "bytes", (json_int_t)l->shard_bytes[s]);
        if (sh->capacity) {
            json_object_set_new(o, "capacity", json_integer((json_int_t)sh->capacity));
            json_object_set_new(o, "fill", json_real((double)l->shard_bytes[s] /
                                                     (double)sh->capacity));
        } else {
            json_object_set_new(o, "capacity", json_null());
        }
        if (sh->zone)
            json_object_set_new(o, "zone", json_string(sh->zone));
        json_array_append_new(arr, o);
    }
    return arr;
}
