/*
 * life: the agent's process life: the constructor (preloaded or injected),
 * the first slow path of each thread, fork, and the destructor.  life.c
 * opens with the map of the agent's files and of who writes what.
 */
#ifndef YMTOP_AGENT_LIFE_H
#define YMTOP_AGENT_LIFE_H

#include "base.h"
#include "threads.h"

/* Loaded by ymtop -p (dlopen through ptrace): hooks through GOT slots
 * (got.c), the real functions from RTLD_DEFAULT.  Set by the constructor,
 * before anything else runs. */
extern int agent_injected AGENT_HIDDEN;

/* The hooks reach the process through rewritten slots (got.c), and
 * forward to what those held (symbols.h, sym_global): injected, or
 * preloaded behind an object that defines malloc first (an allocator
 * earlier in LD_PRELOAD, or the executable's own).  Set by the
 * constructor, before anything else runs. */
extern int agent_slots AGENT_HIDDEN;

/* Slow-path entry: make sure the agent is initialized and this thread has
 * a slot (or knows it shares slot 0).  Guard held by the caller; the
 * host's errno is kept. */
void agent_enter(struct agent_tls *t) AGENT_HIDDEN;

#endif
