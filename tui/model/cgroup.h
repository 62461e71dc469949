/*
 * cgroup: the memory picture of the process's cgroup, as the session read
 * it (tui/cgroup.h), beside the process's own figures.  Pure data.
 *
 * cgroup v2: memory.current, memory.max and memory.high ("max": no limit),
 * memory.events (high, max, oom, oom_kill), memory.pressure (PSI) and
 * memory.stat (anon, file, kernel).  cgroup v1 (a hybrid host's memory
 * controller): memory.usage_in_bytes, memory.limit_in_bytes, failcnt as the
 * max events, memory.oom_control's oom_kill, memory.stat's total_rss and
 * total_cache; no high limit, no pressure (v1 has none per cgroup).
 */
#ifndef YMTOP_MODEL_CGROUP_H
#define YMTOP_MODEL_CGROUP_H

#include <stdint.h>

#define MODEL_CGROUP_PATH 256

struct model_cgroup {
	int      known;              /* read; else why says why not */
	char     why[160];
	int      v1;                 /* the v1 memory controller's files */
	char     path[MODEL_CGROUP_PATH];  /* as /proc/PID/cgroup names it */
	int      have_current;
	uint64_t current;            /* bytes charged to the cgroup */
	int      have_max, max_unlimited;
	uint64_t max;
	int      have_high, high_unlimited;
	uint64_t high;
	int      have_events;        /* counters since the cgroup was made */
	uint64_t ev_high, ev_max, ev_oom, ev_oom_kill;
	int      have_oom;           /* ev_oom (v2; v1 has only oom_kill) */
	int      have_psi;           /* share of time stalled on memory, % */
	double   some10, some60, some300, full10, full60, full300;
	int      have_stat;
	uint64_t anon, file, kernel; /* memory.stat's split of current */
	int      have_kernel;
	/* The processes in it (cgroup.procs, at most MODEL_CGROUP_PROCS
	 * read) and their RSS summed (/proc/PID/statm; a process gone
	 * meanwhile counts nothing). */
	uint32_t nprocs;
	int      procs_cut;          /* more than MODEL_CGROUP_PROCS */
	uint64_t procs_rss;
	/* The last read while the process ran saw oom_kill move from the
	 * read before (the OOM killer's SIGKILL lands while the process
	 * still looks alive); kept by the session across reads. */
	int      oom_kill_moved;
	/* The process died by SIGKILL while its cgroup's oom_kill count
	 * moved: since the last value read while it ran, or in the last
	 * refresh before (cgmem_oom_killed). */
	int      oom_killed;
};
#define MODEL_CGROUP_PROCS 4096

#endif
