/*
 * hooks_cxx: the allocator's own C++ operator new and delete, interposed
 * (hooks_cxx.c), counted as jemalloc's API is (hooks_jemalloc.h).
 */
#ifndef YMTOP_AGENT_HOOKS_CXX_H
#define YMTOP_AGENT_HOOKS_CXX_H

#include "base.h"

/* C++ operator new and delete (every sized, aligned and nothrow form):
 * jemalloc, tcmalloc and mimalloc define their own, which never reach
 * malloc's slot.  Each is forwarded to the next definition, and counted
 * as malloc and free are when that definition lies in the object of the
 * malloc the agent forwards to; otherwise (libstdc++'s, which calls
 * malloc) it is a tail call.  With none in the global scope, the
 * caller's scope's (libstdc++ loaded RTLD_LOCAL under a plugin), a tail
 * call too (hooks_cxx.c).  For got.c: their mangled names and our
 * definitions, i < HOOKS_CXX_N. */
#define HOOKS_CXX_N 20
extern const char *const hooks_cxx_names[HOOKS_CXX_N] AGENT_HIDDEN;
void *hooks_cxx_fn(unsigned i) AGENT_HIDDEN;

/* Searches the global scope for the definitions these and jemalloc's API
 * (hooks_jemalloc.h) forward to (once: dlsym takes the loader's
 * lock, which a dlopen holds while constructors run, so not from a hook
 * if it can be helped).  Called by the agent's constructor once the
 * malloc family is resolved; one walk of the objects for both. */
void hooks_cxx_resolve(void) AGENT_HIDDEN;

#endif
