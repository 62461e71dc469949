/* The agent's clock (injector/agent/clock.c): CLOCK_MONOTONIC from the
 * time-stamp counter where the kernel's clocksource is "tsc", from
 * clock_gettime otherwise; agrees with clock_gettime either way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/base.h"
#include "agent/clock.h"

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* For `ms` milliseconds: every agent_now_ns lies between the
 * clock_gettime before and after it (give or take `slack` ns), and a
 * thread's readings go back by at most `slack` (a re-anchor). */
static void agrees(int ms, uint64_t slack)
{
	uint64_t end = mono() + (uint64_t)ms * 1000000ULL, last = 0;
	uint64_t worst = 0, back = 0;
	while (1) {
		uint64_t a = mono(), v = agent_now_ns(), b = mono();
		if (v + slack < a || v > b + slack) {
			uint64_t off = v < a ? a - v : v - b;
			worst = off > worst ? off : worst;
		}
		if (last > v && last - v > back)
			back = last - v;
		last = v;
		if (b > end)
			break;
	}
	if (worst || back > slack)
		fail_msg("off by %llu ns, back by %llu ns",
			 (unsigned long long)worst, (unsigned long long)back);
}

static const char *fake(const char *text)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/ymtop-test-clock-%d", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int machine_tsc(void)
{
	char buf[16] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
			"current_clocksource", "r");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	return strcmp(buf, "tsc\n") == 0;
}

/* The machine's own clocksource decides, within ~100 ms of the first
 * reads; the readings agree with clock_gettime to 50 us throughout
 * (anchors live 50 ms: several re-anchors in 300 ms). */
static void follows_the_kernel(void **state)
{
	(void)state;
	agent_clock_test_source(NULL);
	assert_int_equal(agent_clock_tsc_state(), 0);
	agrees(300, 50000);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), machine_tsc() ? 1 : -1);
#endif
}

/* A kernel that keeps time otherwise: the counter is never used, and
 * every reading is clock_gettime's. */
static void other_clocksource_is_clock_gettime(void **state)
{
	(void)state;
	const char *p = fake("kvm-clock\n");
	agent_clock_test_source(p);
	agrees(150, 0);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), -1);
#endif
	unlink(p);
	agent_clock_test_source(NULL);
}

/* No such file (a container without /sys): the same. */
static void unknown_clocksource_is_clock_gettime(void **state)
{
	(void)state;
	agent_clock_test_source("/nonexistent/ymtop-clocksource");
	agrees(150, 0);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), -1);
#endif
	agent_clock_test_source(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(follows_the_kernel),
		cmocka_unit_test(other_clocksource_is_clock_gettime),
		cmocka_unit_test(unknown_clocksource_is_clock_gettime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
