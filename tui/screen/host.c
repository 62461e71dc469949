/*
 * host: the host list's data and keys, no curses; host_ui.c draws it
 * (see host.h).
 */
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "proc.h"
#include "report/prometheus.h"
#include "util/clock.h"
#include "view.h"

void host_init(struct host *h, pid_t root)
{
	memset(h, 0, sizeof *h);
	fleet_init(&h->f, root);
	h->sort = HOST_RETAINED;
}

const char *host_sort_name(enum host_sort k)
{
	static const char *const names[HOST_NSORT] = {
		"pid", "user", "command", "rss", "in use", "retained", "alloc/s",
		"alarms", "state",
	};
	return (unsigned)k < HOST_NSORT ? names[k] : "?";
}

/* The process title: /proc/PID/cmdline with its NULs as spaces (4 KiB at
 * most; the rest cut), else [comm]. */
static void read_command(pid_t pid, const char *comm, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
	proc_reads++;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(out, len, "[%s]", comm);
		return;
	}
	out[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\0')
			out[i] = ' ';
	while (n > 0 && out[n - 1] == ' ')
		out[--n] = '\0';
}

/* The names looked up in this refresh (names_gen), a few users': one
 * lookup a user a refresh, not one a process. */
static struct { uid_t uid; unsigned gen; char name[32]; } names[8];
static unsigned names_gen = 1;

static void user_name(uid_t uid, char *out, size_t len)
{
	unsigned slot = (unsigned)uid % (sizeof names / sizeof names[0]);
	if (names[slot].gen == names_gen && names[slot].uid == uid) {
		snprintf(out, len, "%s", names[slot].name);
		return;
	}
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "%u", (unsigned)uid);
	names[slot].uid = uid;
	names[slot].gen = names_gen;
	snprintf(names[slot].name, sizeof names[slot].name, "%s", out);
}

/* The base name of the executable a process's segment names. */
static const char *exe_base(const struct model *m)
{
	const char *base = strrchr(model_exe(m), '/');
	return base ? base + 1 : model_exe(m);
}

static void row_of(struct fleet_proc *p, struct host_row *r)
{
	const struct model *m = &p->s.model;
	memset(r, 0, sizeof *r);
	r->pid = p->pid;
	r->nprocs = 1;
	user_name(m->proc.uid, r->user, sizeof r->user);
	double now = clock_mono_s();
	if (!p->title[0] || p->title_ticks != m->proc.start_ticks ||
	    strcmp(p->title_comm, m->proc.comm) != 0 ||
	    now - p->title_at >= FLEET_TITLE_S) {
		read_command(p->pid, m->proc.comm, p->title, sizeof p->title);
		p->title_ticks = m->proc.start_ticks;
		snprintf(p->title_comm, sizeof p->title_comm, "%s", m->proc.comm);
		p->title_at = now;
	}
	_Static_assert(sizeof r->command == sizeof p->title, "title");
	memcpy(r->command, p->title, sizeof r->command);
	snprintf(r->exe, sizeof r->exe, "%.63s", exe_base(m));
	r->rss = (double)m->proc.rss_bytes;
	r->retained = m->retained_bytes;
	r->inuse_known = model_in_use(m, &r->inuse);
	double age;
	r->inuse_old = r->inuse_known && model_heap(m, &age) && age > 0;
	r->rate = m->alloc_bytes_rate;
	r->alarms = model_alarms_written(m);
	snprintf(r->state, sizeof r->state, "%s", model_state(m));
}

/* An order of the rows: the host's (h->sort, h->asc), or the pids' that
 * merging needs; given to the comparison through qsort_r. */
struct host_order {
	enum host_sort key;
	int asc;
};

static double num(const struct host_row *r, enum host_sort k)
{
	switch (k) {
	case HOST_RSS: return r->rss;
	case HOST_INUSE: return r->inuse_known ? r->inuse : -1;
	case HOST_RETAINED: return r->retained;
	case HOST_RATE: return r->rate;
	case HOST_ALARMS: return (double)r->alarms;
	default: return 0;
	}
}

static int cmp_rows(const void *a, const void *b, void *order)
{
	const struct host_row *x = a, *y = b;
	const struct host_order *o = order;
	int c = 0;
	switch (o->key) {
	case HOST_PID: c = (x->pid > y->pid) - (x->pid < y->pid); break;
	case HOST_USER: c = strcmp(x->user, y->user); break;
	case HOST_COMMAND: c = strcmp(x->command, y->command); break;
	case HOST_STATE: c = strcmp(x->state, y->state); break;
	default: {
		/* Numbers: largest first unless ascending. */
		double u = num(x, o->key), v = num(y, o->key);
		c = (u < v) - (u > v);
		break;
	}
	}
	if (o->asc)
		c = -c;
	if (!c)
		c = (x->pid > y->pid) - (x->pid < y->pid);
	return c;
}

/* e: rows of one executable summed into the first (lowest pid). */
static void merge_rows(struct host *h)
{
	int w = 0;
	for (int i = 0; i < h->n; i++) {
		int j;
		for (j = 0; j < w; j++)
			if (!strcmp(h->rows[j].exe, h->rows[i].exe))
				break;
		if (j == w) {
			h->rows[w++] = h->rows[i];
			continue;
		}
		struct host_row *d = &h->rows[j];
		const struct host_row *s = &h->rows[i];
		d->nprocs++;
		d->rss += s->rss;
		d->retained += s->retained;
		d->inuse += s->inuse;
		d->inuse_known = d->inuse_known && s->inuse_known;
		d->inuse_old = d->inuse_old || s->inuse_old;
		d->rate += s->rate;
		d->alarms += s->alarms;
	}
	h->n = w;
	for (int i = 0; i < h->n; i++)
		if (h->rows[i].nprocs > 1) {
			char t[sizeof h->rows[i].command];
			snprintf(t, sizeof t, "%s (%d processes)", h->rows[i].exe,
				 h->rows[i].nprocs);
			memcpy(h->rows[i].command, t, sizeof t);
		}
}

/* The rows from the fleet's models, merged and sorted as asked. */
static int rebuild(struct host *h)
{
	struct host_row *rows = realloc(h->rows, (size_t)(h->f.n ? h->f.n : 1) *
					sizeof *rows);
	if (!rows)
		return -1;
	h->rows = rows;
	h->n = h->f.n;
	for (int i = 0; i < h->n; i++)
		row_of(h->f.p[i], &h->rows[i]);
	if (h->merge) {
		/* The lowest pid of each executable leads its row. */
		struct host_order by_pid = { HOST_PID, 0 };
		qsort_r(h->rows, (size_t)h->n, sizeof *h->rows, cmp_rows, &by_pid);
		merge_rows(h);
	}
	struct host_order asked = { h->sort, h->asc };
	qsort_r(h->rows, (size_t)h->n, sizeof *h->rows, cmp_rows, &asked);
	h->sel = 0;
	for (int i = 0; i < h->n; i++)
		if (h->rows[i].pid == h->sel_pid)
			h->sel = i;
	if (h->sel >= h->n)
		h->sel = h->n ? h->n - 1 : 0;
	h->sel_pid = h->n ? h->rows[h->sel].pid : 0;
	return 0;
}

int host_refresh(struct host *h)
{
	names_gen++;
	fleet_update(&h->f);
	return rebuild(h);
}

static int move(struct host *h, int by)
{
	int s = h->sel + by;
	if (s >= h->n)
		s = h->n - 1;
	if (s < 0)
		s = 0;
	h->sel = s;
	h->sel_pid = h->n ? h->rows[s].pid : 0;
	return HOST_REDRAW;
}

/* ---- keys: every key of the host list and of its merged view is a row of
 * a table; the key lines name only keys these tables hold (test_host). ---- */

typedef int (*host_action)(struct host *h, int key, int rows);

static int act_move(struct host *h, int key, int rows)
{
	int page = rows > 1 ? rows - 1 : 1;
	switch (key) {
	case VK_UP: case 'k': return move(h, -1);
	case VK_DOWN: case 'j': return move(h, 1);
	case VK_PGUP: return move(h, -page);
	case VK_PGDN: return move(h, page);
	case VK_HOME: return move(h, -h->n);
	default: return move(h, h->n);   /* VK_END */
	}
}

static int act_open(struct host *h, int key, int rows)
{
	(void)key;
	(void)rows;
	return h->n ? HOST_OPEN : HOST_NONE;
}

static int act_quit(struct host *h, int key, int rows)
{
	(void)h;
	(void)key;
	(void)rows;
	return HOST_QUIT;
}

static int act_invert(struct host *h, int key, int rows)
{
	(void)key;
	(void)rows;
	h->asc = !h->asc;
	rebuild(h);
	return HOST_REDRAW;
}

static int act_merge(struct host *h, int key, int rows)
{
	(void)key;
	(void)rows;
	h->merge = !h->merge;
	rebuild(h);
	return HOST_REDRAW;
}

static int act_sort_step(struct host *h, int key, int rows)
{
	(void)rows;
	h->sort = (enum host_sort)(((int)h->sort + (key == '<' ? -1 : 1) +
				    HOST_NSORT) % HOST_NSORT);
	rebuild(h);
	return HOST_REDRAW;
}

static int act_sort_key(struct host *h, int key, int rows)
{
	static const struct { int key; enum host_sort k; } sorts[] = {
		{ 'P', HOST_PID }, { 'U', HOST_USER }, { 'C', HOST_COMMAND },
		{ 'M', HOST_RSS }, { 'I', HOST_INUSE }, { 'R', HOST_RETAINED },
		{ 'A', HOST_RATE }, { 'W', HOST_ALARMS }, { 'S', HOST_STATE },
	};
	(void)rows;
	for (size_t i = 0; i < sizeof sorts / sizeof *sorts; i++)
		if (sorts[i].key == key)
			h->sort = sorts[i].k;
	rebuild(h);
	return HOST_REDRAW;
}

static int act_back(struct host *h, int key, int rows)
{
	(void)h;
	(void)key;
	(void)rows;
	return HOST_BACK;
}

struct host_keydef {
	int key;
	host_action fn;
};

static const struct host_keydef list_keys[] = {
	{ VK_UP, act_move }, { VK_DOWN, act_move }, { 'k', act_move },
	{ 'j', act_move }, { VK_PGUP, act_move }, { VK_PGDN, act_move },
	{ VK_HOME, act_move }, { VK_END, act_move },
	{ VK_ENTER, act_open }, { 'q', act_quit },
	{ 'i', act_invert }, { 'e', act_merge },
	{ '<', act_sort_step }, { '>', act_sort_step },
	{ 'P', act_sort_key }, { 'U', act_sort_key }, { 'C', act_sort_key },
	{ 'M', act_sort_key }, { 'I', act_sort_key }, { 'R', act_sort_key },
	{ 'A', act_sort_key }, { 'W', act_sort_key }, { 'S', act_sort_key },
};

static const struct host_keydef merged_keys[] = {
	{ 'H', act_back }, { VK_ESC, act_back }, { 'q', act_quit },
};

const char host_key_line[] = "Enter open  P U C M I R A W S sort  < > next  i invert"
	"  e merge by executable (Enter: merged stacks)  q quit";
const char host_merged_key_line[] = "H or Esc: back to the process list  q quit";

static const struct host_keydef *lookup(const struct host_keydef *t, size_t n, int key)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].key == key)
			return &t[i];
	return NULL;
}

#define LOOKUP(t, key) lookup(t, sizeof t / sizeof *t, key)

int host_key_known(int merged, int key)
{
	return (merged ? LOOKUP(merged_keys, key) : LOOKUP(list_keys, key)) != NULL;
}

int host_key(struct host *h, int key, int rows)
{
	const struct host_keydef *d = LOOKUP(list_keys, key);
	return d ? d->fn(h, key, rows) : HOST_NONE;
}

int host_merged_key(struct host *h, int key)
{
	const struct host_keydef *d = LOOKUP(merged_keys, key);
	return d ? d->fn(h, key, 0) : HOST_NONE;
}

int host_merged(const struct host *h, const char *exe, const struct report_opts *o,
		struct prom_group **out, size_t *n)
{
	struct prom_source *src = calloc((size_t)h->f.n + 1, sizeof *src);
	if (!src)
		return -1;
	size_t k = 0;
	for (int i = 0; i < h->f.n; i++) {
		struct model *m = &h->f.p[i]->s.model;
		if (!strncmp(exe_base(m), exe, sizeof h->rows[0].exe - 1)) {
			src[k].m = m;
			src[k].s = h->f.p[i]->s.sym;
			k++;
		}
	}
	int rc = prometheus_merge(src, k, o, out, n);
	free(src);
	return rc;
}

void host_free(struct host *h)
{
	fleet_free(&h->f);
	free(h->rows);
	memset(h, 0, sizeof *h);
}
