/*
 * life: the agent's process life: the constructor (preloaded or injected),
 * the first slow path of each thread, fork, and the destructor.  life.c
 * opens with the map of the agent's files and of who writes what.
 */
#ifndef YMTOP_AGENT_LIFE_H
#define YMTOP_AGENT_LIFE_H

#include "base.h"
#include "threads.h"

/* Slow-path entry: make sure the agent is initialized and this thread has
 * a slot (or knows it shares slot 0).  Guard held by the caller; the
 * host's errno is kept. */
void agent_enter(struct agent_tls *t) AGENT_HIDDEN;

#endif
