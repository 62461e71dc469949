#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "fmt.h"
#include "model/model.h"
#include "report/outfile.h"
#include "proc.h"
#include "report/report.h"
#include "shm.h"
#include "sym/sym.h"
#include "target.h"

/* Sleep up to secs, waking early on a signal or when the target exits. */
static void wait_interval(double secs, struct shm_reader *r, uint64_t start_ticks)
{
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	double t = (double)end.tv_sec + (double)end.tv_nsec / 1e9 + secs;
	unsigned steps = 0;
	for (;;) {
		if (cli_stop)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double left = t - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
		if (left <= 0)
			return;
		uint32_t flags = 0;
		if (pread(r->fd, &flags, sizeof flags,
			  __builtin_offsetof(struct ym_header, flags)) == sizeof flags &&
		    (flags & YM_FLAG_EXITED))
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

static void write_one(const struct options *o, struct model *m, struct sym *s,
		      unsigned counter)
{
	struct report_opts ro = { o->format, o->top, &o->rules, o->weight, o->sort };
	if (!o->output) {
		int rc = report_write(stdout, m, s, &ro);
		fflush(stdout);
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

/* --on-change: has the retained estimate moved by at least pct percent of
 * its value at the last report written?  From nothing, any growth counts. */
static int changed(double last, double now, double pct)
{
	double d = now > last ? now - last : last - now;
	if (last <= 0)
		return now > 0 || pct <= 0;
	return d * 100.0 >= pct * last;
}

void batch_apply_rate(const struct options *o, struct shm_reader *r)
{
	if (!o->rate)
		return;
	struct ym_header h;
	if (pread(r->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		cli_die(1, "pid %ld: cannot read the segment header", (long)r->pid);
	if (h.sample_rate <= 1)
		cli_die(1, "pid %ld samples every allocation (YM_SAMPLE_RATE=1, chosen at "
			"its start): --rate cannot change that; restart it with "
			"YM_SAMPLE_RATE=BYTES", (long)r->pid);
	int rc = shm_control_rate(r, o->rate);
	if (rc == -EPERM)
		cli_die(1, "pid %ld: the segment is read-only to us, so --rate cannot "
			"reach the agent; run ymtop as the process's user or root",
			(long)r->pid);
	if (rc != 0)
		cli_die(1, "pid %ld: cannot write the control block: %s", (long)r->pid,
			strerror(-rc));
	char a[32], b[32];
	fprintf(stderr, "ymtop: pid %ld: sample rate %s asked (was %s); each thread "
		"takes it at its next sample\n", (long)r->pid,
		fmt_bytes((double)o->rate, a, sizeof a),
		fmt_bytes((double)h.sample_rate, b, sizeof b));
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

int batch_run(const struct options *o, pid_t pid)
{
	struct shm_reader r;
	struct model m;
	char err[512];
	target_attach(pid, &r);
	batch_apply_rate(o, &r);
	struct sym *s = sym_new(target_sym_root(&r));
	if (!s)
		cli_die(1, "cannot start the symbolizer (libdw)");
	model_init(&m);
	uint32_t known_modules = UINT32_MAX;
	/* Just injected: a report now would be empty (the agent has seen
	 * nothing yet).  Take a baseline, for the rates, and report once the
	 * agent has run for the settle time. */
	struct ym_header h;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double settle = pread(r.fd, &h, sizeof h, 0) == (ssize_t)sizeof h ?
		batch_settle(o, &h, (uint64_t)ts.tv_sec * 1000000000ULL +
			     (uint64_t)ts.tv_nsec) : 0;
	if (settle > 0) {
		struct shm_snapshot snap;
		if (shm_snapshot_take(&r, &snap, err, sizeof err) != 0)
			cli_die(1, "pid %ld: %s", (long)pid, err);
		if (model_update(&m, &snap) != 0)
			cli_die(1, "out of memory");
		wait_interval(settle, &r, m.snap.hdr.start_ticks);
	}
	long limit = o->iterations < 0 ? (o->batch ? 0 : 1) : o->iterations;
	/* iter counts snapshots (-n); written counts reports (%n), which
	 * differ with --on-change. */
	unsigned written = 0;
	double last_retained = 0;
	for (unsigned iter = 1;; iter++) {
		struct shm_snapshot snap;
		if (shm_snapshot_take(&r, &snap, err, sizeof err) != 0)
			cli_die(1, "pid %ld: %s", (long)pid, err);
		if (model_update(&m, &snap) != 0)
			cli_die(1, "out of memory");
		if (m.snap.nmodules != known_modules) {
			sym_set_modules(s, m.snap.modules, m.snap.nmodules);
			known_modules = m.snap.nmodules;
		}
		int last = (limit && (long)iter >= limit) || !m.alive || cli_stop;
		/* The first report, the final one (the target exited), and
		 * with --on-change those in between that moved enough. */
		if (o->on_change < 0 || written == 0 || !m.alive ||
		    changed(last_retained, m.retained_bytes, o->on_change)) {
			write_one(o, &m, s, ++written);
			last_retained = m.retained_bytes;
		}
		if (last)
			break;
		wait_interval(o->interval, &r, m.snap.hdr.start_ticks);
		if (cli_stop)
			break;
	}
	model_free(&m);
	sym_free(s);
	shm_reader_close(&r);
	return 0;
}

