/*
 * exitstatus: the status the process gives exit(), into the segment's
 * header (exit_how, exit_status; segment.h v6), so that ymtop's final
 * report says how the process ended.
 *
 * glibc's on_exit() handler, registered at the agent's start, receives the
 * status.  Handlers run before the destructors of shared objects (ld.so's
 * _dl_fini was registered first, so runs last), hence before
 * agent_exiting() sets YM_FLAG_EXITED with release: a reader that sees the
 * flag sees the status.  _exit, _Exit and signals run no handler: the
 * fields stay YM_EXIT_UNKNOWN, and ymtop reads a zombie's status from
 * /proc instead.  Guest code: no allocation of ours (on_exit itself may
 * allocate a block of handlers: the agent's guard is held at init).
 */
#include <stdlib.h>
#include <unistd.h>

#include "agent.h"

static void record_status(int status, void *arg)
{
	(void)arg;
	/* A forked child inherits the handler: only the process whose
	 * segment this is writes it (agent_exiting's rule). */
	if (!agent_active() || agent.pid != getpid())
		return;
	__atomic_store_n(&agent.hdr->exit_status, (uint32_t)status,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&agent.hdr->exit_how, YM_EXIT_STATUS, __ATOMIC_RELAXED);
}

void agent_exitstatus_init(void)
{
	on_exit(record_status, NULL);   /* fails only out of memory: unknown */
}
