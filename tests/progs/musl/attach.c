/* A program built by musl-gcc and started without the agent, for ymtop -p
 * (tests/integration/test_musl.py).
 *
 * attach: prints "ready" and waits for a line; at "go" count_site makes
 * 5000 blocks of 48 bytes and frees them, hold_site keeps 1000 blocks of
 * 4096 bytes and four threads keep 256 blocks of 1024 bytes each at
 * thread_site; then "done", and it exits 0 at the next line.
 *
 * attach storm: four threads (and, with "storm all", the main thread too)
 * allocate and free blocks of 16 to 4111 bytes at storm_site without
 * pause, each block filled with its own byte and checked before its free;
 * "ready" once every thread has started.  At a line on stdin (the main
 * thread polls for it between rounds when it storms) every thread stops;
 * then 100 blocks of 8192 bytes at after_site, kept, and "storm ok" (or
 * "corrupt" and exit 3 when a block changed); it exits 0 at the next
 * line. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELD 1000
#define THREADS 4
#define PER_THREAD 256
#define RING 64

static void *held[HELD];
static void *thread_held[THREADS][PER_THREAD];
static void *after_held[100];
static volatile int stop;
static volatile int corrupt;
static volatile int started;

/* The optimizer may drop an allocation whose pointer goes nowhere. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

__attribute__((noinline)) static void count_site(void)
{
	for (int i = 0; i < 5000; i++) {
		void *p = malloc(48);
		KEEP(p);
		free(p);
	}
}

__attribute__((noinline)) static void hold_site(void)
{
	for (int i = 0; i < HELD; i++) {
		held[i] = malloc(4096);
		KEEP(held[i]);
	}
}

__attribute__((noinline)) static void *thread_site(void *arg)
{
	void **mine = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		mine[i] = malloc(1024);
		KEEP(mine[i]);
	}
	return NULL;
}

/* One round: replace one block of the ring, checking the old one. */
__attribute__((noinline)) static void storm_site(unsigned char **ring,
						 size_t *len, unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	unsigned i = (*seed >> 8) % RING;
	if (ring[i]) {
		for (size_t k = 0; k < len[i]; k++)
			if (ring[i][k] != (unsigned char)i)
				corrupt = 1;
		free(ring[i]);
	}
	len[i] = 16 + (*seed >> 16) % 4096;
	ring[i] = malloc(len[i]);
	if (ring[i])
		memset(ring[i], (int)i, len[i]);
	else
		corrupt = 1;
}

static void storm(unsigned seed, int poll_stdin)
{
	unsigned char *ring[RING] = { 0 };
	size_t len[RING] = { 0 };
	for (unsigned long n = 1; !stop; n++) {
		storm_site(ring, len, &seed);
		if (poll_stdin && n % 1024 == 0) {
			struct pollfd p = { .fd = 0, .events = POLLIN };
			if (poll(&p, 1, 0) == 1)
				stop = 1;
		}
	}
	for (int i = 0; i < RING; i++)
		free(ring[i]);
}

static void *storm_thread(void *arg)
{
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	storm((unsigned)(size_t)arg, 0);
	return NULL;
}

__attribute__((noinline)) static void after_site(void)
{
	for (int i = 0; i < 100; i++) {
		after_held[i] = malloc(8192);
		KEEP(after_held[i]);
	}
}

static int storm_main(int all)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, storm_thread, (void *)(size_t)(i + 1)))
			return 2;
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < THREADS)
		sched_yield();
	puts("ready");
	fflush(stdout);
	char line[64];
	if (all)
		storm(99, 1);
	if (fgets(line, sizeof line, stdin) == NULL && !all)
		return 4;
	stop = 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	after_site();
	puts(corrupt ? "corrupt" : "storm ok");
	fflush(stdout);
	if (corrupt)
		return 3;
	return fgets(line, sizeof line, stdin) ? 0 : 5;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "storm"))
		return storm_main(argc > 2 && !strcmp(argv[2], "all"));
	char line[64];
	puts("ready");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 4;
	count_site();
	hold_site();
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_site, thread_held[i]))
			return 2;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	puts("done");
	fflush(stdout);
	return fgets(line, sizeof line, stdin) ? 0 : 5;
}
