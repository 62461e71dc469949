/*
 * hooks_exec: the exec family (hooks_exec.c).
 *
 * execve, execv, execvp, execvpe, fexecve, execl, execlp and execle,
 * interposed (preloaded: exported; injected: got.c's slots).  A process
 * whose image is replaced leaves its segment behind when the new image
 * has no agent to replace it (a shell's command, a wrapper's exec): the
 * segment's name is removed before the call and made again, with what the
 * segment holds, when the call returns, that is when it failed (seg.h,
 * seg_exec_begin).  A vfork child's exec (posix_spawn's) and a process
 * with no segment pass straight through.  glibc's own calls between
 * these (execvp's of execve, system's and posix_spawn's) are not seen:
 * the outermost call is.
 */
#ifndef YMTOP_AGENT_HOOKS_EXEC_H
#define YMTOP_AGENT_HOOKS_EXEC_H

#include "base.h"

int hook_execve(const char *, char *const[], char *const[]) AGENT_HIDDEN;
int hook_execv(const char *, char *const[]) AGENT_HIDDEN;
int hook_execvp(const char *, char *const[]) AGENT_HIDDEN;
int hook_execvpe(const char *, char *const[], char *const[]) AGENT_HIDDEN;
int hook_fexecve(int, char *const[], char *const[]) AGENT_HIDDEN;
int hook_execl(const char *, const char *, ...) AGENT_HIDDEN;
int hook_execlp(const char *, const char *, ...) AGENT_HIDDEN;
int hook_execle(const char *, const char *, ...) AGENT_HIDDEN;

#endif
