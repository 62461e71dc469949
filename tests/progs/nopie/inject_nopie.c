/* Injection target built without PIE whose code takes the addresses of
 * malloc and free, as Debian's python3.11 does: the executable's PLT
 * entries then stand for them (canonical PLT entries: an absolute address
 * in code cannot be relocated at run time), and dlsym(RTLD_DEFAULT,
 * "malloc") answers the executable's stub.
 *   prints "ready"; reads a line; holds 32 MiB from direct_site (direct
 *   calls, through the PLT) and 32 MiB from pointer_site (through the
 *   address taken), 64 KiB blocks; prints "held"; reads a line; frees
 *   them; exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *(*volatile alloc_fn)(size_t);
void (*volatile free_fn)(void *);

enum { BLOCKS = 512, SIZE = 65536 };
static void *direct[BLOCKS], *pointer[BLOCKS];

static void read_line(void)
{
	char c;
	while (read(0, &c, 1) == 1 && c != '\n')
		;
}

__attribute__((noinline)) static void direct_site(void)
{
	for (int i = 0; i < BLOCKS; i++)
		memset(direct[i] = malloc(SIZE), 1, SIZE);
}

__attribute__((noinline)) static void pointer_site(void)
{
	for (int i = 0; i < BLOCKS; i++)
		memset(pointer[i] = alloc_fn(SIZE), 1, SIZE);
}

int main(void)
{
	alloc_fn = malloc;
	free_fn = free;
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	read_line();
	direct_site();
	pointer_site();
	printf("held\n");
	read_line();
	for (int i = 0; i < BLOCKS; i++) {
		free(direct[i]);
		free_fn(pointer[i]);
	}
	return 0;
}
