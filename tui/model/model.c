/*
 * model: ymtop's data from a validated snapshot: estimates, rates,
 * growth against a mark, the sorted and filtered view; no curses (see model.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "model.h"
#include "shortlived.h"

void model_init(struct model *m)
{
	memset(m, 0, sizeof *m);
}

void model_free(struct model *m)
{
	shm_snapshot_free(&m->snap);
	free(m->stacks);
	free(m->order);
	free(m->prev_alloc);
	free(m->mark_retained);
	free(m->mark_peak_seen);
	free(m->mark_agent_peak);
	free(m->mark_peak_seen_samples);
	free(m->thread_names);
	model_trend_free(m);
	if (m->cache && m->cache_free)
		m->cache_free(m->cache);
	memset(m, 0, sizeof *m);
}

static double fx(uint64_t v)
{
	return (double)v / (double)YM_FX_ONE;
}

struct model_life model_life(const struct model_stack *s, int b)
{
	struct model_life l = { 0, 0 };
	if (s->rec && b >= 0 && b < YM_LIFE_BUCKETS) {
		l.objects = fx(s->rec->life[b].objects_fx);
		l.bytes = (double)s->rec->life[b].bytes;
	}
	return l;
}

/* Counters are monotonic, but a reset in the agent (or a torn read) can
 * make free exceed alloc for a moment: clamp. */
static double diff(double a, double b)
{
	return a > b ? a - b : 0.0;
}

static int grow(double **arr, uint32_t *n, uint32_t want)
{
	if (*n >= want)
		return 0;
	double *p = realloc(*arr, (size_t)want * sizeof *p);
	if (!p)
		return -1;
	memset(p + *n, 0, (size_t)(want - *n) * sizeof *p);
	*arr = p;
	*n = want;
	return 0;
}

const char *model_name(const struct model *m)
{
	if (m->name[0])
		return m->name;
	const char *b = strrchr(m->snap.hdr.exe, '/');
	return b ? b + 1 : m->snap.hdr.exe;
}

/* The mark's arrays, to n entries (new ones zero). */
static int grow_marks(struct model *m, uint32_t n)
{
	uint32_t a = m->nmark, b = m->nmark, c = m->nmark;
	if (grow(&m->mark_peak_seen, &a, n) || grow(&m->mark_agent_peak, &b, n) ||
	    grow(&m->mark_peak_seen_samples, &c, n))
		return -1;
	return grow(&m->mark_retained, &m->nmark, n);
}

/* model_rel_error at sampling rate `rate`. */
static double rel_error(uint64_t rate, double bytes, int64_t n)
{
	if (rate <= 1 || bytes <= 0)
		return 0;
	if (n <= 0)
		return 1;
	/* The samples' mean weight w = u / p(u) in units of R: x = y / (1 -
	 * e^-y) with y = u / R.  Newton's method on g(y) = y - x (1 - e^-y),
	 * convex and increasing right of its root, from y = min(x, 2 (x -
	 * 1)), right of it (x >= 1 + y / 2), falls to the root. */
	double x = bytes / (double)n / (double)rate, q = 1;   /* q = 1 - p(u) */
	if (x > 1) {
		double y = x < 2 * (x - 1) ? x : 2 * (x - 1);
		for (int i = 0; i < 60; i++) {
			double e = exp(-y), g = y - x * (1 - e), d = 1 - x * e;
			if (g <= 1e-12 * y || d <= 0)
				break;
			y -= g / d;
		}
		q = exp(-y);
	}
	return sqrt(q / (double)n);
}

static int few(uint64_t rate, double bytes, int64_t n, double err)
{
	return rate > 1 && bytes > 0 && n >= 0 && n < MODEL_FEW_SAMPLES &&
	       err >= MODEL_FEW_ERROR;
}

double model_rel_error(const struct model *m, double bytes, int64_t n)
{
	return rel_error(shm_snapshot_error_rate(&m->snap), bytes, n);
}

int model_few(const struct model *m, double bytes, int64_t n)
{
	return few(shm_snapshot_error_rate(&m->snap), bytes, n, model_rel_error(m, bytes, n));
}

int model_update(struct model *m, struct shm_snapshot *snap)
{
	return model_update_facts(m, snap, NULL);
}

/* The agent raises its peaks in steps (segment.h: less than 64 KiB a
 * thread behind, as in exact mode) and publishes the process's estimate
 * apart from the stacks': a retained figure read now is a level that was
 * reached, so a peak below it is raised to it.  Its time stays the
 * agent's (when the last step was crossed: the level was near then; a
 * plateau would otherwise read "0ns ago" on every report), else now. */
static void peak_at_least(double *peak, uint64_t *when, double now_bytes,
			  uint64_t now_ns)
{
	if (now_bytes > *peak) {
		*peak = now_bytes;
		if (*when == 0)
			*when = now_ns;
	}
}

int model_update_facts(struct model *m, struct shm_snapshot *snap,
		       const struct model_facts *facts)
{
	uint32_t n = snap->nstacks;
	uint32_t nnames = facts && facts->thread_names ? facts->nthread_names : 0;
	/* The last snapshot's arrays when this one fits: writing over
	 * memory already in use costs no new pages and leaves no freed
	 * block of 472 bytes a stack behind for the next one to miss. */
	int inplace = m->stacks && m->order && n <= m->capstacks;
	struct model_stack *st = inplace ? m->stacks : calloc(n ? n : 1, sizeof *st);
	uint32_t *order = inplace ? m->order : calloc(n ? n : 1, sizeof *order);
	char (*names)[MODEL_THREAD_NAME] = nnames ? calloc(nnames, sizeof *names) : NULL;
	if (!st || !order || (nnames && !names) ||
	    grow(&m->prev_alloc, &m->nprev, n) ||
	    (m->marked && grow_marks(m, n))) {
		if (!inplace) {
			free(st);
			free(order);
		}
		free(names);
		return -1;
	}
	/* A snapshot without the live table keeps the last known ages. */
	int keep_ages = snap->live_skipped && m->stacks;
	if (nnames)
		memcpy(names, facts->thread_names, (size_t)nnames * sizeof *names);
	double dt = 0;
	if (m->have_snap && snap->taken_mono_ns > m->prev_mono_ns)
		dt = (double)(snap->taken_mono_ns - m->prev_mono_ns) / 1e9;
	/* The first snapshot's rates are averages since the agent started
	 * (its counters start there, unless a reset cleared them since). */
	int first = !m->have_snap && snap->hdr.reset_count == 0;
	if (first && snap->taken_mono_ns > snap->hdr.start_mono_ns)
		dt = (double)(snap->taken_mono_ns - snap->hdr.start_mono_ns) / 1e9;
	if (first)
		memset(&m->prev_totals, 0, sizeof m->prev_totals);
	/* A target that is gone allocates nothing: its rates are 0, not the
	 * last ones seen.  (The session's facts.alive also requires the
	 * EXITED flag clear; checked here again for callers without facts.) */
	int alive = facts && facts->alive && !(snap->hdr.flags & YM_FLAG_EXITED);
	if (!alive)
		dt = 0;

	m->retained_bytes = m->retained_objects = 0;
	m->mmap_retained_bytes = 0;
	m->samples = 0;
	memset(m->life, 0, sizeof m->life);
	for (uint32_t i = 0; i < n; i++) {
		const struct ym_stack *y = shm_stack(snap, i);
		struct model_stack *s = &st[i];
		uint64_t age = 0;
		if (keep_ages && i < m->nstacks)
			age = m->stacks[i].oldest_birth_ns;
		if (inplace)
			memset(s, 0, sizeof *s);
		s->oldest_birth_ns = age;
		s->id = i;
		s->depth = y->depth;
		s->frames = y->frames;
		s->alloc_bytes = (double)y->alloc_bytes;
		s->alloc_objects = fx(y->alloc_objects_fx);
		s->retained_bytes = diff((double)y->alloc_bytes, (double)y->free_bytes);
		s->retained_objects = diff(fx(y->alloc_objects_fx),
					   fx(y->free_objects_fx));
		s->alloc_samples = y->alloc_samples;
		s->free_samples = y->free_samples;
		uint64_t live = y->alloc_samples > y->free_samples ?
				y->alloc_samples - y->free_samples : 0;
		s->live_samples = live > UINT32_MAX ? UINT32_MAX : (uint32_t)live;
		s->first_mono_ns = y->first_mono_ns;
		s->tid = y->tid;
		s->rec = y;
		for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
			m->life[b].objects += fx(y->life[b].objects_fx);
			m->life[b].bytes += (double)y->life[b].bytes;
		}
		m->samples += y->alloc_samples;
		if (dt > 0)
			s->alloc_rate = diff(s->alloc_bytes,
					     first ? 0 : m->prev_alloc[i]) / dt;
		m->prev_alloc[i] = s->alloc_bytes;
		const struct ym_stack_ext *x = shm_stack_ext(snap, i);
		s->peak_samples = shm_stack_peak_samples(snap, i);
		if (x) {
			s->kind = x->kind;
			s->peak_bytes = (double)x->peak_bytes;
			s->peak_mono_ns = x->peak_mono_ns;
		}
		/* The agent's peak may lag its estimate (segment.h): a peak is
		 * never shown below the retained bytes beside it, and carries
		 * their samples; its time stays the agent's (the last step
		 * crossed), else the snapshot's (peak_at_least). */
		if (s->retained_bytes > s->peak_bytes || s->peak_bytes == 0) {
			peak_at_least(&s->peak_bytes, &s->peak_mono_ns,
				      s->retained_bytes, snap->taken_mono_ns);
			s->peak_samples = s->live_samples;
		}
		if (m->marked) {
			s->growth = s->retained_bytes - m->mark_retained[i];
			double *seen = &m->mark_peak_seen[i];
			double *seen_n = &m->mark_peak_seen_samples[i];
			if (s->retained_bytes > *seen) {
				*seen = s->retained_bytes;
				*seen_n = s->live_samples;
			}
			if (s->peak_bytes > m->mark_agent_peak[i] && s->peak_bytes > *seen) {
				*seen = s->peak_bytes;
				*seen_n = (double)s->peak_samples;
			}
			s->peak_since_mark = *seen;
			s->peak_since_mark_samples = (int64_t)*seen_n;
		}
		uint64_t rate = shm_snapshot_error_rate(snap);
		s->retained_err = rel_error(rate, s->retained_bytes, s->live_samples);
		s->peak_err = m->marked ?
			rel_error(rate, s->peak_since_mark, s->peak_since_mark_samples) :
			rel_error(rate, s->peak_bytes, s->peak_samples);
		if (s->kind == YM_KIND_MMAP) {
			m->mmap_retained_bytes += s->retained_bytes;
			continue;
		}
		m->retained_bytes += s->retained_bytes;
		m->retained_objects += s->retained_objects;
	}
	if (ym_abi_has_peaks(snap->hdr.abi_version)) {
		m->peak_retained_bytes = (double)snap->hdr.peak_retained;
		m->peak_mono_ns = snap->hdr.peak_mono_ns;
		m->mmap_peak_bytes = (double)snap->hdr.mmap_peak_retained;
		m->mmap_peak_mono_ns = snap->hdr.mmap_peak_mono_ns;
		peak_at_least(&m->peak_retained_bytes, &m->peak_mono_ns,
			      m->retained_bytes, snap->taken_mono_ns);
		peak_at_least(&m->mmap_peak_bytes, &m->mmap_peak_mono_ns,
			      m->mmap_retained_bytes, snap->taken_mono_ns);
	} else {
		m->peak_retained_bytes = m->mmap_peak_bytes = 0;
		m->peak_mono_ns = m->mmap_peak_mono_ns = 0;
	}
	/* The agent's estimates lag by steps (segment.h): never shown below
	 * the retained bytes beside them. */
	if (m->peak_retained_bytes < m->retained_bytes)
		m->peak_retained_bytes = m->retained_bytes;
	if (m->mmap_peak_bytes < m->mmap_retained_bytes)
		m->mmap_peak_bytes = m->mmap_retained_bytes;
	for (uint32_t i = 0; i < snap->nlive; i++) {
		const struct ym_live *e = &snap->live[i];
		struct model_stack *s = &st[e->stack];   /* checked < nstacks */
		if (s->oldest_birth_ns == 0 || e->birth_mono_ns < s->oldest_birth_ns)
			s->oldest_birth_ns = e->birth_mono_ns;
	}

	const struct ym_totals *t = &snap->totals, *p = &m->prev_totals;
	m->alloc_bytes_rate = m->alloc_calls_rate = 0;
	m->free_bytes_rate = m->free_calls_rate = 0;
	if (dt > 0) {
		/* Sampling (YM_FLAG_NO_ALLOC_BYTES): the requested bytes. */
		m->alloc_bytes_rate = !(snap->hdr.flags & YM_FLAG_NO_ALLOC_BYTES) ?
			diff((double)t->alloc_bytes, (double)p->alloc_bytes) / dt :
			diff((double)t->req_bytes, (double)p->req_bytes) / dt;
		m->alloc_calls_rate = diff((double)t->alloc_objects, (double)p->alloc_objects) / dt;
		m->free_bytes_rate = diff((double)t->free_bytes, (double)p->free_bytes) / dt;
		m->free_calls_rate = diff((double)t->free_objects, (double)p->free_objects) / dt;
	}
	m->interval_s = dt;
	m->prev_totals = *t;
	m->prev_mono_ns = snap->taken_mono_ns;
	m->totals = *t;

	shm_snapshot_free(&m->snap);
	m->snap = *snap;
	memset(snap, 0, sizeof *snap);
	m->have_snap = 1;
	if (!inplace) {
		free(m->stacks);
		free(m->order);
		m->capstacks = n;
	}
	m->stacks = st;
	m->nstacks = n;
	m->order = order;
	m->norder = 0;

	free(m->thread_names);
	m->thread_names = names;
	m->nthread_names = nnames;
	if (facts)
		m->proc = facts->proc;
	else
		memset(&m->proc, 0, sizeof m->proc);
	m->alive = alive;
	m->execed = facts && !alive && facts->execed;
	if (facts && !alive && facts->exit_how != PROC_EXIT_UNKNOWN &&
	    m->exit_how == PROC_EXIT_UNKNOWN) {
		m->exit_how = facts->exit_how;
		m->exit_value = facts->exit_value;
	}
	if (alive) {
		snprintf(m->name, sizeof m->name, "%s", facts->name);
		/* Uptime is the process's: a daemon's segment is made at its
		 * first allocation after it forked away, an injected one at
		 * the attach. */
		uint64_t age = (uint64_t)(facts->age_s * 1e9);
		if (age && age < m->snap.taken_mono_ns)
			m->proc_start_mono_ns = m->snap.taken_mono_ns - age;
	}
	/* Out of memory here leaves every verdict unknown: the figures
	 * above stand. */
	(void)model_trend_update(m);
	model_sort(m, SORT_RETAINED, 0, NULL, NULL, NULL);
	return 0;
}

void model_mark(struct model *m)
{
	if (grow_marks(m, m->nstacks))
		return;
	for (uint32_t i = 0; i < m->nmark; i++) {
		const struct model_stack *s = i < m->nstacks ? &m->stacks[i] : NULL;
		m->mark_retained[i] = s ? s->retained_bytes : 0;
		m->mark_peak_seen[i] = s ? s->retained_bytes : 0;
		m->mark_agent_peak[i] = s ? s->peak_bytes : 0;
		m->mark_peak_seen_samples[i] = s ? s->live_samples : 0;
	}
	for (uint32_t i = 0; m->stacks && i < m->nstacks; i++) {
		struct model_stack *s = &m->stacks[i];
		s->growth = 0;
		s->peak_since_mark = s->retained_bytes;
		s->peak_since_mark_samples = s->live_samples;
		s->peak_err = s->retained_err;
	}
	m->marked = 1;
	m->mark_mono_ns = m->snap.taken_mono_ns;
	m->mark_total = m->retained_bytes;
}

double model_peak(const struct model *m, const struct model_stack *s)
{
	return m->marked ? s->peak_since_mark : s->peak_bytes;
}

int64_t model_peak_samples(const struct model *m, const struct model_stack *s)
{
	return m->marked ? s->peak_since_mark_samples : s->peak_samples;
}

int model_retained_few(const struct model *m, const struct model_stack *s)
{
	return few(shm_snapshot_error_rate(&m->snap), s->retained_bytes, s->live_samples,
		   s->retained_err);
}

int model_peak_few(const struct model *m, const struct model_stack *s)
{
	return few(shm_snapshot_error_rate(&m->snap), model_peak(m, s),
		   model_peak_samples(m, s), s->peak_err);
}

double model_rank(const struct model *m, const struct model_stack *s,
		  enum model_sort key)
{
	double v = model_key(m, s, key), err = 0;
	switch (key) {
	case SORT_RETAINED:
	case SORT_PERCENT:
	case SORT_LIVE:
		if (model_retained_few(m, s))
			err = s->retained_err;
		break;
	case SORT_PEAK:
		if (model_peak_few(m, s))
			err = s->peak_err;
		break;
	default:
		break;
	}
	return v * (1 - (err < 1 ? err : 1));
}

uint64_t model_oldest_age(const struct model *m, const struct model_stack *s)
{
	if (!s->oldest_birth_ns || m->snap.taken_mono_ns < s->oldest_birth_ns)
		return 0;
	return m->snap.taken_mono_ns - s->oldest_birth_ns;
}

double model_key(const struct model *m, const struct model_stack *s,
		 enum model_sort key)
{
	switch (key) {
	case SORT_RETAINED:
	case SORT_PERCENT:
		return s->retained_bytes;
	case SORT_GROWTH:
		return s->growth;
	case SORT_ALLOCATED:
		return s->alloc_bytes;
	case SORT_RATE:
		return s->alloc_rate;
	case SORT_LIVE:
		return s->retained_objects;
	case SORT_AVG:
		return s->alloc_objects > 0 ? s->alloc_bytes / s->alloc_objects : 0;
	case SORT_AGE:
		return (double)model_oldest_age(m, s);
	case SORT_PEAK:
		return model_peak(m, s);
	case SORT_SHORT:
		return model_short_rate(s);
	case SORT_RESIDENT:
		return m->resident_known ? s->resident_bytes : 0;
	case SORT_TREND:
		return s->trend.verdict == TREND_UNKNOWN ? 0 : s->trend.bytes_per_s;
	default:
		return 0;
	}
}

struct sort_ctx {
	const struct model *m;
	enum model_sort key;
	int asc;
	model_name_fn name;
	void *ctx;
};

static int cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct model_stack *x = &c->m->stacks[*(const uint32_t *)a];
	const struct model_stack *y = &c->m->stacks[*(const uint32_t *)b];
	int r = 0;
	if (c->key == SORT_FUNCTION && c->name) {
		const char *nx = c->name(c->ctx, x), *ny = c->name(c->ctx, y);
		r = strcmp(nx ? nx : "", ny ? ny : "");
		r = c->asc ? r : -r;
	} else {
		double vx = model_rank(c->m, x, c->key), vy = model_rank(c->m, y, c->key);
		r = vx < vy ? 1 : vx > vy ? -1 : 0;   /* descending */
		if (r == 0) {
			vx = model_key(c->m, x, c->key);
			vy = model_key(c->m, y, c->key);
			r = vx < vy ? 1 : vx > vy ? -1 : 0;
		}
		if (c->asc)
			r = -r;
	}
	if (r == 0)   /* stable, deterministic: retained, then id */
		r = x->retained_bytes < y->retained_bytes ? 1 :
		    x->retained_bytes > y->retained_bytes ? -1 :
		    (x->id > y->id) - (x->id < y->id);
	return r;
}

/* cmp's figures of one stack, worked out once per sort rather than at
 * every comparison. */
struct sort_item {
	double   rank, key, retained;
	uint32_t id;
};

/* cmp on sort_items: the same order (descending rank, then key, both
 * reversed when ascending; then retained descending, then id). */
static int cmp_item(const void *a, const void *b, void *arg)
{
	const struct sort_item *x = a, *y = b;
	int asc = *(const int *)arg;
	int r = x->rank < y->rank ? 1 : x->rank > y->rank ? -1 : 0;
	if (r == 0)
		r = x->key < y->key ? 1 : x->key > y->key ? -1 : 0;
	if (asc)
		r = -r;
	if (r == 0)
		r = x->retained < y->retained ? 1 : x->retained > y->retained ? -1 :
		    (x->id > y->id) - (x->id < y->id);
	return r;
}

/* m->order sorted by a figure as cmp sorts it; -1 when out of memory
 * (m->order untouched). */
static int sort_keyed(struct model *m, enum model_sort key, int asc)
{
	uint32_t n = m->norder;
	struct sort_item *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		const struct model_stack *s = &m->stacks[m->order[i]];
		v[i] = (struct sort_item){ model_rank(m, s, key), model_key(m, s, key),
					   s->retained_bytes, s->id };
	}
	qsort_r(v, n, sizeof *v, cmp_item, &asc);
	for (uint32_t i = 0; i < n; i++)
		m->order[i] = v[i].id;
	free(v);
	return 0;
}

void model_sort(struct model *m, enum model_sort key, int asc,
		model_keep_fn keep, model_name_fn name, void *ctx)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->nstacks; i++) {
		const struct model_stack *s = &m->stacks[i];
		int k = keep ? keep(ctx, s) : (s->alloc_samples > 0);
		if (k)
			m->order[n++] = i;
	}
	m->norder = n;
	struct sort_ctx c = { m, key, asc, name, ctx };
	if ((key == SORT_FUNCTION && name) || sort_keyed(m, key, asc) != 0)
		qsort_r(m->order, n, sizeof *m->order, cmp, &c);
}

double model_uptime(const struct model *m)
{
	const struct ym_header *h = &m->snap.hdr;
	uint64_t end = m->snap.taken_mono_ns;
	if ((h->flags & YM_FLAG_EXITED) && h->exit_mono_ns > h->start_mono_ns)
		end = h->exit_mono_ns;
	uint64_t start = h->start_mono_ns;
	if (m->proc_start_mono_ns && m->proc_start_mono_ns < start)
		start = m->proc_start_mono_ns;
	return end > start ? (double)(end - start) / 1e9 : 0;
}

int model_exited(const struct model *m)
{
	return m->have_snap && !m->alive && !m->execed;
}

const char *model_exit_text(const struct model *m, char *buf, size_t len)
{
	if (m->exit_how == PROC_EXIT_STATUS)
		snprintf(buf, len, "exit status %d", m->exit_value);
	else if (m->exit_how == PROC_EXIT_SIGNAL) {
		const char *ab = sigabbrev_np(m->exit_value);
		/* The OOM killer's SIGKILL: the session saw the cgroup's
		 * oom_kill count move as the process died. */
		const char *oom = m->cgroup.oom_killed ? " by the OOM killer" : "";
		if (ab)
			snprintf(buf, len, "killed by signal %d (SIG%s)%s",
				 m->exit_value, ab, oom);
		else
			snprintf(buf, len, "killed by signal %d%s", m->exit_value, oom);
	} else
		snprintf(buf, len, "unknown");
	return buf;
}

int model_freed_bytes_counted(const struct model *m)
{
	return !(m->snap.hdr.flags & YM_FLAG_NO_FREED_BYTES);
}

int model_counted_net(const struct model *m)
{
	return model_freed_bytes_counted(m) && (m->snap.hdr.flags & YM_FLAG_INJECTED);
}

int model_alloc_bytes_counted(const struct model *m)
{
	return !(m->snap.hdr.flags & YM_FLAG_NO_ALLOC_BYTES);
}

uint64_t model_alloc_bytes(const struct model *m, const struct ym_totals *t)
{
	return model_alloc_bytes_counted(m) ? t->alloc_bytes : t->req_bytes;
}

const struct ym_heapstats *model_heap(const struct model *m, double *age_s)
{
	const struct ym_heapstats *hs = &m->snap.hdr.heap;
	if (hs->allocator == YM_HEAP_NONE || !hs->present)
		return NULL;
	uint64_t now = m->snap.taken_mono_ns;
	*age_s = model_heap_current(m) || now <= hs->taken_mono_ns ? 0 :
		 (double)(now - hs->taken_mono_ns) / 1e9;
	return hs;
}

int model_heap_current(const struct model *m)
{
	const struct shm_snapshot *s = &m->snap;
	const struct ym_heapstats *hs = &s->hdr.heap;
	if (hs->allocator == YM_HEAP_NONE || !hs->present)
		return 0;
	if (s->heap_asked && hs->answered >= s->heap_asked)
		return 1;
	return (hs->present & YM_HEAP_CALLS) &&
	       s->totals.alloc_objects + s->totals.free_objects <= hs->calls;
}

int model_in_use(const struct model *m, double *bytes)
{
	double age;
	const struct ym_heapstats *hs = model_heap(m, &age);
	if (hs && (hs->present & YM_HEAP_IN_USE)) {
		*bytes = (double)hs->in_use_bytes;
		return 1;
	}
	if (!model_freed_bytes_counted(m) || model_counted_net(m))
		return 0;
	*bytes = (double)m->totals.alloc_bytes - (double)m->totals.free_bytes;
	return 1;
}

const char *model_unseen(const struct model *m, char *buf, size_t len,
			 const char **object, const char **why)
{
	const struct ym_header *h = &m->snap.hdr;
	if (!(h->flags & YM_FLAG_UNSEEN))
		return NULL;
	const char *obj = h->unseen_object[0] ? h->unseen_object :
		h->exe[0] ? h->exe : "the executable";
	int own = h->unseen_why == YM_UNSEEN_OWN_CALLS;
	if (object)
		*object = obj;
	if (why)
		*why = own ? "own_calls" : "read_only";
	snprintf(buf, len, own ?
		 "unseen: %s defines malloc and calls it directly; its own "
		 "allocations are not in these figures" :
		 "unseen: %s keeps an allocator function where the agent "
		 "cannot rewrite it; calls through it are not in these figures",
		 obj);
	return buf;
}

struct model_sampling model_sampling(const struct model *m)
{
	const struct ym_header *h = &m->snap.hdr;
	struct model_sampling r;
	memset(&r, 0, sizeof r);
	r.effective = h->sample_rate;
	r.requested = h->sample_rate;
	r.longest = shm_snapshot_error_rate(&m->snap);
	if (!shm_snapshot_budget_known(&m->snap))
		return r;
	const struct ym_budget *b = &h->budget;
	r.known = 1;
	r.requested = b->requested_rate;
	/* Hostile input: a budget is a share of 100 % at most. */
	r.budget_percent = b->budget_ppm <= 1000000u ? b->budget_ppm / 1e4 : 0;
	r.window_ms = b->window_ms;
	r.adjustments = b->adjustments;
	r.spent_ns = b->spent_ns;
	r.cpu_ns = b->cpu_ns;
	r.window_spent_ns = b->window_spent_ns;
	r.window_cpu_ns = b->window_cpu_ns;
	return r;
}

const char *model_budget_text(const struct model *m, char *buf, size_t len)
{
	struct model_sampling s = model_sampling(m);
	if (!s.known || s.budget_percent <= 0)
		return NULL;
	char a[32], b[32], last[48] = "";
	if (s.window_cpu_ns)
		snprintf(last, sizeof last, ", %.2g%% last window",
			 100.0 * (double)s.window_spent_ns / (double)s.window_cpu_ns);
	snprintf(buf, len, "budget %g%% of CPU: rate %s (asked %s)%s, %llu change%s",
		 s.budget_percent, fmt_bytes((double)s.effective, a, sizeof a),
		 fmt_bytes((double)s.requested, b, sizeof b), last,
		 (unsigned long long)s.adjustments, s.adjustments == 1 ? "" : "s");
	return buf;
}

struct model_python model_python(const struct model *m)
{
	const struct ym_header *h = &m->snap.hdr;
	static const char *const hook_names[] = {
		[YM_PYHOOK_NONE] = "none", [YM_PYHOOK_WAITING] = "waiting",
		[YM_PYHOOK_PENDING] = "pending", [YM_PYHOOK_ON] = "installed",
		[YM_PYHOOK_MALLOC] = "malloc", [YM_PYHOOK_OFF] = "off",
	};
	struct model_python p = { 0, 0, 0, 0, 0, 0, NULL };
	if (!shm_snapshot_py_known(&m->snap) || h->py_state == YM_PY_NONE)
		return p;
	p.seen = 1;
	p.frames = h->py_state == YM_PY_FRAMES;
	p.version = h->py_version;
	p.codes = m->snap.npycodes;
	p.dropped = h->py_drop;
	/* The reader made anything else UNKNOWN. */
	p.pymalloc = h->py_hook <= YM_PYHOOK_OFF ? h->py_hook : YM_PYHOOK_UNKNOWN;
	p.pymalloc_name = hook_names[p.pymalloc];
	return p;
}

/* The line that says the pymalloc wrapper is not (yet) sampling Python's
 * small objects, NULL when it is, or is not needed, or not known. */
static const char *pyhook_note(uint32_t hook)
{
	switch (hook) {
	case YM_PYHOOK_WAITING:
		return "pymalloc hook waiting for the interpreter's start: Python objects of 512 bytes or less are not sampled yet";
	case YM_PYHOOK_PENDING:
		return "pymalloc hook pending (runs at the main thread's next pending-call check): Python objects of 512 bytes or less are not sampled yet";
	case YM_PYHOOK_OFF:
		return "pymalloc hook off (YM_PYMALLOC=0, removed, or the interpreter's debug hooks: PYTHONMALLOC=pymalloc_debug, -X dev): Python objects of 512 bytes or less are not sampled";
	default:
		return NULL;
	}
}

const char *model_python_note(const struct model *m, char *buf, size_t len)
{
	const struct ym_header *h = &m->snap.hdr;
	if (!shm_snapshot_py_known(&m->snap))
		return NULL;
	if (h->py_state != YM_PY_UNKNOWN && h->py_state != YM_PY_MISMATCH) {
		const char *hook = h->py_state == YM_PY_FRAMES ?
			pyhook_note(model_python(m).pymalloc) : NULL;
		if (!hook)
			return NULL;
		snprintf(buf, len, "%s", hook);
		return buf;
	}
	char ver[32];
	uint32_t v = h->py_version;
	if (v)
		snprintf(ver, sizeof ver, "%u.%u.%u", v >> 24, (v >> 16) & 0xff,
			 (v >> 8) & 0xff);
	else
		snprintf(ver, sizeof ver, "before 3.11");
	snprintf(buf, len, h->py_state == YM_PY_UNKNOWN ?
		 "python %s: native frames only (this agent knows the frame layouts of CPython 3.11.1 to 3.13)" :
		 "python %s: native frames only (the interpreter's objects do not match the layout of its version)",
		 ver);
	return buf;
}

const char *model_uncounted(const struct model *m, char *buf, size_t len,
			    uint64_t *live, uint64_t *busy)
{
	const struct ym_header *h = &m->snap.hdr;
	uint64_t l = h->drop_live, b = h->drop_busy;
	if (live)
		*live = l;
	if (busy)
		*busy = b;
	if (l == 0 && b == 0)
		return NULL;
	char why[160];
	if (l && b)
		snprintf(why, sizeof why, "%llu found the live table full "
			 "(YM_MAX_LIVE), %llu its lock taken",
			 (unsigned long long)l, (unsigned long long)b);
	else if (l)
		snprintf(why, sizeof why, "the live table was full: raise "
			 "YM_MAX_LIVE");
	else
		snprintf(why, sizeof why, "the agent's lock was taken");
	snprintf(buf, len, "uncounted: %llu samples (%s); retained figures "
		 "are short of their bytes", (unsigned long long)(l + b), why);
	return buf;
}

const char *model_heap_allocator(uint32_t kind)
{
	switch (kind) {
	case YM_HEAP_GLIBC:
		return "glibc";
	case YM_HEAP_JEMALLOC:
		return "jemalloc";
	case YM_HEAP_TCMALLOC:
		return "tcmalloc";
	}
	return "unknown";
}

const char *model_heap_missing(const struct model *m, const char **key)
{
	const struct ym_heapstats *hs = &m->snap.hdr.heap;
	static const struct {
		const char *key, *clause;
	} why[] = {
		[YM_HEAP_WHY_OLD_GLIBC] = { "glibc_before_2_33",
			"glibc before 2.33 has no mallinfo2 (mallinfo's int fields "
			"wrap at 2 GiB)" },
		[YM_HEAP_WHY_MUSL] = { "musl", "musl's allocator keeps none" },
		[YM_HEAP_WHY_OTHER] = { "other_allocator",
			"the process's allocator is not one ymtop reads (glibc, "
			"jemalloc, tcmalloc)" },
	};
	if (hs->allocator != YM_HEAP_NONE ||
	    hs->none_why >= sizeof why / sizeof *why || !why[hs->none_why].key)
		return NULL;
	if (key)
		*key = why[hs->none_why].key;
	return why[hs->none_why].clause;
}

const char *model_state(const struct model *m)
{
	uint32_t f = m->snap.hdr.flags;
	if ((f & YM_FLAG_EXITED) || !m->alive)
		return "exited";
	/* The control block says what the agent does from its next sample
	 * on; its PAUSED flag only acknowledges it at a sample, which a quiet
	 * process may not take for a long time. */
	if (m->snap.ctl.pause)
		return "paused";
	return "sampling";
}

const char *model_thread_state(const struct model *m, const struct ym_thread *t)
{
	return t->state == YM_THREAD_LIVE ? (m->alive ? "live" : "exited") :
	       t->state == YM_THREAD_EXITED ? "exited" :
	       t->state == YM_THREAD_SHARED ? "shared" : "free";
}

const char *model_thread_name(const struct model *m, const struct ym_thread *t,
			      char *buf, size_t len)
{
	buf[0] = '\0';
	if (t->name[0])
		snprintf(buf, len, "%s", t->name);
	else if (m->alive && t->tid && m->snap.threads && t >= m->snap.threads &&
		 t < m->snap.threads + m->snap.nthreads &&
		 (uint32_t)(t - m->snap.threads) < m->nthread_names)
		snprintf(buf, len, "%s", m->thread_names[t - m->snap.threads]);
	return buf;
}

int model_thread_listed(const struct ym_thread *t)
{
	return t->state != YM_THREAD_FREE &&
	       !(t->state == YM_THREAD_SHARED && t->t.alloc_objects == 0 &&
		 t->t.free_objects == 0);
}
