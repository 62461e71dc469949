/*
 * seg: the shared segment's life: created once per process (and once per
 * child after fork) when first needed, retired at exit, handed to a new
 * owner at setuid.  The first slow path configures the agent and counts
 * from then on (SEG_PRE: threads.h's pre-slot); the segment is made at
 * the first sample (of an allocation, or of a mapping: at the next
 * allocation call), the first giant request, a second thread's first
 * call, or ymagent_start (ymtop -p), and at once when injected (not in
 * its fork children), in exact
 * mode or with YM_KEEP_SEGMENT: a short process that samples nothing
 * (a shell's) never pays for it.  The slow path that needs it makes it
 * (enter.h); the files below, which write its sections, only read its
 * state (segstate.h).  seg.c writes the header's fields fixed at
 * creation (magic last), and exit_mono_ns, EXITED, KEPT and uid; each
 * section is then written by its own file (life.c has the map).
 */
#ifndef YMTOP_AGENT_SEG_H
#define YMTOP_AGENT_SEG_H

#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "segstate.h"

/* The first slow path of a process: configuration, then SEG_PRE (the
 * segment when first needed) or SEG_PASSIVE.  1: the segment is to be
 * made at once (see above: seg_start), 0: when first needed, -1: nothing
 * was prepared here (passive, a vfork child, another thread's).  Guard
 * held. */
int seg_prepare(void) AGENT_HIDDEN;
/* SEG_PRE: make the segment now (the private tables, the segment, the
 * pre-slot moved in: SEG_ACTIVE, or SEG_PASSIVE after one line on
 * stderr).  calls_out 0 (the mmap path, whose caller may hold any lock):
 * not from there.  SEG_STARTED when this call made it (its caller then
 * replays what waited for it: enter.c), else 1 when the segment is
 * active, 0 not.  Guard held. */
#define SEG_STARTED 2
int seg_start(int calls_out) AGENT_HIDDEN;
/* A sample waits for the segment (a mapping made before it,
 * hooks_mmap.h): the next allocation call makes it (seg_wanted, from
 * agent_enter), where it may call out.  From any context. */
void seg_want(void) AGENT_HIDDEN;
/* SEG_PRE and seg_want was called. */
int seg_wanted(void) AGENT_HIDDEN;
/* A vfork child runs in our memory (a system call: not on fast paths). */
int seg_in_vfork_child(void) AGENT_HIDDEN;
/* The constructor: this process owns the agent's state (a vfork child,
 * which shares it, does not: seg_prepare passes it through), and the
 * handler that records exit()'s status is registered (on_exit: never
 * from a malloc-family call, whose caller may hold its lock). */
void seg_note_owner(void) AGENT_HIDDEN;
/* After fork, in the child: stop writing into the parent's segment;
 * start one of our own lazily, on the next call (follow: YM_FOLLOW_FORK
 * and not disabled), or stay passive. */
void seg_fork_child(int follow) AGENT_HIDDEN;

/* Some allocator calls of the process cannot reach the agent (why:
 * YM_UNSEEN_*; object: its soname or file name, "" for the executable):
 * the first such note goes into this segment's header and every later
 * one's (YM_FLAG_UNSEEN), once it exists.  Never allocates; any thread. */
void seg_note_unseen(uint32_t why, const char *object) AGENT_HIDDEN;

/* The process is leaving (exit, or _exit which runs no destructors). */
void agent_exiting(void) AGENT_HIDDEN;
/* The same from the agent's destructor, run by exit(): YM_FLAG_EXITED may
 * be left to the on_exit handler, which publishes it after the status. */
void agent_exiting_in_exit(void) AGENT_HIDDEN;
/* An exec is about to replace the process's image: the segment's name
 * is removed; returns what seg_exec_failed needs (-1: nothing was done).
 * When the exec returns (it failed), seg_exec_failed names it again. */
int  seg_exec_begin(void) AGENT_HIDDEN;
void seg_exec_failed(int token) AGENT_HIDDEN;
/* Detach (detach.c): SEG_DETACHED for good, the segment's name removed
 * (1 when there was one), the exit handler's trampoline entry made a
 * `ret`.  The memory stays until seg_unmap.  Guard held. */
int  seg_detach(void) AGENT_HIDDEN;
/* The agent's destructor after detach (dlclose): the segment unmapped. */
void seg_unmap(void) AGENT_HIDDEN;

/* The process is about to take the effective uid `euid`. */
void agent_owner_change(uid_t euid) AGENT_HIDDEN;

#endif
