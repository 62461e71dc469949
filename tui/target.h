/*
 * target: which process to watch and how to reach its segment.
 */
#ifndef YMTOP_TARGET_H
#define YMTOP_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#include "shm.h"
#include "util/err.h"

/* The given pid, or the only process running the agent (with a segment,
 * or preloading it and not started yet); -1 with e set (status 1) when
 * there are several (listed on stderr) or none. */
pid_t target_choose(pid_t pid, struct ym_err *e);

/* The processes running a live agent that we may read (their segment
 * exists), up to max of them into pids; returns how many there are (may
 * be more than max). */
int target_list(pid_t *pids, int max);
/* The processes of our pid namespace that run the agent but have made no
 * segment yet (nothing sampled since they started or forked: ymagent(7)),
 * as target_list lists them: not readable until started (ymtop -p). */
int target_list_unstarted(pid_t *pids, int max);
/* The same, where known(pid, arg) says a pid is watched already (its
 * session checks the process at each refresh, session.h): such a pid is
 * listed while its segment's name is in our /dev/shm, or (another pid
 * namespace's) while it runs, without the checks a new one gets (its
 * /proc files, its segment's header, its maps). */
int target_list_known(pid_t *pids, int max, int (*known)(pid_t, void *),
		      void *arg);

/* Open the segment of pid, a process running the agent, without exiting
 * and without injecting (the exporter, the host view).  0, or a negative
 * errno with one line in err. */
int target_open(pid_t pid, struct shm_reader *r, char *err, size_t len);

/* Open pid's segment: 0, or -1 with the reason and the remedy in e
 * (status 1).  A process without the agent gets it loaded first (ptrace:
 * inject.h); a process that has exited but kept its segment is opened
 * post-mortem. */
int target_attach(pid_t pid, struct shm_reader *r, struct ym_err *e);

/* The agent library's path, for messages and injection: YM_AGENT, beside
 * ymtop, ../lib/ymtop/ relative to it, then the configured libdir. */
void target_agent_path(char *buf, size_t len);

/* Where the symbolizer finds the target's files: "/proc/PID/root" when
 * the process is in another mount namespace (a container), else NULL.
 * The string is static. */
const char *target_sym_root(const struct shm_reader *r);

#endif
