/* borrow: see borrow.h. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/borrow.h"
#include "ptrace/util.h"
#include "resume.h"

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

void inject_keep_signal(struct borrow *t, int sig)
{
	if (t->npending < INJECT_MAX_PENDING)
		t->pending[t->npending++] = sig;
}

void inject_let_go(struct borrow *t)
{
	int first = 0;
	if (t->in_sigstop && t->npending > 0)
		first = t->pending[0];
	ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)first);
	for (int i = first ? 1 : 0; i < t->npending; i++)
		syscall(SYS_tgkill, t->pid, t->tid, t->pending[i]);
}

int inject_mem_read(struct borrow *t, uintptr_t at, void *buf, size_t n)
{
	return pread(t->mem, buf, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

int inject_mem_write(struct borrow *t, uintptr_t at, const void *buf, size_t n)
{
	return pwrite(t->mem, buf, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

int inject_wait_stop(pid_t tid, int *status, double ms)
{
	double end = inject_now_ms() + ms;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return WIFSTOPPED(*status) ? 1 : -1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (inject_now_ms() > end)
			return 0;
		inject_nap_us(50);
	}
}

/* Some waits fail with EINTR when their thread is merely stopped and
 * resumed (signal(7): epoll_wait, sigtimedwait, semop...), where other
 * calls restart.  Without a timeout, restarting is exactly what the
 * thread would have done had it not been stopped: rewind to the syscall
 * instruction.  A wait with a timeout keeps its EINTR (restarting would
 * extend the wait), as after any SIGSTOP/SIGCONT or debugger attach. */
void inject_restart_eintr_wait(struct borrow *t)
{
	struct user_regs_struct *r = &t->regs;
	if (t->npending || (int64_t)r->rax != -EINTR || (int64_t)r->orig_rax < 0)
		return;
	int forever;
	switch (r->orig_rax) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		forever = (int)r->r10 == -1;
		break;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_rt_sigtimedwait:
	case SYS_semtimedop:
		forever = r->r10 == 0;   /* NULL timeout */
		break;
	case SYS_semop:
		forever = 1;
		break;
	default:
		return;
	}
	unsigned char insn[2];
	if (!forever || inject_mem_read(t, r->rip - 2, insn, 2) != 0 ||
	    insn[0] != 0x0f || insn[1] != 0x05)
		return;
	r->rax = r->orig_rax;
	r->rip -= 2;
}

/* Has the agent's resume function marked the block (so the thread stands
 * in ym_inject_resume, dlopen done)? */
static int resumed(struct borrow *t, const struct call *c)
{
	uint64_t state = 0;
	return c->resume &&
	       inject_mem_read(t, c->resume + offsetof(struct ym_resume, state), &state,
			       sizeof state) == 0 && state == 1;
}

int inject_remote_call(struct borrow *t, const struct call *c, uint64_t *ret,
		       int *gone, char *err, size_t len)
{
	struct user_regs_struct r = t->regs;
	r.rip = t->code_at;
	r.rax = c->fn;
	r.rdi = c->a0;
	r.rsi = c->a1;
	r.rdx = c->a2;
	r.rbx = c->rbx;
	r.r13 = c->r13;
	r.r14 = c->r14;
	r.rsp = c->sp;
	r.orig_rax = (uint64_t)-1;   /* no syscall restart into our code */
	r.eflags &= ~(uint64_t)0x400;   /* DF clear, as the ABI wants */
	*gone = 0;
	if (inject_mem_write(t, t->code_at, c->code, c->code_len) != 0) {
		inject_fail(err, len, "cannot write the target's memory: %s",
			    strerror(errno));
		return -1;
	}
	/* Before the survive stub's mark, each system call of the thread
	 * stops it (PTRACE_SYSCALL; TRACESYSGOOD tells those stops apart). */
	int go = c->survive ? PTRACE_SYSCALL : PTRACE_CONT;
	if ((c->survive && ptrace(PTRACE_SETOPTIONS, t->tid, 0,
				  (void *)(long)PTRACE_O_TRACESYSGOOD) != 0) ||
	    ptrace(PTRACE_SETREGS, t->tid, 0, &r) != 0 ||
	    ptrace(go, t->tid, 0, 0) != 0) {
		inject_fail(err, len, "ptrace: cannot run the call in thread %ld: %s",
			    (long)t->tid, strerror(errno));
		return -1;
	}
	t->in_sigstop = 0;
	/* Test hook (tests/integration/test_faults.py): ymtop killed while
	 * the thread runs dlopen, or another call; it must get back by
	 * itself (resume.h, survive_stub). */
	const char *fault = getenv("YM_TEST_FAULT");
	if (fault && ((!strcmp(fault, "inject-call") && c->resume) ||
		      (!strcmp(fault, "borrow-call") && c->survive)))
		raise(SIGKILL);
	int marked = 0;   /* survive: past the mark, waiting for its stop */
	double end = inject_now_ms() + INJECT_CALL_WAIT_MS;
	for (;;) {
		int st;
		int w = inject_wait_stop(t->tid, &st, end - inject_now_ms());
		if (w < 0) {
			*gone = 1;
			inject_fail(err, len, "the process exited while the agent was "
				    "loading");
			return -1;
		}
		if (w == 0) {
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			if (inject_wait_stop(t->tid, &st, 1e9) < 0)
				*gone = 1;
			inject_fail(err, len, "dlopen did not return within %.0f s in "
				    "thread %ld; the thread was restored",
				    INJECT_CALL_WAIT_MS / 1000, (long)t->tid);
			return -1;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {   /* our interrupt, or a group stop */
			ptrace(go, t->tid, 0, 0);
			continue;
		}
		if (sig == (SIGTRAP | 0x80)) {   /* a system call's entry or exit */
			struct user_regs_struct now;
			int at_mark = ptrace(PTRACE_GETREGS, t->tid, 0, &now) == 0 &&
				      now.rip == t->code_at + c->mark_end;
			int set = 0;
			if (at_mark && !marked && now.orig_rax == SYS_getpid &&
			    (int64_t)now.rax == -ENOSYS) {
				/* The mark's entry: the call is done.  Its
				 * getpid becomes the stop that ends it: a
				 * tgkill of SIGURG, or (skipped) the int3. */
				*ret = now.rdi;
				marked = 1;
				set = 1;
				if (c->urg) {
					now.orig_rax = SYS_tgkill;
					now.rdi = (uint64_t)c->urg_pid;
					now.rsi = (uint64_t)c->urg_tid;
					now.rdx = SIGURG;
				} else {
					now.orig_rax = (uint64_t)-1;
					now.rip = t->code_at + c->code_len - 1;
					go = PTRACE_CONT;
				}
			} else if (at_mark && marked && now.orig_rax == SYS_tgkill) {
				/* The tgkill's exit: sent, its stop comes
				 * next; else the int3. */
				go = PTRACE_CONT;
				if ((int64_t)now.rax != 0) {
					now.rip = t->code_at + c->code_len - 1;
					set = 1;
				}
			}
			if (set && ptrace(PTRACE_SETREGS, t->tid, 0, &now) != 0) {
				inject_fail(err, len, "ptrace: cannot end the call in "
					    "thread %ld: %s", (long)t->tid, strerror(errno));
				return -1;
			}
			ptrace(go, t->tid, 0, 0);
			continue;
		}
		t->in_sigstop = 1;
		/* The survive stub's own SIGURG, after its mark: not to be
		 * delivered. */
		if (marked && sig == SIGURG)
			return 0;
		/* The agent's own SIGURG (or trap) once dlopen is done: the
		 * signal is ours, not to be delivered. */
		if ((sig == SIGURG || sig == SIGTRAP) && resumed(t, c)) {
			*ret = 1;
			return 0;
		}
		if (sig == SIGTRAP) {
			struct user_regs_struct now;
			if (ptrace(PTRACE_GETREGS, t->tid, 0, &now) == 0 &&
			    now.rip == t->code_at + c->code_len) {
				if (!marked)
					*ret = now.rax;
				return 0;
			}
		}
		siginfo_t si;
		if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) &&
		    ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 && si.si_code > 0) {
			inject_fail(err, len, "the target faulted (signal %d) while "
				    "loading the agent; its thread was restored", sig);
			return -1;
		}
		inject_keep_signal(t, sig);   /* delivered at the detach */
		t->in_sigstop = 0;
		ptrace(go, t->tid, 0, 0);
	}
}

int inject_restore(struct borrow *t)
{
	int rc = 0;
	if (t->code_saved && inject_mem_write(t, t->code_at, t->code, sizeof t->code) != 0)
		rc = -1;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) != 0)
		rc = -1;
	if (t->xlen) {
		struct iovec iov = { t->xstate, t->xlen };
		if (ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) != 0)
			rc = -1;
	}
	return rc;
}
