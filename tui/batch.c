/*
 * batch: reports on a schedule (-b): the loop that takes a snapshot,
 * writes the chosen formats and sleeps until the next (see batch.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "cli.h"
#include "fleet.h"
#include "report/prometheus.h"
#include "report/outfile.h"
#include "report/report.h"
#include "session.h"
#include "util/clock.h"
#include "util/stop.h"

/* Standard output is a pipe whose reader has gone (`ymtop -b | head -1`
 * after head exited): the kernel reports POLLERR on the writing end. */
static int stdout_gone(void)
{
	struct stat st;
	struct pollfd p = { STDOUT_FILENO, 0, 0 };
	return fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode) &&
	       poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* Nobody reads the reports any more: done, as top and grep are when
 * their pipe closes (they die of SIGPIPE, which ymtop ignores). */
__attribute__((noreturn))
static void reader_gone(struct session *ss)
{
	session_close(ss);
	exit(0);
}

static void write_one(const struct options *o, struct session *ss, unsigned counter)
{
	struct model *m = &ss->model;
	struct sym *s = ss->sym;
	struct report_opts ro = { o->format, o->top, &o->rules, o->weight, o->sort };
	if (!o->output) {
		errno = 0;
		int rc = report_write(stdout, m, s, &ro);
		fflush(stdout);
		if ((rc != 0 || ferror(stdout)) && (errno == EPIPE || stdout_gone()))
			reader_gone(ss);
		if (rc != 0 || ferror(stdout))
			cli_die(1, "writing the report to standard output failed: %s",
				strerror(errno));
		return;
	}
	char path[4096], err[512];
	if (outfile_expand(o->output, model_pid(m), model_name(m),
			   m->snap.taken_real_ns / 1000000000ULL, counter, path,
			   sizeof path) != 0)
		cli_die(2, "bad -o pattern '%s' (placeholders: %%p %%e %%t %%n %%%%)",
		    o->output);
	if (report_save(path, m, s, &ro, err, sizeof err) != 0)
		cli_die(1, "%s", err);
	fprintf(stderr, "ymtop: wrote %s\n", path);
}

/* session_refresh, or exit 1 with why. */
static void refresh(struct session *ss, pid_t pid)
{
	char err[512];
	int rc = session_refresh(ss, 0, err, sizeof err);
	if (rc == SESSION_ENOMEM)
		cli_die(1, "out of memory");
	if (rc != 0)
		cli_die(1, "pid %ld: %s", (long)pid, err);
}

/* --on-change: has the retained estimate moved by at least pct percent of
 * its value at the last report written?  From nothing, any growth counts. */
static int changed(double last, double now, double pct)
{
	double d = now > last ? now - last : last - now;
	if (last <= 0)
		return now > 0 || pct <= 0;
	return d * 100.0 >= pct * last;
}

/* --snapshot-on: what the last refreshes saw.  A new peak counts when it
 * is at least the threshold and 1 % above the peak of the last report
 * written for it (a peak growing by a few bytes a refresh is one event,
 * not a report each); cgroup events when high, max or oom_kill moved
 * since the refresh before (the first refresh sets the baseline). */
struct snap_state {
	double   peak;
	uint64_t ev[3];
	int      have_ev;
};

static int snapshot_due(const struct options *o, const struct model *m,
			struct snap_state *st)
{
	int due = 0;
	if ((o->snap_on & CLI_SNAP_PEAK) &&
	    m->peak_retained_bytes >= (double)o->snap_peak &&
	    m->peak_retained_bytes > st->peak * 1.01) {
		due = 1;
		st->peak = m->peak_retained_bytes;
	}
	const struct model_cgroup *c = &m->cgroup;
	if ((o->snap_on & CLI_SNAP_PRESSURE) && c->known && c->have_events) {
		uint64_t ev[3] = { c->ev_high, c->ev_max, c->ev_oom_kill };
		if (st->have_ev && memcmp(ev, st->ev, sizeof ev) != 0)
			due = 1;
		memcpy(st->ev, ev, sizeof ev);
		st->have_ev = 1;
	}
	return due;
}

double batch_settle(const struct options *o, const struct ym_header *h,
		    uint64_t now_mono_ns)
{
	if (!(h->flags & YM_FLAG_INJECTED) || (h->flags & YM_FLAG_EXITED))
		return 0;
	double want = o->interval_set ? o->interval : BATCH_SETTLE_S;
	double ran = now_mono_ns > h->start_mono_ns ?
		(double)(now_mono_ns - h->start_mono_ns) / 1e9 : 0;
	return ran < want ? want - ran : 0;
}

/* session_wait, but also ending soon after the reader of our standard
 * output is gone when the reports go there (exit 0), not at the next
 * report.  session_wait returns before its time only when the process
 * exited or a signal came; steps of WAIT_STEP_S leave it time for its
 * exec check (every 2 s). */
#define WAIT_STEP_S 2.5
static void wait_next(struct session *ss, double secs, int to_stdout)
{
	double end = clock_mono_s() + secs;
	for (;;) {
		if (to_stdout && stdout_gone())
			reader_gone(ss);
		double left = end - clock_mono_s();
		if (left <= 0 || stop_asked)
			return;
		double step = left < WAIT_STEP_S ? left : WAIT_STEP_S, t0 = clock_mono_s();
		session_wait(ss, step);
		if (clock_mono_s() - t0 < step)
			return;
	}
}

/* One exposition of f's processes to standard output or o->output
 * (its %p and %e refused: they would name one process of several). */
static void write_many(const struct options *o, struct fleet *f, unsigned counter)
{
	struct report_opts ro = { o->format, o->top, &o->rules, o->weight, o->sort };
	struct prom_source *src = calloc((size_t)f->n + 1, sizeof *src);
	if (!src)
		cli_die(1, "out of memory");
	for (int i = 0; i < f->n; i++) {
		session_symbols(&f->p[i]->s, 1);
		src[i].m = &f->p[i]->s.model;
		src[i].s = f->p[i]->s.sym;
	}
	if (!o->output) {
		errno = 0;
		int rc = prometheus_write_many(stdout, src, (size_t)f->n, &ro);
		fflush(stdout);
		free(src);
		if ((rc != 0 || ferror(stdout)) && (errno == EPIPE || stdout_gone())) {
			fleet_free(f);
			exit(0);
		}
		if (rc != 0 || ferror(stdout))
			cli_die(1, "writing the report to standard output failed: %s",
				strerror(errno));
		return;
	}
	char path[4096], other[4096], err[512];
	uint64_t now = (uint64_t)time(NULL);
	if (outfile_expand(o->output, 1, "a", now, counter, path, sizeof path) != 0 ||
	    outfile_expand(o->output, 2, "b", now, counter, other, sizeof other) != 0)
		cli_die(2, "bad -o pattern '%s' (placeholders: %%t %%n %%%% with several -p)",
			o->output);
	if (strcmp(path, other))
		cli_die(2, "-o '%s': %%p and %%e name one process, and several -p "
			"write one report of them all (use %%t or %%n)", o->output);
	struct outfile of;
	if (outfile_begin_replace(&of, path, err, sizeof err) != 0)
		cli_die(1, "%s", err);
	if (prometheus_write_many(of.f, src, (size_t)f->n, &ro) != 0) {
		int e = errno;
		outfile_abort(&of);
		cli_die(1, "writing %s failed: %s", path, strerror(e));
	}
	free(src);
	if (outfile_commit(&of, err, sizeof err) != 0)
		cli_die(1, "%s", err);
	fprintf(stderr, "ymtop: wrote %s\n", path);
}

int batch_run_many(const struct options *o)
{
	static struct fleet f;
	static struct ym_err e;
	fleet_init(&f, 0);
	double settle = 0;
	uint64_t now = clock_mono_ns();
	for (int i = 0; i < o->npids; i++) {
		if (fleet_find(&f, o->pids[i]) >= 0)
			continue;   /* the same -p twice */
		if (fleet_add(&f, o, o->pids[i], &e) != 0)
			cli_die_err(&e);
		struct ym_header h;
		struct session *s = &f.p[f.n - 1]->s;
		double d = shm_header_read(&s->reader, &h, NULL, 0) == 0 ?
			batch_settle(o, &h, now) : 0;
		if (d > settle)
			settle = d;
	}
	/* Just injected: a baseline now, the first report after the
	 * settle time (as batch_run). */
	if (settle > 0) {
		fleet_update(&f);
		double end = clock_mono_s() + settle;
		while (!stop_asked && clock_mono_s() < end) {
			struct timespec ts = { 0, 100000000 };
			nanosleep(&ts, NULL);
		}
	}
	long limit = o->iterations < 0 ? 0 : o->iterations;
	for (unsigned iter = 1;; iter++) {
		fleet_update(&f);
		if (!f.n)
			break;   /* every process exited: nothing left to write */
		write_many(o, &f, iter);
		if ((limit && (long)iter >= limit) || !f.n || stop_asked)
			break;
		double end = clock_mono_s() + o->interval;
		while (!stop_asked && clock_mono_s() < end) {
			if (!o->output && stdout_gone()) {
				fleet_free(&f);
				exit(0);
			}
			struct timespec ts = { 0, 100000000 };
			nanosleep(&ts, NULL);
		}
		if (stop_asked)
			break;
	}
	fleet_free(&f);
	return 0;
}

int batch_run(const struct options *o, pid_t pid)
{
	struct session ss;
	struct model *m = &ss.model;
	static struct ym_err e;
	if (session_open(&ss, o, pid, &e) != 0)
		cli_die_err(&e);
	/* Just injected: a report now would be empty (the agent has seen
	 * nothing yet).  Take a baseline, for the rates, and report once the
	 * agent has run for the settle time. */
	struct ym_header h;
	uint64_t now = clock_mono_ns();
	double settle = shm_header_read(&ss.reader, &h, NULL, 0) == 0 ?
		batch_settle(o, &h, now) : 0;
	if (settle > 0) {
		refresh(&ss, pid);
		session_wait(&ss, settle);
	}
	long limit = o->iterations < 0 ? (o->batch ? 0 : 1) : o->iterations;
	/* iter counts snapshots (-n); written counts reports (%n), which
	 * differ with --on-change. */
	unsigned written = 0;
	double last_retained = 0;
	struct snap_state snap = { 0 };
	for (unsigned iter = 1;; iter++) {
		refresh(&ss, pid);
		int last = (limit && (long)iter >= limit) || !m->alive || stop_asked;
		/* The first report, the final one (the target exited), and
		 * with --on-change those in between that moved enough; with
		 * --snapshot-on those its events call for, and the final. */
		int due = o->snap_on ? snapshot_due(o, m, &snap) || !m->alive :
			  o->on_change < 0 || written == 0 || !m->alive ||
			  changed(last_retained, m->retained_bytes, o->on_change);
		if (due) {
			session_symbols(&ss, 1);
			write_one(o, &ss, ++written);
			last_retained = m->retained_bytes;
		}
		if (last)
			break;
		wait_next(&ss, o->interval, !o->output);
		if (stop_asked)
			break;
	}
	session_close(&ss);
	return 0;
}
