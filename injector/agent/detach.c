/*
 * detach: the agent leaves the process (ymtop -p PID --detach, which
 * calls ymagent_detach through a borrowed thread; include/ymtop/detach.h
 * is the protocol).  The steps, in this order, in one place:
 *
 *   1. sampling stops: SEG_DETACHED (seg_detach), so that every slow
 *      path passes through and no segment is made again, also in fork
 *      children; the fast paths' giant threshold is none (heapstats);
 *   2. every GOT slot and data word patched to a hook gets the real
 *      function back, and the trampoline's entries (tramp.h: what the
 *      slots handed out, the exit handler) jump to the real functions
 *      (got_unpatch_all);
 *      the interpreter's allocator tables that hooks_py.c wrapped go
 *      back by a pending call (pymalloc_unhook): the interpreter's main
 *      thread runs it between two bytecodes, so the agent may be
 *      unloaded only once it has (YM_DETACH_PYTHON until then);
 *   3. the segment's name is removed (seg_detach); its memory stays
 *      mapped until the agent is unloaded: a thread still inside a slow
 *      path may write there;
 *   4. the TLS key is deleted: no thread's exit calls the agent.
 *
 * Blocks sampled before need nothing: the agent never changes a block
 * or its size, so the allocator's free takes them as they are.  Blocks
 * of its bootstrap buffer (hooks.c: what a call nested in the agent got
 * before the real functions were known, or inside its own dlsym) lie in
 * the agent's own data: an agent that ever lent one keeps its slots
 * (step 2 is skipped) and stays loaded (dormant), as its holder may free
 * it later, and only the agent's free knows to let it be.  The
 * fork handlers are the loader's to drop (pthread_atfork registers them
 * with the agent's DSO handle, which dlclose unregisters); until then
 * they run as a detached agent's (nothing but its fork flag).
 *
 * The unload rule (man/ymagent.7): ymtop unloads the agent (dlclose by a
 * borrowed thread, as injection dlopened it) only when no thread can be
 * inside it: after these steps no call can enter it (no slot, no handed-
 * out pointer, no handler leads there), and ymtop stops every thread and
 * finds each one's instruction pointer, registers and every stack word
 * from its stack pointer up outside the agent's code (a thread inside has
 * its PC there, or a return address into it on its stack).  Otherwise
 * the agent stays mapped and dormant, and ymtop says why.  When the check
 * passed, ymtop calls ymagent_release and then dlclose in one borrowed
 * thread; the destructor dlclose runs then unmaps the agent's memory
 * (detach_unload).  At exit, or dormant, it leaves the memory alone.
 *
 * State, this file's: whether detach ran.
 */
#include <link.h>

#include "config.h"
#include "detach.h"
#include "got.h"
#include "heapstats.h"
#include "hooks_py.h"
#include "hooknames.h"
#include "live.h"
#include "loader.h"
#include "seg.h"
#include "table.h"
#include "threads.h"
#include "tramp.h"
#include "ymtop/detach.h"

static int detached;
/* A slot or data word could not be written back (step 2). */
static int pointers_left;
/* ymagent_release ran: ymtop found no thread inside the agent and is
 * about to dlclose it; only then does the destructor unmap its memory
 * (at exit, or dormant, a thread may still count there). */
static int released;

/* What may become of the agent now that the steps ran (YM_DETACH_*). */
static int detach_state(void)
{
	if (!agent_injected)
		return YM_DETACH_PRELOADED;
	if (__atomic_load_n(&pointers_left, __ATOMIC_ACQUIRE) ||
	    !tramp_complete() || hooks_boot_lent())
		return YM_DETACH_POINTERS;
	if (!pymalloc_unloadable())
		return YM_DETACH_PYTHON;
	return YM_DETACH_UNLOADABLE;
}

/* The steps once; a later call (ymtop asking again, or a second
 * --detach) does nothing but say what may become of the agent now. */
EXPORT int ymagent_detach(void)
{
	struct agent_tls *t = &agent_tls;
	if (__atomic_exchange_n(&detached, 1, __ATOMIC_SEQ_CST))
		return detach_state();
	agent_guard_enter(t);
	seg_detach();                                   /* 1, 3 */
	heapstats_detach();
	/* 2, unless a block of the bootstrap buffer is lent: its holder's
	 * free (glibc's per-thread dlerror buffer, freed at the thread's
	 * exit) must keep reaching the agent's, which lets it be; the
	 * allocator's would take it for one of its own and crash.  The
	 * slots then stay, their hooks passing every call through. */
	if (agent_slots && (hooks_boot_lent() || !got_unpatch_all()))
		__atomic_store_n(&pointers_left, 1, __ATOMIC_RELEASE);
	pymalloc_unhook();                              /* 2 */
	threads_detach();                               /* 4 */
	agent_guard_leave(t);
	return detach_state();
}

EXPORT void *ymagent_unload_handle(void)
{
	struct agent_object self;
	if (!__atomic_load_n(&detached, __ATOMIC_ACQUIRE) ||
	    detach_state() != YM_DETACH_UNLOADABLE ||
	    agent_find_object((const void *)&detached, &self) != 0)
		return NULL;
	return (void *)self.link_map;
}

EXPORT void ymagent_release(void)
{
	if (__atomic_load_n(&detached, __ATOMIC_ACQUIRE))
		__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
}

int detach_done(void)
{
	return __atomic_load_n(&detached, __ATOMIC_ACQUIRE);
}

void detach_unload(void)
{
	if (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
		return;
	seg_unmap();
	table_unmap_private();
	live_unmap_private();
}
