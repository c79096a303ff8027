/* `ferry query`: runs one SQL statement against one ClickHouse server through ferry's client and
 * streams the result to stdout (raw in the requested format, or JSON lines with --json). Meant
 * for operators checking a server the way ferry sees it, and for tests. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ferry/clickhouse.h"
#include "ferry/lines.h"
#include "ferry/strutil.h"

const char cmd_query_usage[] =
    "usage: ferry query --url URL [--user USER --password-file FILE] [--database DB]\n"
    "                   [--format FORMAT | --json] [--setting NAME=VALUE]... [--query-id ID]\n"
    "                   [--input FILE|-] [--timeout DURATION] [--connect-timeout DURATION]\n"
    "                   [--retries N] [--stats] SQL\n"
    "\n"
    "Runs SQL on one ClickHouse server over its HTTP interface and writes the result to stdout.\n"
    "\n"
    "  --url URL              the server, http://host:port (no credentials in it)\n"
    "  --user USER            user name (default: the server's default user)\n"
    "  --password-file FILE   read the password from the first line of FILE ('-': stdin)\n"
    "  --database DB          default database for the statement\n"
    "  --format FORMAT        output format, e.g. TabSeparated, JSONEachRow, Native (raw bytes)\n"
    "  --json                 one JSON object per row, values as strings, NULL as null\n"
    "  --setting NAME=VALUE   a query setting, sent as a URL parameter (repeatable)\n"
    "  --query-id ID          the query id (default: a random UUID)\n"
    "  --input FILE|-         send FILE (or stdin) as the INSERT data; SQL is then e.g.\n"
    "                         \"INSERT INTO t FORMAT TabSeparated\"\n"
    "  --timeout DURATION     longest wait for the next byte of the response (default 300s)\n"
    "  --connect-timeout DURATION  (default 5s)\n"
    "  --retries N            extra attempts when a retry is safe (default 2)\n"
    "  --stats                print query id, attempts, new connections and bytes to stderr\n"
    "\n"
    "A server error exits 1 with the ClickHouse code and message, also when it comes after part\n"
    "of the result has been written. Bad options exit 2.\n";

static int write_all(const void *data, size_t len, void *arg)
{
    (void)arg;
    const char *p = data;
    while (len) {
        ssize_t n = write(STDOUT_FILENO, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return FERRY_EIO;
        }
        p += n;
        len -= (size_t)n;
    }
    return FERRY_OK;
}

static int read_password(const char *path, char **out, ferry_err *err)
{
    int rc = ferry_read_secret_line(path, out, err);
    if (rc)
        return ferry_err_set(err, FERRY_EINVAL, "cannot read the password file %s: %s", path,
                             err->msg);
    if (!**out) {
        free(*out);
        *out = NULL;
        return ferry_err_set(err, FERRY_EINVAL, "password file %s is empty", path);
    }
    return FERRY_OK;
}

int cmd_query(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},      {"user", required_argument, NULL, 'U'},
        {"password-file", required_argument, NULL, 'P'},
        {"database", required_argument, NULL, 'd'}, {"format", required_argument, NULL, 'f'},
        {"json", no_argument, NULL, 'j'},           {"setting", required_argument, NULL, 's'},
        {"query-id", required_argument, NULL, 'q'}, {"input", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"retries", required_argument, NULL, 'r'},  {"stats", no_argument, NULL, 'S'},
        {NULL, 0, NULL, 0}};
    const char *url = NULL, *user = NULL, *pwfile = NULL, *database = NULL, *format = NULL;
    const char *query_id = NULL, *input = NULL;
    bool json = false, stats = false;
    uint64_t timeout_s = 0, connect_s = 0, retries = 2;
    ferry_ch_setting *settings = NULL;
    size_t n_settings = 0;
    char *password = NULL;
    ferry_ch_client *client = NULL;
    ferry_err err = {0};
    ferry_tsv_json jr;
    ferry_tsv_json_init(&jr, write_all, NULL, &err);
    int in_fd = -1;
    int status = 0;

    settings = calloc((size_t)argc, sizeof *settings);
    if (!settings)
        return 1;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'u': url = optarg; break;
        case 'U': user = optarg; break;
        case 'P': pwfile = optarg; break;
        case 'd': database = optarg; break;
        case 'f': format = optarg; break;
        case 'j': json = true; break;
        case 'q': query_id = optarg; break;
        case 'i': input = optarg; break;
        case 'S': stats = true; break;
        case 's': {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                status = cli_usage_error("query", "--setting wants NAME=VALUE, got '%s'", optarg);
                goto out;
            }
            *eq = '\0';
            settings[n_settings++] = (ferry_ch_setting){optarg, eq + 1};
            break;
        }
        case 't':
        case 'c':
            if (!ferry_parse_duration(optarg, ch == 't' ? &timeout_s : &connect_s) ||
                (ch == 't' ? timeout_s : connect_s) == 0) {
                status = cli_usage_error("query", "--%s wants a duration such as 30s or 5m, got "
                                         "'%s'", ch == 't' ? "timeout" : "connect-timeout",
                                         optarg);
                goto out;
            }
            break;
        case 'r':
            if (!ferry_parse_u64(optarg, &retries) || retries > 100) {
                status = cli_usage_error("query", "--retries wants a number 0..100, got '%s'",
                                         optarg);
                goto out;
            }
            break;
        default: status = cli_usage_error("query", "unknown option"); goto out;
        }
    }
    if (!url) {
        status = cli_usage_error("query", "--url is required");
        goto out;
    }
    if (optind != argc - 1) {
        status = cli_usage_error("query", "give exactly one SQL statement (got %d arguments)",
                                 argc - optind);
        goto out;
    }
    if (json && format) {
        status = cli_usage_error("query", "--json and --format exclude each other");
        goto out;
    }
    if (pwfile && input && !strcmp(pwfile, "-") && !strcmp(input, "-")) {
        status = cli_usage_error("query", "--password-file and --input cannot both be stdin");
        goto out;
    }
    if (pwfile && read_password(pwfile, &password, &err)) {
        status = cli_fail("query", &err);
        goto out;
    }
    if (input) {
        in_fd = strcmp(input, "-") ? open(input, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
        if (in_fd < 0) {
            ferry_err_set(&err, FERRY_EINVAL, "cannot open --input %s: %s", input,
                          strerror(errno));
            status = cli_fail("query", &err);
            goto out;
        }
    }
    ferry_ch_options o = {.url = url,
                          .user = user,
                          .password = password,
                          .database = database,
                          .connect_timeout_ms = (long)connect_s * 1000,
                          .read_timeout_ms = (long)timeout_s * 1000,
                          .max_attempts = (int)retries + 1};
    if (ferry_ch_client_new(&o, &client, &err)) {
        status = cli_fail("query", &err);
        goto out;
    }
    ferry_ch_query q = {.sql = argv[optind],
                        .query_id = query_id,
                        .format = json ? "TabSeparatedWithNames" : format,
                        .settings = settings,
                        .n_settings = n_settings,
                        .on_data = json ? ferry_tsv_json_feed : write_all,
                        .on_data_arg = json ? (void *)&jr : NULL};
    if (input) {
        q.body_reader = ferry_ch_read_fd;
        q.body_reader_arg = &in_fd;
        if (strcmp(input, "-")) /* a file (not stdin) can be sent again on a safe retry */
            q.body_rewind = ferry_ch_rewind_fd;
    }
    ferry_ch_status st;
    int rc = ferry_ch_exec(client, &q, &st, &err);
    if (!rc && json)
        rc = ferry_tsv_json_finish(&jr);
    if (stats) {
        ferry_ch_stats cs;
        ferry_ch_client_stats(client, &cs);
        fprintf(stderr, "query_id=%s attempts=%d new_connections=%ld http_status=%ld bytes=%llu\n",
                st.query_id, st.attempts, st.num_connects, st.http_status,
                (unsigned long long)st.bytes_received);
    }
    if (rc) {
        if (rc == FERRY_EINVAL) /* a malformed result is the server's fault, not the user's */
            err.code = FERRY_EREMOTE;
        status = cli_fail("query", &err);
    }
out:
    if (in_fd > STDIN_FILENO)
        close(in_fd);
    ferry_tsv_json_free(&jr);
    ferry_ch_client_free(client);
    if (password) {
        explicit_bzero(password, strlen(password));
        free(password);
    }
    free(settings);
    return status;
}
