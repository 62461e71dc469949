/*
 * allocs: blocks of known sizes held through every entry point of the
 * malloc family, for the estimator checks under each allocator
 * (tests/integration/test_allocators.py).  Every site is its own noinline
 * function, so each has a stack of its own.
 *
 *   allocs [STEP...]   runs the steps in order, prints "ready", then reads
 *                      commands on stdin: "free" frees every block held so
 *                      far and prints "ready" again; "tick" makes one
 *                      malloc(16) and frees it (a quiet process's one
 *                      call) and prints "ready"; EOF exits 0.
 *
 * Steps (N blocks each, sizes in bytes, all held until "free"):
 *   grow:N:TO:STEP      realloc(NULL, STEP), then each block grown by STEP
 *                       up to TO, one step for every block in turn
 *                       (grow_site): moves as well as in-place growth
 *   growseq:N:TO:STEP   the same, one block after the other (growseq_site)
 *   shrink:N:FROM:TO:STEP  malloc(FROM), then shrunk by STEP down to TO,
 *                       one step for every block in turn (shrink_site)
 *   malloc:N:S          malloc(S)                               (malloc_site)
 *   calloc:N:S          calloc(1, S)                            (calloc_site)
 *   aligned:N:S         posix_memalign 64, aligned_alloc 4096, memalign 256
 *                       and valloc, N each (aligned_site); S a multiple of
 *                       4096
 *   array:N:S           reallocarray(NULL, S/16, 8), then reallocarray(p,
 *                       S/16, 16), then one whose size overflows (fails,
 *                       p kept): S bytes each                   (array_site)
 *   zero:N:S            malloc(S), then realloc(p, 0): nothing held (glibc,
 *                       jemalloc, tcmalloc free p; mimalloc gives a 0-byte
 *                       block, freed by "free")              (zero_site)
 *   fail:N:S            malloc(S), then a realloc(p, 1 << 62) that fails:
 *                       S bytes held each                         (fail_site)
 *   pvalloc:N:S         pvalloc(S), S a multiple of 4096   (pvalloc_site)
 *   libc:N:S            strdup of an S-byte string (S - 1 characters),
 *                       asprintf of S - 1 characters, and getline of an
 *                       (S - 1)-character line (libc mallocs and grows the
 *                       buffer, and the step prints "getline CAP", its
 *                       size): 2 N blocks of S bytes and N of CAP made
 *                       inside libc                            (libc_site)
 *   big:N:S             malloc(S), calloc(1, S), and realloc(NULL, S / 2)
 *                       grown to S: 3 N blocks of S bytes, which the
 *                       allocator maps when S is large      (big_site)
 * Prints "fail unexpected" or "array unexpected" if a call that must fail
 * does not.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

/* Not constants, so the compiler cannot see the sizes overflow. */
static volatile size_t huge = SIZE_MAX / 2;

/* Every block held, to free on "free": static, so that the steps' own
 * allocations are all there is (totals differ by exactly a step's). */
#define MAX_HELD (1u << 20)
static void *held[MAX_HELD];
static size_t nheld;

static void **hold(size_t n)
{
	if (n > MAX_HELD - nheld)
		abort();
	void **v = held + nheld;
	nheld += n;
	return v;
}

static void *must(void *p)
{
	if (!p)
		abort();
	return p;
}

NOINLINE static void grow_site(long n, size_t to, size_t step)
{
	void **v = hold((size_t)n);
	for (size_t s = step; s <= to; s += step)
		for (long i = 0; i < n; i++) {
			v[i] = must(realloc(v[i], s));
			memset(v[i], 1, 16);
		}
}

NOINLINE static void growseq_site(long n, size_t to, size_t step)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++)
		for (size_t s = step; s <= to; s += step)
			v[i] = must(realloc(v[i], s));
}

NOINLINE static void shrink_site(long n, size_t from, size_t to, size_t step)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++)
		v[i] = must(malloc(from));
	for (size_t s = from; s > to;) {
		s = s - to > step ? s - step : to;
		for (long i = 0; i < n; i++)
			v[i] = must(realloc(v[i], s));
	}
}

NOINLINE static void malloc_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++)
		v[i] = must(malloc(s));
}

NOINLINE static void calloc_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++)
		v[i] = must(calloc(1, s));
}

NOINLINE static void aligned_site(long n, size_t s)
{
	void **v = hold(4 * (size_t)n);
	for (long i = 0; i < n; i++) {
		if (posix_memalign(&v[4 * i], 64, s) != 0)
			abort();
		v[4 * i + 1] = must(aligned_alloc(4096, s));
		v[4 * i + 2] = must(memalign(256, s));
		v[4 * i + 3] = must(valloc(s));
	}
}

NOINLINE static void array_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++) {
		v[i] = must(reallocarray(NULL, s / 16, 8));
		v[i] = must(reallocarray(v[i], s / 16, 16));
		if (reallocarray(v[i], huge, 4) != NULL)   /* overflows */
			printf("array unexpected\n");
	}
}

NOINLINE static void zero_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++) {
		void *p = must(malloc(s));
		v[i] = realloc(p, 0);   /* NULL: p was freed */
	}
}

NOINLINE static void fail_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++) {
		v[i] = must(malloc(s));
		void *q = realloc(v[i], (size_t)1 << 62);
		if (q) {
			printf("fail unexpected\n");
			v[i] = q;
		}
	}
}

NOINLINE static void pvalloc_site(long n, size_t s)
{
	void **v = hold((size_t)n);
	for (long i = 0; i < n; i++)
		v[i] = must(pvalloc(s));
}

NOINLINE static void libc_site(long n, size_t s)
{
	if (s < 2)
		abort();
	char *text = must(calloc(1, s));
	memset(text, 'x', s - 1);
	text[s - 2] = '\n';
	void **v = hold(3 * (size_t)n);
	for (long i = 0; i < n; i++) {
		v[3 * i] = must(strdup(text));
		char *a;
		if (asprintf(&a, "%s", text) != (int)(s - 1))
			abort();
		v[3 * i + 1] = a;
		FILE *f = must(fmemopen(text, s - 1, "r"));
		char *line = NULL;
		size_t cap = 0;
		if (getline(&line, &cap, f) != (ssize_t)(s - 1))
			abort();
		fclose(f);
		v[3 * i + 2] = line;
		if (i == 0)
			printf("getline %zu\n", cap);
	}
	free(text);
}

NOINLINE static void big_site(long n, size_t s)
{
	void **v = hold(3 * (size_t)n);
	for (long i = 0; i < n; i++) {
		v[3 * i] = must(malloc(s));
		v[3 * i + 1] = must(calloc(1, s));
		v[3 * i + 2] = must(realloc(NULL, s / 2));
		v[3 * i + 2] = must(realloc(v[3 * i + 2], s));
	}
}

static void free_all(void)
{
	for (size_t i = 0; i < nheld; i++) {
		free(held[i]);
		held[i] = NULL;
	}
	nheld = 0;
}

static int run_steps(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		long n;
		size_t x, y, z;
		if (sscanf(a, "grow:%ld:%zu:%zu", &n, &x, &y) == 3 && y)
			grow_site(n, x, y);
		else if (sscanf(a, "growseq:%ld:%zu:%zu", &n, &x, &y) == 3 && y)
			growseq_site(n, x, y);
		else if (sscanf(a, "shrink:%ld:%zu:%zu:%zu", &n, &x, &y, &z) == 4 && z)
			shrink_site(n, x, y, z);
		else if (sscanf(a, "malloc:%ld:%zu", &n, &x) == 2)
			malloc_site(n, x);
		else if (sscanf(a, "calloc:%ld:%zu", &n, &x) == 2)
			calloc_site(n, x);
		else if (sscanf(a, "aligned:%ld:%zu", &n, &x) == 2)
			aligned_site(n, x);
		else if (sscanf(a, "array:%ld:%zu", &n, &x) == 2)
			array_site(n, x);
		else if (sscanf(a, "zero:%ld:%zu", &n, &x) == 2)
			zero_site(n, x);
		else if (sscanf(a, "pvalloc:%ld:%zu", &n, &x) == 2)
			pvalloc_site(n, x);
		else if (sscanf(a, "libc:%ld:%zu", &n, &x) == 2)
			libc_site(n, x);
		else if (sscanf(a, "big:%ld:%zu", &n, &x) == 2)
			big_site(n, x);
		else if (sscanf(a, "fail:%ld:%zu", &n, &x) == 2)
			fail_site(n, x);
		else {
			fprintf(stderr, "allocs: unknown step %s\n", a);
			return 2;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* stdin's buffer is static: the fgets after "ready" must not malloc,
	 * or a report taken while it runs counts one block more or less (the
	 * exact-totals checks compare two runs to the object). */
	static char inbuf[4096];
	setvbuf(stdin, inbuf, _IOLBF, sizeof inbuf);
	if (run_steps(argc, argv))
		return 2;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "free\n"))
			free_all();
		if (!strcmp(line, "tick\n"))
			free(must(malloc(16)));
		if (!strcmp(line, "again\n"))
			run_steps(argc, argv);
		printf("ready\n");
		fflush(stdout);
	}
	return 0;
}
