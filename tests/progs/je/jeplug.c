/*
 * A plugin linked against libjemalloc for tests/progs/dlhost.c (loaded
 * RTLD_LOCAL: jemalloc is in its local scope only).  Every block comes
 * from jemalloc's API and is asked about with jemalloc's sallocx, which
 * only knows jemalloc's own blocks.
 */
#include <stdio.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

int run(void);

int run(void)
{
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		void *p = mallocx(100, MALLOCX_ZERO);
		bad += !p || sallocx(p, 0) < 100 || ((char *)p)[99] != 0;
		p = rallocx(p, 5000, MALLOCX_ALIGN(64));
		bad += !p || sallocx(p, 0) < 5000 || (size_t)p % 64;
		size_t u = xallocx(p, 5000, 0, 0);
		bad += u < 5000 || u != sallocx(p, 0);
		if (i & 1)
			sdallocx(p, 5000, 0);
		else
			dallocx(p, 0);
	}
	printf("jemalloc plugin: %d of 1000 wrong\n", bad);
	return 0;
}
