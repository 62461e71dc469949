/*
 * hooks_life: the process-life events the agent interposes besides the
 * allocator's: _exit and _Exit (no destructors run: the segment is
 * retired here), the setuid family (the segment follows the process's
 * owner), dlclose (the unwinder forgets the unloaded object's rules), and
 * ymagent_start (ymtop -p asks for a segment).  Each forwards to the next
 * definition (sym_forward).
 *
 * State: none but each function's cached next definition.
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "enter.h"
#include "hooknames.h"
#include "seg.h"
#include "symbols.h"
#include "threads.h"
#include "unwind.h"

/* ---- _exit: runs no destructors, so retire the segment here ---- */

static void real_exit(const char *name, int status)
{
	void (*fn)(int) = (void (*)(int))sym_forward(name);
	if (fn)
		fn(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _exit(int status)
{
	agent_exiting();
	real_exit("_exit", status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	agent_exiting();
	real_exit("_Exit", status);
	__builtin_unreachable();
}

HIDDEN_ALIAS(_exit);
HIDDEN_ALIAS(_Exit);

/* ---- setuid and its kin: the segment follows the process's owner ---- */

/* The definition a rarely called function forwards to (sym_forward),
 * found once. */
static void *next_def(void **cache, const char *name)
{
	void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = sym_forward(name);
		__atomic_store_n(cache, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

typedef int (*id1_fn)(uid_t);
typedef int (*id2_fn)(uid_t, uid_t);
typedef int (*id3_fn)(uid_t, uid_t, uid_t);

/* Give the segment to the coming euid, make the call, take it back if the
 * call failed. */
#define ID_CALL(name, type, euid, args)                                      \
	do {                                                                  \
		static void *cache;                                           \
		type fn = (type)next_def(&cache, #name);                  \
		if (!fn) {                                                    \
			errno = ENOSYS;                                       \
			return -1;                                            \
		}                                                             \
		uid_t before = geteuid();                                     \
		agent_owner_change(euid);                                     \
		int rc = fn args;                                             \
		if (rc != 0)                                                  \
			agent_owner_change(before);                           \
		return rc;                                                    \
	} while (0)

EXPORT int setuid(uid_t uid)
{
	ID_CALL(setuid, id1_fn, uid, (uid));
}

EXPORT int seteuid(uid_t euid)
{
	ID_CALL(seteuid, id1_fn, euid, (euid));
}

EXPORT int setreuid(uid_t ruid, uid_t euid)
{
	ID_CALL(setreuid, id2_fn, euid, (ruid, euid));
}

EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	ID_CALL(setresuid, id3_fn, euid, (ruid, euid, suid));
}

HIDDEN_ALIAS(setuid);
HIDDEN_ALIAS(seteuid);
HIDDEN_ALIAS(setreuid);
HIDDEN_ALIAS(setresuid);
HIDDEN_ALIAS(dlclose);

/* ---- dlclose: the unwinder's cached rules may name its addresses ---- */

typedef int (*dlclose_fn)(void *);

/* A library loaded later at the unloaded one's addresses must not be
 * unwound with the old rules (which could send the unwinder far up the
 * stack): forget them as soon as the unload is done, not at the next
 * module scan. */
EXPORT int dlclose(void *handle)
{
	static void *cache;
	dlclose_fn fn = (dlclose_fn)next_def(&cache, "dlclose");
	if (!fn)
		return -1;
	int rc = fn(handle);
	unwind_flush();
	return rc;
}

/* ---- ymtop -p on a process that has the agent but no segment ---- */

/* A daemon that forked away from the process the agent started in has no
 * segment until its first allocation, and an idle one may never allocate:
 * ymtop makes one of its threads call this (as it calls dlopen to inject),
 * which creates the segment now.  Returns 1 when the segment exists, 0
 * when the agent is passive (YM_DISABLE, YM_FOLLOW_FORK=0, a failure), 2
 * when a detach left it dormant. */
EXPORT int ymagent_start(void)
{
	struct agent_tls *t = &agent_tls;
	/* Left dormant by a detach (detach.c): it stays out of the way. */
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_DETACHED)
		return 2;
	agent_guard_enter(t);
	agent_enter(t);
	agent_segment_start();
	agent_thread_enter(t);   /* the pre-slot's owner adopts its slot */
	agent_guard_leave(t);
	return agent_active();
}
