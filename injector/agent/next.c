/*
 * next: resolution of the definitions we interpose (next.h).
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "config.h"
#include "loader.h"
#include "next.h"
#include "symbols.h"

struct agent_next agent_next;

static const char *const names[] = {
	"malloc", "free", "calloc", "realloc", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
};
#define NNAMES (sizeof names / sizeof names[0])

/* f lies in glibc's libc.so.6 (lock-free where glibc has
 * _dl_find_object: compat.h). */
static int in_glibc(void *f)
{
	struct agent_object o;
	if (!f || agent_find_object(f, &o) != 0 || !o.link_map ||
	    !o.link_map->l_name)
		return 0;
	const char *n = o.link_map->l_name;
	const char *slash = strrchr(n, '/');
	return strcmp(slash ? slash + 1 : n, "libc.so.6") == 0;
}

int agent_resolve(void)
{
	if (__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE))
		return 1;
	/* Preloaded first: the next definition after us (one walk of the
	 * objects, symbols.h; dlsym for what that cannot answer).  Through
	 * slots (injected, or preloaded behind another malloc): the
	 * process's global definition, what the GOT slots we rewrite were
	 * bound to (RTLD_NEXT from a dlopen'ed object means our own
	 * dependencies; behind jemalloc it would mean glibc's).  dlsym
	 * (sym_forward) may allocate: the caller's guard sends that to the
	 * bootstrap buffer. */
	void *f[NNAMES];
	if (!agent_slots)
		sym_next(names, (int)NNAMES, f);
	for (size_t k = 0; k < NNAMES; k++) {
		if (agent_slots) {
			f[k] = sym_global(names[k]);
			continue;
		}
		if (!f[k] || f[k] == SYM_OTHER)
			f[k] = sym_forward(names[k]);
		/* Check builds: the walk agrees with the loader. */
		YM_ASSERT(f[k] == sym_forward(names[k]));
	}
	struct agent_next r = { 0 };
	void **slot[NNAMES] = {
		(void **)&r.malloc, (void **)&r.free, (void **)&r.calloc,
		(void **)&r.realloc, (void **)&r.posix_memalign,
		(void **)&r.aligned_alloc, (void **)&r.memalign,
		(void **)&r.valloc, (void **)&r.pvalloc, (void **)&r.usable,
	};
	for (size_t k = 0; k < NNAMES; k++)
		*slot[k] = f[k];
	if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.usable)
		return 0;
	/* When the next malloc is glibc's own, its usable size is one header
	 * load away (glibc's musable(): chunk size minus the size field, or
	 * minus the whole header for mmapped chunks); calling through
	 * malloc_usable_size would cost a call on every malloc and free.
	 * libc.so.6 defines each once: in it is glibc's. */
	r.glibc_usable = in_glibc((void *)r.malloc) && in_glibc((void *)r.usable) &&
		!getenv("YM_NO_GLIBC_FASTPATH");
	/* Not resolved: threads racing here write the same values, and
	 * none may see resolved go back to 0. */
	memcpy(&agent_next, &r, offsetof(struct agent_next, resolved));
	agent_next.glibc_usable = r.glibc_usable;
	__atomic_store_n(&agent_next.resolved, 1, __ATOMIC_RELEASE);
	return 1;
}
