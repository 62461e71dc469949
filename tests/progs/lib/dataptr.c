/* A library that keeps the allocator's address in its own data, as
 * libxml2 (xmlMalloc, xmlFree) and libcurl (Curl_cmalloc) do: each
 * pointer is a data word the loader relocates with R_X86_64_64 against
 * malloc or free, and the calls through it use no PLT or GOT slot.
 * dp_malloc is in writable data, dp_free in RELRO (.data.rel.ro), so
 * that both kinds of page are rewritten. */
#include <stdlib.h>

void *(*dp_malloc)(size_t) = malloc;
void (*const dp_free)(void *) = free;

/* Each call loads the word: the empty asm hides its address from the
 * compiler, which would otherwise call free directly (dp_free is a
 * constant it knows). */
__attribute__((noinline)) void *dp_alloc(size_t n)
{
	void *(**w)(size_t) = &dp_malloc;
	__asm__("" : "+r"(w));
	return (*w)(n);
}

__attribute__((noinline)) void dp_release(void *p)
{
	void (*const *w)(void *) = &dp_free;
	__asm__("" : "+r"(w));
	(*w)(p);
}
