/*
 * proc: what ymtop reads about a process from /proc, all of it untrusted
 * and bounded (see proc.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "util/clock.h"

/* include/linux/sched.h: the task is a kernel thread. */
#define PROC_PF_KTHREAD 0x00200000

unsigned long long proc_reads;

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	proc_reads++;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno ? -errno : -EIO;   /* never 0: that is success */
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return n;
}

static uint64_t parse_u64(const char **p)
{
	uint64_t v = 0;
	while (**p == ' ')
		(*p)++;
	while (**p >= '0' && **p <= '9') {
		v = v * 10 + (uint64_t)(**p - '0');
		(*p)++;
	}
	return v;
}

/* Spaces and tabs, then a decimal (0 when none). */
static uint64_t parse_u64_ws(const char **p)
{
	while (**p == '\t')
		(*p)++;
	return parse_u64(p);
}

int proc_exit(const struct proc_info *pi, int *value)
{
	*value = 0;
	if (pi->state != 'Z' || pi->exit_code < 0)
		return PROC_EXIT_UNKNOWN;
	/* Without ptrace access the kernel writes 0, which would read as
	 * "exit status 0": only trusted from root or the same user. */
	uid_t me = geteuid();
	if (me != 0 && (me != pi->uid || me != pi->euid))
		return PROC_EXIT_UNKNOWN;
	int st = pi->exit_code;
	if ((st & 0x7f) == 0) {
		*value = (st >> 8) & 0xff;
		return PROC_EXIT_STATUS;
	}
	if ((st & 0x7f) != 0x7f) {
		*value = st & 0x7f;
		return PROC_EXIT_SIGNAL;
	}
	return PROC_EXIT_UNKNOWN;
}

uint32_t proc_pidns(pid_t pid)
{
	char path[64];
	struct stat st;
	if (pid > 0)
		snprintf(path, sizeof path, "/proc/%ld/ns/pid", (long)pid);
	else
		snprintf(path, sizeof path, "/proc/self/ns/pid");
	proc_reads++;
	if (stat(path, &st) != 0 || st.st_ino > UINT32_MAX)
		return 0;
	return (uint32_t)st.st_ino;
}

/* The "KEY:  123 kB" line of a /proc file in bytes; 0 when absent. */
static int kb_line(const char *buf, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, key, kl) != 0 || l[kl] != ':')
			continue;
		const char *q = l + kl + 1;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q < '0' || *q > '9')
			return 0;
		uint64_t v = parse_u64(&q);
		*out = v > UINT64_MAX / 1024 ? UINT64_MAX : v * 1024;
		return 1;
	}
	return 0;
}

int proc_rollup(pid_t pid, struct proc_mem *mem)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", (long)pid);
	mem->have_rollup = 0;
	ssize_t n = read_small(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	mem->have_rollup = kb_line(buf, "Rss", &mem->rss) &
			   kb_line(buf, "Anonymous", &mem->anonymous);
	if (!kb_line(buf, "Pss", &mem->pss))
		mem->pss = 0;
	if (!kb_line(buf, "Swap", &mem->swap))
		mem->swap = 0;
	return mem->have_rollup ? 0 : -EPROTO;
}

int proc_stat_parse(const char *buf, struct proc_stat *st)
{
	memset(st, 0, sizeof *st);
	st->exit_code = -1;
	const char *l = strchr(buf, '('), *r = strrchr(buf, ')');
	if (!l || !r || r < l)
		return -EPROTO;
	size_t cl = (size_t)(r - l - 1);
	if (cl >= sizeof st->comm)
		cl = sizeof st->comm - 1;
	memcpy(st->comm, l + 1, cl);
	st->comm[cl] = '\0';
	const char *p = r + 1;
	for (int f = 3; f <= 52 && *p; f++) {
		while (*p == ' ')
			p++;
		if (f == 3)
			st->state = *p;
		if (f == 4 && *p >= '0' && *p <= '9') {
			uint64_t v = parse_u64(&p);
			st->ppid = v <= INT32_MAX ? (pid_t)v : 0;
			continue;
		}
		if (f == 9) {
			st->kthread = (parse_u64(&p) & PROC_PF_KTHREAD) != 0;
			continue;
		}
		if (f == 22) {
			st->start_ticks = parse_u64(&p);
			continue;
		}
		if (f == 23) {
			st->vsize = parse_u64(&p);
			continue;
		}
		if (f == 24) {
			st->rss_pages = parse_u64(&p);
			continue;
		}
		if (f == 28 || f == 50 || f == 51) {
			uint64_t v = parse_u64(&p);
			*(f == 28 ? &st->start_stack : f == 50 ? &st->env_start :
			  &st->env_end) = v;
			while (*p && *p != ' ')
				p++;
			continue;
		}
		if (f == 52 && *p >= '0' && *p <= '9') {
			uint64_t v = parse_u64(&p);
			st->exit_code = v <= 0xffff ? (int)v : -1;
			continue;
		}
		while (*p && *p != ' ')
			p++;
	}
	return 0;
}

/* path through *fd, kept open for the next read (pread at 0 makes the
 * file anew) when fd is not NULL: opened when closed, and opened again
 * once when a read fails (a kept file of a process that is gone reads
 * nothing; its pid may name another process by now, which the caller
 * tells by the start time).  Else as read_small. */
static ssize_t read_kept(const char *path, int *fd, char *buf, size_t len)
{
	if (!fd)
		return read_small(path, buf, len);
	proc_reads++;
	for (int tries = 0; tries < 2; tries++) {
		if (*fd < 0 && (*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return errno ? -errno : -EIO;
		ssize_t n = pread(*fd, buf, len - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			return n;
		}
		close(*fd);
		*fd = -1;
	}
	return -ESRCH;
}

void proc_files_init(struct proc_files *pf)
{
	pf->pid = 0;
	pf->stat_fd = pf->status_fd = -1;
	pf->status_at = 0;
}

void proc_files_close(struct proc_files *pf)
{
	if (pf->pid && pf->stat_fd >= 0)
		close(pf->stat_fd);
	if (pf->pid && pf->status_fd >= 0)
		close(pf->status_fd);
	proc_files_init(pf);
}

static int stat_read(pid_t pid, pid_t tid, struct proc_stat *st, int *fd)
{
	char path[96], buf[4096];
	if (tid)
		snprintf(path, sizeof path, "/proc/%ld/task/%ld/stat",
			 (long)pid, (long)tid);
	else
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	ssize_t n = read_kept(path, fd, buf, sizeof buf);
	if (n < 0) {
		memset(st, 0, sizeof *st);
		st->exit_code = -1;
		return (int)n;
	}
	return proc_stat_parse(buf, st);
}

int proc_stat_read(pid_t pid, pid_t tid, struct proc_stat *st)
{
	return stat_read(pid, tid, st, NULL);
}

/* stat and status into o (pid set); the namespace fields from status
 * (NSpid), not the namespace's inode.  Through pf's descriptors when pf
 * is not NULL (proc_reread_kept); then status's figures are prev's
 * (read through pf before) while stat says nothing moved, for at most
 * PROC_STATUS_S. */
static int read_stat_status(pid_t pid, struct proc_info *o, struct proc_files *pf,
			    const struct proc_info *prev)
{
	char path[64], buf[4096];
	struct proc_stat st;
	if (pf && pf->pid != pid) {
		proc_files_close(pf);
		pf->pid = pid;   /* from now on its descriptors are pf's */
	}
	int rc = stat_read(pid, 0, &st, pf ? &pf->stat_fd : NULL);
	if (rc < 0)
		return rc;
	_Static_assert(sizeof o->comm == sizeof st.comm, "comm");
	memcpy(o->comm, st.comm, sizeof o->comm);
	o->state = st.state;
	o->kthread = st.kthread;
	o->start_ticks = st.start_ticks;
	o->rss_bytes = st.rss_pages * (uint64_t)sysconf(_SC_PAGESIZE);
	o->vsize = st.vsize;
	o->exit_code = st.exit_code;
	o->tgid = o->nspid = pid;
	double now = pf ? clock_mono_s() : 0;
	if (pf && prev && prev->pid == pid && pf->status_at > 0 &&
	    now - pf->status_at < PROC_STATUS_S && prev->mem.have_status &&
	    prev->start_ticks == o->start_ticks && prev->rss_bytes == o->rss_bytes &&
	    prev->vsize == o->vsize && prev->state == o->state &&
	    !strcmp(prev->comm, o->comm)) {
		o->uid = prev->uid;
		o->euid = prev->euid;
		o->tgid = prev->tgid;
		o->nspid = prev->nspid;
		o->nslevels = prev->nslevels;
		o->mem = prev->mem;
		return 0;
	}
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if (pf)
		pf->status_at = 0;
	if (read_kept(path, pf ? &pf->status_fd : NULL, buf, sizeof buf) > 0) {
		if (pf)
			pf->status_at = now;
		const char *u = strstr(buf, "\nUid:");
		if (u) {
			const char *q = u + 5;
			o->uid = (uid_t)parse_u64_ws(&q);
			o->euid = (uid_t)parse_u64_ws(&q);
		}
		const char *t = strstr(buf, "\nTgid:");
		if (t) {
			const char *q = t + 6;
			o->tgid = (pid_t)parse_u64_ws(&q);
		}
		/* NSpid: the pid in each namespace from ours inwards; the
		 * last is the one the process sees (and names its segment). */
		struct proc_mem *pm = &o->mem;
		pm->have_status = kb_line(buf, "RssAnon", &pm->rss_anon) &
				  kb_line(buf, "RssFile", &pm->rss_file) &
				  kb_line(buf, "RssShmem", &pm->rss_shmem);
		if (!kb_line(buf, "VmSwap", &pm->vm_swap))
			pm->vm_swap = 0;
		const char *ns = strstr(buf, "\nNSpid:");
		if (ns) {
			const char *q = ns + 7;
			uint64_t v;
			while ((v = parse_u64_ws(&q)) != 0) {
				o->nspid = (pid_t)v;
				o->nslevels++;
			}
		}
	}
	return 0;
}

int proc_read(pid_t pid, struct proc_info *o)
{
	memset(o, 0, sizeof *o);
	o->pid = pid;
	int rc = read_stat_status(pid, o, NULL, NULL);
	if (rc == 0)
		o->pidns = proc_pidns(pid);
	return rc;
}

int proc_reread(struct proc_info *io)
{
	return proc_reread_kept(io, NULL);
}

int proc_reread_kept(struct proc_info *io, struct proc_files *pf)
{
	struct proc_info o;
	memset(&o, 0, sizeof o);
	o.pid = io->pid;
	int rc = read_stat_status(io->pid, &o, pf, io);
	if (rc != 0)
		return rc;
	o.pidns = o.start_ticks == io->start_ticks && io->pidns ? io->pidns
								 : proc_pidns(io->pid);
	*io = o;
	return 0;
}

/* The boot clock is /proc/uptime's (suspended time counted), read
 * without a file. */
double proc_age_s(const struct proc_info *pi)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec ts;
	if (pi->start_ticks == 0 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		return 0;
	double up = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	double start = (double)pi->start_ticks / (double)hz;
	return up > start ? up - start : 0;
}

/* A zombie has exited: its /proc entry stays until its parent reaps it
 * (a SIGKILLed target whose parent is busy, or does not wait). */
int proc_gone(const struct proc_info *pi)
{
	return pi->state == 'Z' || pi->state == 'X' || pi->state == 'x';
}

int proc_cgroup(pid_t pid, char *buf, size_t len)
{
	return proc_cgroup_memory(pid, buf, len, NULL);
}

int proc_cgroup_memory(pid_t pid, char *buf, size_t len, int *v1)
{
	char path[64], data[PROC_CGROUP_READ + 1];
	if (!len)
		return -1;
	buf[0] = '\0';
	snprintf(path, sizeof path, "/proc/%ld/cgroup", (long)pid);
	proc_reads++;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < PROC_CGROUP_READ) {
		ssize_t r = read(fd, data + n, PROC_CGROUP_READ - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	data[n] = '\0';
	/* An exiting process leaves its cgroup for the root before it is a
	 * zombie (PF_EXITING, 0x4, in field 9 of stat, set first): read
	 * after the cgroup, the state and flags say whether the path was
	 * the one it ran in. */
	char stat[512];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	proc_reads++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, stat, sizeof stat - 1);
	close(fd);
	if (r <= 0)
		return -1;
	stat[r] = '\0';
	const char *p = strrchr(stat, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X' || p[2] == '\0')
		return -1;
	p += 2;
	for (int field = 3; field < 9 && p; field++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	if (!p || (strtoul(p, NULL, 10) & 0x4))
		return -1;
	proc_cgroup_parse_memory(data, buf, len, v1);
	return 0;
}

void proc_cgroup_parse(const char *data, char *buf, size_t len)
{
	proc_cgroup_parse_memory(data, buf, len, NULL);
}

void proc_cgroup_parse_memory(const char *data, char *buf, size_t len, int *isv1)
{
	if (isv1)
		*isv1 = 0;
	if (!len)
		return;
	buf[0] = '\0';
	/* Lines "ID:CONTROLLERS:PATH": the unified hierarchy's has ID 0 and
	 * no controllers; a v1 line names its controllers, comma separated.
	 * The memory controller's path wins when there is one (a hybrid
	 * host: the heap's limits are there), else the unified path. */
	const char *v1 = NULL, *v1end = NULL, *v2 = NULL, *v2end = NULL;
	for (const char *line = data; *line;) {
		const char *end = strchr(line, '\n');
		const char *next = end ? end + 1 : line + strlen(line);
		if (!end)
			end = line + strlen(line);
		const char *c1 = memchr(line, ':', (size_t)(end - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
		if (c2 && c1 == line + 1 && line[0] == '0' && c2 == c1 + 1) {
			v2 = c2 + 1;
			v2end = end;
		} else if (c2) {
			for (const char *p = c1 + 1; p < c2 && !v1;) {
				const char *q = memchr(p, ',', (size_t)(c2 - p));
				if (!q)
					q = c2;
				if (q - p == 6 && !memcmp(p, "memory", 6)) {
					v1 = c2 + 1;
					v1end = end;
				}
				p = q + 1;
			}
		}
		line = next;
	}
	if (isv1)
		*isv1 = v1 != NULL;
	if (v1)
		snprintf(buf, len, "%.*s", (int)(v1end - v1), v1);
	else if (v2)
		snprintf(buf, len, "%.*s", (int)(v2end - v2), v2);
}

int proc_same(pid_t pid, uint64_t start_ticks)
{
	struct proc_info pi;
	if (proc_read(pid, &pi) != 0 || proc_gone(&pi))
		return 0;
	return start_ticks == 0 || pi.start_ticks == start_ticks;
}

void proc_display_name(const struct proc_info *pi, char *out, size_t len)
{
	snprintf(out, len, "%s", pi->comm);
	if (strlen(pi->comm) < 15)
		return;
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pi->pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return;
	/* argv[0] ends at its NUL, or at the end of what was read */
	const char *base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	if (!strncmp(base, pi->comm, strlen(pi->comm)))
		snprintf(out, len, "%.63s", base);
}

void proc_thread_name(pid_t pid, uint32_t tid, char *buf, size_t len)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%ld/task/%u/comm", (long)pid, tid);
	char tmp[64];
	buf[0] = '\0';
	if (read_small(path, tmp, sizeof tmp) <= 0)
		return;
	tmp[strcspn(tmp, "\n")] = '\0';
	for (char *c = tmp; *c; c++)
		if (!isprint((unsigned char)*c))
			*c = '?';
	snprintf(buf, len, "%s", tmp);
}

static int task_id_cmp(const void *a, const void *b)
{
	const struct proc_task_id *x = a, *y = b;
	return x->ns_tid < y->ns_tid ? -1 : x->ns_tid > y->ns_tid;
}

int proc_task_map_read(pid_t pid, struct proc_task_map *m)
{
	char path[96], buf[4096];
	m->ids = NULL;
	m->n = 0;
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	proc_reads++;
	DIR *d = opendir(path);
	if (!d)
		return errno ? -errno : -EIO;
	uint32_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		unsigned long tid = strtoul(e->d_name, &end, 10);
		if (*end || tid == 0 || tid > UINT32_MAX)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/task/%lu/status", (long)pid, tid);
		if (read_small(path, buf, sizeof buf) <= 0)
			continue;   /* gone meanwhile */
		const char *ns = strstr(buf, "\nNSpid:");
		if (!ns)
			continue;
		const char *q = ns + 7;
		uint64_t v, last = 0;
		while ((v = parse_u64_ws(&q)) != 0)
			last = v;
		if (last == 0 || last > UINT32_MAX)
			continue;
		if (m->n == cap) {
			uint32_t ncap = cap ? cap * 2 : 64;
			struct proc_task_id *ids = realloc(m->ids, ncap * sizeof *ids);
			if (!ids) {
				closedir(d);
				proc_task_map_free(m);
				return -ENOMEM;
			}
			m->ids = ids;
			cap = ncap;
		}
		m->ids[m->n].ns_tid = (uint32_t)last;
		m->ids[m->n].tid = (uint32_t)tid;
		m->n++;
	}
	closedir(d);
	if (m->n)
		qsort(m->ids, m->n, sizeof *m->ids, task_id_cmp);
	return 0;
}

uint32_t proc_task_map_find(const struct proc_task_map *m, uint32_t ns_tid)
{
	struct proc_task_id key = { ns_tid, 0 };
	const struct proc_task_id *hit = m->n ?
		bsearch(&key, m->ids, m->n, sizeof *m->ids, task_id_cmp) : NULL;
	return hit ? hit->tid : 0;
}

void proc_task_map_free(struct proc_task_map *m)
{
	free(m->ids);
	m->ids = NULL;
	m->n = 0;
}

/* Call fn for each line of /proc/PID/maps (its first 511 bytes: the
 * fields up to the path have fixed forms, a longer path is cut) until it
 * returns non-zero.  That value; 0 when no line stopped it; -ESRCH when
 * the process maps nothing at all (it is exiting: its memory goes before
 * it becomes a zombie); -errno when the maps cannot be read. */
/* fn for each line of the maps file at path until it returns nonzero:
 * that value; else 0, or -ESRCH when the file names no mapping (a process
 * whose memory is gone).  The gate page ([vsyscall] on x86-64) is no
 * mapping of the process's: the kernel lists it after the last one, so a
 * process in the middle of exit, whose mappings are torn down but whose
 * mm is not yet released, shows it alone. */
static int maps_each_at(const char *path, int (*fn)(char *line, void *ctx),
			void *ctx)
{
	proc_reads++;
	FILE *f = fopen(path, "re");
	if (!f)
		return errno ? -errno : -EIO;
	char line[512];
	int rc = 0, lines = 0, at_start = 1;
	while (!rc && fgets(line, sizeof line, f)) {
		char *nl = strchr(line, '\n');
		int whole = nl != NULL;
		if (nl)
			*nl = '\0';
		if (at_start) {
			const char *name = strrchr(line, ' ');
			if (!name || strcmp(name + 1, "[vsyscall]"))
				lines++;
			rc = fn(line, ctx);
		}
		at_start = whole;
	}
	if (!rc)
		rc = ferror(f) ? -EIO : lines == 0 ? -ESRCH : 0;
	fclose(f);
	return rc;
}

static int maps_each(pid_t pid, int (*fn)(char *line, void *ctx), void *ctx)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	return maps_each_at(path, fn, ctx);
}

struct range_at {
	unsigned long long lo, hi;
};

static int maps_range_line(char *line, void *ctx)
{
	struct range_at *r = ctx;
	unsigned long long a, b;
	if (sscanf(line, "%llx-%llx", &a, &b) != 2 || a != r->lo)
		return 0;
	r->hi = b;
	return 1;
}

int proc_mapping_at(pid_t pid, uint64_t lo, uint64_t *hi)
{
	struct range_at r = { lo, 0 };
	if (maps_each(pid, maps_range_line, &r) != 1)
		return -1;
	*hi = r.hi;
	return 0;
}

struct file_id {
	unsigned maj, min;
	unsigned long long ino;
};

static int maps_file_line(char *line, void *ctx)
{
	const struct file_id *id = ctx;
	unsigned a, b;
	unsigned long long in;
	return sscanf(line, "%*x-%*x %*4s %*x %x:%x %llu", &a, &b, &in) == 3 &&
	       a == id->maj && b == id->min && in == id->ino;
}

int proc_maps_file(pid_t pid, uint64_t dev, uint64_t ino)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	return proc_maps_file_at(path, dev, ino);
}

int proc_maps_file_at(const char *maps, uint64_t dev, uint64_t ino)
{
	struct file_id id = { major((dev_t)dev), minor((dev_t)dev), ino };
	return maps_each_at(maps, maps_file_line, &id);
}

static int maps_agent_line(char *line, void *ctx)
{
	int *found = ctx;
	const char *slash = strrchr(line, '/');
	if (!slash)
		return 0;
	const char *b = slash + 1;
	/* A file replaced since it was mapped (an upgrade while the agent
	 * runs) reads "NAME (deleted)": the agent still. */
	static const char deleted[] = " (deleted)";
	size_t n = strlen(b), d = sizeof deleted - 1;
	if (n > d && !strcmp(b + n - d, deleted))
		n -= d;
	if ((n == 13 && !strncmp(b, "libymagent.so", n)) ||
	    (n == 18 && !strncmp(b, "libymagent-musl.so", n)) ||
	    !strncmp(b, "memfd:libymagent.so", 19))
		*found |= PROC_HAS_AGENT;
	else if (!strncmp(b, "libc.so.", 8) || !strncmp(b, "libc-2.", 7) ||
		 !strcmp(b, "libc.so") || !strncmp(b, "ld-musl-", 8))
		*found |= PROC_HAS_LIBC;   /* glibc's, or musl's (libc.so is its loader) */
	return *found == (PROC_HAS_AGENT | PROC_HAS_LIBC);
}

int proc_maps_agent(pid_t pid)
{
	int found = 0;
	int rc = maps_each(pid, maps_agent_line, &found);
	return rc < 0 ? rc : found;
}

int proc_preloads_agent(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
	proc_reads++;
	FILE *f = fopen(path, "re");
	if (!f)
		return errno ? -errno : -EIO;
	/* NUL-separated; bounded: LD_PRELOAD within the first 256 KiB.  A
	 * title is written from the start of argv on, over the environment:
	 * the first entry says whether it is still there. */
	char var[4096];
	size_t n = 0, total = 0;
	int c, found = 0, first = 1, intact = 0;
	while (!found && (c = getc(f)) != EOF && total++ < (256u << 10)) {
		if (c != '\0') {
			if (n < sizeof var - 1)
				var[n++] = (char)c;
			continue;
		}
		var[n] = '\0';
		n = 0;
		if (first) {
			const char *eq = strchr(var, '=');
			intact = eq && eq > var;
			first = 0;
		}
		if (!strncmp(var, "LD_PRELOAD=", 11) && strstr(var, "libymagent"))
			found = 1;
	}
	fclose(f);
	return found ? 1 : intact ? 0 : PROC_ENV_GONE;
}

enum proc_writer proc_writer(pid_t pid, uint64_t start_ticks, uint64_t seg_dev,
			     uint64_t seg_ino)
{
	struct proc_info pi;
	if (proc_read(pid, &pi) != 0)
		return WRITER_GONE;
	return proc_writer_of(pid, &pi, start_ticks, seg_dev, seg_ino);
}

enum proc_writer proc_writer_of(pid_t pid, const struct proc_info *pi,
				uint64_t start_ticks, uint64_t seg_dev,
				uint64_t seg_ino)
{
	enum proc_writer w = proc_writer_stat(pi, start_ticks);
	if (w != WRITER_LIVE)
		return w;
	int mapped = proc_maps_file(pid, seg_dev, seg_ino);
	if (mapped == -ESRCH)
		return WRITER_GONE;
	if (mapped == 0)
		return WRITER_EXECED;
	return WRITER_LIVE;
}

enum proc_writer proc_writer_stat(const struct proc_info *pi,
				  uint64_t start_ticks)
{
	if (proc_gone(pi))
		return WRITER_GONE;
	/* 0: the agent could not read its start time (no /proc where it
	 * runs); the mapping still tells. */
	if (start_ticks != 0 && pi->start_ticks != start_ticks)
		return WRITER_REUSED;
	return WRITER_LIVE;
}

const char *proc_writer_why(enum proc_writer w)
{
	switch (w) {
	case WRITER_LIVE:   return "live";
	case WRITER_GONE:   return "its process is gone";
	case WRITER_REUSED: return "its process is gone and another has its pid";
	case WRITER_EXECED: return "its process has exec'd a program without the agent";
	}
	return "?";
}
