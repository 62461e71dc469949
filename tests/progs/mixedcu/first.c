/* One program of three compilation units, the middle one built by clang
 * (no .debug_aranges) between two built by gcc (with them): libdw's CU
 * lookup answers for clang_alloc's addresses with first.c's unit, which
 * has no line for them.  main allocates through clang_alloc, prints
 * "ready" and exits 0 at the next line on stdin. */
#include <stdio.h>
#include <stdlib.h>

void *clang_alloc(size_t n);
int last_check(const void *p);

int main(void)
{
	void *p = clang_alloc(1 << 20);
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	int rc = last_check(p);
	free(p);
	return rc;
}
