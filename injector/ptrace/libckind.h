/*
 * libckind: which C library a target runs with (glibc, musl, or none: a
 * statically linked program), told from /proc before anything is
 * touched, and the one line ymtop -p gives for those it cannot load the
 * agent into.  Reads only; runs in ymtop.
 *
 * The agent libymagent.so is linked against glibc and loads into glibc
 * programs only; libymagent-musl.so, beside it, loads into musl programs
 * (preloaded or injected); a static program has no loader to take
 * either.
 */
#ifndef YMTOP_INJECT_LIBCKIND_H
#define YMTOP_INJECT_LIBCKIND_H

#include <stddef.h>
#include <sys/types.h>

enum inject_libc {
	INJECT_LIBC_UNKNOWN,   /* neither file nor maps tell (unreadable) */
	INJECT_LIBC_GLIBC,
	INJECT_LIBC_MUSL,
	INJECT_LIBC_STATIC,    /* no program interpreter, no libc mapped */
};

struct inject_libc_seen {
	enum inject_libc kind;
	int musl_agent;        /* libymagent-musl.so is mapped */
};

/* What pid runs with: the program interpreter its executable names
 * (PT_INTERP of /proc/PID/exe: ld-musl-* is musl's, ld-linux* glibc's),
 * and the C library /proc/PID/maps shows (musl's libc is its own loader:
 * ld-musl-*.so.1, libc.musl-*, or a libc.so under a musl directory, as
 * Debian's musl installs it).  A musl mapping wins over the interpreter
 * (a musl program started by naming its loader).  0, or -errno when
 * neither the executable nor the maps can be read. */
int inject_libc_kind(pid_t pid, struct inject_libc_seen *out);

/* For a statically linked pid (name: its comm), or a musl one offered
 * an agent that is not libymagent-musl.so: one line into err, the reason
 * and the remedy, and -1; 0 otherwise (glibc, musl with the musl agent,
 * or not known: the injector's own checks decide).  agent: the path of
 * the agent ymtop would load. */
int inject_libc_refusal(pid_t pid, const char *name, const char *agent,
			char *err, size_t len);

/* agent (the path of libymagent.so, len bytes of room) becomes the musl
 * agent beside it when pid is a musl program; unchanged otherwise. */
void inject_agent_for(pid_t pid, char *agent, size_t len);

#endif
