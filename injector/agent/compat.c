/*
 * compat: what glibc 2.17 lacks, done without it (compat.h).
 *
 * State, this file's: the run-time answers to "has this glibc
 * _dl_find_object and strerrordesc_np" (agent_compat_init, from the
 * constructor); found once a process, kept in fork children.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

/* The functions the renames in compat.h stand for, called by name here
 * only where no system call does (other targets than x86_64 and
 * aarch64, whose struct stat is the kernel's). */
#undef stat
#undef fstat
#undef fstatat

/* ---- System calls ---- */

int agent_stat(const char *path, struct stat *st)
{
	return agent_fstatat(AT_FDCWD, path, st, 0);
}

int agent_fstat(int fd, struct stat *st)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return (int)syscall(SYS_fstat, fd, st);
#else
	return fstat(fd, st);
#endif
}

int agent_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return (int)syscall(SYS_newfstatat, dirfd, path, st, flags);
#else
	return fstatat(dirfd, path, st, flags);
#endif
}

ssize_t agent_getdents64(int fd, void *buf, size_t len)
{
	return (ssize_t)syscall(SYS_getdents64, fd, buf, len);
}

int agent_memfd_create(const char *name, unsigned flags)
{
	return (int)syscall(SYS_memfd_create, name, flags);
}

#define SHM_DIR "/dev/shm/"

/* "/dev/shm/" name without its leading '/' into path (NAME_MAX + 10
 * bytes); -1 with EINVAL for a name glibc refuses. */
static int shm_path(const char *name, char path[NAME_MAX + 10])
{
	while (*name == '/')
		name++;
	size_t n = strnlen(name, NAME_MAX + 1);
	if (n == 0 || n > NAME_MAX || memchr(name, '/', n) ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		errno = EINVAL;
		return -1;
	}
	memcpy(path, SHM_DIR, sizeof SHM_DIR - 1);
	memcpy(path + sizeof SHM_DIR - 1, name, n + 1);
	return 0;
}

int agent_shm_open(const char *name, int oflag, mode_t mode)
{
	char path[NAME_MAX + 10];
	if (shm_path(name, path) != 0)
		return -1;
	return open(path, oflag | O_NOFOLLOW | O_CLOEXEC, mode);
}

int agent_shm_unlink(const char *name)
{
	char path[NAME_MAX + 10];
	if (shm_path(name, path) != 0)
		return -1;
	return unlink(path);
}

/* ---- Run-time lookups ---- */

/* glibc 2.35's, declared here so that older headers build too. */
struct compat_dlfo {
	unsigned long long flags;
	void *map_start, *map_end;
	struct link_map *link_map;
	void *eh_frame;
	unsigned long long reserved[7];
};
typedef int (*dlfo_fn)(void *pc, struct compat_dlfo *o);
typedef const char *(*errdesc_fn)(int e);

enum { INIT_NONE, INIT_BUSY, INIT_DONE };

static int lookup_state;
static dlfo_fn dlfo;
static errdesc_fn errdesc;

/* Once: 1 for the caller that is to do it. */
static int first(int *state)
{
	int expect = INIT_NONE;
	return __atomic_compare_exchange_n(state, &expect, INIT_BUSY, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void agent_compat_init(agent_lookup_fn lookup)
{
	if (!lookup || !first(&lookup_state))
		return;
#ifndef YM_TEST_OLD_GLIBC
	/* Both are plain functions where they exist. */
	void *f = lookup("_dl_find_object");
	__atomic_store_n(&dlfo, (dlfo_fn)f, __ATOMIC_RELEASE);
	f = lookup("strerrordesc_np");
	__atomic_store_n(&errdesc, (errdesc_fn)f, __ATOMIC_RELEASE);
#endif
	__atomic_store_n(&lookup_state, INIT_DONE, __ATOMIC_RELEASE);
}

int agent_have_dl_find_object(void)
{
	return __atomic_load_n(&dlfo, __ATOMIC_ACQUIRE) != NULL;
}

int agent_dlfo(const void *pc, struct agent_object *o)
{
	dlfo_fn f = __atomic_load_n(&dlfo, __ATOMIC_ACQUIRE);
	struct compat_dlfo d;
	if (f((void *)pc, &d) != 0)
		return -1;
	o->map_start = d.map_start;
	o->map_end = d.map_end;
	o->link_map = d.link_map;
	o->eh_frame = d.eh_frame;
	return 0;
}

/* ---- Errno texts ---- */

/* glibc's own texts for what the agent's system calls may fail with. */
static const struct {
	int e;
	const char *text;
} errno_texts[] = {
	{ EPERM, "Operation not permitted" },
	{ ENOENT, "No such file or directory" },
	{ ESRCH, "No such process" },
	{ EINTR, "Interrupted system call" },
	{ EIO, "Input/output error" },
	{ EBADF, "Bad file descriptor" },
	{ EAGAIN, "Resource temporarily unavailable" },
	{ ENOMEM, "Cannot allocate memory" },
	{ EACCES, "Permission denied" },
	{ EFAULT, "Bad address" },
	{ EBUSY, "Device or resource busy" },
	{ EEXIST, "File exists" },
	{ ENODEV, "No such device" },
	{ ENOTDIR, "Not a directory" },
	{ EISDIR, "Is a directory" },
	{ EINVAL, "Invalid argument" },
	{ ENFILE, "Too many open files in system" },
	{ EMFILE, "Too many open files" },
	{ ETXTBSY, "Text file busy" },
	{ EFBIG, "File too large" },
	{ ENOSPC, "No space left on device" },
	{ EROFS, "Read-only file system" },
	{ ENAMETOOLONG, "File name too long" },
	{ ENOSYS, "Function not implemented" },
	{ ELOOP, "Too many levels of symbolic links" },
	{ EOVERFLOW, "Value too large for defined data type" },
	{ EOPNOTSUPP, "Operation not supported" },
	{ EDQUOT, "Disk quota exceeded" },
};

const char *agent_errno_table(int e)
{
	for (size_t i = 0; i < sizeof errno_texts / sizeof errno_texts[0]; i++)
		if (errno_texts[i].e == e)
			return errno_texts[i].text;
	return NULL;
}

/* gettext, behind strerror, may allocate under a lock its caller holds (a
 * postmaster hung for good in bindtextdomain this way).  strerrordesc_np
 * is English, static, and takes no lock; so is the table. */
const char *agent_errno_text(int e)
{
	errdesc_fn f = __atomic_load_n(&errdesc, __ATOMIC_ACQUIRE);
	const char *d = f ? f(e) : agent_errno_table(e);
	return d ? d : "unknown error";
}
