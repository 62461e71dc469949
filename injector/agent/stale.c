/*
 * stale: the segments of processes that are gone (stale.h).
 *
 * State, this file's: the segment's process and pid namespace (set when
 * it is made), and whether this segment's first sample collected.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "os.h"
#include "shm.h"
#include "stale.h"

static pid_t    self_pid;
static uint32_t pidns;          /* our pid namespace's inode (0 unknown) */
static int stale_done;   /* collect_stale ran for this segment (atomic) */

void stale_owner(pid_t self, uint32_t ns)
{
	self_pid = self;
	pidns = ns;
}

/* Field 22 of /proc/<pid>/stat (pid 0: self): the start time in clock
 * ticks, which tells a reused pid apart; 0 when unreadable.  The agent's
 * own parser: guest code links nothing of ymtop's (tui/proc.c has the
 * other), and reads without stdio or allocation. */
uint64_t stale_start_ticks(pid_t pid)
{
	char buf[1024], path[40] = "/proc/self/stat";
	if (pid > 0) {
		char num[21];
		agent_utoa((uint64_t)pid, num);
		size_t n = 0;
		for (const char *a = "/proc/"; *a; a++)
			path[n++] = *a;
		for (const char *a = num; *a; a++)
			path[n++] = *a;
		for (const char *a = "/stat"; *a; a++)
			path[n++] = *a;
		path[n] = '\0';
	}
	if (os_read_file(path, buf, sizeof buf) <= 0)
		return 0;
	/* comm (field 2) may hold spaces and parentheses: fields 3.. start
	 * after the last ')'.  Skip the 19 separators before field 22. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

/* Segments of processes that died without exiting (killed, exit_group)
 * stay in /dev/shm.  Remove those of our pid namespace whose writer is
 * provably gone: no process has its pid, or the one that has it started
 * at another time (a reused pid).  Ours only, or any when we are root (a
 * daemon's workers drop privileges); bounded, and never a segment kept on
 * purpose (YM_KEEP_SEGMENT marks it KEPT).  One whose process was killed
 * (not marked EXITED: an OOM kill's) is the only record of what it held:
 * kept for ymtop, which writes its report and removes it (man/ymtop.1),
 * while /dev/shm is at least half free; removed when it is fuller (a
 * container's /dev/shm is small: 64 MiB under Kubernetes).  getdents64 into a buffer on
 * the stack, not opendir: opendir's 32 KiB buffer was often the process's
 * first malloc (heap set-up, getrandom, brk, pages touched) in programs
 * that never allocate, at every start. */
static void collect_stale(void)
{
	int dfd = open(YM_SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	uid_t me = geteuid();
	int removed = 0;
	struct statvfs vfs;
	int roomy = fstatvfs(dfd, &vfs) == 0 && vfs.f_bavail >= vfs.f_blocks / 2;
	_Alignas(8) char buf[2048];
	ssize_t got;
	while (removed < 64 && (got = getdents64(dfd, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < got && removed < 64;) {
			struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
			off += e->d_reclen;
			pid_t pid;
			uint32_t ns;
			if (shm_parse_name(e->d_name, &pid, &ns) != 0 ||
			    pid == self_pid ||
			    (ns ? ns : YM_PIDNS_INIT) !=
			    (pidns ? pidns : YM_PIDNS_INIT))
				continue;
			int dead = kill(pid, 0) != 0 && errno == ESRCH;
			uint64_t ticks = dead ? 0 : stale_start_ticks(pid);
			if (!dead && ticks == 0)
				continue;   /* alive, or cannot tell */
			struct stat st;
			if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    !S_ISREG(st.st_mode) || (st.st_uid != me && me != 0))
				continue;
			int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			struct ym_header h;
			ssize_t n = pread(fd, &h, sizeof h, 0);
			close(fd);
			if (n != (ssize_t)sizeof h || h.magic != YM_MAGIC)
				continue;   /* not ours to judge (or being made) */
			if (!dead && (h.start_ticks == 0 || h.start_ticks == ticks))
				continue;   /* its writer may be alive */
			if (h.flags & YM_FLAG_KEPT)
				continue;   /* left for a post-mortem look */
			if (!(h.flags & YM_FLAG_EXITED) && roomy)
				continue;   /* killed: its report is ymtop's to keep */
			char name[48];
			shm_name(name, sizeof name, pid, ns);
			if (shm_unlink(name) == 0)
				removed++;
		}
	}
	close(dfd);
}

void stale_sampled(void)
{
	if (__atomic_load_n(&stale_done, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&stale_done, 1, __ATOMIC_ACQ_REL))
		return;
	collect_stale();
}

void stale_fork_child(void)
{
	__atomic_store_n(&stale_done, 0, __ATOMIC_RELAXED);
}
