/* The part stream's parser (receiving side): a small framed format carrying a part folder's
 * files (or, in a batch, several parts' folders, each opened by a P line) with an end-to-end
 * xxh3-64 per file, fed in chunks of any size. Pure: the callbacks do
 * the writing. The format is in agent_int.h and docs/agent.md. */
#include "agent_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ferry/pathsafe.h"
#include "ferry/strutil.h"

enum { ST_MAGIC, ST_FILE_LINE, ST_DATA, ST_HASH_LINE, ST_END };

int agent_stream_init(agent_stream *s, const agent_stream_cb *cb, void *ud, ferry_err *err)
{
    memset(s, 0, sizeof *s);
    s->cb = *cb;
    s->ud = ud;
    s->xxh = XXH3_createState();
    if (!s->xxh)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    s->state = ST_MAGIC;
    return FERRY_OK;
}

void agent_stream_free(agent_stream *s)
{
    if (s->xxh)
        XXH3_freeState(s->xxh);
    s->xxh = NULL;
}

/* Handles one complete line (without its '\n'). */
static int on_line(agent_stream *s, ferry_err *err)
{
    char *l = s->line;
    switch (s->state) {
    case ST_MAGIC:
        if (strcmp(l, "ferry-part 1") != 0)
            return ferry_err_set(err, FERRY_EINVAL, "part stream: not a ferry part stream "
                                 "(version 1 expected)");
        s->state = ST_FILE_LINE;
        return FERRY_OK;
    case ST_FILE_LINE: {
        if (l[0] == 'E' && l[1] == ' ') {
            uint64_t n;
            if (!ferry_parse_u64(l + 2, &n) || n != s->files)
                return ferry_err_set(err, FERRY_EINVAL, "part stream: end marker says %s files, "
                                     "%" PRIu64 " were sent", l + 2, s->files);
            s->state = ST_END;
            s->done = true;
            return FERRY_OK;
        }
        if (l[0] == 'P' && l[1] == ' ') {
            /* a batch of parts (API 5): the files up to the next P line are this part's */
            if (!s->cb.part_begin)
                return ferry_err_set(err, FERRY_EINVAL, "part stream: a part line in the stream "
                                     "of one part");
            if (!ferry_safe_component(l + 2, false))
                return ferry_err_set(err, FERRY_EINVAL, "part stream: part name '%.100s' is not "
                                     "a plain folder name", l + 2);
            s->parts++;
            return s->cb.part_begin(s->ud, l + 2, err);
        }
        if (s->cb.part_begin && s->parts == 0)
            return ferry_err_set(err, FERRY_EINVAL, "part stream: a batch must name its part "
                                 "before its files");
        if (l[0] != 'F' || l[1] != ' ')
            return ferry_err_set(err, FERRY_EINVAL, "part stream: file header expected after "
                                 "%" PRIu64 " files", s->files);
        char *sp = strchr(l + 2, ' ');
        if (!sp)
            return ferry_err_set(err, FERRY_EINVAL, "part stream: malformed file header");
        *sp = '\0';
        uint64_t size;
        if (!ferry_parse_u64(l + 2, &size))
            return ferry_err_set(err, FERRY_EINVAL, "part stream: bad file size");
        const char *name = sp + 1;
        if (!ferry_safe_component(name, false))
            return ferry_err_set(err, FERRY_EINVAL, "part stream: file name '%.100s' is not a "
                                 "plain file name", name);
        snprintf(s->name, sizeof s->name, "%s", name);
        XXH3_64bits_reset(s->xxh);
        s->remaining = size;
        int rc = s->cb.file_begin(s->ud, s->name, size, err);
        if (rc)
            return rc;
        s->state = size ? ST_DATA : ST_HASH_LINE;
        return FERRY_OK;
    }
    case ST_HASH_LINE: {
        char want[32];
        snprintf(want, sizeof want, "H %016" PRIx64, (uint64_t)XXH3_64bits_digest(s->xxh));
        if (strcmp(l, want) != 0)
            return ferry_err_set(err, FERRY_EINVAL, "%s: damaged in transit (stream hash "
                                 "mismatch)", s->name);
        int rc = s->cb.file_end(s->ud, err);
        if (rc)
            return rc;
        s->files++;
        s->state = ST_FILE_LINE;
        return FERRY_OK;
    }
    default:
        return ferry_err_set(err, FERRY_EINVAL, "part stream: data after the end marker");
    }
}

int agent_stream_feed(agent_stream *s, const char *data, size_t len, ferry_err *err)
{
    while (len > 0) {
        if (s->state == ST_END)
            return ferry_err_set(err, FERRY_EINVAL, "part stream: data after the end marker");
        if (s->state == ST_DATA) {
            size_t take = len < s->remaining ? len : (size_t)s->remaining;
            XXH3_64bits_update(s->xxh, data, take);
            int rc = s->cb.file_data(s->ud, data, take, err);
            if (rc)
                return rc;
            data += take;
            len -= take;
            s->remaining -= take;
            if (s->remaining == 0)
                s->state = ST_HASH_LINE;
            continue;
        }
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (s->line_len + take > AGENT_STREAM_LINE_MAX)
            return ferry_err_set(err, FERRY_EINVAL, "part stream: header line too long");
        memcpy(s->line + s->line_len, data, take);
        s->line_len += take;
        data += take;
        len -= take;
        if (nl) {
            data++;
            len--;
            s->line[s->line_len] = '\0';
            s->line_len = 0;
            int rc = on_line(s, err);
            if (rc)
                return rc;
        }
    }
    return FERRY_OK;
}

int agent_stream_finish(agent_stream *s, ferry_err *err)
{
    if (!s->done)
        return ferry_err_set(err, FERRY_EINVAL, "part stream ended early (after %" PRIu64
                             " complete files%s%s)", s->files,
                             s->state == ST_DATA ? ", inside " : "",
                             s->state == ST_DATA ? s->name : "");
    return FERRY_OK;
}
