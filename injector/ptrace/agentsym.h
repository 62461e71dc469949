/*
 * agentsym: the address in the target of a function the agent exports,
 * read from the agent's own file as the target maps it (its dynamic
 * symbols) and checked against the target's executable mappings of it.
 * Finds a preloaded agent and one that ymtop -p loaded alike (the latter
 * is private to its process: dlsym by name cannot see it).  Runs in
 * ymtop; the file and /proc/PID/maps are the target's, so hostile.
 */
#ifndef YMTOP_INJECT_AGENTSYM_H
#define YMTOP_INJECT_AGENTSYM_H

#include <stdint.h>
#include <sys/types.h>

/* The address of the agent's function `name` in pid, or 0 when the agent
 * is not mapped, its file does not open or read, it does not define
 * name, or the address is not in an executable mapping of it. */
uintptr_t inject_agent_symbol(pid_t pid, const char *name);

/* The value (and size, when size is not NULL) of the defined dynamic
 * symbol name of type (STT_FUNC, STT_OBJECT) in the x86-64 shared object
 * fd (elf_version already called), with its lowest PT_LOAD address (the
 * bias is the mapping's base minus it): 1, or 0 when fd is no such
 * object or does not define name so. */
int inject_dynsym(int fd, const char *name, int type, uint64_t *value,
		  uint64_t *size, uint64_t *first);

#endif
