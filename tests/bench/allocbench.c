/*
 * allocbench: an allocation-heavy multi-threaded benchmark.
 *
 *   allocbench THREADS CALLS_PER_THREAD [MIN MAX [realloc]]
 *
 * Each thread keeps a window of 4096 live blocks and replaces a random one
 * at each step: malloc of a size uniform in [MIN, MAX] (default 16..1040)
 * and free of the block it replaces.  With "realloc", the step resizes the
 * block instead (realloc to a new size in [MIN, MAX]).  Prints the elapsed
 * seconds.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long calls;
static size_t lo = 16, hi = 1040;
static int use_realloc;

static void *worker(void *arg)
{
	unsigned long x = (unsigned long)(uintptr_t)arg * 2654435761u + 1;
	enum { WINDOW = 4096 };
	void **w = calloc(WINDOW, sizeof *w);
	for (long i = 0; i < calls; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t k = x % WINDOW;
		size_t n = lo + (x >> 20) % (hi - lo + 1);
		if (use_realloc) {
			void *q = realloc(w[k], n);
			if (q)
				w[k] = q;
		} else {
			free(w[k]);
			w[k] = malloc(n);
		}
		((char *)w[k])[0] = (char)i;
	}
	for (int k = 0; k < WINDOW; k++)
		free(w[k]);
	free(w);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: allocbench THREADS CALLS [MIN MAX]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	calls = atol(argv[2]);
	if (argc >= 5) {
		lo = (size_t)atol(argv[3]);
		hi = (size_t)atol(argv[4]);
	}
	use_realloc = argc >= 6 && !strcmp(argv[5], "realloc");
	if (n < 1 || n > 256 || calls < 1 || lo < 1 || hi < lo)
		return 2;
	pthread_t t[256];
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.4f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
