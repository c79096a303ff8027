/* The lab (see include/ferry/lab.h): starting, checking and stopping ferry-node processes, the
 * state file, and the ferry.conf the lab hands to every other command. */
#include "ferry/lab.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/chdb.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/http_call.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

#define LAB_STATE_VERSION 1
#define MAX_NODES 64

typedef struct lab_node {
    char name[32];
    unsigned port;
    long pid;
    unsigned long long starttime; /* /proc/PID/stat field 22, to tell PID reuse apart */
    bool started_now;             /* started by this call (stopped again if the call fails) */
    char version[32];             /* the ClickHouse version asked for ("26.5", "26.7"; "" = the
                                     lab's libchdb) */
    char libchdb[PATH_MAX];       /* that version's cached library ("" = the lab's) */
    char clickhouse[64];          /* what the node answered when it last started: version() */
    char insert_mode[16];         /* and how it takes INSERT bodies (streamed, spooled) */
} lab_node;

enum { LAB_UPLOADER = 0, LAB_JANITOR = 1 };
static const char *const lab_role_names[2] = {"uploader", "janitor"};

typedef struct lab_state {
    char dir[PATH_MAX];
    char node_bin[PATH_MAX];
    char libchdb[PATH_MAX];
    char pin[32]; /* [cluster] clickhouse_version written into ferry.conf: the first nodes' */
    char store_type[8];
    char s3_endpoint[512], s3_bucket[256], s3_prefix[256];
    char s3_access_key_file[PATH_MAX], s3_secret_key_file[PATH_MAX];
    /* the uploader's and the janitor's keys (index LAB_UPLOADER, LAB_JANITOR); "" = the
     * clickhouse role's */
    char s3_role_akf[2][PATH_MAX], s3_role_skf[2][PATH_MAX];
    unsigned long long cold_cache; /* bytes of the cache disk in front of cold; 0: none */
    lab_node nodes[MAX_NODES];
    unsigned n_nodes;
} lab_state;

static void node_path(const lab_state *st, const lab_node *n, const char *leaf, char *out,
                      size_t outsz)
{
    snprintf(out, outsz, "%s/%s/%s", st->dir, n->name, leaf);
}

/* ---- processes ---- */

static unsigned long long proc_starttime(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p || p[1] != ' ')
        return 0;
    char state = p[2];
    if (state == 'Z' || state == 'X')
        return 0;
    /* Fields after ')' start at field 3 (state); starttime is field 22. */
    int field = 3;
    for (char *q = p + 2; *q; q++) {
        if (*q == ' ') {
            field++;
            if (field == 22)
                return strtoull(q + 1, NULL, 10);
        }
    }
    return 0;
}

/* True when pid is this node's ferry-node: same start time, and its command line is
 * ferry-node --config <this node's node.conf>. */
static bool node_alive(const lab_state *st, const lab_node *n)
{
    if (n->pid <= 0)
        return false;
    unsigned long long t = proc_starttime(n->pid);
    if (t == 0 || t != n->starttime)
        return false;
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", n->pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    size_t len = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[len] = '\0';
    char conf[PATH_MAX + 64];
    node_path(st, n, "node.conf", conf, sizeof conf);
    bool is_node = false, has_conf = false;
    for (size_t off = 0; off < len; off += strlen(buf + off) + 1) {
        const char *arg = buf + off;
        if (off == 0)
            is_node = ferry_ends_with(arg, "ferry-node");
        else if (strcmp(arg, conf) == 0)
            has_conf = true;
    }
    return is_node && has_conf;
}

static bool port_free(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool ok = bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0;
    close(fd);
    return ok;
}

/* A loopback port nothing listens on now, and no other node of this lab uses. */
static unsigned pick_port(const lab_state *st)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sin;
        unsigned port = 0;
        if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
            getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
            port = ntohs(sin.sin_port);
        if (fd >= 0)
            close(fd);
        bool used = false;
        for (unsigned i = 0; i < st->n_nodes; i++)
            if (st->nodes[i].port == port)
                used = true;
        if (port && !used)
            return port;
    }
    return 0;
}

/* ---- state file ---- */

static int load_state(const char *dir, lab_state *st, bool *exists, ferry_err *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/lab.json", dir);
    *exists = false;
    if (access(path, F_OK) != 0)
        return FERRY_OK;
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: not a lab state file: %s", path, je.line,
                             je.text);
    int rc = FERRY_OK;
    const char *s;
    json_t *os = json_object_get(o, "object_store");
    json_t *nodes = json_object_get(o, "nodes");
    if (json_integer_value(json_object_get(o, "version")) != LAB_STATE_VERSION ||
        !json_is_object(os) || !json_is_array(nodes) || json_array_size(nodes) > MAX_NODES) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: unexpected content (version %d expected)",
                           path, LAB_STATE_VERSION);
        goto out;
    }
#define GETS(obj, key, dst)                                                                     \
    if ((s = json_string_value(json_object_get(obj, key))))                                    \
        snprintf(dst, sizeof dst, "%s", s);
    GETS(o, "node_bin", st->node_bin);
    GETS(o, "libchdb", st->libchdb);
    GETS(o, "clickhouse_version", st->pin);
    GETS(os, "type", st->store_type);
    GETS(os, "endpoint", st->s3_endpoint);
    GETS(os, "bucket", st->s3_bucket);
    GETS(os, "prefix", st->s3_prefix);
    GETS(os, "access_key_file", st->s3_access_key_file);
    GETS(os, "secret_key_file", st->s3_secret_key_file);
    GETS(os, "uploader_access_key_file", st->s3_role_akf[LAB_UPLOADER]);
    GETS(os, "uploader_secret_key_file", st->s3_role_skf[LAB_UPLOADER]);
    GETS(os, "janitor_access_key_file", st->s3_role_akf[LAB_JANITOR]);
    GETS(os, "janitor_secret_key_file", st->s3_role_skf[LAB_JANITOR]);
    st->cold_cache = (unsigned long long)json_integer_value(json_object_get(os, "cold_cache_bytes"));
    size_t i;
    json_t *jn;
    json_array_foreach(nodes, i, jn)
    {
        lab_node *n = &st->nodes[i];
        GETS(jn, "name", n->name);
        n->port = (unsigned)json_integer_value(json_object_get(jn, "http_port"));
        n->pid = (long)json_integer_value(json_object_get(jn, "pid"));
        n->starttime = (unsigned long long)json_integer_value(json_object_get(jn, "starttime"));
        GETS(jn, "version", n->version);
        GETS(jn, "libchdb", n->libchdb);
        GETS(jn, "clickhouse", n->clickhouse);
        GETS(jn, "insert_mode", n->insert_mode);
        if (!n->name[0] || n->port == 0) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: node %zu has no name or port", path, i);
            goto out;
        }
    }
#undef GETS
    st->n_nodes = (unsigned)json_array_size(nodes);
    *exists = true;
out:
    json_decref(o);
    return rc;
}

static int save_state(const lab_state *st, ferry_err *err)
{
    json_t *o = json_object();
    json_object_set_new(o, "version", json_integer(LAB_STATE_VERSION));
    json_object_set_new(o, "node_bin", json_string(st->node_bin));
    json_object_set_new(o, "libchdb", json_string(st->libchdb));
    if (st->pin[0])
        json_object_set_new(o, "clickhouse_version", json_string(st->pin));
    json_t *os = json_object();
    json_object_set_new(os, "type", json_string(st->store_type));
    if (st->cold_cache)
        json_object_set_new(os, "cold_cache_bytes", json_integer((json_int_t)st->cold_cache));
    if (!strcmp(st->store_type, "s3")) {
        json_object_set_new(os, "endpoint", json_string(st->s3_endpoint));
        json_object_set_new(os, "bucket", json_string(st->s3_bucket));
        json_object_set_new(os, "prefix", json_string(st->s3_prefix));
        json_object_set_new(os, "access_key_file", json_string(st->s3_access_key_file));
        json_object_set_new(os, "secret_key_file", json_string(st->s3_secret_key_file));
        for (int r = 0; r < 2; r++) {
            char k[64];
            if (!st->s3_role_akf[r][0])
                continue;
            snprintf(k, sizeof k, "%s_access_key_file", lab_role_names[r]);
            json_object_set_new(os, k, json_string(st->s3_role_akf[r]));
            snprintf(k, sizeof k, "%s_secret_key_file", lab_role_names[r]);
            json_object_set_new(os, k, json_string(st->s3_role_skf[r]));
        }
    }
    json_object_set_new(o, "object_store", os);
    json_t *nodes = json_array();
    for (unsigned i = 0; i < st->n_nodes; i++) {
        const lab_node *n = &st->nodes[i];
        json_t *jn = json_object();
        json_object_set_new(jn, "name", json_string(n->name));
        json_object_set_new(jn, "http_port", json_integer(n->port));
        json_object_set_new(jn, "pid", json_integer(n->pid));
        json_object_set_new(jn, "starttime", json_integer((json_int_t)n->starttime));
        if (n->version[0]) {
            json_object_set_new(jn, "version", json_string(n->version));
            json_object_set_new(jn, "libchdb", json_string(n->libchdb));
        }
        if (n->clickhouse[0]) {
            json_object_set_new(jn, "clickhouse", json_string(n->clickhouse));
            json_object_set_new(jn, "insert_mode", json_string(n->insert_mode));
        }
        json_array_append_new(nodes, jn);
    }
    json_object_set_new(o, "nodes", nodes);
    char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/lab.json", st->dir);
    snprintf(tmp, sizeof tmp, "%s/lab.json.tmp", st->dir);
    int rc = FERRY_OK;
    if (json_dump_file(o, tmp, JSON_INDENT(2)) != 0 || rename(tmp, path) != 0)
        rc = ferry_err_set(err, FERRY_EIO, "cannot write %s: %s", path, strerror(errno));
    json_decref(o);
    return rc;
}

/* ---- generated files ---- */

static int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode,
                             ferry_err *err)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return ferry_err_set(err, FERRY_EIO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = write(fd, data, len) == (ssize_t)len;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return ferry_err_set(err, FERRY_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    return FERRY_OK;
}

static void put_kv(ferry_buf *b, const char *key, const char *value)
{
    /* ferry_config_fput_value quotes when needed; it writes to a FILE, so go through one. */
    char *mem = NULL;
    size_t memlen = 0;
    FILE *fp = open_memstream(&mem, &memlen);
    if (!fp)
        return;
    ferry_config_fput_value(fp, value);
    fclose(fp);
    ferry_buf_printf(b, "%s = %s\n", key, mem ? mem : "");
    free(mem);
}

/* The lab user "ferry" gets a random password, kept in DIR/ferry.password. */
static int lab_password(const lab_state *st, char hex_sha256[65], ferry_err *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/ferry.password", st->dir);
    char *pw = NULL;
    size_t len = 0;
    int rc = FERRY_OK;
    if (access(path, F_OK) != 0) {
        unsigned char r[12];
        char gen[25];
        if (RAND_bytes(r, sizeof r) != 1)
            return ferry_err_set(err, FERRY_EIO, "no randomness for the lab password");
        for (int i = 0; i < 12; i++)
            snprintf(gen + 2 * i, 3, "%02x", r[i]);
        if ((rc = write_file_atomic(path, gen, 24, 0600, err)) != FERRY_OK)
            return rc;
    }
    if ((rc = ferry_read_file(path, &pw, &len, err)) != FERRY_OK)
        return rc;
    ferry_chomp(pw);
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(pw, strlen(pw), md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(hex_sha256 + 2 * i, 3, "%02x", md[i]);
    memset(pw, 0, strlen(pw));
    free(pw);
    return FERRY_OK;
}

/* Each node's agent token, DIR/nodeK/agent.token (mode 0600), made once. */
static int agent_token(const lab_state *st, const lab_node *n, ferry_err *err)
{
    char path[PATH_MAX + 64];
    node_path(st, n, "agent.token", path, sizeof path);
    if (access(path, F_OK) == 0)
        return FERRY_OK;
    unsigned char r[24];
    char hex[49];
    if (RAND_bytes(r, sizeof r) != 1)
        return ferry_err_set(err, FERRY_EIO, "no randomness for the agent token");
    for (int i = 0; i < 24; i++)
        snprintf(hex + 2 * i, 3, "%02x", r[i]);
    hex[48] = '\n';
    return write_file_atomic(path, hex, 49, 0600, err);
}

static int read_key_id(const char *path, char *out, size_t outsz, ferry_err *err)
{
    char *s = NULL;
    size_t len;
    int rc = ferry_read_file(path, &s, &len, err);
    if (rc != FERRY_OK)
        return ferry_err_set(err, FERRY_EINVAL, "--s3-access-key-file: %s", err->msg);
    char *t = ferry_trim(s);
    snprintf(out, outsz, "%s", t);
    free(s);
    if (!out[0])
        return ferry_err_set(err, FERRY_EINVAL, "--s3-access-key-file %s is empty", path);
    return FERRY_OK;
}

static int write_node_conf(const lab_state *st, const lab_node *n, const char *pw_hash,
                           ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    char p[PATH_MAX + 64];
    int rc = FERRY_OK;
    ferry_buf_puts(&b, "# generated by 'ferry lab up'; rewritten when the node is started\n"
                       "[node]\n");
    put_kv(&b, "name", n->name);
    node_path(st, n, "data", p, sizeof p);
    put_kv(&b, "data_path", p);
    ferry_buf_printf(&b, "http_port = %u\n", n->port);
    ferry_buf_puts(&b, "listen = 127.0.0.1\n");
    if (n->libchdb[0])
        put_kv(&b, "libchdb", n->libchdb);
    else if (st->libchdb[0])
        put_kv(&b, "libchdb", st->libchdb);
    ferry_buf_puts(&b, "\n[object_store]\n");
    put_kv(&b, "type", st->store_type);
    if (!strcmp(st->store_type, "local")) {
        snprintf(p, sizeof p, "%s/blobs/", st->dir);
        put_kv(&b, "path", p);
    } else {
        char key[512];
        if ((rc = read_key_id(st->s3_access_key_file, key, sizeof key, err)) != FERRY_OK)
            goto out;
        put_kv(&b, "endpoint", st->s3_endpoint);
        put_kv(&b, "bucket", st->s3_bucket);
        put_kv(&b, "prefix", st->s3_prefix);
        put_kv(&b, "access_key_id", key);
        put_kv(&b, "secret_access_key_file", st->s3_secret_key_file);
        ferry_buf_puts(&b, "region = us-east-1\n");
    }
    if (st->cold_cache)
        ferry_buf_printf(&b, "cache_size = %llu\n", st->cold_cache);
    ferry_buf_puts(&b, "\n[agent]\n");
    node_path(st, n, "agent.token", p, sizeof p);
    put_kv(&b, "token_file", p);
    snprintf(p, sizeof p, "%s/ferry.conf", st->dir);
    put_kv(&b, "config", p);
    ferry_buf_puts(&b, "\n[user \"default\"]\npassword_sha256 =\n\n[user \"ferry\"]\n");
    put_kv(&b, "password_sha256", pw_hash);
    node_path(st, n, "node.conf", p, sizeof p);
    rc = write_file_atomic(p, b.data, b.len, 0600, err);
out:
    ferry_buf_free(&b);
    return rc;
}

#define LAB_CONF_END "# ---- end of the lab's part: what follows is yours, kept when lab up rewrites this file"

static int write_ferry_conf(const lab_state *st, ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    char p[PATH_MAX + 64];
    ferry_buf_puts(&b, "# generated by 'ferry lab up' for the lab in this directory; rewritten "
                       "by lab up and lab add-node\n[cluster]\nname = lab\n");
    snprintf(p, sizeof p, "sqlite:%s/catalog.db", st->dir);
    put_kv(&b, "catalog", p);
    ferry_buf_printf(&b, "clickhouse_version = %s\npointer_format = 5\n\n[object_store]\n",
                     st->pin[0] ? st->pin : "26.7");
    put_kv(&b, "type", st->store_type);
    if (!strcmp(st->store_type, "local")) {
        snprintf(p, sizeof p, "%s/blobs/", st->dir);
        put_kv(&b, "path", p);
    } else {
        put_kv(&b, "endpoint", st->s3_endpoint);
        put_kv(&b, "bucket", st->s3_bucket);
        ferry_buf_puts(&b, "region = us-east-1\nurl_style = path\n");
        if (st->s3_prefix[0])
            put_kv(&b, "prefix", st->s3_prefix);
        char key[512];
        ferry_err kerr = {0};
        if (read_key_id(st->s3_access_key_file, key, sizeof key, &kerr) == FERRY_OK) {
            /* s3rver has one account: unless the lab was given a key per role, the three roles
             * share the clickhouse role's key (a real deployment gives each role its own,
             * docs/config.md). */
            ferry_buf_puts(&b, "\n[credentials \"clickhouse\"]\n");
            put_kv(&b, "access_key_id", key);
            put_kv(&b, "secret_access_key_file", st->s3_secret_key_file);
            for (int r = 0; r < 2; r++) {
                char rkey[512];
                const char *skf = st->s3_secret_key_file;
                snprintf(rkey, sizeof rkey, "%s", key);
                if (st->s3_role_akf[r][0]) {
                    if (read_key_id(st->s3_role_akf[r], rkey, sizeof rkey, &kerr) != FERRY_OK)
                        continue;
                    skf = st->s3_role_skf[r];
                }
                ferry_buf_printf(&b, "\n[credentials \"%s\"]\n", lab_role_names[r]);
                put_kv(&b, "access_key_id", rkey);
                put_kv(&b, "secret_access_key_file", skf);
            }
        }
    }
    for (unsigned i = 0; i < st->n_nodes; i++) {
        const lab_node *n = &st->nodes[i];
        ferry_buf_printf(&b, "\n[shard \"%s\"]\nweight = 1\n", n->name);
        snprintf(p, sizeof p, "http://127.0.0.1:%u", n->port);
        put_kv(&b, "replicas", p);
        node_path(st, n, "data/", p, sizeof p);
        put_kv(&b, "data_path", p);
        ferry_buf_puts(&b, "user = default\n");
        /* the node agent is mounted on the node's own port (node/agent.c) */
        snprintf(p, sizeof p, "http://127.0.0.1:%u", n->port);
        put_kv(&b, "agent", p);
        node_path(st, n, "agent.token", p, sizeof p);
        put_kv(&b, "agent_token_file", p);
    }
    /* What the user added below the lab's part ([table], [router], ... sections) is kept: a
     * lab up that restarts a node must not drop the tables the cluster was initialised with. */
    ferry_buf_puts(&b, "\n" LAB_CONF_END "\n");
    snprintf(p, sizeof p, "%s/ferry.conf", st->dir);
    char *old = NULL;
    size_t old_len = 0;
    ferry_err rerr = {0};
    if (ferry_read_file(p, &old, &old_len, &rerr) == FERRY_OK) {
        const char *mark = strstr(old, LAB_CONF_END "\n");
        const char *keep = mark ? mark + strlen(LAB_CONF_END "\n") : NULL;
        /* a file from before the marker existed: the user's part starts at the first section
         * the lab does not write */
        if (!mark)
            keep = strstr(old, "\n[table ");
        if (keep && *keep == '\n' && !mark)
            keep++;
        if (keep)
            ferry_buf_puts(&b, keep);
        free(old);
    }
    int rc = write_file_atomic(p, b.data, b.len, 0644, err);
    ferry_buf_free(&b);
    return rc;
}

/* ---- starting and waiting ---- */

static int find_node_bin(const ferry_lab_options *opt, char *out, size_t outsz, ferry_err *err)
{
    const char *env = getenv("FERRY_NODE_BIN");
    if (opt->node_bin && *opt->node_bin)
        snprintf(out, outsz, "%s", opt->node_bin);
    else if (env && *env)
        snprintf(out, outsz, "%s", env);
    else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            return ferry_err_set(err, FERRY_EIO, "cannot read /proc/self/exe: %s",
                                 strerror(errno));
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(out, outsz, "%.4000s/ferry-node", self);
    }
    if (access(out, X_OK) != 0)
        return ferry_err_set(err, FERRY_ENOTFOUND,
                             "ferry-node not found at %s (build it with 'make build', or set "
                             "FERRY_NODE_BIN)",
                             out);
    return FERRY_OK;
}

static int spawn_node(lab_state *st, lab_node *n, ferry_err *err)
{
    char conf[PATH_MAX + 64], logp[PATH_MAX + 64];
    node_path(st, n, "node.conf", conf, sizeof conf);
    node_path(st, n, "node.log", logp, sizeof logp);
    int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return ferry_err_set(err, FERRY_EIO, "cannot open %s: %s", logp, strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        return ferry_err_set(err, FERRY_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setsid();
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        char *args[] = {st->node_bin, "--config", conf, NULL};
        execv(st->node_bin, args);
        dprintf(2, "ferry lab: cannot run %s: %s\n", st->node_bin, strerror(errno));
        _exit(127);
    }
    close(logfd);
    n->pid = pid;
    n->started_now = true;
    /* The start time lets later commands tell this process from a reused PID. */
    for (int i = 0; i < 100 && !(n->starttime = proc_starttime(pid)); i++)
        usleep(1000);
    return FERRY_OK;
}

/* True when the node answers GET /ferry/status with its own PID; notes its ClickHouse version
 * and insert mode. */
static bool node_answers(lab_node *n)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ferry/status", n->port);
    ferry_http_call call = {.url = url, .timeout_ms = 2000};
    ferry_http_answer a;
    ferry_err err = {0};
    bool ok = false;
    if (ferry_http_do(&call, &a, &err) == FERRY_OK && a.status == 200) {
        json_t *o = json_loads(ferry_buf_cstr(&a.body), 0, NULL);
        ok = o && json_integer_value(json_object_get(o, "pid")) == n->pid;
        const char *v = json_string_value(json_object_get(o, "clickhouse_version"));
        const char *m = json_string_value(json_object_get(o, "insert_mode"));
        if (ok) {
            snprintf(n->clickhouse, sizeof n->clickhouse, "%s", v ? v : "");
            snprintf(n->insert_mode, sizeof n->insert_mode, "%s", m ? m : "streamed");
        }
        json_decref(o);
    }
    ferry_http_answer_free(&a);
    return ok;
}

/* The last lines of a node's log, for error messages. */
static void log_tail(const lab_state *st, const lab_node *n, char *out, size_t outsz)
{
    char p[PATH_MAX + 64];
    node_path(st, n, "node.log", p, sizeof p);
    out[0] = '\0';
    FILE *fp = fopen(p, "r");
    if (!fp)
        return;
    char buf[4096];
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    fseek(fp, from, SEEK_SET);
    size_t len = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[len] = '\0';
    while (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    /* Keep the last 3 lines that are not ClickHouse's own "Logging ... to" notices. */
    const char *lines[3] = {0};
    int k = 0;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (ferry_starts_with(l, "Logging "))
            continue;
        lines[k % 3] = l;
        k++;
    }
    ferry_buf b = FERRY_BUF_INIT;
    for (int i = k > 3 ? k - 3 : 0; i < k; i++)
        ferry_buf_printf(&b, "%s%s", b.len ? " | " : "", lines[i % 3]);
    snprintf(out, outsz, "%s", ferry_buf_cstr(&b));
    ferry_buf_free(&b);
}

/* The threads pid still has (entries of /proc/PID/task); 0 when it cannot be read. */
static size_t proc_threads(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    size_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void stop_pid(long pid)
{
    kill((pid_t)pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid((pid_t)pid, NULL, WNOHANG) == pid || kill((pid_t)pid, 0) != 0)
            return;
        /* a zombie that is not our child is gone only once its last thread is: a leader that
         * exited first shows as a zombie while its other threads still hold the process's files
         * (ClickHouse's lock on data/status: a node started at once in the same directory was
         * refused "Another server instance in same directory is already running") */
        if (proc_starttime(pid) == 0 && proc_threads(pid) <= 1)
            return;
        usleep(100000);
    }
    kill((pid_t)pid, SIGKILL);
    waitpid((pid_t)pid, NULL, WNOHANG);
}

/* Waits for every node started by this call; on failure says which and why. */
static int wait_nodes(lab_state *st, unsigned timeout_s, ferry_err *err)
{
    /* in whole seconds of the clock, the resolution timeout_s is given in */
    uint64_t t0 = ferry_clock_ms_u64() / 1000;
    for (unsigned i = 0; i < st->n_nodes; i++) {
        lab_node *n = &st->nodes[i];
        if (!n->started_now)
            continue;
        for (;;) {
            int status;
            pid_t w = waitpid((pid_t)n->pid, &status, WNOHANG);
            if (w == (pid_t)n->pid) {
                char tail[1024];
                log_tail(st, n, tail, sizeof tail);
                n->pid = 0;
                return ferry_err_set(err, FERRY_EIO, "node %s exited (status %d) before it "
                                     "answered: %s (log: %s/%s/node.log)",
                                     n->name, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                     tail[0] ? tail : "no output", st->dir, n->name);
            }
            if (node_answers(n))
                break;
            if (ferry_clock_ms_u64() / 1000 - t0 >= timeout_s) {
                char tail[1024];
                log_tail(st, n, tail, sizeof tail);
                return ferry_err_set(err, FERRY_ETIMEOUT,
                                     "node %s did not answer on http://127.0.0.1:%u within %u s "
                                     "(last log lines: %s)",
                                     n->name, n->port, timeout_s, tail[0] ? tail : "none");
            }
            usleep(100000);
        }
    }
    return FERRY_OK;
}

static int check_dir(const char *dir, char *abs, size_t abssz, bool create, ferry_err *err)
{
    if (!dir || !*dir)
        return ferry_err_set(err, FERRY_EINVAL, "--dir is required");
    if (create && mkdir(dir, 0755) != 0 && errno != EEXIST)
        return ferry_err_set(err, errno == EACCES || errno == EROFS || errno == EPERM ? FERRY_EINVAL : FERRY_EIO,
                             "cannot create lab directory %s: %s", dir, strerror(errno));
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return ferry_err_set(err, FERRY_ENOTFOUND, "lab directory %s: %s", dir,
                             strerror(errno));
    if (access(real, W_OK | X_OK) != 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "lab directory %s is not writable (%s); pick another --dir", real,
                             strerror(errno));
    snprintf(abs, abssz, "%s", real);
    return FERRY_OK;
}

static int lock_dir(const char *dir, int *fd_out, ferry_err *err)
{
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/lab.lock", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "lab directory %s is not writable (cannot create lab.lock: %s); "
                             "pick another --dir",
                             dir, strerror(errno));
    for (int i = 0; i < 300; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            *fd_out = fd;
            return FERRY_OK;
        }
        usleep(100000);
    }
    close(fd);
    return ferry_err_set(err, FERRY_ETIMEOUT,
                         "another ferry lab command holds %s for more than 30 s", p);
}

static int apply_store_options(lab_state *st, const ferry_lab_options *opt, bool exists,
                               ferry_err *err)
{
    const char *type = opt->object_store && *opt->object_store ? opt->object_store : NULL;
    if (type && strcmp(type, "local") && strcmp(type, "s3"))
        return ferry_err_set(err, FERRY_EINVAL, "--object-store must be local or s3, not '%s'",
                             type);
    if (exists && opt->cold_cache_bytes && opt->cold_cache_bytes != st->cold_cache)
        return ferry_err_set(err, FERRY_EINVAL,
                             "the lab in %s was made %s; its cold parts name their disk, so the "
                             "cache cannot change: 'ferry lab down' and remove the directory",
                             st->dir, st->cold_cache ? "with another --cold-cache size"
                                                     : "without --cold-cache");
    if (!exists)
        st->cold_cache = opt->cold_cache_bytes;
    if (exists) {
        if (type && strcmp(type, st->store_type))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "the lab in %s uses the %s object store; 'ferry lab down' and "
                                 "remove the directory to change it",
                                 st->dir, st->store_type);
        return FERRY_OK;
    }
    snprintf(st->store_type, sizeof st->store_type, "%s", type ? type : "local");
    if (!strcmp(st->store_type, "s3")) {
        if (!opt->s3_endpoint || !opt->s3_bucket || !opt->s3_access_key_file ||
            !opt->s3_secret_key_file)
            return ferry_err_set(err, FERRY_EINVAL,
                                 "--object-store s3 needs --s3-endpoint, --s3-bucket, "
                                 "--s3-access-key-file and --s3-secret-key-file");
        if (!ferry_starts_with(opt->s3_endpoint, "http://") &&
            !ferry_starts_with(opt->s3_endpoint, "https://"))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "--s3-endpoint must be http://host:port or https://host:port");
        char real[PATH_MAX];
        if (!realpath(opt->s3_secret_key_file, real) || access(real, R_OK) != 0)
            return ferry_err_set(err, FERRY_EINVAL, "--s3-secret-key-file %s is not readable",
                                 opt->s3_secret_key_file);
        snprintf(st->s3_secret_key_file, sizeof st->s3_secret_key_file, "%s", real);
        if (!realpath(opt->s3_access_key_file, real))
            return ferry_err_set(err, FERRY_EINVAL, "--s3-access-key-file %s is not readable",
                                 opt->s3_access_key_file);
        snprintf(st->s3_access_key_file, sizeof st->s3_access_key_file, "%s", real);
        char key[512];
        int rc = read_key_id(real, key, sizeof key, err);
        if (rc != FERRY_OK)
            return rc;
        const char *role_akf[2] = {opt->s3_uploader_access_key_file,
                                   opt->s3_janitor_access_key_file};
        const char *role_skf[2] = {opt->s3_uploader_secret_key_file,
                                   opt->s3_janitor_secret_key_file};
        for (int r = 0; r < 2; r++) {
            if (!role_akf[r] && !role_skf[r])
                continue;
            if (!role_akf[r] || !role_skf[r])
                return ferry_err_set(err, FERRY_EINVAL, "--s3-%s-access-key-file and "
                                     "--s3-%s-secret-key-file go together", lab_role_names[r],
                                     lab_role_names[r]);
            if (!realpath(role_skf[r], real) || access(real, R_OK) != 0)
                return ferry_err_set(err, FERRY_EINVAL, "--s3-%s-secret-key-file %s is not "
                                     "readable", lab_role_names[r], role_skf[r]);
            snprintf(st->s3_role_skf[r], sizeof st->s3_role_skf[r], "%s", real);
            if (!realpath(role_akf[r], real))
                return ferry_err_set(err, FERRY_EINVAL, "--s3-%s-access-key-file %s is not "
                                     "readable", lab_role_names[r], role_akf[r]);
            snprintf(st->s3_role_akf[r], sizeof st->s3_role_akf[r], "%s", real);
            if ((rc = read_key_id(real, key, sizeof key, err)) != FERRY_OK)
                return rc;
        }
        snprintf(st->s3_endpoint, sizeof st->s3_endpoint, "%s", opt->s3_endpoint);
        snprintf(st->s3_bucket, sizeof st->s3_bucket, "%s", opt->s3_bucket);
        snprintf(st->s3_prefix, sizeof st->s3_prefix, "%s", opt->s3_prefix ? opt->s3_prefix : "");
    }
    return FERRY_OK;
}

/* The ClickHouse version a node runs: its cached library, which must be there. */
static int node_set_version(lab_node *n, const char *version, ferry_err *err)
{
    char p[PATH_MAX];
    if (!ferry_chdb_version_path(version, p, sizeof p))
        return ferry_err_set(err, FERRY_EINVAL, "--version must be 26.7 or 26.5 (the ClickHouse "
                             "builds the lab knows), not '%s'", version);
    const char *v = ferry_starts_with(version, "26.5") ? "26.5" : "26.7";
    if (access(p, R_OK) != 0)
        return ferry_err_set(err, FERRY_ENOTFOUND, "ClickHouse %s is not installed (no %s); get "
                             "it with 'scripts/setup.sh --chdb %s'", v, p, v);
    snprintf(n->version, sizeof n->version, "%s", v);
    snprintf(n->libchdb, sizeof n->libchdb, "%s", p);
    return FERRY_OK;
}

enum { LAB_UP, LAB_ADD, LAB_RESTART };

static int lab_up_impl(const ferry_lab_options *opt, int mode, ferry_err *err)
{
    bool add_one = mode == LAB_ADD;
    lab_state *st = calloc(1, sizeof *st);
    int lockfd = -1, rc = FERRY_OK;
    bool exists = false;
    if (!st)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if ((rc = check_dir(opt->dir, st->dir, sizeof st->dir, !add_one, err)) != FERRY_OK)
        goto out;
    if ((rc = lock_dir(st->dir, &lockfd, err)) != FERRY_OK)
        goto out;
    if ((rc = load_state(st->dir, st, &exists, err)) != FERRY_OK)
        goto out;
    if (mode != LAB_UP && !exists) {
        rc = ferry_err_set(err, FERRY_EINVAL, "no lab in %s; start one with 'ferry lab up'",
                           st->dir);
        goto out;
    }
    if ((rc = apply_store_options(st, opt, exists, err)) != FERRY_OK)
        goto out;
    if ((rc = find_node_bin(opt, st->node_bin, sizeof st->node_bin, err)) != FERRY_OK)
        goto out;
    if (opt->libchdb && *opt->libchdb)
        snprintf(st->libchdb, sizeof st->libchdb, "%s", opt->libchdb);
    lab_node vcheck = {0}, *target = NULL;
    if (opt->version && (rc = node_set_version(&vcheck, opt->version, err)) != FERRY_OK)
        goto out;
    if (!exists || !st->pin[0]) /* the cluster's pin: the version the lab started with */
        snprintf(st->pin, sizeof st->pin, "%s", vcheck.version[0] ? vcheck.version : "26.7");
    if (mode == LAB_RESTART) {
        for (unsigned i = 0; i < st->n_nodes; i++)
            if (opt->node && !strcmp(st->nodes[i].name, opt->node))
                target = &st->nodes[i];
        if (!target) {
            rc = ferry_err_set(err, FERRY_EINVAL, "the lab in %s has no node '%s' (see 'ferry "
                               "lab status --dir %s')", st->dir, opt->node ? opt->node : "",
                               opt->dir);
            goto out;
        }
        /* stopped the way a server is restarted; its data directory stays */
        if (node_alive(st, target)) {
            stop_pid(target->pid);
            FLOG_INFO("lab: stopped %s pid=%ld for a restart", target->name, target->pid);
        }
        target->pid = 0;
        target->starttime = 0;
        if (vcheck.version[0]) {
            snprintf(target->version, sizeof target->version, "%s", vcheck.version);
            snprintf(target->libchdb, sizeof target->libchdb, "%s", vcheck.libchdb);
        }
    }
    unsigned want = add_one ? st->n_nodes + 1
                            : (opt->nodes ? opt->nodes : (exists ? st->n_nodes : 3));
    if (want > MAX_NODES) {
        rc = ferry_err_set(err, FERRY_EINVAL, "a lab has at most %d nodes", MAX_NODES);
        goto out;
    }
    if (want < st->n_nodes)
        want = st->n_nodes; /* lab up never removes nodes */
    char pw_hash[65];
    if ((rc = lab_password(st, pw_hash, err)) != FERRY_OK)
        goto out;
    char p[PATH_MAX + 64];
    if (!strcmp(st->store_type, "local")) {
        snprintf(p, sizeof p, "%s/blobs", st->dir);
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = ferry_err_set(err, FERRY_EIO, "cannot create %s: %s", p, strerror(errno));
            goto out;
        }
    }
    while (st->n_nodes < want) {
        lab_node *n = &st->nodes[st->n_nodes];
        memset(n, 0, sizeof *n);
        /* The next free nodeK name (names are never reused within a lab). */
        snprintf(n->name, sizeof n->name, "node%u", st->n_nodes + 1);
        if (vcheck.version[0]) {
            snprintf(n->version, sizeof n->version, "%s", vcheck.version);
            snprintf(n->libchdb, sizeof n->libchdb, "%s", vcheck.libchdb);
        }
        st->n_nodes++;
    }
    for (unsigned i = 0; i < st->n_nodes; i++) {
        lab_node *n = &st->nodes[i];
        if (node_alive(st, n) || (target && n != target))
            continue;
        snprintf(p, sizeof p, "%s/%s", st->dir, n->name);
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = ferry_err_set(err, FERRY_EIO, "cannot create %s: %s", p, strerror(errno));
            goto fail;
        }
        /* A restarted node keeps its port: the catalog and routers know its URL. Something
         * else may hold it for a moment (a client's ephemeral port), so wait for it. */
        for (int w = 0; n == target && n->port && !port_free(n->port) && w < 300; w++)
            usleep(100000);
        if (n == target && n->port && !port_free(n->port)) {
            rc = ferry_err_set(err, FERRY_EIO, "port %u of %s is still taken after 30 s (see "
                               "'ss -ltnp sport = :%u'); the node's URL must stay the same",
                               n->port, n->name, n->port);
            goto fail;
        }
        if (!n->port || !port_free(n->port))
            n->port = pick_port(st);
        if (!n->port) {
            rc = ferry_err_set(err, FERRY_EIO, "no free loopback port for %s", n->name);
            goto fail;
        }
        if ((rc = agent_token(st, n, err)) != FERRY_OK ||
            (rc = write_node_conf(st, n, pw_hash, err)) != FERRY_OK)
            goto fail;
        n->pid = 0;
        if ((rc = spawn_node(st, n, err)) != FERRY_OK)
            goto fail;
        FLOG_INFO("lab: started %s pid=%ld http=http://127.0.0.1:%u", n->name, n->pid, n->port);
    }
    if ((rc = wait_nodes(st, opt->timeout_s ? opt->timeout_s : 60, err)) != FERRY_OK)
        goto fail;
    if ((rc = save_state(st, err)) != FERRY_OK || (rc = write_ferry_conf(st, err)) != FERRY_OK)
        goto fail;
    goto out;
fail:
    /* Leave nothing half-started: stop what this call started, record what still runs. */
    for (unsigned i = 0; i < st->n_nodes; i++) {
        lab_node *n = &st->nodes[i];
        if (n->started_now && n->pid > 0) {
            stop_pid(n->pid);
            n->pid = 0;
        }
    }
    if (exists) {
        ferry_err ignored = {0};
        save_state(st, &ignored);
    }
out:
    if (lockfd >= 0)
        close(lockfd);
    free(st);
    return rc;
}

int ferry_lab_up(const ferry_lab_options *opt, ferry_err *err)
{
    return lab_up_impl(opt, LAB_UP, err);
}

int ferry_lab_add_node(const ferry_lab_options *opt, ferry_err *err)
{
    return lab_up_impl(opt, LAB_ADD, err);
}

int ferry_lab_restart_node(const ferry_lab_options *opt, ferry_err *err)
{
    return lab_up_impl(opt, LAB_RESTART, err);
}

static int open_existing(const char *dir, lab_state *st, int *lockfd, ferry_err *err)
{
    int rc = check_dir(dir, st->dir, sizeof st->dir, false, err);
    if (rc == FERRY_ENOTFOUND)
        return ferry_err_set(err, FERRY_EINVAL, "no lab in %s (the directory does not exist)",
                             dir);
    if (rc != FERRY_OK)
        return rc;
    bool exists = false;
    if (lockfd && (rc = lock_dir(st->dir, lockfd, err)) != FERRY_OK)
        return rc;
    if ((rc = load_state(st->dir, st, &exists, err)) != FERRY_OK)
        return rc;
    if (!exists)
        return ferry_err_set(err, FERRY_EINVAL, "no lab in %s (no lab.json); start one with "
                             "'ferry lab up --dir %s'", st->dir, dir);
    return FERRY_OK;
}

int ferry_lab_down(const char *dir, ferry_err *err)
{
    lab_state *st = calloc(1, sizeof *st);
    int lockfd = -1;
    if (!st)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = open_existing(dir, st, &lockfd, err);
    if (rc != FERRY_OK)
        goto out;
    for (unsigned i = 0; i < st->n_nodes; i++) {
        lab_node *n = &st->nodes[i];
        if (node_alive(st, n)) {
            stop_pid(n->pid);
            FLOG_INFO("lab: stopped %s pid=%ld", n->name, n->pid);
        }
        n->pid = 0;
        n->starttime = 0;
    }
    rc = save_state(st, err);
out:
    if (lockfd >= 0)
        close(lockfd);
    free(st);
    return rc;
}

int ferry_lab_status(const char *dir, json_t **out, ferry_err *err)
{
    lab_state *st = calloc(1, sizeof *st);
    if (!st)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = open_existing(dir, st, NULL, err);
    if (rc != FERRY_OK)
        goto out;
    json_t *o = json_object();
    json_object_set_new(o, "dir", json_string(st->dir));
    json_object_set_new(o, "clickhouse_version", json_string(st->pin[0] ? st->pin : "26.7"));
    json_t *nodes = json_array();
    char p[PATH_MAX + 64];
    for (unsigned i = 0; i < st->n_nodes; i++) {
        lab_node *n = &st->nodes[i];
        bool alive = node_alive(st, n);
        json_t *jn = json_object();
        json_object_set_new(jn, "name", json_string(n->name));
        snprintf(p, sizeof p, "http://127.0.0.1:%u", n->port);
        json_object_set_new(jn, "http", json_string(p));
        json_object_set_new(jn, "pid", n->pid > 0 ? json_integer(n->pid) : json_null());
        json_object_set_new(jn, "alive", json_boolean(alive));
        node_path(st, n, "data/", p, sizeof p);
        json_object_set_new(jn, "data_path", json_string(p));
        node_path(st, n, "node.log", p, sizeof p);
        json_object_set_new(jn, "log", json_string(p));
        /* the version asked for, and the one the node answered when it last started */
        json_object_set_new(jn, "version", json_string(n->version[0] ? n->version : "default"));
        json_object_set_new(jn, "clickhouse", n->clickhouse[0] ? json_string(n->clickhouse)
                                                              : json_null());
        json_object_set_new(jn, "insert_mode", n->insert_mode[0] ? json_string(n->insert_mode)
                                                                 : json_null());
        json_array_append_new(nodes, jn);
    }
    json_object_set_new(o, "nodes", nodes);
    json_t *os = json_object();
    json_object_set_new(os, "type", json_string(st->store_type));
    if (!strcmp(st->store_type, "local")) {
        snprintf(p, sizeof p, "%s/blobs/", st->dir);
        json_object_set_new(os, "path", json_string(p));
    } else {
        json_object_set_new(os, "endpoint", json_string(st->s3_endpoint));
        json_object_set_new(os, "bucket", json_string(st->s3_bucket));
    }
    if (st->cold_cache)
        json_object_set_new(os, "cold_cache_bytes", json_integer((json_int_t)st->cold_cache));
    json_object_set_new(o, "object_store", os);
    snprintf(p, sizeof p, "%s/ferry.conf", st->dir);
    json_object_set_new(o, "config", json_string(p));
    *out = o;
out:
    free(st);
    return rc;
}
