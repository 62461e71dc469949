/*
 * cgmem: the memory files of a process's cgroup read into struct
 * model_cgroup (model/cgroup.h).
 *
 * The cgroup comes from /proc/PID/cgroup (proc_cgroup_memory: the v1
 * memory controller's path on a hybrid host, else the unified one),
 * relative to ymtop's cgroup namespace, under ymtop's mounts: v2 at
 * /sys/fs/cgroup (or /sys/fs/cgroup/unified on a hybrid host), v1 at
 * /sys/fs/cgroup/memory.  Every file is small and read bounded; a file
 * that is missing or says something else leaves its figure unknown.
 */
#ifndef YMTOP_CGMEM_H
#define YMTOP_CGMEM_H

#include <sys/types.h>

#include "model/cgroup.h"

/* Read pid's cgroup into *out (zeroed first); root: the cgroup file
 * system's mount point ("/sys/fs/cgroup", or a test's).  Never fails:
 * out->known 0 and out->why say what could not be read. */
void cgmem_read(pid_t pid, const char *root, struct model_cgroup *out);

/* After the process died by SIGKILL: read its cgroup's oom_kill count
 * again (the directory c->path named while it ran) and set c->oom_killed
 * when it is above the last one read.  A count moved by another process
 * of the cgroup killed at the same time is not told apart. */
void cgmem_oom_killed(const char *root, struct model_cgroup *c);

/* Parsers, for tests: "max" or a number (0 and *v, *unlimited), -1
 * otherwise; a "key value" file's key (0 and *v); a PSI file's line. */
int cgmem_parse_limit(const char *s, uint64_t *v, int *unlimited);
int cgmem_parse_key(const char *text, const char *key, uint64_t *v);
int cgmem_parse_psi(const char *text, struct model_cgroup *out);

#endif
