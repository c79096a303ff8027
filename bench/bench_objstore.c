/* Object store throughput for 1 MB objects: put and get through the local backend, through the
 * S3 backend when FERRY_BENCH_S3_ENDPOINT (+ _BUCKET, key S3RVER) names a server, and a plain
 * file copy (read + write + fsync + rename) as the floor. Prints one JSON object.
 *   FERRY_BENCH_N  objects per run (default 200) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/objstore.h"

#define OBJ (1000 * 1000)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_sink(void *ud, const void *data, size_t len)
{
    (void)data;
    *(size_t *)ud += len;
    return 0;
}

/* Returns MB/s for puts and gets of n objects, or -1 on error (printed). */
static int run(ferry_objstore *st, const char *data, int n, double *put_mbs, double *get_mbs)
{
    ferry_err err = {0};
    char key[64];
    double t0 = now();
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "bench/%d/obj-%04d", (int)getpid(), i);
        if (ferry_objstore_put(st, key, data, OBJ, &err)) {
            fprintf(stderr, "put: %s\n", err.msg);
            return -1;
        }
    }
    double t1 = now();
    for (int i = 0; i < n; i++) {
        size_t got = 0;
        snprintf(key, sizeof key, "bench/%d/obj-%04d", (int)getpid(), i);
        if (ferry_objstore_get(st, key, 0, 0, count_sink, &got, &err) || got != OBJ) {
            fprintf(stderr, "get: %s\n", err.msg);
            return -1;
        }
    }
    double t2 = now();
    *put_mbs = n * (OBJ / 1e6) / (t1 - t0);
    *get_mbs = n * (OBJ / 1e6) / (t2 - t1);
    return 0;
}

static double plain_copy(const char *dir, const char *data, int n)
{
    char src[512], tmp[512], dst[512];
    snprintf(src, sizeof src, "%s/src", dir);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, OBJ) != OBJ)
        return -1;
    close(fd);
    char *buf = malloc(OBJ);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        snprintf(tmp, sizeof tmp, "%s/copy.tmp", dir);
        snprintf(dst, sizeof dst, "%s/copy-%04d", dir, i);
        int in = open(src, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || read(in, buf, OBJ) != OBJ || write(out, buf, OBJ) != OBJ ||
            fsync(out) != 0)
            return -1;
        close(in);
        close(out);
        rename(tmp, dst);
    }
    double t1 = now();
    free(buf);
    return n * (OBJ / 1e6) / (t1 - t0);
}

int main(void)
{
    int n = getenv("FERRY_BENCH_N") ? atoi(getenv("FERRY_BENCH_N")) : 200;
    char dir[] = "/tmp/ferry-bench-objstore-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char *data = malloc(OBJ);
    for (int i = 0; i < OBJ; i++)
        data[i] = (char)(i * 2654435761u >> 24);
    ferry_err err = {0};
    ferry_objstore *local = NULL;
    double lp = 0, lg = 0, sp = -1, sg = -1;
    if (ferry_objstore_open_local(dir, FERRY_ROLE_CLICKHOUSE, &local, &err) ||
        run(local, data, n, &lp, &lg)) {
        fprintf(stderr, "local: %s\n", err.msg);
        return 1;
    }
    ferry_objstore_close(local);
    double copy = plain_copy(dir, data, n);
    const char *ep = getenv("FERRY_BENCH_S3_ENDPOINT");
    if (ep) {
        ferry_objstore_s3_options o = {.endpoint = ep,
                                       .bucket = getenv("FERRY_BENCH_S3_BUCKET"),
                                       .access_key_id = "S3RVER",
                                       .secret_access_key = "S3RVER"};
        ferry_objstore *s3 = NULL;
        if (ferry_objstore_open_s3(&o, FERRY_ROLE_CLICKHOUSE, &s3, &err) ||
            run(s3, data, n, &sp, &sg)) {
            fprintf(stderr, "s3: %s\n", err.msg);
            return 1;
        }
        ferry_objstore_close(s3);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("{\"bench\":\"objstore\",\"object_bytes\":%d,\"objects\":%d,"
           "\"local_put_MBps\":%.1f,\"local_get_MBps\":%.1f,\"plain_copy_fsync_MBps\":%.1f,"
           "\"s3_put_MBps\":%.1f,\"s3_get_MBps\":%.1f}\n",
           OBJ, n, lp, lg, copy, sp, sg);
    free(data);
    return 0;
}
