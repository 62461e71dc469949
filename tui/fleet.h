/*
 * fleet: the set of processes running the agent that ymtop watches at once
 * (ymtop --serve, the host list), each with its session (session.h), kept
 * up to date by fleet_update: processes that started appear, processes that
 * exited (or whose segment fails) are dropped.  Reads only: every reader
 * is marked read-only (shm_reader.writable = 0, so that shm_control_*
 * refuse) but for requests for the allocator's statistics, asked at every
 * update of every process whose snapshot shows them not current; nothing is injected (but fleet_add, as -p
 * does), and a thread is borrowed only as session_refresh says.
 *
 * Which processes: every process running the agent that we may read
 * (target_list), or only the ones added with fleet_add (fixed), or with
 * a root (--children) the root and the processes forked from it, by pid
 * ascending.  No count bound: a process is its segment's copy, its model
 * and one descriptor (the symbols of its files are shared, sym/files.h).
 * A process whose segment cannot be opened for want of descriptors or
 * memory is counted in skipped, with the reason in skip_why, which every
 * caller states (the host list, /metrics: ymtop_processes_skipped).
 * Processes that run the agent but have sampled nothing yet have no
 * segment to read: counted in unstarted (/metrics:
 * ymtop_processes_unstarted), never started by the fleet.
 */
#ifndef YMTOP_FLEET_H
#define YMTOP_FLEET_H

#include <sys/types.h>

#include "options.h"
#include "session.h"

/* How long one update may spend borrowing threads of idle processes for
 * their allocator figures (session.h), counting only the refreshes that
 * borrow; the others wait for the next.  YM_FLEET_BORROW_S sets it
 * (tests). */
#define FLEET_BORROW_S 0.5

struct fleet_proc {
	pid_t pid;
	struct session s;   /* its model is refreshed by fleet_update */
	/* The host list's process title (/proc/PID/cmdline), read again
	 * when the process's comm or start time changes, or FLEET_TITLE_S
	 * after the last read (a title the process rewrites itself). */
	char     title[256];
	char     title_comm[64];
	uint64_t title_ticks;
	double   title_at;
};
#define FLEET_TITLE_S 5.0

struct fleet {
	struct fleet_proc **p;   /* by pid ascending */
	int   n, cap;
	int   skipped;      /* at the last update: not watched, see skip_why */
	char  skip_why[96]; /* "out of file descriptors (ulimit -n 1024)" */
	int   unstarted;    /* at the last update: agent but no segment yet */
	pid_t *pids;        /* scratch for target_list */
	int   npids;
	int   fixed;        /* only what fleet_add added */
	pid_t root;         /* --children: root and its descendants; 0 all */
	/* Since the start, over every process: the segments' snapshots, and
	 * of those the ones whose stacks were not copied again because the
	 * segment said nothing in them changed (session.h). */
	unsigned long long snapshots, stacks_kept;
	/* Since the start: the /proc reads (proc_reads) of the processes'
	 * refreshes, and of the listings that find them. */
	unsigned long long reads_refresh, reads_list;
	/* Since the start: the reads of the segments (shm_reads) by the
	 * updates, and of those the ones that asked for the allocators'
	 * statistics and waited for the answers (the rest: the listing and
	 * the refreshes). */
	unsigned long long reads_segment, reads_asking;
	/* Called by fleet_update, on its own thread, between two processes'
	 * refreshes and while it waits for the allocators' answers: then
	 * every process's model and the symbols are whole (each process's as
	 * of its last refresh, p[] in no particular order, a process added by
	 * this update with no snapshot yet: s.snapshots 0).  ymtop --serve
	 * answers requests that cannot wait from there.  NULL: none. */
	void (*between)(void *arg);
	void  *between_arg;
};

/* Empty: every agent process (root 0), or root and its descendants.  Also
 * raises the soft limit of open files to the hard one (a descriptor per
 * process). */
void fleet_init(struct fleet *f, pid_t root);
/* Watch pid only (from then on, fixed): attached as -p does, injecting the
 * agent when it has none.  0, or -1 with the reason in e. */
int fleet_add(struct fleet *f, const struct options *o, pid_t pid,
	      struct ym_err *e);
/* Refresh every process (snapshot without the live table), drop the gone
 * ones, add the new ones (unless fixed). */
void fleet_update(struct fleet *f);
/* The index of pid, or -1. */
int fleet_find(const struct fleet *f, pid_t pid);
void fleet_free(struct fleet *f);

/* The parent of pid from /proc/PID/stat, or 0. */
pid_t fleet_ppid(pid_t pid);

#endif
