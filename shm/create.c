/*
 * Segment creation, agent side.  Runs inside the target: no heap, no stdio,
 * every failure returned to the caller (which then stays passive).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/os.h"
#include "shm.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

/* Mark a segment we are about to replace, so that a reader still holding it
 * shows the old image as gone instead of frozen. */
static void mark_replaced(int fd, uint64_t size)
{
	if (size < YM_HEADER_SIZE)
		return;
	struct ym_header *h = os_map(NULL, YM_HEADER_SIZE,
				     PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return;
	if (h->magic == YM_MAGIC)
		__atomic_fetch_or(&h->flags, YM_FLAG_EXITED, __ATOMIC_RELEASE);
	os_unmap(h, YM_HEADER_SIZE);
}

/* An existing /ymtop-<pid> can only be ours: no other live process has our
 * pid.  It is either our previous image (exec) or left by a dead process.
 * Replace it if we own it; refuse otherwise. */
static int replace_existing(const char *name)
{
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		rc = -EEXIST;
	else
		mark_replaced(fd, (uint64_t)st.st_size);
	close(fd);
	if (rc == 0 && shm_unlink(name) != 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

int shm_create(pid_t pid, uint32_t pidns, uint64_t size, void **map)
{
	char name[40];
	shm_name(name, sizeof name, pid, pidns);

	int fd = -1;
	for (int attempt = 0; attempt < 3 && fd < 0; attempt++) {
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return -errno;
		int rc = replace_existing(name);
		if (rc < 0)
			return rc;
	}
	if (fd < 0)
		return -EEXIST;

	/* Sparse: pages get memory when the agent first needs them
	 * (injector/agent/backing.c), so that a small process holds a small part
	 * of /dev/shm.  A write to a page tmpfs cannot supply would raise
	 * SIGBUS in the host; MADV_POPULATE_WRITE reports it as an error
	 * instead (EFAULT, or ENOMEM).  Kernels before 5.14 lack it (EINVAL;
	 * a seccomp filter may say EPERM): there every page is reserved
	 * now. */
	int all = 0;
	void *p = MAP_FAILED;
	int rc = ftruncate(fd, (off_t)size) != 0 ? -errno : 0;
	if (rc == 0) {
		p = os_map(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			rc = -errno;
	}
	if (rc == 0 && os_advise(p, YM_HEADER_SIZE, MADV_POPULATE_WRITE) != 0) {
		if (errno == EFAULT || errno == ENOMEM)
			rc = -ENOSPC;
		else if ((rc = -posix_fallocate(fd, 0, (off_t)size)) == 0)
			all = 1;
	}
	close(fd);
	if (rc < 0) {
		if (p != MAP_FAILED)
			os_unmap(p, size);
		shm_unlink(name);
		return rc;
	}
#ifdef YM_TEST_ABI_NEWER
	/* Fields an older reader does not know, not zero: it must skip them. */
	memset(((struct ym_header *)p)->test_newer, 0xa5,
	       sizeof ((struct ym_header *)p)->test_newer);
#endif
	*map = p;
	return all;
}

int shm_relink(pid_t pid, uint32_t pidns, void *map, uint64_t size, int old)
{
	char name[40];
	shm_name(name, sizeof name, pid, pidns);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			  0600);
	if (fd < 0)
		return -errno;
	int rc = ftruncate(fd, (off_t)size) != 0 ? -errno : 0;
	/* The pages old holds (tmpfs: SEEK_DATA finds them), nothing more:
	 * the copy stays as sparse as the segment was. */
	off_t off = lseek(old, 0, SEEK_DATA);
	while (rc == 0 && off >= 0 && (uint64_t)off < size) {
		off_t end = lseek(old, off, SEEK_HOLE);
		if (end < 0 || (uint64_t)end > size)
			end = (off_t)size;
		while (rc == 0 && off < end) {
			ssize_t n = pwrite(fd, (const char *)map + off,
					   (size_t)(end - off), off);
			if (n <= 0)
				rc = n < 0 ? -errno : -EIO;
			else
				off += n;
		}
		off = lseek(old, end, SEEK_DATA);
	}
	if (rc == 0 && os_map(map, size, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
		rc = -errno;
	close(fd);
	if (rc < 0)
		shm_unlink(name);
	return rc;
}

void shm_unlink_pid(pid_t pid, uint32_t pidns)
{
	char name[40];
	shm_name(name, sizeof name, pid, pidns);
	shm_unlink(name);
}
