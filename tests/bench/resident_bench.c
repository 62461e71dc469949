/*
 * resident_bench: the cost of a refresh's resident figures (tui/resident.c)
 * with N live samples of S bytes each, read from this
 * process's own /proc/self/pagemap.  Prints the median (and its CPU time,
 * user and system, the cost on a loaded machine) and worst time of
 * resident_update over R refreshes, and the resident share of the written
 * blocks (every other one, at most 256 MiB of them) and of the others (1
 * and 0).
 *
 *   resident_bench [N [S [R]]]     default 65536 live samples of 64 KiB, 20
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "resident.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* This thread's CPU time, user and system: the cost whatever else the
 * machine runs. */
static double cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 65536;
	uint64_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 65536;
	int reps = argc > 3 ? atoi(argv[3]) : 20;
	if (n < 2 || size == 0 || reps < 1)
		return 2;
	/* One reservation, blocks side by side as an allocator lays them;
	 * the even ones written whole. */
	char *base = mmap(NULL, n * size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct model m;
	memset(&m, 0, sizeof m);
	m.alive = 1;
	m.snap.pid = getpid();
	m.nstacks = 2;
	m.stacks = calloc(2, sizeof *m.stacks);
	m.snap.live = calloc(n, sizeof *m.snap.live);
	m.snap.nlive = n;
	for (uint32_t i = 0; i < n; i++) {
		struct ym_live *e = &m.snap.live[i];
		e->addr = (uint64_t)(uintptr_t)(base + (uint64_t)i * size);
		e->size = size;
		e->weight_bytes = size;
		e->stack = i & 1;
		/* Written whole, up to 256 MiB: the machine's memory is
		 * not the benchmark's. */
		if (!(i & 1) && (uint64_t)(i / 2) * size < (256ULL << 20))
			memset(base + (uint64_t)i * size, 1, size);
		else
			e->stack = 1;
	}
	for (uint32_t i = 0; i < n; i++)
		m.stacks[m.snap.live[i].stack].retained_bytes += (double)size;
	struct resident r;
	resident_init(&r);
	double *t = calloc((size_t)reps, sizeof *t), *c = calloc((size_t)reps, sizeof *c);
	for (int k = 0; k < reps; k++) {
		double t0 = now(), c0 = cpu();
		resident_update(&r, &m);
		t[k] = now() - t0;
		c[k] = cpu() - c0;
	}
	qsort(t, (size_t)reps, sizeof *t, cmpd);
	qsort(c, (size_t)reps, sizeof *c, cmpd);
	printf("resident_bench: %u live samples of %llu bytes: median %.1f ms (CPU %.1f ms), "
	       "worst %.1f ms a refresh; written blocks %.3f resident, others %.3f%s%s\n",
	       n, (unsigned long long)size, t[reps / 2] * 1e3, c[reps / 2] * 1e3,
	       t[reps - 1] * 1e3,
	       m.stacks[0].resident_bytes / m.stacks[0].retained_bytes,
	       m.stacks[1].resident_bytes / m.stacks[1].retained_bytes,
	       m.resident_known ? "" : "; not known: ", m.resident_why);
	resident_free(&r);
	return 0;
}
