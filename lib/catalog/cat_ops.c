/* Growing arrays of queued catalog changes (cat_op, catalog_int.h): the index writers (the
 * unfinished-move index, the repair-need index) build the operations they chain into a
 * commit with one append. */
#include "catalog/catalog_int.h"

#include <stdlib.h>
#include <string.h>

int cat_op_push(cat_op **ops, size_t *n, size_t *cap, enum cat_op_type type, const char *path,
                const char *doc, ferry_err *err)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        cat_op *grown = realloc(*ops, ncap * sizeof *grown);
        if (!grown)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        *ops = grown;
        *cap = ncap;
    }
    cat_op *op = &(*ops)[*n];
    memset(op, 0, sizeof *op);
    op->type = type;
    op->version = FERRY_VERSION_ANY;
    op->path = strdup(path);
    if (doc) {
        op->doc = strdup(doc);
        op->doc_len = strlen(doc);
    }
    if (!op->path || (doc && !op->doc)) {
        free(op->path);
        free(op->doc);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    (*n)++;
    return FERRY_OK;
}
