/*
 * os: memory system calls for the agent itself (os.h).  syscall(2) is
 * libc's, exported by no object the agent interposes.
 *
 * State: none.
 */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os.h"

void *os_map(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int os_unmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

int os_protect(void *addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

int os_advise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

void *agent_map_private(size_t len)
{
	void *p = os_map(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}
