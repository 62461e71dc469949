/*
 * inject: load the agent into a running process (ymtop -p PID, when the
 * process has no segment).  x86-64 Linux, ptrace.
 *
 * One thread of the target is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT),
 * its registers and full extended state saved, and made to call
 * dlopen(agent, RTLD_NOW) from a small stub written over libc's ELF entry
 * point (code that never runs after start-up); the agent's resume function
 * (resume.h) then returns control with a signal, or an int3.  Then memory,
 * registers and extended state are restored exactly and the thread
 * detached: a system call it was blocked in resumes as if nothing
 * happened.  The other threads keep running throughout.  Should ymtop die
 * meanwhile, the agent restores the thread itself from a signal frame
 * ymtop left on its stack.
 *
 * The agent's constructor (running in that thread, inside dlopen) creates
 * the segment and rewrites the GOT slots of the malloc family (got.c).
 */
#ifndef YMTOP_INJECT_H
#define YMTOP_INJECT_H

#include <stddef.h>
#include <sys/types.h>

struct inject_result {
	pid_t  tid;          /* the thread that ran dlopen */
	double pause_ms;     /* how long that thread was stopped */
	int    attempts;     /* stops until a safe moment was found */
	int    dormant;      /* 1: the agent is there, dormant, and could
			      * not be unloaded to load it afresh (err) */
};

/* Load `agent` into pid (an agent an earlier detach left dormant, when
 * it may be unloaded now, is unloaded as inject_detach does and loaded
 * afresh: its slots patched again through the same trampoline page, a
 * new segment; else -1 with res->dormant set and err saying why and what
 * to do): by its path, valid inside the target's mount
 * namespace; or, with bring set (the path does not exist there: a
 * container), by copying the file, read from ymtop's side, into a memfd
 * the target creates and dlopening /proc/self/fd/N in the target (which
 * needs /proc mounted there); nothing is written to its filesystem.  0 on success.  1 when another ymtop was loading it at the same
 * moment and did (we waited for it: its segment is there to open).  -1
 * with one line in err (the reason and the remedy); the target is then
 * untouched (or, if it failed after dlopen ran, restored and running).
 * Never leaves the target stopped; signals of ymtop are held while a
 * thread of the target is under our control. */
int inject_agent(pid_t pid, const char *agent, int bring,
		 struct inject_result *res, char *err, size_t errlen);

/* The agent is loaded and active (preloaded or loaded by ymtop -p) but
 * the process makes no allocator call, so it cannot answer a request for
 * the allocator's statistics: borrow one of its threads at a safe moment
 * as above and make it call the agent's ymagent_heapstats (its address
 * from the agent's file, agentsym.h), which takes them now.
 * Refuses (-1, err) a process that is traced, stopped, a zombie or under
 * strict seccomp, without waiting for anything.  0 on success; the
 * target is never left stopped or changed. */
int inject_heapstats(pid_t pid, struct inject_result *res, char *err,
		     size_t errlen);

/* ymtop -p PID --detach: a borrowed thread calls the agent's
 * ymagent_detach (sampling off, every slot back to the allocator, the
 * segment removed: include/ymtop/detach.h), then, under the unload rule
 * (quiesce.h: every thread stopped and seen outside the agent), another
 * borrowed thread calls dlclose on it.  0: done, r->unloaded 1 when the
 * agent is gone from the process, else dormant (pass-through) with the
 * reason in r->why; -1 with one line in err (nothing was detached). */
struct detach_result {
	int  code;         /* YM_DETACH_* */
	int  unloaded;
	char why[320];
};
int inject_detach(pid_t pid, struct detach_result *r, char *err, size_t errlen);

#endif
