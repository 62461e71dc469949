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

/* For hooks_cxx.c, which counts the allocator's operators as these are
 * counted: jemalloc's names, the global definitions found (all or none),
 * the search of the global scope (once); whether a call is counted
 * (registering the thread first), an allocation p of n bytes counted
 * (and sampled), a free of p counted before the call (0: no jemalloc,
 * freed here through next). */
#define HOOKS_JE_N 5
extern const char *const hooks_je_names[HOOKS_JE_N] AGENT_HIDDEN;
void hooks_je_set(void *const f[HOOKS_JE_N]) AGENT_HIDDEN;
void hooks_je_global(void) AGENT_HIDDEN;
struct agent_tls;
int  hooks_je_counting(struct agent_tls *t) AGENT_HIDDEN;
void hooks_je_count_alloc(struct agent_tls *t, void *p, size_t n) AGENT_HIDDEN;
int  hooks_je_freeing(void *p, void *next, int counted) AGENT_HIDDEN;

#endif
