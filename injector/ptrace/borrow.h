/*
 * borrow: one thread of the target, stopped under ptrace and borrowed to
 * make calls in it; its registers, extended state and the code bytes our
 * stub overwrote are kept to be put back exactly.  Runs in ymtop.
 *
 * Ownership: the caller opens t->mem (/proc/PID/mem) and allocates
 * t->xstate (INJECT_XSTATE_MAX bytes) and frees both; a borrow holds no
 * other resource.  Every path that stopped the thread ends in
 * inject_let_go, after inject_restore once anything was changed.
 */
#ifndef YMTOP_INJECT_BORROW_H
#define YMTOP_INJECT_BORROW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define INJECT_XSTATE_MAX   (64 * 1024)
#define INJECT_MAX_PENDING  16
#define INJECT_CALL_WAIT_MS 10000.0   /* dlopen in the target */
/* Code bytes saved at t->code_at: the longest stub (load.c asserts it). */
#define INJECT_CODE_MAX     27

struct borrow {
	pid_t  pid, tid;
	int    mem;                      /* /proc/pid/mem */
	struct user_regs_struct regs;    /* as stopped */
	void  *xstate;
	size_t xlen;
	int    in_sigstop;               /* stopped in signal-delivery-stop */
	int    pending[INJECT_MAX_PENDING];   /* signals to deliver at the detach */
	int    npending;
	int    code_saved;
	double stopped_at;               /* ms, when it stopped */
	unsigned char code[INJECT_CODE_MAX];
	uintptr_t code_at;
};

/* One call made in the borrowed thread. */
struct call {
	const unsigned char *code;   /* the stub written at t->code_at */
	size_t    code_len;          /* its last byte is the int3 */
	uintptr_t fn;                /* in rax */
	uint64_t  a0, a1, a2;        /* rdi, rsi, rdx */
	uint64_t  sp;                /* 16-byte aligned at the call */
	uint64_t  rbx, r13, r14;     /* for resume_stub (rbx: survive_stub) */
	uintptr_t resume;            /* the struct ym_resume, or 0 */
	/* survive_stub (load.c): the call gets the thread back by itself
	 * should ymtop die.  The thread runs under PTRACE_SYSCALL until the
	 * stub's mark, a getpid whose entry ends at mark_end (its result in
	 * rdi); there the getpid becomes a tgkill of SIGURG (urg: the
	 * process does not handle SIGURG), whose signal-delivery-stop ends
	 * the call, or is skipped for the stub's last byte, an int3. */
	int       survive, urg;
	pid_t     urg_pid, urg_tid;  /* the thread's ids as the target sees them */
	size_t    mark_end;
};

/* Keep sig (at most INJECT_MAX_PENDING) to deliver at the detach. */
void inject_keep_signal(struct borrow *t, int sig);

/* Detach, delivering kept signals: the first through the detach when the
 * thread is in a signal-delivery-stop, the others with tgkill. */
void inject_let_go(struct borrow *t);

/* n bytes of the target's memory at `at`, through t->mem.  0, or -1. */
int inject_mem_read(struct borrow *t, uintptr_t at, void *buf, size_t n);
int inject_mem_write(struct borrow *t, uintptr_t at, const void *buf, size_t n);

/* Wait for the thread's next stop.  1 stopped, 0 timed out, -1 gone. */
int inject_wait_stop(pid_t tid, int *status, double ms);

/* Rewind a wait without timeout that the stop made fail with EINTR to
 * its syscall instruction, as if it had never been stopped. */
void inject_restart_eintr_wait(struct borrow *t);

/* Make call c in the thread; the int3's rax in *ret, or 1 when the agent
 * resumed (resume.h).  0 done; -1 with err set (the thread is stopped
 * again, or gone: *gone). */
int inject_remote_call(struct borrow *t, const struct call *c, uint64_t *ret,
		       int *gone, char *err, size_t len);

/* Put back memory, registers and extended state.  0 when exact. */
int inject_restore(struct borrow *t);

#endif
