/*
 * samplecost: the cost of one sample (unwinding DEPTH frames, the stack
 * lookup, the live-table insert, and the later free of the sampled block)
 * measured by difference: the same run under the agent with
 * YM_SAMPLE_RATE=RATE and with YM_SAMPLE_RATE=1024g (no samples), divided
 * by the number of samples the first run expects (tests/bench/samplecost.sh).
 *
 *   samplecost DEPTH CALLS RATE
 *
 * One thread recurses DEPTH noinline frames deep, then keeps a window of
 * 4096 live blocks and replaces a random one at each step (free, then
 * malloc of 16..1040 bytes), as allocbench does.  Prints the elapsed
 * seconds and the expected number of samples, sum over the blocks of
 * 1 - exp(-u/RATE) with u the block's usable size.
 */
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long calls;
static double rate, expect;
static volatile int sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void loop(void)
{
	enum { WINDOW = 4096 };
	static void *w[WINDOW];
	unsigned long x = 88172645463325252ul;
	for (long i = 0; i < calls; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t k = x % WINDOW;
		size_t n = 16 + (x >> 20) % 1025;
		free(w[k]);
		w[k] = malloc(n);
		expect += -expm1(-(double)malloc_usable_size(w[k]) / rate);
	}
	for (size_t k = 0; k < WINDOW; k++)
		free(w[k]);
}

__attribute__((noinline)) static void dive(int depth)
{
	if (depth > 0)
		dive(depth - 1);
	else
		loop();
	sink = depth;   /* not a tail call: each level keeps its frame */
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int depth = atoi(argv[1]);
	calls = atol(argv[2]);
	rate = atof(argv[3]);
	if (depth < 0 || depth > 200 || calls <= 0 || rate < 1)
		return 2;
	double t0 = now();
	/* loop, main and libc's three start frames: 5 more than dive's */
	dive(depth > 6 ? depth - 6 : 0);
	printf("%.4f %.0f\n", now() - t0, expect);
	return 0;
}
