/* Detach target (tests/integration/test_detach.py, tests/bench/detach.sh):
 * THREADS threads (argv[1], default 1) allocating and freeing without
 * pause.  Each thread keeps a ring of 512 blocks (churn_site) and frees
 * the oldest before each new allocation, so blocks allocated while the
 * agent is attached (some of them sampled) are freed after a detach;
 * every block is filled and checked before its free.
 *   prints "ready" once every thread runs;
 *   a line "rate" on stdin: prints "rate N" (malloc/free pairs a second
 *     of CPU time over the next 0.5 s of the process's time: the
 *     benchmark's own throughput);
 *   a line "fork": forks a child that waits in pause() until killed and
 *     prints "child PID";
 *   a line "quit" (or end of input): the threads stop, free their rings,
 *     print "checked ok" ("checked BAD" when a block was corrupt) and the
 *     process exits 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 512
#define MAX_THREADS 64

static volatile int stop;
static int started;
static long bad;
static uint64_t done[MAX_THREADS * 8];   /* a counter a thread, own line */

__attribute__((noinline)) static unsigned char *churn_site(size_t n)
{
	return malloc(n);
}

static void *worker(void *arg)
{
	long id = (long)(intptr_t)arg;
	unsigned seed = (unsigned)id * 2654435761u + 1;
	unsigned char *ring[RING] = { 0 };
	size_t size[RING] = { 0 };
	__atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST);
	for (uint64_t i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		unsigned k = (unsigned)(i % RING);
		if (ring[k]) {
			if (ring[k][0] != (unsigned char)size[k] ||
			    ring[k][size[k] - 1] != (unsigned char)k)
				__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
			free(ring[k]);
		}
		seed = seed * 1103515245u + 12345u;
		size_t n = 16 + (seed >> 16) % 1024;
		ring[k] = churn_site(n);
		if (!ring[k])
			continue;
		size[k] = n;
		ring[k][0] = (unsigned char)n;
		ring[k][n - 1] = (unsigned char)k;
		__atomic_store_n(&done[id * 8], i + 1, __ATOMIC_RELAXED);
	}
	for (unsigned k = 0; k < RING; k++)
		free(ring[k]);
	return NULL;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t total(int n)
{
	uint64_t t = 0;
	for (int i = 0; i < n; i++)
		t += __atomic_load_n(&done[i * 8], __ATOMIC_RELAXED);
	return t;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	if (n < 1 || n > MAX_THREADS)
		return 2;
	pthread_t th[MAX_THREADS];
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < n)
		;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4)) {
		if (!strncmp(line, "fork", 4)) {
			/* A child with what the process has (its agent too),
			 * waiting in pause() until killed. */
			pid_t c = fork();
			if (c == 0) {
				close(0);   /* the parent's pipes end with it */
				close(1);
				close(2);
				for (;;)
					pause();
			}
			printf("child %ld\n", (long)c);
			fflush(stdout);
			continue;
		}
		if (strncmp(line, "rate", 4))
			continue;
		/* The main thread sleeps meanwhile: CPU time is the workers'. */
		double c0 = cpu_s();
		uint64_t d0 = total(n);
		struct timespec ts = { 0, 20000000 };
		while (cpu_s() - c0 < 0.5)
			nanosleep(&ts, NULL);
		double c1 = cpu_s();
		uint64_t d1 = total(n);
		printf("rate %.0f\n", (double)(d1 - d0) / (c1 - c0));
		fflush(stdout);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	printf("checked %s\n", bad ? "BAD" : "ok");
	return 0;
}
