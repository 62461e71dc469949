/* Built by clang: a compilation unit without .debug_aranges (first.c). */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *clang_alloc(size_t n)
{
	void *p = malloc(n);    /* clang_alloc's allocation */
	if (p)
		memset(p, 1, n);
	return p;
}
