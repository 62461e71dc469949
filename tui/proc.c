#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"
#include "shm.h"

static ssize_t read_small(const char *path, char *buf, size_t len)
{
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

int proc_read(pid_t pid, struct proc_info *o)
{
	char path[64], buf[2048];
	memset(o, 0, sizeof *o);
	o->pid = pid;
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	ssize_t n = read_small(path, buf, sizeof buf);
	if (n < 0)
		return n == -ENOENT ? -ENOENT : (int)n;
	/* comm is between the first '(' and the last ')'. */
	char *l = strchr(buf, '('), *r = strrchr(buf, ')');
	if (!l || !r || r < l)
		return -EPROTO;
	size_t cl = (size_t)(r - l - 1);
	if (cl >= sizeof o->comm)
		cl = sizeof o->comm - 1;
	memcpy(o->comm, l + 1, cl);
	o->comm[cl] = '\0';
	const char *p = r + 1;
	/* Fields 3..21 then 22 = starttime, 24 = rss (pages). */
	for (int f = 3; f <= 24 && *p; f++) {
		while (*p == ' ')
			p++;
		if (f == 3)
			o->state = *p;
		if (f == 22) {
			o->start_ticks = parse_u64(&p);
			continue;
		}
		if (f == 24) {
			o->rss_bytes = parse_u64(&p) * (uint64_t)sysconf(_SC_PAGESIZE);
			continue;
		}
		while (*p && *p != ' ')
			p++;
	}
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if (read_small(path, buf, sizeof buf) > 0) {
		const char *u = strstr(buf, "\nUid:");
		if (u) {
			u += 5;
			while (*u == '\t' || *u == ' ')
				u++;
			o->uid = (uid_t)strtoul(u, NULL, 10);
		}
	}
	return 0;
}

/* A zombie has exited: its /proc entry stays until its parent reaps it
 * (a SIGKILLed target whose parent is busy, or does not wait). */
int proc_gone(const struct proc_info *pi)
{
	return pi->state == 'Z' || pi->state == 'X' || pi->state == 'x';
}

int proc_same(pid_t pid, uint64_t start_ticks)
{
	struct proc_info pi;
	if (proc_read(pid, &pi) != 0 || proc_gone(&pi))
		return 0;
	return start_ticks == 0 || pi.start_ticks == start_ticks;
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

int proc_find_agents(pid_t *pids, int max)
{
	DIR *d = opendir(YM_SHM_DIR);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	const char *pre = &YM_NAME_PREFIX[1];   /* without the slash */
	size_t pl = strlen(pre);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, pre, pl) != 0)
			continue;
		char *end;
		errno = 0;
		long v = strtol(e->d_name + pl, &end, 10);
		if (errno || *end || v <= 0 || v > 0x3fffffff)
			continue;
		struct proc_info pi;
		if (proc_read((pid_t)v, &pi) != 0)
			continue;   /* left behind by a dead process */
		if (geteuid() != 0 && pi.uid != geteuid())
			continue;
		/* Only segments whose start time matches the live process. */
		struct shm_reader r;
		char err[256];
		if (shm_reader_open(&r, (pid_t)v, pi.uid, err, sizeof err) != 0)
			continue;
		struct ym_header h;
		int ok = pread(r.fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
			 (h.start_ticks == 0 || h.start_ticks == pi.start_ticks) &&
			 !(h.flags & YM_FLAG_EXITED);
		shm_reader_close(&r);
		if (!ok)
			continue;
		if (n < max)
			pids[n] = (pid_t)v;
		n++;
	}
	closedir(d);
	return n;
}
