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
