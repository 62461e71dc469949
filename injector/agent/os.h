/*
 * os: the agent's one way to map, unmap, protect and advise memory (os.c),
 * by system call.  The agent exports mmap and munmap (hooks_mmap.c): a
 * call of libc's mmap from inside the agent binds, when the agent is
 * preloaded, to that export, so the agent's own mappings would go through
 * its hook and only the hook's caller-address test would keep them out of
 * the figures.  Every file of the agent, and shm/create.c, maps through
 * here instead; tests/integration/test_agent.py checks that the library
 * has no relocation against a name it exports itself.
 *
 * Each function is the system call's contract: as mmap(2) (MAP_FAILED and
 * errno on failure), munmap(2), mprotect(2), madvise(2) (0, or -1 and
 * errno).  Any context: no lock, no allocation.
 */
#ifndef YMTOP_AGENT_OS_H
#define YMTOP_AGENT_OS_H

#include <stddef.h>
#include <sys/types.h>

#include "base.h"

void *os_map(void *addr, size_t len, int prot, int flags, int fd, off_t off) AGENT_HIDDEN;
int   os_unmap(void *addr, size_t len) AGENT_HIDDEN;
int   os_protect(void *addr, size_t len, int prot) AGENT_HIDDEN;
int   os_advise(void *addr, size_t len, int advice) AGENT_HIDDEN;

/* len bytes of private zero-filled memory (never in the segment, never
 * the allocator's), or NULL. */
void *agent_map_private(size_t len) AGENT_HIDDEN;

#endif
