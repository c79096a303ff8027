/* What both sides of the agent protocol share: reading the agent's bearer token from its file
 * (the agent checks callers against it, flows send it), and whether a server reads a pointer
 * format (the agent refuses to write, flows refuse to plan, what a server cannot read). Pure
 * apart from the one file read. */
#include "ferry/agent.h"

#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/lines.h"
#include "ferry/strutil.h"

int ferry_agent_read_token_file(const char *path, char **token, ferry_err *err)
{
    char *data = NULL;
    size_t len = 0;
    ferry_err ferr = {0};
    int rc = ferry_read_file(path, &data, &len, &ferr);
    if (rc)
        return ferry_err_set(err, FERRY_EINVAL, "token file %s: %s", path, ferr.msg);
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        data[--len] = '\0';
    bool ok = len >= 16 && len <= 1024;
    for (size_t i = 0; ok && i < len; i++)
        if ((unsigned char)data[i] <= ' ' || (unsigned char)data[i] >= 127)
            ok = false;
    if (!ok) {
        OPENSSL_cleanse(data, len);
        free(data);
        return ferry_err_set(err, FERRY_EINVAL, "token file %s must hold one line of 16 to 1024 "
                             "printable characters without spaces", path);
    }
    *token = data;
    return FERRY_OK;
}

int ferry_agent_pointer_version_ok(int version, const ferry_ch_version *server, ferry_err *err)
{
    if (version < 1 || version > 5)
        return ferry_err_set(err, FERRY_EINVAL, "pointer format %d does not exist (ClickHouse "
                             "reads versions 1 to 5)", version);
    if (version == 5 && (server->major < 23 || (server->major == 23 && server->minor < 11)))
        return ferry_err_set(err, FERRY_EINVAL, "pointer format 5 (full object keys) is not "
                             "readable by ClickHouse %s (needs 23.11 or later); pin "
                             "pointer_format = 4 or lower in [cluster]", server->text);
    return FERRY_OK;
}
