/* The curses-free model: estimates, rates, mark and growth, sorting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define NST 4
#define DEPTH 4

/* A snapshot with NST stacks; stack i holds retained[i] bytes and has
 * allocated alloc[i] bytes, at time t seconds. */
static void snap_make(struct shm_snapshot *s, const double *retained,
		      const double *alloc, double t)
{
	memset(s, 0, sizeof *s);
	s->hdr.pid = 0x7fffffff;   /* no such process: model sees it exited */
	s->hdr.sample_rate = 4096;
	s->hdr.max_depth = DEPTH;
	s->taken_mono_ns = (uint64_t)(t * 1e9) + 1000000000ULL;
	s->stack_stride = shm_stack_stride(DEPTH);
	s->nstacks = NST;
	s->stacks = calloc(NST, s->stack_stride);
	for (uint32_t i = 0; i < NST; i++) {
		struct ym_stack *st = (struct ym_stack *)(s->stacks + i * s->stack_stride);
		st->hash = 10 + i;
		st->depth = 1;
		st->frames[0] = 0x1000 + i;
		st->alloc_samples = alloc[i] > 0;
		st->alloc_bytes = (uint64_t)alloc[i];
		st->free_bytes = (uint64_t)(alloc[i] - retained[i]);
		st->alloc_objects_fx = (uint64_t)(alloc[i] / 100) * YM_FX_ONE;
		st->free_objects_fx = (uint64_t)((alloc[i] - retained[i]) / 100) * YM_FX_ONE;
	}
	s->live = calloc(2, sizeof *s->live);
	s->nlive = 2;
	s->live[0] = (struct ym_live){ .addr = 1, .stack = 2, .birth_mono_ns = 500000000ULL };
	s->live[1] = (struct ym_live){ .addr = 2, .stack = 2, .birth_mono_ns = 700000000ULL };
	s->totals.alloc_bytes = (uint64_t)(1000 * t);
	s->totals.alloc_objects = (uint64_t)(10 * t);
}

static void estimates_and_order(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	const double a[NST] = { 0, 5000, 9000, 2000 };
	model_init(&m);
	snap_make(&s, r, a, 0);
	assert_int_equal(model_update(&m, &s), 0);
	assert_null(s.stacks);   /* ownership moved */
	assert_int_equal(m.norder, 3);   /* stack 0 never sampled: hidden */
	assert_int_equal(m.order[0], 1);
	assert_int_equal(m.order[1], 3);
	assert_int_equal(m.order[2], 2);
	assert_true(m.retained_bytes == 6000);
	assert_true(m.stacks[1].retained_objects == 30);
	model_sort(&m, SORT_ALLOCATED, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 2);
	model_sort(&m, SORT_ALLOCATED, 1, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 3);
	/* Oldest live sample of stack 2 was born at 0.5 s; snapshot at 1 s. */
	assert_int_equal(model_oldest_age(&m, &m.stacks[2]), 500000000ULL);
	assert_int_equal(m.stacks[2].live_samples, 2);
	assert_string_equal(model_state(&m), "exited");
	model_free(&m);
}

static int keep_odd(void *ctx, const struct model_stack *s)
{
	(void)ctx;
	return s->id % 2 == 1;
}

static void rates_mark_growth_filter(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r1[NST] = { 0, 3000, 1000, 2000 };
	const double a1[NST] = { 0, 5000, 9000, 2000 };
	const double r2[NST] = { 0, 3000, 5000, 1000 };
	const double a2[NST] = { 0, 5000, 19000, 2000 };
	model_init(&m);
	snap_make(&s, r1, a1, 0);
	model_update(&m, &s);
	model_mark(&m);
	snap_make(&s, r2, a2, 2);
	model_update(&m, &s);
	assert_true(m.interval_s == 2.0);
	assert_true(m.stacks[2].alloc_rate == 5000.0);   /* 10000 B in 2 s */
	assert_true(m.alloc_bytes_rate == 1000.0);
	assert_true(m.stacks[2].growth == 4000.0);
	assert_true(m.stacks[3].growth == -1000.0);
	model_sort(&m, SORT_GROWTH, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 2);
	assert_int_equal(m.order[m.norder - 1], 3);
	model_sort(&m, SORT_RETAINED, 0, keep_odd, NULL, NULL);
	assert_int_equal(m.norder, 2);
	assert_int_equal(m.order[0], 1);
	assert_int_equal(m.order[1], 3);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(estimates_and_order),
		cmocka_unit_test(rates_mark_growth_filter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
