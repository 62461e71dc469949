/* Sampling distribution and estimator (injector/sample.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "sample.h"

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

static void exact_mode_always_due(void **state)
{
	(void)state;
	uint64_t rng = sample_seed(2);
	assert_true(sample_next_gap(&rng, 1) < 0);
	uint64_t w, fx;
	sample_weight(1, 1, &w, &fx);
	assert_int_equal(w, 1);
	assert_int_equal(fx, YM_FX_ONE);
	sample_weight(1, 12345, &w, &fx);
	assert_int_equal(w, 12345);
	assert_int_equal(fx, YM_FX_ONE);
}

static void weight_formula(void **state)
{
	(void)state;
	uint64_t w, fx;
	const uint64_t R = 65536;
	/* Huge blocks are always sampled: weight = size. */
	sample_weight(R, 64 * R, &w, &fx);
	assert_int_equal(w, 64 * R);
	assert_int_equal(fx, YM_FX_ONE);
	/* s = R: p = 1 - 1/e. */
	sample_weight(R, R, &w, &fx);
	double p = 1 - exp(-1.0);
	assert_true(fabs((double)w - R / p) < 1.0);
	assert_true(fabs((double)fx / YM_FX_ONE - 1 / p) < 1e-4);
	/* Tiny blocks: about R bytes and R/s objects per sample. */
	sample_weight(R, 16, &w, &fx);
	assert_true(fabs((double)w - (R + 8)) < 2);
	assert_true(fabs((double)fx / YM_FX_ONE - R / 16.0) < 1);
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
			sample_weight(R, size, &w, &fx);
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

/* The agent's realloc, simulated: a window of blocks resized at random
 * again and again.  A sampled block stays with sample_keep, an unsampled
 * one is sampled when the countdown runs out within its growth.  The sum
 * of the sampled blocks' weights estimates the bytes held without bias, and
 * the sampled share stays near p(size) instead of ratcheting up. */
static void realloc_estimate_unbiased(void **state)
{
	(void)state;
	enum { WINDOW = 4096, STEPS = 200000, RUNS = 30 };
	static uint64_t size[WINDOW];
	static uint8_t sampled[WINDOW];
	const uint64_t R = 65536;
	double mean = 0, truth = 0, share = 0;
	for (int r = 0; r < RUNS; r++) {
		uint64_t rng = sample_seed(500 + (uint64_t)r), pick = sample_seed(900 + (uint64_t)r);
		int64_t countdown = sample_next_gap(&rng, R);
		memset(size, 0, sizeof size);
		memset(sampled, 0, sizeof sampled);
		for (int i = 0; i < STEPS; i++) {
			uint64_t x = sample_rand(&pick);
			uint32_t k = (uint32_t)(x % WINDOW);
			uint64_t n = 16 + (x >> 20) % 8192;
			if (sampled[k]) {
				sampled[k] = (uint8_t)sample_keep(&rng, R, size[k], n);
			} else if (n > size[k] &&
				   (countdown -= (int64_t)(n - size[k])) < 0) {
				sampled[k] = 1;
				countdown = sample_next_gap(&rng, R);
			}
			size[k] = n;
		}
		double est = 0, held = 0, ns = 0;
		for (int k = 0; k < WINDOW; k++) {
			uint64_t w, fx;
			sample_weight(R, size[k], &w, &fx);
			held += (double)size[k];
			if (sampled[k]) {
				est += (double)w;
				ns++;
			}
		}
		mean += est / RUNS;
		truth += held / RUNS;
		share += ns / WINDOW / RUNS;
	}
	assert_true(fabs(mean - truth) < 0.03 * truth);
	/* Mean size ~4 KiB: p ~ 0.06; keeping every sampled block gives ~1. */
	assert_true(share < 0.1);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gap_mean_is_rate),
		cmocka_unit_test(exact_mode_always_due),
		cmocka_unit_test(weight_formula),
		cmocka_unit_test(estimator_unbiased),
		cmocka_unit_test(realloc_estimate_unbiased),
		cmocka_unit_test(life_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
