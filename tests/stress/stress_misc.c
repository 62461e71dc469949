/*
 * stress_misc: the allocator's edges, which the agent must reproduce
 * exactly (same return, same errno, same usable size), and allocation
 * outside main.
 *
 *   stress_misc edges      malloc(0), sizes near SIZE_MAX, calloc and
 *                          reallocarray overflow, realloc to 0 and from
 *                          NULL, memalign/posix_memalign/aligned_alloc/
 *                          valloc/pvalloc with odd, zero and huge
 *                          alignments; one line per call.
 *   stress_misc lifecycle  allocation in constructors before main (also a
 *                          high-priority one), in destructors and atexit
 *                          handlers after main, in a thread that main
 *                          does not join before exit.
 *   stress_misc longjmp N  longjmp out of deep allocating recursion.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- edges ---- */

/* Set while testing alignments of 64 KiB and more: glibc carves those
 * from the heap top, so the usable size follows where ASLR put the heap. */
static int big_align;

static void show(const char *what, void *p, int err, size_t align)
{
	printf("%-44s -> %s errno=%d", what, p ? "ptr" : "NULL", err);
	if (p && align)
		printf(" aligned=%d", ((uintptr_t)p % align) == 0);
	/* The usable size of mmapped chunks depends on where the mapping
	 * landed (alignment slack): only small ones are deterministic. */
	if (p && malloc_usable_size(p) < 65536 && !big_align)
		printf(" usable=%zu", malloc_usable_size(p));
	printf("\n");
}

#define TRY(label, align, expr)                                         \
	do {                                                            \
		errno = 0;                                              \
		void *p_ = (expr);                                      \
		int e_ = errno;                                         \
		show(label, p_, e_, align);                             \
		free(p_);                                               \
	} while (0)

#define TRY_PM(label, al, sz)                                           \
	do {                                                            \
		void *p_ = (void *)0x1;                                 \
		errno = 0;                                              \
		int rc_ = posix_memalign(&p_, al, sz);                  \
		int e_ = errno;                                         \
		printf("%-44s -> rc=%d errno=%d p=%s", label, rc_, e_,  \
		       rc_ ? (p_ == (void *)0x1 ? "untouched" : "changed") \
			   : (((uintptr_t)p_ % (al)) ? "misaligned"     \
						     : "aligned"));     \
		if (!rc_ && malloc_usable_size(p_) < 65536)             \
			printf(" usable=%zu", malloc_usable_size(p_));  \
		printf("\n");                                           \
		if (!rc_)                                               \
			free(p_);                                       \
	} while (0)

static void edges(void)
{
	/* volatile: keep the compiler from folding the calls (GCC knows
	 * malloc(SIZE_MAX) fails and may drop it). */
	volatile size_t max = SIZE_MAX, big = PTRDIFF_MAX;
	TRY("malloc(0)", 16, malloc(0));
	TRY("malloc(1)", 16, malloc(1));
	TRY("malloc(24)", 16, malloc(24));
	TRY("malloc(25)", 16, malloc(25));
	TRY("malloc(4000)", 16, malloc(4000));
	TRY("malloc(200000)", 16, malloc(200000));
	TRY("malloc(SIZE_MAX)", 0, malloc(max));
	TRY("malloc(SIZE_MAX-1)", 0, malloc(max - 1));
	TRY("malloc(SIZE_MAX-4096)", 0, malloc(max - 4096));
	TRY("malloc(SIZE_MAX/2)", 0, malloc(max / 2));
	TRY("malloc(PTRDIFF_MAX)", 0, malloc(big));
	TRY("malloc(PTRDIFF_MAX+1)", 0, malloc(big + 1));
	TRY("malloc(1<<62)", 0, malloc((size_t)1 << 62));
	TRY("calloc(0,0)", 16, calloc(0, 0));
	TRY("calloc(1,0)", 16, calloc(1, 0));
	TRY("calloc(SIZE_MAX,1)", 0, calloc(max, 1));
	TRY("calloc(SIZE_MAX/2,3) overflow", 0, calloc(max / 2, 3));
	TRY("calloc(2^32-1,2^32-1) overflow", 0,
	    calloc(max >> 32, max >> 32));
	TRY("reallocarray(NULL,SIZE_MAX/2,3) overflow", 0,
	    reallocarray(NULL, max / 2, 3));
	TRY("reallocarray(NULL,10,10)", 16, reallocarray(NULL, 10, 10));
	TRY("realloc(NULL,0)", 16, realloc(NULL, 0));
	TRY("realloc(NULL,100)", 16, realloc(NULL, 100));
	TRY("realloc(NULL,SIZE_MAX)", 0, realloc(NULL, max));
	{
		char *p = malloc(100);
		memset(p, 7, 100);
		errno = 0;
		char *q = realloc(p, max);
		int e = errno;
		printf("%-44s -> %s errno=%d old intact=%d\n",
		       "realloc(p,SIZE_MAX)", q ? "ptr" : "NULL", e,
		       q ? -1 : (p[0] == 7 && p[99] == 7));
		free(q ? q : p);
	}
	{
		char *p = malloc(100);
		errno = 0;
		char *q = realloc(p, 0);   /* glibc: frees p, returns NULL */
		int e = errno;
		printf("%-44s -> %s errno=%d\n", "realloc(p,0)", q ? "ptr" : "NULL", e);
		free(q);
	}
	{
		char *p = malloc(10);
		memcpy(p, "abcdefghi", 10);
		for (size_t n = 16; n <= (1u << 22); n *= 4) {
			p = realloc(p, n);
			if (!p || memcmp(p, "abcdefghi", 10))
				printf("realloc grow lost data at %zu\n", n);
		}
		for (size_t n = 1u << 22; n >= 16; n /= 8) {
			p = realloc(p, n);
			if (!p || memcmp(p, "abcdefghi", 10))
				printf("realloc shrink lost data at %zu\n", n);
		}
		printf("realloc grow/shrink chain -> %s usable=%zu\n",
		       p ? "ptr" : "NULL", p ? malloc_usable_size(p) : 0);
		free(p);
	}
	{
		char *p = malloc(50);
		errno = ENOENT;
		free(p);
		printf("free keeps errno -> %d\n", errno);
		errno = ENOENT;
		free(NULL);
		printf("free(NULL) keeps errno -> %d\n", errno);
	}
	static const size_t aligns[] = { 0, 1, 2, 3, 7, 8, 16, 24, 48, 64,
					 100, 4096, 65536, 1u << 21 };
	char label[64];
	for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
		size_t a = aligns[i];
		big_align = a >= 65536;
		snprintf(label, sizeof label, "memalign(%zu,100)", a);
		TRY(label, 0, memalign(a, 100));
		snprintf(label, sizeof label, "aligned_alloc(%zu,%zu)", a, a * 4);
		TRY(label, 0, aligned_alloc(a, a * 4));
		snprintf(label, sizeof label, "posix_memalign(%zu,100)", a);
		if (a)
			TRY_PM(label, a, 100);
		else {
			void *p = (void *)0x1;
			int rc = posix_memalign(&p, 0, 100);
			printf("%-44s -> rc=%d\n", label, rc);
			if (!rc)
				free(p);
		}
	}
	big_align = 0;
	TRY("memalign(1<<40,100)", 0, memalign((size_t)1 << 40, 100));
	TRY("memalign(SIZE_MAX/2+1,100)", 0, memalign(max / 2 + 1, 100));
	TRY("memalign(SIZE_MAX,100)", 0, memalign(max, 100));
	TRY("memalign(64,SIZE_MAX)", 0, memalign(64, max));
	TRY("memalign(64,SIZE_MAX-100)", 0, memalign(64, max - 100));
	TRY("aligned_alloc(1<<40,1<<40)", 0,
	    aligned_alloc((size_t)1 << 40, (size_t)1 << 40));
	TRY("aligned_alloc(64,SIZE_MAX)", 0, aligned_alloc(64, max));
	TRY_PM("posix_memalign(1<<40,100)", (size_t)1 << 40, 100);
	TRY_PM("posix_memalign(SIZE_MAX/2+1,100)", max / 2 + 1, 100);
	TRY_PM("posix_memalign(64,SIZE_MAX)", 64, max);
	TRY_PM("posix_memalign(4096,SIZE_MAX-4096)", 4096, max - 4096);
	TRY("valloc(0)", 4096, valloc(0));
	TRY("valloc(100)", 4096, valloc(100));
	TRY("valloc(SIZE_MAX)", 0, valloc(max));
	TRY("pvalloc(0)", 4096, pvalloc(0));
	TRY("pvalloc(100)", 4096, pvalloc(100));
	TRY("pvalloc(SIZE_MAX)", 0, pvalloc(max));
	TRY("pvalloc(SIZE_MAX-4000)", 0, pvalloc(max - 4000));
}

/* ---- lifecycle ---- */

static char *early, *ctor_kept;
static pthread_t straggler;

__attribute__((constructor(101))) static void very_early(void)
{
	early = strdup("early constructor");
}

__attribute__((constructor)) static void ctor(void)
{
	ctor_kept = malloc(1000);
	if (ctor_kept)
		snprintf(ctor_kept, 1000, "constructor kept %zu", (size_t)1000);
	for (int i = 0; i < 1000; i++)
		free(malloc((size_t)i * 13 + 1));
}

static void at_exit1(void)
{
	char *p = malloc(77);
	if (p) {
		strcpy(p, "atexit handler allocated");
		/* write(2): stdio may already be flushed at this point. */
		printf("%s\n", p);
		free(p);
	}
	free(early);
}

__attribute__((destructor)) static void dtor(void)
{
	char *p = realloc(ctor_kept, 5000);
	if (p) {
		strcat(p, ", grown in destructor");
		printf("%s\n", p);
		fflush(stdout);
		free(p);
	}
	for (int i = 0; i < 1000; i++)
		free(calloc((size_t)i + 1, 3));
}

static void *straggle(void *arg)
{
	(void)arg;
	for (;;) {
		free(malloc(123));
		usleep(100);
	}
	return NULL;
}

static void lifecycle(void)
{
	printf("%s\n%s\n", early, ctor_kept);
	atexit(at_exit1);
	pthread_create(&straggler, NULL, straggle, NULL);
	usleep(10000);
	/* exit with the straggler still allocating */
}

/* ---- longjmp ---- */

static jmp_buf jb;

static void deep(int d, void **keep)
{
	if (d > 30)
		return;
	keep[d] = malloc(64 + (size_t)d * 8);
	char *tmp = malloc(32);
	if (d == 30)
		longjmp(jb, d);   /* tmp of every frame leaks by design */
	deep(d + 1, keep);
	free(tmp);
}

/* setjmp in a frame of its own, live until longjmp returns into it. */
static int one_jump(void **keep)
{
	int r = setjmp(jb);
	if (r == 0)
		deep(0, keep);
	return r;
}

static void jumps(int n)
{
	long sum = 0;
	for (int i = 0; i < n; i++) {
		void *keep[31] = { 0 };
		sum += one_jump(keep);
		for (int d = 0; d <= 30; d++)
			free(keep[d]);
	}
	printf("longjmp %d: %ld\n", n, sum);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "edges"))
		edges();
	else if (argc >= 2 && !strcmp(argv[1], "lifecycle"))
		lifecycle();
	else if (argc == 3 && !strcmp(argv[1], "longjmp"))
		jumps(atoi(argv[2]));
	else {
		fprintf(stderr, "usage: stress_misc edges|lifecycle|longjmp N\n");
		return 2;
	}
	return 0;
}
