/* The cost budget's windows and decisions (injector/agent/budget.h).  The
 * wall clock is the test's (budget_poll's now); the CPU time is the
 * process's own (CLOCK_PROCESS_CPUTIME_ID, read inside budget_poll), so
 * each window burns the CPU time it needs: nothing here depends on how
 * fast or loaded the machine is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

#include "agent/budget.h"
#include "agent/config.h"

#define MS 1000000ULL

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

/* Spend ns of this process's CPU time. */
static void burn(uint64_t ns)
{
	uint64_t end = cpu_ns() + ns;
	while (cpu_ns() < end)
		for (int i = 0; i < 10000; i++)
			sink += (uint64_t)i;
}

static struct ym_header hdr;

/* A window of 12 ms of CPU time (more than BUDGET_MIN_CPU_NS) in which
 * the sampled paths took `spent`, judged at `now`. */
static uint64_t window(struct agent_tls *t, uint64_t spent, uint64_t now,
		       uint64_t rate)
{
	burn(12 * MS);
	t->budget_ns = spent;
	return budget_poll(t, now, rate, 1024);
}

/* A budget of 1 % set at `now` (YM_SAMPLE_RATE=1k; the header's rate
 * in force `rate`): its first window starts there. */
static void start(struct agent_tls *t, uint64_t rate, uint64_t now)
{
	memset(t, 0, sizeof *t);
	agent_cfg.rate = 1024;
	budget_map_segment(&hdr, 1024, rate);
	budget_set(10000);
	assert_int_equal(budget_poll(t, now, rate, 1024), 0);
}

/* YM_SAMPLE_RATE=1k, YM_MAX_OVERHEAD=1: 1 % of 12 ms is 120 us. */
static void the_first_windows_are_short_until_one_is_within_the_budget(void **state)
{
	(void)state;
	struct agent_tls t;
	uint64_t now = 1000 * MS;
	start(&t, 1024, now);
	/* Half its CPU time in the sampled paths: judged after
	 * BUDGET_FIRST_WINDOW_NS of wall time, not BUDGET_WINDOW_NS; the
	 * rate grows so that the next window spends 0.6 of the budget. */
	uint64_t r = window(&t, 6 * MS, now + 2 * BUDGET_FIRST_WINDOW_NS, 1024);
	assert_true(r > 1024 * 50);
	assert_int_equal(hdr.budget.adjustments, 1);
	assert_int_equal(hdr.budget.window_spent_ns, 6 * MS);
	/* Still over (the first window's time was short of its one-off
	 * costs): the next window is short too. */
	now += 2 * BUDGET_FIRST_WINDOW_NS;
	uint64_t r2 = window(&t, 1 * MS, now + 2 * BUDGET_FIRST_WINDOW_NS, r);
	assert_true(r2 > r);
	/* Within the budget (between half of it and all): unchanged, and
	 * from now on windows are BUDGET_WINDOW_NS long. */
	now += 2 * BUDGET_FIRST_WINDOW_NS;
	assert_int_equal(window(&t, 100000, now + 2 * BUDGET_FIRST_WINDOW_NS, r2), 0);
	now += 2 * BUDGET_FIRST_WINDOW_NS;
	assert_int_equal(window(&t, 6 * MS, now + 2 * BUDGET_FIRST_WINDOW_NS, r2), 0);
	assert_int_equal(hdr.budget.adjustments, 2);
	assert_true(budget_poll(&t, now + BUDGET_WINDOW_NS, r2, 1024) > r2);
	assert_int_equal(hdr.budget.adjustments, 3);

	/* A new budget (ymtop --max-overhead) starts with a short window. */
	budget_set(20000);
	now += 2 * BUDGET_WINDOW_NS;
	assert_int_equal(budget_poll(&t, now, 1024, 1024), 0);
	assert_true(window(&t, 6 * MS, now + 2 * BUDGET_FIRST_WINDOW_NS, 1024) > 1024);
	budget_set(0);
}

/* A short window still over the budget, but wanting the rate at most
 * BUDGET_SHORT_STEP times longer, takes that step and hands over to long
 * windows: the last steps are judged on a long window's count. */
static void the_last_steps_are_judged_on_long_windows(void **state)
{
	(void)state;
	struct agent_tls t;
	uint64_t now = 50000 * MS;
	start(&t, 1024, now);
	/* 1 % of 12 ms is 120 us; 144 us spent wants 144 / (0.6 * 120) = 2x. */
	now += 2 * BUDGET_FIRST_WINDOW_NS;
	uint64_t r = window(&t, 144000, now, 1 << 20);
	assert_true(r > (1u << 20) && r <= (uint64_t)BUDGET_SHORT_STEP << 20);
	/* So the next window is a long one: not judged after a short
	 * window's wall time, judged after a long one's. */
	now += 2 * BUDGET_FIRST_WINDOW_NS;
	assert_int_equal(window(&t, 6 * MS, now, r), 0);
	assert_true(budget_poll(&t, now - 2 * BUDGET_FIRST_WINDOW_NS +
				BUDGET_WINDOW_NS, r, 1024) > r);
	budget_set(0);
}

/* Under half the budget the rate shrinks back, by 4x a window at most,
 * never below the rate asked for. */
static void under_half_the_budget_the_rate_comes_back(void **state)
{
	(void)state;
	struct agent_tls t;
	uint64_t now = 100000 * MS;
	start(&t, 1 << 20, now);
	now += BUDGET_WINDOW_NS;
	assert_int_equal(window(&t, 0, now, 1 << 20), (1 << 20) / 4);
	now += BUDGET_WINDOW_NS;
	assert_int_equal(window(&t, 0, now, 2048), 1024);
	budget_set(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_first_windows_are_short_until_one_is_within_the_budget),
		cmocka_unit_test(the_last_steps_are_judged_on_long_windows),
		cmocka_unit_test(under_half_the_budget_the_rate_comes_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
