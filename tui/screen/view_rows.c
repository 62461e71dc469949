/*
 * view_rows: the data half of the view: the rows each view shows, built
 * from the model.  A label and a lowercase search text per stack (cached
 * by stack id: a stack's frames never change), the filter, the Functions
 * view's grouping by display frame, the Threads view's list.  Also the
 * row accessors of view.h (view_rows, view_row_stack, view_row_thread,
 * view_label, view_fn_avg, view_fn_age).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "view_rows.h"
#include "model/shortlived.h"

static void cache_clear(struct view *v)
{
	for (uint32_t i = 0; i < v->ncache; i++) {
		free(v->label[i]);
		free(v->search[i]);
		free(v->group[i]);
	}
	free(v->label);
	free(v->search);
	free(v->group);
	v->label = v->search = v->group = NULL;
	v->ncache = 0;
}

static void fns_clear(struct view *v)
{
	free(v->fns);
	v->fns = NULL;
	v->nfns = 0;
}

/* Label and lowercase search text (every frame's function, file and
 * module) of a stack, computed once: a stack's frames never change. */
static void cache_fill(struct view *v, uint32_t id)
{
	if (id >= v->m->nstacks)
		return;
	if (id >= v->ncache) {
		uint32_t n = v->m->nstacks;
		char **l = realloc(v->label, n * sizeof *l);
		if (!l)
			return;
		v->label = l;
		char **s = realloc(v->search, n * sizeof *s);
		if (!s)
			return;
		v->search = s;
		char **g = realloc(v->group, n * sizeof *g);
		if (!g)
			return;
		v->group = g;
		memset(l + v->ncache, 0, (n - v->ncache) * sizeof *l);
		memset(g + v->ncache, 0, (n - v->ncache) * sizeof *g);
		memset(s + v->ncache, 0, (n - v->ncache) * sizeof *s);
		v->ncache = n;
	}
	if (v->label[id])
		return;
	const struct model_stack *st = &v->m->stacks[id];
	struct stack_view sv;
	char buf[1024];
	if (st->depth == 0) {
		v->label[id] = strdup("[stack table full: overflow]");
		v->search[id] = strdup("overflow");
		v->group[id] = strdup(v->label[id] ? v->label[id] : "?");
		return;
	}
	if (frames_view(v->sym, v->rules, st->frames, st->depth, &sv) != 0 || sv.n == 0) {
		v->label[id] = strdup("?");
		v->search[id] = strdup("");
		v->group[id] = strdup("?");
		return;
	}
	v->label[id] = strdup(frames_display_label(&sv, buf, sizeof buf));
	v->group[id] = strdup(frames_group_label(&sv.f[sv.display], buf, sizeof buf));
	size_t cap = 256, len = 0;
	char *t = malloc(cap);
	for (uint32_t i = 0; t && i < sv.n; i++) {
		char fb[128];
		const char *parts[4] = { sv.f[i].function, sv.f[i].file, sv.f[i].module,
					 sv.f[i].function ? NULL :
					 (sym_fallback(&sv.f[i], fb, sizeof fb), fb) };
		for (int k = 0; k < 4; k++) {
			const char *p = parts[k] ? parts[k] : "";
			size_t pl = strlen(p);
			if (len + pl + 2 > cap) {
				cap = (len + pl + 2) * 2;
				char *nt = realloc(t, cap);
				if (!nt) {
					free(t);
					t = NULL;
					break;
				}
				t = nt;
			}
			for (size_t j = 0; j < pl; j++)
				t[len++] = (char)tolower((unsigned char)p[j]);
			t[len++] = '\n';
		}
	}
	if (t)
		t[len] = '\0';
	v->search[id] = t ? t : strdup("");
	frames_view_free(&sv);
}

/* The Functions view's group of a stack: its label, but one group a
 * Python function (frames_group_label). */
static const char *view_group(struct view *v, uint32_t id)
{
	view_label(v, id);
	return id < v->ncache && v->group && v->group[id] ? v->group[id] : "?";
}

const char *view_label(struct view *v, uint32_t id)
{
	cache_fill(v, id);
	return id < v->ncache && v->label[id] ? v->label[id] : "?";
}

static int keep_stack(void *ctx, const struct model_stack *s)
{
	struct view *v = ctx;
	if (s->alloc_samples == 0)
		return 0;
	if (v->growing_only && s->trend.verdict != TREND_GROWING)
		return 0;
	if (!v->filter[0])
		return 1;
	cache_fill(v, s->id);
	if (s->id >= v->ncache || !v->search[s->id])
		return 0;
	char low[sizeof v->filter];
	size_t i;
	for (i = 0; v->filter[i] && i < sizeof low - 1; i++)
		low[i] = (char)tolower((unsigned char)v->filter[i]);
	low[i] = '\0';
	return strstr(v->search[s->id], low) != NULL;
}

static const char *name_of(void *ctx, const struct model_stack *s)
{
	return view_label(ctx, s->id);
}

double view_fn_avg(const struct view_fn *f)
{
	return f->alloc_objects > 0 ? f->alloc / f->alloc_objects : 0;
}

uint64_t view_fn_age(const struct view *v, const struct view_fn *f)
{
	uint64_t now = v->m->snap.taken_mono_ns;
	if (!f->oldest_birth_ns || now < f->oldest_birth_ns)
		return 0;
	return now - f->oldest_birth_ns;
}

static int cmp_fn(const void *a, const void *b, void *arg)
{
	const struct view *v = arg;
	const struct view_fn *x = a, *y = b;
	double vx, vy;
	switch (v->sort) {
	case SORT_AVG:       vx = view_fn_avg(x); vy = view_fn_avg(y); break;
	case SORT_AGE:
		vx = (double)view_fn_age(v, x);
		vy = (double)view_fn_age(v, y);
		break;
	case SORT_ALLOCATED: vx = x->alloc; vy = y->alloc; break;
	case SORT_RATE:      vx = x->rate; vy = y->rate; break;
	case SORT_SHORT:     vx = x->short_rate; vy = y->short_rate; break;
	case SORT_RESIDENT:  vx = x->resident; vy = y->resident; break;
	case SORT_LIVE:      vx = x->retained_objects; vy = y->retained_objects; break;
	case SORT_GROWTH:    vx = x->growth; vy = y->growth; break;
	case SORT_FUNCTION:  return strcmp(x->name, y->name) * (v->asc ? 1 : -1);
	default:             vx = x->rank; vy = y->rank; break;
	}
	int r = vx < vy ? 1 : vx > vy ? -1 : 0;
	if (r == 0)
		r = x->retained < y->retained ? 1 : x->retained > y->retained ? -1 :
		    strcmp(x->name, y->name);
	return v->asc ? -r : r;
}

/* Functions view: the filtered stacks grouped by kind and display frame
 * label. */
static void build_fns(struct view *v)
{
	fns_clear(v);
	struct model *m = v->m;
	if (!m->norder)
		return;
	struct view_fn *f = calloc(m->norder, sizeof *f);
	if (!f)
		return;
	uint32_t n = 0;
	/* Group by label pointer order: sort a copy of the order by label. */
	for (uint32_t k = 0; k < m->norder; k++) {
		const struct model_stack *s = &m->stacks[m->order[k]];
		const char *label = view_group(v, s->id);
		uint32_t j;
		uint32_t kind = s->kind == YM_KIND_MMAP ? YM_KIND_MMAP : YM_KIND_MALLOC;
		for (j = 0; j < n; j++)
			if (f[j].kind == kind && !strcmp(f[j].name, label))
				break;
		if (j == n) {
			f[n].name = label;
			f[n].kind = kind;
			f[n].top_stack = s->id;
			n++;
		}
		struct view_fn *x = &f[j];
		if (s->retained_bytes > m->stacks[x->top_stack].retained_bytes)
			x->top_stack = s->id;
		x->retained += s->retained_bytes;
		x->retained_objects += s->retained_objects;
		x->alloc += s->alloc_bytes;
		x->alloc_objects += s->alloc_objects;
		if (s->oldest_birth_ns && (!x->oldest_birth_ns ||
					   s->oldest_birth_ns < x->oldest_birth_ns))
			x->oldest_birth_ns = s->oldest_birth_ns;
		x->rate += s->alloc_rate;
		x->short_rate += model_short_rate(s);
		x->resident += s->resident_bytes;
		x->growth += s->growth;
		x->live_samples += s->live_samples;
		x->nstacks++;
	}
	/* A sum carried by one or two samples is marked and ranks at the low
	 * end of its error, as a stack's (model_rank). */
	for (uint32_t j = 0; j < n; j++) {
		int64_t ns = (int64_t)f[j].live_samples;
		f[j].few = model_few(m, f[j].retained, ns);
		f[j].rank = f[j].retained;
		if (f[j].few) {
			double e = model_rel_error(m, f[j].retained, ns);
			f[j].rank *= 1 - (e < 1 ? e : 1);
		}
	}
	qsort_r(f, n, sizeof *f, cmp_fn, v);
	v->fns = f;
	v->nfns = n;
}

int view_rows(const struct view *v)
{
	const struct model *m = v->m;
	switch (v->kind) {
	case VIEW_STACKS:
		return (int)m->norder;
	case VIEW_FUNCTIONS:
		return (int)v->nfns;
	case VIEW_THREADS:
		return (int)v->nthr;
	case VIEW_LIFETIMES:
		return YM_LIFE_BUCKETS;
	case VIEW_ALARMS:
		return (int)m->snap.nalarms;
	default:
		return 0;
	}
}

uint32_t view_row_stack(const struct view *v, int row)
{
	if (row < 0 || row >= view_rows(v))
		return UINT32_MAX;
	if (v->kind == VIEW_STACKS)
		return v->m->order[row];
	if (v->kind == VIEW_FUNCTIONS)
		return v->fns[row].top_stack;
	return UINT32_MAX;
}

const struct ym_thread *view_row_thread(const struct view *v, int row)
{
	if (v->kind != VIEW_THREADS || row < 0 || row >= (int)v->nthr ||
	    v->thr[row] >= v->m->snap.nthreads)
		return NULL;
	return &v->m->snap.threads[v->thr[row]];
}

/* The Threads view lists what reports list: no free slot, and the shared
 * slot 0 ("other threads") only when it counted something. */
static void build_threads(struct view *v)
{
	const struct shm_snapshot *s = &v->m->snap;
	v->nthr = 0;
	if (!s->nthreads)
		return;
	uint32_t *t = realloc(v->thr, s->nthreads * sizeof *t);
	if (!t)
		return;
	v->thr = t;
	for (uint32_t i = 0; i < s->nthreads; i++)
		if (model_thread_listed(&s->threads[i]))
			t[v->nthr++] = i;
}


void view_rows_build(struct view *v)
{
	model_sort(v->m, v->sort, v->asc, keep_stack, name_of, v);
	if (v->kind == VIEW_FUNCTIONS)
		build_fns(v);
	build_threads(v);
}

void view_rows_relabel(struct view *v)
{
	cache_clear(v);
}

void view_rows_free(struct view *v)
{
	cache_clear(v);
	fns_clear(v);
	free(v->thr);
	v->thr = NULL;
	v->nthr = 0;
}
