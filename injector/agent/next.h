/*
 * next: the definitions the hooks forward to (the next malloc after ours,
 * or the process's own when injected), found once with dlsym.  next.c is
 * the only writer of agent_next; the hooks read it on every call.
 */
#ifndef YMTOP_AGENT_NEXT_H
#define YMTOP_AGENT_NEXT_H

#include <stddef.h>

#include "base.h"

struct agent_next {
	void *(*malloc)(size_t);
	void  (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int   (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
	int resolved;       /* the pointers above are set (acquire) */
	int glibc_usable;   /* the next malloc is glibc's: inline usable size */
};

extern struct agent_next agent_next AGENT_HIDDEN;

/* Find the next definitions (dlsym may allocate: the caller holds the
 * guard, which sends that to the bootstrap buffer).  1 when usable. */
int agent_resolve(void) AGENT_HIDDEN;

/* The allocator's usable size of a live block.  glibc: the chunk size
 * minus the size field, or minus the whole header when mmapped (bit 2):
 * one load and four ALU operations, no branch.  Only for glibc's blocks:
 * the fast paths that call it are closed to other allocators by the gate
 * invariant (live.h), which this checks. */
static inline size_t agent_usable_glibc(const void *p)
{
	YM_ASSERT(agent_next.glibc_usable);
	size_t sz = ((const size_t *)p)[-1];
	return (sz & ~(size_t)7) - 8 - ((sz & 2) << 2);
}

static inline size_t agent_usable(void *p)
{
	if (likely(agent_next.glibc_usable))
		return agent_usable_glibc(p);
	return agent_next.usable(p);
}

#endif
