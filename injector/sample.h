/*
 * Poisson byte sampling: the distance between samples is exponential with
 * mean R bytes, so an allocation of s bytes is sampled with probability
 * p = 1 - exp(-s/R).  A sample then stands for s/p bytes and 1/p objects,
 * which makes the sums unbiased estimates.  R = 1 is exact mode: every
 * allocation is recorded with weight s bytes and one object.
 *
 * Pure functions, no state: shared by the agent and the unit tests.
 */
#ifndef YMTOP_SAMPLE_H
#define YMTOP_SAMPLE_H

#include <math.h>
#include <stdint.h>

#include "ymtop/segment.h"

/* xorshift64*: a fast per-thread generator; state must be non-zero. */
static inline uint64_t sample_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* splitmix64, to turn a weak seed (tid, time, address) into a state. */
static inline uint64_t sample_seed(uint64_t seed)
{
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 0x9E3779B97F4A7C15ULL;
}

/* Bytes until the next sample: exponential with mean rate, at least 1.
 * In exact mode (rate 1) the countdown is always "already due". */
static inline int64_t sample_next_gap(uint64_t *state, uint64_t rate)
{
	if (rate <= 1)
		return -1;
	/* u in (0, 1]: 53 random bits, never zero. */
	double u = (double)((sample_rand(state) >> 11) + 1) * 0x1.0p-53;
	double gap = -log(u) * (double)rate;
	if (gap < 1.0)
		return 1;
	if (gap > 9.0e18)
		return INT64_MAX / 2;
	return (int64_t)gap;
}

/* The unbiased weight of a sample of size bytes. */
static inline void sample_weight(uint64_t rate, uint64_t size,
				 uint64_t *weight_bytes, uint64_t *weight_fx)
{
	if (rate <= 1 || size == 0) {
		*weight_bytes = size;
		*weight_fx = YM_FX_ONE;
		return;
	}
	double p = -expm1(-(double)size / (double)rate);
	*weight_bytes = (uint64_t)((double)size / p + 0.5);
	*weight_fx = (uint64_t)((double)YM_FX_ONE / p + 0.5);
}

/* realloc of a sampled block from old to new bytes: 1 if it stays sampled.
 *
 * Invariant: a live block of s bytes is sampled with probability
 * p(s) = 1 - exp(-s/R), which is what makes its weight 1/p(s) unbiased.
 * After the resize it must be p(new).  Growing (p(new) >= p(old)): a
 * sampled block stays; an unsampled one is sampled when the countdown runs
 * out within the new - old bytes, probability (p(new) - p(old)) /
 * (1 - p(old)) by memorylessness (the caller charges the countdown with the
 * growth only).  Shrinking: the unsampled stay unsampled and a sampled one
 * stays with probability p(new)/p(old).  Keeping every sampled block would
 * ratchet the sampled share towards 1 over repeated reallocs (and every
 * one of them would then take the lock). */
static inline int sample_keep(uint64_t *state, uint64_t rate, uint64_t old,
			      uint64_t new)
{
	if (rate <= 1 || new >= old)
		return 1;
	if (new == 0)
		return 0;
	double keep = expm1(-(double)new / (double)rate) /
		      expm1(-(double)old / (double)rate);
	double u = (double)(sample_rand(state) >> 11) * 0x1.0p-53;   /* [0, 1) */
	return u < keep;
}

/* The lifetime bucket of a duration in ns. */
static inline unsigned sample_life_bucket(uint64_t ns)
{
	static const uint64_t upto[YM_LIFE_BUCKETS] = YM_LIFE_UPTO_NS_INIT;
	for (unsigned i = 0; i < YM_LIFE_BUCKETS - 1; i++)
		if (ns < upto[i])
			return i;
	return YM_LIFE_BUCKETS - 1;
}

#endif
