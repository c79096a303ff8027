/* `ferry status`: the cluster at a glance from the catalog (ferry_cluster_status_read; --json
 * prints ferry_cluster_status_json): shards with their fill (bytes of the slices routed to them
 * against capacity; on a terminal a bar against the fill target), tenants, slices, the routing
 * version, the moves in flight and the tier backlog. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/autopilot.h"
#include "ferry/cluster_status.h"
#include "ferry/config.h"
#include "ferry/strutil.h"

const char cmd_status_usage[] =
    "usage: ferry status [--json] [--config FILE | --catalog URL]\n"
    "\n"
    "Shows the cluster recorded in the catalog: each shard's state, the bytes of the slices\n"
    "routed to it, its capacity and fill (bytes / capacity, against the cluster's fill target),\n"
    "the number of tenants and slices, the routing version, and every move that is not DONE or\n"
    "FAILED with its state, step and owner; whether the cluster is paused (ferry pause), and\n"
    "the autopilot's last run of each action (result, the reason that started it, what it\n"
    "did, when it runs next) with the config's maintenance window and when it opens next.\n"
    "\n"
    "  --config FILE     the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL     a catalog URL instead of the config's\n"
    "  --json            JSON output\n";

/* A bar of 30 cells for fill f against target t: '#' filled, '|' at the target, '!' past it. */
static void fill_bar(double f, double t, char *out, size_t size)
{
    const int W = 30;
    int n = (int)(f * W + 0.5), mark = (int)(t * W + 0.5);
    size_t k = 0;
    for (int i = 0; i < W && k + 1 < size; i++)
        out[k++] = i == mark ? '|' : i < n ? (i >= mark ? '!' : '#') : '.';
    out[k] = '\0';
}

static void fmt_time(int64_t t, char *out, size_t sz)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!t || !gmtime_r(&tt, &tm))
        snprintf(out, sz, "-");
    else
        strftime(out, sz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The config's [autopilot] window, when a config is at hand: *w unset otherwise. */
static void config_window(const char *config, const char *catalog, ferry_ap_window *w)
{
    memset(w, 0, sizeof *w);
    const char *path = catalog ? NULL : cli_config_path(config);
    ferry_config cfg = {0};
    ferry_autopilot_config ac;
    ferry_err err = {0};
    if (path && !ferry_config_load(path, &cfg, &err) &&
        !ferry_autopilot_config_read(&cfg, &ac, &err))
        *w = ac.window;
    ferry_config_free(&cfg);
}

static void autopilot_print(const ferry_cluster_status *cs, const ferry_ap_window *w)
{
    char t1[32], t2[32];
    if (cs->pause.paused) {
        fmt_time(cs->pause.since, t1, sizeof t1);
        printf("\nPAUSED since %s by %s%s%s (ferry resume)\n", t1, cs->pause.by,
               cs->pause.reason[0] ? ": " : "", cs->pause.reason);
    } else {
        printf("\nnot paused\n");
    }
    if (w->set) {
        time_t now = time(NULL);
        bool open = ferry_ap_window_open(w, now);
        char win[32];
        fmt_time((int64_t)ferry_ap_window_next(w, now), t1, sizeof t1);
        ferry_ap_window_fmt(w, win, sizeof win);
        printf("maintenance window %s UTC: %s%s\n", win, open ? "open now" : "opens ",
               open ? "" : t1);
    }
    if (cs->n_repair_needed) {
        printf("\n%zu slice(s) written while a replica missed the write, awaiting repair (ferry "
               "repair, or the autopilot's repair):\n", cs->n_repair_needed);
        for (size_t i = 0; i < cs->n_repair_needed && i < 20; i++) {
            const ferry_repair_need *n = &cs->repair_needed[i];
            char mtext[FERRY_SHARDS_TEXT_MAX], htext[FERRY_SHARDS_TEXT_MAX];
            fmt_time(n->first, t1, sizeof t1);
            printf("  %s/%u missed by %s, held by %s, %llu write(s) since %s\n", n->tenant,
                   n->split, ferry_shard_set_str(&n->missed, mtext),
                   ferry_shard_set_count(&n->held) ? ferry_shard_set_str(&n->held, htext)
                                                   : "(no single replica)",
                   (unsigned long long)n->writes, t1);
        }
        if (cs->n_repair_needed > 20)
            printf("  ... and %zu more\n", cs->n_repair_needed - 20);
    }
    if (!cs->n_autopilot)
        return;
    printf("\n%-10s %-14s %-20s %-20s %s\n", "AUTOPILOT", "RESULT", "LAST RUN", "NEXT",
           "REASON / SUMMARY");
    for (size_t i = 0; i < cs->n_autopilot; i++) {
        const ferry_ap_run *r = &cs->autopilot[i];
        fmt_time(r->started, t1, sizeof t1);
        fmt_time(r->next, t2, sizeof t2);
        printf("%-10s %-14s %-20s %-20s %s\n%63s%s\n", r->action, r->result, t1, t2, r->reason,
               "", r->summary);
    }
}

int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {CLI_OPT_CONFIG, CLI_OPT_CATALOG, CLI_OPT_JSON,
                                         {NULL, 0, NULL, 0}};
    cli_common c = {0};
    int status;
    optind = 1;
    cli_next_option("status", argc, argv, opts, &c, &status); /* none of its own */
    if (status)
        return status;
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    ferry_cluster_status cs;
    memset(&cs, 0, sizeof cs);
    json_t *root = NULL;
    int rc = cli_open_catalog(c.config, c.catalog, true, &cat, &err);
    if (!rc)
        rc = ferry_cluster_status_read(cat, 0, &cs, &err);
    if (rc)
        goto out;
    ferry_ap_window win;
    config_window(c.config, c.catalog, &win);
    const ferry_settings *st = &cs.settings;
    const ferry_record_list *moves = &cs.moves;
    if (c.json) {
        root = ferry_cluster_status_json(&cs, &win);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        putchar('\n');
        goto out;
    }
    printf("cluster %s (%s catalog): hash %s, rf %u, fill target %.2f, ClickHouse %s, pointer "
           "format %u\n",
           st->name, cs.backend, st->hash, st->rf, st->fill, st->clickhouse_version,
           st->pointer_format);
    printf("%zu tenant(s), %zu slice(s), routing version %llu, %zu move(s) in flight, %zu "
           "partition(s) waiting to be tiered\n\n",
           cs.tenants, cs.slices, (unsigned long long)cs.routing_version, moves->n,
           cs.tier_backlog);
    bool tty = isatty(STDOUT_FILENO);
    printf("%-16s %-9s %7s %12s %12s %7s  %s\n", "SHARD", "STATE", "WEIGHT", "BYTES", "CAPACITY",
           "FILL", tty ? "FILL / TARGET" : "");
    for (size_t s = 0; s < cs.n_shards; s++) {
        const ferry_shard_status *ss = &cs.shards[s];
        char b1[32], b2[32], fill[16], bar[64] = "";
        if (ss->fill >= 0)
            snprintf(fill, sizeof fill, "%.1f%%", 100.0 * ss->fill);
        else
            snprintf(fill, sizeof fill, "-");
        if (tty && ss->fill >= 0)
            fill_bar(ss->fill, st->fill, bar, sizeof bar);
        printf("%-16s %-9s %7.2f %12s %12s %7s  %s\n", ss->shard.name,
               ferry_shard_state_name(ss->shard.state), ss->shard.weight,
               ferry_fmt_bytes(ss->bytes, b1, sizeof b1),
               ss->shard.capacity ? ferry_fmt_bytes(ss->shard.capacity, b2, sizeof b2) : "-",
               fill, bar);
        if (ss->shard.placed_weight > 0)
            printf("%-16s re-weighted from %.2f: the next rebalance moves slices %s it\n", "",
                   ss->shard.placed_weight,
                   ss->shard.weight > ss->shard.placed_weight ? "onto" : "off");
    }
    for (size_t s = 0; s < cs.n_unknown; s++) {
        char b1[32];
        printf("%-16s %-9s %7s %12s %12s %7s  %zu slice(s) routed to a shard without a shard "
               "record (ferry shard add it, or route them elsewhere)\n",
               cs.unknown[s].shard.name, "no-record", "-",
               ferry_fmt_bytes(cs.unknown[s].bytes, b1, sizeof b1), "-", "-",
               cs.unknown[s].slices);
    }
    if (moves->n) {
        printf("\n%-20s %-16s %5s %-10s %-10s %-8s %7s %s\n", "MOVE", "TENANT", "SPLIT", "FROM",
               "TO", "STATE", "STEP", "OWNER");
        for (size_t i = 0; i < moves->n; i++) {
            const ferry_move *m = &moves->items[i].u.move;
            char step[24], ftext[FERRY_SHARDS_TEXT_MAX], ttext[FERRY_SHARDS_TEXT_MAX];
            snprintf(step, sizeof step, "%u/%u", m->step, m->steps);
            printf("%-20s %-16s %5u %-10s %-10s %-8s %7s %s\n", m->id, m->tenant, m->split,
                   ferry_shard_set_str(&m->from, ftext), ferry_shard_set_str(&m->to, ttext),
                   ferry_move_state_name(m->state), step, m->owner);
        }
    }
    autopilot_print(&cs, &win);
out:
    json_decref(root);
    ferry_cluster_status_free(&cs);
    ferry_catalog_close(cat);
    return rc ? cli_fail("status", &err) : 0;
}
