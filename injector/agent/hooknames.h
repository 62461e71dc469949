/*
 * hooknames: the exported entry points of hooks.c and hooks_life.c under
 * hidden names (header only: the names are their HIDDEN_ALIASes; the
 * other prototypes are libc's).
 */
#ifndef YMTOP_AGENT_HOOKNAMES_H
#define YMTOP_AGENT_HOOKNAMES_H

#include <stddef.h>
#include <sys/types.h>

#include "base.h"

/* The exported entry points under hidden names: calls and
 * addresses that never go through our own GOT (which, in a dlopen'ed
 * agent, binds malloc to the process's allocator, not to us). */
void *hook_malloc(size_t) AGENT_HIDDEN;
void  hook_free(void *) AGENT_HIDDEN;
void *hook_calloc(size_t, size_t) AGENT_HIDDEN;
void *hook_realloc(void *, size_t) AGENT_HIDDEN;
void *hook_reallocarray(void *, size_t, size_t) AGENT_HIDDEN;
int   hook_posix_memalign(void **, size_t, size_t) AGENT_HIDDEN;
void *hook_aligned_alloc(size_t, size_t) AGENT_HIDDEN;
void *hook_memalign(size_t, size_t) AGENT_HIDDEN;
void *hook_valloc(size_t) AGENT_HIDDEN;
void *hook_pvalloc(size_t) AGENT_HIDDEN;
void  hook__exit(int) __attribute__((noreturn)) AGENT_HIDDEN;
/* p lies in the bootstrap buffer: what the hooks give a call nested in
 * the agent (guard held) before the next functions are known. */
int   hooks_boot_block(const void *p) AGENT_HIDDEN;
/* A bootstrap block was ever handed out: it lies in the agent's own data,
 * and whoever holds it may free it after the agent is gone (detach.c). */
int   hooks_boot_lent(void) AGENT_HIDDEN;
void  hook__Exit(int) __attribute__((noreturn)) AGENT_HIDDEN;
int   hook_setuid(uid_t) AGENT_HIDDEN;
int   hook_seteuid(uid_t) AGENT_HIDDEN;
int   hook_setreuid(uid_t, uid_t) AGENT_HIDDEN;
int   hook_setresuid(uid_t, uid_t, uid_t) AGENT_HIDDEN;
int   hook_dlclose(void *) AGENT_HIDDEN;

#endif
