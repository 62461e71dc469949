/*
 * chain: may a stopped thread run dlopen now?  Not with its PC, nor with
 * a return address of its call chain (unwound with libdw), inside libc's
 * allocator or ld.so (under musl: the code of libc.so that holds a lock
 * dlopen takes): dlopen and the agent's constructor take their locks.  Runs in ymtop.
 *
 * Ownership: inject_chain_open readies libdw for one target before any
 * thread is stopped; inject_chain_close frees it.  The ranges are
 * borrowed from the caller's libc_syms and tmaps, which outlive it.
 */
#ifndef YMTOP_INJECT_CHAIN_H
#define YMTOP_INJECT_CHAIN_H

#include <sys/types.h>

#include "ptrace/borrow.h"
#include "ptrace/libcsyms.h"
#include "ptrace/procfs.h"

struct Dwfl;

struct chain {
	struct Dwfl  *dwfl;      /* NULL: unwinding unavailable, scan instead */
	struct borrow *t;        /* the thread being unwound */
	const struct range *malloc_text, *ldso;
	const struct libc_syms *libc;   /* musl's lock_text (libcsyms.h) */
	int           depth;     /* frames seen by this walk */
	int           hit;       /* a frame inside the allocator or ld.so */
};

/* Ready libdw for pid's threads.  Never fails: without libdw's state,
 * inject_safe_moment falls back to a conservative stack scan. */
void inject_chain_open(struct chain *c, pid_t pid, const struct libc_syms *s,
		       const struct tmaps *m);
void inject_chain_close(struct chain *c);

/* 1: t (stopped, t->regs read) may run dlopen now; 0: not now. */
int inject_safe_moment(struct borrow *t, struct chain *c);

/* The call chain of t alone: 1 no frame in the ranges, 0 one is, -1 not
 * enough of the chain is known (quiesce.c then scans the stack). */
int inject_chain_clear(struct borrow *t, struct chain *c);

#endif
