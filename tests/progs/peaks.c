/*
 * peaks: a site that grows and gives everything back, for the peak checks
 * (tests/integration/test_peaks.py).
 *
 *   peaks            prints "ready", then reads commands on stdin, each
 *                    answered with "ready":
 *   grow MIB         grow_site allocates MIB MiB in 32 KiB blocks, then
 *                    frees them all (retained back to 0, peak MIB)
 *   hold MIB         hold_site allocates MIB MiB in 32 KiB blocks, kept
 *   churn N          churn_site allocates a 64-byte block and frees it, N
 *                    times (never more than one held: its peak is 64 B)
 *   little KIB       little_site allocates KIB KiB in 64-byte blocks, then
 *                    frees them all (retained back to 0, peak KIB)
 *   keep KIB         keep_site allocates KIB KiB in 64-byte blocks, kept
 *   EOF exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define BLOCK (32 * 1024)
#define SMALL 64

static void *blocks[1 << 16];

static NOINLINE void grow_site(size_t mib)
{
	size_t n = mib * 1024 * 1024 / BLOCK;
	for (size_t i = 0; i < n; i++) {
		blocks[i] = malloc(BLOCK);
		memset(blocks[i], 1, 64);
	}
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
}

static NOINLINE void hold_site(size_t mib)
{
	size_t n = mib * 1024 * 1024 / BLOCK;
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(BLOCK);
		memset(p, 1, 64);
		__asm__ volatile("" : : "r"(p) : "memory");   /* kept: a leak */
	}
}

static NOINLINE void churn_site(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(SMALL);
		memset(p, 1, SMALL);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

static NOINLINE void little_site(size_t kib)
{
	size_t n = kib * 1024 / SMALL;
	for (size_t i = 0; i < n; i++) {
		blocks[i] = malloc(SMALL);
		memset(blocks[i], 1, SMALL);
	}
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
}

static NOINLINE void keep_site(size_t kib)
{
	size_t n = kib * 1024 / SMALL;
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(SMALL);
		memset(p, 1, SMALL);
		__asm__ volatile("" : : "r"(p) : "memory");   /* kept: a leak */
	}
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		size_t mib = 0;
		if (sscanf(line, "grow %zu", &mib) == 1 && mib <= 2048)
			grow_site(mib);
		else if (sscanf(line, "hold %zu", &mib) == 1 && mib <= 2048)
			hold_site(mib);
		else if (sscanf(line, "churn %zu", &mib) == 1)
			churn_site(mib);
		else if (sscanf(line, "little %zu", &mib) == 1 && mib <= 4096)
			little_site(mib);
		else if (sscanf(line, "keep %zu", &mib) == 1 && mib <= 4096)
			keep_site(mib);
		printf("ready\n");
	}
	return 0;
}
