/* A program built by musl-gcc, run under build/libymagent-musl.so
 * (tests/integration/test_musl.py): count_site makes 5000 blocks of 48
 * bytes and frees them, hold_site keeps 1000 blocks of 4096 bytes; then
 * "ready", and it waits for a line on stdin. */
#include <stdio.h>
#include <stdlib.h>

#define HELD 1000

static void *held[HELD];

__attribute__((noinline)) static void count_site(void)
{
	for (int i = 0; i < 5000; i++) {
		void *p = malloc(48);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

__attribute__((noinline)) static void hold_site(void)
{
	for (int i = 0; i < HELD; i++)
		held[i] = malloc(4096);
}

int main(void)
{
	count_site();
	hold_site();
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	for (int i = 0; i < HELD; i++)
		free(held[i]);
	return 0;
}
