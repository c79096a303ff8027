/* Shared by the commands that move slices (move, rebalance, shard): loading the config and the
 * catalog, the progress display (a bar on a terminal, JSON lines with --json), running moves in
 * parallel, and printing plans. */
#ifndef FERRY_CLI_MOVE_H
#define FERRY_CLI_MOVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "ferry/config.h"
#include "ferry/move.h"

typedef struct cli_move_env {
    const char *cmd;
    ferry_config cfg;
    char catalog_url[FERRY_URL_MAX];
    char owner[FERRY_NAME_MAX];
    bool json;
    bool bar; /* stderr is a terminal and not --json */
    bool force; /* --force: the pause (ferry pause) does not hold */
    unsigned batch; /* --batch N: moves between two shards run in batches of N (plan_run.h) */
    pthread_mutex_t lock;
    double last_bar;
    ferry_move_opts opts;
} cli_move_env;

/* Loads the config (--config or $FERRY_CONFIG) and fills opts. FERRY_EINVAL without one. */
int cli_move_env_init(cli_move_env *e, const char *cmd, const char *config, bool json,
                      ferry_err *err);
void cli_move_env_free(cli_move_env *e);

/* The JSON object of a finished (or stopped) move. New reference. */
json_t *cli_move_result_json(const ferry_move_result *r);
/* Prints one finished move: a JSON line with --json, else a line of text. */
void cli_move_print_result(cli_move_env *e, const ferry_move_result *r, int rc,
                           const ferry_err *err);

/* Plan as JSON (new reference) and as text. */
json_t *cli_plan_json(const ferry_rebalance_plan *p);
void cli_plan_print(const ferry_rebalance_plan *p);

/* Runs plan's steps with ferry_plan_run (unless e->force, no step starts once the cluster is
 * paused: those are counted in *failed and the message says so) (at most max_parallel at a time, max_per_shard per
 * shard, 0: no per-shard limit; max_bytes_per_second for the whole run and
 * max_bytes_per_second_per_shard for each shard's sends and receives, 0: none), printing each
 * as it ends; *failed counts steps that did not finish. Returns the first error's code (its
 * message in err). */
int cli_run_plan(cli_move_env *e, const ferry_rebalance_plan *p, unsigned max_parallel,
                 unsigned max_per_shard, uint64_t max_bytes_per_second,
                 uint64_t max_bytes_per_second_per_shard, size_t *done, size_t *failed,
                 json_t *results, ferry_err *err);

#endif
