/* Private: inode room on a server's local disks, the second half of the disk-full guards (the
 * first is bytes): a file system can run out of inodes with gigabytes free, and then every part
 * written there fails (docs/operations.md "Room on the disks"). The agent's `status` reports
 * each local disk's free inodes (statvfs f_favail); the guards keep [cluster] min_free_inodes
 * free besides what they are about to write. */
#ifndef FERRY_DISK_ROOM_H
#define FERRY_DISK_ROOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/agent_ops.h"
#include "ferry/err.h"

struct ferry_config;

/* [cluster] min_free_inodes when it is not set. */
#define FERRY_MIN_FREE_INODES_DEFAULT 10000u
/* The inodes one copied part is counted for: a compact part has about 8 files, a wide part two
 * per column and about 6 more, a cold part's pointer files one per object file. */
#define FERRY_INODES_PER_PART 32u

/* [cluster] min_free_inodes of cfg (NULL: the default) into *out. FERRY_EINVAL for a value that
 * is not a number. */
int ferry_min_free_inodes(const struct ferry_config *cfg, uint64_t *out, ferry_err *err);

/* Whether every local disk of an agent's status (its disks; with wanted, only those
 * whose name it accepts) has at least need + min_free free inodes. A disk the agent reports no
 * inode count for (an older agent; a file system without an inode limit) passes. FERRY_EIO
 * otherwise, the message: "<who>: disk 'NAME' (PATH) has N free inodes; <what> needs about
 * NEED plus [cluster] min_free_inodes = MIN kept free". */
int ferry_inode_room(const ferry_agent_status_info *status, bool (*wanted)(const char *disk, void *arg), void *arg,
                     uint64_t need, uint64_t min_free, const char *who, const char *what,
                     ferry_err *err);

#endif
