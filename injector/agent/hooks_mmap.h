/*
 * hooks_mmap: anonymous memory the program maps itself (hooks_mmap.c).
 *
 * mmap, mmap64, munmap and mremap, interposed (preloaded: exported;
 * injected: got.c's slots).  An anonymous mapping (private or shared; a
 * file's mapping is not heap and is left out) made by the program is
 * sampled by bytes with the thread's countdown, as an allocation of its
 * page-rounded length, and counted on a stack of kind YM_KIND_MMAP
 * (segment.h), apart from the malloc family's.  Reservations (PROT_NONE
 * or MAP_NORESERVE: address space, not memory) are left out; memory
 * mprotect commits in them later is not seen.  Not counted: calls from
 * inside the agent (its guard, or a return address in its text) and calls
 * whose return address lies in the object that defines the malloc the
 * agent forwards to (jemalloc's and tcmalloc's own mappings through the
 * PLT: they are the allocator's, already counted as its blocks; glibc's
 * go through internal calls that never come here).  Nothing here touches
 * the malloc family's fast paths.
 *
 * Sampled mappings are kept in a private table (not the segment's live
 * table: an unmap names a range, not a block): munmap of a part of one
 * reduces its estimate in proportion (a hole splits it in two), mremap
 * moves and resizes it, keeping the stack that created it, its estimate
 * scaled with its length (a part moved: an entry of its own; the range
 * MREMAP_FIXED replaces: unmapped; MREMAP_DONTUNMAP: the old range stays,
 * the new one is a new mapping of the same stack).  Growth by mremap of a mapping that was not
 * sampled is not seen.  The table holds agent_cfg.max_live entries (at
 * most 65536); a sample that finds no room, or a split part of one, is
 * counted as dropped (header drop_live, YM_FLAG_OVERFLOWED).
 *
 * Mappings made before the segment exists (before the agent's first
 * call, or before its first sample) or by a thread that made no
 * malloc-family call yet are kept too: sampled with the same
 * probability, their stacks captured at the call, they join the tables
 * when the segment is made, and a sampled one makes the segment at the
 * next allocation call (seg.h).  At most 32 wait at once; more are
 * counted as dropped.
 */
#ifndef YMTOP_AGENT_HOOKS_MMAP_H
#define YMTOP_AGENT_HOOKS_MMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"

void *hook_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) AGENT_HIDDEN;
int   hook_munmap(void *addr, size_t len) AGENT_HIDDEN;
void *hook_mremap(void *old, size_t old_len, size_t new_len, int flags, ...) AGENT_HIDDEN;

/* Whether address a lies in the object that defines the malloc the agent
 * forwards to: 1 or 0, -1 not known yet (before the malloc family is
 * resolved). */
int   hooks_in_allocator(uintptr_t a) AGENT_HIDDEN;

/* The agent is configured (seg_prepare; enter.c asks): the mappings made
 * before are drawn; 1 when a sample of them waits for the segment.  Guard
 * held. */
int   mmap_pending_settle(void) AGENT_HIDDEN;
/* The segment is active (its maker, enter.c, after seg_start): the
 * waiting samples join its tables.  Guard held. */
struct agent_tls;
void  mmap_pending_replay(struct agent_tls *t) AGENT_HIDDEN;

/* After fork: the child's table starts empty (its segment is new). */
void  mmap_fork_child(void) AGENT_HIDDEN;

#endif
