/* Opening the catalog for a command: --catalog URL wins, else the config's [cluster] catalog. */
#include "cli_catalog.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ferry/config.h"

static int open_url(const char *url, bool must_exist, ferry_catalog **out, ferry_err *err)
{
    struct stat st;
    if (must_exist && !strncmp(url, "sqlite:", 7) && url[7] == '/' && stat(url + 7, &st) != 0)
        return ferry_err_set(err, FERRY_ENOTFOUND,
                             "catalog %s does not exist (create it with 'ferry init' or 'ferry "
                             "catalog import')",
                             url);
    return ferry_catalog_open(url, out, err);
}

int cli_open_catalog(const char *config_path, const char *catalog_url, bool must_exist,
                     ferry_catalog **out, ferry_err *err)
{
    *out = NULL;
    if (catalog_url && *catalog_url)
        return open_url(catalog_url, must_exist, out, err);
    const char *path = cli_config_path(config_path);
    if (!path)
        return ferry_err_set(err, FERRY_EINVAL,
                             "no catalog: give --config FILE (or set FERRY_CONFIG) or "
                             "--catalog URL");
    ferry_config cfg = {0};
    int rc = ferry_config_load(path, &cfg, err);
    const char *url = NULL;
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    if (!rc)
        rc = open_url(url, must_exist, out, err);
    ferry_config_free(&cfg);
    return rc;
}
