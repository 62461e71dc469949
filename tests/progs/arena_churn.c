/*
 * arena_churn: the race behind heapstats.c's arena count.  One thread maps
 * and unmaps 2000 anonymous pages at 64 MiB-aligned addresses (the shape
 * of glibc's heaps of other arenas, which heap_trim unmaps) while main
 * allocates, so that the agent's reading of those pages, when a reader
 * asks for the allocator's statistics, meets pages that are gone.
 *
 *   arena_churn SECONDS    prints "ready", runs, prints "survived"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define N    2000
#define BASE 0x200000000000UL
#define AL   (64UL << 20)

static void *churn(void *arg)
{
	(void)arg;
	for (;;)
		for (unsigned long i = 0; i < N; i++) {
			void *at = (void *)(BASE + i * AL);
			munmap(at, 4096);
			mmap(at, 4096, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	for (unsigned long i = 0; i < N; i++)
		mmap((void *)(BASE + i * AL), 4096, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	pthread_t t;
	pthread_create(&t, NULL, churn, NULL);
	printf("ready\n");
	fflush(stdout);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 1000; i++) {
			void *volatile q = malloc(64);
			free(q);
		}
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
	printf("survived\n");
	return 0;
}
