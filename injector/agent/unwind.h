/*
 * The calling thread's stack, from the .eh_frame call-frame information of
 * the modules it runs in (x86_64, glibc >= 2.35).  Self-contained: no
 * libunwind, no malloc, no lock, no stdio; async-signal-safe.
 *
 * Cost (tests/bench/unwind_bench.c, make bench): with the rules cached, a
 * frame is a probe of one 64-byte set of a private table and one or two
 * loads from the stack, a chain of dependent loads of about 7 ns a frame:
 * 16 frames about 108 ns (libunwind's cached unw_backtrace: 115 ns on the
 * same machine).  A miss (the first sample through a return address)
 * costs _dl_find_object, a binary search of the module's .eh_frame_hdr
 * and the CFA program of one function: about 100-150 ns.
 *
 * What it follows: CFA = RSP or RBP + offset, the return address and RBP
 * saved at CFA + offset (or RBP unchanged); a CFA expression of the form
 * the linker writes for .plt entries; the signal trampoline __restore_rt
 * (the interrupted RIP, RSP and RBP from the ucontext on the stack).  It
 * stops at anything else: a return address outside every loaded module,
 * CFI it does not model, a CFA that does not grow, is misaligned or lies
 * 256 MiB or more above the stack pointer it started from (or above the
 * last signal frame's).  Every load is from [SP, CFA) of a frame whose
 * CFA passed those checks, or from a signal frame the kernel wrote.
 */
#ifndef YMTOP_UNWIND_H
#define YMTOP_UNWIND_H

#include <stdint.h>

/* Return addresses, innermost first, starting with the one into the
 * caller of unwind_backtrace (as unw_backtrace gives them); after a signal
 * frame, the interrupted instruction's address itself.  At most max;
 * returns how many. */
int unwind_backtrace(uint64_t *frames, int max);

/* A thread's record of its previous walk (unwind_backtrace_memo): the
 * states (IP, SP, RBP) it passed and where it loaded each caller's return
 * address and RBP from.  Owned by one thread at a time (any walk that
 * uses it runs on that thread); zero-filled is empty.  About 10 KiB. */
#define UNWIND_MEMO_STATES 128u
struct unwind_memo_state {
	uint64_t ip, sp, bp;
	uint64_t ra_at, bp_at;   /* bp_at 0: RBP not read from the stack */
	uint32_t flags;          /* UNWIND_MEMO_* of the step from here */
};
/* The step uses RBP (CFA = RBP + offset); it hands RBP on unchanged. */
#define UNWIND_MEMO_USES  1u
#define UNWIND_MEMO_CARRY 2u
struct unwind_memo_walk {
	uint32_t n;              /* steps: states 0 .. n are kept */
	struct unwind_memo_state s[UNWIND_MEMO_STATES];
};
struct unwind_memo {
	uint32_t gen;            /* the rule cache's generation of cur */
	uint32_t cur;            /* w[cur & 1]: the previous walk */
	uint64_t hits;           /* steps replayed from the record */
	struct unwind_memo_walk w[2];
};

/* unwind_backtrace, the same frames always, with the calling thread's
 * memo m: from a state the previous walk passed, a step whose stack words
 * still hold what that walk loaded is taken from the record (one or two
 * loads and compares, no rule lookup); the first word that differs (a
 * different caller deeper down) makes the walk go by the rules from
 * there.  So a repeated deep stack costs a compare a frame, and no record
 * can make a walk answer with another stack. */
int unwind_backtrace_memo(uint64_t *frames, int max, struct unwind_memo *m);

/* Forget every cached rule: call it when a module may have been unloaded
 * (the loader's dlpi_subs moved), before its addresses can be reused by
 * another.  Lock-free; rules being cached meanwhile are dropped too. */
void unwind_flush(void);

/* The loader's dlpi_subs (dl_iterate_phdr) as read now: flushes when it
 * moved since the last call, i.e. when an object was unloaded (loads alone
 * never make a cached rule wrong).  The agent calls it from its module
 * scan, at most a millisecond after a change, on the sampled path. */
void unwind_sync(unsigned long long subs);

#endif
