/* choose: see choose.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "ptrace/choose.h"
#include "ptrace/procfs.h"
#include "ptrace/util.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define OTHER_WAIT_MS (INJECT_SAFE_WAIT_MS + INJECT_CALL_WAIT_MS + 1000.0)

int inject_wait_other_ymtop(pid_t pid, pid_t tracer, char *err, size_t len)
{
	if (!tracer || !inject_is_ymtop(tracer))
		return 0;
	double end = inject_now_ms() + OTHER_WAIT_MS;
	struct pstatus ps;
	while (inject_read_status(pid, &ps) == 0 && ps.tracer == tracer) {
		if (inject_now_ms() > end) {
			inject_fail(err, len, "process %ld is traced by another ymtop "
				    "(pid %ld) for more than %.0f s; stop it, then "
				    "retry", (long)pid, (long)tracer,
				    OTHER_WAIT_MS / 1000);
			return -1;
		}
		inject_nap_us(5000);
	}
	return 1;
}

static void eperm_reason(pid_t pid, char *err, size_t len)
{
	struct pstatus ps;
	if (inject_read_status(pid, &ps) == 0 && ps.tracer) {
		inject_fail(err, len, "process %ld is already traced by pid %ld (a "
			    "debugger or strace); detach it, then retry", (long)pid,
			    (long)ps.tracer);
		return;
	}
	char why[384];
	inject_fail(err, len, "ptrace of process %ld refused: %s", (long)pid,
		    inject_refusal(pid, 1, why, sizeof why));
}

/* Stop tid.  1 stopped (t filled), 0 thread gone, -1 error (err), -2 traced
 * by another ymtop. */
static int seize(struct borrow *t, pid_t tid, char *err, size_t len)
{
	t->tid = tid;
	t->npending = 0;
	t->in_sigstop = 0;
	t->code_saved = 0;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
		if (errno == ESRCH)
			return 0;
		struct pstatus ps;
		if (errno == EPERM && inject_read_status(t->pid, &ps) == 0 && ps.tracer &&
		    inject_is_ymtop(ps.tracer))
			return -2;   /* another ymtop got there first */
		if (errno == EPERM)
			eperm_reason(t->pid, err, len);
		else
			inject_fail(err, len, "ptrace(PTRACE_SEIZE, %ld): %s",
				    (long)tid, strerror(errno));
		return -1;
	}
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return 0;
	}
	for (;;) {
		int st;
		/* A thread in an uninterruptible wait stops when it leaves it;
		 * the interrupt cannot be withdrawn, so wait as long as it takes. */
		if (inject_wait_stop(tid, &st, 1e9) < 0)
			return 0;
		int sig = WSTOPSIG(st), ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {
			if (sig != SIGTRAP) {   /* group stop: the process is stopped */
				ptrace(PTRACE_DETACH, tid, 0, 0);
				inject_fail(err, len, "process %ld is stopped (signal "
					    "%d); resume it with kill -CONT %ld, then "
					    "retry", (long)t->pid, sig, (long)t->pid);
				return -1;
			}
			t->in_sigstop = 0;
			break;
		}
		/* A signal on its way: keep it for the detach.  The registers are
		 * those of the interrupted code, as in our interrupt stop. */
		inject_keep_signal(t, sig);
		t->in_sigstop = 1;
		break;
	}
	t->stopped_at = inject_now_ms();
	if (ptrace(PTRACE_GETREGS, tid, 0, &t->regs) != 0) {
		inject_let_go(t);
		return 0;
	}
	return 1;
}

int inject_choose_thread(struct borrow *t, struct chain *c, pid_t *tids,
			 int *attempts, char *err, size_t len)
{
	double deadline = inject_now_ms() + INJECT_SAFE_WAIT_MS;
	for (;;) {
		int n = inject_list_tids(t->pid, tids, INJECT_MAX_TIDS);
		if (n <= 0) {
			inject_fail(err, len, "no process with pid %ld", (long)t->pid);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			int sr = seize(t, tids[i], err, len);
			if (sr < 0)
				return sr;
			if (sr == 0)
				continue;
			(*attempts)++;
			if (inject_safe_moment(t, c))
				return 1;
			inject_let_go(t);
		}
		if (inject_now_ms() > deadline) {
			inject_fail(err, len, "no thread of process %ld left the "
				    "allocator or the dynamic loader within %.0f s; "
				    "nothing was changed, retry", (long)t->pid,
				    INJECT_SAFE_WAIT_MS / 1000);
			return -1;
		}
		inject_nap_us(2000);
	}
}
