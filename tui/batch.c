#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "model.h"
#include "outfile.h"
#include "proc.h"
#include "report.h"
#include "shm.h"
#include "sym.h"
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
	struct report_opts ro = { o->format, o->top, &o->rules, o->weight };
	if (!o->output) {
		int rc = report_write(stdout, m, s, &ro);
		fflush(stdout);
		if (rc != 0 || ferror(stdout))
			cli_die(1, "writing the report to standard output failed: %s",
				strerror(errno));
		return;
	}
	char path[4096], err[512];
	if (outfile_expand(o->output, model_pid(m), m->snap.hdr.exe,
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

int batch_run(const struct options *o, pid_t pid)
{
	struct shm_reader r;
	struct model m;
	char err[512];
	target_attach(pid, &r);
	struct sym *s = sym_new(target_sym_root(&r));
	if (!s)
		cli_die(1, "cannot start the symbolizer (libdw)");
	model_init(&m);
	uint32_t known_modules = UINT32_MAX;
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

