#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fleet.h"
#include "sym/files.h"
#include "target.h"

/* Descriptors kept free of segments: the symbolizer's files
 * (SYM_FILES_OPEN), the server's connections, /proc reads. */
#define FLEET_FD_SPARE (SYM_FILES_OPEN + 64)

void fleet_init(struct fleet *f, pid_t root)
{
	memset(f, 0, sizeof *f);
	f->root = root;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void drop(struct fleet *f, int i)
{
	session_close(&f->p[i]->s);
	free(f->p[i]);
	memmove(&f->p[i], &f->p[i + 1], (size_t)(f->n - i - 1) * sizeof *f->p);
	f->n--;
}

/* Room for one more process: 0, or -1 with the reason in skip_why. */
static int room(struct fleet *f)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)f->n + FLEET_FD_SPARE >= rl.rlim_cur) {
		snprintf(f->skip_why, sizeof f->skip_why, "open files limit "
			 "(ulimit -n %llu)", (unsigned long long)rl.rlim_cur);
		return -1;
	}
	if (f->n == f->cap) {
		int cap = f->cap ? f->cap * 2 : 64;
		void *v = realloc(f->p, (size_t)cap * sizeof *f->p);
		if (!v) {
			snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
			return -1;
		}
		f->p = v;
		f->cap = cap;
	}
	return 0;
}

void fleet_add(struct fleet *f, const struct options *o, pid_t pid)
{
	struct fleet_proc *p = calloc(1, sizeof *p);
	if (!p)
		cli_die(1, "out of memory");
	if (room(f) != 0)
		cli_die(1, "%s", f->skip_why);
	session_open(&p->s, o, pid);
	p->s.reader.writable = 0;   /* shm_control_* refuse from now on */
	p->pid = pid;
	f->fixed = 1;
	f->p[f->n++] = p;
}

int fleet_find(const struct fleet *f, pid_t pid)
{
	for (int i = 0; i < f->n; i++)
		if (f->p[i]->pid == pid)
			return i;
	return -1;
}

pid_t fleet_ppid(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* comm may hold anything, ")" included: the fields follow the last. */
	char *close = strrchr(buf, ')');
	char st;
	long pp;
	if (!close || sscanf(close + 1, " %c %ld", &st, &pp) != 2 || pp < 0)
		return 0;
	return (pid_t)pp;
}

/* Is pid the root or forked from it (at any depth)? */
static int in_tree(pid_t root, pid_t pid)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		if (pid == root)
			return 1;
		pid = fleet_ppid(pid);
	}
	return pid == root;
}

/* A fresh snapshot of a live process: 1; else 0 (then it is dropped).
 * Debug files of stripped modules are asked of debuginfod servers without
 * waiting (the fleet's sessions have no wait budget): a scrape never
 * stalls on a server, and names arrive at a later one. */
static int fresh(struct fleet_proc *p)
{
	char err[256];
	if (session_refresh(&p->s, 1, err, sizeof err) != 0 || !p->s.model.alive)
		return 0;
	session_symbols(&p->s, 0);
	return 1;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = (*(struct fleet_proc *const *)a)->pid;
	pid_t y = (*(struct fleet_proc *const *)b)->pid;
	return (x > y) - (x < y);
}

/* Every agent process we may read into f->pids: how many, or -1. */
static int list(struct fleet *f)
{
	for (;;) {
		int n = target_list(f->pids, f->npids);
		if (n <= f->npids)
			return n;
		int cap = n + n / 4 + 16;
		void *v = realloc(f->pids, (size_t)cap * sizeof *f->pids);
		if (!v)
			return -1;
		f->pids = v;
		f->npids = cap;
	}
}

void fleet_update(struct fleet *f)
{
	int n = f->fixed ? 0 : list(f);
	f->skipped = 0;
	if (n < 0) {
		n = 0;
		f->skipped = 1;
		snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
	}
	pid_t *pids = f->pids;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!f->root || in_tree(f->root, pids[i]))
			pids[k++] = pids[i];
	n = k;
	for (int i = f->n; i-- > 0;) {
		int listed = f->fixed;
		for (int j = 0; j < n && !listed; j++)
			listed = pids[j] == f->p[i]->pid;
		if (!listed || !fresh(f->p[i]))
			drop(f, i);
	}
	for (int j = 0; j < n; j++) {
		if (fleet_find(f, pids[j]) >= 0)
			continue;
		if (room(f) != 0) {
			f->skipped++;
			continue;
		}
		char err[256];
		struct shm_reader r;
		int rc = target_open(pids[j], &r, err, sizeof err);
		if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM) {
			snprintf(f->skip_why, sizeof f->skip_why, "%s", strerror(-rc));
			f->skipped++;
		}
		if (rc != 0)
			continue;
		r.writable = 0;   /* read only: shm_control_* refuse */
		struct fleet_proc *p = calloc(1, sizeof *p);
		if (!p || session_adopt(&p->s, &r) != 0) {
			free(p);
			shm_reader_close(&r);
			snprintf(f->skip_why, sizeof f->skip_why, "out of memory");
			f->skipped++;
			continue;
		}
		p->pid = pids[j];
		p->s.symbol_wait_s = 0;
		if (!fresh(p)) {
			session_close(&p->s);
			free(p);
			continue;
		}
		f->p[f->n++] = p;
	}
	qsort(f->p, (size_t)f->n, sizeof *f->p, by_pid);
}

void fleet_free(struct fleet *f)
{
	while (f->n)
		drop(f, f->n - 1);
	free(f->p);
	free(f->pids);
	memset(f, 0, sizeof *f);
}
