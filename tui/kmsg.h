/*
 * kmsg: whether the kernel log says the OOM killer took a process
 * (stale.c: a process found gone later, its segment left behind).
 *
 * The log is /dev/kmsg ($YM_KMSG: a file of its records, for tests),
 * read from its oldest record, bounded; its pids are the initial pid
 * namespace's.  The kernel writes "Killed process PID (COMM)" and
 * "oom-kill:...,pid=PID,..." for each OOM kill; one at or after the
 * process's start is its.
 */
#ifndef YMTOP_KMSG_H
#define YMTOP_KMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum kmsg_oom {
	KMSG_OOM_UNKNOWN = -1,  /* why says why */
	KMSG_OOM_NO = 0,        /* the log covers its life and names no kill of it */
	KMSG_OOM_YES = 1,       /* *at_us: the record's time, us after boot */
};

/* pid (a pid of the initial pid namespace) started start_us after boot. */
enum kmsg_oom kmsg_oom_killed(pid_t pid, uint64_t start_us, uint64_t *at_us,
			      char *why, size_t whylen);

/* One record's line ("PRIO,SEQ,US,FLAGS;TEXT"): 1 and *us when its text
 * reports an OOM kill of pid, 0 when not, -1 when it is not a record. */
int kmsg_parse(const char *line, size_t len, pid_t pid, uint64_t *us);

#endif
