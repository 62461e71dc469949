/*
 * jemalloc's API through weak references, not linked with libjemalloc:
 * the calls reach whichever definition the process has (jemalloc
 * preloaded, or the agent's, which carries them out with the malloc
 * family when there is no jemalloc).  Sizes whose rounding to the
 * alignment would wrap: jemalloc returns NULL and leaves errno alone.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern void *mallocx(size_t, int) __attribute__((weak));
extern void *rallocx(void *, size_t, int) __attribute__((weak));
extern size_t xallocx(void *, size_t, size_t, int) __attribute__((weak));
extern void dallocx(void *, int) __attribute__((weak));

#define ALIGN64 6
#define ZERO    0x40
#define HUGE_N  (SIZE_MAX - 10)

static void show(const char *what, void *p)
{
	printf("%s: %s errno=%d\n", what, p ? "a block" : "NULL", errno);
	errno = 0;
}

int main(void)
{
	if (!mallocx || !rallocx || !xallocx || !dallocx) {
		printf("no jemalloc API\n");
		return 0;
	}
	errno = 0;
	show("mallocx(huge, ALIGN(64))", mallocx(HUGE_N, ALIGN64));
	show("mallocx(huge, ALIGN(64)|ZERO)", mallocx(HUGE_N, ALIGN64 | ZERO));
	show("mallocx(huge, ZERO)", mallocx(HUGE_N, ZERO));
	void *q = mallocx(100, ZERO);
	show("mallocx(100, ZERO)", q);
	show("rallocx(huge, ALIGN(64))", rallocx(q, HUGE_N, ALIGN64));
	show("rallocx(huge, ZERO)", rallocx(q, HUGE_N, ZERO));
	show("rallocx(huge)", rallocx(q, HUGE_N, 0));
	size_t u = xallocx(q, HUGE_N, 0, 0);
	printf("xallocx(huge): %s\n", u >= 100 && u < 4096 ? "unchanged" : "changed");
	u = xallocx(q, 100, HUGE_N, 0);
	printf("xallocx(100, extra huge): %s\n", u >= 100 && u < (1 << 20) ? "in place" : "?");
	int bad = 0;
	for (int i = 0; i < 100; i++)
		bad += ((unsigned char *)q)[i] != 0;
	printf("block kept, %d bytes changed\n", bad);
	dallocx(q, 0);
	return 0;
}
