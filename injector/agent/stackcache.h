/*
 * stackcache: what a thread keeps of its previous sample so that the next
 * one with the same stack costs less: its unwinder memo (unwind.h: a
 * deep stack that repeats is replayed with a compare a frame instead of a
 * rule lookup a frame) and the stack it interned last (a sample whose
 * frames equal those, compared in full, takes its id without hashing and
 * probing the stack index).  Neither can give a wrong stack: the memo
 * replays a step only when the stack words it loaded are unchanged, and
 * the last stack is reused only when every frame, the depth and the kind
 * are equal and it is of the segment the tables map now.
 *
 * STACKCACHE_ENTRIES entries, each claimed by a thread at its first
 * sample and given back at its exit (a fork child starts with all free):
 * an entry is only ever used by its thread.  Threads that find none free
 * go without.  Static (.bss), backed as touched: about 23 KiB an entry.
 */
#ifndef YMTOP_AGENT_STACKCACHE_H
#define YMTOP_AGENT_STACKCACHE_H

#include <stdint.h>

#include "base.h"
#include "table.h"
#include "unwind.h"

#define STACKCACHE_ENTRIES 16u

struct stackcache;

/* The calling thread's entry (*slot: its agent_tls.stackcache), claimed
 * now if it has not asked before; NULL: none. */
struct stackcache *stackcache_of(uint32_t *slot) AGENT_HIDDEN;
/* The thread exits: its entry is free again. */
void stackcache_release(uint32_t *slot) AGENT_HIDDEN;
/* In a fork child: every entry free (the parent's threads are gone). */
void stackcache_fork_child(void) AGENT_HIDDEN;
/* Its unwinder memo (sc not NULL). */
struct unwind_memo *stackcache_memo(struct stackcache *sc) AGENT_HIDDEN;
/* table_intern_kind, through sc's last stack (sc may be NULL). */
uint32_t stackcache_intern(struct stackcache *sc, const uint64_t *frames,
			   uint32_t depth, uint32_t tid, uint64_t now,
			   uint32_t kind) AGENT_HIDDEN;

#endif
