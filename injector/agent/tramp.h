/*
 * tramp: the trampoline page, the agent's one piece of code that outlives
 * it.  Function pointers the agent hands out while it is loaded (a GOT
 * GLOB_DAT slot or a data word rewritten to a hook is read by code that
 * may keep the value: `p = &free`, libcurl's Curl_cfree, an obstack's
 * chunk functions) and the exit handler registered with glibc (on_exit
 * cannot be unregistered) point here, not into the agent: entry i is one
 * `jmp *target[i]`.  Detach re-points every target at the real function
 * (the exit handler's at a `ret`), so that after the agent is unloaded
 * each such pointer still works and reaches no agent code.
 *
 * The page is never unmapped.  A later agent in the same process finds
 * it again by its name in /proc/self/maps (a memfd, "ymagent-trampoline",
 * mapped privately: a fork child's copy is its own) and re-points its
 * entries, kept by name, at its own hooks: attach and detach cycles cost
 * no new mapping, and a pointer handed out by an earlier agent reaches
 * the current one.  Without memfd or executable memfd mappings there is
 * no page: tramp_entry gives NULL and the caller uses its hook directly
 * (detach then cannot unload: tramp_complete says so).
 *
 * Two pages: code (read and execute: 16-byte entries, then a `ret`) and
 * data (read and write: magic, count, then each entry's name hash and
 * target).  A target is written with one aligned 8-byte store: a
 * caller sees the old or the new function, both correct.  Callers
 * serialize (got.c's lock, the constructor).
 */
#ifndef YMTOP_AGENT_TRAMP_H
#define YMTOP_AGENT_TRAMP_H

#include <stdint.h>

#include "base.h"

/* Find the process's page or make one.  0, or -1 (no page: every entry
 * is NULL).  Once per agent, before any entry is asked for. */
int tramp_init(void) AGENT_HIDDEN;

/* The entry for name (made if new) now jumping to target; NULL without a
 * page or when the page is full.  *fresh: 1 when the entry is new in this
 * process (a handler registered through it is not registered yet). */
void *tramp_entry(const char *name, void *target, int *fresh) AGENT_HIDDEN;

/* The entry named name, re-pointed at target (the real function, or
 * tramp_ret()); nothing when there is none. */
void tramp_point(const char *name, void *target) AGENT_HIDDEN;

/* 1 when p is an entry of the page. */
int tramp_holds(const void *p) AGENT_HIDDEN;

/* A `ret` in the page: the detached exit handler's target. */
void *tramp_ret(void) AGENT_HIDDEN;

/* 1 when no pointer into the agent can remain: every one it handed out
 * went through the page, every slot it patched was restored (a caller
 * that could not says tramp_refused). */
int tramp_complete(void) AGENT_HIDDEN;
void tramp_refused(void) AGENT_HIDDEN;

#endif
