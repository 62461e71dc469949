/*
 * life: the agent's process life (life.h).
 *
 * The agent (libymagent.so) is guest code: it runs inside the target's
 * allocator calls.  No stdio, no malloc family, no exit, no output on
 * stdout; every failure makes it passive (calls pass straight through)
 * after at most one line on stderr.  Its files, one subsystem each, each
 * owning its state:
 *
 *   hooks.c     the exported malloc family: fast paths, bootstrap, guard
 *   hooks_jemalloc.c  jemalloc's API (mallocx...) and C++'s operators
 *   hooks_mmap.c      anonymous mmap/munmap/mremap by the program
 *   hooks_exec.c      the exec family: the segment's name around an exec
 *   life.c      constructor, thread entry, fork, destructor
 *   config.c    YM_* environment, read once
 *   next.c      the next definitions (dlsym), glibc's usable size
 *   seg.c       the segment: creation, activation, exit, setuid
 *   threads.c   TLS, the guard, thread slots and their counters
 *   sampling.c  the sampled slow path; reads CONTROL
 *   heapstats.c the allocator's own statistics, on a reader's request
 *   table.c     stacks, counters, counter planes, the agent's lock
 *   live.c      the live table and free's filters
 *   giant.c     giant requests, the alarm ring
 *   modules.c   loaded objects, our own text
 *   trend.c     the trend history: a slot of the largest and rising stacks' estimates
 *   loader.c    the loader's list, walked without waiting in fork children
 *   backing.c   memory behind the segment's pages
 *   got.c       slots and data words rewritten to the hooks: injected,
 *               or preloaded behind another object's malloc
 *   unwind.c    the calling thread's stack, from .eh_frame
 *   clock.c     agent_now_ns: CLOCK_MONOTONIC from the time-stamp counter
 *   base.c      assertions, messages, clocks, spin and map helpers
 *   segpriv.h   the agent's private words in segment records
 *   sample.h    the sampling distribution and estimator (pure)
 *   ../resume.c injected mode: a borrowed thread's way home
 *
 * One writer a segment section (segment.h):
 *
 *   header      seg.c (fields fixed at creation, magic last; exit, uid);
 *               changing fields by the owner of what they count: flags
 *               PAUSED sampling.c, OVERFLOWED sampling.c and table.c,
 *               sample_rate sampling.c, drop_* where the drop happens,
 *               heap heapstats.c, retained_est and peaks table.c,
 *               exit_how/exit_status seg.c, UNSEEN and unseen_* seg.c
 *               (for got.c and life.c: seg_note_unseen)
 *   CONTROL     read (sampling.c polls it, heapstats.c heap_request), but
 *               fast_limit, which heapstats.c and readers both write
 *   THREADS     threads.c and threads.h (the fast paths' inline counters)
 *   STACKS      table.c (and their ext: kind, peaks)
 *   PLANES      table.c
 *   STRIPES     live.c
 *   LIVE        live.c
 *   ALARMS      giant.c
 *   MODULES     modules.c
 *   trend       trend.c (v8: header.trend locates it)
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "config.h"
#include "giant.h"
#include "got.h"
#include "hooks_jemalloc.h"
#include "hooks_mmap.h"
#include "life.h"
#include "live.h"
#include "loader.h"
#include "modules.h"
#include "next.h"
#include "sampling.h"
#include "symbols.h"
#include "seg.h"
#include "table.h"
#include "threads.h"

int agent_injected;
int agent_slots;

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
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_NONE)
		seg_prepare();
	/* Another thread has the pre-slot, or a mapping's sample waits:
	 * the segment now (seg.h). */
	if ((threads_enter(t) || unlikely(seg_wanted())) && seg_start(1))
		threads_enter(t);
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

/* 1 when we were loaded before libc (preloaded, or a dependency the
 * program was linked with), 0 when after it (dlopen'ed), -1 unknown: the
 * loader keeps its objects in load order. */
static int is_libc(const struct link_map *m)
{
	/* glibc's libc.so.6; musl's C library is its loader. */
	return m->l_name && (strstr(m->l_name, "/libc.so.") ||
			     strstr(m->l_name, "/ld-musl-"));
}

static int loaded_before_libc(void)
{
	struct agent_object self;
	if (agent_find_object((const void *)hook_malloc, &self) != 0 ||
	    !self.link_map)
		return -1;
	for (const struct link_map *m = self.link_map->l_prev; m; m = m->l_prev)
		if (is_libc(m))
			return 0;
	for (const struct link_map *m = self.link_map->l_next; m; m = m->l_next)
		if (is_libc(m))
			return 1;
	return -1;
}

/* Loaded by ymtop -p (dlopen through ptrace) rather than preloaded: our
 * exported malloc is not the process's.  The process's malloc is not ours
 * either when the program defines it, or when it takes malloc's address
 * from non-PIC code (python3: the executable's PLT entry stands for malloc
 * then): the load order tells those apart, whatever the agent's file is
 * called (taking RTLD_DEFAULT's answer for the next malloc there would
 * make malloc call itself for ever). */
static int detect_injected(void)
{
	void *def = dlsym(RTLD_DEFAULT, "malloc");
	if (!def || def == (void *)hook_malloc)
		return 0;
	int before = loaded_before_libc();
	if (before >= 0)
		return !before;
	const char *pre = getenv("LD_PRELOAD");
	return !(pre && strstr(pre, "libymagent"));
}

/* Preloaded, but another object defines malloc first (an allocator
 * earlier in LD_PRELOAD: "libjemalloc.so.2 libymagent.so"; or the
 * executable itself): every call binds to it, none to us.  The agent
 * then takes over the slots as when injected.  Unless that malloc is a
 * wrapper that forwards to the next one, ours (dlsym(RTLD_NEXT) from an
 * earlier preloaded library or the executable): every call reaches us
 * then, and slots sent to it would come back for ever.  One call tells:
 * under the caller's guard, before the next functions are resolved, a
 * call that reaches us gets a bootstrap block.  An executable that
 * defines malloc and calls it directly, through no slot: those calls
 * stay unseen, and the segment says so. */
static int detect_behind(void)
{
	int who = sym_first_definer("malloc");
	if (who != SYM_DEF_PROGRAM && who != SYM_DEF_OTHER)
		return 0;
	void *(*m)(size_t);
	void (*f)(void *);
	*(void **)&m = sym_global("malloc");
	*(void **)&f = sym_global("free");
	if (!m || !f)
		return 0;
	void *p = m(16);
	int forwards = hooks_boot_block(p);
	f(p);
	if (forwards)
		return 0;
	if (who == SYM_DEF_PROGRAM)
		seg_note_unseen(YM_UNSEEN_OWN_CALLS, "");
	return 1;
}

/* A function's definition for compat.c, NULL when none (or not a plain
 * function: _dl_find_object and strerrordesc_np are). */
static void *compat_lookup(const char *name)
{
	void *f = sym_global(name);
	return f == SYM_OTHER ? NULL : f;
}

__attribute__((constructor)) static void agent_init(void)
{
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	/* What this glibc lacks (compat.h); fork children keep the
	 * answers. */
	agent_compat_init(compat_lookup);
	agent_injected = detect_injected();
	agent_slots = agent_injected || detect_behind();
	/* Injected into an executable that defines malloc: its own calls
	 * are direct, through no slot. */
	if (agent_injected && sym_first_definer("malloc") == SYM_DEF_PROGRAM)
		seg_note_unseen(YM_UNSEEN_OWN_CALLS, "");
	/* Preloaded, the environment is read at the first call (seg.h): a
	 * process that makes none (/bin/true) pays nothing for it. */
	if (agent_injected)
		agent_configure();
	/* Through slots: the real functions are taken before the first
	 * patch. */
	if ((!agent_slots || got_init() == 0) && agent_resolve()) {
		hooks_jemalloc_resolve();
		pthread_atfork(fork_prepare, fork_parent_done, fork_child);
		seg_note_owner();
		/* Preloaded, the segment is made by the first allocation (its
		 * slow path): a process that never allocates (/bin/true) costs
		 * no segment, and ymtop -p starts one (ymagent_start).
		 * Injected, now: the GOT is patched once it is active. */
		if (agent_injected) {
			agent_enter(t);
			if (agent_active())
				got_patch_all();
		} else if (agent_slots) {
			/* Preloaded behind another malloc: the slots now,
			 * before the program runs, unless YM_DISABLE says
			 * the agent stays out of the way; the first call
			 * through them goes on as a preloaded agent's. */
			agent_configure();
			if (!agent_cfg.disabled)
				got_patch_all();
		}
	}
	agent_guard_leave(t);
}

__attribute__((destructor)) static void agent_fini(void)
{
	agent_exiting_in_exit();
}
