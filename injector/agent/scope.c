/*
 * scope: definitions in the caller's scope (scope.h).
 *
 * State: none but the caches the callers own.
 */
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "compat.h"
#include "loader.h"
#include "scope.h"
#include "symbols.h"
#include "threads.h"

unsigned long long scope_gen(void)
{
	unsigned long long v[2];
	loader_counters(v);
	return v[0] + v[1];
}

int scope_ours(void *f)
{
	struct agent_object self;
	return f && agent_find_object((const void *)scope_ours, &self) == 0 &&
	       (char *)f >= (char *)self.map_start &&
	       (char *)f < (char *)self.map_end;
}

/* ---- A symbol lookup that takes no lock of the loader's but
 * dl_iterate_phdr's (held only while the list of objects changes; none in a
 * fork child that must not take it, loader.h):
 * dladdr, dlopen and dlsym take the loader's lock, which a dlopen holds
 * while it runs the constructors; a constructor that starts a thread
 * and joins it would wait forever on a thread calling operator new. */

#define SCOPE_NEEDED 32

struct scope_q {
	uintptr_t ra;
	const char *const *names;
	int n;
	void **out;
	int rank[SCOPE_MAX];              /* where each was found; lower wins */
	const char *needed[SCOPE_NEEDED];
	int nneeded;
	int caller;                  /* found, and not the main program */
};

static void scope_try(struct scope_q *q, const struct dl_phdr_info *info,
		      int rank)
{
	for (int k = 0; k < q->n; k++) {
		if (q->out[k] && q->rank[k] <= rank)
			continue;
		void *f = sym_lookup(info, q->names[k]);
		if (f && f != SYM_OTHER && !scope_ours(f)) {
			q->out[k] = f;
			q->rank[k] = rank;
		}
	}
}

/* Pass 1: the caller's object: its own definitions, its DT_NEEDED. */
static int scope_caller(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scope_q *q = arg;
	if (!sym_holds(info, q->ra))
		return 0;
	/* The main program's scope is the global one, already searched. */
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 1;
	q->caller = 1;
	q->nneeded = sym_needed(info, q->needed, SCOPE_NEEDED);
	scope_try(q, info, 0);
	return 1;
}

/* Pass 2: the caller's direct dependencies, in DT_NEEDED order; then
 * (rank SCOPE_NEEDED + 1) any object but the main program, in load
 * order, for a caller that relies on a library it does not name. */
static int scope_deps(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scope_q *q = arg;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	const char *so = sym_soname(info);
	int rank = SCOPE_NEEDED + 1;
	for (int k = 0; k < q->nneeded; k++)
		if (strcmp(q->needed[k], so) == 0) {
			rank = k + 1;
			break;
		}
	scope_try(q, info, rank);
	return 0;
}

/* names[0..n) as the object holding the code at ra would find them in
 * its own scope, into out; how many were found.  Never allocates, takes
 * no lock but dl_iterate_phdr's.  The object is executing the call, so
 * its dependencies stay loaded while it uses what is returned. */
static int scope_syms(const void *ra, const char *const *names, int n,
		      void **out)
{
	struct scope_q q = { .ra = (uintptr_t)ra, .names = names, .n = n,
			     .out = out };
	memset(out, 0, sizeof *out * (size_t)n);
	loader_iterate(scope_caller, &q);
	if (!q.caller)
		return 0;
	loader_iterate(scope_deps, &q);
	int found = 0;
	for (int k = 0; k < n; k++)
		found += out[k] != NULL;
	return found;
}

int scope_cached(struct scope_cache *c, unsigned long long g,
			const void *ra, const char *const *names, int n,
			void **out)
{
	struct agent_object o;   /* never allocates */
	void *lm = agent_find_object(ra, &o) == 0 ? o.link_map : NULL;
	unsigned s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	int found = 0;
	if (lm && !(s1 & 1) &&
	    __atomic_load_n(&c->lm, __ATOMIC_RELAXED) == lm &&
	    __atomic_load_n(&c->gen, __ATOMIC_RELAXED) == g) {
		for (int i = 0; i < n; i++) {
			out[i] = __atomic_load_n(&c->fn[i], __ATOMIC_RELAXED);
			found += out[i] != NULL;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == s1)
			return found;
	}
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	found = scope_syms(ra, names, n, out);
	agent_guard_leave(t);
	if (lm && !(s1 & 1) &&
	    __atomic_compare_exchange_n(&c->seq, &s1, s1 + 1, 0,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		__atomic_store_n(&c->lm, lm, __ATOMIC_RELAXED);
		__atomic_store_n(&c->gen, g, __ATOMIC_RELAXED);
		for (int i = 0; i < n; i++)
			__atomic_store_n(&c->fn[i], out[i], __ATOMIC_RELAXED);
		__atomic_store_n(&c->seq, s1 + 2, __ATOMIC_RELEASE);
	}
	return found;
}
