/* `ferry user add|set-tenants|set-password|set-limits|remove|list`: the users of `ferry router`
 * in the catalog (include/ferry/users.h, docs/security.md). Passwords come from a file or as
 * their SHA-256, are stored salted, and are never printed. */
#include <getopt.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/lines.h"
#include "ferry/strutil.h"
#include "ferry/users.h"

const char cmd_user_usage[] =
    "usage: ferry user add NAME (--password-file F | --password-sha256 HEX)\n"
    "                          (--tenants T1,T2... | --admin) [LIMITS] [--json]\n"
    "       ferry user set-tenants NAME (--tenants T1,T2... | --admin) [--json]\n"
    "       ferry user set-password NAME (--password-file F | --password-sha256 HEX)\n"
    "       ferry user set-limits NAME LIMITS... [--json]\n"
    "       ferry user remove NAME\n"
    "       ferry user list [--json]\n"
    "       (every form takes --config FILE or --catalog URL)\n"
    "\n"
    "The users `ferry router` accepts (docs/security.md). A user bound to tenants reads and\n"
    "inserts only its tenants' rows of the managed tables; an admin runs any statement. Every\n"
    "change is one catalog write that raises the routing version: running routers apply it\n"
    "within one routing-version wait, without a restart.\n"
    "\n"
    "  --password-file F         the password is the first line of F (mode 0600 recommended);\n"
    "                            stored as SHA-256(salt || SHA-256(password)), never printed\n"
    "  --password-sha256 HEX     the password's SHA-256 instead (ClickHouse's password_sha256_hex)\n"
    "  --tenants T1,T2...        the tenants the user is bound to (each registered)\n"
    "  --admin                   every tenant and every statement (DDL, SYSTEM, other tables)\n"
    "LIMITS (chproxy's; \"\" or 0 clears one):\n"
    "  --tables DB.T,...         tables ferry does not manage that a bound user may read as each\n"
    "                            server has them (dimension tables without tenant rows)\n"
    "  --networks CIDR,...       client networks the user may connect from (default: any)\n"
    "  --max-concurrent N        requests at once\n"
    "  --max-rps N               requests started per second\n"
    "  --max-execution-time D    reads still running after D (30s, 500ms) are cancelled on\n"
    "                            every shard (KILL QUERY)\n"
    "  --queue-wait D            over --max-concurrent, wait up to D for a slot (default: refuse)\n"
    "\n"
    "Exit status: 0 success, 2 bad input (an unknown tenant, a malformed network), 1 otherwise.\n";

static void print_user(const ferry_user *u, bool json)
{
    if (json) {
        json_t *o = ferry_user_json(u);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(o);
        return;
    }
    printf("%-20s %-24s %-20s %-20s conc=%u rps=%u exec_ms=%u queue_ms=%u\n", u->name,
           u->admin ? "(admin)" : u->tenants, u->tables[0] ? u->tables : "-",
           u->networks[0] ? u->networks : "any", u->max_concurrent, u->max_rps,
           u->max_execution_ms, u->queue_wait_ms);
}

static int list(ferry_catalog *cat, bool json, ferry_err *err)
{
    ferry_record_list l = {0};
    int rc = ferry_catalog_list(cat, FERRY_REC_USER, NULL, 0, &l, err);
    if (rc)
        return rc;
    if (json) {
        json_t *a = json_array();
        for (size_t i = 0; i < l.n; i++)
            json_array_append_new(a, ferry_user_json(&l.items[i].u.user));
        json_t *o = json_pack("{s:o}", "users", a);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(o);
    } else {
        printf("%-20s %-24s %-20s %-20s %s\n", "USER", "TENANTS", "TABLES", "NETWORKS", "LIMITS");
        for (size_t i = 0; i < l.n; i++)
            print_user(&l.items[i].u.user, false);
    }
    ferry_record_list_free(&l);
    return FERRY_OK;
}

/* The password from --password-file (its first line) or --password-sha256. *text is the
 * caller's to wipe and free. */
static int password_of(const char *file, const char *sha, ferry_password *pw, char **text,
                       ferry_err *err)
{
    memset(pw, 0, sizeof *pw);
    *text = NULL;
    if (sha) {
        pw->sha256_hex = sha;
        return FERRY_OK;
    }
    int rc = ferry_read_secret_line(file, text, err);
    if (rc)
        return ferry_err_prefix(err, "--password-file: ");
    pw->text = *text;
    pw->len = strlen(*text);
    return FERRY_OK;
}

int cmd_user(int argc, char **argv)
{
    enum { O_PWFILE = CLI_O_LAST, O_PWSHA, O_TENANTS, O_ADMIN, O_TABLES, O_NETS, O_CONC, O_RPS,
           O_EXEC, O_QUEUE };
    static const struct option opts[] = {CLI_OPT_CONFIG, CLI_OPT_CATALOG, CLI_OPT_JSON,
                                         {"password-file", required_argument, NULL, O_PWFILE},
                                         {"password-sha256", required_argument, NULL, O_PWSHA},
                                         {"tenants", required_argument, NULL, O_TENANTS},
                                         {"admin", no_argument, NULL, O_ADMIN},
                                         {"tables", required_argument, NULL, O_TABLES},
                                         {"networks", required_argument, NULL, O_NETS},
                                         {"max-concurrent", required_argument, NULL, O_CONC},
                                         {"max-rps", required_argument, NULL, O_RPS},
                                         {"max-execution-time", required_argument, NULL, O_EXEC},
                                         {"queue-wait", required_argument, NULL, O_QUEUE},
                                         {NULL, 0, NULL, 0}};
    const char *pwfile = NULL, *pwsha = NULL, *tenants = NULL;
    bool admin = false;
    cli_common c = {.positional = true};
    ferry_user_limits lim = {0};
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("user", argc, argv, opts, &c, &status))) {
        switch (ch) {
        case O_PWFILE: pwfile = optarg; break;
        case O_PWSHA: pwsha = optarg; break;
        case O_TENANTS: tenants = optarg; break;
        case O_ADMIN: admin = true; break;
        case O_TABLES:
            lim.set_tables = true;
            lim.tables = optarg;
            break;
        case O_NETS:
            lim.set_networks = true;
            lim.networks = optarg;
            break;
        case O_CONC:
            if (!ferry_parse_u32(optarg, &lim.max_concurrent))
                return cli_usage_error("user", "--max-concurrent '%s' is not a count", optarg);
            lim.set_max_concurrent = true;
            break;
        case O_RPS:
            if (!ferry_parse_u32(optarg, &lim.max_rps))
                return cli_usage_error("user", "--max-rps '%s' is not a rate", optarg);
            lim.set_max_rps = true;
            break;
        case O_EXEC:
            if (!ferry_parse_duration_ms32(optarg, &lim.max_execution_ms))
                return cli_usage_error("user", "--max-execution-time '%s' is not a duration "
                                       "(30s, 2m, 500ms)", optarg);
            lim.set_max_execution_ms = true;
            break;
        case O_QUEUE:
            if (!ferry_parse_duration_ms32(optarg, &lim.queue_wait_ms))
                return cli_usage_error("user", "--queue-wait '%s' is not a duration (2s, "
                                       "500ms)", optarg);
            lim.set_queue_wait_ms = true;
            break;
        }
    }
    if (status)
        return status;
    if (optind >= argc)
        return cli_usage_error("user", "needs add, set-tenants, set-password, set-limits, "
                               "remove or list");
    const char *sub = argv[optind++];
    bool is_list = !strcmp(sub, "list");
    if (!is_list && optind >= argc)
        return cli_usage_error("user", "%s needs a user NAME", sub);
    const char *name = is_list ? NULL : argv[optind++];
    if (optind < argc)
        return cli_usage_error("user", "unexpected argument '%s'", argv[optind]);
    if (pwfile && pwsha)
        return cli_usage_error("user", "give --password-file or --password-sha256, not both");
    if (tenants && admin)
        return cli_usage_error("user", "give --tenants or --admin, not both");
    /* what each subcommand needs and takes: the password, the tenants, the limits */
    enum { PW = 1, TEN = 2, LIM = 4 };
    static const char *const needs_what[] = {"--password-file F or --password-sha256 HEX",
                                             "--tenants T1,T2... or --admin",
                                             "at least one limit option"};
    static const struct { const char *name; unsigned needs, takes; const char *only; } subs[] = {
        {"add", PW | TEN, PW | TEN | LIM, NULL},
        {"set-tenants", TEN, TEN, "takes only --tenants or --admin"},
        {"set-password", PW, PW, "takes only the password"},
        {"set-limits", LIM, LIM, "takes only limit options"},
        {"remove", 0, 0, "takes no options but --json"},
        {"list", 0, 0, "takes no options but --json"}};
    size_t k = 0;
    while (k < sizeof subs / sizeof subs[0] && strcmp(sub, subs[k].name))
        k++;
    if (k == sizeof subs / sizeof subs[0])
        return cli_usage_error("user", "unknown subcommand '%s' (add, set-tenants, "
                               "set-password, set-limits, remove, list)", sub);
    bool pw_given = pwfile || pwsha;
    unsigned given = (pw_given ? PW : 0) | (tenants || admin ? TEN : 0) |
                     (lim.set_tables || lim.set_networks || lim.set_max_concurrent ||
                              lim.set_max_rps || lim.set_max_execution_ms || lim.set_queue_wait_ms
                          ? LIM
                          : 0);
    for (unsigned bit = 0; bit < 3; bit++)
        if (subs[k].needs & ~given & (1u << bit))
            return cli_usage_error("user", "%s needs %s", sub, needs_what[bit]);
    if (given & ~subs[k].takes)
        return cli_usage_error("user", "%s %s", sub, subs[k].only);
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    ferry_password pw;
    char *pwtext = NULL;
    ferry_user u;
    int rc = cli_open_catalog(c.config, c.catalog, true, &cat, &err);
    if (!rc && pw_given)
        rc = password_of(pwfile, pwsha, &pw, &pwtext, &err);
    switch (rc ? -1 : (int)k) { /* the order of subs[] */
    case 0: rc = ferry_user_add(cat, name, &pw, admin, tenants, &lim, &u, &err); break;
    case 1: rc = ferry_user_set_tenants(cat, name, admin, tenants, &u, &err); break;
    case 2: rc = ferry_user_set_password(cat, name, &pw, &err); break;
    case 3: rc = ferry_user_set_limits(cat, name, &lim, &u, &err); break;
    case 4: rc = ferry_user_remove(cat, name, &err); break;
    case 5: rc = list(cat, c.json, &err); break;
    }
    if (!rc && (k == 0 || k == 1 || k == 3))
        print_user(&u, c.json);
    else if (!rc && k == 2)
        printf("user %s: password changed\n", name);
    else if (!rc && k == 4)
        printf("user %s removed\n", name);
    if (pwtext) {
        OPENSSL_cleanse(pwtext, strlen(pwtext));
        free(pwtext);
    }
    ferry_catalog_close(cat);
    return rc ? cli_fail("user", &err) : 0;
}
