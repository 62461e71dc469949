/* detach: see detach.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detach.h"
#include "fleet.h"
#include "proc.h"
#include "ptrace/inject.h"
#include "ptrace/procfs.h"
#include "target.h"

#define FORKED_NAMED 8    /* pids named in the line */

/* Is pid forked from root (at any depth)? */
static int forked_from(pid_t root, pid_t pid)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		pid = fleet_ppid(pid);
		if (pid == root)
			return 1;
	}
	return 0;
}

/* The processes forked from pid that map the agent (one a process had
 * when it forked goes on in the child, with a segment or none yet, and
 * the detach of pid does not reach it), appended to msg as one
 * clause. */
static void say_forked(pid_t pid, char *msg, size_t len)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	char list[160] = "";
	size_t used = 0;
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 1 || p == pid || !forked_from(pid, (pid_t)p))
			continue;
		int maps = proc_maps_agent((pid_t)p);
		if (maps <= 0 || !(maps & PROC_HAS_AGENT))
			continue;
		if (found++ < FORKED_NAMED && used < sizeof list) {
			int w = snprintf(list + used, sizeof list - used, "%s%ld",
					 used ? " " : "", p);
			if (w > 0)
				used += (size_t)w;
		}
	}
	closedir(d);
	if (!found)
		return;
	size_t at = strlen(msg);
	snprintf(msg + at, len - at, "; %d process%s forked from it still map%s "
		 "the agent (%s%s): ymtop -p PID --detach each", found,
		 found == 1 ? "" : "es", found == 1 ? "s" : "", list,
		 found > FORKED_NAMED ? " ..." : "");
}

int detach_target(pid_t pid, char *msg, size_t len)
{
	struct detach_result r;
	char err[512];
	struct tmaps m;
	if (inject_read_maps(pid, &m) == 0 && !m.has_agent) {
		snprintf(msg, len, "process %ld has no agent to detach (never "
			 "attached, or detached before)", (long)pid);
		say_forked(pid, msg, len);
		return 1;
	}
	if (inject_detach(pid, &r, err, sizeof err) != 0) {
		snprintf(msg, len, "cannot detach from process %ld: %s", (long)pid, err);
		return -1;
	}
	if (r.unloaded)
		snprintf(msg, len, "process %ld: agent detached and unloaded (no "
			 "agent code or memory left in the process)", (long)pid);
	else
		snprintf(msg, len, "process %ld: agent detached (sampling off, "
			 "segment removed) but left loaded and dormant: %s", (long)pid,
			 r.why);
	say_forked(pid, msg, len);
	return 0;
}

int detach_at_end(pid_t pid, char *msg, size_t len)
{
	struct proc_info pi;
	if (proc_read(pid, &pi) != 0 || proc_gone(&pi)) {
		snprintf(msg, len, "process %ld has exited: nothing to detach",
			 (long)pid);
		return 1;
	}
	struct shm_reader r;
	char err[256];
	if (target_open(pid, &r, err, sizeof err) == 0) {
		struct ym_header h;
		int preloaded = shm_header_read(&r, &h, NULL, 0) == 0 &&
				!(h.flags & YM_FLAG_INJECTED);
		shm_reader_close(&r);
		if (preloaded) {
			snprintf(msg, len, "process %ld: its agent was preloaded "
				 "(LD_PRELOAD), not loaded by ymtop -p: left as it "
				 "was, sampling (ymtop -p %ld --detach makes it dormant "
				 "for the rest of the process's life)", (long)pid,
				 (long)pid);
			return 1;
		}
	}
	return detach_target(pid, msg, len);
}
