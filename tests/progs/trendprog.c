/*
 * trendprog: three sites whose retained bytes move differently, for the
 * trend verdicts (tests/integration/test_trend.py, tests/bench/trend.sh).
 *
 *   trendprog LEAK_KIB_S CACHE_MIB FILL_S CHURN_MIB [SECONDS [SITES]]
 *
 *   leak_site   keeps LEAK_KIB_S KiB a second, paced by the clock (so its
 *               rate is exact however the machine is loaded), in 16 KiB
 *               blocks: steady growth
 *   cache_site  fills a cache of CACHE_MIB MiB of 32 KiB entries over
 *               FILL_S seconds, then replaces an entry at a time at the
 *               same size: grows, then levels off
 *   churn_site  keeps about CHURN_MIB MiB in 1-64 KiB blocks, replacing
 *               one at random all the time: flat
 *
 *   held_site   SITES stacks (recursion depths 1 to SITES) holding 4 MiB
 *               each from the start, never touched again: more stacks
 *               larger than a small leak than the trend keeps largest
 *
 * Prints "ready" once running; runs SECONDS (0, the default: until
 * killed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define LEAK_BLOCK  (16 * 1024)
#define CACHE_BLOCK (32 * 1024)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *volatile sink;

static NOINLINE void *leak_site(void)
{
	void *p = malloc(LEAK_BLOCK);
	memset(p, 1, 64);
	return p;
}

static NOINLINE void *cache_site(void)
{
	void *p = malloc(CACHE_BLOCK);
	memset(p, 2, 64);
	return p;
}

/* depth calls deep, then 4 MiB in 64 KiB blocks: a stack a depth. */
static NOINLINE void held_site(int depth)
{
	if (depth > 1) {
		held_site(depth - 1);
		__asm__ volatile("" ::: "memory");   /* keep the frame */
		return;
	}
	for (int i = 0; i < 64; i++)
		sink = malloc(64 * 1024);
}

static NOINLINE void *churn_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 3, 64);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: trendprog LEAK_KIB_S CACHE_MIB FILL_S CHURN_MIB [SECONDS]\n");
		return 2;
	}
	double leak_rate = atof(argv[1]) * 1024;
	size_t ncache = (size_t)atof(argv[2]) * 1024 * 1024 / CACHE_BLOCK;
	double fill_s = atof(argv[3]);
	double churn_bytes = atof(argv[4]) * 1024 * 1024;
	double run_s = argc > 5 ? atof(argv[5]) : 0;
	int sites = argc > 6 ? atoi(argv[6]) : 0;
	for (int d = 1; d <= sites && d <= 1000; d++)
		held_site(d);
	void **cache = calloc(ncache ? ncache : 1, sizeof *cache);
	size_t nchurn = (size_t)(churn_bytes / (33 * 1024)) + 1;
	void **churn = calloc(nchurn, sizeof *churn);
	uint64_t rng = 88172645463325252ull;
	size_t cached = 0;
	double leaked = 0, t0 = now_s();
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		double t = now_s() - t0;
		if (run_s > 0 && t >= run_s)
			break;
		while (leaked < leak_rate * t) {
			sink = leak_site();
			leaked += LEAK_BLOCK;
		}
		/* One call site for filling and replacing: one stack. */
		size_t want = fill_s > 0 && t < fill_s ? (size_t)(ncache * t / fill_s) : ncache;
		for (size_t k = 0; ncache && (cached < want || k < 1); k++) {
			size_t i = cached;
			if (cached < want) {
				cached++;
			} else {
				rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
				i = rng % ncache;
			}
			free(cache[i]);
			cache[i] = cache_site();
		}
		for (int k = 0; k < 4; k++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			size_t i = rng % nchurn;
			free(churn[i]);
			churn[i] = churn_site(1024 + (size_t)(rng >> 40) % (64 * 1024));
		}
		struct timespec d = { 0, 2000000 };
		nanosleep(&d, NULL);
	}
	return 0;
}
