/* Injection target: 8 threads allocating as fast as they can, and the
 * main thread too (so no thread sits in a quiet system call).
 *   prints "ready" once every thread runs; each thread loops malloc, fill,
 *   check, realloc, free (thread_site) and keeps 1 in 64 blocks until it
 *   holds 256; the main thread churns between polls of stdin; on a line on
 *   stdin the threads stop; prints "checked ok" ("checked BAD" if a block
 *   was corrupt) and exits 0. */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8

static volatile int stop;
static int started;
static long bad;

__attribute__((noinline)) static unsigned char *thread_site(size_t n)
{
	return malloc(n);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
	void *kept[256];
	int nkept = 0;
	long mine = 0;
	__atomic_fetch_add(&started, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		seed = seed * 1103515245u + 12345u;
		size_t n = 16 + (seed >> 8) % 4096;
		unsigned char *p = thread_site(n);
		if (!p) {
			mine++;
			continue;
		}
		memset(p, (int)(n & 0xff), n);
		if (p[0] != (n & 0xff) || p[n - 1] != (n & 0xff))
			mine++;
		if ((seed & 63) == 0 && nkept < 256) {
			kept[nkept++] = p;
		} else {
			p = realloc(p, n + 64);
			if (!p || p[n - 1] != (n & 0xff))
				mine++;
			free(p);
		}
	}
	for (int i = 0; i < nkept; i++)
		free(kept[i]);
	__atomic_fetch_add(&bad, mine, __ATOMIC_RELAXED);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)) != 0)
			return 9;
	while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < THREADS)
		;
	printf("ready\n");
	fflush(stdout);
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	while (poll(&pfd, 1, 0) == 0) {
		for (int i = 0; i < 1000; i++) {
			unsigned char *p = thread_site(64 + (size_t)i);
			if (!p)
				continue;
			p[0] = 1;
			free(p);
		}
	}
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	printf("checked %s\n", bad ? "BAD" : "ok");
	return bad ? 1 : 0;
}
