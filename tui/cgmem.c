/*
 * cgmem: a cgroup's memory files (cgmem.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgmem.h"
#include "proc.h"

#define SMALL_FILE 8192

/* path's first len - 1 bytes, NUL-terminated; length or -1. */
static ssize_t read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
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

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || (*end && *end != '\n' && *end != ' '))
		return -1;
	*v = x;
	return 0;
}

int cgmem_parse_limit(const char *s, uint64_t *v, int *unlimited)
{
	*unlimited = 0;
	if (!strncmp(s, "max", 3) && (s[3] == '\n' || s[3] == '\0')) {
		*unlimited = 1;
		*v = 0;
		return 0;
	}
	if (parse_u64(s, v) != 0)
		return -1;
	/* v1 says "no limit" with the largest page-aligned long. */
	if (*v >= (1ULL << 62)) {
		*unlimited = 1;
		*v = 0;
	}
	return 0;
}

int cgmem_parse_key(const char *text, const char *key, uint64_t *v)
{
	size_t k = strlen(key);
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, key, k) && l[k] == ' ')
			return parse_u64(l + k + 1, v);
	return -1;
}

int cgmem_parse_psi(const char *text, struct model_cgroup *out)
{
	int got = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		double a, b, c;
		int full = !strncmp(l, "full ", 5);
		if (!full && strncmp(l, "some ", 5))
			continue;
		if (sscanf(l + 5, "avg10=%lf avg60=%lf avg300=%lf", &a, &b, &c) != 3 ||
		    a < 0 || b < 0 || c < 0 || a > 100 || b > 100 || c > 100)
			return -1;
		if (full)
			out->full10 = a, out->full60 = b, out->full300 = c;
		else
			out->some10 = a, out->some60 = b, out->some300 = c;
		got |= full ? 2 : 1;
	}
	return got == 3 ? 0 : -1;
}

static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char path[512], buf[64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (read_file(path, buf, sizeof buf) <= 0)
		return -1;
	return parse_u64(buf, v);
}

static int read_limit(const char *dir, const char *name, uint64_t *v, int *unl)
{
	char path[512], buf[64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (read_file(path, buf, sizeof buf) <= 0)
		return -1;
	return cgmem_parse_limit(buf, v, unl);
}

/* cgroup.procs: the processes, their RSS summed. */
static void read_procs(const char *dir, struct model_cgroup *o)
{
	char path[512];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	long page = sysconf(_SC_PAGESIZE);
	char line[32];
	while (fgets(line, sizeof line, f)) {
		if (o->nprocs == MODEL_CGROUP_PROCS) {
			o->procs_cut = 1;
			break;
		}
		long pid = strtol(line, NULL, 10);
		if (pid <= 0)
			continue;
		o->nprocs++;
		char sp[64], buf[128];
		snprintf(sp, sizeof sp, "/proc/%ld/statm", pid);
		unsigned long size, res;
		if (read_file(sp, buf, sizeof buf) > 0 &&
		    sscanf(buf, "%lu %lu", &size, &res) == 2)
			o->procs_rss += (uint64_t)res * (uint64_t)(page > 0 ? page : 4096);
	}
	fclose(f);
}

static void read_v2(const char *dir, struct model_cgroup *o, char *buf)
{
	o->have_current = read_u64(dir, "memory.current", &o->current) == 0;
	if (!o->have_current) {
		snprintf(o->why, sizeof o->why, "no memory.current in %.80s: the memory "
			 "controller is not enabled for that cgroup", dir);
		return;
	}
	o->have_max = read_limit(dir, "memory.max", &o->max, &o->max_unlimited) == 0;
	o->have_high = read_limit(dir, "memory.high", &o->high, &o->high_unlimited) == 0;
	char path[512];
	snprintf(path, sizeof path, "%s/memory.events", dir);
	if (read_file(path, buf, SMALL_FILE) > 0) {
		o->have_events =
			cgmem_parse_key(buf, "high", &o->ev_high) == 0 &&
			cgmem_parse_key(buf, "max", &o->ev_max) == 0 &&
			cgmem_parse_key(buf, "oom", &o->ev_oom) == 0;
		o->have_oom = o->have_events;
		if (cgmem_parse_key(buf, "oom_kill", &o->ev_oom_kill) != 0)
			o->have_events = 0;
	}
	snprintf(path, sizeof path, "%s/memory.pressure", dir);
	o->have_psi = read_file(path, buf, SMALL_FILE) > 0 && cgmem_parse_psi(buf, o) == 0;
	snprintf(path, sizeof path, "%s/memory.stat", dir);
	if (read_file(path, buf, SMALL_FILE) > 0) {
		o->have_stat = cgmem_parse_key(buf, "anon", &o->anon) == 0 &&
			       cgmem_parse_key(buf, "file", &o->file) == 0;
		uint64_t ks = 0, sl = 0, pc = 0, so = 0;
		o->have_kernel = cgmem_parse_key(buf, "kernel", &o->kernel) == 0;
		if (!o->have_kernel && cgmem_parse_key(buf, "kernel_stack", &ks) == 0 &&
		    cgmem_parse_key(buf, "slab", &sl) == 0) {
			(void)cgmem_parse_key(buf, "percpu", &pc);
			(void)cgmem_parse_key(buf, "sock", &so);
			o->kernel = ks + sl + pc + so;
			o->have_kernel = 1;
		}
	}
}

static void read_v1(const char *dir, struct model_cgroup *o, char *buf)
{
	o->have_current = read_u64(dir, "memory.usage_in_bytes", &o->current) == 0;
	if (!o->have_current) {
		snprintf(o->why, sizeof o->why, "no memory.usage_in_bytes in %.100s", dir);
		return;
	}
	o->have_max = read_limit(dir, "memory.limit_in_bytes", &o->max,
				 &o->max_unlimited) == 0;
	uint64_t fail = 0;
	char path[512];
	snprintf(path, sizeof path, "%s/memory.oom_control", dir);
	if (read_u64(dir, "memory.failcnt", &fail) == 0 &&
	    read_file(path, buf, SMALL_FILE) > 0 &&
	    cgmem_parse_key(buf, "oom_kill", &o->ev_oom_kill) == 0) {
		o->have_events = 1;
		o->ev_max = fail;
	}
	snprintf(path, sizeof path, "%s/memory.stat", dir);
	if (read_file(path, buf, SMALL_FILE) > 0)
		o->have_stat = cgmem_parse_key(buf, "total_rss", &o->anon) == 0 &&
			       cgmem_parse_key(buf, "total_cache", &o->file) == 0;
	uint64_t kmem;
	o->have_kernel = read_u64(dir, "memory.kmem.usage_in_bytes", &kmem) == 0;
	o->kernel = o->have_kernel ? kmem : 0;
}

/* The directory of the cgroup at path (v1: the memory controller's);
 * 0, or -1 when it does not fit. */
static int cg_dir(const char *root, const char *path, int v1, char *dir, size_t len)
{
	int n;
	if (v1) {
		n = snprintf(dir, len, "%s/memory%s", root, path);
	} else {
		char probe[420];
		snprintf(probe, sizeof probe, "%s/cgroup.controllers", root);
		int unified = access(probe, F_OK) == 0;
		n = snprintf(dir, len, "%s%s%s", root, unified ? "" : "/unified", path);
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

void cgmem_oom_killed(const char *root, struct model_cgroup *c)
{
	char dir[384], path[420], buf[1024];
	uint64_t n;
	if (!c->known || !c->have_events)
		return;
	if (c->oom_kill_moved) {
		c->oom_killed = 1;
		return;
	}
	if (cg_dir(root, c->path, c->v1, dir, sizeof dir) != 0)
		return;
	snprintf(path, sizeof path, "%s/%s", dir,
		 c->v1 ? "memory.oom_control" : "memory.events");
	if (read_file(path, buf, sizeof buf) > 0 &&
	    cgmem_parse_key(buf, "oom_kill", &n) == 0 && n > c->ev_oom_kill) {
		c->oom_killed = 1;
		c->ev_oom_kill = n;
	}
}

void cgmem_read(pid_t pid, const char *root, struct model_cgroup *o)
{
	memset(o, 0, sizeof *o);
	if (proc_cgroup_memory(pid, o->path, sizeof o->path, &o->v1) != 0 || !o->path[0]) {
		snprintf(o->why, sizeof o->why, "/proc/%ld/cgroup names no cgroup",
			 (long)pid);
		o->path[0] = '\0';
		return;
	}
	/* A path is the kernel's, but it is a process's: no "..". */
	if (o->path[0] != '/' || strstr(o->path, "/../") ||
	    (strlen(o->path) >= 3 && !strcmp(o->path + strlen(o->path) - 3, "/.."))) {
		snprintf(o->why, sizeof o->why, "a cgroup path ymtop does not follow");
		return;
	}
	char dir[384];
	if (cg_dir(root, o->path, o->v1, dir, sizeof dir) != 0) {   /* never a cut
								       path: a parent's */
		snprintf(o->why, sizeof o->why, "a cgroup path longer than ymtop reads");
		return;
	}
	char *buf = malloc(SMALL_FILE);
	if (!buf) {
		snprintf(o->why, sizeof o->why, "out of memory");
		return;
	}
	if (o->v1)
		read_v1(dir, o, buf);
	else
		read_v2(dir, o, buf);
	free(buf);
	if (!o->have_current)
		return;
	read_procs(dir, o);
	o->known = 1;
}
