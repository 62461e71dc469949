/*
 * resume: the agent's half of an injection that survives ymtop's death
 * (the protocol is in resume.h).  Runs once, in the thread ymtop borrowed,
 * right after dlopen loaded us; no heap, no stdio.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "resume.h"

/* Is a tracer attached to this thread?  /proc/thread-self/status says. */
static int traced(void)
{
	char buf[2048];
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;   /* cannot tell: assume ymtop is there */
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nTracerPid:");
	if (!p)
		return 1;
	p += 11;
	while (*p == ' ' || *p == '\t')
		p++;
	return !(p[0] == '0' && (p[1] == '\n' || p[1] == '\0'));
}

/* Called by ymtop's stub with the block it wrote; never returns. */
__attribute__((visibility("default"), noreturn, used))
void ym_inject_resume(struct ym_resume *b);

void ym_inject_resume(struct ym_resume *b)
{
	if (b->magic != YM_RESUME_MAGIC)
		for (;;)
			__asm__ volatile("int3");
	__atomic_store_n(&b->state, 1, __ATOMIC_SEQ_CST);

	sigset_t cur;
	struct sigaction sa;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	int quiet = sigaction(SIGURG, NULL, &sa) == 0 &&
		    !(sa.sa_flags & SA_SIGINFO) &&
		    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) &&
		    !sigismember(&cur, SIGURG);
	if (quiet) {
		/* Traced: the tracer stops us at this signal and restores
		 * the thread itself; we never get past this call. */
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGURG);
	} else if (traced()) {
		/* SIGURG is the program's: trap instead, with the tracer
		 * just seen (a tracer dying in between kills the process,
		 * as a trap always did). */
		__asm__ volatile("int3");
	}

	/* ymtop is gone: back to the interrupted code, as a signal handler
	 * returns.  The frame ymtop wrote has every register; the signal
	 * mask and alternate stack are the thread's current ones. */
	ucontext_t *uc = (ucontext_t *)(uintptr_t)b->ucontext;
	memcpy(&uc->uc_sigmask, &cur, sizeof cur);
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0)
		uc->uc_stack = ss;
	__asm__ volatile("mov %0, %%rsp\n\t"
			 "mov %1, %%eax\n\t"
			 "syscall"
			 : : "r"(b->ucontext), "i"(SYS_rt_sigreturn) : "memory");
	__builtin_unreachable();
}
