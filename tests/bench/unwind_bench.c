/*
 * unwind_bench: the agent's unwinder (injector/agent/unwind.c) against
 * libunwind's unw_backtrace (per-thread cache, as the agent used it), per
 * call at stack depths 8, 16 and 32 (frames returned, main and libc's
 * start included), rules cached; and ours with its cache flushed before
 * every call (what a first sample through new return addresses costs).
 * Each round times every method once in turn, so that the machine's load
 * falls on all alike; the figures are medians over RUNS rounds of CALLS
 * calls (CALLS / 20 flushed).
 *
 *   unwind_bench [RUNS] [CALLS]        (make bench runs it)
 */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "agent/compat.h"
#include "agent/unwind.h"

enum { OURS, OURS_COLD, LIBUNWIND, METHODS };
static const char *const method_name[METHODS] = {
	"ymtop unwind", "ymtop unwind, cache flushed", "unw_backtrace",
};

static int runs = 15, calls = 20000;
static int got;
static double result_ns[METHODS][64];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* At the bottom of the recursion. */
__attribute__((noinline)) static void measure(void)
{
	uint64_t f[128];
	void *v[128];
	got = unwind_backtrace(f, 128);
	for (int r = 0; r < runs; r++) {
		for (int m = 0; m < METHODS; m++) {
			int k = m == OURS_COLD ? calls / 20 : calls, n;
			uint64_t t0 = now_ns();
			for (int i = 0; i < k; i++) {
				if (m == LIBUNWIND) {
					n = unw_backtrace(v, 128);
				} else {
					if (m == OURS_COLD)
						unwind_flush();
					n = unwind_backtrace(f, 128);
				}
				__asm__ volatile("" :: "r"(n), "r"(f), "r"(v) : "memory");
			}
			result_ns[m][r] = (double)(now_ns() - t0) / k;
		}
	}
}

__attribute__((noinline)) static int descend(int levels)
{
	if (levels <= 0)
		measure();
	else
		descend(levels - 1);
	__asm__ volatile("" ::: "memory");
	return 0;
}

/* _dl_find_object for the unwinder, as the agent's constructor finds it. */
static void *lookup(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

int main(int argc, char **argv)
{
	agent_compat_init(lookup);
	if (argc > 1)
		runs = atoi(argv[1]);
	if (argc > 2)
		calls = atoi(argv[2]);
	if (runs < 1 || runs > 64 || calls < 20) {
		fprintf(stderr, "usage: unwind_bench [RUNS<=64] [CALLS>=20]\n");
		return 2;
	}
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	int save = runs;
	runs = 1;
	descend(0);   /* the frames below descend(0), measure's included */
	runs = save;
	int base = got;
	printf("unwind_bench: medians of %d rounds, %d calls each (flushed: %d)\n",
	       runs, calls, calls / 20);
	printf("%-30s %6s %10s %10s\n", "method", "depth", "ns/call", "ns/frame");
	static const int depths[] = { 8, 16, 32 };
	for (unsigned d = 0; d < sizeof depths / sizeof *depths; d++) {
		descend(depths[d] - base);
		for (int m = 0; m < METHODS; m++) {
			qsort(result_ns[m], (size_t)runs, sizeof(double), cmp_double);
			double med = result_ns[m][runs / 2];
			printf("%-30s %6d %10.1f %10.2f\n", method_name[m], got, med,
			       med / got);
		}
	}
	return 0;
}
