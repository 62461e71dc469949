#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "proc.h"
#include "target.h"

#ifndef YM_LIBDIR
#define YM_LIBDIR "/usr/local/lib/ymtop"
#endif

/* Where the agent is, for the remedy in messages: beside ymtop (a build
 * tree), then ../lib/ymtop/ relative to it (an installed prefix, wherever
 * it was moved), then the configured library directory. */
void target_agent_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			const char *rel[] = { "/libymagent.so", "/../lib/ymtop/libymagent.so" };
			for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
				char cand[PATH_MAX + 64], real[PATH_MAX];
				snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
				if (access(cand, R_OK) == 0 && realpath(cand, real)) {
					snprintf(buf, len, "%s", real);
					return;
				}
			}
		}
	}
	snprintf(buf, len, "%s/libymagent.so", YM_LIBDIR);
}

pid_t target_choose(pid_t pid)
{
	char agent[PATH_MAX];
	if (pid)
		return pid;
	pid_t pids[64];
	int n = proc_find_agents(pids, 64);
	if (n == 1)
		return pids[0];
	target_agent_path(agent, sizeof agent);
	if (n == 0)
		cli_die(1, "no running process has the agent loaded; start one with "
		       "LD_PRELOAD=%s, or give -p PID", agent);
	fprintf(stderr, "ymtop: %d processes run the agent; choose one with -p PID:\n", n);
	for (int i = 0; i < n && i < 64; i++) {
		struct proc_info pi;
		if (proc_read(pids[i], &pi) == 0)
			fprintf(stderr, "  %7ld  %s\n", (long)pids[i], pi.comm);
	}
	exit(1);
}

void target_attach(pid_t pid, struct shm_reader *r)
{
	char err[512], agent[PATH_MAX];
	struct proc_info pi;
	int rc = proc_read(pid, &pi);
	if (rc == -ENOENT) {
		/* Gone, but a segment kept with YM_KEEP_SEGMENT=1 still tells
		 * its final state (ours only, unless we are root). */
		uid_t own = geteuid() == 0 ? (uid_t)-1 : geteuid();
		if (shm_reader_open(r, pid, own, err, sizeof err) == 0)
			return;
		cli_die(1, "no process with pid %ld", (long)pid);
	}
	if (rc != 0)
		cli_die(1, "cannot read /proc/%ld: %s", (long)pid, strerror(-rc));
	if (geteuid() != 0 && pi.uid != geteuid())
		cli_die(1, "process %ld belongs to another user (uid %u); run ymtop as "
		       "that user or as root", (long)pid, (unsigned)pi.uid);
	rc = shm_reader_open(r, pid, pi.uid, err, sizeof err);
	if (rc == -ENOENT) {
		target_agent_path(agent, sizeof agent);
		cli_die(1, "process %ld (%s) is not running the ymtop agent; start it "
		       "with LD_PRELOAD=%s", (long)pid, pi.comm, agent);
	}
	if (rc != 0)
		cli_die(1, "pid %ld: %s", (long)pid, err);
	struct ym_header h;
	if (pread(r->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		cli_die(1, "pid %ld: cannot read the segment header", (long)pid);
	if (h.start_ticks && h.start_ticks != pi.start_ticks)
		cli_die(1, "pid %ld: the segment belongs to an earlier process with the "
		       "same pid (stale); restart the program under the agent",
		    (long)pid);
}

