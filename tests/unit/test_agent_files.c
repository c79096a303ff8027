/* The agent's durable writes when fsync fails (lib/agent/files.c, lib/agent/transfer.c): the
 * error is reported and no descriptor is left open. fsync is replaced at link time
 * (-Wl,--wrap=fsync, tests/CMakeLists.txt) by one that fails with EIO while fail_fsync is set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"

int __real_fsync(int fd);
int __wrap_fsync(int fd);

static bool fail_fsync;

int __wrap_fsync(int fd)
{
    if (fail_fsync) {
        errno = EIO;
        return -1;
    }
    return __real_fsync(fd);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_write_file_fsync_fails(void **state)
{
    (void)state;
    char dir[] = "/tmp/ferry-agent-files-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    ferry_err err = {0};
    assert_int_equal(agent_write_file_at(dfd, "ok.txt", "abc", 3, &err), FERRY_OK);
    int before = open_fds();
    fail_fsync = true;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%d.txt", i);
        assert_int_equal(agent_write_file_at(dfd, name, "abc", 3, &err), FERRY_EIO);
        assert_non_null(strstr(err.msg, "Input/output error"));
    }
    assert_int_equal(agent_fsync_dir(dir, &err), FERRY_EIO);
    fail_fsync = false;
    assert_int_equal(open_fds(), before); /* every descriptor was closed */
    close(dfd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_file_fsync_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
