/*
 * quiesce: the unload rule's check (man/ymagent.7, injector/agent/
 * detach.c).  After the agent's slots are restored no call can enter it;
 * a thread may still be inside it.  Stop every thread of the process
 * (PTRACE_SEIZE + PTRACE_INTERRUPT each task of /proc/PID/task, listed
 * again until no new task appears) and, for each, check that its
 * instruction pointer is outside every mapping of the agent and that no
 * general register and no word from its stack pointer to the end of its
 * stack's mapping points into the agent's code (a call pushes its return
 * address, so a thread with an agent frame anywhere on its chain is
 * caught; a stale word only makes the check conservative).  Then let every
 * thread go, with the signals that reached it meanwhile.  Runs in ymtop.
 *
 * Not seen: the words of a stack a signal handler running on an
 * alternate stack interrupted (its frame is checked, the interrupted
 * stack beyond it is not).  The agent installs no signal handler, so
 * such a thread is inside the agent only if the program's handler was
 * entered from agent code: its signal frame's saved instruction pointer
 * is then an agent address on the alternate stack, which is checked.
 */
#ifndef YMTOP_INJECT_QUIESCE_H
#define YMTOP_INJECT_QUIESCE_H

#include <stddef.h>
#include <sys/types.h>

/* Up to a few attempts, a short pause between them: 1 when every
 * thread was seen outside the agent (the agent may be unloaded), 0 when
 * one was inside at each attempt or the threads could not be stopped
 * (why: one line, naming the thread and what was found). */
int inject_quiesced(pid_t pid, char *why, size_t len);

#endif
