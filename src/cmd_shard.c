/* `ferry shard add|drain|remove`: change the cluster's shards in the catalog, then print the
 * rebalancing plan that follows (run it with `ferry rebalance`). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_move.h"
#include "ferry/cluster_status.h"
#include "ferry/strutil.h"

const char cmd_shard_usage[] =
    "usage: ferry shard add NAME [--weight W] [--json] [--config FILE]\n"
    "       ferry shard drain NAME [--json] [--config FILE]\n"
    "       ferry shard remove NAME [--json] [--config FILE]\n"
    "\n"
    "add     adds [shard \"NAME\"] of the config to the catalog as new (active once its first\n"
    "        rebalance is over; until then no split raise or new tenant places a slice on\n"
    "        it), or makes a draining shard active\n"
    "        again, or records its changed replicas, agent or credential files;\n"
    "        --weight overrides its weight: for a shard in service the next rebalance moves\n"
    "        slices onto it (a higher weight) or off it (a lower one), as placement by the\n"
    "        new weights puts them. Running routers and coordinators follow the catalog's\n"
    "        shards without a restart\n"
    "drain   marks the shard draining: the next rebalance moves every slice off it\n"
    "remove  marks a drained shard gone (refused while it still serves slices)\n"
    "\n"
    "Each prints the plan that follows from the change (as `ferry rebalance --dry-run`).\n";

int cmd_shard(int argc, char **argv)
{
    static const struct option opts[] = {{"weight", required_argument, NULL, 'w'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"config", required_argument, NULL, 'c'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL;
    double weight = 0;
    bool json = false;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 'c': config = optarg; break;
        case 'w':
            if (!ferry_parse_double(optarg, &weight) || weight <= 0)
                return cli_usage_error("shard", "--weight '%s' is not a positive number", optarg);
            break;
        default:
            return cli_usage_error("shard", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("shard", "needs an action (add, drain, remove) and a shard name");
    const char *action = argv[optind], *name = argv[optind + 1];
    if (strcmp(action, "add") && strcmp(action, "drain") && strcmp(action, "remove"))
        return cli_usage_error("shard", "unknown action '%s' (add, drain or remove)", action);
    if (weight > 0 && strcmp(action, "add"))
        return cli_usage_error("shard", "--weight goes with add");
    /* checked here, before the name is copied into a record (where a longer one would be cut) */
    if (!ferry_name_ok(name))
        return cli_usage_error("shard", "shard '%s' is not a valid name (" FERRY_NAME_RULE ")",
                               name);

    ferry_err err = {0};
    cli_move_env e;
    ferry_catalog *cat = NULL;
    ferry_cluster_config cc = {0};
    ferry_rebalance_plan plan = {0};
    ferry_record rec;
    ferry_record_init(&rec, FERRY_REC_SHARD);
    snprintf(rec.u.shard.name, sizeof rec.u.shard.name, "%s", name);
    int rc = cli_move_env_init(&e, "shard", config, json, &err);
    if (!rc)
        rc = ferry_catalog_open(e.catalog_url, &cat, &err);
    if (rc)
        goto out;
    int grc = ferry_catalog_get(cat, &rec, &err);
    if (grc && grc != FERRY_ENOTFOUND) {
        rc = grc;
        goto out;
    }
    bool exists = grc == FERRY_OK;
    if (!strcmp(action, "add")) {
        if ((rc = ferry_cluster_config_read(&e.cfg, &cc, &err)))
            goto out;
        const ferry_shard *def = NULL;
        for (size_t i = 0; i < cc.n_shards; i++)
            if (!strcmp(cc.shards[i].name, name))
                def = &cc.shards[i];
        if (!exists && !def) {
            rc = ferry_err_set(&err, FERRY_EINVAL,
                               "unknown shard '%s': the config has no [shard \"%s\"] section; add "
                               "one (replicas, agent, agent_token_file) first", name, name);
            goto out;
        }
        if (!exists) {
            rec.u.shard = *def;
            /* joining: active once its first rebalance is over (ferry_shards_settle) */
            rec.u.shard.state = FERRY_SHARD_NEW;
            if (weight > 0)
                rec.u.shard.weight = weight;
            rc = ferry_catalog_create(cat, &rec, &err);
        } else {
            /* the config's connection details (replicas, agent, credential files) replace the
             * recorded ones: running routers and coordinators reconnect */
            bool conn = def && ferry_shard_conn_differs(&rec.u.shard, def);
            if (ferry_shard_placeable(rec.u.shard.state) && weight <= 0 && !conn) {
                rc = ferry_err_set(&err, FERRY_EINVAL, "shard %s is already active (and its "
                                   "[shard \"%s\"] connection details are the recorded ones)",
                                   name, name);
                goto out;
            }
            if (conn) {
                ferry_shard *sh = &rec.u.shard;
                snprintf(sh->replicas, sizeof sh->replicas, "%s", def->replicas);
                snprintf(sh->agent, sizeof sh->agent, "%s", def->agent);
                snprintf(sh->user, sizeof sh->user, "%s", def->user);
                snprintf(sh->password_file, sizeof sh->password_file, "%s", def->password_file);
                snprintf(sh->agent_token_file, sizeof sh->agent_token_file, "%s",
                         def->agent_token_file);
                snprintf(sh->data_path, sizeof sh->data_path, "%s", def->data_path);
            }
            if (!ferry_shard_placeable(rec.u.shard.state))
                rec.u.shard.state = FERRY_SHARD_ACTIVE; /* a draining shard back in service */
            if (weight > 0)
                ferry_shard_reweight(&rec.u.shard, weight);
            rc = ferry_catalog_update(cat, &rec, &err);
        }
    } else {
        if (!exists) {
            rc = ferry_err_set(&err, FERRY_EINVAL, "unknown shard '%s' (ferry status lists the "
                               "shards)", name);
            goto out;
        }
        if (!strcmp(action, "drain")) {
            if (rec.u.shard.state == FERRY_SHARD_GONE) {
                rc = ferry_err_set(&err, FERRY_EINVAL, "shard %s is gone already", name);
                goto out;
            }
            rec.u.shard.state = FERRY_SHARD_DRAINING;
        } else {
            size_t serving;
            if ((rc = ferry_shard_routes_count(cat, name, &serving, &err)))
                goto out;
            if (serving) {
                rc = ferry_err_set(&err, FERRY_EINVAL,
                                   "shard %s still serves %zu slice(s); drain it (ferry shard "
                                   "drain %s) and run ferry rebalance first", name, serving, name);
                goto out;
            }
            rec.u.shard.state = FERRY_SHARD_GONE;
        }
        rc = ferry_catalog_update(cat, &rec, &err);
    }
    if (rc)
        goto out;
    if (strcmp(action, "remove"))
        rc = ferry_inventory_sync(cat, &e.opts, NULL, &err);
    if (!rc)
        rc = ferry_rebalance_plan_compute(cat, &plan, &err);
    if (rc)
        goto out;
    if (json) {
        json_t *pj = cli_plan_json(&plan);
        json_object_set_new(pj, "shard", json_string(name));
        json_object_set_new(pj, "state", json_string(ferry_shard_state_name(rec.u.shard.state)));
        json_dumpf(pj, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(pj);
    } else {
        printf("shard %s is %s\n", name, ferry_shard_state_name(rec.u.shard.state));
        cli_plan_print(&plan);
    }
out:
    ferry_rebalance_plan_free(&plan);
    ferry_cluster_config_free(&cc);
    ferry_catalog_close(cat);
    cli_move_env_free(&e);
    return rc ? cli_fail("shard", &err) : 0;
}
