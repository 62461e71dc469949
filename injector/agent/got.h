/*
 * got: the hooks installed by rewriting GOT slots and data words (got.c):
 * injected, or preloaded behind another object's malloc (agent_slots).
 */
#ifndef YMTOP_GOT_H
#define YMTOP_GOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"

/* A pointer read from an object's .dynamic (DT_SYMTAB, DT_JMPREL...):
 * glibc relocates them in place on x86-64; an object it did not (or a
 * non-PIE executable) keeps them as offsets from its load base. */
static inline uintptr_t got_dyn_ptr(uintptr_t base, uintptr_t p)
{
	return p < base ? base + p : p;
}

/* Take the real functions (sym_global: what the slots hold) before any
 * patch.  0 when malloc and free were found. */
int  got_init(void) AGENT_HIDDEN;
/* Rewrite the slots of every object of the base namespace but ours, ld.so
 * and the vDSO; idempotent, serialized, preserves errno. */
void got_patch_all(void) AGENT_HIDDEN;
/* The same, unless a patch is running (then it will see the objects). */
void got_patch_try(void) AGENT_HIDDEN;

/* The exported entry points of hooks.c under hidden names: calls and
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
void  hook__Exit(int) __attribute__((noreturn)) AGENT_HIDDEN;
int   hook_setuid(uid_t) AGENT_HIDDEN;
int   hook_seteuid(uid_t) AGENT_HIDDEN;
int   hook_setreuid(uid_t, uid_t) AGENT_HIDDEN;
int   hook_setresuid(uid_t, uid_t, uid_t) AGENT_HIDDEN;
int   hook_dlclose(void *) AGENT_HIDDEN;

#endif
