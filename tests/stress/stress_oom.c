/*
 * stress_oom: running out of address space (run it under ulimit -v).
 *
 *   stress_oom   allocates 1 MiB blocks until malloc fails, then 4 KiB
 *                blocks, then tries calloc, realloc, posix_memalign and
 *                strdup at the limit; frees everything and allocates
 *                again.  Prints how each call failed (never how many
 *                succeeded: the agent's own mappings use address space
 *                too, so the count legitimately differs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct list {
	struct list *next;
};

static struct list *grab(size_t sz, int *err, long *n)
{
	struct list *head = NULL;
	*n = 0;
	for (;;) {
		errno = 0;
		struct list *p = malloc(sz);
		if (!p) {
			*err = errno;
			return head;
		}
		/* Touch the first bytes only: the limit is on address space. */
		p->next = head;
		head = p;
		++*n;
		if (*n > 50000000)
			return head;   /* no limit in force */
	}
}

static void release(struct list *l)
{
	while (l) {
		struct list *n = l->next;
		free(l);
		l = n;
	}
}

int main(void)
{
	int e1 = 0, e2 = 0;
	long n1, n2;
	struct list *big = grab(1 << 20, &e1, &n1);
	struct list *small = grab(4096, &e2, &n2);
	printf("1 MiB blocks: failed errno=%s\n", e1 == ENOMEM ? "ENOMEM" : strerror(e1));
	printf("4 KiB blocks: failed errno=%s\n", e2 == ENOMEM ? "ENOMEM" : strerror(e2));
	printf("some succeeded: %d\n", n1 > 0);

	errno = 0;
	void *c = calloc(1 << 20, 4);
	printf("calloc at limit: %s errno=%d\n", c ? "ptr" : "NULL", c ? 0 : errno);
	free(c);
	void *r = malloc(16);
	errno = 0;
	void *r2 = r ? realloc(r, 64 << 20) : NULL;
	printf("realloc at limit: %s errno=%d old kept=%d\n", r2 ? "ptr" : "NULL",
	       r2 ? 0 : errno, r != NULL);
	free(r2 ? r2 : r);
	void *pm = NULL;
	int rc = posix_memalign(&pm, 4096, 64 << 20);
	printf("posix_memalign at limit: rc=%s\n", rc == ENOMEM ? "ENOMEM" : rc ? "other" : "0");
	if (!rc)
		free(pm);

	release(small);
	release(big);
	long ok = 0;
	for (int i = 0; i < 100; i++) {
		void *p = malloc(1 << 20);
		ok += p != NULL;
		free(p);
	}
	printf("after release: %ld/100 allocations ok\n", ok);
	return 0;
}
