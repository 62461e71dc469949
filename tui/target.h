/*
 * target: which process to watch and how to reach its segment.
 */
#ifndef YMTOP_TARGET_H
#define YMTOP_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#include "shm.h"

/* The given pid, or the only process running the agent; lists the
 * candidates and exits 1 when there are several, exits 1 when none. */
pid_t target_choose(pid_t pid);

/* Open pid's segment (or exit 1 with the reason and the remedy).  A
 * process without the agent gets it loaded first (ptrace: inject.h); a
 * process that has exited but kept its segment is opened post-mortem. */
void target_attach(pid_t pid, struct shm_reader *r);

/* The agent library's path, for messages and injection: YM_AGENT, beside
 * ymtop, ../lib/ymtop/ relative to it, then the configured libdir. */
void target_agent_path(char *buf, size_t len);

/* Where the symbolizer finds the target's files: "/proc/PID/root" when
 * the process is in another mount namespace (a container), else NULL.
 * The string is static. */
const char *target_sym_root(const struct shm_reader *r);

#endif
