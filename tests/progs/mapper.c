/*
 * mapper: anonymous mappings made by the program itself, for
 * tests/integration/test_mmap.py.  Prints "ready", then reads commands on
 * stdin, each answered with "ready" (EOF exits 0):
 *
 *   map      map_site: mmap 64 MiB anonymous private, touched
 *   unmap    munmap the last 48 MiB of it (16 MiB left)
 *   grow     mremap what is left to 32 MiB (may move)
 *   file     file_site: mmap 32 MiB of a temporary file (not heap:
 *            never counted)
 *   shared   shared_site: mmap 8 MiB anonymous shared
 *   fixed    fixed_site: mmap 8 MiB anonymous with MAP_FIXED over the
 *            start of the region (which keeps the rest)
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

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "map", 3)) {
			map_site();
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
		}
		printf("ready\n");
	}
	return 0;
}
