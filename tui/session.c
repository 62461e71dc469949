/*
 * session: one watched process: its reader, model and symbolizer, and the
 * snapshot -> facts -> model sequence (see session.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmt.h"
#include "model/memory.h"
#include "ptrace/inject.h"
#include "proc.h"
#include "session.h"
#include "target.h"
#include "util/clock.h"
#include "util/stop.h"

/* --rate: ask the agent for o->rate (nothing when 0); one line on stderr
 * says so.  -1 with e set (status 1) when the agent samples exactly (its
 * rate is fixed) or the control block is read-only. */
static int apply_rate(const struct options *o, struct shm_reader *r,
		      struct ym_err *e)
{
	if (!o->rate)
		return 0;
	struct ym_header h;
	if (shm_header_read(r, &h, NULL, 0) != 0)
		return ym_err_set(e, 1, "pid %ld: cannot read the segment header", (long)r->pid);
	if (h.sample_rate <= 1)
		return ym_err_set(e, 1, "pid %ld samples every allocation (YM_SAMPLE_RATE=1, chosen at "
			"its start): --rate cannot change that; restart it with "
			"YM_SAMPLE_RATE=BYTES", (long)r->pid);
	int rc = shm_control_rate(r, o->rate);
	if (rc == -EPERM)
		return ym_err_set(e, 1, "pid %ld: the segment is read-only to us, so --rate cannot "
			"reach the agent; run ymtop as the process's user or root",
			(long)r->pid);
	if (rc != 0)
		return ym_err_set(e, 1, "pid %ld: cannot write the control block: %s", (long)r->pid,
			strerror(-rc));
	char a[32], b[32];
	fprintf(stderr, "ymtop: pid %ld: sample rate %s asked (was %s); each thread "
		"takes it at its next sample\n", (long)r->pid,
		fmt_bytes((double)o->rate, a, sizeof a),
		fmt_bytes((double)h.sample_rate, b, sizeof b));
	return 0;
}

/* --max-overhead: ask the agent for a cost budget of o->max_overhead
 * millionths of CPU time (nothing when 0); one line on stderr says so.
 * -1 with e set (status 1) when the agent cannot take it. */
static int apply_budget(const struct options *o, struct shm_reader *r,
			struct ym_err *e)
{
	if (!o->max_overhead)
		return 0;
	struct ym_header h;
	if (shm_header_read(r, &h, NULL, 0) != 0)
		return ym_err_set(e, 1, "pid %ld: cannot read the segment header", (long)r->pid);
	int rc = shm_control_budget(r, o->max_overhead);
	if (rc == -EOPNOTSUPP)
		return ym_err_set(e, 1, "pid %ld: its agent (segment ABI %u) has no cost budget: "
			"--max-overhead needs ABI 9; restart the process with the agent of "
			"this ymtop", (long)r->pid, h.abi_version);
	if (rc == -EINVAL)
		return ym_err_set(e, 1, "pid %ld samples every allocation (YM_SAMPLE_RATE=1, chosen at "
			"its start): a budget cannot change that; restart it with "
			"YM_SAMPLE_RATE=BYTES", (long)r->pid);
	if (rc == -EPERM)
		return ym_err_set(e, 1, "pid %ld: the segment is read-only to us, so --max-overhead "
			"cannot reach the agent; run ymtop as the process's user or root",
			(long)r->pid);
	if (rc != 0)
		return ym_err_set(e, 1, "pid %ld: cannot write the control block: %s", (long)r->pid,
			strerror(-rc));
	fprintf(stderr, "ymtop: pid %ld: sampling cost budget %g%% of its CPU time asked; "
		"the agent lengthens its rate when a window goes over\n", (long)r->pid,
		o->max_overhead / 1e4);
	return 0;
}

/* Wait up to ms for the agent to answer request `asked` (a process that
 * allocates answers at its next call).  1 when it did. */
static int wait_heap(struct shm_reader *r, uint64_t asked, double ms)
{
	double end = clock_mono_s() + ms / 1e3;
	for (;;) {
		uint64_t answered;
		if (!asked || shm_heap_answered(r, &answered) != 0)
			return 0;
		if (answered >= asked)
			return 1;
		if (clock_mono_s() >= end || stop_asked)
			return 0;
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
}

int session_ask_heap(struct session *s)
{
	uint64_t asked = 0;
	if (shm_control_heap(&s->reader, &asked) != 0)
		asked = 0;
	s->heap_asked = asked;
	s->heap_asked_at = clock_mono_s();
	return asked != 0;
}

int session_heap_answered(struct session *s)
{
	uint64_t answered;
	return s->heap_asked && shm_heap_answered(&s->reader, &answered) == 0 &&
	       answered >= s->heap_asked;
}

/* The snapshot's figures are not current and the request went
 * unanswered for SESSION_HEAP_WAIT_S: the process made no allocator call
 * since we asked.  Borrow one of its threads to take them
 * (inject_heapstats): not while the agent's own limit defers an answer
 * (every YM_HEAP_MIN_INTERVAL_NS and 100 times the last call's cost: a
 * busy process with a costly heap answers later, and a borrow would take
 * them more often than the agent allows itself), not more often than
 * every SESSION_BORROW_MIN_S, after a refusal (not allowed to trace it,
 * traced by a debugger) not before SESSION_BORROW_RETRY_S.  1 when
 * taken. */
static int borrow_heap(struct session *s)
{
	if (s->no_borrow || getenv("YM_NO_BORROW"))
		return 0;
	double now = clock_mono_s();
	if (now < s->borrow_next || now - s->heap_asked_at < SESSION_HEAP_WAIT_S)
		return 0;
	const struct ym_heapstats *hs = &s->model.snap.hdr.heap;
	uint64_t gap = hs->cost_ns > YM_HEAP_MIN_INTERVAL_NS / 100 ?
		       100 * hs->cost_ns : YM_HEAP_MIN_INTERVAL_NS;
	uint64_t mono = (uint64_t)(now * 1e9);
	if (hs->taken_mono_ns && hs->cost_ns < UINT64_MAX / 100 &&
	    mono < hs->taken_mono_ns + gap)
		return 0;
	struct inject_result res;
	char err[256];
	if (inject_heapstats(s->reader.pid, &res, err, sizeof err) != 0) {
		s->borrow_next = now + SESSION_BORROW_RETRY_S;
		snprintf(s->borrow_err, sizeof s->borrow_err, "%s", err);
		return 0;
	}
	s->borrow_next = now + SESSION_BORROW_MIN_S;
	s->borrow_err[0] = '\0';
	return 1;
}

/* The snapshot's allocator figures are not current and asking may get
 * them: the process is alive and the agent did not say why it has none
 * (musl, glibc before 2.33, another allocator: asking, or borrowing a
 * thread, cannot change that).  Figures that are current (no call
 * happened since they were taken, or they answer this refresh's
 * request) stand: asking then would only make the process's next call
 * take them again. */
static int heap_wanted(const struct model *m)
{
	return m->alive && !model_heap_current(m) && !model_heap_missing(m, NULL);
}

/* After the snapshot: when heap_wanted, ask (unless the caller did),
 * wait for the answer, or borrow a thread, and copy the new figures in
 * as the answer to this refresh's request. */
static void fresh_heap(struct session *s)
{
	struct model *m = &s->model;
	m->heap_why[0] = '\0';
	if (!heap_wanted(m))
		return;
	int got;
	if (s->asked_ahead)
		got = session_heap_answered(s);
	else
		got = session_ask_heap(s) &&
		      wait_heap(&s->reader, s->heap_asked, SESSION_HEAP_WAIT_S * 1e3);
	if (!got && s->heap_asked)
		got = borrow_heap(s);
	if (got && shm_heap_read(&s->reader, &m->snap) == 0)
		m->snap.heap_asked = s->heap_asked;
	else if (s->borrow_err[0])
		snprintf(m->heap_why, sizeof m->heap_why, "no allocator call since, "
			 "and no thread could be borrowed: %s", s->borrow_err);
	else
		snprintf(m->heap_why, sizeof m->heap_why, "no allocator call since");
}

int session_adopt(struct session *s, const struct shm_reader *r)
{
	memset(s, 0, sizeof *s);
	s->reader = *r;
	s->sym = sym_new(target_sym_root(&s->reader));
	if (!s->sym)
		return -1;
	sym_set_pid(s->sym, s->reader.pid);
	model_init(&s->model);
	resident_init(&s->resident);
	s->known_modules = UINT32_MAX;
	s->symbol_wait_s = SESSION_SYMBOL_WAIT_S;
	return 0;
}

int session_open(struct session *s, const struct options *o, pid_t pid,
		 struct ym_err *e)
{
	struct shm_reader r;
	if (target_attach(pid, &r, e) != 0)
		return -1;
	if (apply_rate(o, &r, e) != 0 || apply_budget(o, &r, e) != 0) {
		shm_reader_close(&r);
		return -1;
	}
	if (session_adopt(s, &r) != 0) {
		shm_reader_close(&r);
		return ym_err_set(e, 1, "cannot start the symbolizer (libdw)");
	}
	return 0;
}

void session_symbols(struct session *s, int progress)
{
	const struct model *m = &s->model;
	for (uint32_t i = 0; !s->prefetched && i < m->nstacks; i++)
		for (uint32_t d = 0; d < m->stacks[i].depth; d++)
			sym_prefetch(s->sym, m->stacks[i].frames[d]);
	for (uint32_t i = 0; !s->prefetched && i < m->snap.nalarms; i++) {
		const struct ym_alarm *al = shm_alarm(&m->snap, i);
		for (uint32_t d = 0; d < al->depth; d++)
			sym_prefetch(s->sym, al->frames[d]);
	}
	s->prefetched = 1;
	char line[256];
	int said = 0;
	double t0 = clock_mono_s();
	while (!stop_asked && s->symbol_wait_s > 0 &&
	       sym_pending(s->sym, line, sizeof line) > 0) {
		if (progress && !said++)
			fprintf(stderr, "ymtop: %s (waiting at most %.0f s)\n", line,
				s->symbol_wait_s);
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
		double t1 = clock_mono_s();
		s->symbol_wait_s -= t1 - t0;
		t0 = t1;
	}
	sym_poll(s->sym);
}

/* How the process that wrote snap ended: its zombie's status in /proc
 * (pi: NULL when gone) — the kernel's word, also for a signal — else
 * what the agent recorded at exit() (ABI 6), else unknown. */
static void read_exit(const struct shm_snapshot *snap,
		      const struct proc_info *pi, struct model_facts *f)
{
	const struct ym_header *h = &snap->hdr;
	f->exit_how = PROC_EXIT_UNKNOWN;
	if (pi && pi->start_ticks == h->start_ticks)
		f->exit_how = proc_exit(pi, &f->exit_value);
	if (f->exit_how == PROC_EXIT_UNKNOWN && ym_abi_has_exit_status(h->abi_version) &&
	    (h->flags & YM_FLAG_EXITED) && h->exit_how == YM_EXIT_STATUS) {
		f->exit_how = PROC_EXIT_STATUS;
		f->exit_value = (int)(h->exit_status & 0xff);
	}
}

/* What /proc says of the process that wrote snap, into f (its thread
 * names into s->names).  -1 when out of memory. */
static int read_facts(struct session *s, const struct shm_snapshot *snap,
		      struct model_facts *f)
{
	memset(f, 0, sizeof *f);
	/* Live while the process that wrote the segment still runs and
	 * still maps it: not after its pid went to another process, nor
	 * after it exec'd a program without the agent. */
	pid_t pid = snap->pid ? snap->pid : (pid_t)snap->hdr.pid;
	int have_proc, lean = s->lean && s->lean_proc.pid == pid;
	if (lean) {
		f->proc = s->lean_proc;
		if (!s->keep_proc)
			proc_files_close(&s->proc_files);
		have_proc = proc_reread_kept(&f->proc, s->keep_proc ?
					     &s->proc_files : NULL) == 0;
	} else
		have_proc = proc_read(pid, &f->proc) == 0;
	enum proc_writer w = have_proc ? proc_writer_stat(&f->proc,
				 snap->hdr.start_ticks) : WRITER_GONE;
	double now = clock_mono_s();
	if (w == WRITER_LIVE && (!lean || now - s->maps_at >= SESSION_MAPS_S ||
	    f->proc.vsize != s->maps_vsize ||
	    strcmp(f->proc.comm, s->maps_comm) != 0)) {
		w = proc_writer_of(pid, &f->proc, snap->hdr.start_ticks,
				   snap->seg_dev, snap->seg_ino);
		s->maps_at = now;
		s->maps_vsize = f->proc.vsize;
		snprintf(s->maps_comm, sizeof s->maps_comm, "%s", f->proc.comm);
	}
	if (s->lean && have_proc)
		s->lean_proc = f->proc;
	f->alive = have_proc && w == WRITER_LIVE &&
		   !(snap->hdr.flags & YM_FLAG_EXITED);
	/* Exec'd a program without the agent: it did not exit, and exec
	 * gave its heap back. */
	f->execed = have_proc && w == WRITER_EXECED &&
		    !(snap->hdr.flags & YM_FLAG_EXITED);
	if (!f->alive) {
		/* Between giving its memory back (its mappings gone: not
		 * live) and becoming a zombie a process is still exiting,
		 * for long after a SIGKILL while the kernel reclaims; how it
		 * ended is the zombie's word: wait for it, bounded. */
		for (int i = 0; have_proc && !f->execed && f->proc.state != 'Z' &&
		     f->proc.start_ticks == snap->hdr.start_ticks &&
		     i < SESSION_ZOMBIE_TRIES; i++) {
			struct timespec ts = { 0, SESSION_ZOMBIE_STEP_NS };
			nanosleep(&ts, NULL);
			have_proc = proc_read(pid, &f->proc) == 0;
		}
		read_exit(snap, have_proc ? &f->proc : NULL, f);
		return 0;
	}
	/* The name: cmdline's argv[0] when comm is cut (15 bytes), read
	 * again when comm changes (a new name, or exec). */
	if (!lean || strcmp(s->name_comm, f->proc.comm) != 0 || !s->lean_name[0])
		proc_display_name(&f->proc, f->name, sizeof f->name);
	else
		snprintf(f->name, sizeof f->name, "%s", s->lean_name);
	if (s->lean) {
		snprintf(s->lean_name, sizeof s->lean_name, "%s", f->name);
		snprintf(s->name_comm, sizeof s->name_comm, "%s", f->proc.comm);
	}
	f->age_s = proc_age_s(&f->proc);
	if (s->lean)
		return 0;
	proc_rollup(pid, &f->proc.mem);   /* RSS explained; kept unread on error */
	if (snap->nthreads > s->nnames) {
		void *p = realloc(s->names, (size_t)snap->nthreads * sizeof *s->names);
		if (!p)
			return -1;
		s->names = p;
		s->nnames = snap->nthreads;
	}
	/* A slot's own name is the one its thread had at exit; a running
	 * thread's is /proc's, found by the tid the agent saw: in a pid
	 * namespace below ours (a container) that is the namespace's. */
	struct proc_task_map tm = { NULL, 0 };
	int nested = f->proc.nslevels > 1 && proc_task_map_read(pid, &tm) == 0;
	for (uint32_t i = 0; i < snap->nthreads; i++) {
		const struct ym_thread *t = &snap->threads[i];
		s->names[i][0] = '\0';
		if (t->name[0] || !t->tid || t->state == YM_THREAD_FREE)
			continue;
		uint32_t tid = nested ? proc_task_map_find(&tm, t->tid) : t->tid;
		if (tid && (nested || f->proc.nslevels <= 1))
			proc_thread_name(pid, tid, s->names[i], sizeof s->names[i]);
	}
	proc_task_map_free(&tm);
	f->thread_names = (const char (*)[MODEL_THREAD_NAME])s->names;
	f->nthread_names = snap->nthreads;
	return 0;
}

/* Allocators the agent cannot see (unseen.h): the modules' symbols, read
 * once each, and the call count against the anonymous memory nothing
 * else explains; the line goes into the model. */
static void watch_unseen(struct session *s)
{
	struct model *m = &s->model;
	if (!m->alive)
		return;
	/* The root (two stats of /proc) only for modules not scanned yet. */
	if (s->unseen.scanned != m->snap.nmodules)
		unseen_scan(&s->unseen, &m->snap, target_sym_root(&s->reader));
	struct model_memory mm;
	model_memory(m, &mm);
	unseen_watch(&s->unseen, m->snap.totals.alloc_objects +
		     m->snap.totals.free_objects, mm.unexplained, mm.have_rss);
	unseen_line(&s->unseen, m->unseen, sizeof m->unseen);
	snprintf(m->unseen_allocator, sizeof m->unseen_allocator, "%s",
		 unseen_allocator(&s->unseen));
}

int session_refresh(struct session *s, int skip_live, char *err, size_t len)
{
	struct shm_snapshot snap;
	struct model_facts facts;
	struct shm_snapshot *prev = s->model.have_snap ? &s->model.snap : NULL;
	s->reader.skip_live = skip_live;
	/* A request of the caller's answers this refresh when made after its
	 * snapshot (session_refresh_heap): none yet. */
	s->asked_ahead = 0;
	s->heap_pending = 0;
	int rc = shm_snapshot_take_since(&s->reader, &snap, prev, err, len);
	snap.heap_asked = 0;
	if (rc != 0)
		return SESSION_EREAD;
	rc = read_facts(s, &snap, &facts);
	/* The writer ended between the copy and /proc's answer: the copy
	 * may lack its last allocations and how it exited.  Nothing writes
	 * the segment any more, so one more copy is its final state. */
	if (rc == 0 && !facts.alive && !(snap.hdr.flags & YM_FLAG_EXITED)) {
		struct shm_snapshot last;
		if (shm_snapshot_take_since(&s->reader, &last, &snap, err, len) == 0) {
			last.heap_asked = snap.heap_asked;
			last.reused &= snap.reused;   /* what the model's still is */
			shm_snapshot_free(&snap);
			snap = last;
			rc = read_facts(s, &snap, &facts);
		}
	}
	unsigned reused = snap.reused;
	if (rc != 0 || model_update_facts(&s->model, &snap, &facts) != 0) {
		/* The model keeps its snapshot: with what snap took over. */
		shm_snapshot_giveback(&snap, prev);
		shm_snapshot_free(&snap);
		snprintf(err, len, "out of memory");
		return SESSION_ENOMEM;
	}
	s->snapshots++;
	s->stacks_kept += (reused & SHM_REUSED_STACKS) != 0;
	/* Frames seen before: the same stacks, and alarms, as then. */
	if ((reused & SHM_REUSED_STACKS) == 0 ||
	    ((reused & SHM_REUSED_ALARMS) == 0 && s->model.snap.nalarms))
		s->prefetched = 0;
	/* The allocator's figures, and what depends on them (the unseen
	 * allocators' figures), now or, for a caller that asks many
	 * processes at once, in session_refresh_heap. */
	s->heap_pending = s->defer_heap && heap_wanted(&s->model);
	if (!s->heap_pending) {
		fresh_heap(s);
		watch_unseen(s);
	}
	resident_update(&s->resident, &s->model);
	/* The cgroup while the process runs; its last picture once it has
	 * exited (a zombie's file names the root cgroup). */
	struct model *md = &s->model;
	if (!s->no_cgroup && md->alive) {
		/* A process already exiting names no cgroup any more: its
		 * last picture stays. */
		struct model_cgroup cg;
		cgmem_read(model_pid(md), "/sys/fs/cgroup", &cg);
		if (cg.known || !md->cgroup.known) {
			int had = md->cgroup.known && md->cgroup.have_events;
			cg.oom_kill_moved = had && cg.have_events &&
					    cg.ev_oom_kill > md->cgroup.ev_oom_kill;
			md->cgroup = cg;
		}
	}
	else if (!s->no_cgroup && !md->cgroup.oom_killed &&
		 md->exit_how == PROC_EXIT_SIGNAL && md->exit_value == SIGKILL)
		cgmem_oom_killed("/sys/fs/cgroup", &md->cgroup);
	const struct shm_snapshot *m = &s->model.snap;
	if (m->nmodules != s->known_modules) {
		sym_set_modules(s->sym, m->modules, m->nmodules);
		s->known_modules = m->nmodules;
	}
	sym_set_pycodes(s->sym, m->pycodes, m->npycodes);
	return 0;
}

void session_refresh_heap(struct session *s)
{
	if (!s->heap_pending)
		return;
	s->heap_pending = 0;
	fresh_heap(s);
	s->asked_ahead = 0;
	watch_unseen(s);
}

void session_wait(struct session *s, double secs)
{
	const struct shm_reader *r = &s->reader;
	uint64_t start_ticks = s->model.snap.hdr.start_ticks;
	double t = clock_mono_s() + secs;
	unsigned steps = 0;
	for (;;) {
		if (stop_asked)
			return;
		double left = t - clock_mono_s();
		if (left <= 0)
			return;
		struct ym_header h;
		if (shm_header_read(&s->reader, &h, NULL, 0) == 0 &&
		    (h.flags & YM_FLAG_EXITED))
			return;
		if (!proc_same(r->pid, start_ticks))
			return;
		/* Exec'd away (a maps read: every 2 s, not every step). */
		if (++steps % 20 == 0 &&
		    proc_writer(r->pid, start_ticks, r->dev, r->ino) != WRITER_LIVE)
			return;
		double step = left < 0.1 ? left : 0.1;
		struct timespec ts = { 0, (long)(step * 1e9) };
		nanosleep(&ts, NULL);
	}
}

void session_close(struct session *s)
{
	proc_files_close(&s->proc_files);
	resident_free(&s->resident);
	model_free(&s->model);
	sym_free(s->sym);
	shm_reader_close(&s->reader);
	free(s->names);
	memset(s, 0, sizeof *s);
}
