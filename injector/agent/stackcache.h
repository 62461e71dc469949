/*
 * stackcache: the stack a thread interned last, so that its next sample
 * with the same stack (every frame, the depth and the kind equal, in the
 * segment the tables map now) takes the stack's id without hashing the
 * frames and probing the stack index.  It can never give another stack:
 * the frames are compared in full.
 *
 * STACKCACHE_ENTRIES entries, each claimed by a thread at its first
 * sample and given back at its exit (a fork child starts with all free):
 * an entry is only ever used by its thread.  Threads that find none free
 * go without.  Static (.bss), backed as touched: about 2 KiB an entry.
 */
#ifndef YMTOP_AGENT_STACKCACHE_H
#define YMTOP_AGENT_STACKCACHE_H

#include <stdint.h>

#include "base.h"
#include "table.h"

#define STACKCACHE_ENTRIES 16u

struct stackcache;

/* The calling thread's entry (*slot: its agent_tls.stackcache), claimed
 * now if it has not asked before; NULL: none. */
struct stackcache *stackcache_of(uint32_t *slot) AGENT_HIDDEN;
/* The thread exits: its entry is free again. */
void stackcache_release(uint32_t *slot) AGENT_HIDDEN;
/* In a fork child: every entry free (the parent's threads are gone). */
void stackcache_fork_child(void) AGENT_HIDDEN;
/* table_intern_kind, through sc's last stack (sc may be NULL). */
uint32_t stackcache_intern(struct stackcache *sc, const uint64_t *frames,
			   uint32_t depth, uint32_t tid, uint64_t now,
			   uint32_t kind) AGENT_HIDDEN;

#endif
