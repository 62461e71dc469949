/*
 * mapper: anonymous mappings made by the program itself, for
 * tests/integration/test_mmap.py.  Prints "ready", then reads commands on
 * stdin, each answered with "ready" (EOF exits 0):
 *
 *   map      map_site: mmap 64 MiB anonymous private, touched
 *   unmap    munmap the last 48 MiB of it (16 MiB left)
 *   badunmap munmap at a misaligned address inside it: fails with
 *            EINVAL, unmaps nothing (answered "failed" or "unmapped")
 *   grow     mremap what is left to 32 MiB (may move)
 *   file     file_site: mmap 32 MiB of a temporary file (not heap:
 *            never counted)
 *   shared   shared_site: mmap 8 MiB anonymous shared
 *   fixed    fixed_site: mmap 8 MiB anonymous with MAP_FIXED over the
 *            start of the region (which keeps the rest)
 *   reserve  reserve_site: 64 GiB PROT_NONE and 1 GiB MAP_NORESERVE
 *            reserved, untouched (address space, not memory)
 *   many     many_site: 200 live 1 MiB mappings
 *   hole     unmap 512 KiB from 256 KiB into the first of them
 *   subremap sub_site maps 64 MiB, place_site 32 MiB elsewhere; the
 *            second half of the first moves over the second (mremap of a
 *            sub-range, MREMAP_FIXED)
 *   subunmap unmap both halves
 *   dontunmap dont_site maps 32 MiB, mremap MREMAP_DONTUNMAP copies it
 *   dontfree unmap both
 *   alloc    malloc and free 64 bytes
 *
 * With the argument "first", map_site runs and the last 48 MiB of its
 * mapping are unmapped before anything else, the first allocation call
 * (stdio's) included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MiB (1024UL * 1024)

static char *region;
static size_t region_len;

static NOINLINE void map_site(void)
{
	region_len = 64 * MiB;
	region = mmap(NULL, region_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		abort();
	memset(region, 1, region_len);
}

static NOINLINE void file_site(void)
{
	FILE *f = tmpfile();
	if (!f || ftruncate(fileno(f), 32 * MiB) != 0)
		abort();
	void *p = mmap(NULL, 32 * MiB, PROT_READ, MAP_PRIVATE, fileno(f), 0);
	if (p == MAP_FAILED)
		abort();
}

static NOINLINE void shared_site(void)
{
	void *p = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort();
}

static NOINLINE void fixed_site(void)
{
	void *p = mmap(region, 8 * MiB, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p != region)
		abort();
}

static NOINLINE void reserve_site(void)
{
	if (mmap(NULL, 64UL << 30, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED ||
	    mmap(NULL, 1UL << 30, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		abort();
}

static char *many_first;

static NOINLINE void many_site(void)
{
	for (int i = 0; i < 200; i++) {
		char *p = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		if (!i)
			many_first = p;
	}
}

static char *sub, *moved, *dont, *dont_copy;

static NOINLINE void *anon(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort();
	return p;
}

static NOINLINE void sub_site(void) { sub = anon(64 * MiB); }
static NOINLINE void place_site(void) { moved = anon(32 * MiB); }
static NOINLINE void dont_site(void) { dont = anon(32 * MiB); }

int main(int argc, char **argv)
{
	char line[64];
	if (argc > 1 && !strcmp(argv[1], "first")) {
		map_site();
		munmap(region + 16 * MiB, 48 * MiB);
		region_len = 16 * MiB;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "map", 3)) {
			map_site();
		} else if (!strncmp(line, "alloc", 5)) {
			void *volatile q = malloc(64);
			free(q);
		} else if (!strncmp(line, "badunmap", 8)) {
			if (munmap(region + 1, 4 * MiB) == 0)
				printf("unmapped\n");
			else
				printf("failed\n");
		} else if (!strncmp(line, "unmap", 5)) {
			munmap(region + 16 * MiB, 48 * MiB);
			region_len = 16 * MiB;
		} else if (!strncmp(line, "grow", 4)) {
			region = mremap(region, region_len, 32 * MiB, MREMAP_MAYMOVE);
			if (region == MAP_FAILED)
				abort();
			region_len = 32 * MiB;
		} else if (!strncmp(line, "file", 4)) {
			file_site();
		} else if (!strncmp(line, "shared", 6)) {
			shared_site();
		} else if (!strncmp(line, "fixed", 5)) {
			fixed_site();
		} else if (!strncmp(line, "reserve", 7)) {
			reserve_site();
		} else if (!strncmp(line, "many", 4)) {
			many_site();
		} else if (!strncmp(line, "hole", 4)) {
			munmap(many_first + MiB / 4, MiB / 2);
		} else if (!strncmp(line, "subremap", 8)) {
			sub_site();
			place_site();
			if (mremap(sub + 32 * MiB, 32 * MiB, 32 * MiB,
				   MREMAP_MAYMOVE | MREMAP_FIXED, moved) != moved)
				abort();
		} else if (!strncmp(line, "subunmap", 8)) {
			munmap(sub, 32 * MiB);
			munmap(moved, 32 * MiB);
		} else if (!strncmp(line, "dontunmap", 9)) {
			dont_site();
			dont_copy = mremap(dont, 32 * MiB, 32 * MiB,
					   MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
			if (dont_copy == MAP_FAILED)
				abort();
		} else if (!strncmp(line, "dontfree", 8)) {
			munmap(dont, 32 * MiB);
			munmap(dont_copy, 32 * MiB);
		}
		printf("ready\n");
	}
	return 0;
}
