/*
 * shortlived: temporary allocations per stack (see shortlived.h).
 */
#include "shortlived.h"

void model_short_lived(const struct model_stack *s, struct model_short *out)
{
	static const uint64_t upto[YM_LIFE_BUCKETS] = YM_LIFE_UPTO_NS_INIT;
	out->objects = out->bytes = 0;
	/* Buckets are cumulative bounds: bucket b holds lifetimes below
	 * upto[b] and at or above upto[b - 1]. */
	for (int b = 0; b < YM_LIFE_BUCKETS && upto[b] &&
	     upto[b] <= MODEL_SHORT_LIVED_NS; b++) {
		struct model_life l = model_life(s, b);
		out->objects += l.objects;
		out->bytes += l.bytes;
	}
	out->fraction = -1;
	if (s->alloc_objects > 0) {
		double f = out->objects / s->alloc_objects;
		out->fraction = f < 0 ? 0 : f > 1 ? 1 : f;
	}
	double share = s->alloc_bytes > 0 ? out->bytes / s->alloc_bytes : 0;
	share = share < 0 ? 0 : share > 1 ? 1 : share;
	out->rate = s->alloc_rate > 0 ? s->alloc_rate * share : 0;
}

double model_short_rate(const struct model_stack *s)
{
	struct model_short sh;
	model_short_lived(s, &sh);
	return sh.rate;
}
