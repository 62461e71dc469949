/*
 * os: memory system calls for the agent itself, and its one reader of
 * /proc/self/maps (os.h).  syscall(2) is libc's, exported by no object
 * the agent interposes.
 *
 * State: none.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
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

/* The maps walker's buffer: a line's fields before its path take under
 * 100 bytes, so a longer line loses only the end of its path. */
#define OS_MAPS_BUF 4096u

/* Hex digits at *p (at least one, at most 16), past them. */
static int maps_hex(char **p, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;
	for (;; n++) {
		char c = (*p)[n];
		int d = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (n == 16)
			return -1;
		x = x << 4 | (uint64_t)d;
	}
	if (n == 0)
		return -1;
	*p += n;
	*v = x;
	return 0;
}

static int maps_dec(char **p, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;
	for (; (*p)[n] >= '0' && (*p)[n] <= '9'; n++) {
		if (n == 20)
			return -1;
		x = x * 10 + (uint64_t)((*p)[n] - '0');
	}
	if (n == 0)
		return -1;
	*p += n;
	*v = x;
	return 0;
}

/* Parse one NUL-terminated line in place into l; -1 when its fields do
 * not parse. */
static int maps_parse(char *s, int cut, struct os_maps_line *l)
{
	uint64_t maj, min;
	if (maps_hex(&s, &l->start) || *s++ != '-' ||
	    maps_hex(&s, &l->end) || *s++ != ' ')
		return -1;
	l->perms = s;
	for (int i = 0; i < 4; i++)
		if (s[i] == '\0' || s[i] == ' ')
			return -1;
	if (s[4] != ' ')
		return -1;
	s[4] = '\0';
	s += 5;
	if (maps_hex(&s, &l->offset) || *s++ != ' ' ||
	    maps_hex(&s, &maj) || *s++ != ':' ||
	    maps_hex(&s, &min) || *s != ' ')
		return -1;
	s++;
	if (maps_dec(&s, &l->inode) || (*s != ' ' && *s != '\0'))
		return -1;
	while (*s == ' ')
		s++;
	l->dev_major = (uint32_t)maj;
	l->dev_minor = (uint32_t)min;
	l->path = s;
	l->path_cut = cut;
	return 0;
}

int os_maps_walk_fd(int fd, os_maps_fn fn, void *arg)
{
	char buf[OS_MAPS_BUF + 1];
	size_t have = 0;
	int skip = 0;   /* inside the rest of a line longer than buf */
	struct os_maps_line l;
	for (;;) {
		ssize_t n = syscall(SYS_read, fd, buf + have, OS_MAPS_BUF - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			/* A last line without its newline. */
			buf[have] = '\0';
			if (have && !skip && maps_parse(buf, 0, &l) == 0)
				return fn(&l, arg);
			return 0;
		}
		have += (size_t)n;
		size_t at = 0;
		char *nl;
		while ((nl = memchr(buf + at, '\n', have - at)) != NULL) {
			*nl = '\0';
			if (!skip && maps_parse(buf + at, 0, &l) == 0) {
				int r = fn(&l, arg);
				if (r)
					return r;
			}
			skip = 0;
			at = (size_t)(nl + 1 - buf);
		}
		have -= at;
		memmove(buf, buf + at, have);
		if (have == OS_MAPS_BUF) {
			buf[have] = '\0';
			if (!skip && maps_parse(buf, 1, &l) == 0) {
				int r = fn(&l, arg);
				if (r)
					return r;
			}
			skip = 1;
			have = 0;
		}
	}
}

int os_maps_walk(os_maps_fn fn, void *arg)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps",
			      O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = os_maps_walk_fd(fd, fn, arg);
	int e = errno;
	syscall(SYS_close, fd);
	errno = e;
	return r;
}

ssize_t os_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < size - 1) {
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}
