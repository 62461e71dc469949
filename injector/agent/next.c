/*
 * next: resolution of the definitions we interpose (next.h).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "life.h"
#include "next.h"

struct agent_next agent_next;

int agent_resolve(void)
{
	if (__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE))
		return 1;
	/* dlsym may allocate: the caller's guard sends that to the
	 * bootstrap buffer. */
	struct agent_next r = { 0 };
	/* Preloaded: the next definition after us.  Injected: the process's
	 * global definition, what the GOT slots we rewrite were bound to
	 * (RTLD_NEXT from a dlopen'ed object means our own dependencies). */
	void *from = agent_injected ? RTLD_DEFAULT : RTLD_NEXT;
#define NEXT(field, name) (*(void **)&r.field = dlsym(from, name))
	NEXT(malloc, "malloc");
	NEXT(free, "free");
	NEXT(calloc, "calloc");
	NEXT(realloc, "realloc");
	NEXT(posix_memalign, "posix_memalign");
	NEXT(aligned_alloc, "aligned_alloc");
	NEXT(memalign, "memalign");
	NEXT(valloc, "valloc");
	NEXT(pvalloc, "pvalloc");
	NEXT(usable, "malloc_usable_size");
#undef NEXT
	if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.usable)
		return 0;
	/* When the next malloc is glibc's own, its usable size is one header
	 * load away (glibc's musable(): chunk size minus the size field, or
	 * minus the whole header for mmapped chunks); calling through
	 * malloc_usable_size would cost a call on every malloc and free. */
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (libc) {
		r.glibc_usable = dlsym(libc, "malloc") == (void *)r.malloc &&
			dlsym(libc, "malloc_usable_size") == (void *)r.usable &&
			!getenv("YM_NO_GLIBC_FASTPATH");
		dlclose(libc);
	}
	/* Not resolved: threads racing here write the same values, and
	 * none may see resolved go back to 0. */
	memcpy(&agent_next, &r, offsetof(struct agent_next, resolved));
	agent_next.glibc_usable = r.glibc_usable;
	__atomic_store_n(&agent_next.resolved, 1, __ATOMIC_RELEASE);
	return 1;
}
