/*
 * segpriv: the agent's private view of words of the segment that readers
 * ignore (include/ymtop/segment.h calls them agent_private: reserved for
 * the writer).  Their meaning may change with any agent, at no cost to
 * the ABI: only live.c uses them.
 *
 *   ym_live.agent_private0     the next entry (j + 1, 0: none) of the
 *                              entry's hash chain while it is live, of its
 *                              free lane's list while it is free
 *   ym_stripe.agent_private[]  the stripe's free lists, one a lane: the
 *                              first free entry j + 1 of each (0: empty)
 *
 * And the policy that places an address in a stripe, which readers need
 * not know (they read every stripe): see ym_live_stripe_of.
 */
#ifndef YMTOP_AGENT_SEGPRIV_H
#define YMTOP_AGENT_SEGPRIV_H

#include <stddef.h>
#include <stdint.h>

#include "ymtop/segment.h"

/* The words are where the agent's next and free[] always were (ABI 4):
 * renaming them changed no byte. */
_Static_assert(offsetof(struct ym_live, agent_private0) == 48, "live link");
_Static_assert(offsetof(struct ym_stripe, agent_private) == 24, "free lanes");

/* Free lanes a stripe keeps (live.c, live_take says why). */
#define YM_STRIPE_LANES 8
_Static_assert(sizeof ((struct ym_stripe *)0)->agent_private ==
	       YM_STRIPE_LANES * sizeof(uint32_t), "a word a lane");

/* The chain link of a live entry. */
static inline uint32_t *ym_live_next(struct ym_live *e)
{
	return &e->agent_private0;
}

static inline const uint32_t *ym_live_next_c(const struct ym_live *e)
{
	return &e->agent_private0;
}

/* The stripe's free lane `lane` (< YM_STRIPE_LANES). */
static inline uint32_t *ym_stripe_free(struct ym_stripe *st, uint32_t lane)
{
	return &st->agent_private[lane];
}

/* The agent's stripe of an address in a table of `stripes` (a power of two
 * <= YM_LIMIT_STRIPES) stripes when it samples: bits 4.. of the address,
 * as its free filter, so that one filter word belongs to one stripe.  In
 * exact mode (no filter) it gives each 64 MiB region of addresses a
 * quarter of the stripes instead (live.c, region_part). */
static inline uint32_t ym_live_stripe_of(uint64_t addr, uint32_t stripes)
{
	return ((uint32_t)(addr >> 4) & 0x7fffu) / (0x8000u / stripes);
}

#endif
