/*
 * life: the agent's process life: its constructor (preloaded or
 * injected) and destructor.
 *
 * The agent (libymagent.so) is guest code: it runs inside the target's
 * allocator calls.  No stdio, no malloc family, no exit, no output on
 * stdout; every failure makes it passive (calls pass straight through)
 * after at most one line on stderr.  Its files, one subsystem each, each
 * owning its state, each including only files of lower layers
 * (ARCHITECTURE.md draws them):
 *
 *   life.c      constructor, destructor: how the agent came in (the top)
 *   got.c       slots and data words rewritten to the hooks: injected,
 *               or preloaded behind another object's malloc
 *   hooks.c     the exported malloc family: fast paths, bootstrap, guard
 *   hooks_life.c      _exit, the setuid family, dlclose, ymagent_start
 *   hooks_cxx.c       the allocator's own C++ operator new and delete
 *   hooks_jemalloc.c  jemalloc's API (mallocx...)
 *   enter.c     the slow paths' entry: thread entry, the segment a slow
 *               path needs, fork
 *   hooks_mmap.c      anonymous mmap/munmap/mremap by the program
 *   hooks_exec.c      the exec family: the segment's name around an exec
 *   detach.c    ymagent_detach: the agent leaves (ymtop --detach), the
 *               unload rule
 *   seg.c       the segment: creation, activation, exit, setuid
 *   stale.c     segments of processes that are gone
 *   config.c    YM_* environment, read once; the mode (injected, slots)
 *   next.c      the next definitions (dlsym), glibc's usable size
 *   scope.c     definitions in a caller's own scope (RTLD_LOCAL plugins)
 *   symbols.c   symbol lookups without the loader's lock
 *   threads.c   TLS, the guard, thread slots and their counters
 *   sampling.c  the sampled slow path; reads CONTROL
 *   budget.c    the cost budget: times the sampled paths, judges windows
 *   heapstats.c the allocator's own statistics, on a reader's request
 *   table.c     stacks, counters, counter planes, the agent's lock
 *   live.c      the live table and free's filters
 *   giant.c     giant requests, the alarm ring
 *   modules.c   loaded objects, our own text
 *   tramp.c     the trampoline page: handed-out pointers outlive the agent
 *   trend.c     the trend history: a slot of the largest and rising stacks' estimates
 *   loader.c    the loader's list, walked without waiting in fork
 *               children; the object holding an address; _r_debug
 *   backing.c   memory behind the segment's pages
 *   unwind.c    the calling thread's stack, from .eh_frame
 *   python.c    the calling thread's CPython frames, code object names,
 *               the pymalloc hook's state and trigger
 *   hooks_py.c  the wrapper of CPython's object and PyMem allocators
 *   clock.c     agent_now_ns: CLOCK_MONOTONIC from the time-stamp counter
 *   compat.c    what glibc 2.17 lacks
 *   os.c        the agent's own memory, by system call
 *   base.c      assertions, messages, clocks, spin helpers
 *   segstate.h  the segment's state word
 *   segpriv.h   the agent's private words in segment records
 *   hooknames.h, dynamic.h  hidden names of the hooks; .dynamic pointers
 *   sample.h    the sampling distribution and estimator (pure)
 *   ../resume.c injected mode: a borrowed thread's way home
 *
 * One writer a segment section (segment.h):
 *
 *   header      seg.c (fields fixed at creation, magic last; exit, uid);
 *               changing fields by the owner of what they count: flags
 *               PAUSED sampling.c, OVERFLOWED sampling.c and table.c,
 *               sample_rate sampling.c, budget budget.c (v9),
 *               drop_* where the drop happens,
 *               heap heapstats.c, retained_est and peaks table.c,
 *               exit_how/exit_status seg.c, UNSEEN and unseen_* seg.c
 *               (for got.c and life.c: seg_note_unseen), py_* python.c
 *   CONTROL     read (sampling.c polls it, heapstats.c heap_request), but
 *               fast_limit, which heapstats.c and readers both write
 *   THREADS     threads.c and threads.h (the fast paths' inline counters)
 *   STACKS      table.c (and their ext: kind, peaks)
 *   PLANES      table.c
 *   STRIPES     live.c
 *   LIVE        live.c
 *   ALARMS      giant.c
 *   MODULES     modules.c
 *   py_codes    python.c (v8: placed by seg.c after the sections)
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
#include "detach.h"
#include "enter.h"
#include "got.h"
#include "hooknames.h"
#include "hooks_cxx.h"
#include "hooks_py.h"
#include "loader.h"
#include "modules.h"
#include "next.h"
#include "python.h"
#include "seg.h"
#include "symbols.h"
#include "threads.h"

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
	void *def = sym_dlsym(RTLD_DEFAULT, "malloc");
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
	/* Where _r_debug is (loader.h), then what this glibc lacks
	 * (compat.h); fork children keep the answers. */
	agent_r_debug();
	agent_compat_init(compat_lookup);
	/* The pymalloc wrapper, installed by a pending call once the
	 * interpreter is found and initialised (python.h). */
	python_hook_register(pyhook_install);
	agent_injected = detect_injected();
	agent_slots = agent_injected || detect_behind();
	/* Objects loaded behind our dlopen hook get their slots at the
	 * module scan that finds them. */
	if (agent_slots)
		modules_on_change(got_patch_try);
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
		hooks_cxx_resolve();
		agent_atfork();
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

/* Run by exit(), or by dlclose when ymtop unloads a detached agent
 * (detach.c: no thread is inside it then). */
__attribute__((destructor)) static void agent_fini(void)
{
	if (detach_done())
		detach_unload();
	else
		agent_exiting_in_exit();
}
