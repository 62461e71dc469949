/*
 * procfs: what /proc tells about a target before the injector touches
 * anything (status, maps, the executable's machine, its threads), and
 * how to open a file it has mapped.  Reads only; runs in ymtop.
 */
#ifndef YMTOP_INJECT_PROCFS_H
#define YMTOP_INJECT_PROCFS_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

/* /proc/PID/status, the lines the injector decides on. */
struct pstatus {
	char  name[64];
	char  state;
	pid_t tgid;          /* != pid: pid is a thread of process tgid */
	pid_t tracer;
	uid_t uid;           /* real uid */
	int   seccomp;
};

/* [lo, hi) in the target's address space. */
struct range {
	uintptr_t lo, hi;
};

/* What /proc/PID/maps tells of the C library, ld.so and the agent. */
struct tmaps {
	char      libc[PATH_MAX];
	uintptr_t libc_base;
	int       have_libc;
	struct range ldso;        /* ld.so's executable mappings */
	int       has_agent;
};

/* 0, or -errno (-ENOENT: no such process); *ps zeroed first. */
int inject_read_status(pid_t pid, struct pstatus *ps);

/* 0, or -errno; *m zeroed first.  musl's C library is its own loader
 * (ld-musl-*.so.1, or a libc.so): it is the libc here and ldso stays
 * empty; libcsyms finds its loader's text inside it. */
int inject_read_maps(pid_t pid, struct tmaps *m);

/* One line of /proc/PID/maps, parsed in place: 1 with its range, the
 * first three permission letters, its offset and its path (the line's
 * own text, newline cut; "" for an anonymous mapping); 0 when the line
 * does not parse. */
struct maps_line {
	unsigned long lo, hi, off;
	char perms[8];
	char *path;
};
int inject_maps_line(char *line, struct maps_line *ml);

/* A read-only descriptor (the caller closes it) of the file mapped at lo
 * in pid, whose path maps shows as path; -1 (errno) when it opens by
 * neither way. */
int inject_open_mapped(pid_t pid, uintptr_t lo, const char *path);

/* Is b (a mapped file's base name) the agent: libymagent.so, the musl
 * build libymagent-musl.so, or the memfd the injector brings either in
 * (load.c names it libymagent.so)?  Also after " (deleted)": a file
 * replaced since it was mapped (ymtop upgraded while the agent runs) is
 * the agent still, its code read through /proc/PID/map_files. */
int inject_is_agent_file(const char *b);

/* 0: x86-64 ELF; else the e_machine (or -1 unreadable, -2 32-bit). */
int inject_exe_machine(pid_t pid);

/* pid's threads into tids (at most max, max >= 1), sleeping ones first,
 * the main thread leading among them.  Their count, or -errno. */
int inject_list_tids(pid_t pid, pid_t *tids, int max);

/* Is pid another ymtop (this program, or one named so)? */
int inject_is_ymtop(pid_t pid);

/* Why the kernel refuses ymtop ptrace access to pid (and with it its
 * /proc/PID/root, maps and memory), as far as /proc tells: one clause,
 * with the remedy, into buf; returns buf.  attach: for PTRACE_SEIZE,
 * which Yama's ptrace_scope and a seccomp filter on ymtop also govern
 * (reading /proc is not).  Root with CAP_SYS_PTRACE refused is told that
 * a security module or sandbox protects the process, not to be root. */
const char *inject_refusal(pid_t pid, int attach, char *buf, size_t len);

#endif
