/* libdataptr.so's interface (tests/progs/lib/dataptr.c) with both
 * allocator pointers in a read-only section: the loader writes them
 * through a text relocation (DT_TEXTREL), and nothing may write them
 * afterwards.  The agent cannot take them over and must name the
 * library. */
#include <stdlib.h>

__asm__(".section .dpro,\"a\",@progbits\n"
	".balign 8\n"
	".globl dp_malloc\n"
	"dp_malloc: .quad malloc\n"
	".globl dp_free\n"
	"dp_free: .quad free\n"
	".previous\n");

extern void *(*const dp_malloc)(size_t);
extern void (*const dp_free)(void *);

__attribute__((noinline)) void *dp_alloc(size_t n)
{
	void *(*const *w)(size_t) = &dp_malloc;
	__asm__("" : "+r"(w));
	return (*w)(n);
}

__attribute__((noinline)) void dp_release(void *p)
{
	void (*const *w)(void *) = &dp_free;
	__asm__("" : "+r"(w));
	(*w)(p);
}
