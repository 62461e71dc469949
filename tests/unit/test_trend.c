/* Trend verdicts (tui/model/trend.c): the fit on series, and the series
 * the model reads from the agent's slots or from its own snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/trend.h"
#include "snap.h"

#define RATE 524288.0
#define MiB  1048576.0

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* An estimate of `bytes` as the agent makes it: a Poisson number of
 * samples of mean bytes / R, each weighing R (small blocks). */
static double estimate(double bytes)
{
	double lambda = bytes / RATE, n = 0;
	if (lambda > 50) {   /* normal approximation */
		double u1 = uniform() + 1e-12, u2 = uniform();
		n = lambda + sqrt(lambda) * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
	} else {
		double l = exp(-lambda), p = 1;
		while ((p *= uniform()) > l)
			n++;
	}
	return n * RATE;
}

/* The series of a leak of `per_point` samples a point on average over
 * n points 10 s apart: cumulative (samples, once taken, stay). */
static void leak_series(double *t, double *y, int n, double per_point)
{
	double leaked = 0;
	for (int i = 0; i < n; i++) {
		t[i] = 10.0 * i;
		if (i)
			leaked += estimate(per_point * RATE);
		y[i] = leaked;
	}
}

static void leak_is_growing_at_its_rate(void **state)
{
	(void)state;
	/* 1 MiB/min for 10 minutes, 10-s points: the acceptance case, every
	 * one of 50 runs (a 2-sigma stopped test and the churn term of a
	 * level that never churned missed 4 of them). */
	double t[61], y[61];
	for (int run = 0; run < 50; run++) {
		leak_series(t, y, 61, MiB / 6 / RATE);
		struct model_trend o;
		trend_fit(t, y, 61, RATE, &o);
		assert_int_equal(o.verdict, TREND_GROWING);
		/* The slope of the growth the samples show (20 of them: the
		 * line through them is a rough one). */
		assert_true(fabs(o.bytes_per_s - y[60] / 600) < 0.4 * y[60] / 600);
		assert_true(o.window_s == 600);
	}
}

static void leak_is_growing_over_many_seeds(void **state)
{
	(void)state;
	/* The same over 4000 runs: at least 99 % (99.75 % measured; the
	 * runs left out drew fewer than about 10 samples of their mean 20,
	 * which 3 sigma of their own noise does not tell from none). */
	double t[61], y[61];
	int growing = 0, runs = 4000;
	for (int run = 0; run < runs; run++) {
		leak_series(t, y, 61, MiB / 6 / RATE);
		struct model_trend o;
		trend_fit(t, y, 61, RATE, &o);
		growing += o.verdict == TREND_GROWING;
	}
	print_message("leak 1 MiB/min, 10 min: %d of %d growing\n", growing, runs);
	assert_true(growing >= runs * 99 / 100);
}

/* A binomial draw of n trials of probability p, small n or p near 1. */
static double binomial(double n, double p)
{
	if (n > 200 && n * (1 - p) < 30) {
		double d = estimate(n * (1 - p) * RATE) / RATE;
		return d > n ? 0 : n - d;
	}
	if (n > 200) {
		double u1 = uniform() + 1e-12, u2 = uniform();
		double k = floor(n * p + sqrt(n * p * (1 - p)) *
				 sqrt(-2 * log(u1)) * cos(2 * M_PI * u2) + 0.5);
		return k < 0 ? 0 : k > n ? n : k;
	}
	double k = 0;
	for (int i = 0; i < (int)n; i++)
		k += uniform() < p;
	return k;
}

static void steady_churn_is_not_growing(void **state)
{
	(void)state;
	/* Stacks at a steady level of L samples whose blocks live tau
	 * seconds on average (samples freed and taken at L / tau a second:
	 * consecutive points share their samples, a random walk for tau
	 * longer than the window), over 10 minutes and an hour.  Growing
	 * in at most 0.05 % of the series (measured: a few in 10^4, where
	 * a random walk drew many samples and freed none). */
	const double levels[] = { 0.5, 2, 5, 20, 100, 2000 };
	const double taus[] = { 5, 30, 50, 100, 200, 600, 1800, 3600, 36000, 360000 };
	const int npoints[] = { 61, 361 };
	double t[361], y[361];
	int growing = 0, series = 0;
	for (size_t a = 0; a < sizeof levels / sizeof *levels; a++)
		for (size_t b = 0; b < sizeof taus / sizeof *taus; b++)
			for (size_t c = 0; c < 2; c++) {
				double keep = exp(-10 / taus[b]), l = levels[a];
				for (int run = 0; run < 200; run++, series++) {
					double k = estimate(l * RATE) / RATE;
					for (int i = 0; i < npoints[c]; i++) {
						t[i] = 10.0 * i;
						if (i)
							k = binomial(k, keep) +
							    estimate(l * (1 - keep) * RATE) / RATE;
						y[i] = k * RATE;
					}
					struct model_trend o;
					trend_fit(t, y, (uint32_t)npoints[c], RATE, &o);
					growing += o.verdict == TREND_GROWING;
				}
			}
	print_message("steady churn: %d of %d series growing\n", growing, series);
	assert_true(growing * 2000 <= series);
}

static void noise_is_flat(void **state)
{
	(void)state;
	/* A stack churning around 10 MiB (each point's samples drawn
	 * anew), an hour of 10-s points: never growing. */
	double t[361], y[361];
	for (int run = 0; run < 200; run++) {
		for (int i = 0; i <= 360; i++) {
			t[i] = 10.0 * i;
			y[i] = estimate(10 * MiB);
		}
		struct model_trend o;
		trend_fit(t, y, 361, RATE, &o);
		assert_int_not_equal(o.verdict, TREND_GROWING);
		assert_int_not_equal(o.verdict, TREND_SHRINKING);
	}
}

static void plateau_shrinking_unknown(void **state)
{
	(void)state;
	double t[60], y[60];
	struct model_trend o;
	for (int i = 0; i < 60; i++) {   /* a cache: 40 MiB in 20 s, then full */
		t[i] = i;
		y[i] = (i < 20 ? i / 20.0 : 1) * 40 * MiB;
	}
	trend_fit(t, y, 60, RATE, &o);
	assert_int_equal(o.verdict, TREND_PLATEAU);
	assert_true(fabs(o.bytes_per_s) < 1);   /* not growing any more */
	for (int i = 0; i < 60; i++)
		y[i] = (60 - i) * MiB;
	trend_fit(t, y, 60, RATE, &o);
	assert_int_equal(o.verdict, TREND_SHRINKING);
	assert_true(fabs(o.bytes_per_s + MiB) < 1);
	trend_fit(t, y, TREND_MIN_POINTS - 1, RATE, &o);
	assert_int_equal(o.verdict, TREND_UNKNOWN);
	assert_string_equal(trend_verdict_name(TREND_UNKNOWN), "unknown");
	assert_string_equal(trend_verdict_name(TREND_GROWING), "growing");
}

/* A snapshot of 2 stacks (stack 1 retains `now_y`) at t seconds, with
 * agent slots of 1 s: slot i at i s holds stack 1 at y[i], or not when
 * y[i] < 0; no slot where `written` is 0. */
static void snap_slots(struct shm_snapshot *s, double t, double now_y,
		       const double *y, const int *written, int nslots)
{
	const double r[2] = { 0, now_y }, a[2] = { 0, now_y + 1 };
	snap_fake(s, 2, 4, r, a, t);
	s->hdr.abi_version = 8;
	s->hdr.sample_rate = 4096;
	s->hdr.trend_slot_ns = 1000000000ull;
	s->hdr.trend_stacks = 4;
	s->trend_kept = 1;
	s->trend_stride = shm_trend_stride(4);
	s->trend = calloc((size_t)nslots, s->trend_stride);
	s->ntrend = 0;
	for (int i = 0; i < nslots; i++) {
		if (!written[i])
			continue;
		struct ym_trend_slot *rec = (struct ym_trend_slot *)(void *)(s->trend +
			(size_t)s->ntrend++ * s->trend_stride);
		rec->seq = 2 * (uint64_t)(i + 1);
		rec->mono_ns = 1000000000ull * (uint64_t)i + 1000000000ull;
		if (y[i] >= 0)
			rec->points[rec->count++] = (struct ym_trend_point){
				.stack = 1, .samples = 100, .retained = (int64_t)y[i] };
	}
}

static void absent_from_a_slot_is_unknown_not_zero(void **state)
{
	(void)state;
	/* 30 slots at 8 MiB; in slots 10-19 the stack was not among the
	 * largest: read as 0 those would make a dip, not a flat line. */
	double y[30];
	int w[30];
	for (int i = 0; i < 30; i++) {
		y[i] = i >= 10 && i < 20 ? -1 : 8 * MiB;
		w[i] = 1;
	}
	struct model m;
	struct shm_snapshot s;
	model_init(&m);
	snap_slots(&s, 30, 8 * MiB, y, w, 30);
	assert_int_equal(model_update(&m, &s), 0);
	assert_int_equal(m.trend_source, MODEL_TREND_AGENT);
	const struct model_trend *tr = &m.stacks[1].trend;
	assert_int_equal(tr->verdict, TREND_FLAT);
	assert_true(tr->window_s >= 29);
	/* The sparkline has no point in those slots. */
	assert_true(tr->spark[3] < 0);
	model_free(&m);
}

static void no_slot_means_unchanged(void **state)
{
	(void)state;
	/* Grew 1 MiB a slot for 20 slots, then no sample for 40 slots (no
	 * slot written): its estimate did not change, so it levelled off.
	 * Without the carried value the fit would see only the growth. */
	double y[60];
	int w[60];
	for (int i = 0; i < 60; i++) {
		y[i] = i < 20 ? i * MiB : -1;
		w[i] = i < 20;
	}
	struct model m;
	struct shm_snapshot s;
	model_init(&m);
	snap_slots(&s, 60, 19 * MiB, y, w, 60);
	assert_int_equal(model_update(&m, &s), 0);
	const struct model_trend *tr = &m.stacks[1].trend;
	assert_int_equal(tr->verdict, TREND_PLATEAU);
	assert_true(tr->window_s >= 59);
	assert_true(m.ngrowing == 0 && m.growing_bytes == 0);
	model_free(&m);
}

static void hostile_slot_length(void **state)
{
	(void)state;
	/* A slot length near 2^64 (the header is the writer's word): the
	 * grid stays within its bounds. */
	double y[8];
	int w[8];
	for (int i = 0; i < 8; i++) {
		y[i] = i * MiB;
		w[i] = 1;
	}
	const uint64_t steps[] = { 1, 3, 1ull << 63, UINT64_MAX };
	for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
		struct model m;
		struct shm_snapshot s;
		model_init(&m);
		snap_slots(&s, 3600, 8 * MiB, y, w, 8);
		s.hdr.trend_slot_ns = steps[k];
		assert_int_equal(model_update(&m, &s), 0);
		assert_true(m.stacks[1].trend.window_s <= 3601);
		model_free(&m);
	}
}

static void hostile_slot_length_short_span(void **state)
{
	(void)state;
	/* A slot length of a few ns and a slot 1-2 us before the snapshot:
	 * the coarser grid step (span / (grid - 1), rounded up) keeps the
	 * grid within its points; rounded down, a span of 719-1437 ns made
	 * up to twice as many grid points as there is room for. */
	const double t[] = { 719e-9, 1000e-9, 1437e-9, 2000e-9 };
	const uint64_t steps[] = { 1, 2 };
	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
			double y[1] = { MiB };
			int w[1] = { 1 };
			struct model m;
			struct shm_snapshot s;
			model_init(&m);
			snap_slots(&s, t[i], MiB, y, w, 1);
			s.hdr.trend_slot_ns = steps[k];
			assert_int_equal(model_update(&m, &s), 0);
			assert_true(m.stacks[1].trend.window_s <= 1e-5);
			model_free(&m);
		}
}

static void own_history_without_agent_slots(void **state)
{
	(void)state;
	/* An agent that keeps no trend (before ABI v8): ymtop's own
	 * snapshots, unknown until there are enough. */
	struct model m;
	model_init(&m);
	m.trend_own_slot_ns = 1000000000ull;
	for (int i = 0; i < 12; i++) {
		struct shm_snapshot s;
		const double r[2] = { 0, (i + 1) * MiB }, a[2] = { 0, (i + 1) * MiB };
		snap_fake(&s, 2, 4, r, a, i);
		s.hdr.abi_version = 7;
		assert_int_equal(model_update(&m, &s), 0);
		assert_int_equal(m.trend_source, MODEL_TREND_OWN);
		if (i < TREND_MIN_POINTS - 1)
			assert_int_equal(m.stacks[1].trend.verdict, TREND_UNKNOWN);
	}
	assert_int_equal(m.stacks[1].trend.verdict, TREND_GROWING);
	assert_true(fabs(m.stacks[1].trend.bytes_per_s - MiB) < 1);
	assert_int_equal(m.ngrowing, 1);
	assert_true(m.growing_bytes == 12 * MiB);
	model_sort(&m, SORT_TREND, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 1);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(leak_is_growing_at_its_rate),
		cmocka_unit_test(leak_is_growing_over_many_seeds),
		cmocka_unit_test(steady_churn_is_not_growing),
		cmocka_unit_test(noise_is_flat),
		cmocka_unit_test(plateau_shrinking_unknown),
		cmocka_unit_test(absent_from_a_slot_is_unknown_not_zero),
		cmocka_unit_test(no_slot_means_unchanged),
		cmocka_unit_test(hostile_slot_length),
		cmocka_unit_test(hostile_slot_length_short_span),
		cmocka_unit_test(own_history_without_agent_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
