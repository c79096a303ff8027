/* Opening the catalog for a command: --catalog URL wins, else the config's [cluster] catalog. */
#include "cli_catalog.h"

#include <stdio.h>

#include "cli.h"
#include "ferry/config.h"

int cli_open_catalog(const char *config_path, const char *catalog_url, ferry_catalog **out,
                     ferry_err *err)
{
    *out = NULL;
    if (catalog_url && *catalog_url)
        return ferry_catalog_open(catalog_url, out, err);
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
        rc = ferry_catalog_open(url, out, err);
    ferry_config_free(&cfg);
    return rc;
}
