/*
 * resume: how a thread borrowed by ymtop -p gets back to its own code when
 * ymtop is gone.  The contract between inject.c (ymtop, which writes the
 * block) and resume.c (the agent, which reads it).
 *
 * ymtop makes the thread call dlopen(agent), then dlsym(handle,
 * YM_RESUME_SYMBOL), then that function with a struct ym_resume on the
 * thread's stack (below its red zone).  The function marks the block and
 * raises SIGURG on its own thread:
 * - ymtop alive (the normal case): the thread stops for the tracer at the
 *   signal; ymtop sees the mark, restores registers, extended state and
 *   memory itself, as after any call, and drops the signal.
 * - ymtop killed meanwhile: nobody stops the thread; SIGURG is ignored by
 *   default (a program with a SIGURG handler gets one spurious call, which
 *   such programs, Go's runtime for one, accept; with a handler installed
 *   the agent first checks that a tracer is still there).  The function
 *   then returns the thread to where it was with rt_sigreturn over the
 *   signal frame ymtop prepared in the block: general registers, flags,
 *   stack, extended state (XSAVE image) and signal mask in one step.
 *
 * Fixed-width fields; the frame is what rt_sigreturn reads at the stack
 * pointer: a return address slot, then the kernel's struct ucontext (the
 * prefix of glibc's ucontext_t), and the XSAVE image it points to.
 */
#ifndef YMTOP_RESUME_H
#define YMTOP_RESUME_H

#include <stdint.h>

#define YM_RESUME_SYMBOL "ym_inject_resume"
#define YM_RESUME_MAGIC  0x594d524553554d45ULL   /* "YMRESUME" */

struct ym_resume {
	uint64_t magic;         /* YM_RESUME_MAGIC, written by ymtop */
	uint64_t state;         /* 0 by ymtop; 1 once the agent resumes */
	uint64_t frame;         /* address of the signal frame (16-aligned) */
	uint64_t ucontext;      /* frame + 8: the ucontext_t to complete */
	char     symbol[32];    /* YM_RESUME_SYMBOL, for dlsym */
};

#endif
