/*
 * detach: ymtop -p PID --detach, --duration's end and the screen's detach
 * key: the agent leaves the process (injector/ptrace/inject.h,
 * inject_detach), and ymtop says in one line what became of it: unloaded,
 * or left loaded and dormant and why.
 */
#ifndef YMTOP_DETACH_H_TUI
#define YMTOP_DETACH_H_TUI

#include <stddef.h>
#include <sys/types.h>

/* Detach pid's agent; the outcome in msg (one line, no newline).  0 when
 * the agent detached (unloaded or dormant), 1 when the process maps no
 * agent, -1 when nothing could be done (msg says why). */
int detach_target(pid_t pid, char *msg, size_t len);

/* The end of --duration (on time, or ymtop stopped): what ymtop -p did
 * is undone.  The agent leaves as detach_target takes it out, unless the
 * process has exited (nothing to detach) or its agent was preloaded
 * (someone chose to run it: it is left sampling, as the process was,
 * rather than made dormant for good); then 1, with msg saying so. */
int detach_at_end(pid_t pid, char *msg, size_t len);

#endif
