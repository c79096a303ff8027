/* Shared by the commands that use the catalog: finding its URL (--catalog, or [cluster] catalog in
 * the config) and opening it. */
#ifndef FERRY_CLI_CATALOG_H
#define FERRY_CLI_CATALOG_H

#include <stdbool.h>

#include "ferry/catalog.h"

/* Opens the catalog named by catalog_url if given, else by the config at config_path (--config
 * or $FERRY_CONFIG). FERRY_EINVAL when neither names one. must_exist: a SQLite file that does not
 * exist is FERRY_ENOTFOUND instead of being created (commands that only read). The caller owns
 * *out. */
int cli_open_catalog(const char *config_path, const char *catalog_url, bool must_exist,
                     ferry_catalog **out, ferry_err *err);

#endif
