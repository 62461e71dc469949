/* Test fixture: a snapshot made by hand (snap.h). */
#include "snap.h"

#include <stdlib.h>
#include <string.h>

struct ym_stack *snap_stack(struct shm_snapshot *s, uint32_t i)
{
	return (struct ym_stack *)(s->stacks + i * s->stack_stride);
}

void snap_fake(struct shm_snapshot *s, uint32_t nstacks, uint32_t depth,
	       const double *retained, const double *alloc, double t)
{
	memset(s, 0, sizeof *s);
	s->hdr.pid = 0x7fffffff;   /* no such process: model sees it exited */
	s->hdr.sample_rate = 4096;
	s->hdr.max_depth = depth;
	s->taken_mono_ns = (uint64_t)(t * 1e9) + 1000000000ULL;
	s->stack_stride = shm_stack_stride(depth);
	s->nstacks = nstacks;
	s->stacks = calloc(nstacks, s->stack_stride);
	for (uint32_t i = 0; i < nstacks; i++) {
		struct ym_stack *st = snap_stack(s, i);
		st->hash = 10 + i;
		st->depth = 1;
		st->frames[0] = 0x1000 + i;
		st->alloc_samples = alloc[i] > 0;
		st->alloc_bytes = (uint64_t)alloc[i];
		st->free_bytes = (uint64_t)(alloc[i] - retained[i]);
	}
}
