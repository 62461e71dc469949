/*
 * heapstats_bench: what the agent's answer to a heap-statistics request
 * costs (injector/agent/heapstats.c makes the same calls) on a fragmented
 * heap: THREADS threads (each its own glibc arena) allocate MIB MiB in
 * all, blocks of 16..8192 bytes, and free every other one; then the
 * statistics call is timed 21 times (median, min, max).
 *
 *   heapstats_bench [THREADS [MIB]]
 *
 * The allocator is the process's: LD_PRELOAD=libjemalloc.so.2 or
 * libtcmalloc_minimal.so.4 for theirs (mallctl "epoch" and six stats;
 * seven MallocExtension properties), glibc's mallinfo2 otherwise.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t share;

static void *worker(void *arg)
{
	unsigned long x = (unsigned long)(uintptr_t)arg * 2654435761u + 1;
	size_t n = share / 4000 + 1, k = 0, got = 0;
	void **v = malloc(n * 2 * sizeof *v);
	while (got < share && k < n * 2) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t sz = 16 + x % 8177;
		v[k++] = malloc(sz);
		got += sz;
	}
	for (size_t i = 0; i < k; i += 2)
		free(v[i]);
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*prop_fn)(const char *, size_t *);

static mallctl_fn jm;
static prop_fn tc;
static size_t in_use;

static void take(void)
{
	if (jm) {
		uint64_t e = 1;
		size_t len = sizeof e, v, vl = sizeof v;
		unsigned na;
		size_t nl = sizeof na;
		jm("epoch", &e, &len, &e, sizeof e);
		static const char *k[] = { "stats.allocated", "stats.active",
			"stats.resident", "stats.mapped", "stats.retained" };
		for (int i = 0; i < 5; i++) {
			vl = sizeof v;
			jm(k[i], &v, &vl, NULL, 0);
			if (i == 0)
				in_use = v;
		}
		jm("arenas.narenas", &na, &nl, NULL, 0);
	} else if (tc) {
		static const char *k[] = { "generic.current_allocated_bytes",
			"tcmalloc.pageheap_unmapped_bytes", "generic.heap_size",
			"tcmalloc.pageheap_free_bytes", "tcmalloc.central_cache_free_bytes",
			"tcmalloc.transfer_cache_free_bytes", "tcmalloc.thread_cache_free_bytes" };
		size_t v;
		for (int i = 0; i < 7; i++) {
			tc(k[i], &v);
			if (i == 0)
				in_use = v;
		}
	} else {
		struct mallinfo2 mi = mallinfo2();
		in_use = mi.uordblks + mi.hblkhd;
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
	if (threads < 1 || threads > 256)
		return 2;
	share = (mib << 20) / (size_t)threads;
	pthread_t t[256];
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	jm = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
	tc = (prop_fn)dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
	double d[21];
	for (int i = 0; i < 21; i++) {
		double t0 = now();
		take();
		d[i] = now() - t0;
	}
	qsort(d, 21, sizeof d[0], cmp);
	printf("%s: %d threads, %zu MiB allocated, half freed: in use %.0f MiB; "
	       "statistics call median %.1f us (min %.1f, max %.1f)\n",
	       jm ? "jemalloc" : tc ? "tcmalloc" : "glibc", threads, mib,
	       (double)in_use / 1048576.0, d[10] * 1e6, d[0] * 1e6, d[20] * 1e6);
	return 0;
}
