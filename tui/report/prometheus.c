/*
 * prometheus: the model in the Prometheus text exposition format, for
 * -f prometheus and --serve (see prometheus.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "prometheus.h"
#include "../proc.h"
#include "util/hashmap.h"

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
	/* Stacks whose display frame has no name yet (an address label that
	 * symbols arriving later would rename): withheld, their groups
	 * counted, their bytes summed per kind into function="(unresolved)". */
	double unres_retained[PROM_KINDS], unres_allocated[PROM_KINDS];
	int    have_unres[PROM_KINDS];
	size_t withheld;
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
static int stack_labels(struct sym *s, const struct frames_rules *r,
			const struct model_stack *st, char *fn, char *loc)
{
	struct stack_view v;
	int unresolved = 0;
	prometheus_label("(unknown)", fn, PROM_LABEL_BUF);
	loc[0] = '\0';
	if (!st->depth || frames_view(s, r, st->frames, st->depth, &v) != 0)
		return 0;
	if (v.n) {
		const struct sym_frame *x = &v.f[v.display];
		char tmp[4096];
		if (x->function)
			prometheus_label(x->function, fn, PROM_LABEL_BUF);
		else {
			sym_fallback(x, tmp, sizeof tmp);
			prometheus_label(tmp, fn, PROM_LABEL_BUF);
			unresolved = 1;
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
	return unresolved;
}

/* The labels of a model's stacks, kept across scrapes (m->cache): a
 * stack's display frame is named again only when its frames or the
 * symbolizer's state (sym_epoch) or the rules changed.  Labels are
 * interned: stacks sharing a display frame share one entry, and the
 * groups are summed per entry before any string is copied or compared. */
struct lab {
	char    *fn, *loc;           /* escaped label values */
	int      unresolved;
};
struct lab_stack {
	uint64_t key;                /* lab_key of the stack's frames */
	uint32_t lab;                /* index in labs, HMAP_NONE: not named */
};
struct lab_cache {
	uint64_t epoch;              /* sym_epoch the labels come from */
	const struct frames_rules *rules;
	struct lab_stack *st;        /* by stack id */
	uint32_t nst;
	struct lab *labs;
	uint32_t nlabs, caplabs;
	struct hmap index;           /* lab_hash -> index in labs */
	/* Per scrape: the sums per entry and kind, and the entries seen. */
	double   *sum_retained, *sum_allocated;
	unsigned char *used;
	uint32_t  capsums;
};

static void lab_clear(struct lab_cache *c)
{
	for (uint32_t i = 0; i < c->nlabs; i++) {
		free(c->labs[i].fn);
		free(c->labs[i].loc);
	}
	c->nlabs = 0;
	hmap_clear(&c->index);
	for (uint32_t i = 0; i < c->nst; i++)
		c->st[i].lab = HMAP_NONE;
}

static void lab_cache_free(void *p)
{
	struct lab_cache *c = p;
	if (!c)
		return;
	lab_clear(c);
	free(c->labs);
	free(c->st);
	free(c->sum_retained);
	free(c->sum_allocated);
	free(c->used);
	hmap_free(&c->index);
	free(c);
}

/* A stack's frames as one number (its depth included). */
static uint64_t lab_key(const struct model_stack *st)
{
	uint64_t h = ym_fnv1a_word(YM_FNV1A_INIT, st->depth);
	for (uint32_t i = 0; i < st->depth; i++)
		h = ym_fnv1a_word(h, st->frames[i]);
	return hmap_u64(h);
}

static uint64_t lab_hash(const char *fn, const char *loc, int unresolved)
{
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, fn);
	h = ym_fnv1a(h, "", 1);
	h = ym_fnv1a_str(h, loc);
	return hmap_u64(h ^ (uint64_t)unresolved);
}

struct lab_want {
	const struct lab_cache *c;
	const char *fn, *loc;
	int unresolved;
};

static int lab_eq(const void *ctx, uint32_t i)
{
	const struct lab_want *w = ctx;
	const struct lab *l = &w->c->labs[i];
	return l->unresolved == w->unresolved && !strcmp(l->fn, w->fn) &&
	       !strcmp(l->loc, w->loc);
}

/* The entry of these labels, added when new: HMAP_NONE when out of
 * memory. */
static uint32_t lab_intern(struct lab_cache *c, const char *fn,
			   const char *loc, int unresolved)
{
	uint64_t h = lab_hash(fn, loc, unresolved);
	struct lab_want w = { c, fn, loc, unresolved };
	uint32_t i = hmap_find(&c->index, h, lab_eq, &w);
	if (i != HMAP_NONE)
		return i;
	if (c->nlabs == c->caplabs) {
		uint32_t cap = c->caplabs ? c->caplabs * 2 : 256;
		struct lab *l = cap <= HMAP_MAX_ENTRIES ?
			realloc(c->labs, (size_t)cap * sizeof *l) : NULL;
		if (!l)
			return HMAP_NONE;
		c->labs = l;
		c->caplabs = cap;
	}
	struct lab *l = &c->labs[c->nlabs];
	l->fn = strdup(fn);
	l->loc = strdup(loc);
	l->unresolved = unresolved;
	if (!l->fn || !l->loc || hmap_add(&c->index, h, c->nlabs) != 0) {
		free(l->fn);
		free(l->loc);
		return HMAP_NONE;
	}
	return c->nlabs++;
}

/* m's cache, ready for this symbolizer state and these rules, with room
 * for every stack of m; NULL when out of memory. */
static struct lab_cache *lab_cache_get(struct model *m, struct sym *s,
				       const struct frames_rules *r)
{
	struct lab_cache *c = m->cache;
	if (c && m->cache_free != lab_cache_free)
		return NULL;    /* another writer's */
	if (!c) {
		c = calloc(1, sizeof *c);
		if (!c)
			return NULL;
		m->cache = c;
		m->cache_free = lab_cache_free;
	}
	uint64_t epoch = sym_epoch(s);
	/* Labels no stack names any more (stacks whose frames changed)
	 * are dropped with the rest once they outnumber the stacks. */
	if (c->epoch != epoch || c->rules != r ||
	    c->nlabs > 2 * (uint64_t)m->nstacks + 1024) {
		lab_clear(c);
		c->epoch = epoch;
		c->rules = r;
	}
	if (m->nstacks > c->nst) {
		struct lab_stack *st = realloc(c->st, (size_t)m->nstacks * sizeof *st);
		if (!st)
			return NULL;
		for (uint32_t i = c->nst; i < m->nstacks; i++)
			st[i].lab = HMAP_NONE;
		c->st = st;
		c->nst = m->nstacks;
	}
	return c;
}

/* The entry of stack st's labels: named now when its frames changed or
 * it has none; HMAP_NONE when out of memory. */
static uint32_t lab_of(struct lab_cache *c, struct sym *s,
		       const struct frames_rules *r, const struct model_stack *st)
{
	struct lab_stack *e = &c->st[st->id];
	uint64_t key = lab_key(st);
	if (e->lab != HMAP_NONE && e->key == key)
		return e->lab;
	char fn[PROM_LABEL_BUF], loc[PROM_LABEL_BUF];
	int unresolved = stack_labels(s, r, st, fn, loc);
	uint64_t epoch = sym_epoch(s);
	uint32_t i = lab_intern(c, fn, loc, unresolved);
	/* Named short of memory (the symbolizer's epoch moved on): right
	 * for this scrape, not kept. */
	e->lab = epoch == c->epoch ? i : HMAP_NONE;
	e->key = key;
	return i;
}

/* Room for the per-entry sums of c's entries. */
static int lab_sums(struct lab_cache *c)
{
	if (c->nlabs <= c->capsums)
		return 0;
	uint32_t cap = c->caplabs;
	double *a = realloc(c->sum_retained, (size_t)cap * PROM_KINDS * sizeof *a);
	if (a)
		c->sum_retained = a;
	double *b = realloc(c->sum_allocated, (size_t)cap * PROM_KINDS * sizeof *b);
	if (b)
		c->sum_allocated = b;
	unsigned char *v = realloc(c->used, (size_t)cap * PROM_KINDS * sizeof *v);
	if (v)
		c->used = v;
	if (!a || !b || !v)
		return -1;
	c->capsums = cap;
	return 0;
}

static int group_add(struct proc_groups *pg, size_t cap, const char *fn,
		     const char *loc, int withheld, uint32_t kind,
		     double retained, double allocated)
{
	if (pg->n >= cap)
		return 0;
	struct prom_group *g = &pg->g[pg->n];
	g->withheld = withheld;
	g->function = strdup(fn);
	g->location = strdup(loc);
	g->kind = kind;
	g->retained = retained;
	g->allocated = allocated;
	pg->n++;
	return g->function && g->location ? 0 : -1;
}

/* Append the stacks of m (those with a sample) to pg->g, at most one
 * group per kind and display frame (groups_finish sums those of several
 * processes); cap: the room pg->g has; withhold: mark the groups whose
 * display frame has no name (groups_finish sets them apart).  The sums
 * are of whole bytes, exact in any order.  -1 when out of memory. */
static int groups_collect(struct proc_groups *pg, size_t cap, struct model *m,
			  struct sym *s, const struct report_opts *o, int withhold)
{
	struct lab_cache *c = lab_cache_get(m, s, o->rules);
	if (!c)
		goto uncached;
	/* Name every stack first: the sums need the entries' number. */
	for (uint32_t k = 0; k < m->nstacks; k++) {
		const struct model_stack *st = &m->stacks[k];
		if (st->alloc_samples && lab_of(c, s, o->rules, st) == HMAP_NONE)
			goto uncached;
	}
	/* An entry named short of memory is not kept: its stack has no
	 * entry now, and the plain way names it. */
	for (uint32_t k = 0; k < m->nstacks; k++)
		if (m->stacks[k].alloc_samples && c->st[k].lab == HMAP_NONE)
			goto uncached;
	if (lab_sums(c) != 0)
		goto uncached;
	size_t nslots = (size_t)c->nlabs * PROM_KINDS;
	if (nslots) {   /* none named yet: the arrays are not allocated */
		memset(c->sum_retained, 0, nslots * sizeof *c->sum_retained);
		memset(c->sum_allocated, 0, nslots * sizeof *c->sum_allocated);
		memset(c->used, 0, nslots * sizeof *c->used);
	}
	for (uint32_t k = 0; k < m->nstacks; k++) {
		const struct model_stack *st = &m->stacks[k];
		if (!st->alloc_samples)
			continue;
		size_t slot = (size_t)c->st[k].lab * PROM_KINDS + kind_index(st->kind);
		c->sum_retained[slot] += st->retained_bytes;
		c->sum_allocated[slot] += st->alloc_bytes;
		c->used[slot] = 1;
	}
	for (size_t slot = 0; slot < nslots; slot++) {
		if (!c->used[slot])
			continue;
		const struct lab *l = &c->labs[slot / PROM_KINDS];
		if (group_add(pg, cap, l->fn, l->loc, withhold && l->unresolved,
			      (uint32_t)(slot % PROM_KINDS), c->sum_retained[slot],
			      c->sum_allocated[slot]) != 0)
			return -1;
	}
	return 0;
uncached:
	for (uint32_t k = 0; k < m->nstacks && pg->n < cap; k++) {
		const struct model_stack *st = &m->stacks[k];
		if (!st->alloc_samples)
			continue;
		char fn[PROM_LABEL_BUF], loc[PROM_LABEL_BUF];
		int unresolved = stack_labels(s, o->rules, st, fn, loc);
		if (group_add(pg, cap, fn, loc, withhold && unresolved,
			      kind_index(st->kind), st->retained_bytes,
			      st->alloc_bytes) != 0)
			return -1;
	}
	return 0;
}

/* Sum the groups of one kind and display frame, sort them by retained,
 * keep the top N (of both kinds) and sum the rest into their kind's
 * other. */
static void groups_finish(struct proc_groups *pg, const struct report_opts *o)
{
	if (pg->n)   /* no group: pg->g may be NULL */
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
	w = 0;
	for (size_t i = 0; i < pg->n; i++) {
		struct prom_group *g = &pg->g[i];
		if (!g->withheld) {
			pg->g[w++] = *g;
			continue;
		}
		pg->withheld++;
		pg->have_unres[g->kind] = 1;
		pg->unres_retained[g->kind] += g->retained;
		pg->unres_allocated[g->kind] += g->allocated;
		free(g->function);
		free(g->location);
	}
	pg->n = w;
	if (pg->n)
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
	const char *exe = model_exe(m);
	const char *base = strrchr(exe, '/');
	prometheus_label(base ? base + 1 : exe, pg->exe, sizeof pg->exe);
	snprintf(pg->pid, sizeof pg->pid, "%ld", (long)model_pid(m));
	pg->g = calloc(m->nstacks ? m->nstacks : 1, sizeof *pg->g);
	if (!pg->g)
		return -1;
	if (groups_collect(pg, m->nstacks, m, s, o, 1) != 0) {
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
		if (groups_collect(&pg, cap, src[i].m, src[i].s, o, 0) != 0) {
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
	P_ALLOCS, P_ALARMS, P_RATE, P_REQ_RATE, P_BUDGET
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
	[P_RATE] = { "ymtop_process_sample_rate_bytes", "gauge",
		"Mean bytes between samples in force now (1: exact mode); a cost "
		"budget may make it longer than the one asked for.  Aggregated: the "
		"longest among the processes." },
	[P_REQ_RATE] = { "ymtop_process_requested_sample_rate_bytes", "gauge",
		"Mean bytes between samples asked for (YM_SAMPLE_RATE); absent when "
		"the agent does not say (older than ABI 9).  Aggregated: the longest." },
	[P_BUDGET] = { "ymtop_process_cost_budget_percent", "gauge",
		"The agent's cost budget (YM_MAX_OVERHEAD, --max-overhead), percent of "
		"the process's CPU time; absent without a budget or when the agent "
		"does not say.  Aggregated: the largest, when every process has one." },
};

/* The value of a process field; 0 when the process has none (not
 * written). */
static int pvalue(const struct model *m, enum pfield k, double *v)
{
	const struct ym_totals *t = &m->totals;
	switch (k) {
	case P_RETAINED: *v = m->retained_bytes; return 1;
	case P_MMAP: *v = m->mmap_retained_bytes; return model_tracks_mmap(m);
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
	case P_ALARMS: *v = (double)model_alarms_written(m); return 1;
	case P_RATE: *v = (double)model_sampling(m).effective; return 1;
	case P_REQ_RATE: {
		struct model_sampling sm = model_sampling(m);
		*v = (double)sm.requested;
		return sm.known;
	}
	case P_BUDGET: {
		struct model_sampling sm = model_sampling(m);
		*v = sm.budget_percent;
		return sm.known && sm.budget_percent > 0;
	}
	}
	return 0;
}

/* The counters summed across exits in aggregate mode, in this order:
 * P_ALLOC_BYTES, P_REQ_BYTES, P_ALLOCS, P_ALARMS, then the dropped_total
 * reasons. */
#define PC_FIELDS 4
#define PC_DROPS  5
#define PC_N      (PC_FIELDS + PC_DROPS)
static const enum pfield pc_field[PC_FIELDS] = {
	P_ALLOC_BYTES, P_REQ_BYTES, P_ALLOCS, P_ALARMS
};
static const char *const drop_why[PC_DROPS] = {
	"stacks", "live", "busy", "threads", "modules"
};

static void counters(const struct model *m, double c[PC_N])
{
	struct model_drops d = model_drops(m);
	for (int j = 0; j < PC_FIELDS; j++)
		if (!pvalue(m, pc_field[j], &c[j]))
			c[j] = 0;
	c[4] = (double)d.stacks;
	c[5] = (double)d.live;
	c[6] = (double)d.busy;
	c[7] = (double)d.threads;
	c[8] = (double)d.modules;
}

/* One label set of the exposition: a process (per pid) or the processes
 * sharing an executable and a cgroup (aggregate), with the final counters
 * of those of them that exited (carry, or NULL). */
struct row {
	char   labels[3 * PROM_LABEL_BUF];   /* 'pid="1",exe="x"' */
	size_t first;        /* first member (index of src), SIZE_MAX none */
	const double *carry;
	struct proc_groups pg;
};

/* Members of a row: from r->first along next[]. */
#define FOR_MEMBERS(i, r, next) \
	for (size_t i = (r)->first; i != SIZE_MAX; i = (next)[i])

/* The unseen series of a row (family: 0 allocator, 1 calls), each label
 * value once: per pid 1, in aggregate the number of processes that have
 * it. */
static void unseen_series(FILE *f, const struct prom_source *src,
			  const struct row *r, const size_t *next, int calls)
{
	FOR_MEMBERS(i, r, next) {
		char a[PROM_LABEL_BUF], b[PROM_LABEL_BUF], line[MODEL_UNSEEN_LEN];
		const char *uobj, *uwhy = "";
		if (calls) {
			if (!model_unseen(src[i].m, line, sizeof line, &uobj, &uwhy))
				continue;
			prometheus_label(uobj, a, sizeof a);
		} else {
			if (!src[i].m->unseen[0])
				continue;
			prometheus_label(src[i].m->unseen_allocator, a, sizeof a);
		}
		int count = 0, earlier = 0;
		FOR_MEMBERS(j, r, next) {
			const char *jwhy = "";
			if (calls) {
				if (!model_unseen(src[j].m, line, sizeof line, &uobj, &jwhy))
					continue;
				prometheus_label(uobj, b, sizeof b);
			} else {
				if (!src[j].m->unseen[0])
					continue;
				prometheus_label(src[j].m->unseen_allocator, b, sizeof b);
			}
			if (strcmp(a, b) || strcmp(uwhy, jwhy))
				continue;
			if (j < i)
				earlier = 1;
			count++;
		}
		if (earlier)
			continue;
		if (calls)
			fprintf(f, "ymtop_process_unseen_calls{%s,object=\"%s\",reason=\"%s\"}",
				r->labels, a, uwhy);
		else
			fprintf(f, "ymtop_process_unseen_allocator{%s,allocator=\"%s\"}",
				r->labels, a);
		value(f, count);
	}
}

static void stack_series(FILE *f, const char *name, const struct row *r,
			 int which)
{
	const struct proc_groups *pg = &r->pg;
	for (size_t j = 0; j < pg->n; j++) {
		const struct prom_group *g = &pg->g[j];
		fprintf(f, "%s{%s,kind=\"%s\",function=\"%s\",location=\"%s\"}", name,
			r->labels, report_kind_name(g->kind), g->function, g->location);
		stack_value(f, which ? g->allocated : g->retained);
	}
	for (uint32_t k = 0; k < PROM_KINDS; k++) {
		if (pg->have_other[k]) {
			fprintf(f, "%s{%s,kind=\"%s\",function=\"(other)\",location=\"\"}",
				name, r->labels, report_kind_name(k));
			stack_value(f, which ? pg->other_allocated[k] : pg->other_retained[k]);
		}
		if (pg->have_unres[k]) {
			fprintf(f, "%s{%s,kind=\"%s\",function=\"(unresolved)\","
				"location=\"\"}", name, r->labels, report_kind_name(k));
			stack_value(f, which ? pg->unres_allocated[k] : pg->unres_retained[k]);
		}
	}
}

static int write_rows(FILE *f, const struct prom_source *src, struct row *rows,
		      size_t nrows, const size_t *next, int agg)
{
	for (size_t k = 0; k < sizeof pfields / sizeof *pfields; k++) {
		family(f, pfields[k].name, pfields[k].type, pfields[k].help);
		int pc = -1;
		for (int j = 0; j < PC_FIELDS; j++)
			if (pc_field[j] == (enum pfield)k)
				pc = j;
		/* A gauge some processes have and others not (in use from the
		 * allocator's statistics, mmap with an older agent) would be a
		 * part shown as the whole: absent unless every member has it. */
		int every = k == P_MMAP || k == P_INUSE || k == P_HEAP_AGE ||
			    k == P_REQ_RATE || k == P_BUDGET;
		/* Not additive: the heap's age, rates and budgets. */
		int largest = k == P_HEAP_AGE || k == P_RATE || k == P_REQ_RATE ||
			      k == P_BUDGET;
		for (size_t r = 0; r < nrows; r++) {
			double sum = 0, v;
			int have = 0, missing = 0;
			FOR_MEMBERS(i, &rows[r], next) {
				if (!pvalue(src[i].m, (enum pfield)k, &v)) {
					missing = 1;
					continue;
				}
				have = 1;
				sum = largest ? (v > sum ? v : sum) : sum + v;
			}
			if (every && missing)
				have = 0;
			if (pc >= 0 && rows[r].carry) {
				have = 1;
				sum += rows[r].carry[pc];
			}
			if (!have)
				continue;
			fprintf(f, "%s{%s}", pfields[k].name, rows[r].labels);
			if (k == P_HEAP_AGE)
				fprintf(f, " %.3f\n", sum);
			else if (k == P_BUDGET)
				fprintf(f, " %g\n", sum);
			else
				value(f, sum);
		}
	}
	family(f, "ymtop_process_unseen_allocator", "gauge",
	       "1 when the process allocates through an allocator the agent cannot "
	       "see (linked into the program, or memory growing with no allocator "
	       "call); absent otherwise.  Aggregated: how many processes do.");
	for (size_t r = 0; r < nrows; r++)
		unseen_series(f, src, &rows[r], next, 0);
	family(f, "ymtop_process_dropped_total", "counter",
	       "Samples or registrations the agent could not record, by reason.");
	for (size_t r = 0; r < nrows; r++) {
		double sum[PC_N] = { 0 }, c[PC_N];
		FOR_MEMBERS(i, &rows[r], next) {
			counters(src[i].m, c);
			for (int j = 0; j < PC_N; j++)
				sum[j] += c[j];
		}
		for (int j = 0; j < PC_DROPS; j++) {
			fprintf(f, "ymtop_process_dropped_total{%s,reason=\"%s\"}",
				rows[r].labels, drop_why[j]);
			value(f, sum[PC_FIELDS + j] +
				 (rows[r].carry ? rows[r].carry[PC_FIELDS + j] : 0));
		}
	}
	family(f, "ymtop_process_unseen_calls", "gauge",
	       "1: some allocator calls of the process do not reach the agent "
	       "(object, reason); its figures miss them.  Aggregated: how many "
	       "processes.");
	for (size_t r = 0; r < nrows; r++)
		unseen_series(f, src, &rows[r], next, 1);
	family(f, "ymtop_stack_series_withheld", "gauge",
	       "Stack groups whose display frame has no symbol yet (symbols "
	       "pending or absent): not published under an address that a later "
	       "scrape would rename; their bytes are in function=\"(unresolved)\".");
	for (size_t r = 0; r < nrows; r++) {
		if (rows[r].first == SIZE_MAX)
			continue;
		fprintf(f, "ymtop_stack_series_withheld{%s}", rows[r].labels);
		value(f, (double)rows[r].pg.withheld);
	}
	for (int which = 0; which < 2; which++) {
		const char *name = which ? agg ? "ymtop_stack_allocated_bytes" :
				   "ymtop_stack_allocated_bytes_total" :
				   "ymtop_stack_retained_bytes";
		family(f, name, which && !agg ? "counter" : "gauge", which ? agg ?
		       "Estimated requested bytes allocated by the stacks of one kind "
		       "(malloc, mmap) and display frame in the running processes of "
		       "the group (falls when one exits: a gauge, not a counter; top N "
		       "by retained, the rest as function=\"(other)\", one per kind)." :
		       "Estimated requested bytes allocated by the stacks of one kind "
		       "(malloc, mmap) and display frame (top N by retained; the rest "
		       "as function=\"(other)\", one per kind)." :
		       "Estimated live requested bytes of the stacks of one kind (malloc, "
		       "mmap) and display frame (top N by retained; the rest as "
		       "function=\"(other)\", one per kind; unnamed frames as "
		       "function=\"(unresolved)\").  Per label set and kind they add up "
		       "to ymtop_process_retained_bytes (malloc) or "
		       "ymtop_process_mmap_retained_bytes (mmap).");
		for (size_t r = 0; r < nrows; r++)
			stack_series(f, name, &rows[r], which);
	}
	return ferror(f) ? -1 : 0;
}

static void rows_free(struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		groups_free(&rows[i].pg);
	free(rows);
}

int prometheus_write_many(FILE *f, const struct prom_source *src, size_t n,
			  const struct report_opts *o)
{
	struct row *rows = calloc(n ? n : 1, sizeof *rows);
	size_t *next = calloc(n ? n : 1, sizeof *next);
	if (!rows || !next) {
		free(rows);
		free(next);
		errno = ENOMEM;
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		next[i] = SIZE_MAX;
		rows[i].first = i;
		if (groups_build(&rows[i].pg, src[i].m, src[i].s, o) != 0) {
			rows_free(rows, i);
			free(next);
			errno = ENOMEM;
			return -1;
		}
		snprintf(rows[i].labels, sizeof rows[i].labels, "pid=\"%s\",exe=\"%s\"",
			 rows[i].pg.pid, rows[i].pg.exe);
	}
	int rc = write_rows(f, src, rows, n, next, 0);
	rows_free(rows, n);
	free(next);
	return rc;
}

/* ---- aggregate: per executable and cgroup, counters across exits ---- */

struct carry_key {
	char  *exe, *cgroup;   /* escaped label values; NULL: a free slot */
	double c[PC_N];        /* final counters of its exited processes */
	int    live;           /* has a process at this scrape */
};

struct carry_seen {
	pid_t    pid;
	uint64_t start;        /* start_ticks: a reused pid is another process */
	size_t   key;
	double   c[PC_N];
};

struct prom_carry {
	struct carry_key  *k;
	size_t             nk;
	struct carry_seen *seen;
	size_t             nseen;
};

struct prom_carry *prom_carry_new(void)
{
	return calloc(1, sizeof(struct prom_carry));
}

void prom_carry_free(struct prom_carry *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nk; i++) {
		free(c->k[i].exe);
		free(c->k[i].cgroup);
	}
	free(c->k);
	free(c->seen);
	free(c);
}

static size_t key_find(const struct prom_carry *c, const char *exe,
		       const char *cg)
{
	for (size_t i = 0; i < c->nk; i++)
		if (c->k[i].exe && !strcmp(c->k[i].exe, exe) &&
		    !strcmp(c->k[i].cgroup, cg))
			return i;
	return SIZE_MAX;
}

/* A slot for a new key: a new one while fewer than PROM_CARRY_KEYS, else
 * the first without a process at this scrape (its series end: when its
 * program comes back, its counters restart from 0, a reset PromQL's
 * rate() reads as one); SIZE_MAX when every slot has a process. */
static size_t key_add(struct prom_carry *c, const char *exe, const char *cg)
{
	size_t i = SIZE_MAX;
	if (c->nk < PROM_CARRY_KEYS) {
		struct carry_key *k = realloc(c->k, (c->nk + 1) * sizeof *k);
		if (!k)
			return SIZE_MAX;
		c->k = k;
		i = c->nk++;
		memset(&c->k[i], 0, sizeof c->k[i]);
	} else {
		for (size_t j = 0; j < c->nk && i == SIZE_MAX; j++)
			if (!c->k[j].live)
				i = j;
		if (i == SIZE_MAX)
			return SIZE_MAX;
		free(c->k[i].exe);
		free(c->k[i].cgroup);
		memset(&c->k[i], 0, sizeof c->k[i]);
	}
	c->k[i].exe = strdup(exe);
	c->k[i].cgroup = strdup(cg);
	if (!c->k[i].exe || !c->k[i].cgroup) {
		free(c->k[i].exe);
		free(c->k[i].cgroup);
		c->k[i].exe = c->k[i].cgroup = NULL;
		return SIZE_MAX;
	}
	return i;
}

/* What the aggregate writer learns of each process. */
struct agg_proc {
	char   exe[PROM_LABEL_BUF], cgroup[PROM_LABEL_BUF];
	int    cgroup_known;   /* 0: gone before /proc/PID/cgroup was read */
	double c[PC_N];
	size_t key;
};

static void agg_label(const struct prom_source *src, struct agg_proc *a)
{
	const char *exe = model_exe(src->m);
	const char *base = strrchr(exe, '/');
	prometheus_label(base ? base + 1 : exe, a->exe, sizeof a->exe);
	char cg[PROM_LABEL_MAX + 8];
	const char *raw = src->cgroup;
	a->cgroup_known = 1;
	if (!raw) {
		cg[0] = '\0';
		a->cgroup_known = src->m->alive &&
				  proc_cgroup(model_pid(src->m), cg, sizeof cg) == 0;
		raw = cg;
	}
	prometheus_label(raw, a->cgroup, sizeof a->cgroup);
	counters(src->m, a->c);
}

/* The cgroup of a process that exited before it was read: its own at the
 * last scrape (carry, may be NULL), else the one most running processes of
 * its executable are in (a fork child starts in its parent's), else "".
 * In a group of its own it would count twice, or make a group flap. */
static void unknown_cgroups(const struct prom_carry *c,
			    const struct prom_source *src, struct agg_proc *a,
			    size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (a[i].cgroup_known)
			continue;
		int found = 0;
		for (size_t s = 0; c && s < c->nseen && !found; s++)
			if (c->seen[s].pid == model_pid(src[i].m) &&
			    c->seen[s].start == src[i].m->proc.start_ticks) {
				snprintf(a[i].cgroup, sizeof a[i].cgroup, "%s",
					 c->k[c->seen[s].key].cgroup);
				found = 1;
			}
		size_t best = SIZE_MAX, most = 0;
		for (size_t j = 0; j < n && !found; j++) {
			if (!a[j].cgroup_known || strcmp(a[j].exe, a[i].exe))
				continue;
			size_t same = 0;
			for (size_t k = 0; k < n; k++)
				same += a[k].cgroup_known && !strcmp(a[k].exe, a[i].exe) &&
					!strcmp(a[k].cgroup, a[j].cgroup);
			if (same > most) {
				most = same;
				best = j;
			}
		}
		if (!found && best != SIZE_MAX)
			memcpy(a[i].cgroup, a[best].cgroup, sizeof a[i].cgroup);
	}
}

/* Move the counters of the processes seen at the last scrape that are
 * gone (or restarted: a reused pid, an exec, a counter that went back)
 * into their key, then remember this scrape's. */
static int carry_update(struct prom_carry *c, const struct prom_source *src,
			struct agg_proc *a, size_t n)
{
	for (size_t s = 0; s < c->nseen; s++) {
		const struct carry_seen *sn = &c->seen[s];
		struct carry_key *k = &c->k[sn->key];
		int same = 0;
		for (size_t i = 0; i < n && !same; i++) {
			if (model_pid(src[i].m) != sn->pid ||
			    src[i].m->proc.start_ticks != sn->start ||
			    strcmp(a[i].exe, k->exe) || strcmp(a[i].cgroup, k->cgroup))
				continue;
			same = 1;
			for (int j = 0; j < PC_N; j++)
				if (a[i].c[j] < sn->c[j])
					same = 0;
		}
		if (!same)
			for (int j = 0; j < PC_N; j++)
				k->c[j] += sn->c[j];
	}
	for (size_t i = 0; i < c->nk; i++)
		c->k[i].live = 0;
	for (size_t i = 0; i < n; i++) {
		a[i].key = key_find(c, a[i].exe, a[i].cgroup);
		if (a[i].key != SIZE_MAX)
			c->k[a[i].key].live = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (a[i].key != SIZE_MAX)
			continue;
		a[i].key = key_find(c, a[i].exe, a[i].cgroup);
		if (a[i].key == SIZE_MAX)
			a[i].key = key_add(c, a[i].exe, a[i].cgroup);
		if (a[i].key != SIZE_MAX)
			c->k[a[i].key].live = 1;
	}
	struct carry_seen *seen = realloc(c->seen, (n ? n : 1) * sizeof *seen);
	if (!seen)
		return -1;
	c->seen = seen;
	c->nseen = 0;
	for (size_t i = 0; i < n; i++) {
		if (a[i].key == SIZE_MAX)
			continue;
		struct carry_seen *sn = &c->seen[c->nseen++];
		sn->pid = model_pid(src[i].m);
		sn->start = src[i].m->proc.start_ticks;
		sn->key = a[i].key;
		memcpy(sn->c, a[i].c, sizeof sn->c);
	}
	return 0;
}

int prom_carry_update(struct prom_carry *c, const struct prom_source *src,
		      size_t n)
{
	struct agg_proc *a = calloc(n ? n : 1, sizeof *a);
	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++)
		agg_label(&src[i], &a[i]);
	unknown_cgroups(c, src, a, n);
	int rc = carry_update(c, src, a, n);
	free(a);
	return rc;
}

static int any_carry(const struct carry_key *k)
{
	for (int j = 0; j < PC_N; j++)
		if (k->c[j] > 0)
			return 1;
	return 0;
}

int prometheus_write_agg(FILE *f, const struct prom_source *src, size_t n,
			 const struct report_opts *o, struct prom_carry *c)
{
	struct agg_proc *a = calloc(n ? n : 1, sizeof *a);
	size_t *next = calloc(n ? n : 1, sizeof *next);
	size_t cap = (c ? c->nk : 0) + n + 1;
	struct row *rows = calloc(cap, sizeof *rows);
	size_t nrows = 0, *rowof = calloc(cap, sizeof *rowof);
	int rc = -1;
	if (!a || !next || !rows || !rowof)
		goto out;
	for (size_t i = 0; i < n; i++) {
		agg_label(&src[i], &a[i]);
		a[i].key = SIZE_MAX;
	}
	unknown_cgroups(c, src, a, n);
	if (c && carry_update(c, src, a, n) != 0)
		goto out;
	/* Rows: one per key with a process or exited processes' counters,
	 * then one per process that has no key (no room, no carry). */
	for (size_t k = 0; c && k < c->nk; k++) {
		rowof[k] = SIZE_MAX;
		if (!c->k[k].exe || (!c->k[k].live && !any_carry(&c->k[k])))
			continue;
		rowof[k] = nrows;
		struct row *r = &rows[nrows++];
		r->first = SIZE_MAX;
		r->carry = c->k[k].c;
		snprintf(r->labels, sizeof r->labels, "exe=\"%s\",cgroup=\"%s\"",
			 c->k[k].exe, c->k[k].cgroup);
	}
	for (size_t i = n; i-- > 0;) {
		next[i] = SIZE_MAX;
		size_t r = SIZE_MAX;
		if (a[i].key != SIZE_MAX)
			r = rowof[a[i].key];
		else
			for (size_t j = 0; j < nrows && r == SIZE_MAX; j++)
				if (!rows[j].carry && rows[j].first != SIZE_MAX &&
				    !strcmp(a[rows[j].first].exe, a[i].exe) &&
				    !strcmp(a[rows[j].first].cgroup, a[i].cgroup))
					r = j;
		if (r == SIZE_MAX) {
			r = nrows++;
			rows[r].first = SIZE_MAX;
			snprintf(rows[r].labels, sizeof rows[r].labels,
				 "exe=\"%s\",cgroup=\"%s\"", a[i].exe, a[i].cgroup);
		}
		next[i] = rows[r].first;
		rows[r].first = i;
	}
	/* Each row's stacks merged as prometheus_merge does, withholding
	 * unnamed frames. */
	for (size_t r = 0; r < nrows; r++) {
		struct proc_groups *pg = &rows[r].pg;
		size_t scap = 0;
		FOR_MEMBERS(i, &rows[r], next)
			scap += src[i].m->nstacks;
		pg->g = calloc(scap ? scap : 1, sizeof *pg->g);
		if (!pg->g)
			goto out;
		FOR_MEMBERS(i, &rows[r], next)
			if (groups_collect(pg, scap, src[i].m, src[i].s, o, 1) != 0)
				goto out;
		groups_finish(pg, o);
	}
	rc = write_rows(f, src, rows, nrows, next, 1);
out:
	if (rc != 0 && !ferror(f))
		errno = ENOMEM;
	if (rows)
		rows_free(rows, nrows);
	free(rowof);
	free(next);
	free(a);
	return rc;
}

int prometheus_write(FILE *f, struct model *m, struct sym *s,
		     const struct report_opts *o)
{
	struct prom_source one = { m, s, NULL };
	return prometheus_write_many(f, &one, 1, o);
}
