/*
 * ownmalloc: an executable that defines the malloc family itself (as a
 * program linked with a static allocator does), forwarding to glibc's
 * __libc_* functions.  Its own calls are direct, through no slot: the
 * agent cannot see them and must say so (test_takeover.py).  The calls
 * of its libraries bind to its malloc through their slots.
 *
 *   ownmalloc   prints "ready", then on each line of stdin: "own N S"
 *               holds N blocks of S bytes from its own malloc, "lib N S"
 *               as many from libc's strdup-like path (its GOT slot to
 *               malloc), answered by "ready"; EOF exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t n, size_t s) { return __libc_calloc(n, s); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
int posix_memalign(void **r, size_t a, size_t n)
{
	void *p = __libc_memalign(a, n);
	if (!p)
		return 12;
	*r = p;
	return 0;
}

int main(void)
{
	char line[128];
	setvbuf(stdout, NULL, _IOLBF, 0);
	puts("ready");
	while (fgets(line, sizeof line, stdin)) {
		int n = 0;
		size_t s = 0;
		if (sscanf(line, "own %d %zu", &n, &s) == 2) {
			for (int i = 0; i < n; i++)
				memset(malloc(s), 1, s);
		} else if (sscanf(line, "lib %d %zu", &n, &s) == 2) {
			char *str = malloc(s);
			memset(str, 'x', s - 1);
			str[s - 1] = '\0';
			for (int i = 0; i < n; i++)
				if (!strdup(str))
					return 1;
		}
		puts("ready");
	}
	return 0;
}
