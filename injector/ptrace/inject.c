/*
 * The ptrace injector (see inject.h for the protocol).  Runs in ymtop.
 *
 * Safety rules, in the order they are applied:
 * - Everything that can refuse does so before the first ptrace call: no
 *   such process, zombie or stopped, already traced, strict seccomp, not
 *   x86-64, statically linked (libckind), a musl program offered
 *   another agent than libymagent-musl.so, no dlopen in libc.  An agent already
 *   mapped but without a segment (a daemon that forked away and has not
 *   allocated since) is started, not loaded again (inject_start_agent);
 *   one an earlier detach left dormant is unloaded under the unload rule
 *   and loaded afresh (inject_agent).  While another thread holds the
 *   dynamic loader's lock, which dlopen and dlclose take, neither is
 *   called (ldlock).
 * - Only the chosen thread is stopped; the others run on and never meet
 *   our code (libc's entry point never runs after start-up).
 * - A thread may only be borrowed at a safe moment: not inside libc's
 *   allocator (its text is bounded by the nearest exported functions of
 *   other files) nor inside ld.so, and no return address into either in
 *   its call chain, unwound with libdw (a thread waiting for an arena
 *   lock).  dlopen and the agent's constructor take those locks.  musl's
 *   libc.so is its own ld.so: there the loader's code and the files that
 *   hold its other locks are bounded the same way (libcsyms.h), and a
 *   thread inside libc, which Debian's musl gives no CFI to unwind, only
 *   while it waits in a call none of them makes (chain.c).
 *   Otherwise it is let go at once, another thread is tried, and after a
 *   bounded time we give up with the target untouched.
 * - Registers (with orig_rax: an interrupted system call restarts only
 *   when they are restored), the extended state and the stub bytes are
 *   restored exactly before PTRACE_DETACH, on every path.  Signals that
 *   reach the thread meanwhile are kept and delivered at the detach.
 *
 * This file is the whole operation, in that order; each step is a module:
 *   procfs    what /proc tells before anything is touched
 *   libckind  glibc, musl or static: which agent can go in, if any
 *   libcsyms  libc's dynamic symbols, from its file (libelf)
 *   chain     the safe moment: the stopped thread's call chain (libdw)
 *   choose    stopping threads until one is at a safe moment
 *   borrow    the stopped thread: memory, remote calls, exact restore
 *   load      the calls made in it: dlopen the agent, or start it, or
 *             take the allocator's statistics (agentsym: where)
 *   ldlock    who holds the dynamic loader's lock, which dlopen and
 *             dlclose wait for (looked at first, never waited for blindly)
 *   quiesce   detach's unload rule: every thread outside the agent
 *   util      error line, clock
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ptrace/agentsym.h"
#include "ptrace/borrow.h"
#include "ptrace/chain.h"
#include "ptrace/choose.h"
#include "ptrace/inject.h"
#include "ptrace/ldlock.h"
#include "ptrace/libckind.h"
#include "ptrace/libcsyms.h"
#include "ptrace/load.h"
#include "ptrace/procfs.h"
#include "ptrace/quiesce.h"
#include "ptrace/util.h"
#include "ymtop/detach.h"

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* Another ymtop started tracing pid after our checks: wait until it is
 * done.  1 when it loaded the agent, else -1 (err). */
static int after_other_ymtop(pid_t pid, char *err, size_t len)
{
	struct pstatus ps;
	struct tmaps m;
	if (inject_read_status(pid, &ps) != 0) {
		inject_fail(err, len, "no process with pid %ld", (long)pid);
		return -1;
	}
	if (inject_wait_other_ymtop(pid, ps.tracer, err, len) < 0)
		return -1;
	if (inject_read_maps(pid, &m) == 0 && m.has_agent)
		return 1;
	inject_fail(err, len, "another ymtop (pid %ld) was loading the agent into "
		    "process %ld and did not succeed (see its message); retry",
		    (long)ps.tracer, (long)pid);
	return -1;
}

/* 0: go on; 1: the agent is loaded, by another ymtop that was doing it
 * when we looked (other: we waited for one); 2: another ymtop was
 * tracing the process and is done, look again; -1: refused (err). */
enum mode { LOAD, HEAP, DETACH, UNLOAD };

/* What a DETACH or UNLOAD borrow takes and gives. */
struct detach_io {
	uintptr_t fn, fn_handle;   /* DETACH: the agent's functions */
	uintptr_t fn_release;      /* UNLOAD: the agent's ymagent_release */
	int code;                  /* DETACH: ymagent_detach's YM_DETACH_* */
	uint64_t handle;           /* DETACH: out; UNLOAD: in */
	int closed;                /* UNLOAD: dlclose's result */
};

static int precheck(pid_t pid, struct pstatus *ps, struct tmaps *m, int other,
		    enum mode mode, const char *agent, char *err, size_t len)
{
	int rc = inject_read_status(pid, ps);
	if (rc == -ENOENT) {
		inject_fail(err, len, "no process with pid %ld", (long)pid);
		return -1;
	}
	if (rc < 0) {
		inject_fail(err, len, "cannot read /proc/%ld/status: %s", (long)pid,
			    strerror(-rc));
		return -1;
	}
	if (ps->state == 'Z' || ps->state == 'X') {
		inject_fail(err, len, "process %ld (%s) has exited (zombie)", (long)pid,
			    ps->name);
		return -1;
	}
	if (ps->tgid && ps->tgid != pid) {
		inject_fail(err, len, "%ld is a thread of process %ld (%s), not a "
			    "process; run ymtop -p %ld", (long)pid, (long)ps->tgid,
			    ps->name, (long)ps->tgid);
		return -1;
	}
	if (ps->tracer && mode != LOAD) {
		inject_fail(err, len, "process %ld (%s) is traced by pid %ld",
			    (long)pid, ps->name, (long)ps->tracer);
		return -1;
	}
	if (ps->tracer) {
		int w = inject_wait_other_ymtop(pid, ps->tracer, err, len);
		if (w > 0)
			return 2;   /* look again: the agent may be there now */
		if (w < 0)
			return -1;
		inject_fail(err, len, "process %ld (%s) is already traced by pid %ld "
			    "(a debugger or strace); detach it, then retry", (long)pid,
			    ps->name, (long)ps->tracer);
		return -1;
	}
	if (ps->state == 'T' || ps->state == 't') {
		inject_fail(err, len, "process %ld (%s) is stopped; resume it with "
			    "kill -CONT %ld, then retry", (long)pid, ps->name,
			    (long)pid);
		return -1;
	}
	if (ps->seccomp == 1) {
		inject_fail(err, len, "process %ld (%s) runs in strict seccomp mode: "
			    "it may not open or map the agent", (long)pid, ps->name);
		return -1;
	}
	int mach = inject_exe_machine(pid);
	if (mach == -1) {
		inject_fail(err, len, "cannot read /proc/%ld/exe: %s (run ymtop as the "
			    "process's user or as root)", (long)pid, strerror(errno));
		return -1;
	}
	if (mach != 0) {
		inject_fail(err, len, "process %ld (%s) is not an x86-64 program (%s); "
			    "ymtop injects into x86-64 processes only", (long)pid,
			    ps->name, mach == -2 ? "32-bit" : "other machine");
		return -1;
	}
	rc = inject_read_maps(pid, m);
	/* Exec'd a moment ago (a supervisor's exec chain): the loader is
	 * mapped but libc not yet, nor a preloaded agent's constructor run.
	 * Wait for the loader to finish (a few ms; 2 s at most) rather than
	 * call the program static or start an agent that is not set up. */
	for (double t0 = inject_now_ms();
	     rc == 0 && !m->have_libc && m->ldso.lo &&
	     inject_now_ms() - t0 < 2000;) {
		inject_nap_us(5000);
		rc = inject_read_maps(pid, m);
	}
	if (rc < 0) {
		inject_fail(err, len, "cannot read /proc/%ld/maps: %s", (long)pid,
			    strerror(-rc));
		return -1;
	}
	if (mode != LOAD)
		return m->has_agent && m->have_libc ? 3 : -1;
	if (m->has_agent && other) {
		return 1;   /* another ymtop loaded it meanwhile */
	}
	if (m->has_agent)
		return 3;   /* loaded, no segment yet: start it (inject_start_agent) */
	/* No libc at all (static), or a musl program offered the glibc
	 * agent: it cannot go in. */
	if (inject_libc_refusal(pid, ps->name, agent, err, len) != 0)
		return -1;
	if (!m->have_libc) {
		inject_fail(err, len, "process %ld (%s) has no C library mapped: the "
			    "agent cannot be loaded into it", (long)pid, ps->name);
		return -1;
	}
	return 0;
}

static int borrow_run(pid_t pid, enum mode mode, const char *agent, int bring,
		      uintptr_t fn, struct detach_io *io,
		      struct inject_result *res, char *err, size_t errlen)
{
	struct pstatus ps;
	struct tmaps m;
	struct libc_syms s;
	memset(res, 0, sizeof *res);
	int pc = precheck(pid, &ps, &m, 0, mode, agent, err, errlen);
	if (pc < 0 && mode != LOAD && !err[0])
		inject_fail(err, errlen, "process %ld has no agent mapped", (long)pid);
	for (int i = 0; pc == 2 && i < 4; i++)
		pc = precheck(pid, &ps, &m, 1, mode, agent, err, errlen);
	if (pc == 1)
		return 1;
	int start = pc == 3;   /* the agent is there: start it, load nothing */
	if (start)
		pc = 0;
	if (pc == 2)
		inject_fail(err, errlen, "process %ld is traced by one ymtop after "
			    "another; retry when they are done", (long)pid);
	if (pc != 0 || inject_libc_symbols(pid, &m, &s, err, errlen) != 0)
		return -1;

	struct borrow t = { .pid = pid, .mem = -1 };
	struct chain chain;
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
	t.mem = open(path, O_RDWR | O_CLOEXEC);
	if (t.mem < 0) {
		inject_fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	t.xstate = calloc(1, INJECT_XSTATE_MAX);
	pid_t *tids = calloc(INJECT_MAX_TIDS, sizeof *tids);
	if (!t.xstate || !tids) {
		inject_fail(err, errlen, "out of memory");
		close(t.mem);
		free(t.xstate);
		free(tids);
		return -1;
	}

	/* From the first stop to the last detach, ymtop's own signals wait:
	 * a SIGINT must not leave the target stopped or half-changed. */
	inject_chain_open(&chain, pid, &s, &m);
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);

	int rc = -1;
	int cr = inject_choose_thread(&t, &chain, tids, &res->attempts, err, errlen);
	if (cr == -2)
		rc = after_other_ymtop(pid, err, errlen);
	if (cr != 1)
		goto out;

	/* t is stopped at a safe moment: from here every path restores. */
	double t0 = t.stopped_at;
	res->tid = t.tid;
	struct iovec iov = { t.xstate, INJECT_XSTATE_MAX };
	if (ptrace(PTRACE_GETREGSET, t.tid, (void *)NT_X86_XSTATE, &iov) != 0) {
		inject_fail(err, errlen, "cannot read thread %ld's extended register "
			    "state: %s", (long)t.tid, strerror(errno));
		inject_let_go(&t);
		goto out;
	}
	t.xlen = iov.iov_len;
	/* Test hook (tests/integration/test_faults.py): ymtop killed with a
	 * thread stopped and examined, before anything is written. */
	const char *fault = getenv("YM_TEST_FAULT");
	if (fault && !strcmp(fault, "inject-seized"))
		raise(SIGKILL);
	/* Test hook (test_inject.py): a slow injection, for a second ymtop
	 * started meanwhile. */
	if (fault && !strcmp(fault, "inject-hold"))
		inject_nap_us(1500000);
	inject_restart_eintr_wait(&t);
	int lr = mode == HEAP ? inject_heapstats_call(&t, &s, ps.name, fn, err, errlen)
		 : mode == DETACH ? inject_detach_call(&t, &s, ps.name, io->fn,
						       io->fn_handle, &io->code,
						       &io->handle, err, errlen)
		 : mode == UNLOAD ? inject_dlclose_call(&t, &s, io->fn_release,
							io->handle, &io->closed,
							err, errlen)
		 : start ? inject_start_agent(&t, &s, ps.name, err, errlen)
		 : inject_load_agent(&t, &s, agent, bring, err, errlen);
	if (lr == -2)
		goto out;   /* the process is gone */
	res->dormant = lr == -3;
	if (inject_restore(&t) != 0 && lr == 0) {
		inject_fail(err, errlen, "the agent is loaded but thread %ld's state "
			    "could not be restored exactly: %s", (long)t.tid,
			    strerror(errno));
		lr = -1;
	}
	inject_let_go(&t);
	res->pause_ms = inject_now_ms() - t0;
	rc = lr == 0 ? 0 : -1;
	if (lr != 0 && ps.seccomp == 2 && mode == LOAD) {
		size_t used = strlen(err);
		snprintf(err + used, errlen - used, " (process %ld runs under a seccomp "
			 "filter, which may forbid what loading the agent needs; start it "
			 "with LD_PRELOAD instead)", (long)pid);
	}
out:
	sigprocmask(SIG_SETMASK, &old, NULL);
	inject_chain_close(&chain);
	close(t.mem);
	free(t.xstate);
	free(tids);
	return rc;
}

#define LDLOCK_WAIT_TRIES 20       /* 50 ms apart */

/* The thread holding the dynamic loader's lock after up to `tries`
 * looks 50 ms apart, or 0 when it was free at one (or cannot be told:
 * then the call waits as it always did). */
static pid_t loader_busy(pid_t pid, int tries)
{
	pid_t holder = 0;
	for (int i = 0; i < tries; i++) {
		if (i)
			inject_nap_us(50000);
		holder = inject_loader_lock_owner(pid);
		if (holder <= 0)
			return 0;
	}
	return holder;
}

/* dlopen waits for the dynamic loader's lock as dlclose does: when the
 * agent is to be loaded (not mapped yet) and a thread holds the lock for
 * 1 s, -1 with err naming it; nothing was changed. */
static int loader_locked(pid_t pid, char *err, size_t errlen)
{
	struct tmaps m;
	if (inject_read_maps(pid, &m) != 0 || m.has_agent)
		return 0;
	pid_t holder = loader_busy(pid, LDLOCK_WAIT_TRIES);
	if (holder <= 0)
		return 0;
	inject_fail(err, errlen, "thread %ld of process %ld holds the dynamic "
		    "loader's lock (it is inside dlopen or dlclose: a library's "
		    "constructor or destructor is running), which loading the agent "
		    "would wait for; nothing was changed: retry once the thread is "
		    "out", (long)holder, (long)pid);
	return -1;
}

/* An agent an earlier detach left dormant cannot start again in place:
 * its tables and its old segment's memory may still be written by a
 * thread that was inside it.  Once no thread is (the unload rule), it
 * is unloaded and a fresh one loaded, whose constructor patches the
 * slots again through the trampoline page the first one left. */
int inject_agent(pid_t pid, const char *agent, int bring,
		 struct inject_result *res, char *err, size_t errlen)
{
	memset(res, 0, sizeof *res);
	if (loader_locked(pid, err, errlen) != 0)
		return -1;
	int rc = borrow_run(pid, LOAD, agent, bring, 0, NULL, res, err, errlen);
	if (rc != -1 || !res->dormant)
		return rc;
	struct detach_result d;
	char derr[512];
	if (inject_detach(pid, &d, derr, sizeof derr) != 0) {
		inject_fail(err, errlen, "process %ld keeps the agent an earlier "
			    "ymtop --detach left loaded and dormant, and it could not "
			    "be unloaded to load it afresh: %s", (long)pid, derr);
		res->dormant = 1;
		return -1;
	}
	if (!d.unloaded) {
		/* Passing, or for good: whether ymtop -p may try again. */
		int passing = d.code == YM_DETACH_UNLOADABLE ||
			      d.code == YM_DETACH_PYTHON;
		inject_fail(err, errlen, "process %ld keeps the agent an earlier "
			    "ymtop --detach left loaded and dormant, and it cannot be "
			    "unloaded now to load it afresh: %s; %s", (long)pid, d.why,
			    passing ? "run ymtop -p again once that has passed" :
			    "restart the process to profile it again");
		res->dormant = 1;
		return -1;
	}
	if (loader_locked(pid, err, errlen) != 0)
		return -1;
	return borrow_run(pid, LOAD, agent, bring, 0, NULL, res, err, errlen);
}

int inject_heapstats(pid_t pid, struct inject_result *res, char *err,
		     size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	/* Read before any thread stops: the agent's own file says where. */
	uintptr_t fn = inject_agent_symbol(pid, "ymagent_heapstats");
	return borrow_run(pid, HEAP, NULL, 0, fn, NULL, res, err, errlen);
}

int inject_detach(pid_t pid, struct detach_result *r, char *err, size_t errlen)
{
	struct inject_result res;
	struct detach_io io = { 0 };
	memset(r, 0, sizeof *r);
	if (errlen)
		err[0] = '\0';
	io.fn = inject_agent_symbol(pid, "ymagent_detach");
	io.fn_handle = inject_agent_symbol(pid, "ymagent_unload_handle");
	io.fn_release = inject_agent_symbol(pid, "ymagent_release");
	if (borrow_run(pid, DETACH, NULL, 0, 0, &io, &res, err, errlen) != 0)
		return -1;
	/* The interpreter puts its allocator tables back between two
	 * bytecodes of its main thread: asked again, 50 ms apart, 2 s at
	 * most (a main thread blocked in a C call never does). */
	for (int i = 0; io.code == YM_DETACH_PYTHON && i < 40; i++) {
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
		if (borrow_run(pid, DETACH, NULL, 0, 0, &io, &res, err, errlen) != 0)
			return -1;
	}
	r->code = io.code;
	switch (io.code) {
	case YM_DETACH_PRELOADED:
		snprintf(r->why, sizeof r->why, "it was preloaded (LD_PRELOAD), "
			 "and the loader never unloads a preloaded library: it stays, "
			 "passing every call through");
		return 0;
	case YM_DETACH_POINTERS:
		snprintf(r->why, sizeof r->why, "a pointer into it may remain (a "
			 "slot it could not write back, no trampoline page, or a block "
			 "of its bootstrap buffer)");
		return 0;
	case YM_DETACH_PYTHON:
		snprintf(r->why, sizeof r->why, "the Python interpreter still calls "
			 "its allocator wrapper: its main thread has not run the pending "
			 "call that removes it (it runs between bytecodes; a thread "
			 "blocked in a C call does not); --detach again unloads it once "
			 "it has");
		return 0;
	case YM_DETACH_ALREADY:
		snprintf(r->why, sizeof r->why, "it was detached before");
		return 0;
	case YM_DETACH_UNLOADABLE:
		break;
	default:
		inject_fail(err, errlen, "process %ld: the agent answered %d to "
			    "ymagent_detach", (long)pid, io.code);
		return -1;
	}
	if (!io.handle) {
		snprintf(r->why, sizeof r->why, "it did not give its handle");
		return 0;
	}
	/* dlclose takes the dynamic loader's lock, which a thread inside
	 * dlopen or dlclose holds for as long as a library's constructor or
	 * destructor runs (ldlock.h): looked at before, for 1 s at most, and
	 * again once every thread was seen outside the agent, so that the
	 * borrowed thread does not wait for it blindly.  (A dlopen begun
	 * between that look and the call is waited for as any call is.) */
	pid_t holder = loader_busy(pid, LDLOCK_WAIT_TRIES);
	if (holder <= 0) {
		if (inject_quiesced(pid, r->why, sizeof r->why) != 1)
			return 0;
		holder = loader_busy(pid, 1);
	}
	if (holder > 0) {
		snprintf(r->why, sizeof r->why, "thread %ld holds the dynamic "
			 "loader's lock (it is inside dlopen or dlclose: a library's "
			 "constructor or destructor is running), which dlclose would "
			 "wait for; --detach again unloads it once the thread is out",
			 (long)holder);
		return 0;
	}
	if (borrow_run(pid, UNLOAD, NULL, 0, 0, &io, &res, err, errlen) != 0) {
		snprintf(r->why, sizeof r->why, "dlclose could not be called: %s", err);
		err[0] = '\0';
		return 0;
	}
	struct tmaps m;
	if (io.closed != 0 || inject_read_maps(pid, &m) != 0 || m.has_agent) {
		snprintf(r->why, sizeof r->why, "dlclose left it mapped (%s)",
			 io.closed ? "it failed" : "another reference holds it, or the C "
			 "library never unloads, as musl's");
		return 0;
	}
	r->unloaded = 1;
	return 0;
}
