/* Sampling distribution and estimator (injector/agent/sample.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "agent/sample.h"

static void gap_mean_is_rate(void **state)
{
	(void)state;
	uint64_t rng = sample_seed(1);
	const uint64_t R = 524288;
	double sum = 0;
	int64_t min = INT64_MAX;
	const int N = 200000;
	for (int i = 0; i < N; i++) {
		int64_t g = sample_next_gap(&rng, R);
		sum += (double)g;
		if (g < min)
			min = g;
	}
	double mean = sum / N;
	/* Standard error of the mean: R / sqrt(N) = 0.22% of R. */
	assert_true(fabs(mean - R) < 0.01 * R);
	assert_true(min >= 1);
}

/* sample_weight(rate, size, usable) weighs w bytes (within dw) and fx
 * objects (within dfx); 0: exactly. */
struct weight_case {
	uint64_t rate, size, usable;
	double w, dw, fx, dfx;
};

static void expect_weights(const struct weight_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t w, fx;
		sample_weight(c[i].rate, c[i].size, c[i].usable, &w, &fx);
		if (fabs((double)w - c[i].w) > c[i].dw ||
		    fabs((double)fx / YM_FX_ONE - c[i].fx) > c[i].dfx)
			fail_msg("case %zu: rate %llu size %llu usable %llu: w %llu "
				 "(want %.3f), fx %.6f (want %.6f)", i,
				 (unsigned long long)c[i].rate,
				 (unsigned long long)c[i].size,
				 (unsigned long long)c[i].usable,
				 (unsigned long long)w, c[i].w,
				 (double)fx / YM_FX_ONE, c[i].fx);
	}
}

static void exact_mode_always_due(void **state)
{
	(void)state;
	uint64_t rng = sample_seed(2);
	assert_true(sample_next_gap(&rng, 1) < 0);
	/* Every block weighs its request and one object. */
	const struct weight_case c[] = {
		{ 1, 1, 24, 1, 0, 1, 0 },
		{ 1, 12345, 12352, 12345, 0, 1, 0 },
	};
	expect_weights(c, sizeof c / sizeof *c);
}

static void weight_formula(void **state)
{
	(void)state;
	const uint64_t R = 65536;
	const double p = 1 - exp(-1.0);   /* s = R */
	const struct weight_case c[] = {
		/* Huge blocks are always sampled: weight = size. */
		{ R, 64 * R, 64 * R, 64.0 * R, 0, 1, 0 },
		/* s = R: p = 1 - 1/e. */
		{ R, R, R, R / p, 1, 1 / p, 1e-4 },
		/* Tiny blocks: about R bytes and R/s objects per sample. */
		{ R, 16, 16, R + 8, 2, R / 16.0, 1 },
		/* The probability is the charged usable size's, the bytes the
		 * request's: s = R/2 in a block of R, p = 1 - 1/e. */
		{ R, R / 2, R, R / 2 / p, 1, 1 / p, 1e-4 },
		/* A usable size of 0 was never charged: weighs its request. */
		{ R, 0, 0, 0, 0, 1, 0 },
	};
	expect_weights(c, sizeof c / sizeof *c);
}

/* The agent's countdown, simulated: the sum of weights estimates the true
 * bytes and objects without bias. */
static void estimate(uint64_t R, uint64_t size, int n, double *bytes,
		     double *objects, uint64_t seed)
{
	uint64_t rng = sample_seed(seed);
	int64_t countdown = sample_next_gap(&rng, R);
	*bytes = *objects = 0;
	for (int i = 0; i < n; i++) {
		if ((countdown -= (int64_t)size) < 0) {
			uint64_t w, fx;
			sample_weight(R, size, size, &w, &fx);
			*bytes += (double)w;
			*objects += (double)fx / YM_FX_ONE;
			countdown = sample_next_gap(&rng, R);
		}
	}
}

static void estimator_unbiased(void **state)
{
	(void)state;
	const uint64_t sizes[] = { 16, 1000, 65536, 300000, 2000000 };
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		double mean_b = 0, mean_o = 0;
		const int runs = 40;
		uint64_t s = sizes[k];
		int n = (int)(2e9 / (double)s / runs) + 1;
		for (int r = 0; r < runs; r++) {
			double b, o;
			estimate(524288, s, n, &b, &o, 100 + (uint64_t)r);
			mean_b += b / runs;
			mean_o += o / runs;
		}
		double truth = (double)s * n;
		assert_true(fabs(mean_b - truth) < 0.02 * truth);
		assert_true(fabs(mean_o - n) < 0.02 * n);
	}
}

/* Allocators, simulated by their usable sizes.  EXACT: the request.
 * GLIBC: a chunk of the request plus 8 rounded up to 16, at least 32,
 * less the size field.  CLASSES: jemalloc's size classes (mimalloc's and
 * tcmalloc's are alike): 8, multiples of 16 up to 128, then 4 a doubling,
 * in place growth and shrinking within a class. */
enum alloc_kind { EXACT, GLIBC, CLASSES, KINDS };

static uint64_t usable_of(enum alloc_kind k, uint64_t n)
{
	switch (k) {
	case EXACT:
		return n;
	case GLIBC:
		return ((n + 8 + 15) & ~(uint64_t)15) < 32 ? 24 :
		       ((n + 8 + 15) & ~(uint64_t)15) - 8;
	default:
		if (n <= 8)
			return 8;
		if (n <= 128)
			return (n + 15) & ~(uint64_t)15;
		uint64_t top = 63 - (uint64_t)__builtin_clzll(n - 1);   /* 2^top < n */
		uint64_t step = 1ULL << (top - 2);
		return (n + step - 1) & ~(step - 1);
	}
}

/* One realloc of block k (size 0: realloc(NULL, n)) to n bytes, as the
 * agent does it (hooks.c realloc_slow, sampling.c agent_realloc_put,
 * sample.h): the usable size goes from use[k] to u; a sampled block stays
 * or leaves with sample_resize and keeps its chance after in p[k]; an
 * unsampled one is charged the growth of its usable size and, sampled,
 * weighed at p(u) at the rate its countdown was drawn at.  Under CLASSES
 * half of the shrinks stay in place, keeping the larger usable size
 * (allocators do that with large blocks).  R may change between calls
 * (ymtop --rate, a cost budget): the countdown keeps the rate it was
 * drawn at (drawn), the next is drawn at R. */
struct sim {
	uint64_t rng, pick;
	int64_t countdown;
	uint64_t R, drawn;
	enum alloc_kind kind;
	double *p;   /* each block's chance of being a sample */
};

static void sim_realloc(struct sim *m, uint32_t k, uint64_t *size,
			uint64_t *use, uint8_t *sampled, uint64_t n)
{
	uint64_t u = usable_of(m->kind, n);
	if (m->kind == CLASSES && n <= *use && (sample_rand(&m->pick) & 1))
		u = *use;   /* shrunk in place */
	if (*sampled) {
		*sampled = (uint8_t)sample_resize(&m->rng, m->drawn, m->p[k],
						  *use, u, &m->p[k]);
	} else if ((m->countdown -= (int64_t)(u > *use ? u - *use : 0)) < 0) {
		*sampled = 1;
		m->p[k] = -sample_expm1(-(double)u / (double)m->drawn);
		m->drawn = m->R;
		m->countdown = sample_next_gap(&m->rng, m->drawn);
	}
	*size = n;
	*use = u;
}

static double sim_estimate(const struct sim *m, const uint64_t *size,
			   const uint64_t *use, const uint8_t *sampled,
			   int count, double *held, double *nsampled)
{
	double est = 0;
	(void)use;
	*held = *nsampled = 0;
	for (int k = 0; k < count; k++) {
		*held += (double)size[k];
		if (sampled[k]) {
			est += (double)size[k] / m->p[k];
			*nsampled += 1;
		}
	}
	return est;
}

/* A window of blocks resized at random again and again, under each
 * allocator.  The sum of the sampled blocks' weights estimates the bytes
 * held without bias, and the sampled share stays near p(size) instead of
 * ratcheting up.  Charging the growth as new request - old usable size
 * (the agent before) gives 0.85 of the truth under CLASSES. */
static void realloc_estimate_unbiased(void **state)
{
	(void)state;
	enum { WINDOW = 4096, STEPS = 200000, RUNS = 30 };
	static uint64_t size[WINDOW], use[WINDOW];
	static uint8_t sampled[WINDOW];
	static double pk[WINDOW];
	for (int kind = 0; kind < KINDS; kind++) {
		double mean = 0, truth = 0, share = 0;
		for (int r = 0; r < RUNS; r++) {
			struct sim m = {
				.rng = sample_seed(500 + (uint64_t)r),
				.pick = sample_seed(900 + (uint64_t)r),
				.R = 65536, .drawn = 65536,
				.kind = (enum alloc_kind)kind, .p = pk,
			};
			m.countdown = sample_next_gap(&m.rng, m.R);
			memset(size, 0, sizeof size);
			memset(use, 0, sizeof use);
			memset(sampled, 0, sizeof sampled);
			for (int i = 0; i < STEPS; i++) {
				uint64_t x = sample_rand(&m.pick);
				uint32_t k = (uint32_t)(x % WINDOW);
				uint64_t n = 16 + (x >> 20) % 8192;
				sim_realloc(&m, k, &size[k], &use[k], &sampled[k], n);
			}
			double held, ns;
			mean += sim_estimate(&m, size, use, sampled, WINDOW,
					     &held, &ns) / RUNS;
			truth += held / RUNS;
			share += ns / WINDOW / RUNS;
		}
		print_message("realloc window, allocator %d: estimate/truth %.4f\n",
			      kind, mean / truth);
		/* 30 runs of 4096 blocks with p ~ 0.06: standard error 1.1%. */
		assert_true(fabs(mean - truth) < 0.035 * truth);
		/* Mean size ~4 KiB: p ~ 0.06; keeping every sampled block
		 * gives ~1. */
		assert_true(share < 0.1);
	}
}

/* Issue 16's case: 6000 blocks grown to 8 KiB in 256-byte steps, one step
 * for each block in turn.  Under CLASSES the growth charged as new request
 * - old usable size was 0.45-0.57 of the truth; the usable size's growth is
 * unbiased under each allocator. */
static void grow_chains_unbiased(void **state)
{
	(void)state;
	enum { BLOCKS = 6000, RUNS = 20 };
	static uint64_t size[BLOCKS], use[BLOCKS];
	static uint8_t sampled[BLOCKS];
	static double pk[BLOCKS];
	for (int kind = 0; kind < KINDS; kind++) {
		double mean = 0, truth = 0;
		for (int r = 0; r < RUNS; r++) {
			struct sim m = {
				.rng = sample_seed(700 + (uint64_t)r),
				.pick = sample_seed(800 + (uint64_t)r),
				.R = 65536, .drawn = 65536,
				.kind = (enum alloc_kind)kind, .p = pk,
			};
			m.countdown = sample_next_gap(&m.rng, m.R);
			memset(size, 0, sizeof size);
			memset(use, 0, sizeof use);
			memset(sampled, 0, sizeof sampled);
			for (uint64_t n = 256; n <= 8192; n += 256)
				for (int k = 0; k < BLOCKS; k++)
					sim_realloc(&m, (uint32_t)k, &size[k],
						    &use[k], &sampled[k], n);
			double held, ns;
			mean += sim_estimate(&m, size, use, sampled, BLOCKS,
					     &held, &ns) / RUNS;
			truth += held / RUNS;
		}
		print_message("grown to 8 KiB, allocator %d: estimate/truth %.4f\n",
			      kind, mean / truth);
		/* p(8 KiB) = 0.118 at R = 64 KiB: one run's relative standard
		 * error is sqrt((1 - p)/(p 6000)) = 3.5%, 20 runs' 0.8%. */
		assert_true(fabs(mean - truth) < 0.03 * truth);
	}
}

/* The rate changes while blocks live (a cost budget lengthens it 100x
 * and shortens it back, ymtop --rate): a window of blocks resized at
 * random, the rate switching between 4 KiB and 400 KiB every 20000
 * reallocs.  Each sample keeps its own chance through its reallocs
 * (sample_resize), so the estimate stays within its noise; re-weighing a
 * block drawn at 4 KiB at the 400 KiB in force at its realloc (p(u') at
 * the rate now, as the agent did) counted such blocks 100 times: the
 * estimate came out at several times the truth. */
static void realloc_estimate_unbiased_across_rate_changes(void **state)
{
	(void)state;
	enum { WINDOW = 4096, STEPS = 200000, RUNS = 30 };
	static uint64_t size[WINDOW], use[WINDOW];
	static uint8_t sampled[WINDOW];
	static double pk[WINDOW];
	for (int kind = 0; kind < KINDS; kind++) {
		double mean = 0, truth = 0;
		for (int r = 0; r < RUNS; r++) {
			struct sim m = {
				.rng = sample_seed(300 + (uint64_t)r),
				.pick = sample_seed(400 + (uint64_t)r),
				.R = 4096, .drawn = 4096,
				.kind = (enum alloc_kind)kind, .p = pk,
			};
			m.countdown = sample_next_gap(&m.rng, m.R);
			memset(size, 0, sizeof size);
			memset(use, 0, sizeof use);
			memset(sampled, 0, sizeof sampled);
			for (int i = 0; i < STEPS; i++) {
				if (i % 20000 == 0)
					m.R = (i / 20000) % 2 ? 409600 : 4096;
				uint64_t x = sample_rand(&m.pick);
				uint32_t k = (uint32_t)(x % WINDOW);
				uint64_t n = 16 + (x >> 20) % 8192;
				sim_realloc(&m, k, &size[k], &use[k], &sampled[k], n);
			}
			double held, ns;
			mean += sim_estimate(&m, size, use, sampled, WINDOW,
					     &held, &ns) / RUNS;
			truth += held / RUNS;
		}
		print_message("realloc window across rate changes, allocator %d: "
			      "estimate/truth %.4f\n", kind, mean / truth);
		/* Last phase at 400 KiB (p ~ 0.01 for 4 KiB blocks): one
		 * run's standard error ~16%, 30 runs' ~3%. */
		assert_true(fabs(mean - truth) < 0.12 * truth);
	}
}

/* sample.h's own -log and expm1 against libm's: the relative error over
 * wide sweeps stays under MAX_REL_ERR (measured 4.8e-12 for -log and
 * 5.2e-12 for expm1, printed below).  The estimates' bias is of that order,
 * far below the 0.1% that would matter. */
#define MAX_REL_ERR 1e-11

static double rel_err(double got, double want)
{
	if (want == 0)
		return got == 0 ? 0 : INFINITY;
	return fabs(got - want) / fabs(want);
}

static double with_bits(uint64_t u)
{
	union sample_bits b = { .u = u };
	return b.d;
}

/* The largest relative error seen, and where. */
struct worst {
	double err, at;
};

static void neg_log_check(struct worst *w, double u)
{
	double e = rel_err(sample_neg_log(u), -log(u));
	if (e > w->err)
		*w = (struct worst){ e, u };
}

static void neg_log_matches_libm(void **state)
{
	(void)state;
	struct worst w = { 0, 0 };
	/* Every u the generator makes is n 2^-53, n in [1, 2^53]: both ends. */
	for (uint64_t n = 1; n <= 200000; n++) {
		neg_log_check(&w, (double)n * 0x1.0p-53);
		neg_log_check(&w, (double)((1ULL << 53) + 1 - n) * 0x1.0p-53);
	}
	/* Random mantissas at every binade down to 2^-60 (below the
	 * generator's 2^-53 too), and ulps either side of 2^e sqrt(1/2), where
	 * the reduction switches binade. */
	uint64_t rng = sample_seed(7);
	for (int e = -60; e <= 0; e++) {
		uint64_t expo = (uint64_t)(1023 + e - 1) << 52;   /* [2^(e-1), 2^e) */
		for (int i = 0; i < 40000; i++)
			neg_log_check(&w, with_bits(expo | (sample_rand(&rng) >> 12)));
		uint64_t mid = (0x3FE6A09E667F3BCDULL & ((1ULL << 52) - 1)) | expo;
		for (int d = -2000; d <= 2000; d++)
			neg_log_check(&w, with_bits(mid + (uint64_t)(int64_t)d));
	}
	neg_log_check(&w, 1.0);
	/* The generator's own draws. */
	for (int i = 0; i < 1000000; i++) {
		double u = (double)((sample_rand(&rng) >> 11) + 1) * 0x1.0p-53;
		neg_log_check(&w, u);
	}
	print_message("sample_neg_log: max relative error %.3g at u = %a\n",
		      w.err, w.at);
	assert_true(w.err < MAX_REL_ERR);
	assert_true(sample_neg_log(1.0) == 0);
}

static void expm1_check(struct worst *w, double x)
{
	double y = sample_expm1(x);
	/* p = -y must stay in (0, 1]: weights never below the size. */
	if (x < 0 && !(y < 0 && y >= -1))
		fail_msg("sample_expm1(%a) = %a", x, y);
	double e = rel_err(y, expm1(x));
	if (e > w->err)
		*w = (struct worst){ e, x };
}

static void expm1_matches_libm(void **state)
{
	(void)state;
	struct worst w = { 0, 0 };
	uint64_t rng = sample_seed(8);
	/* x = -10^t for t from -20 to 19, 20000 points a decade, jittered. */
	for (int i = -400000; i <= 380000; i++) {
		double j = (double)(sample_rand(&rng) >> 11) * 0x1.0p-53;
		expm1_check(&w, -pow(10.0, (i + j) / 20000.0));
	}
	/* Every interval of ln2 to saturation, and ulps either side of
	 * x = -(k + 1/2) ln2, where the reduction switches k. */
	for (int k = 0; k <= 60; k++) {
		for (int i = 0; i < 20000; i++)
			expm1_check(&w, -(k + i / 20000.0) * 0.69314718055994531);
		union sample_bits mid = { .d = -(k + 0.5) * 0.69314718055994531 };
		for (int d = -2000; d <= 2000; d++)
			expm1_check(&w, with_bits(mid.u + (uint64_t)(int64_t)d));
	}
	/* The saturation: from about -37.4 on, libm says -1. */
	for (double x = -45; x < -30; x += 1.0 / 4096)
		expm1_check(&w, x);
	const double huge[] = { -1e12, -1e15, -9.2e18, -0x1.0p64, -1e300 };
	for (size_t i = 0; i < sizeof huge / sizeof *huge; i++)
		expm1_check(&w, huge[i]);
	/* The agent's x = -size/rate, tiny to huge: every size to 64 KiB and
	 * 3 2^i to 2^41, rates 2 to 2^40. */
	const uint64_t rates[] = { 2, 3, 4096, 65536, 524288, 1000003, 1ULL << 30,
				   1ULL << 40 };
	for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
		for (uint64_t size = 1; size <= 65536; size++)
			expm1_check(&w, -(double)size / (double)rates[r]);
		for (int i = 0; i < 40; i++)
			expm1_check(&w, -(double)(1ULL << i) * 3 / (double)rates[r]);
	}
	expm1_check(&w, -0x1.0p-64);
	expm1_check(&w, -0x1.0p-1000);
	print_message("sample_expm1: max relative error %.3g at x = %a\n",
		      w.err, w.at);
	assert_true(w.err < MAX_REL_ERR);
	assert_true(sample_expm1(0.0) == 0);
	assert_true(sample_expm1(-64.0) == -1);
}

/* The weights are libm's to the rounding: within half a unit of size/p
 * and YM_FX_ONE/p with libm's p, give or take MAX_REL_ERR of them. */
static void weight_matches_libm(void **state)
{
	(void)state;
	const uint64_t rates[] = { 2, 4096, 524288, 1ULL << 30 };
	uint64_t rng = sample_seed(9);
	for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
		for (int i = 0; i < 200000; i++) {
			uint64_t size = 1 + (sample_rand(&rng) >> (24 + i % 40));
			uint64_t w, fx;
			sample_weight(rates[r], size, size, &w, &fx);
			double p = -expm1(-(double)size / (double)rates[r]);
			double want_w = (double)size / p, want_fx = (double)YM_FX_ONE / p;
			assert_true(fabs((double)w - want_w) <= 0.5 + want_w * MAX_REL_ERR);
			assert_true(fabs((double)fx - want_fx) <= 0.5 + want_fx * MAX_REL_ERR);
		}
	}
}

static void life_buckets(void **state)
{
	(void)state;
	assert_int_equal(sample_life_bucket(0), 0);
	assert_int_equal(sample_life_bucket(999), 0);
	assert_int_equal(sample_life_bucket(1000), 1);
	assert_int_equal(sample_life_bucket(1500000000ULL), 7);
	assert_int_equal(sample_life_bucket(3599000000000ULL), 10);
	assert_int_equal(sample_life_bucket(3600000000000ULL), 11);
	assert_int_equal(sample_life_bucket(UINT64_MAX), 11);
}

/* The countdown's draw is the rate times -log u, u the generator's 53 bits
 * plus one over 2^53, truncated, at least 1: what sample_next_gap
 * computes with its constants in one block (sample.h) and u made by its
 * exponent is that, bit for bit, at the rates the agent draws at. */
static void draw_is_the_exact_formula(void **state)
{
	(void)state;
	static const uint64_t rates[] = { 2, 64, 4096, 524288, 1ULL << 30,
					  1ULL << 40 };
	for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
		uint64_t a = sample_seed(11 + r), b = a;
		for (int i = 0; i < 200000; i++) {
			int64_t got = sample_next_gap(&a, rates[r]);
			double u = (double)((sample_rand(&b) >> 11) + 1) * 0x1.0p-53;
			double gap = sample_neg_log(u) * (double)rates[r];
			int64_t want = gap < 1.0 ? 1 : (int64_t)gap;
			if (got != want)
				fail_msg("rate %llu, draw %d: %lld, want %lld",
					 (unsigned long long)rates[r], i,
					 (long long)got, (long long)want);
		}
	}
	/* The largest gap: u = 2^-53, -log u = 53 ln 2. */
	assert_true(sample_neg_log(0x1.0p-53) > 36.7 &&
		    sample_neg_log(0x1.0p-53) < 36.8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gap_mean_is_rate),
		cmocka_unit_test(exact_mode_always_due),
		cmocka_unit_test(weight_formula),
		cmocka_unit_test(estimator_unbiased),
		cmocka_unit_test(realloc_estimate_unbiased),
		cmocka_unit_test(realloc_estimate_unbiased_across_rate_changes),
		cmocka_unit_test(grow_chains_unbiased),
		cmocka_unit_test(life_buckets),
		cmocka_unit_test(neg_log_matches_libm),
		cmocka_unit_test(expm1_matches_libm),
		cmocka_unit_test(weight_matches_libm),
		cmocka_unit_test(draw_is_the_exact_formula),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
