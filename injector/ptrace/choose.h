/*
 * choose: stop the target's threads one at a time (PTRACE_SEIZE +
 * PTRACE_INTERRUPT) until one is at a safe moment (chain.h), letting the
 * others go at once; and wait for another ymtop that traces the target.
 * Runs in ymtop.
 */
#ifndef YMTOP_INJECT_CHOOSE_H
#define YMTOP_INJECT_CHOOSE_H

#include <stddef.h>
#include <sys/types.h>

#include "ptrace/borrow.h"
#include "ptrace/chain.h"

#define INJECT_SAFE_WAIT_MS 2000.0   /* give up finding a safe moment */
#define INJECT_MAX_TIDS     4096     /* threads looked at */

/* Stop a thread of t->pid at a safe moment, into t (t->pid, t->mem set;
 * tids: room for INJECT_MAX_TIDS, the caller's).  Each thread stopped
 * counts in *attempts.  1: t is stopped there, the caller lets it go;
 * -1: refused or timed out (err), nothing stopped; -2: another ymtop
 * traces the process (it is loading the agent), nothing stopped. */
int inject_choose_thread(struct borrow *t, struct chain *c, pid_t *tids,
			 int *attempts, char *err, size_t len);

/* When another ymtop traces pid (it is loading the agent), wait until it
 * lets go.  1 it did (look again), 0 the tracer is no ymtop, -1 it kept
 * tracing past any injection's time (err set). */
int inject_wait_other_ymtop(pid_t pid, pid_t tracer, char *err, size_t len);

#endif
