/*
 * enter: the slow paths' way into the agent (enter.h).
 *
 * State, this file's: the process that forks, while its forking thread
 * runs the fork handlers.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "config.h"
#include "enter.h"
#include "giant.h"
#include "hooks_mmap.h"
#include "live.h"
#include "loader.h"
#include "modules.h"
#include "sampling.h"
#include "seg.h"
#include "table.h"
#include "threads.h"

/* threads_enter, and the thread's sampling state when it was just
 * registered (or given the pre-slot, or let share slot 0).  1: make the
 * segment now (threads.h). */
static int thread_enter(struct agent_tls *t)
{
	int r = threads_enter(t);
	if (r & THREADS_STARTED)
		sampling_thread_start(t);
	return r & THREADS_SEGMENT;
}

void agent_thread_enter(struct agent_tls *t)
{
	thread_enter(t);
}

int agent_segment_start(void)
{
	int r = seg_start(1);
	/* Mappings sampled before it wait for it (hooks_mmap.h). */
	if (r == SEG_STARTED)
		mmap_pending_replay(&agent_tls);
	return r != 0;
}

void agent_segment_slow(struct agent_tls *t)
{
	int saved = errno;
	agent_guard_enter(t);
	agent_segment_start();
	agent_guard_leave(t);
	errno = saved;
}

static void fork_child(void);

/* The process that forks, while its forking thread runs the fork
 * handlers (t->forking). */
static pid_t fork_parent;

/* The host's errno is the host's: a successful malloc leaves it as it was
 * (shm_open, /proc reads and friends would otherwise leak EAGAIN,
 * ENOENT... into it; found by tests/stress, stress_misc edges). */
void agent_enter(struct agent_tls *t)
{
	int saved = errno;
	/* A child whose own fork handlers run before the agent's (handlers
	 * registered before the agent: an injected agent's always) and
	 * allocate: it is the child here, before the agent's handler, and
	 * would count into its parent's slot and segment. */
	if (unlikely(t->forking) && getpid() != fork_parent)
		fork_child();
	/* The first slow path: configured, and the segment at once when
	 * seg_prepare says so or a mapping made before waits (hooks_mmap.h:
	 * asked only then). */
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_NONE) {
		int now = seg_prepare();
		if (now > 0 || (now == 0 && mmap_pending_settle()))
			agent_segment_start();
	}
	/* Another thread has the pre-slot, or a mapping's sample waits:
	 * the segment now (seg.h). */
	if ((thread_enter(t) || unlikely(seg_wanted())) && agent_segment_start())
		thread_enter(t);
	errno = saved;
}

/* Before a fork, in the forking thread.  Until the agent's parent or
 * child handler, this thread's calls take the slow paths (agent_enter
 * tells a child there).  Handlers run in the order glibc gives them:
 * prepare ones last registered first, the others first registered first. */
static void fork_prepare(void)
{
	struct agent_tls *t = &agent_tls;
	fork_parent = getpid();
	t->forking = 1;
	thread_fast_sync(t);
}

static void fork_parent_done(void)
{
	struct agent_tls *t = &agent_tls;
	t->forking = 0;
	thread_fast_sync(t);
}

static void fork_child(void)
{
	/* Done already when a fork handler of the host's allocated first
	 * (agent_enter). */
	if (!agent_tls.forking)
		return;
	/* Only this thread exists now.  First whether the loader's list may
	 * be walked with its lock (loader.h): every later step may walk it.
	 * Stop writing into the parent's segment; start a segment of our
	 * own lazily, on the next call. */
	agent_configure();   /* a parent that made no call never read it */
	loader_fork_child();
	mmap_fork_child();
	giant_fork_child();
	table_reset_private();
	live_reset_private();
	modules_fork_child();
	sampling_fork_child();
	threads_fork_child(&agent_tls);
	seg_fork_child(agent_cfg.follow_fork && !agent_cfg.disabled);
}

void agent_atfork(void)
{
	pthread_atfork(fork_prepare, fork_parent_done, fork_child);
}
