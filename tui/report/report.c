#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "folded.h"
#include "outfile.h"
#include "pprof.h"
#include "report.h"
#include "sqlout.h"
#include "svg.h"

static const struct {
	const char *name, *ext;
	int needs_file;
} formats[REPORT_NFORMATS] = {
	[REPORT_TEXT]   = { "text", "txt", 0 },
	[REPORT_JSON]   = { "json", "json", 0 },
	[REPORT_FOLDED] = { "folded", "folded", 0 },
	[REPORT_PPROF]  = { "pprof", "pb.gz", 1 },
	[REPORT_SQLITE] = { "sqlite", "db", 1 },
	[REPORT_SVG]    = { "svg", "svg", 1 },
};

int report_format_parse(const char *s, enum report_format *out)
{
	for (int i = 0; i < REPORT_NFORMATS; i++)
		if (!strcmp(s, formats[i].name)) {
			*out = (enum report_format)i;
			return 0;
		}
	return -1;
}

const char *report_format_name(enum report_format f)
{
	return (unsigned)f < REPORT_NFORMATS ? formats[f].name : "?";
}

const char *report_format_ext(enum report_format f)
{
	return (unsigned)f < REPORT_NFORMATS ? formats[f].ext : "out";
}

int report_format_needs_file(enum report_format f)
{
	return (unsigned)f < REPORT_NFORMATS && formats[f].needs_file;
}

static const char *const weights[] = {
	[WEIGHT_RETAINED] = "retained", [WEIGHT_ALLOCATED] = "allocated",
	[WEIGHT_OBJECTS] = "objects",
};

int report_weight_parse(const char *s, enum report_weight *out)
{
	for (size_t i = 0; i < sizeof weights / sizeof *weights; i++)
		if (!strcmp(s, weights[i])) {
			*out = (enum report_weight)i;
			return 0;
		}
	return -1;
}

const char *report_weight_name(enum report_weight w)
{
	switch (w) {
	case WEIGHT_ALLOCATED: return "allocated bytes";
	case WEIGHT_OBJECTS:   return "live objects";
	default:               return "retained bytes";
	}
}

double report_weight_value(const struct model_stack *s, enum report_weight w)
{
	double v;
	switch (w) {
	case WEIGHT_ALLOCATED: v = s->alloc_bytes; break;
	case WEIGHT_OBJECTS:   v = s->retained_objects; break;
	default:               v = s->retained_bytes; break;
	}
	return v > 0 ? v : 0;
}

double report_weight_total(const struct model *m, enum report_weight w)
{
	double t = 0;
	for (uint32_t i = 0; i < m->nstacks; i++)
		if (m->stacks[i].alloc_samples)
			t += report_weight_value(&m->stacks[i], w);
	return t;
}

int report_sort_parse(const char *s, enum model_sort *out)
{
	static const struct { const char *name; enum model_sort key; } keys[] = {
		{ "retained", SORT_RETAINED }, { "allocated", SORT_ALLOCATED },
		{ "rate", SORT_RATE },
	};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (!strcmp(s, keys[i].name)) {
			*out = keys[i].key;
			return 0;
		}
	return -1;
}

const char *report_sort_name(enum model_sort k)
{
	switch (k) {
	case SORT_ALLOCATED: return "allocated bytes";
	case SORT_RATE:      return "allocation rate";
	default:             return "retained bytes";
	}
}

struct order_ctx {
	const struct model *m;
	enum model_sort key;
};

static int by_key(const void *a, const void *b, void *arg)
{
	const struct order_ctx *c = arg;
	const struct model_stack *x = &c->m->stacks[*(const uint32_t *)a];
	const struct model_stack *y = &c->m->stacks[*(const uint32_t *)b];
	/* The key first, then the others: retained, allocated, rate. */
	enum model_sort keys[4] = { c->key, SORT_RETAINED, SORT_ALLOCATED, SORT_RATE };
	for (int i = 0; i < 4; i++) {
		double vx = model_key(c->m, x, keys[i]), vy = model_key(c->m, y, keys[i]);
		if (vx != vy)
			return vx < vy ? 1 : -1;
	}
	return (x->id > y->id) - (x->id < y->id);
}

uint32_t *report_order_by(const struct model *m, enum model_sort key, uint32_t *n)
{
	uint32_t *o = malloc(((size_t)m->nstacks + 1) * sizeof *o), k = 0;
	if (!o)
		return NULL;
	for (uint32_t i = 0; i < m->nstacks; i++)
		if (m->stacks[i].alloc_samples)
			o[k++] = i;
	if (key != SORT_ALLOCATED && key != SORT_RATE)
		key = SORT_RETAINED;
	struct order_ctx c = { m, key };
	qsort_r(o, k, sizeof *o, by_key, &c);
	*n = k;
	return o;
}

uint32_t *report_order(const struct model *m, uint32_t *n)
{
	return report_order_by(m, SORT_RETAINED, n);
}

static double alarm_unix_time(const struct model *m, const struct ym_alarm *a)
{
	const struct ym_header *h = &m->snap.hdr;
	double off = ((double)a->mono_ns - (double)h->start_mono_ns) / 1e9;
	return (double)h->start_real_ns / 1e9 + off;
}

/* ---- text ---- */

static void text_stack(FILE *f, struct sym *s, const struct frames_rules *r,
		       const uint64_t *frames, uint32_t depth, const char *indent)
{
	struct stack_view v;
	if (depth == 0) {
		fprintf(f, "%s(no frames: samples that found the stack table full)\n",
			indent);
		return;
	}
	if (frames_view(s, r, frames, depth, &v) != 0)
		return;
	char buf[1024];
	for (uint32_t i = 0; i < v.n; i++) {
		const char *mark = i < v.display ? "  " : i == v.display ? "=>" : "  ";
		fprintf(f, "%s%s %s%s\n", indent, mark,
			v.f[i].inlined ? "[inlined] " : "",
			frames_label(&v.f[i], buf, sizeof buf));
	}
	frames_view_free(&v);
}

static const char *const life_label[YM_LIFE_BUCKETS] = {
	"< 1us", "< 10us", "< 100us", "< 1ms", "< 10ms", "< 100ms", "< 1s",
	"< 10s", "< 100s", "< 1000s", "< 1h", ">= 1h",
};

/* Freed samples by lifetime, with a bar, for the buckets in use. */
static void text_lifetimes(FILE *f, const struct model *m)
{
	double total = 0, most = 0;
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		total += m->life[b].bytes;
		if (m->life[b].bytes > most)
			most = m->life[b].bytes;
	}
	fprintf(f, "\nLifetimes of freed allocations (estimated):\n");
	if (total <= 0) {
		fprintf(f, "  (nothing sampled has been freed)\n");
		return;
	}
	char a[32], c[32];
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		if (m->life[b].objects <= 0 && m->life[b].bytes <= 0)
			continue;
		int bar = most > 0 ? (int)lround(30.0 * m->life[b].bytes / most) : 0;
		fprintf(f, "  %-8s %10s objects %10s %5.1f%% %.*s\n", life_label[b],
			fmt_count(m->life[b].objects, c, sizeof c),
			fmt_bytes(m->life[b].bytes, a, sizeof a),
			100.0 * m->life[b].bytes / total, bar,
			"##############################");
	}
}

static void text_threads(FILE *f, const struct model *m)
{
	char a[32], b[32], name[64];
	int first = 1;
	for (uint32_t i = 0; i < m->snap.nthreads; i++) {
		const struct ym_thread *th = &m->snap.threads[i];
		if (!model_thread_listed(th))
			continue;
		if (first)
			fprintf(f, "\nThreads (exact):\n  %8s %-16s %-7s %12s %12s %12s\n",
				"TID", "NAME", "STATE", "ALLOCATED", "FREED", "CALLS");
		first = 0;
		const char *nm = th->state == YM_THREAD_SHARED ? "(shared)" :
				 model_thread_name(m, th, name, sizeof name);
		fprintf(f, "  %8u %-16.16s %-7s %12s %12s %12llu\n", th->tid,
			*nm ? nm : "-",
			model_thread_state(m, th),
			fmt_bytes((double)th->t.alloc_bytes, a, sizeof a),
			fmt_bytes((double)th->t.free_bytes, b, sizeof b),
			(unsigned long long)th->t.alloc_objects);
	}
}

static int write_text(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_header *h = &m->snap.hdr;
	const struct ym_totals *t = &m->totals;
	char a[32], b[32], c[32], d[32];
	time_t now = (time_t)(m->snap.taken_real_ns / 1000000000ULL);
	struct tm tm;
	char when[64];
	localtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);

	/* The name it was started as, and the file it runs, which differ
	 * when that name is a symlink (redis-server -> redis-check-rdb);
	 * and its pid inside its own namespace when that is another. */
	char ns[48] = "";
	if ((uint32_t)model_pid(m) != h->pid)
		snprintf(ns, sizeof ns, " (pid %u in its namespace)", h->pid);
	const char *name = model_name(m), *base = strrchr(h->exe, '/');
	base = base ? base + 1 : h->exe;
	if (strcmp(name, base) != 0 && name[0])
		fprintf(f, "ymtop %s heap report: pid %ld%s %s (%s), %s\n", YM_VERSION,
			(long)model_pid(m), ns, name, h->exe[0] ? h->exe : "?", when);
	else
		fprintf(f, "ymtop %s heap report: pid %ld%s (%s), %s\n", YM_VERSION,
			(long)model_pid(m), ns, h->exe[0] ? h->exe : "?", when);
	fprintf(f, "state %s, uptime %s, RSS %s, sample rate %s%s\n",
		model_state(m), fmt_duration(model_uptime(m), a, sizeof a),
		m->alive ? fmt_bytes((double)m->proc.rss_bytes, b, sizeof b) : "-",
		h->sample_rate == 1 ? "exact" : fmt_bytes((double)h->sample_rate, c, sizeof c),
		(h->flags & YM_FLAG_INJECTED) ? ", attached (data starts at the attach)" : "");
	double inuse = (double)t->alloc_bytes - (double)t->free_bytes;
	/* Injected: the exact counters start at the attach, the estimates
	 * too, but memory allocated before it is in neither. */
	fprintf(f, "exact totals%s: allocated %s in %llu calls (%s requested), "
		"freed %s in %llu calls, in use %s\n",
		(h->flags & YM_FLAG_INJECTED) ? " since the attach" : "",
		fmt_bytes((double)t->alloc_bytes, a, sizeof a),
		(unsigned long long)t->alloc_objects,
		fmt_bytes((double)t->req_bytes, b, sizeof b),
		fmt_bytes((double)t->free_bytes, c, sizeof c),
		(unsigned long long)t->free_objects,
		fmt_sbytes(inuse, d, sizeof d));
	fprintf(f, "estimated retained: %s in %.0f objects (%llu samples live)\n",
		fmt_bytes(m->retained_bytes, a, sizeof a), m->retained_objects,
		(unsigned long long)m->snap.live_count);
	fprintf(f, "stacks %llu / %u, samples %llu, dropped: %llu stack-table, "
		"%llu live-table, %llu busy, %llu thread-slots, %llu modules\n",
		(unsigned long long)(h->stacks_used ? h->stacks_used - 1 : 0),
		h->sections[YM_SEC_STACKS].capacity - 1,
		(unsigned long long)m->samples, (unsigned long long)h->drop_stacks,
		(unsigned long long)h->drop_live, (unsigned long long)h->drop_busy,
		(unsigned long long)h->drop_threads, (unsigned long long)h->drop_modules);
	if (h->alarms_written)
		fprintf(f, "giant allocations: %llu (see below)\n",
			(unsigned long long)h->alarms_written);
	/* Symbolization (issue 3): files changed since the process loaded them. */
	for (uint32_t it = 0; sym_next_warning(s, &it) != NULL;)
		fprintf(f, "warning: %s\n", sym_module_warning(s, it - 1));

	int top = o->top > 0 ? o->top : 20;
	uint32_t norder;
	uint32_t *order = report_order_by(m, o->sort, &norder);
	if (!order) {
		errno = ENOMEM;
		return -1;
	}
	fprintf(f, "\nTop %d stacks by %s:\n", top, report_sort_name(o->sort));
	int shown = 0;
	/* Every stack with a sample, also those that retain nothing: on a
	 * server that frees all it allocates the churn is the story. */
	for (uint32_t k = 0; k < norder && shown < top; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		double pct = m->retained_bytes > 0 ?
			100.0 * st->retained_bytes / m->retained_bytes : 0;
		fprintf(f, "\n#%d retained %s (%.1f%%) in %.0f objects; "
			"allocated %s in %.0f objects",
			++shown, fmt_bytes(st->retained_bytes, a, sizeof a), pct,
			st->retained_objects,
			fmt_bytes(st->alloc_bytes, b, sizeof b), st->alloc_objects);
		if (o->sort == SORT_RATE)
			fprintf(f, "; %s/s", fmt_bytes(st->alloc_rate, c, sizeof c));
		fputc('\n', f);
		text_stack(f, s, o->rules, st->frames, st->depth, "   ");
	}
	if (shown == 0)
		fprintf(f, "  (no samples yet)\n");
	free(order);

	text_lifetimes(f, m);
	text_threads(f, m);

	uint32_t na = m->snap.nalarms;
	if (na) {
		fprintf(f, "\nGiant allocations (%u):\n", na);
		for (uint32_t i = 0; i < na; i++) {
			const struct ym_alarm *al = shm_alarm(&m->snap, i);
			double ago = ((double)m->snap.taken_mono_ns - (double)al->mono_ns) / 1e9;
			fprintf(f, "\n  %s by thread %u, %s ago%s\n",
				fmt_bytes((double)al->size, a, sizeof a), al->tid,
				fmt_duration(ago, b, sizeof b),
				(al->flags & YM_ALARM_FAILED) ? " (refused: ENOMEM)" : "");
			text_stack(f, s, o->rules, al->frames, al->depth, "   ");
		}
	}
	return ferror(f) ? -1 : 0;
}

/* ---- JSON ---- */

static void json_frames(FILE *f, struct sym *s, const struct frames_rules *r,
			const uint64_t *frames, uint32_t depth)
{
	struct stack_view v;
	fputc('[', f);
	if (depth && frames_view(s, r, frames, depth, &v) == 0) {
		for (uint32_t i = 0; i < v.n; i++) {
			const struct sym_frame *x = &v.f[i];
			fprintf(f, "%s{\"address\":\"0x%llx\",\"module\":", i ? "," : "",
				(unsigned long long)x->addr);
			fmt_json_string(f, x->module);
			fputs(",\"function\":", f);
			char fb[128];
			fmt_json_string(f, x->function ? x->function :
					(sym_fallback(x, fb, sizeof fb), fb));
			fputs(",\"file\":", f);
			fmt_json_string(f, x->file);
			fprintf(f, ",\"line\":%d,\"inlined\":%s}", x->line,
				x->inlined ? "true" : "false");
		}
		/* Display frame (issue 3): index into frames, after them. */
		fprintf(f, "],\"display_frame\":%u", v.n ? v.display : 0);
		frames_view_free(&v);
		return;
	}
	fputs("],\"display_frame\":null", f);
}

static int write_json(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_header *h = &m->snap.hdr;
	const struct ym_totals *t = &m->totals;
	fprintf(f, "{\"pid\":%ld,", (long)model_pid(m));
	if ((uint32_t)model_pid(m) != h->pid)
		fprintf(f, "\"ns_pid\":%u,", h->pid);
	fprintf(f, "\"exe\":");
	fmt_json_string(f, h->exe);
	fputs(",\"name\":", f);
	fmt_json_string(f, model_name(m));
	fprintf(f, ",\"sort\":\"%s\"", o->sort == SORT_ALLOCATED ? "allocated" :
		o->sort == SORT_RATE ? "rate" : "retained");
	fprintf(f, ",\"time\":%.3f,\"uptime_s\":%.3f,\"state\":\"%s\","
		"\"attached\":%s,\"sample_rate\":%llu,\"rss_bytes\":%llu,",
		(double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		(h->flags & YM_FLAG_INJECTED) ? "true" : "false",
		(unsigned long long)h->sample_rate,
		(unsigned long long)(m->alive ? m->proc.rss_bytes : 0));
	fprintf(f, "\"totals\":{\"allocated_bytes\":%llu,\"allocated_objects\":%llu,"
		"\"requested_bytes\":%llu,\"freed_bytes\":%llu,\"freed_objects\":%llu,"
		"\"in_use_bytes\":%lld,\"retained_bytes\":%.0f,\"retained_objects\":%.0f},",
		(unsigned long long)t->alloc_bytes, (unsigned long long)t->alloc_objects,
		(unsigned long long)t->req_bytes, (unsigned long long)t->free_bytes,
		(unsigned long long)t->free_objects,
		(long long)(t->alloc_bytes - t->free_bytes),
		m->retained_bytes, m->retained_objects);
	fprintf(f, "\"table\":{\"stacks_used\":%llu,\"stacks_capacity\":%u,"
		"\"samples\":%llu,\"live_samples\":%llu,\"dropped_stacks\":%llu,"
		"\"dropped_live\":%llu,\"dropped_busy\":%llu,\"dropped_threads\":%llu,"
		"\"dropped_modules\":%llu},",
		(unsigned long long)(h->stacks_used ? h->stacks_used - 1 : 0),
		h->sections[YM_SEC_STACKS].capacity - 1,
		(unsigned long long)m->samples, (unsigned long long)m->snap.live_count,
		(unsigned long long)h->drop_stacks, (unsigned long long)h->drop_live,
		(unsigned long long)h->drop_busy, (unsigned long long)h->drop_threads,
		(unsigned long long)h->drop_modules);

	uint32_t norder;
	uint32_t *order = report_order_by(m, o->sort, &norder);
	if (!order) {
		errno = ENOMEM;
		return -1;
	}
	/* Symbolization warnings (issue 3): files changed since loaded. */
	fputs("\"warnings\":[", f);
	for (uint32_t it = 0, k = 0; sym_next_warning(s, &it) != NULL; k++)
		fputs(k ? "," : "", f), fmt_json_string(f, sym_module_warning(s, it - 1));
	fputs("],", f);
	fputs("\"stacks\":[", f);
	for (uint32_t k = 0; k < norder; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		fprintf(f, "%s{\"id\":%u,\"retained_bytes\":%.0f,\"retained_objects\":%.0f,"
			"\"allocated_bytes\":%.0f,\"allocated_objects\":%.0f,"
			"\"allocated_bytes_per_s\":%.0f,"
			"\"samples\":%llu,\"live_samples\":%u,\"frames\":",
			k ? "," : "", st->id, st->retained_bytes, st->retained_objects,
			st->alloc_bytes, st->alloc_objects, st->alloc_rate,
			(unsigned long long)st->alloc_samples, st->live_samples);
		json_frames(f, s, o->rules, st->frames, st->depth);
		fputc('}', f);
	}
	free(order);
	fputs("],\"lifetimes\":[", f);
	static const uint64_t upto[YM_LIFE_BUCKETS] = YM_LIFE_UPTO_NS_INIT;
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		fprintf(f, "%s{\"upto_ns\":", b ? "," : "");
		if (upto[b])
			fprintf(f, "%llu", (unsigned long long)upto[b]);
		else
			fputs("null", f);
		fprintf(f, ",\"count\":%.0f,\"bytes\":%.0f}",
			m->life[b].objects, m->life[b].bytes);
	}
	fputs("],\"threads\":[", f);
	int first = 1;
	for (uint32_t i = 0; i < m->snap.nthreads; i++) {
		const struct ym_thread *th = &m->snap.threads[i];
		if (!model_thread_listed(th))
			continue;
		char name[64];
		fprintf(f, "%s{\"tid\":%u,\"name\":", first ? "" : ",", th->tid);
		first = 0;
		fmt_json_string(f, th->state == YM_THREAD_SHARED ? "(shared)" :
				model_thread_name(m, th, name, sizeof name));
		fprintf(f, ",\"state\":\"%s\",\"allocated_bytes\":%llu,"
			"\"allocated_objects\":%llu,\"freed_bytes\":%llu,"
			"\"freed_objects\":%llu}",
			model_thread_state(m, th),
			(unsigned long long)th->t.alloc_bytes,
			(unsigned long long)th->t.alloc_objects,
			(unsigned long long)th->t.free_bytes,
			(unsigned long long)th->t.free_objects);
	}
	fputs("],\"alarms\":[", f);
	for (uint32_t i = 0; i < m->snap.nalarms; i++) {
		const struct ym_alarm *al = shm_alarm(&m->snap, i);
		fprintf(f, "%s{\"size\":%llu,\"time\":%.3f,\"tid\":%u,\"failed\":%s,"
			"\"frames\":", i ? "," : "", (unsigned long long)al->size,
			alarm_unix_time(m, al), al->tid,
			(al->flags & YM_ALARM_FAILED) ? "true" : "false");
		json_frames(f, s, o->rules, al->frames, al->depth);
		fputc('}', f);
	}
	fputs("]}\n", f);
	return ferror(f) ? -1 : 0;
}

int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o)
{
	switch (o->format) {
	case REPORT_TEXT:   return write_text(f, m, s, o);
	case REPORT_JSON:   return write_json(f, m, s, o);
	case REPORT_FOLDED: return folded_write(f, m, s, o);
	case REPORT_PPROF:  return pprof_write(f, m, s, o);
	case REPORT_SVG:    return svg_write(f, m, s, o);
	default:
		errno = EINVAL;
		return -1;
	}
}

/* sqlite writes through its own file handle: the database is built in
 * the temporary file outfile created (empty, which SQLite takes for a new
 * database), then synced and linked like any report. */
static int save_sqlite(struct outfile *of, struct model *m, struct sym *s,
		       const struct report_opts *o, char *err, size_t errlen)
{
	fclose(of->f);
	of->f = NULL;
	char why[512];
	if (sqlout_write(of->tmp, m, s, o, why, sizeof why) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", of->path, why);
		outfile_abort(of);
		return -1;
	}
	int fd = open(of->tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	of->f = fd >= 0 ? fdopen(fd, "r+") : NULL;
	if (!of->f) {
		snprintf(err, errlen, "cannot write %s: %s", of->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		outfile_abort(of);
		return -1;
	}
	return 0;
}

int report_save(const char *path, struct model *m, struct sym *s,
		const struct report_opts *o, char *err, size_t errlen)
{
	struct outfile of;
	if (outfile_begin(&of, path, err, errlen) != 0)
		return -1;
	if (o->format == REPORT_SQLITE) {
		if (save_sqlite(&of, m, s, o, err, errlen) != 0)
			return -1;
	} else if (report_write(of.f, m, s, o) != 0) {
		int e = errno;
		outfile_abort(&of);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(e));
		return -1;
	}
	return outfile_commit(&of, err, errlen);
}
