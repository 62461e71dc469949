/*
 * ymtop detach protocol: what the agent's exported ymagent_detach returns
 * to ymtop, which calls it through a borrowed thread (ymtop -p PID
 * --detach, injector/ptrace/detach.c).  The agent's side is
 * injector/agent/detach.c; man/ymagent.7 states the unload rule.
 *
 *   int ymagent_detach(void)          the steps of detach.c, once;
 *                                     each call says what may become
 *                                     of the agent (YM_DETACH_*)
 *   void *ymagent_unload_handle(void) what dlclose unloads the agent
 *                                     with (its link map), NULL when it
 *                                     must stay loaded
 *   void ymagent_release(void)        the check passed: the destructor
 *                                     that dlclose runs next unmaps the
 *                                     agent's memory
 */
#ifndef YMTOP_DETACH_H
#define YMTOP_DETACH_H

/* Sampling stopped, slots restored, segment removed: ymtop may unload the
 * agent once no thread is inside it (the unload rule). */
#define YM_DETACH_UNLOADABLE 1
/* Dormant: preloaded, the process's own malloc is the agent's exported
 * one, which now passes every call through. */
#define YM_DETACH_PRELOADED  2
/* Dormant: a pointer into the agent may remain (a slot that could not be
 * written back, a handed-out pointer without a trampoline entry, a block
 * of its bootstrap buffer). */
#define YM_DETACH_POINTERS   3
/* Detached before: nothing done (an agent that answers each call with
 * the state above, as this one does, never says it). */
#define YM_DETACH_ALREADY    4
/* Not yet unloadable: the Python interpreter's allocator tables still
 * lead to the agent until its main thread runs the pending call that
 * puts them back (hooks_py.h); ask again. */
#define YM_DETACH_PYTHON     5

#endif
