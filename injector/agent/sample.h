/*
 * Poisson byte sampling: the distance between samples is exponential with
 * mean R bytes, so a block is sampled with probability p(c) = 1 - exp(-c/R)
 * where c is the number of bytes charged to the thread's countdown for it.
 * A sample then stands for s/p(c) bytes and 1/p(c) objects, s its requested
 * size, which makes the sums unbiased estimates: E[sampled * s/p(c)] = s.
 * R = 1 is exact mode: every allocation is recorded with weight s bytes and
 * one object.
 *
 * What is charged: an allocation (malloc, calloc, the aligned
 * family, realloc(NULL, n)) charges its request s, before the call; a
 * realloc of a block charges the growth of its usable size, after the
 * call.  Charging the request is what lets malloc's fast path end in a
 * tail call: nothing is left to do after the real malloc returns unless
 * the countdown ran out (hooks.c; BENCHMARKS.md, shim-tail).
 *
 * Allocations.  By memorylessness the countdown runs out within the s
 * bytes charged for a block with probability p(s), whatever came before,
 * independently of every other block's fate.  A sample weighs s/p(s)
 * bytes and 1/p(s) objects, so for each block E[weight] = p(s) s/p(s) =
 * s and E[objects] = 1: the sums over the samples are unbiased estimates
 * of the requested bytes and of the objects live (the same sample would
 * estimate usable bytes without bias with weight u/p(s), u read on the
 * slow path only: the tables weigh requests).  The variance of
 * a block's estimate is s^2 (1 - p(s))/p(s), the bound the accuracy tests
 * (tests/integration/test_allocators.py) allow Z deviations of.
 *
 * Reallocs, from (s, u) to (s', u'), moved or in place.  The agent keeps
 * no header, so an unsampled block's old request is known to nobody and
 * a realloc sees only the usable sizes before and after, and charges
 * in usable sizes (charging new request - old usable size would charge
 * nothing for growth in place within a size class, and grown blocks
 * would show at 0.15-0.50 of their size):
 *   u' >= u: the countdown is charged the growth u' - u.  An unsampled
 *     block stays unsampled with probability exp(-(u' - u)/R), and one
 *     that does not is weighed at s'/p(u'), 1/p(u'); a sampled one stays
 *     sampled and its chance p becomes 1 - (1 - p) exp(-(u' - u)/R)
 *     (sample_resize): its own, read from its weight, so a rate changed
 *     since it was drawn (ymtop --rate, a cost budget) changes nothing
 *     but the growth's share.
 *   u' < u: an unsampled block stays unsampled, a sampled one stays with
 *     probability min(1, p(u')/p) (sample_resize), so that repeated
 *     reallocs do not ratchet the sampled share towards 1.
 *   A sampled block that stays keeps its stack and birth time (one
 *   long-lived allocation) and is re-weighed at s'/p, 1/p with p its
 *   chance after.
 * What was charged for a block first allocated at (s0, u0) and then grown
 * is c = s0 + (u' - u0) = u' - (u0 - s0): the charges of its growth
 * telescope, and only the slack of its first allocation is missing.  So
 * it is sampled with probability p(c) <= p(u'): a block sampled before
 * its growth is weighed at exactly that (its chance, carried through),
 * one sampled by its growth at p(u'), so that the estimate is of
 * between p(c)/p(u') >= c/u' = 1 - (u0 - s0)/u' of s' and s': low by at most
 * the first slack over the present usable size (a shrink's thinning,
 * p(u')/p(u) of p(s0), likewise by at most (u - s0)/u).  Under glibc the
 * slack is 8-23 bytes: nothing past a few hundred bytes.  Under allocators
 * with size classes (4 a doubling: jemalloc, tcmalloc, mimalloc) it is up
 * to 25% of u0: a block grown by one class right after an allocation at
 * the bottom of its class (257 -> 320 usable, grown to 384) is low by
 * 16%, one grown from 257 bytes to 8 KiB by 0.8%; growth from a request
 * that fills its class (the usual doubling buffers, 2^k bytes) not at
 * all.  (Exact with no header would need each allocator's class table to
 * know s0's class floor, or a realloc that charges the whole new request
 * and draws every realloc'd block afresh: unbiased, but a long-lived
 * block's sample would then leave at nearly every realloc at the default
 * rate, taking its stack and birth with it.)
 *   realloc(p, 0) that frees p: a free.  A failed realloc: nothing
 *     changed, nothing is charged.
 *   free: the sample, if any, leaves with the weight it was counted with,
 *     so retained goes back to exactly 0 when everything is freed.
 *
 * A failed allocation was charged its request all the same: the
 * countdown is memoryless, so charging bytes that no block took only
 * moves the next sample; it biases nothing.
 *
 * Pure functions, no state: shared by the agent and the unit tests.
 *
 * No libm: at the default rate every sample finds the cache cold, and log
 * and expm1 are more code and lookup tables to miss.  sample_neg_log and
 * sample_expm1 below are short branch-free approximations instead, with a
 * relative error under 1e-11 (tests/unit/test_sample.c measures it against
 * libm), far below the estimates' statistical noise.
 */
#ifndef YMTOP_SAMPLE_H
#define YMTOP_SAMPLE_H

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

/* A double and its bits (C11 allows reading the other member). */
union sample_bits {
	double d;
	uint64_t u;
};

/* The constants of the draw and the weight, in one 128-byte block read
 * through sample_k: written as literals, the compiler scatters them
 * through the library's constant pool, and at the default rate every
 * sample finds their lines cold (seven lines, 5.8 first-level misses a
 * sample under cachegrind, where the block's two lines and the
 * compiler's own 2^63 give 2.5).  Sixteen doubles: 2, 2^-53, YM_FX_ONE and the gap's ceiling are
 * made without a constant (m + 1 and s + s, exponent arithmetic, an
 * integer bound on the rate). */
enum {
	SK_ONE, SK_LN2, SK_INV_LN2, SK_HALF, SK_MINUS_40,
	SK_L0, SK_L1, SK_L2, SK_L3,                        /* neg_log's R */
	SK_E0, SK_E1, SK_E2, SK_E3, SK_E4, SK_E5, SK_E6,   /* expm1's P */
	SK_COUNT
};

static const double sample_consts[SK_COUNT] __attribute__((aligned(64))) = {
	[SK_ONE] = 1.0,
	[SK_LN2] = 0.6931471805599453,           /* ln 2 rounded to double */
	[SK_INV_LN2] = 1.4426950408889634,
	[SK_HALF] = 0.5,
	[SK_MINUS_40] = -40.0,
	[SK_L0] = 0.66666665648232684,
	[SK_L1] = 0.40000334636840563,
	[SK_L2] = 0.28537339969764513,
	[SK_L3] = 0.23581613653490958,
	[SK_E0] = 0.50000000001049806,
	[SK_E1] = 0.16666666753924082,
	[SK_E2] = 0.041666665954562852,
	[SK_E3] = 0.0083332891248823467,
	[SK_E4] = 0.0013888985126612624,
	[SK_E5] = 0.00019904858285901458,
	[SK_E6] = 2.4796382370886381e-05,
};

_Static_assert(sizeof sample_consts == 128, "two cache lines");

/* x 2^n by its exponent field: x and the result normal (n may be
 * negative). */
static inline double sample_scale2(double x, int n)
{
	union sample_bits b = { .d = x };
	b.u += (uint64_t)(int64_t)n << 52;
	return b.d;
}

/* The block, through a pointer the compiler cannot see into, so that
 * each constant is a load from it rather than a copy in the pool. */
static inline const double *sample_k(void)
{
	const double *k = sample_consts;
	__asm__("" : "+r"(k));
	return k;
}

/* -log(u) for u in (0, 1], finite and normal.  u = 2^e m with m in
 * [sqrt(1/2), sqrt(2)), read off the bits: those of u less those of
 * sqrt(1/2) hold e in the exponent field (borrowing one from it when u's
 * significand is below sqrt 2's), and u less e in the exponent is m.  Then
 * log m = 2 atanh(s) with s = (m - 1)/(m + 1), |s| <= 3 - 2 sqrt 2,
 * and 2 atanh(s) = 2s + s z R(z), z = s^2, where R is a cubic fitted to the
 * series 2/3 + 2z/5 + 2z^2/7 + ... (Remez, least maximum relative error of
 * log m on the range).  Relative error below 5e-12, also as u -> 1, where
 * log m ~ 2s keeps its precision. */
static inline double sample_neg_log(double u)
{
	const double *k = sample_k();
	union sample_bits b = { .d = u };
	/* e = (bits - bits(sqrt(1/2))) >> 52, kept unsigned: bias by 2^62. */
	int64_t e = (int64_t)((b.u - 0x3FE6A09E667F3BCDULL + (1ULL << 62)) >> 52) -
		    1024;
	b.u -= (uint64_t)e << 52;
	double f = b.d - k[SK_ONE];             /* exact: m within 2x of 1 */
	double s = f / (b.d + k[SK_ONE]);       /* m + 1 rounds as 2 + f */
	double z = s * s;
	double r = (k[SK_L0] + k[SK_L1] * z) + z * z * (k[SK_L2] + k[SK_L3] * z);
	return (double)-e * k[SK_LN2] - ((s + s) + s * (z * r));
}

/* expm1(x) = exp(x) - 1 for x <= 0.  x is clamped at -40, where exp(x) is
 * far below half an ulp of 1: the result is then -1, as libm's (which is -1
 * from about -37.4 on).  x = k ln2 + r with k the nearest integer (the
 * conversion truncates towards zero) and |r| <= ln2/2; expm1(r) = r +
 * r^2 P(r) with P a degree-6 fit to the series 1/2 + r/6 + r^2/24 + ...
 * (Remez, least maximum relative error of expm1(r)).  Then expm1(x) =
 * 2^k expm1(r) + (2^k - 1), which is expm1(r) itself when k = 0, so tiny x
 * lose nothing to a 1 - exp cancellation, and for k < 0 the result is at
 * least 1 - exp(-ln2/2) = 0.29 in magnitude, so no cancellation either.
 * Relative error below 6e-12 (k ln2 in one double costs at most a few ulps
 * for |k| <= 58). */
static inline double sample_expm1(double x)
{
	const double *c = sample_k();
	x = x < c[SK_MINUS_40] ? c[SK_MINUS_40] : x;
	int k = (int)(x * c[SK_INV_LN2] - c[SK_HALF]);   /* rounds: x <= 0 */
	double r = x - (double)k * c[SK_LN2];
	double r2 = r * r;
	double p = (c[SK_E0] + c[SK_E1] * r) + r2 * (c[SK_E2] + c[SK_E3] * r) +
		   r2 * r2 * ((c[SK_E4] + c[SK_E5] * r) + r2 * c[SK_E6]);
	double q = r + r2 * p;
	union sample_bits t = { .u = (uint64_t)(k + 1023) << 52 };   /* 2^k */
	return t.d * q + (t.d - c[SK_ONE]);
}

/* Bytes until the next sample: exponential with mean rate, at least 1.
 * In exact mode (rate 1) the countdown is always "already due". */
static inline int64_t sample_next_gap(uint64_t *state, uint64_t rate)
{
	if (rate <= 1)
		return -1;
	/* u in (0, 1]: 53 random bits, never zero (the integer 1..2^53 is
	 * exact in a double, and so is its product with 2^-53). */
	double u = sample_scale2((double)((sample_rand(state) >> 11) + 1), -53);
	/* -log u <= 53 ln 2 < 37: with the rate at most 2^57 the gap stays
	 * below 2^63 (rates are at most 2^40: YM_SAMPLE_RATE, segment.h). */
	if (rate > (1ULL << 57))
		rate = 1ULL << 57;
	double gap = sample_neg_log(u) * (double)rate;
	if (gap < sample_k()[SK_ONE])
		return 1;
	return (int64_t)gap;
}

/* The weight of a sample of `size` requested bytes for which `charged`
 * bytes were charged to the countdown (its request when allocated, its
 * usable size after a realloc): size/p, 1/p with p = p(charged).  A
 * charge of 0 (only exact mode samples such a block) weighs its request,
 * as in exact mode. */
static inline void sample_weight(uint64_t rate, uint64_t size, uint64_t charged,
				 uint64_t *weight_bytes, uint64_t *weight_fx)
{
	if (rate <= 1 || charged == 0) {
		*weight_bytes = size;
		*weight_fx = YM_FX_ONE;
		return;
	}
	const double *k = sample_k();
	/* 1/p once (>= 1, normal), then two products: a division less on
	 * every sample; YM_FX_ONE is a power of two
	 * (0 - x rather than -x: a subtraction from a zeroed register, where a
	 * negation is a load of the sign mask from the constant pool.) */
	double m = sample_expm1(0.0 - (double)charged / (double)rate);
	double inv = k[SK_ONE] / (0.0 - m);
	*weight_bytes = (uint64_t)((double)size * inv + k[SK_HALF]);
	*weight_fx = (uint64_t)(sample_scale2(inv, YM_FX_SHIFT) + k[SK_HALF]);
}

/* realloc of a sampled block whose usable size goes from old to new
 * bytes: 1 if it stays sampled.  Growing (or the same class): always, the
 * unsampled ones catch up through the countdown charged with new - old.
 * Shrinking: with probability p(new)/p(old) (see the top of this file). */
static inline int sample_keep(uint64_t *state, uint64_t rate, uint64_t old,
			      uint64_t new)
{
	if (rate <= 1 || new >= old)
		return 1;
	if (new == 0)
		return 0;
	double keep = sample_expm1(-(double)new / (double)rate) /
		      sample_expm1(-(double)old / (double)rate);
	double u = (double)(sample_rand(state) >> 11) * 0x1.0p-53;   /* [0, 1) */
	return u < keep;
}

/* The chance a sample had of being one, read back from its weight in
 * objects (1/p in YM_FX_ONE units): 1 for one object or less (exact
 * mode, a block larger than many rates). */
static inline double sample_p_of_weight(uint64_t weight_fx)
{
	if (weight_fx <= YM_FX_ONE)
		return 1.0;
	return (double)YM_FX_ONE / (double)weight_fx;
}

/* realloc of a sample that had chance p of being one, its usable size
 * going from old to new bytes, the thread's countdown drawn at rate: 1 if
 * it stays sampled, and its chance after in *p_out, which it is weighed
 * with (s'/p_out bytes, 1/p_out objects).  Its own chance p, not p(old)
 * at the rate now in force: the rate may have changed since it was
 * drawn (ymtop --rate, a cost budget), and a block drawn at 4 KiB and
 * re-weighed at 400 KiB would count a hundred times its size.
 *   Growing (or the same size): it stays; had it not been sampled, the
 *   growth new - old charged to the countdown would have sampled it with
 *   probability p(new - old), so its chance after is
 *   1 - (1 - p) e^(-(new - old)/rate): for a block never moved between
 *   rates, p(c) with c everything ever charged for it (its request, then
 *   each growth), exactly.
 *   Shrinking: it stays with probability min(1, p(new)/p), its chance
 *   after min(p, p(new)): the sampled share of blocks of usable size u
 *   does not ratchet up with repeated reallocs (the top of this file).
 * A failed realloc (new == old) leaves p as it was. */
static inline int sample_resize(uint64_t *state, uint64_t rate, double p,
				uint64_t old, uint64_t new, double *p_out)
{
	if (rate <= 1 || p >= 1.0) {
		*p_out = 1.0;
		return 1;
	}
	if (new >= old) {
		/* (1 - p) e^(-g/R) = (1 - p) - (1 - p)(1 - e^(-g/R)) */
		double q = -sample_expm1(-(double)(new - old) / (double)rate);
		*p_out = p + (1.0 - p) * q;
		return 1;
	}
	if (new == 0)
		return 0;
	double target = -sample_expm1(-(double)new / (double)rate);
	if (target >= p) {
		*p_out = p;
		return 1;
	}
	*p_out = target;
	double u = (double)(sample_rand(state) >> 11) * 0x1.0p-53;   /* [0, 1) */
	return u < target / p;
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
