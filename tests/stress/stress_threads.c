/*
 * stress_threads: threads created and exiting by thousands while they
 * allocate.  Output depends only on the arguments, never on addresses or
 * scheduling, so a run under the agent must print exactly the same.
 *
 *   stress_threads waves W N   W waves of N joinable threads; each thread
 *                              allocates, reallocs, frees most and hands the
 *                              rest to main, which frees them (cross-thread
 *                              free); thread-specific data destructors free
 *                              and allocate after the thread's own code.
 *   stress_threads detached N  N detached threads in flight at most 64 at a
 *                              time, exiting while others are created.
 *   stress_threads storm       prints "ready", then runs waves of threads
 *                              until standard input reaches end of file
 *                              (a reader attaches meanwhile), prints "done".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEEP 16

static pthread_key_t key;

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* TSD destructor: runs at thread exit, after the thread function returned
 * (and, under the agent, around the agent's own thread-exit work). */
static void tsd_dtor(void *v)
{
	char *again = malloc(100);
	if (again) {
		memset(again, 1, 100);
		free(again);
	}
	free(v);
}

struct work {
	uint32_t seed;
	uint64_t sum;
	void *keep[KEEP];
};

static void *worker(void *arg)
{
	struct work *w = arg;
	uint32_t s = w->seed;
	void *blk[64];
	for (int i = 0; i < 64; i++) {
		size_t n = 1 + lcg(&s) % 4096;
		unsigned char *p = malloc(n);
		if (!p)
			abort();
		memset(p, (int)(n & 0xff), n);
		w->sum += p[n - 1] + n;
		if (i % 4 == 0) {
			p = realloc(p, n * 2);
			if (!p)
				abort();
		}
		blk[i] = p;
	}
	for (int i = 0; i < 64; i++) {
		if (i < KEEP)
			w->keep[i] = blk[i];
		else
			free(blk[i]);
	}
	void *tsd = calloc(1, 256);
	pthread_setspecific(key, tsd);
	return w;
}

static uint64_t waves(int nw, int n)
{
	uint64_t total = 0;
	pthread_t *t = calloc((size_t)n, sizeof *t);
	struct work *w = calloc((size_t)n, sizeof *w);
	if (!t || !w)
		abort();
	for (int v = 0; v < nw; v++) {
		int started = 0;
		for (int i = 0; i < n; i++) {
			memset(&w[i], 0, sizeof w[i]);
			w[i].seed = (uint32_t)(v * 100003 + i);
			if (pthread_create(&t[i], NULL, worker, &w[i]) != 0)
				break;
			started++;
		}
		for (int i = 0; i < started; i++) {
			pthread_join(t[i], NULL);
			total += w[i].sum;
			for (int k = 0; k < KEEP; k++)
				free(w[i].keep[k]);
		}
		if (started != n) {
			printf("pthread_create failed in wave %d\n", v);
			exit(3);
		}
	}
	free(t);
	free(w);
	return total;
}

static int in_flight;
static uint64_t detached_sum;

static void *dworker(void *arg)
{
	struct work *w = arg;
	worker(w);
	for (int k = 0; k < KEEP; k++)
		free(w->keep[k]);
	__atomic_add_fetch(&detached_sum, w->sum, __ATOMIC_RELAXED);
	free(w);
	__atomic_sub_fetch(&in_flight, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void detached(int n)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	struct timespec ts = { 0, 100000 };
	for (int i = 0; i < n; i++) {
		while (__atomic_load_n(&in_flight, __ATOMIC_ACQUIRE) >= 64)
			nanosleep(&ts, NULL);
		struct work *w = calloc(1, sizeof *w);
		if (!w)
			abort();
		w->seed = (uint32_t)i;
		__atomic_add_fetch(&in_flight, 1, __ATOMIC_RELEASE);
		pthread_t t;
		if (pthread_create(&t, &a, dworker, w) != 0) {
			printf("pthread_create failed at %d\n", i);
			exit(3);
		}
	}
	while (__atomic_load_n(&in_flight, __ATOMIC_ACQUIRE) > 0)
		nanosleep(&ts, NULL);
	pthread_attr_destroy(&a);
}

static int stop;

static void *stdin_watch(void *arg)
{
	(void)arg;
	char buf[64];
	while (read(0, buf, sizeof buf) > 0)
		;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

int main(int argc, char **argv)
{
	if (pthread_key_create(&key, tsd_dtor) != 0)
		return 3;
	if (argc == 4 && !strcmp(argv[1], "waves")) {
		int nw = atoi(argv[2]), n = atoi(argv[3]);
		uint64_t sum = waves(nw, n);
		printf("waves %d x %d threads: sum %llu\n", nw, n,
		       (unsigned long long)sum);
	} else if (argc == 3 && !strcmp(argv[1], "detached")) {
		int n = atoi(argv[2]);
		detached(n);
		printf("detached %d threads: sum %llu\n", n,
		       (unsigned long long)detached_sum);
	} else if (argc == 2 && !strcmp(argv[1], "storm")) {
		pthread_t t;
		if (pthread_create(&t, NULL, stdin_watch, NULL) != 0)
			return 3;
		printf("ready\n");
		fflush(stdout);
		int rounds = 0;
		while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) || rounds < 1) {
			waves(1, 16);
			rounds++;
		}
		pthread_join(t, NULL);
		printf("done\n");
	} else {
		fprintf(stderr, "usage: stress_threads waves W N | detached N | storm\n");
		return 2;
	}
	return 0;
}
