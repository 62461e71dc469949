#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet.h"
#include "target.h"
#include "util/clock.h"

void fleet_init(struct fleet *f, pid_t root)
{
	memset(f, 0, sizeof *f);
	f->root = root;
}

static void drop(struct fleet *f, int i)
{
	session_close(&f->p[i]->s);
	free(f->p[i]);
	memmove(&f->p[i], &f->p[i + 1], (size_t)(f->n - i - 1) * sizeof *f->p);
	f->n--;
}

void fleet_add(struct fleet *f, const struct options *o, pid_t pid)
{
	struct fleet_proc *p = calloc(1, sizeof *p);
	if (!p)
		cli_die(1, "out of memory");
	session_open(&p->s, o, pid);
	/* shm_control_* refuse from now on, but heap requests (may_ask) */
	p->s.reader.writable = 0;
	p->pid = pid;
	f->fixed = 1;
	if (f->n < FLEET_MAX)
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

/* Ask every watched process for the allocator's statistics at once, and
 * wait once (SESSION_HEAP_WAIT_S at most) for the answers: every refresh
 * then has figures no older than itself, or shows their age. */
static void ask_all(struct fleet *f)
{
	int pending = 0;
	for (int i = 0; i < f->n; i++) {
		pending += session_ask_heap(&f->p[i]->s);
		f->p[i]->s.asked_ahead = 1;
	}
	double end = clock_mono_s() + SESSION_HEAP_WAIT_S;
	while (pending && clock_mono_s() < end && !cli_stop) {
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
		pending = 0;
		for (int i = 0; i < f->n; i++)
			pending += f->p[i]->s.heap_asked &&
				   !session_heap_answered(&f->p[i]->s);
	}
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = (*(struct fleet_proc *const *)a)->pid;
	pid_t y = (*(struct fleet_proc *const *)b)->pid;
	return (x > y) - (x < y);
}

void fleet_update(struct fleet *f)
{
	static pid_t pids[FLEET_MAX];
	int n = f->fixed ? 0 : target_list(pids, FLEET_MAX);
	if (n > FLEET_MAX)
		n = FLEET_MAX;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!f->root || in_tree(f->root, pids[i]))
			pids[k++] = pids[i];
	n = k;
	ask_all(f);
	for (int i = f->n; i-- > 0;) {
		int listed = f->fixed;
		for (int j = 0; j < n && !listed; j++)
			listed = pids[j] == f->p[i]->pid;
		if (!listed || !fresh(f->p[i]))
			drop(f, i);
	}
	for (int j = 0; j < n && f->n < FLEET_MAX; j++) {
		if (fleet_find(f, pids[j]) >= 0)
			continue;
		char err[256];
		struct shm_reader r;
		if (target_open(pids[j], &r, err, sizeof err) != 0)
			continue;
		r.writable = 0;   /* read only: shm_control_* refuse, but heap requests */
		struct fleet_proc *p = calloc(1, sizeof *p);
		if (!p || session_adopt(&p->s, &r) != 0) {
			free(p);
			shm_reader_close(&r);
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
}
