/*
 * jeapi: jemalloc's own API, linked against libjemalloc (libjemalloc-dev),
 * for tests/integration/test_jemalloc_api.py.  Prints "ready", then reads
 * commands on stdin, each answered with "ready" (EOF exits 0):
 *
 *   alloc   mallocx_site: 400 blocks of 64 KiB by mallocx (64-byte aligned)
 *           rallocx_site: 400 blocks of 4 KiB grown to 64 KiB by rallocx
 *           (in 4 KiB steps), then xallocx asked for 64 KiB more in place
 *           churn_site:   2000 blocks of 32 KiB, each sdallocx'ed at once
 *           all held but churn_site's: 50 MiB in all
 *   free    sdallocx for mallocx_site's blocks, dallocx for rallocx_site's
 *   threads handed_site: 24 x 100 blocks of 4 KiB by mallocx in this
 *           thread; then 24 threads, all alive together, each dallocx'es
 *           its 100 of them and churns 100 blocks of 4 KiB of its own
 *           (thread_site: mallocx, sdallocx): 4800 mallocx, 4800 frees
 */
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define N 400
#define KiB 1024

static void *a[N], *b[N];

static NOINLINE void mallocx_site(void)
{
	for (int i = 0; i < N; i++) {
		a[i] = mallocx(64 * KiB, MALLOCX_ALIGN(64));
		memset(a[i], 1, 64);
	}
}

static NOINLINE void rallocx_site(void)
{
	for (int i = 0; i < N; i++)
		b[i] = mallocx(4 * KiB, 0);
	for (size_t s = 8 * KiB; s <= 64 * KiB; s += 4 * KiB)
		for (int i = 0; i < N; i++)
			b[i] = rallocx(b[i], s, 0);
	for (int i = 0; i < N; i++)
		(void)xallocx(b[i], 64 * KiB, 0, 0);   /* no growth: same size */
}

static NOINLINE void churn_site(void)
{
	for (int i = 0; i < 2000; i++) {
		void *p = mallocx(32 * KiB, 0);
		memset(p, 1, 64);
		sdallocx(p, 32 * KiB, 0);
	}
}

#define T 24
#define PER 100
static void *handed[T][PER];
static pthread_barrier_t together;

static NOINLINE void handed_site(void)
{
	for (int i = 0; i < T; i++)
		for (int k = 0; k < PER; k++)
			handed[i][k] = mallocx(4 * KiB, 0);
}

static NOINLINE void thread_site(void)
{
	for (int k = 0; k < PER; k++) {
		void *p = mallocx(4 * KiB, 0);
		memset(p, 1, 64);
		sdallocx(p, 4 * KiB, 0);
	}
}

static void *worker(void *arg)
{
	void **mine = arg;
	pthread_barrier_wait(&together);   /* every thread has started */
	for (int k = 0; k < PER; k++)
		dallocx(mine[k], 0);
	thread_site();
	pthread_barrier_wait(&together);   /* none has exited yet */
	return NULL;
}

static void threads(void)
{
	pthread_t th[T];
	handed_site();
	pthread_barrier_init(&together, NULL, T);
	for (int i = 0; i < T; i++)
		pthread_create(&th[i], NULL, worker, handed[i]);
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&together);
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "alloc", 5)) {
			mallocx_site();
			rallocx_site();
			churn_site();
		} else if (!strncmp(line, "threads", 7)) {
			threads();
		} else if (!strncmp(line, "free", 4)) {
			for (int i = 0; i < N; i++) {
				sdallocx(a[i], 64 * KiB, MALLOCX_ALIGN(64));
				dallocx(b[i], 0);
			}
		}
		printf("ready\n");
	}
	return 0;
}
