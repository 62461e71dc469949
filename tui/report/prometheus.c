/*
 * prometheus: the model in the Prometheus text exposition format, for
 * -f prometheus and --serve (see prometheus.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prometheus.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 when it is
 * not one (as Go's utf8.ValidString, which Prometheus applies: no
 * overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t k;
	unsigned lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		k = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		k = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		k = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < k || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < k; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return k;
}

const char *prometheus_label(const char *raw, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)(raw ? raw : "");
	size_t n = strlen((const char *)p), used = 0, o = 0;
	if (len < PROM_LABEL_BUF) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	while (*p) {
		size_t k = utf8_len(p, n);
		if (used + (k ? k : 1) > PROM_LABEL_MAX) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (k == 0 || (k == 1 && *p < 0x20 && *p != '\n') || *p == 0x7f) {
			buf[o++] = '?';
			k = 1;
		} else if (*p == '\\' || *p == '"') {
			buf[o++] = '\\';
			buf[o++] = (char)*p;
		} else if (*p == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			memcpy(buf + o, p, k);
			o += k;
		}
		used += k;
		p += k;
		n -= k;
	}
	buf[o] = '\0';
	return buf;
}

/* One series of ymtop_stack_*: the stacks of one kind and display
 * frame. */

/* One process's groups: the top N by retained, then one "(other)" per
 * kind (indexed by YM_KIND_*) that has more. */
#define PROM_KINDS 2
struct proc_groups {
	struct prom_group *g;
	size_t n;
	double other_retained[PROM_KINDS], other_allocated[PROM_KINDS];
	int    have_other[PROM_KINDS];
	char   pid[24];
	char   exe[PROM_LABEL_BUF];
};

/* A stack's kind as an index of the arrays above: an unknown kind from a
 * newer writer counts as malloc, as report_kind_name names it. */
static uint32_t kind_index(uint32_t kind)
{
	return kind == YM_KIND_MMAP ? YM_KIND_MMAP : YM_KIND_MALLOC;
}

static int by_labels(const void *a, const void *b)
{
	const struct prom_group *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	int c = strcmp(x->function, y->function);
	return c ? c : strcmp(x->location, y->location);
}

static int by_retained(const void *a, const void *b)
{
	const struct prom_group *x = a, *y = b;
	if (x->retained != y->retained)
		return x->retained < y->retained ? 1 : -1;
	if (x->allocated != y->allocated)
		return x->allocated < y->allocated ? 1 : -1;
	return by_labels(a, b);
}

static void groups_free(struct proc_groups *pg)
{
	for (size_t i = 0; i < pg->n; i++) {
		free(pg->g[i].function);
		free(pg->g[i].location);
	}
	free(pg->g);
	pg->g = NULL;
	pg->n = 0;
}

/* The display frame's labels of a stack into fn and loc (escaped). */
static void stack_labels(struct sym *s, const struct frames_rules *r,
			 const struct model_stack *st, char *fn, char *loc)
{
	struct stack_view v;
	prometheus_label("(unknown)", fn, PROM_LABEL_BUF);
	loc[0] = '\0';
	if (!st->depth || frames_view(s, r, st->frames, st->depth, &v) != 0)
		return;
	if (v.n) {
		const struct sym_frame *x = &v.f[v.display];
		char tmp[4096];
		if (x->function)
			prometheus_label(x->function, fn, PROM_LABEL_BUF);
		else {
			sym_fallback(x, tmp, sizeof tmp);
			prometheus_label(tmp, fn, PROM_LABEL_BUF);
		}
		if (x->file && x->line > 0)
			snprintf(tmp, sizeof tmp, "%s:%d", x->file, x->line);
		else if (x->file)
			snprintf(tmp, sizeof tmp, "%s", x->file);
		else {
			const char *b = x->module ? strrchr(x->module, '/') : NULL;
			snprintf(tmp, sizeof tmp, "%s", b ? b + 1 : x->module ? x->module : "");
		}
		prometheus_label(tmp, loc, PROM_LABEL_BUF);
	}
	frames_view_free(&v);
}

/* Append the stacks of m (those with a sample) to pg->g, one group each;
 * cap: the room pg->g has.  -1 when out of memory. */
static int groups_collect(struct proc_groups *pg, size_t cap, struct model *m,
			  struct sym *s, const struct report_opts *o)
{
	char fn[PROM_LABEL_BUF], loc[PROM_LABEL_BUF];
	for (uint32_t k = 0; k < m->nstacks && pg->n < cap; k++) {
		const struct model_stack *st = &m->stacks[k];
		if (!st->alloc_samples)
			continue;
		stack_labels(s, o->rules, st, fn, loc);
		struct prom_group *g = &pg->g[pg->n];
		g->function = strdup(fn);
		g->location = strdup(loc);
		g->kind = kind_index(st->kind);
		g->retained = st->retained_bytes;
		g->allocated = st->alloc_bytes;
		pg->n++;
		if (!g->function || !g->location)
			return -1;
	}
	return 0;
}

/* Sum the groups of one kind and display frame, sort them by retained,
 * keep the top N (of both kinds) and sum the rest into their kind's
 * other. */
static void groups_finish(struct proc_groups *pg, const struct report_opts *o)
{
	qsort(pg->g, pg->n, sizeof *pg->g, by_labels);
	size_t w = 0;
	for (size_t i = 0; i < pg->n; i++) {
		if (w && !by_labels(&pg->g[w - 1], &pg->g[i])) {
			pg->g[w - 1].retained += pg->g[i].retained;
			pg->g[w - 1].allocated += pg->g[i].allocated;
			free(pg->g[i].function);
			free(pg->g[i].location);
			continue;
		}
		pg->g[w++] = pg->g[i];
	}
	pg->n = w;
	qsort(pg->g, pg->n, sizeof *pg->g, by_retained);
	size_t top = o->top > 0 ? (size_t)o->top : PROM_TOP_DEFAULT;
	for (size_t i = top; i < pg->n; i++) {
		uint32_t k = pg->g[i].kind;
		pg->have_other[k] = 1;
		pg->other_retained[k] += pg->g[i].retained;
		pg->other_allocated[k] += pg->g[i].allocated;
		free(pg->g[i].function);
		free(pg->g[i].location);
	}
	if (pg->n > top)
		pg->n = top;
}

static int groups_build(struct proc_groups *pg, struct model *m, struct sym *s,
			const struct report_opts *o)
{
	memset(pg, 0, sizeof *pg);
	const char *exe = m->snap.hdr.exe;
	const char *base = strrchr(exe, '/');
	prometheus_label(base ? base + 1 : exe, pg->exe, sizeof pg->exe);
	snprintf(pg->pid, sizeof pg->pid, "%ld", (long)model_pid(m));
	pg->g = calloc(m->nstacks ? m->nstacks : 1, sizeof *pg->g);
	if (!pg->g)
		return -1;
	if (groups_collect(pg, m->nstacks, m, s, o) != 0) {
		groups_free(pg);
		return -1;
	}
	groups_finish(pg, o);
	return 0;
}

int prometheus_merge(const struct prom_source *src, size_t n,
		     const struct report_opts *o, struct prom_group **out,
		     size_t *nout)
{
	struct proc_groups pg;
	memset(&pg, 0, sizeof pg);
	size_t cap = 0;
	for (size_t i = 0; i < n; i++)
		cap += src[i].m->nstacks;
	pg.g = calloc(cap + PROM_KINDS, sizeof *pg.g);
	if (!pg.g)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (groups_collect(&pg, cap, src[i].m, src[i].s, o) != 0) {
			groups_free(&pg);
			return -1;
		}
	groups_finish(&pg, o);
	for (uint32_t k = 0; k < PROM_KINDS; k++) {
		if (!pg.have_other[k])
			continue;
		struct prom_group *g = &pg.g[pg.n];
		g->function = strdup("(other)");
		g->location = strdup("");
		g->kind = k;
		g->retained = pg.other_retained[k];
		g->allocated = pg.other_allocated[k];
		pg.n++;
		if (!g->function || !g->location) {
			groups_free(&pg);
			return -1;
		}
	}
	*out = pg.g;
	*nout = pg.n;
	return 0;
}

void prometheus_merge_free(struct prom_group *g, size_t n)
{
	struct proc_groups pg = { .g = g, .n = n };
	groups_free(&pg);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A value as the format reads it: an integer when it is one. */
static void value(FILE *f, double v)
{
	if (v < 0)
		v = 0;
	fprintf(f, " %.0f\n", v);
}

/* A stack series' value, rounded down: the parts of a total each rounded
 * down never add up to more than the total rounded (value), so the stack
 * series of a kind never exceed their process series, also were the
 * estimates fractions. */
static void stack_value(FILE *f, double v)
{
	value(f, floor(v));
}

enum pfield {
	P_RETAINED, P_MMAP, P_INUSE, P_HEAP_AGE, P_RSS, P_ALLOC_BYTES, P_REQ_BYTES,
	P_ALLOCS, P_ALARMS
};

/* Units (man/ymtop.1, "Units"): retained and the stack series count
 * requested bytes (what callers asked for), in use counts the
 * allocator's usable bytes (each block rounded up to its size class):
 * in use is the larger by that slack and the allocator's own overhead. */
static const struct {
	const char *name, *type, *help;
} pfields[] = {
	[P_RETAINED] = { "ymtop_process_retained_bytes", "gauge",
		"Estimated live bytes of the malloc family, from samples, in requested "
		"bytes (in use counts usable bytes: size-class slack makes it larger); "
		"the sum of the kind=\"malloc\" ymtop_stack_retained_bytes series." },
	[P_MMAP] = { "ymtop_process_mmap_retained_bytes", "gauge",
		"Estimated live bytes of the anonymous mappings the program made itself "
		"(their lengths), from samples; the sum of the kind=\"mmap\" "
		"ymtop_stack_retained_bytes series.  Absent when the agent does not track "
		"mmap." },
	[P_INUSE] = { "ymtop_process_in_use_bytes", "gauge",
		"Heap bytes in use, in usable bytes (the allocator's size classes, so "
		"more than retained): the allocator's own statistics, else the agent's "
		"exact counters (exact mode, agent from the start); absent otherwise." },
	[P_HEAP_AGE] = { "ymtop_process_heap_age_seconds", "gauge",
		"Age of the allocator's statistics behind the in-use gauge: 0 while "
		"they are current (taken for this scrape, or after the process's "
		"last allocator call), else seconds since they were taken." },
	[P_RSS] = { "ymtop_process_rss_bytes", "gauge",
		"Resident set size of a running process." },
	[P_ALLOC_BYTES] = { "ymtop_process_allocated_bytes_total", "counter",
		"Exact bytes allocated since the agent started: usable sizes in exact "
		"mode, requested sizes when sampling (ymagent(7))." },
	[P_REQ_BYTES] = { "ymtop_process_requested_bytes_total", "counter",
		"Exact bytes requested by allocation calls since the agent started." },
	[P_ALLOCS] = { "ymtop_process_allocations_total", "counter",
		"Exact allocation calls since the agent started." },
	[P_ALARMS] = { "ymtop_process_alarms_total", "counter",
		"Allocations that raised an alarm (YM_ALARM_SIZE, failures)." },
};

/* The agent tracks the program's anonymous mappings (ABI 6 and later). */
static int tracks_mmap(const struct model *m)
{
	return m->have_snap && m->snap.hdr.abi_version >= 6;
}

/* The value of a process field; 0 when the process has none (not
 * written). */
static int pvalue(const struct model *m, enum pfield k, double *v)
{
	const struct ym_header *h = &m->snap.hdr;
	const struct ym_totals *t = &m->totals;
	switch (k) {
	case P_RETAINED: *v = m->retained_bytes; return 1;
	case P_MMAP: *v = m->mmap_retained_bytes; return tracks_mmap(m);
	case P_INUSE: return model_in_use(m, v);
	case P_HEAP_AGE: {
		const struct ym_heapstats *hs = model_heap(m, v);
		return hs && (hs->present & YM_HEAP_IN_USE);
	}
	case P_RSS: *v = (double)m->proc.rss_bytes; return m->alive;
	case P_ALLOC_BYTES:
		/* The series every dashboard graphs stays: when sampling the
		 * agent counts requested bytes exactly, usable ones not. */
		*v = (double)model_alloc_bytes(m, t);
		return 1;
	case P_REQ_BYTES: *v = (double)t->req_bytes; return 1;
	case P_ALLOCS: *v = (double)t->alloc_objects; return 1;
	case P_ALARMS: *v = (double)h->alarms_written; return 1;
	}
	return 0;
}

int prometheus_write_many(FILE *f, const struct prom_source *src, size_t n,
			  const struct report_opts *o)
{
	struct proc_groups *pg = calloc(n ? n : 1, sizeof *pg);
	if (!pg) {
		errno = ENOMEM;
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (groups_build(&pg[i], src[i].m, src[i].s, o) != 0) {
			for (size_t j = 0; j < i; j++)
				groups_free(&pg[j]);
			free(pg);
			errno = ENOMEM;
			return -1;
		}
	for (size_t k = 0; k < sizeof pfields / sizeof *pfields; k++) {
		family(f, pfields[k].name, pfields[k].type, pfields[k].help);
		for (size_t i = 0; i < n; i++) {
			double v;
			if (!pvalue(src[i].m, (enum pfield)k, &v))
				continue;
			fprintf(f, "%s{pid=\"%s\",exe=\"%s\"}", pfields[k].name, pg[i].pid,
				pg[i].exe);
			if (k == P_HEAP_AGE)
				fprintf(f, " %.3f\n", v);
			else
				value(f, v);
		}
	}
	family(f, "ymtop_process_unseen_allocator", "gauge",
	       "1 when the process allocates through an allocator the agent cannot "
	       "see (linked into the program, or memory growing with no allocator "
	       "call); absent otherwise.");
	for (size_t i = 0; i < n; i++) {
		const struct model *m = src[i].m;
		if (!m->unseen[0])
			continue;
		char a[PROM_LABEL_BUF];
		prometheus_label(m->unseen_allocator, a, sizeof a);
		fprintf(f, "ymtop_process_unseen_allocator{pid=\"%s\",exe=\"%s\","
			"allocator=\"%s\"} 1\n", pg[i].pid, pg[i].exe, a);
	}
	family(f, "ymtop_process_dropped_total", "counter",
	       "Samples or registrations the agent could not record, by reason.");
	for (size_t i = 0; i < n; i++) {
		const struct ym_header *h = &src[i].m->snap.hdr;
		const struct { const char *why; uint64_t v; } d[] = {
			{ "stacks", h->drop_stacks }, { "live", h->drop_live },
			{ "busy", h->drop_busy }, { "threads", h->drop_threads },
			{ "modules", h->drop_modules },
		};
		for (size_t j = 0; j < sizeof d / sizeof *d; j++) {
			fprintf(f, "ymtop_process_dropped_total{pid=\"%s\",exe=\"%s\","
				"reason=\"%s\"}", pg[i].pid, pg[i].exe, d[j].why);
			value(f, (double)d[j].v);
		}
	}
	family(f, "ymtop_process_unseen_calls", "gauge",
	       "1: some allocator calls of the process do not reach the agent "
	       "(object, reason); its figures miss them.");
	for (size_t i = 0; i < n; i++) {
		char line[MODEL_UNSEEN_LEN], obj[PROM_LABEL_BUF];
		const char *uobj, *uwhy;
		if (!model_unseen(src[i].m, line, sizeof line, &uobj, &uwhy))
			continue;
		fprintf(f, "ymtop_process_unseen_calls{pid=\"%s\",exe=\"%s\","
			"object=\"%s\",reason=\"%s\"}", pg[i].pid, pg[i].exe,
			prometheus_label(uobj, obj, sizeof obj), uwhy);
		value(f, 1);
	}
	for (int which = 0; which < 2; which++) {
		const char *name = which ? "ymtop_stack_allocated_bytes_total" :
				   "ymtop_stack_retained_bytes";
		family(f, name, which ? "counter" : "gauge", which ?
		       "Estimated requested bytes allocated by the stacks of one kind "
		       "(malloc, mmap) and display frame (top N by retained; the rest "
		       "as function=\"(other)\", one per kind)." :
		       "Estimated live requested bytes of the stacks of one kind (malloc, "
		       "mmap) and display frame (top N by retained; the rest as "
		       "function=\"(other)\", one per kind).  Per process and kind they "
		       "add up to ymtop_process_retained_bytes (malloc) or "
		       "ymtop_process_mmap_retained_bytes (mmap).");
		for (size_t i = 0; i < n; i++) {
			for (size_t j = 0; j < pg[i].n; j++) {
				const struct prom_group *g = &pg[i].g[j];
				fprintf(f, "%s{pid=\"%s\",exe=\"%s\",kind=\"%s\","
					"function=\"%s\",location=\"%s\"}", name, pg[i].pid,
					pg[i].exe, report_kind_name(g->kind), g->function,
					g->location);
				stack_value(f, which ? g->allocated : g->retained);
			}
			for (uint32_t k = 0; k < PROM_KINDS; k++) {
				if (!pg[i].have_other[k])
					continue;
				fprintf(f, "%s{pid=\"%s\",exe=\"%s\",kind=\"%s\","
					"function=\"(other)\",location=\"\"}", name, pg[i].pid,
					pg[i].exe, report_kind_name(k));
				stack_value(f, which ? pg[i].other_allocated[k] :
						pg[i].other_retained[k]);
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		groups_free(&pg[i]);
	free(pg);
	return ferror(f) ? -1 : 0;
}

int prometheus_write(FILE *f, struct model *m, struct sym *s,
		     const struct report_opts *o)
{
	struct prom_source one = { m, s };
	return prometheus_write_many(f, &one, 1, o);
}
