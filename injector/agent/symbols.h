/*
 * symbols: definitions found in the loaded objects' own dynamic symbol
 * tables (their GNU hash tables: every Debian object has one), with no
 * lock of the loader's but dl_iterate_phdr's (loader.h) and no
 * allocation.
 *
 * dlsym takes the loader's lock, which a dlopen holds while it runs
 * constructors, and allocates its error message when it finds nothing
 * (a process that never allocates would get a heap); and each call
 * searches the scope again.  sym_next walks the objects once for all the
 * names the agent's constructor needs.
 */
#ifndef YMTOP_AGENT_SYMBOLS_H
#define YMTOP_AGENT_SYMBOLS_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* What sym_lookup returns for a name an object defines as something
 * other than a plain function (an IFUNC, data): the caller asks dlsym,
 * which knows what to do with it. */
#define SYM_OTHER ((void *)1)

/* name's default definition in one object: its address when a function,
 * SYM_OTHER when defined as anything else, NULL when not defined there. */
void *sym_lookup(const struct dl_phdr_info *info, const char *name) AGENT_HIDDEN;

/* The same for data too: name's address when defined there as a
 * function or an object, SYM_OTHER for an IFUNC or TLS, else NULL. */
void *sym_lookup_any(const struct dl_phdr_info *info, const char *name) AGENT_HIDDEN;

/* The object's soname, else its file name ("" for the main program). */
const char *sym_soname(const struct dl_phdr_info *info) AGENT_HIDDEN;

/* One of the object's PT_LOAD segments holds address a. */
int sym_holds(const struct dl_phdr_info *info, uintptr_t a) AGENT_HIDDEN;

/* Its DT_NEEDED entries, at most max, into needed; how many. */
int sym_needed(const struct dl_phdr_info *info, const char **needed,
	       int max) AGENT_HIDDEN;

/* What dlsym(RTLD_NEXT, names[k]) gives the agent preloaded, at start-up:
 * the first definition in an object loaded after the agent's, in load
 * order (the global scope's, before any dlopen).  out[k] as sym_lookup's
 * (SYM_OTHER: ask dlsym); one walk for all the names. */
void sym_next(const char *const *names, int n, void **out) AGENT_HIDDEN;

/* dlsym(handle, name), with the calling thread's allocations sent to the
 * bootstrap buffer meanwhile: a name defined nowhere (mallocx under
 * glibc) makes dlsym malloc its error message, which must not touch the
 * host's heap (a program that allocates nothing has none). */
void *sym_dlsym(void *handle, const char *name) AGENT_HIDDEN;

/* The definition the process's calls of name reach without the agent,
 * for hooks through rewritten slots: dlsym(RTLD_DEFAULT, name), except
 * where that answer is the agent's own (a preloaded agent that defines
 * name first: then the next one) or a canonical PLT entry.  An
 * executable built without PIE that takes a function's address (Debian's python3.11 does for malloc and free)
 * exports its own PLT stub as the function, so that the address is the
 * same everywhere; dlsym answers the stub, while the GOT slots were bound
 * (the stub's own among them) to the definition in the first object, in
 * load order, that defines the name.  That definition is returned then:
 * forwarding to the stub would run through a slot the agent rewrites.
 * NULL when nothing defines name. */
void *sym_global(const char *name) AGENT_HIDDEN;

/* What the agent forwards name to: sym_global's answer when its hooks
 * go through rewritten slots (agent_slots, config.h), the next definition
 * after the agent's (dlsym RTLD_NEXT, allocations in the bootstrap
 * buffer) when the process's calls reach its exported functions. */
void *sym_forward(const char *name) AGENT_HIDDEN;

/* a and b lie in the same loaded object; sym_ours(f): in the agent's. */
int sym_same_object(const void *a, const void *b) AGENT_HIDDEN;
int sym_ours(const void *f) AGENT_HIDDEN;

/* Which object, first in load order, defines name (a preloaded agent's
 * constructor: the global scope is the load order then, and its first
 * definition is what every call of name binds to): SYM_DEF_OURS, the
 * executable (SYM_DEF_PROGRAM), another object, or none. */
enum { SYM_DEF_NONE, SYM_DEF_OURS, SYM_DEF_PROGRAM, SYM_DEF_OTHER };
int sym_first_definer(const char *name) AGENT_HIDDEN;

#endif
