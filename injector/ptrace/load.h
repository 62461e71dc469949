/*
 * load: what the borrowed thread is made to do: dlopen the agent (by its
 * path, or brought in through a memfd), or start an agent already loaded.
 * Each writes its stub over libc's ELF entry point (code that never runs
 * after start-up), saving the bytes in t->code for inject_restore; the
 * caller restores and lets the thread go on every path.  Runs in ymtop.
 */
#ifndef YMTOP_INJECT_LOAD_H
#define YMTOP_INJECT_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/borrow.h"
#include "ptrace/libcsyms.h"

/* Load agent through the stopped thread t: by its path, or brought in
 * through a memfd (bring).  0 on success, -1 (err), -2 the process is
 * gone. */
int inject_load_agent(struct borrow *t, const struct libc_syms *s,
		      const char *agent, int bring, char *err, size_t len);

/* The agent is mapped but has no segment: call its ymagent_start (name:
 * the process's, for messages).  0; -1 (err); -2 gone; -3 (err) an
 * earlier detach left it dormant (inject_agent unloads it and loads it
 * afresh). */
int inject_start_agent(struct borrow *t, const struct libc_syms *s,
		       const char *name, char *err, size_t len);

/* The agent is active: make it take the allocator's statistics now
 * (its ymagent_heapstats: at fn, found by inject_agent_symbol, or when 0
 * by name, which finds a preloaded agent's only).  0; -1 (err); -2
 * gone. */
int inject_heapstats_call(struct borrow *t, const struct libc_syms *s,
			  const char *name, uintptr_t fn, char *err, size_t len);

/* Detach: ymagent_detach (fn) and, when it allows the unload,
 * ymagent_unload_handle (fn_handle) in t; then, once the unload rule
 * holds, ymagent_release and dlclose(handle).  0; -1 (err); -2 gone. */
int inject_detach_call(struct borrow *t, const struct libc_syms *s,
		       const char *name, uintptr_t fn, uintptr_t fn_handle,
		       int *code, uint64_t *handle, char *err, size_t len);
int inject_dlclose_call(struct borrow *t, const struct libc_syms *s,
			uintptr_t fn_release, uint64_t handle, int *ret,
			char *err, size_t len);

#endif
