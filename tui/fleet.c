/*
 * fleet: the processes running the agent that ymtop watches at once, each
 * with its read-only session, found and dropped by fleet_update (see fleet.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fleet.h"
#include "proc.h"
#include "sym/files.h"
#include "target.h"
#include "util/clock.h"
#include "util/stop.h"

/* Descriptors kept free of segments: the symbolizer's files
 * (SYM_FILES_OPEN), the server's connections, /proc reads. */
#define FLEET_FD_SPARE (SYM_FILES_OPEN + 64)

void fleet_init(struct fleet *f, pid_t root)
{
	memset(f, 0, sizeof *f);
	f->root = root;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void drop(struct fleet *f, int i)
{
	session_close(&f->p[i]->s);
	free(f->p[i]);
	memmove(&f->p[i], &f->p[i + 1], (size_t)(f->n - i - 1) * sizeof *f->p);
	f->n--;
}

/* Room for one more process: 0, or -1 with the reason in skip_why. */
static int room(struct fleet *f)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)f->n + FLEET_FD_SPARE >= rl.rlim_cur) {
		snprintf(f->skip_why, sizeof f->skip_why, "open files limit "
			 "(ulimit -n %llu)", (unsigned long long)rl.rlim_cur);
		return -1;
	}
	if (f->n == f->cap) {
		int cap = f->cap ? f->cap * 2 : 64;
		void *v = realloc(f->p, (size_t)cap * sizeof *f->p);
		if (!v) {
			snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
			return -1;
		}
		f->p = v;
		f->cap = cap;
	}
	return 0;
}

int fleet_add(struct fleet *f, const struct options *o, pid_t pid,
	      struct ym_err *e)
{
	struct fleet_proc *p = calloc(1, sizeof *p);
	if (!p)
		return ym_err_set(e, 1, "out of memory");
	if (room(f) != 0) {
		free(p);
		return ym_err_set(e, 1, "%s", f->skip_why);
	}
	if (session_open(&p->s, o, pid, e) != 0) {
		free(p);
		return -1;
	}
	p->s.no_cgroup = 1;   /* one cgroup, many processes: not per process */
	p->s.lean = 1;
	/* shm_control_* refuse from now on, but heap requests (may_ask) */
	p->s.reader.writable = 0;
	p->pid = pid;
	f->fixed = 1;
	f->p[f->n++] = p;
	return 0;
}

int fleet_find(const struct fleet *f, pid_t pid)
{
	for (int i = 0; i < f->n; i++)
		if (f->p[i]->pid == pid)
			return i;
	return -1;
}

pid_t fleet_ppid(pid_t pid)
{
	struct proc_stat st;
	return proc_stat_read(pid, 0, &st) == 0 ? st.ppid : 0;
}

/* Is pid the root or forked from it (at any depth)? */
static int in_tree(pid_t root, pid_t pid)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		if (pid == root)
			return 1;
		pid = fleet_ppid(pid);
	}
	return pid == root;
}

/* A fresh snapshot of a live process: 1; else 0 (then it is dropped).
 * Debug files of stripped modules are asked of debuginfod servers without
 * waiting (the fleet's sessions have no wait budget): a scrape never
 * stalls on a server, and names arrive at a later one.  The allocator's
 * figures, when not current, are asked for after every refresh
 * (ask_all). */
static int fresh(struct fleet *f, struct fleet_proc *p)
{
	char err[256];
	uint64_t n = p->s.snapshots, kept = p->s.stacks_kept;
	unsigned long long reads = proc_reads;
	/* The host list and the exporter show no trends: the agent's
	 * history (a few hundred KiB a process) is not copied. */
	p->s.reader.skip_trend = 1;
	p->s.defer_heap = 1;
	int ok = session_refresh(&p->s, 1, err, sizeof err) == 0 && p->s.model.alive;
	f->snapshots += p->s.snapshots - n;
	f->stacks_kept += p->s.stacks_kept - kept;
	f->reads_refresh += proc_reads - reads;
	if (ok)
		session_symbols(&p->s, 0);
	return ok;
}

static void between(struct fleet *f)
{
	if (f->between)
		f->between(f->between_arg);
}

/* FLEET_BORROW_S, or YM_FLEET_BORROW_S (seconds; tests make it tiny to
 * see every process served in turn). */
static double borrow_budget(void)
{
	const char *e = getenv("YM_FLEET_BORROW_S");
	char *end;
	double v = e && *e ? strtod(e, &end) : -1;
	return e && *e && !*end && v >= 0 && v <= 60 ? v : FLEET_BORROW_S;
}

/* After every refresh: ask the processes whose snapshots' allocator
 * figures are not current (s.heap_pending) at once, wait once
 * (SESSION_HEAP_WAIT_S at most) for the answers, and take them in
 * (session_refresh_heap: the answer, else a borrowed thread within the
 * update's budget, else the figures' age and why).  A process whose
 * snapshot shows current figures (no call since they were taken) is not
 * asked, and costs no read beyond its snapshot's. */
static void ask_all(struct fleet *f)
{
	struct fleet_proc **p = f->p;
	int n = f->n, pending = 0;
	unsigned long long seg = shm_reads;
	for (int i = 0; i < n; i++) {
		p[i]->s.asked_ahead = p[i]->s.heap_pending;
		if (p[i]->s.asked_ahead)
			pending += session_ask_heap(&p[i]->s);
	}
	double end = clock_mono_s() + SESSION_HEAP_WAIT_S;
	while (pending && clock_mono_s() < end && !stop_asked) {
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
		between(f);
		pending = 0;
		for (int i = 0; i < n; i++)
			pending += p[i]->s.asked_ahead && p[i]->s.heap_asked &&
				   !session_heap_answered(&p[i]->s);
	}
	/* Borrowed threads for idle processes: FLEET_BORROW_S of borrowing
	 * each update; the rest at the next (figures taken stay current).
	 * Only the processes that borrowed count: the others' time, a
	 * thousand processes' worth on a loaded machine, would use it up
	 * before the processes that need a thread were reached, at every
	 * update, and those would never have their figures. */
	double budget = borrow_budget(), spent = 0;
	for (int i = n; i-- > 0;) {
		if (!p[i]->s.heap_pending)
			continue;
		double was = p[i]->s.borrow_next, t0 = clock_mono_s();
		p[i]->s.no_borrow = spent >= budget;
		session_refresh_heap(&p[i]->s);
		p[i]->s.no_borrow = 0;
		if (p[i]->s.borrow_next != was)   /* a thread was borrowed, or tried */
			spent += clock_mono_s() - t0;
		between(f);
	}
	f->reads_asking += shm_reads - seg;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = (*(struct fleet_proc *const *)a)->pid;
	pid_t y = (*(struct fleet_proc *const *)b)->pid;
	return (x > y) - (x < y);
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* pid is among f->p[0..n), which are by pid ascending. */
static int watched_in(const struct fleet *f, int n, pid_t pid)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (f->p[mid]->pid == pid)
			return 1;
		if (f->p[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* pid is watched (f->p is by pid ascending between updates). */
static int watched(pid_t pid, void *arg)
{
	const struct fleet *f = arg;
	return watched_in(f, f->n, pid);
}

/* The agent processes we may read into f->pids (unstarted: those that
 * have made no segment yet, target_list_unstarted): how many, or -1.
 * The watched ones are not checked again here: their refresh does. */
static int list(struct fleet *f, int unstarted)
{
	for (;;) {
		int n = unstarted ? target_list_unstarted(f->pids, f->npids)
				  : target_list_known(f->pids, f->npids, watched, f);
		if (n <= f->npids)
			return n;
		int cap = n + n / 4 + 16;
		void *v = realloc(f->pids, (size_t)cap * sizeof *f->pids);
		if (!v)
			return -1;
		f->pids = v;
		f->npids = cap;
	}
}

/* The agent processes not started yet (of the tree, with a root) into
 * f->unstarted. */
static void count_unstarted(struct fleet *f)
{
	int n = f->fixed ? 0 : list(f, 1);
	f->unstarted = 0;
	for (int i = 0; i < n; i++)
		f->unstarted += !f->root || in_tree(f->root, f->pids[i]);
}

/* Whether n processes may each keep their stat and status open (two
 * descriptors besides the segment's) under the open files limit, with
 * the spare; when not, every kept one is closed at once, before any
 * segment is opened. */
static int keep_proc_files(struct fleet *f, int n)
{
	struct rlimit rl;
	int keep = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		   (rl.rlim_cur == RLIM_INFINITY ||
		    3 * (rlim_t)n + FLEET_FD_SPARE < rl.rlim_cur);
	for (int i = 0; i < f->n; i++) {
		f->p[i]->s.keep_proc = keep;
		if (!keep)
			proc_files_close(&f->p[i]->s.proc_files);
	}
	return keep;
}

void fleet_update(struct fleet *f)
{
	unsigned long long reads = proc_reads, seg = shm_reads;
	count_unstarted(f);
	int n = f->fixed ? 0 : list(f, 0);
	f->reads_list += proc_reads - reads;
	f->skipped = 0;
	if (n < 0) {
		n = 0;
		f->skipped = 1;
		snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
	}
	pid_t *pids = f->pids;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!f->root || in_tree(f->root, pids[i]))
			pids[k++] = pids[i];
	n = k;
	/* By pid, as f->p is: which are gone and which are new is then a
	 * search in each, not a scan (a scan of a thousand processes for
	 * each of a thousand is a million comparisons a refresh). */
	if (n > 1)
		qsort(pids, (size_t)n, sizeof *pids, pid_cmp);
	int keep = keep_proc_files(f, n > f->n ? n : f->n);
	/* Gone from the list: dropped; new in it: opened after the others,
	 * so that every process is refreshed in one pass, then asked at once
	 * (ask_all). */
	for (int i = f->n; i-- > 0;)
		if (!f->fixed && !(n && bsearch(&f->p[i]->pid, pids, (size_t)n,
					       sizeof *pids, pid_cmp)))
			drop(f, i);
	int known = f->n;   /* f->p[0..known) by pid ascending */
	for (int j = 0; j < n; j++) {
		if (j > 0 && pids[j] == pids[j - 1])
			continue;
		if (watched_in(f, known, pids[j]))
			continue;
		if (room(f) != 0) {
			f->skipped++;
			continue;
		}
		char err[256];
		struct shm_reader r;
		int rc = target_open(pids[j], &r, err, sizeof err);
		if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM) {
			snprintf(f->skip_why, sizeof f->skip_why, "%s", strerror(-rc));
			f->skipped++;
		}
		if (rc != 0)
			continue;
		r.writable = 0;   /* read only: shm_control_* refuse */
		struct fleet_proc *p = calloc(1, sizeof *p);
		if (!p || session_adopt(&p->s, &r) != 0) {
			free(p);
			shm_reader_close(&r);
			snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
			f->skipped++;
			continue;
		}
		p->s.no_cgroup = 1;
		p->s.lean = 1;
		p->pid = pids[j];
		p->s.symbol_wait_s = 0;
		p->s.keep_proc = keep;
		f->p[f->n++] = p;
	}
	for (int i = f->n; i-- > 0;) {
		if (!fresh(f, f->p[i]))
			drop(f, i);
		between(f);
	}
	ask_all(f);
	qsort(f->p, (size_t)f->n, sizeof *f->p, by_pid);
	f->reads_segment += shm_reads - seg;
}

void fleet_free(struct fleet *f)
{
	while (f->n)
		drop(f, f->n - 1);
	free(f->p);
	free(f->pids);
	memset(f, 0, sizeof *f);
}
