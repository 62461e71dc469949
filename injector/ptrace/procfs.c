/* procfs: see procfs.h.  Everything here only reads /proc. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "ptrace/procfs.h"

/* -errno of a failed call, never 0 (which callers take for success). */
static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

int inject_read_status(pid_t pid, struct pstatus *ps)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	memset(ps, 0, sizeof *ps);
	FILE *f = fopen(path, "re");
	if (!f)
		return neg_errno();
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "Name:", 5)) {
			sscanf(line + 5, " %63[^\n]", ps->name);
		} else if (!strncmp(line, "State:", 6)) {
			sscanf(line + 6, " %c", &ps->state);
		} else if (!strncmp(line, "Tgid:", 5)) {
			ps->tgid = (pid_t)atol(line + 5);
		} else if (!strncmp(line, "Uid:", 4)) {
			ps->uid = (uid_t)strtoul(line + 4, NULL, 10);
		} else if (!strncmp(line, "TracerPid:", 10)) {
			ps->tracer = (pid_t)atol(line + 10);
		} else if (!strncmp(line, "Seccomp:", 8)) {
			ps->seccomp = atoi(line + 8);
		}
	}
	fclose(f);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* A regular file of the target's, read only; -1 for anything else.  The
 * path is the target's to choose: a FIFO planted there must not block
 * ymtop (O_NONBLOCK), nor a device be read. */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Open the file mapped at lo in pid: through /proc/PID/map_files (the
 * very file, whatever namespace or chroot it lives in; needs root), else
 * through /proc/PID/root (the path as maps shows it is relative to the
 * reader's root when the file is reachable from it, to the target's
 * otherwise: a chroot shows host paths).  -1 when neither opens. */
int inject_open_mapped(pid_t pid, uintptr_t lo, const char *path)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "/proc/%ld/map_files", (long)pid);
	DIR *d = opendir(p);
	if (d) {
		char want[32];
		int wl = snprintf(want, sizeof want, "%lx-", (unsigned long)lo);
		struct dirent *e;
		int fd = -1;
		while (fd < 0 && (e = readdir(d)) != NULL)
			if (!strncmp(e->d_name, want, (size_t)wl)) {
				snprintf(p, sizeof p, "/proc/%ld/map_files/%s", (long)pid,
					 e->d_name);
				fd = open_regular(p);
			}
		closedir(d);
		if (fd >= 0)
			return fd;
	}
	snprintf(p, sizeof p, "/proc/%ld/root%s", (long)pid, path);
	return open_regular(p);
}

int inject_maps_line(char *line, struct maps_line *ml)
{
	int n = 0;
	if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &ml->lo, &ml->hi,
		   ml->perms, &ml->off, &n) < 4 || n == 0)
		return 0;
	ml->path = line + n;
	ml->path[strcspn(ml->path, "\n")] = '\0';
	return 1;
}

int inject_read_maps(pid_t pid, struct tmaps *m)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	memset(m, 0, sizeof *m);
	FILE *f = fopen(path, "re");
	if (!f)
		return neg_errno();
	m->ldso.lo = UINTPTR_MAX;
	struct maps_line ml;
	while (fgets(line, sizeof line, f)) {
		if (!inject_maps_line(line, &ml) || ml.path[0] != '/')
			continue;
		unsigned long lo = ml.lo, hi = ml.hi, off = ml.off;
		const char *perms = ml.perms;
		char *p = ml.path;
		const char *b = base_name(p);
		if (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7) ||
		    !strncmp(b, "ld-musl-", 8)) {
			if (!m->have_libc && off == 0) {
				snprintf(m->libc, sizeof m->libc, "%s", p);
				m->libc_base = lo;
				m->have_libc = 1;
			}
		} else if (!strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-2.", 5)) {
			if (perms[2] == 'x') {
				if (lo < m->ldso.lo)
					m->ldso.lo = lo;
				if (hi > m->ldso.hi)
					m->ldso.hi = hi;
			}
		} else if (inject_is_agent_file(b)) {
			m->has_agent = 1;
		}
	}
	fclose(f);
	if (m->ldso.lo == UINTPTR_MAX)
		m->ldso.lo = 0;
	return 0;
}

int inject_is_agent_file(const char *b)
{
	static const char deleted[] = " (deleted)";
	size_t n = strlen(b), d = sizeof deleted - 1;
	if (n > d && !strcmp(b + n - d, deleted))
		n -= d;
	return (n == 13 && !strncmp(b, "libymagent.so", n)) ||
	       (n == 18 && !strncmp(b, "libymagent-musl.so", n)) ||
	       !strncmp(b, "memfd:libymagent.so", 19);
}

int inject_exe_machine(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	ssize_t n = pread(fd, &eh, sizeof eh, 0);
	close(fd);
	if (n < (ssize_t)EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return -1;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -2;
	if (n != (ssize_t)sizeof eh)
		return -1;
	return eh.e_machine == EM_X86_64 ? 0 : eh.e_machine;
}

/* The start of a small /proc file, in one read, into buf (size > 1
 * bytes), terminated.  Its length (0: empty), or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* ymtop's stat parser (tui/proc.h): the injector is linked into ymtop
 * only. */
static char task_state(pid_t pid, pid_t tid)
{
	struct proc_stat st;
	return proc_stat_read(pid, tid, &st) == 0 && st.state ? st.state : '?';
}

int inject_list_tids(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	DIR *d = opendir(path);
	if (!d)
		return neg_errno();
	int n = 0;
	tids[n++] = pid;   /* the main thread first: usually blocked, idle */
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		long v = strtol(e->d_name, NULL, 10);
		if (v > 0 && v != pid)
			tids[n++] = (pid_t)v;
	}
	closedir(d);
	/* Sleeping threads first (stable: the main thread leads among them):
	 * one blocked in a system call is cheap to stop and rarely inside
	 * the allocator; a running one may be anywhere. */
	int k = 0;
	for (int i = 0; i < n; i++)
		if (task_state(pid, tids[i]) == 'S') {
			pid_t v = tids[i];
			memmove(&tids[k + 1], &tids[k], (size_t)(i - k) * sizeof *tids);
			tids[k++] = v;
		}
	return n;
}

/* Is pid another ymtop (this program, or one named so)?  Two ymtop -p
 * started at once on a fresh target: the second finds the first tracing
 * it, which is no debugger to blame. */
int inject_is_ymtop(pid_t pid)
{
	char path[64], comm[32] = "";
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	if (stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 1;
	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	if (read_small(path, comm, sizeof comm) <= 0)
		return 0;
	comm[strcspn(comm, "\n")] = '\0';
	return !strcmp(comm, "ymtop");
}

/* The hexadecimal value of a "Key:\tvalue" line of /proc/self/status, or
 * of the number after it (base 10) when hex is 0; -1 when absent. */
static long long self_status(const char *key, int hex)
{
	char buf[4096];
	if (read_small("/proc/self/status", buf, sizeof buf) <= 0)
		return -1;
	size_t kl = strlen(key);
	for (const char *l = buf; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ':')
			return strtoll(l + kl + 1, NULL, hex ? 16 : 10);
	return -1;
}

/* Is ymtop in the initial user namespace (its uid_map the identity of
 * every uid)?  When unreadable, taken as yes. */
static int initial_userns(void)
{
	char map[256];
	unsigned long a, b, n;
	if (read_small("/proc/self/uid_map", map, sizeof map) <= 0)
		return 1;
	const char *nl = strchr(map, '\n');
	int one_line = !nl || !nl[1];
	return one_line && sscanf(map, " %lu %lu %lu", &a, &b, &n) == 3 && a == 0 &&
	       b == 0 && n == 4294967295UL;
}

const char *inject_refusal(pid_t pid, int attach, char *buf, size_t len)
{
	enum { CAP_PTRACE_BIT = 19 };   /* CAP_SYS_PTRACE */
	long long eff = self_status("CapEff", 1);
	int cap = eff >= 0 && (eff >> CAP_PTRACE_BIT) & 1;
	struct pstatus ps;
	int known = inject_read_status(pid, &ps) == 0;
	uid_t me = geteuid();
	char scope_s[16] = "";
	int scope = read_small("/proc/sys/kernel/yama/ptrace_scope", scope_s,
			       sizeof scope_s) > 0 ? atoi(scope_s) : 0;
	if (attach && scope == 3) {
		snprintf(buf, len, "kernel.yama.ptrace_scope is 3: no process may "
			 "ptrace another, root included, until the next boot");
	} else if (attach && scope >= 1 && !cap) {
		snprintf(buf, len, "kernel.yama.ptrace_scope is %d (%s); run ymtop as "
			 "root or with CAP_SYS_PTRACE, or set ptrace_scope to 0", scope,
			 scope == 1 ? "only ancestors may trace" :
			 "only CAP_SYS_PTRACE may trace");
	} else if (!cap && me == 0) {
		snprintf(buf, len, "ymtop runs as root but without CAP_SYS_PTRACE (as "
			 "a container's root usually does): give it that capability, "
			 "e.g. docker run --cap-add=SYS_PTRACE");
	} else if (!cap && known && ps.uid != me) {
		snprintf(buf, len, "it is another user's (uid %u); run ymtop as that "
			 "user or as root", (unsigned)ps.uid);
	} else if (!cap) {
		snprintf(buf, len, "it is not dumpable (a setuid or file-capability "
			 "program, or one that called prctl(PR_SET_DUMPABLE, 0)); run "
			 "ymtop as root or with CAP_SYS_PTRACE");
	} else if (!initial_userns()) {
		snprintf(buf, len, "ymtop runs in a user namespace (a rootless "
			 "container?) whose root and CAP_SYS_PTRACE count only for the "
			 "processes created in it; run ymtop where the process runs, or "
			 "from the host");
	} else {
		/* With CAP_SYS_PTRACE the kernel's own checks (user,
		 * dumpable, capabilities) pass: something above them says no. */
		char lsm[128] = "", active[160] = "";
		long long filters = self_status("Seccomp", 0);
		if (read_small("/sys/kernel/security/lsm", lsm, sizeof lsm) > 0) {
			lsm[strcspn(lsm, "\n")] = '\0';
			snprintf(active, sizeof active, " (active: %s)", lsm);
		}
		snprintf(buf, len, "the kernel refuses it although ymtop has "
			 "CAP_SYS_PTRACE%s: %sa security module%s or the system's "
			 "sandbox protects the process; running ymtop as root does not "
			 "change that", me == 0 ? " as root" : "",
			 attach && filters > 0 ? "a seccomp filter on ymtop, " : "",
			 active);
	}
	return buf;
}
