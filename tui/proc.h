/*
 * proc: what ymtop reads about a target from /proc, and the discovery of
 * processes running the agent.  Everything read here is untrusted and
 * bounded.
 */
#ifndef YMTOP_PROC_H
#define YMTOP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_info {
	pid_t    pid;
	uid_t    uid;           /* real uid of the process */
	uint64_t start_ticks;   /* field 22 of /proc/pid/stat */
	uint64_t rss_bytes;
	char     state;         /* field 3: R, S, D, Z (zombie), X... */
	char     comm[64];
};

/* 0 on success; -ENOENT when there is no such process. */
int proc_read(pid_t pid, struct proc_info *out);

/* 1 when the process has exited (a zombie not yet reaped). */
int proc_gone(const struct proc_info *pi);

/* 1 when pid is alive and started at start_ticks (not a reused pid). */
int proc_same(pid_t pid, uint64_t start_ticks);

/* Thread name from /proc/pid/task/tid/comm into buf ("" if gone). */
void proc_thread_name(pid_t pid, uint32_t tid, char *buf, size_t len);

/* Processes with a live segment in /dev/shm that we may read: fills up to
 * max pids and returns how many there are in total. */
int proc_find_agents(pid_t *pids, int max);

#endif
