/* Shared pieces of the placement commands (place, plan): the options they have in common,
 * reading the inventory files, and printing layouts. */
#ifndef FERRY_CLI_PLACEMENT_H
#define FERRY_CLI_PLACEMENT_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

#include "ferry/placement.h"

/* Options shared by place and plan, taken by cli_place_next_option. */
typedef struct cli_place_common {
    ferry_pl_opts opts;
    bool json;
} cli_place_common;

enum { OPT_HASH = 1000, OPT_RF, OPT_FILL, OPT_JSON, OPT_THREADS, OPT_SLICES, OPT_SHARDS,
       OPT_FROM, OPT_TO, OPT_SCORES };

#define CLI_PLACE_LONGOPTS                                                                      \
    {"hash", required_argument, NULL, OPT_HASH}, {"rf", required_argument, NULL, OPT_RF},       \
        {"fill", required_argument, NULL, OPT_FILL}, {"json", no_argument, NULL, OPT_JSON},     \
        {"threads", required_argument, NULL, OPT_THREADS},                                      \
        {"slices", required_argument, NULL, OPT_SLICES}

void cli_place_common_init(cli_place_common *c);
/* getopt_long over argv (set optind = 1 before the first call): takes the shared options into
 * c and returns the command's next own option (OPT_SLICES included; optarg set), 0 at the end.
 * At the end *status is 0, or 2 with a usage error printed for a bad value, an unknown option or
 * an argument left over. */
int cli_place_next_option(const char *cmd, int argc, char **argv, const struct option *opts,
                          cli_place_common *c, int *status);

/* Reads and parses a file; a missing file is bad input (FERRY_EINVAL). */
int cli_load_cluster(const char *path, ferry_pl_cluster *out, ferry_err *err);
int cli_load_inventory(const char *path, ferry_pl_inventory *out, ferry_err *err);

/* Per-shard summary of a layout as a JSON array (new reference). */
json_t *cli_layout_shards_json(const ferry_pl_layout *l);

#endif
