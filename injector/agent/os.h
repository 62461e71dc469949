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
#include <stdint.h>
#include <sys/types.h>

#include "base.h"

void *os_map(void *addr, size_t len, int prot, int flags, int fd, off_t off) AGENT_HIDDEN;
int   os_unmap(void *addr, size_t len) AGENT_HIDDEN;
int   os_protect(void *addr, size_t len, int prot) AGENT_HIDDEN;
int   os_advise(void *addr, size_t len, int advice) AGENT_HIDDEN;

/* len bytes of private zero-filled memory (never in the segment, never
 * the allocator's), or NULL. */
void *agent_map_private(size_t len) AGENT_HIDDEN;

/* At most size - 1 bytes of the file at path, NUL-terminated in buf
 * (reads repeated until end of file or the bound; EINTR retried): the
 * length, or -1 when it cannot be opened. */
ssize_t os_read_file(const char *path, char *buf, size_t size) AGENT_HIDDEN;

/* One line of /proc/PID/maps: "start-end perms offset dev inode path".
 * perms is the four letters ("rw-p"), NUL-terminated; path is "" for a
 * mapping without one and keeps the kernel's " (deleted)" or "[heap]"
 * as written.  path_cut: the line was longer than the walker's buffer,
 * path holds its first bytes only.  Valid during the callback only. */
struct os_maps_line {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	const char *perms;
	const char *path;
	int path_cut;
};

/* Called once a line, in the file's order; nonzero stops the walk and is
 * os_maps_walk's result. */
typedef int (*os_maps_fn)(const struct os_maps_line *l, void *arg);

/* Every line of /proc/self/maps (os_maps_walk) or of the maps text read
 * from fd (os_maps_walk_fd, which leaves fd open) through fn, in a buffer
 * on the stack: no allocation, no stdio, any context.  A line whose
 * fields before the path do not parse is skipped.  Returns fn's nonzero
 * result, 0 at the end of the text, -1 when the file cannot be opened or
 * read (errno).  A read may end anywhere in a line. */
int os_maps_walk(os_maps_fn fn, void *arg) AGENT_HIDDEN;
int os_maps_walk_fd(int fd, os_maps_fn fn, void *arg) AGENT_HIDDEN;

#endif
