/* The pointer files of one partition on one server: every part of the partition that lies on an
 * object-storage disk (active parts, then detached ones), each with the pointer files the agent
 * reads under its folder. Retention records them before it deletes a partition's objects; a
 * repair's replay makes the catalog's part records agree with them (part_records.h). */
#ifndef FERRY_FLOW_PARTITION_POINTERS_H
#define FERRY_FLOW_PARTITION_POINTERS_H

#include <stdbool.h>

#include "ferry/agent_ops.h"
#include "ferry/err.h"

/* One part's pointer files. files is borrowed for the call. active: an active part of the table
 * (else a detached folder of the partition). A non-zero return stops the walk and is returned. */
typedef int (*ferry_part_pointers_fn)(void *arg, const char *part, bool active,
                                      const ferry_agent_pointer_list *files, ferry_err *err);

/* Calls fn for each part of partition pid of db.table on ag's server that lies on an
 * object-storage disk. label names the server in messages. The table (or database) missing on
 * the server is FERRY_ENOTFOUND (from the agent); a part on a disk the agent's status does not
 * list, or whose path is not under its disk's metadata path, is FERRY_EIO (the agent looks at
 * the wrong place). */
int ferry_partition_pointers_each(ferry_agent_client *ag, const char *label, const char *db,
                                  const char *table, const char *pid, ferry_part_pointers_fn fn,
                                  void *arg, ferry_err *err);

#endif
