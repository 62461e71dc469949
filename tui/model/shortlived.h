/*
 * shortlived: temporary allocations per stack, from the lifetimes of its
 * sampled blocks (struct ym_stack's life[] histogram).
 *
 * A block is short-lived when it was freed less than MODEL_SHORT_LIVED_NS
 * after it was allocated (a bound of the histogram's buckets, so the
 * count is exact for the samples).  The figures are estimates, as every
 * figure from samples: a block freed is counted in the bucket of its
 * lifetime with its sampling weight.
 */
#ifndef YMTOP_MODEL_SHORTLIVED_H
#define YMTOP_MODEL_SHORTLIVED_H

#include "model.h"

/* 10 ms, the bound of life[4] (YM_LIFE_UPTO_NS_INIT): freed within a
 * request, a loop or a call, not kept. */
#define MODEL_SHORT_LIVED_NS 10000000ULL

struct model_short {
	double objects;    /* estimated blocks freed within the threshold */
	double bytes;      /* their estimated bytes */
	/* objects / the stack's allocated objects, in [0, 1]; < 0 when the
	 * stack allocated nothing (no share to tell). */
	double fraction;
	/* Bytes a second allocated in short-lived blocks: the stack's
	 * allocation rate times the share of its allocated bytes freed
	 * within the threshold. */
	double rate;
};

void model_short_lived(const struct model_stack *s, struct model_short *out);
/* model_short_lived's rate: the screen's sort key SORT_SHORT. */
double model_short_rate(const struct model_stack *s);

#endif
