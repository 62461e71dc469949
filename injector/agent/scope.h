/*
 * scope: definitions in the caller's scope (scope.c).
 *
 * RTLD_NEXT (and RTLD_DEFAULT, injected) search the global scope only.
 * An object dlopen'ed RTLD_LOCAL (a Python extension module, a PAM or
 * NSS module) binds its references to the global scope first, where the
 * preloaded agent is, then to its own local scope: its dependencies,
 * libstdc++ or libjemalloc among them.  When the global scope has no
 * definition, the one the caller would have bound to without us is
 * searched in the caller's local scope: it differs from caller to
 * caller, and an object may be unloaded, so the answer is kept for the
 * caller's object only until an object is loaded or unloaded
 * (scope_cached).  The global scope is searched once (dlsym takes the
 * loader's lock; the caller's scope is searched without it).
 */
#ifndef YMTOP_AGENT_SCOPE_H
#define YMTOP_AGENT_SCOPE_H

#include "base.h"

/* The most names one lookup holds. */
#define SCOPE_MAX 5

/* Changes whenever an object is loaded or unloaded. */
unsigned long long scope_gen(void) AGENT_HIDDEN;
/* Whether f is one of ours (RTLD_DEFAULT, injected, or a scope that
 * holds the agent).  Lock-free where glibc has _dl_find_object. */
int scope_ours(void *f) AGENT_HIDDEN;

/* The last lookup in a caller's scope, for the next call from the same
 * object: valid while no object was loaded or unloaded (the object is
 * the same one, and so is its scope).  A sequence lock: odd while
 * written; a writer that finds it taken leaves the entry alone. */
struct scope_cache {
	unsigned seq;
	void *lm;                   /* the caller's link map */
	unsigned long long gen;     /* scope_gen() + 1 when found */
	void *fn[SCOPE_MAX];
};

/* names[0..n) (n <= SCOPE_MAX) as the object holding the code at ra
 * would find them in its own scope, into out, through c (g: scope_gen()
 * + 1); how many were found.  Never allocates, takes no lock but
 * dl_iterate_phdr's. */
int scope_cached(struct scope_cache *c, unsigned long long g,
		 const void *ra, const char *const *names, int n,
		 void **out) AGENT_HIDDEN;

#endif
