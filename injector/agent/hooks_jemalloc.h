/*
 * hooks_jemalloc: jemalloc's non-standard API, interposed (hooks_jemalloc.c):
 * mallocx, rallocx, xallocx, sdallocx, dallocx, counted and sampled as
 * the malloc family is (exact totals in the thread's slot, the byte
 * countdown charged with the usable size, samples through sampling.h),
 * then forwarded to the next definition.  sallocx, nallocx and
 * malloc_usable_size are not interposed: pointers and sizes are never
 * changed, so the allocator's own answers stay right.
 *
 * Preloaded, the agent exports these names whatever the process uses.
 * When no later object of the global scope defines them, the caller's
 * own scope is searched (a plugin dlopen'ed RTLD_LOCAL and linked with
 * libjemalloc: its calls are forwarded there, uncounted); when that has
 * none either (no jemalloc) each is carried out with the malloc family's
 * hooks (alignment and MALLOCX_ZERO honoured), so a program that tests
 * for them with weak symbols still works.
 * Injected (ymtop -p), got.c rewrites the slots that were bound to
 * jemalloc's: a process without them never calls these hooks.
 */
#ifndef YMTOP_AGENT_HOOKS_JEMALLOC_H
#define YMTOP_AGENT_HOOKS_JEMALLOC_H

#include <stddef.h>

#include "base.h"

void  *hook_mallocx(size_t n, int flags) AGENT_HIDDEN;
void  *hook_rallocx(void *p, size_t n, int flags) AGENT_HIDDEN;
size_t hook_xallocx(void *p, size_t n, size_t extra, int flags) AGENT_HIDDEN;
void   hook_sdallocx(void *p, size_t n, int flags) AGENT_HIDDEN;
void   hook_dallocx(void *p, int flags) AGENT_HIDDEN;

/* Searches the global scope for the definitions these forward to (once:
 * dlsym takes the loader's lock, which a dlopen holds while constructors
 * run, so not from a hook if it can be helped).  Called by the agent's
 * constructor once the malloc family is resolved. */
void hooks_jemalloc_resolve(void) AGENT_HIDDEN;

/* C++ operator new and delete (every sized, aligned and nothrow form):
 * jemalloc, tcmalloc and mimalloc define their own, which never reach
 * malloc's slot.  Each is forwarded to the next definition, and counted
 * as malloc and free are when that definition lies in the object of the
 * malloc the agent forwards to; otherwise (libstdc++'s, which calls
 * malloc) it is a tail call.  With none in the global scope, the
 * caller's scope's (libstdc++ loaded RTLD_LOCAL under a plugin), a tail
 * call too.  For got.c: their mangled names and our
 * definitions, i < HOOKS_CXX_N. */
#define HOOKS_CXX_N 20
extern const char *const hooks_cxx_names[HOOKS_CXX_N] AGENT_HIDDEN;
void *hooks_cxx_fn(unsigned i) AGENT_HIDDEN;

#endif
