/*
 * sqlout: the model as an SQLite database (see sqlout.h for the schema).
 */
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlout.h"

static const char schema[] =
	"PRAGMA journal_mode=MEMORY;"
	"PRAGMA synchronous=OFF;"   /* report_save syncs the finished file */
	"BEGIN;"
	"CREATE TABLE meta(pid INTEGER, exe TEXT, time REAL, uptime_s REAL,"
	" state TEXT, sample_rate INTEGER, version TEXT,"
	" allocated_bytes INTEGER, allocated_objects INTEGER,"
	" freed_bytes INTEGER, freed_objects INTEGER, in_use_bytes INTEGER,"
	" retained_bytes INTEGER, retained_objects INTEGER, requested_bytes INTEGER,"
	" mmap_retained_bytes INTEGER);"
	"CREATE TABLE stacks(id INTEGER PRIMARY KEY, function TEXT, file TEXT,"
	" line INTEGER, retained_bytes INTEGER, retained_objects INTEGER,"
	" allocated_bytes INTEGER, allocated_objects INTEGER, samples INTEGER,"
	" live_samples INTEGER, tid INTEGER, oldest_age_ns INTEGER, kind TEXT);"
	"CREATE TABLE frames(stack INTEGER REFERENCES stacks(id),"
	" position INTEGER, function TEXT, file TEXT, line INTEGER,"
	" module TEXT, inlined INTEGER, address INTEGER, display INTEGER);"
	"CREATE TABLE allocations(address INTEGER, size INTEGER,"
	" weight_bytes INTEGER, weight_objects REAL, age_ns INTEGER, tid INTEGER,"
	" stack INTEGER REFERENCES stacks(id));"
	"CREATE TABLE lifetimes(stack INTEGER REFERENCES stacks(id),"
	" upto_ns INTEGER, count INTEGER, bytes INTEGER);"
	"CREATE TABLE threads(tid INTEGER, name TEXT, state TEXT,"
	" allocated_bytes INTEGER, allocated_objects INTEGER,"
	" freed_bytes INTEGER, freed_objects INTEGER, requested_bytes INTEGER);"
	"CREATE TABLE alarms(id INTEGER PRIMARY KEY, size INTEGER, time REAL,"
	" tid INTEGER, failed INTEGER);"
	"CREATE TABLE alarm_frames(alarm INTEGER REFERENCES alarms(id),"
	" position INTEGER, function TEXT, file TEXT, line INTEGER,"
	" module TEXT, inlined INTEGER, address INTEGER, display INTEGER);"
	"CREATE TABLE modules(id INTEGER PRIMARY KEY, path TEXT, base INTEGER,"
	" lo INTEGER, hi INTEGER, build_id TEXT, state TEXT);";

static const char indexes[] =
	"CREATE INDEX frames_stack ON frames(stack, position);"
	"CREATE INDEX frames_function ON frames(function);"
	"CREATE INDEX allocations_stack ON allocations(stack);"
	"CREATE INDEX lifetimes_stack ON lifetimes(stack);"
	"CREATE INDEX alarm_frames_alarm ON alarm_frames(alarm, position);"
	"COMMIT;";

struct db {
	sqlite3 *h;
	char *err;
	size_t errlen;
	int failed;
};

static void fail(struct db *d, const char *what)
{
	if (!d->failed)
		snprintf(d->err, d->errlen, "%s: %s", what,
			 d->h ? sqlite3_errmsg(d->h) : "out of memory");
	d->failed = 1;
}

static sqlite3_stmt *prep(struct db *d, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (!d->failed && sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
		fail(d, "sqlite");
	return st;
}

/* Bind the arguments in order and step once.  fmt: i int64, u uint64
 * (stored as int64: addresses keep their bits), d double, t text (NULL
 * binds NULL), n NULL. */
static void row(struct db *d, sqlite3_stmt *st, const char *fmt, ...)
{
	if (d->failed || !st)
		return;
	va_list ap;
	va_start(ap, fmt);
	sqlite3_reset(st);
	int rc = SQLITE_OK;
	for (int i = 1; *fmt && rc == SQLITE_OK; fmt++, i++) {
		switch (*fmt) {
		case 'i': rc = sqlite3_bind_int64(st, i, va_arg(ap, int64_t)); break;
		case 'u': rc = sqlite3_bind_int64(st, i, (sqlite3_int64)va_arg(ap, uint64_t)); break;
		case 'd': rc = sqlite3_bind_double(st, i, va_arg(ap, double)); break;
		case 't': {
			const char *t = va_arg(ap, const char *);
			rc = t ? sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT)
			       : sqlite3_bind_null(st, i);
			break;
		}
		default: rc = sqlite3_bind_null(st, i); break;
		}
	}
	va_end(ap);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
		fail(d, "sqlite insert");
}

/* An estimate as a whole number, rounded as the JSON and Prometheus
 * writers' %.0f rounds it (to nearest, ties to even): the same figure in
 * every format.  Byte and object counts are INTEGER columns. */
static int64_t whole(double v)
{
	if (!(v > -9.2e18 && v < 9.2e18))
		return 0;
	return (int64_t)nearbyint(v);
}

static void frame_rows(struct db *d, sqlite3_stmt *st, struct sym *s,
		       const struct frames_rules *r, int64_t owner,
		       const uint64_t *addrs, uint32_t depth,
		       const struct sym_frame **display_out,
		       struct stack_view *keep)
{
	struct stack_view v;
	if (depth == 0 || d->failed)
		return;
	if (frames_view(s, r, addrs, depth, &v) != 0) {
		fail(d, "frames");
		return;
	}
	for (uint32_t i = 0; i < v.n && !d->failed; i++) {
		const struct sym_frame *f = &v.f[i];
		char fb[160];
		row(d, st, "iittitiui", owner, (int64_t)i, frames_name(f, fb, sizeof fb),
		    f->file, (int64_t)f->line, f->module, (int64_t)f->inlined,
		    f->addr, (int64_t)(i == v.display));
	}
	if (display_out && keep) {
		*keep = v;
		*display_out = &v.f[v.display];
		return;
	}
	frames_view_free(&v);
}

static void fill(struct db *d, struct model *m, struct sym *s,
		 const struct report_opts *o)
{
	const struct ym_totals *t = &m->totals;
	sqlite3_stmt *st = prep(d, "INSERT INTO meta VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
	/* Sampling: freed bytes are not counted (man/ymagent.7): NULL
	 * freed_bytes and in_use_bytes ('n' binds NULL, takes no argument). */
	int freed = model_freed_bytes_counted(m);
	int64_t rb = whole(m->retained_bytes), ro = whole(m->retained_objects);
	int64_t mb = whole(m->mmap_retained_bytes);
	if (freed && model_counted_net(m))
		/* Injected: allocated minus freed is a net change since the
		 * attach (frees of older blocks count), no in use: NULL. */
		row(d, st, "itddtitiiiiniiii", (int64_t)model_pid(m), model_exe(m),
		    (double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		    (int64_t)model_sample_rate(m), YM_VERSION, (int64_t)t->alloc_bytes,
		    (int64_t)t->alloc_objects, (int64_t)t->free_bytes,
		    (int64_t)t->free_objects, rb, ro, (int64_t)t->req_bytes, mb);
	else if (freed)
		row(d, st, "itddtitiiiiiiiii", (int64_t)model_pid(m), model_exe(m),
		    (double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		    (int64_t)model_sample_rate(m), YM_VERSION, (int64_t)t->alloc_bytes,
		    (int64_t)t->alloc_objects, (int64_t)t->free_bytes,
		    (int64_t)t->free_objects, (int64_t)(t->alloc_bytes - t->free_bytes),
		    rb, ro, (int64_t)t->req_bytes, mb);
	else if (model_alloc_bytes_counted(m))
		row(d, st, "itddtitiininiiii", (int64_t)model_pid(m), model_exe(m),
		    (double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		    (int64_t)model_sample_rate(m), YM_VERSION, (int64_t)t->alloc_bytes,
		    (int64_t)t->alloc_objects, (int64_t)t->free_objects,
		    rb, ro, (int64_t)t->req_bytes, mb);
	else   /* nor allocated bytes (YM_FLAG_NO_ALLOC_BYTES) */
		row(d, st, "itddtitnininiiii", (int64_t)model_pid(m), model_exe(m),
		    (double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		    (int64_t)model_sample_rate(m), YM_VERSION,
		    (int64_t)t->alloc_objects, (int64_t)t->free_objects,
		    rb, ro, (int64_t)t->req_bytes, mb);
	sqlite3_finalize(st);
	/* An agent before ABI 6 tracks no mmap: unknown, not 0. */
	if (!d->failed && !model_tracks_mmap(m) &&
	    sqlite3_exec(d->h, "UPDATE meta SET mmap_retained_bytes = NULL",
			 NULL, NULL, NULL) != SQLITE_OK)
		fail(d, "sqlite");

	uint32_t n;
	uint32_t *order = report_order(m, &n);
	if (!order) {
		fail(d, "out of memory");
		return;
	}
	sqlite3_stmt *ss = prep(d, "INSERT INTO stacks VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
	sqlite3_stmt *fs = prep(d, "INSERT INTO frames VALUES(?,?,?,?,?,?,?,?,?)");
	sqlite3_stmt *ls = prep(d, "INSERT INTO lifetimes VALUES(?,?,?,?)");
	static const uint64_t upto[YM_LIFE_BUCKETS] = YM_LIFE_UPTO_NS_INIT;
	for (uint32_t k = 0; k < n && !d->failed; k++) {
		const struct model_stack *x = &m->stacks[order[k]];
		const struct sym_frame *disp = NULL;
		struct stack_view v = { 0 };
		frame_rows(d, fs, s, o->rules, x->id, x->frames, x->depth, &disp, &v);
		char fb[160];
		const char *fn = disp ? frames_name(disp, fb, sizeof fb)
				      : "[stack table full]";
		row(d, ss, "ittiiiiiiiiit", (int64_t)x->id, fn,
		    disp ? disp->file : NULL, (int64_t)(disp ? disp->line : 0),
		    whole(x->retained_bytes), whole(x->retained_objects),
		    whole(x->alloc_bytes), whole(x->alloc_objects),
		    (int64_t)x->alloc_samples,
		    (int64_t)x->live_samples, (int64_t)x->tid,
		    (int64_t)model_oldest_age(m, x), report_kind_name(x->kind));
		frames_view_free(&v);
		for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
			struct model_life l = model_life(x, b);
			if (l.objects <= 0 && l.bytes <= 0)
				continue;
			if (upto[b])
				row(d, ls, "iiii", (int64_t)x->id, (int64_t)upto[b],
				    whole(l.objects), whole(l.bytes));
			else
				row(d, ls, "inii", (int64_t)x->id,
				    whole(l.objects), whole(l.bytes));
		}
	}
	free(order);
	sqlite3_finalize(ss);
	sqlite3_finalize(fs);
	sqlite3_finalize(ls);

	st = prep(d, "INSERT INTO allocations VALUES(?,?,?,?,?,?,?)");
	for (uint32_t i = 0; i < m->snap.nlive && !d->failed; i++) {
		const struct ym_live *e = &m->snap.live[i];
		uint64_t age = m->snap.taken_mono_ns > e->birth_mono_ns ?
			m->snap.taken_mono_ns - e->birth_mono_ns : 0;
		/* weight_objects stays a fraction (1/p of the sample): whole
		 * numbers per sample would bias every sum over samples. */
		row(d, st, "uiidiii", e->addr, (int64_t)e->size,
		    (int64_t)e->weight_bytes, (double)e->weight_fx / (double)YM_FX_ONE,
		    (int64_t)age, (int64_t)e->tid, (int64_t)e->stack);
	}
	sqlite3_finalize(st);

	st = prep(d, "INSERT INTO threads VALUES(?,?,?,?,?,?,?,?)");
	const struct ym_thread *th;
	for (uint32_t it = 0; !d->failed && (th = report_next_thread(m, &it)) != NULL;) {
		char name[64];
		if (freed)
			row(d, st, "ittiiiii", (int64_t)th->tid,
			    report_thread_name(m, th, name, sizeof name),
			    model_thread_state(m, th),
			    (int64_t)th->t.alloc_bytes, (int64_t)th->t.alloc_objects,
			    (int64_t)th->t.free_bytes, (int64_t)th->t.free_objects,
			    (int64_t)th->t.req_bytes);
		else if (model_alloc_bytes_counted(m))
			row(d, st, "ittiinii", (int64_t)th->tid,
			    report_thread_name(m, th, name, sizeof name),
			    model_thread_state(m, th),
			    (int64_t)th->t.alloc_bytes, (int64_t)th->t.alloc_objects,
			    (int64_t)th->t.free_objects, (int64_t)th->t.req_bytes);
		else
			row(d, st, "ittninii", (int64_t)th->tid,
			    report_thread_name(m, th, name, sizeof name),
			    model_thread_state(m, th),
			    (int64_t)th->t.alloc_objects,
			    (int64_t)th->t.free_objects, (int64_t)th->t.req_bytes);
	}
	sqlite3_finalize(st);

	st = prep(d, "INSERT INTO alarms VALUES(?,?,?,?,?)");
	fs = prep(d, "INSERT INTO alarm_frames VALUES(?,?,?,?,?,?,?,?,?)");
	for (uint32_t i = 0; i < m->snap.nalarms && !d->failed; i++) {
		const struct ym_alarm *al = shm_alarm(&m->snap, i);
		double when = report_alarm_time(m, al);
		row(d, st, "iidii", (int64_t)i + 1, (int64_t)al->size, when,
		    (int64_t)al->tid, (int64_t)((al->flags & YM_ALARM_FAILED) != 0));
		frame_rows(d, fs, s, o->rules, (int64_t)i + 1, al->frames, al->depth,
			   NULL, NULL);
	}
	sqlite3_finalize(st);
	sqlite3_finalize(fs);

	st = prep(d, "INSERT INTO modules VALUES(?,?,?,?,?,?,?)");
	for (uint32_t i = 0; i < m->snap.nmodules && !d->failed; i++) {
		const struct ym_module *y = &m->snap.modules[i];
		char id[2 * sizeof y->build_id + 1] = "";
		for (uint32_t b = 0; b < y->build_id_len && b < sizeof y->build_id; b++)
			snprintf(id + 2 * b, 3, "%02x", y->build_id[b]);
		row(d, st, "ituuutt", (int64_t)i + 1, y->path, y->base, y->lo, y->hi,
		    id, y->state == YM_MODULE_LOADED ? "loaded" : "unloaded");
	}
	sqlite3_finalize(st);
}

int sqlout_write(const char *path, struct model *m, struct sym *s,
		 const struct report_opts *o, char *err, size_t errlen)
{
	struct db d = { NULL, err, errlen, 0 };
	int flags = SQLITE_OPEN_READWRITE;
#ifdef SQLITE_OPEN_NOFOLLOW
	flags |= SQLITE_OPEN_NOFOLLOW;
#endif
	if (sqlite3_open_v2(path, &d.h, flags, NULL) != SQLITE_OK) {
		fail(&d, "cannot open the database");
		sqlite3_close(d.h);
		return -1;
	}
	if (sqlite3_exec(d.h, schema, NULL, NULL, NULL) != SQLITE_OK)
		fail(&d, "sqlite schema");
	fill(&d, m, s, o);
	if (!d.failed && sqlite3_exec(d.h, indexes, NULL, NULL, NULL) != SQLITE_OK)
		fail(&d, "sqlite");
	if (sqlite3_close(d.h) != SQLITE_OK && !d.failed) {
		snprintf(err, errlen, "sqlite: closing the database failed");
		d.failed = 1;
	}
	return d.failed ? -1 : 0;
}
