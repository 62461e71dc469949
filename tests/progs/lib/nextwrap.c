/* A malloc wrapper preloaded before the agent, as leak checkers and
 * tracers are: it defines the malloc family and forwards each call to
 * the next definition, dlsym(RTLD_NEXT), which is then the agent's.  The
 * agent must stay behind it (its calls reach the agent already), not
 * send the process's slots to it (they would come back for ever). */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

/* dlsym may call calloc before the next one is known. */
static _Alignas(16) char early[4096];
static size_t early_used;
static int resolving;

static void resolve(void)
{
	if (next_free || resolving)
		return;
	resolving = 1;
	*(void **)&next_malloc = dlsym(RTLD_NEXT, "malloc");
	*(void **)&next_calloc = dlsym(RTLD_NEXT, "calloc");
	*(void **)&next_realloc = dlsym(RTLD_NEXT, "realloc");
	*(void **)&next_free = dlsym(RTLD_NEXT, "free");
	resolving = 0;
}

static int is_early(const void *p)
{
	return (uintptr_t)p - (uintptr_t)early < sizeof early;
}

void *malloc(size_t n)
{
	resolve();
	return next_malloc ? next_malloc(n) : NULL;
}

void *calloc(size_t a, size_t b)
{
	resolve();
	if (!next_calloc) {
		size_t n = (a * b + 15) & ~(size_t)15;
		if (n > sizeof early - early_used)
			return NULL;
		early_used += n;
		return early + early_used - n;   /* static: zeroed */
	}
	return next_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	resolve();
	return is_early(p) ? NULL : next_realloc(p, n);
}

void free(void *p)
{
	resolve();
	if (!is_early(p) && next_free)
		next_free(p);
}
