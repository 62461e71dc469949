/*
 * common: what every report writer shares: weights, sort keys and their
 * names, the order of stacks, writers' times as wall-clock (see common.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

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
		{ "rate", SORT_RATE }, { "peak", SORT_PEAK }, { "trend", SORT_TREND },
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
	case SORT_PEAK:      return "peak retained bytes";
	case SORT_TREND:     return "growth rate (trend)";
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
	/* The key's rank (model_rank: a figure of few samples at the low
	 * end of its error), the key, then the others: retained, allocated,
	 * rate. */
	double rx = model_rank(c->m, x, c->key), ry = model_rank(c->m, y, c->key);
	if (rx != ry)
		return rx < ry ? 1 : -1;
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
	if (key != SORT_ALLOCATED && key != SORT_RATE && key != SORT_PEAK &&
	    key != SORT_TREND)
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

double report_mono_time(const struct model *m, uint64_t mono_ns)
{
	return model_real_s(m, mono_ns);
}

const char *report_kind_name(uint32_t kind)
{
	return kind == YM_KIND_MMAP ? "mmap" : "malloc";
}

double report_alarm_time(const struct model *m, const struct ym_alarm *a)
{
	return report_mono_time(m, a->mono_ns);
}

const struct ym_thread *report_next_thread(const struct model *m, uint32_t *it)
{
	while (*it < m->snap.nthreads) {
		const struct ym_thread *th = &m->snap.threads[(*it)++];
		if (model_thread_listed(th))
			return th;
	}
	return NULL;
}

const char *report_thread_name(const struct model *m, const struct ym_thread *th,
			       char *buf, size_t len)
{
	if (th->state == YM_THREAD_SHARED)
		return "(shared)";
	return model_thread_name(m, th, buf, len);
}
