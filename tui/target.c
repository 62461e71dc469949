/*
 * target: which process to watch and how to reach its segment
 * (see target.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0
#endif

#include "ptrace/inject.h"
#include "ptrace/libckind.h"
#include "ptrace/procfs.h"
#include "shm.h"
#include "fmt.h"
#include "proc.h"
#include "stale.h"
#include "target.h"
#include "util/clock.h"

#ifndef YM_LIBDIR
#define YM_LIBDIR "/usr/local/lib/ymtop"
#endif

/* Where the agent is, for injection and the remedy in messages: YM_AGENT,
 * then beside ymtop (a build tree), then ../lib/ymtop/ relative to it (an
 * installed prefix, wherever it was moved), then the configured library
 * directory. */
void target_agent_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	const char *env = getenv("YM_AGENT");
	if (env && *env) {
		/* As given when it does not resolve here: it may name a file
		 * inside the target's mount namespace. */
		if (!realpath(env, self))
			snprintf(self, sizeof self, "%s", env);
		snprintf(buf, len, "%s", self);
		return;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			const char *rel[] = { "/libymagent.so", "/../lib/ymtop/libymagent.so" };
			for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
				char cand[PATH_MAX + 64], real[PATH_MAX];
				snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
				if (access(cand, R_OK) == 0 && realpath(cand, real)) {
					snprintf(buf, len, "%s", real);
					return;
				}
			}
		}
	}
	snprintf(buf, len, "%s/libymagent.so", YM_LIBDIR);
}

/* Open the segment of the process pi where it made it: its /dev/shm seen
 * through /proc/PID/root (its mount namespace: a container's), or ours
 * when that is closed to us and the process is in our mount namespace,
 * or when it is a zombie of our pid namespace (its root is gone with its
 * file system state; its segment, kept or left by a kill, is here).
 * Owner checked against uid as shm_reader_open_path does.  Returns its
 * code (-ENOENT: the process has no segment). */
static int segment_path(const struct proc_info *pi, char *path, size_t plen,
			char *err, size_t len)
{
	static uint32_t own_ns;
	if (!own_ns)
		own_ns = proc_pidns(0);
	uint32_t ns = pi->pidns;
	if (!ns && pi->nspid == pi->pid)
		ns = own_ns;   /* NSpid has one level: our namespace */
	if (!ns && own_ns) {
		char why[384];
		snprintf(err, len, "cannot read /proc/%ld/ns/pid, and the process is in "
			 "another pid namespace: %s", (long)pi->pid,
			 inject_refusal(pi->pid, 0, why, sizeof why));
		return -EACCES;
	}
	char name[48];
	shm_name(name, sizeof name, pi->nspid, ns);
	/* /proc/PID/root is closed to us when the process is not dumpable or
	 * is another user's: then our own /dev/shm, right in our mount
	 * namespace, where the checks that follow (owner, pid, start time,
	 * mapping) hold as anywhere. */
	struct stat st;
	snprintf(path, plen, "/proc/%ld/root/", (long)pi->pid);
	if (stat(path, &st) != 0 && (errno == EACCES || errno == EPERM ||
				     (errno == ENOENT && proc_gone(pi) && ns == own_ns)))
		snprintf(path, plen, "%s%s", YM_SHM_DIR, name);
	else
		snprintf(path, plen, "/proc/%ld/root%s%s", (long)pi->pid,
			 YM_SHM_DIR, name);
	return 0;
}

static int segment_open(struct shm_reader *r, const struct proc_info *pi, uid_t uid,
			char *err, size_t len)
{
	char path[128];
	int rc = segment_path(pi, path, sizeof path, err, len);
	if (rc != 0)
		return rc;
	return shm_reader_open_path(r, path, pi->pid, pi->nspid, uid, err, len);
}

/* One candidate for find_agents: 1 when pid runs a live agent. */
static int runs_agent(pid_t pid)
{
	struct proc_info pi;
	if (proc_read(pid, &pi) != 0 || proc_gone(&pi) || pi.tgid != pid)
		return 0;
	if (geteuid() != 0 && pi.uid != geteuid())
		return 0;
	struct shm_reader r;
	char err[256];
	if (segment_open(&r, &pi, pi.uid, err, sizeof err) != 0)
		return 0;
	struct ym_header h;
	int ok = shm_header_read(&r, &h, err, sizeof err) == 0 &&
		 !(h.flags & YM_FLAG_EXITED) &&
		 proc_writer(pid, h.start_ticks, r.dev, r.ino) == WRITER_LIVE;
	shm_reader_close(&r);
	return ok;
}

/* A process of our pid namespace that runs the agent but has no segment
 * yet: the agent makes it at the first sample (ymagent(7)), and a short or
 * quiet process may not have sampled.  Its environment preloads the
 * agent, or was written over by its title (an idle nginx master), and
 * its maps show it (read only for those).  *no_env: 1 when its
 * environment was read whole and preloads no agent (until it execs). */
static int runs_agent_unstarted(pid_t pid, int *no_env)
{
	struct proc_info pi;
	*no_env = 0;
	if (proc_read(pid, &pi) != 0 || proc_gone(&pi) || pi.tgid != pid ||
	    (geteuid() != 0 && pi.uid != geteuid()))
		return 0;
	int env = proc_preloads_agent(pid);
	*no_env = env == 0;
	if (env != 1 && env != PROC_ENV_GONE)
		return 0;
	int maps = proc_maps_agent(pid);
	return maps > 0 && (maps & PROC_HAS_AGENT) && !runs_agent(pid);
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The processes of our pid namespace whose environment preloads no agent
 * (runs_agent_unstarted), remembered from one listing of the unstarted to
 * the next so that only a new pid, or one that exec'd, has its status and
 * environment read again: the environment is made by exec, and the stat
 * fields kept tell another process on the pid (start time) and an exec
 * (the stack and the environment are placed anew, and the environment's
 * length moves them).  The agent cannot come in later without exec but
 * through injection, which makes its segment at once.  By pid
 * ascending; rebuilt at each listing, so a gone pid is forgotten. */
struct env_memo {
	pid_t    pid;
	uint64_t start, stack, env_lo, env_hi;
};
static struct {
	struct env_memo *v, *next;
	size_t n, nnext, cap;
} memo;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int memo_cmp(const void *a, const void *b)
{
	return pid_cmp(&((const struct env_memo *)a)->pid,
		       &((const struct env_memo *)b)->pid);
}

static struct env_memo memo_of(pid_t pid, const struct proc_stat *st)
{
	struct env_memo m = { pid, st->start_ticks, st->start_stack,
			      st->env_start, st->env_end };
	return m;
}

/* pid with stat st was found without the agent in its environment, and
 * has not exec'd since. */
static int memo_known(pid_t pid, const struct proc_stat *st)
{
	struct env_memo key = memo_of(pid, st);
	const struct env_memo *m = memo.n ? bsearch(&key, memo.v, memo.n,
						    sizeof *memo.v, memo_cmp) : NULL;
	return m && m->start == key.start && m->stack == key.stack &&
	       m->env_lo == key.env_lo && m->env_hi == key.env_hi;
}

/* Remember pid (stat st) for the next listing; forgotten without memory. */
static void memo_keep(pid_t pid, const struct proc_stat *st)
{
	if (memo.nnext == memo.cap) {
		size_t cap = memo.cap ? memo.cap * 2 : 256;
		void *a = realloc(memo.v, cap * sizeof *memo.v);
		if (a)
			memo.v = a;
		void *b = a ? realloc(memo.next, cap * sizeof *memo.next) : NULL;
		if (!b)
			return;
		memo.next = b;
		memo.cap = cap;
	}
	memo.next[memo.nnext++] = memo_of(pid, st);
}

/* The listing is over: what it kept is what the next one knows. */
static void memo_swap(void)
{
	struct env_memo *v = memo.v;
	memo.v = memo.next;
	memo.n = memo.nnext;
	memo.next = v;
	memo.nnext = 0;
	if (memo.n > 1)
		qsort(memo.v, memo.n, sizeof *memo.v, memo_cmp);
}

/* The pids that segments in our /dev/shm name for our pid namespace,
 * sorted, into *out (to free): how many, or -1 without memory.  Names
 * only: a process named here has made its segment (or its pid's earlier
 * process left one), so it is not unstarted, and its environment and
 * maps need not be read. */
static int named_pids(uint32_t own_ns, pid_t **out)
{
	int n = 0, cap = 0;
	*out = NULL;
	DIR *d = opendir(YM_SHM_DIR);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		pid_t v;
		uint32_t ns;
		if (shm_parse_name(e->d_name, &v, &ns) != 0 ||
		    (ns ? ns : YM_PIDNS_INIT) != (own_ns ? own_ns : YM_PIDNS_INIT))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			pid_t *p = realloc(*out, (size_t)cap * sizeof *p);
			if (!p) {
				closedir(d);
				free(*out);
				*out = NULL;
				return -1;
			}
			*out = p;
		}
		(*out)[n++] = v;
	}
	closedir(d);
	if (n)
		qsort(*out, (size_t)n, sizeof **out, pid_cmp);
	return n;
}

/* Which processes find_agents lists. */
enum find_which {
	FIND_STARTED,     /* a live agent with its segment */
	FIND_ALL,         /* and those not started yet (ymtop -p starts them) */
	FIND_UNSTARTED,   /* only those not started yet */
};

/* Processes running a live agent: those named by the segments in our
 * /dev/shm, and (where /proc lets us look) processes in other pid
 * namespaces, whose segments are in their own /dev/shm; and as `which`
 * says, those of our namespace that have not made their segment yet. */
static int find_agents(pid_t *pids, int max, enum find_which which,
		       int (*known)(pid_t, void *), void *arg)
{
	int unstarted = which != FIND_STARTED;
	int n = 0;
	uint32_t own_ns = proc_pidns(0);
	DIR *d = which == FIND_UNSTARTED ? NULL : opendir(YM_SHM_DIR);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			pid_t v;
			uint32_t ns;
			if (shm_parse_name(e->d_name, &v, &ns) != 0 ||
			    (ns ? ns : YM_PIDNS_INIT) != (own_ns ? own_ns : YM_PIDNS_INIT))
				continue;   /* another namespace's: found below */
			if (!(known && known(v, arg)) && !runs_agent(v))
				continue;
			if (n < max)
				pids[n] = v;
			n++;
		}
		closedir(d);
	}
	/* By pid: a watched process is looked up among them below by a
	 * search, not a scan of all (quadratic in the processes). */
	int nshm = n < max ? n : max;
	if (nshm > 1)
		qsort(pids, (size_t)nshm, sizeof *pids, pid_cmp);
	pid_t *named = NULL;
	int nnamed = which == FIND_UNSTARTED ? named_pids(own_ns, &named) : 0;
	d = nnamed < 0 ? NULL : opendir("/proc");
	if (!d) {
		free(named);
		return n;
	}
	if (unstarted) {
		pthread_mutex_lock(&memo_lock);
		memo.nnext = 0;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		errno = 0;
		long v = strtol(e->d_name, &end, 10);
		if (errno || *end || v <= 0 || v > 0x3fffffff)
			continue;
		pid_t key = (pid_t)v;
		if (nnamed && bsearch(&key, named, (size_t)nnamed, sizeof *named, pid_cmp))
			continue;
		/* Watched, of our namespace: listed above (its segment's
		 * name), or gone from /dev/shm; of another: still running. */
		if (known && known((pid_t)v, arg)) {
			if (!(nshm && bsearch(&key, pids, (size_t)nshm, sizeof *pids,
					      pid_cmp)) &&
			    proc_pidns((pid_t)v) != own_ns) {
				if (n < max)
					pids[n] = (pid_t)v;
				n++;
			}
			continue;
		}
		/* Without the agent in its environment at the last listing
		 * and no exec since (its stat says: 1 read, not 5): not
		 * unstarted, and of our namespace (only those are kept). */
		struct proc_stat st;
		int have_st = unstarted && proc_stat_read((pid_t)v, 0, &st) == 0 &&
			      st.env_start && st.env_end;
		if (have_st && memo_known((pid_t)v, &st)) {
			memo_keep((pid_t)v, &st);
			continue;
		}
		uint32_t ns = proc_pidns((pid_t)v);
		int no_env = 0;
		if (!ns || (ns == own_ns ? !unstarted || !runs_agent_unstarted((pid_t)v, &no_env)
				 : which == FIND_UNSTARTED || !runs_agent((pid_t)v))) {
			if (no_env && have_st && ns == own_ns)
				memo_keep((pid_t)v, &st);
			continue;
		}
		if (n < max)
			pids[n] = (pid_t)v;
		n++;
	}
	closedir(d);
	free(named);
	if (unstarted) {
		memo_swap();
		pthread_mutex_unlock(&memo_lock);
	}
	return n;
}

int target_list(pid_t *pids, int max)
{
	return find_agents(pids, max, FIND_STARTED, NULL, NULL);
}

int target_list_unstarted(pid_t *pids, int max)
{
	return find_agents(pids, max, FIND_UNSTARTED, NULL, NULL);
}

int target_list_known(pid_t *pids, int max, int (*known)(pid_t, void *),
		      void *arg)
{
	return find_agents(pids, max, FIND_STARTED, known, arg);
}

/* Segments in our /dev/shm of live processes of other users: those a
 * user who is not root cannot read, nor look into (their /proc/PID/maps
 * and environ are closed).  Counted when the process still runs and the
 * file is its owner's; the first into *first. */
static int others_agents(pid_t *first)
{
	int n = 0;
	uint32_t own_ns = proc_pidns(0);
	DIR *d = opendir(YM_SHM_DIR);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		pid_t v;
		uint32_t ns;
		char path[300];
		struct stat st;
		struct proc_info pi;
		if (shm_parse_name(e->d_name, &v, &ns) != 0 ||
		    (ns ? ns : YM_PIDNS_INIT) != (own_ns ? own_ns : YM_PIDNS_INIT))
			continue;
		snprintf(path, sizeof path, "%s/%s", YM_SHM_DIR, e->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid == geteuid() ||
		    proc_read(v, &pi) != 0 || proc_gone(&pi) || pi.uid != st.st_uid)
			continue;
		if (n++ == 0)
			*first = v;
	}
	closedir(d);
	return n;
}

/* No process we may watch runs the agent: why, into e; -1. */
static int no_agent_here(const char *agent, struct ym_err *e)
{
	pid_t first = 0;
	int others = geteuid() != 0 ? others_agents(&first) : 0;
	struct proc_info pi;
	char vis[FMT_VIS_SIZE(sizeof pi.comm)];
	if (others > 0 && proc_read(first, &pi) == 0)
		return ym_err_set(e, 1, "no process of yours runs the agent; %d process%s of other "
			"users do%s (pid %ld, %s, uid %u): run ymtop as %s user or as "
			"root", others, others > 1 ? "es" : "", others > 1 ? "" : "es",
			(long)first, fmt_vis(pi.comm, vis, sizeof vis), (unsigned)pi.uid,
			others > 1 ? "their" : "its");
	const char *slash = strrchr(agent, '/');
	int dir = slash ? (int)(slash - agent) : 0;
	return ym_err_set(e, 1, "no running process has the agent loaded; start one with "
		"LD_PRELOAD=%s (a musl program: LD_PRELOAD=%.*s%slibymagent-musl.so), "
		"or give -p PID", agent, dir, agent, slash ? "/" : "");
}

pid_t target_choose(pid_t pid, struct ym_err *e)
{
	char agent[PATH_MAX];
	if (pid)
		return pid;
	stale_sweep();   /* gone processes' segments: a report each, removed */
	pid_t pids[64];
	int n = find_agents(pids, 64, FIND_ALL, NULL, NULL);
	if (n == 1)
		return pids[0];
	target_agent_path(agent, sizeof agent);
	if (n == 0)
		return no_agent_here(agent, e);
	fprintf(stderr, "ymtop: %d processes run the agent; choose one with -p PID:\n", n);
	for (int i = 0; i < n && i < 64; i++) {
		struct proc_info pi;
		char vis[FMT_VIS_SIZE(sizeof pi.comm)];
		if (proc_read(pids[i], &pi) == 0)
			fprintf(stderr, "  %7ld  %s\n", (long)pids[i],
				fmt_vis(pi.comm, vis, sizeof vis));
	}
	if (n > 64)
		fprintf(stderr, "  ... and %d more (on a terminal, the host list shows them all)\n",
			n - 64);
	return ym_err_set(e, 1, "%s", "");
}

/* The agent as the target sees it: its path must name the same file
 * through /proc/PID/root.  1 when it does not exist there (another mount
 * namespace: a container) and ymtop must bring it in (inject.h); that
 * goes through the target's /proc, which must be mounted.  -1 with e set
 * when the agent cannot reach it. */
static int check_agent_visible(pid_t pid, const char *agent, struct ym_err *e)
{
	char there[PATH_MAX + 64];
	struct stat in, out;
	snprintf(there, sizeof there, "/proc/%ld/root%s", (long)pid, agent);
	if (agent[0] != '/')
		return ym_err_set(e, 1, "YM_AGENT must be an absolute path (%s)", agent);
	if (stat(there, &in) != 0) {
		char why[384];
		if (errno == EACCES || errno == EPERM)
			return ym_err_set(e, 1, "ptrace of process %ld refused: %s", (long)pid,
				inject_refusal(pid, 0, why, sizeof why));
		if (stat(agent, &out) != 0)
			return ym_err_set(e, 1, "the agent %s is missing (%s); build it, or set YM_AGENT "
			       "to libymagent.so", agent, strerror(errno));
		if (!S_ISREG(out.st_mode))
			return ym_err_set(e, 1, "the agent %s is not a regular file", agent);
		struct statfs fs;
		snprintf(there, sizeof there, "/proc/%ld/root/proc", (long)pid);
		if (statfs(there, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)
			return ym_err_set(e, 1, "process %ld runs in another mount namespace (a "
			       "container?) where %s does not exist and no /proc is mounted, "
			       "through which ymtop brings the agent in; mount /proc there, "
			       "or copy libymagent.so into it and set YM_AGENT to its path "
			       "there", (long)pid, agent);
		return 1;
	}
	if (!S_ISREG(in.st_mode))
		return ym_err_set(e, 1, "the agent %s is not a regular file", agent);
	return 0;
}

/* Why a process could make no segment in its /dev/shm, as far as we can
 * tell from outside: one clause for a message. */
static const char *shm_dir_trouble(pid_t pid)
{
	static char why[256];
	char dir[64];
	struct statvfs vfs;
	snprintf(dir, sizeof dir, "/proc/%ld/root%s", (long)pid, YM_SHM_DIR);
	if (statvfs(dir, &vfs) != 0) {
		if (errno == ENOENT)
			return "it has no " YM_SHM_DIR " (a container without one: mount a "
			       "tmpfs there, e.g. docker run --tmpfs /dev/shm)";
		snprintf(why, sizeof why, "cannot look at its %s (%s); see its stderr",
			 YM_SHM_DIR, strerror(errno));
		return why;
	}
	if (vfs.f_flag & ST_RDONLY)
		return "its " YM_SHM_DIR " is read-only (mount it writable, e.g. "
		       "docker run --tmpfs /dev/shm, or podman --shm-size)";
	if (vfs.f_bavail == 0 || vfs.f_favail == 0)
		return "its " YM_SHM_DIR " is full (enlarge it, e.g. docker run "
		       "--shm-size=256m)";
	return "see its stderr (YM_DISABLE set, or /dev/shm refused the segment)";
}

/* No segment: load the agent into the running process, then open the
 * segment its constructor created (inside dlopen, so it exists when the
 * injector returns).  0, or -1 with e set. */
static int inject(pid_t pid, const struct proc_info *pi, struct shm_reader *r,
		  struct ym_err *e)
{
	char err[512];
	char agent[PATH_MAX], why[512];
	struct inject_result res;
	target_agent_path(agent, sizeof agent);
	char glibc_agent[PATH_MAX];
	snprintf(glibc_agent, sizeof glibc_agent, "%s", agent);
	inject_agent_for(pid, agent, sizeof agent);   /* musl: its own agent */
	/* A static program: say so before the agent file is even looked
	 * for, since no agent can go in. */
	char cvis[FMT_VIS_SIZE(sizeof pi->comm)];
	if (inject_libc_refusal(pid, fmt_vis(pi->comm, cvis, sizeof cvis), agent,
				why, sizeof why) != 0)
		return ym_err_set(e, 1, "%s", why);
	struct stat st;
	char there[PATH_MAX + 64];
	snprintf(there, sizeof there, "/proc/%ld/root%s", (long)pid, agent);
	if (strcmp(agent, glibc_agent) != 0 && stat(agent, &st) != 0 &&
	    stat(there, &st) != 0)
		return ym_err_set(e, 1, "pid %ld is a musl program (%s): it takes the "
				  "musl agent %s, which is missing (%s); build it (make "
				  "build/libymagent-musl.so, with musl-tools) or preload it",
				  (long)pid, cvis, agent, strerror(errno));
	int bring = check_agent_visible(pid, agent, e);
	if (bring < 0)
		return -1;
	double t0 = clock_mono_s();
	int ir = inject_agent(pid, agent, bring, &res, why, sizeof why);
	if (ir < 0) {
		/* Another ymtop may have injected it meanwhile: then attach. */
		if (segment_open(r, pi, pi->uid, err, sizeof err) == 0)
			return 0;
		if (res.dormant)
			return ym_err_set(e, 1, "%s", why);
		int maps = proc_maps_agent(pid);
		if (maps > 0 && (maps & PROC_HAS_AGENT))
			return ym_err_set(e, 1, "process %ld runs the agent but has sampled nothing yet "
				"(its segment comes with its first sample); starting it "
				"failed: %s", (long)pid, why);
		return ym_err_set(e, 1, "%s", why);
	}
	int rc = -ENOENT;
	for (int i = 0; i < 400 && rc == -ENOENT; i++) {
		rc = segment_open(r, pi, pi->uid, err, sizeof err);
		if (rc == -ENOENT) {
			struct timespec ts = { 0, 5000000 };
			nanosleep(&ts, NULL);
		}
	}
	char vis[FMT_VIS_SIZE(sizeof pi->comm)];
	if (rc == -ENOENT)
		return ym_err_set(e, 1, "process %ld (%s) loaded the agent but created no segment: %s",
			(long)pid, fmt_vis(pi->comm, vis, sizeof vis), shm_dir_trouble(pid));
	double t1 = clock_mono_s();
	if (getenv("YM_INJECT_VERBOSE") && ir == 1)
		fprintf(stderr, "ymtop: another ymtop loaded the agent into process "
			"%ld meanwhile\n", (long)pid);
	else if (getenv("YM_INJECT_VERBOSE"))
		fprintf(stderr, "ymtop: loaded %s into process %ld: thread %ld paused "
			"%.2f ms (%d stops), segment after %.2f ms\n", agent, (long)pid,
			(long)res.tid, res.pause_ms, res.attempts,
			(t1 - t0) * 1e3);
	if (rc != 0)
		return ym_err_set(e, 1, "pid %ld: %s", (long)pid, err);
	return 0;
}

/* Remove the stale segment under pi's name, saying so in one line (why,
 * and the reader's complaint when there is one): -ENOENT, as if it had
 * none. */
static int remove_stale(const struct proc_info *pi, const char *complaint,
			const char *why)
{
	char path[128], err[256];
	int gone = segment_path(pi, path, sizeof path, err, sizeof err) == 0 &&
		   unlink(path) == 0;
	const char *name = strrchr(path, '/');
	char vis[FMT_VIS_SIZE(256)];
	fprintf(stderr, "ymtop: process %ld: the segment %s is stale (%s%s%s)%s\n",
		(long)pi->pid, name ? name + 1 : path, why, complaint ? ": " : "",
		complaint ? fmt_vis(complaint, vis, sizeof vis) : "",
		gone ? "; removed it" : "; cannot remove it");
	return -ENOENT;
}

/* A segment under pi's name that this ymtop cannot read (code rc, err
 * says why): stale, whatever it holds, when the process does not map it
 * (a dead process's of another layout, or not a segment at all), and then
 * removed: -ENOENT.  One it maps, or whose mapping cannot be told, is its
 * writer's: rc. */
static int unreadable(const struct proc_info *pi, int rc, const char *err)
{
	char path[128], why[256];
	struct stat st;
	if (segment_path(pi, path, sizeof path, why, sizeof why) != 0 ||
	    stat(path, &st) != 0 ||
	    proc_maps_file(pi->pid, (uint64_t)st.st_dev, (uint64_t)st.st_ino) != 0)
		return rc;
	return remove_stale(pi, err, "its process does not map it");
}

/* Open the process's segment if it has one that its writer still writes;
 * a stale one (the writer exec'd a program without the agent, or died and
 * left its pid to another process) is removed where we may, and is then
 * as good as none: -ENOENT.  A process that exec'd a program that has the
 * agent too (LD_PRELOAD kept: the new image maps the agent, or will) gets
 * a new segment from the new image's constructor: that moment is waited
 * for (2 s at most). */
static int open_live(pid_t pid, const struct proc_info *pi, struct shm_reader *r,
		     char *err, size_t len)
{
	enum proc_writer w = WRITER_LIVE;
	struct ym_header h;
	for (int tries = 0;; tries++) {
		int rc = segment_open(r, pi, pi->uid, err, len);
		if (rc == -EPROTO || rc == -ENODATA)
			return unreadable(pi, rc, err);
		if (rc != 0)
			return rc;
		rc = shm_header_read(r, &h, err, len);
		if (rc != 0) {
			shm_reader_close(r);
			return rc == -EPROTO || rc == -ENODATA ? unreadable(pi, rc, err) : rc;
		}
		w = proc_writer(pid, h.start_ticks, r->dev, r->ino);
		/* Gone, or exiting (the agent marked it): its final state. */
		if (w == WRITER_LIVE || w == WRITER_GONE ||
		    (w == WRITER_EXECED && (h.flags & YM_FLAG_EXITED)))
			return 0;
		shm_reader_close(r);
		if (w != WRITER_EXECED || tries >= 200)
			break;
		/* The new image is settled when the loader has mapped libc;
		 * without the agent then, it will not have it. */
		int maps = proc_maps_agent(pid);
		if (maps >= 0 && (maps & PROC_HAS_LIBC) && !(maps & PROC_HAS_AGENT))
			break;
		if (maps < 0 && proc_preloads_agent(pid) != 1)
			break;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	return remove_stale(pi, NULL, proc_writer_why(w));
}

/* -1 with e set when pid names no process with a heap of its own to
 * watch: ymtop itself, a kernel thread, or one thread of a process. */
static int not_a_target(const struct proc_info *pi, struct ym_err *e)
{
	char vis[FMT_VIS_SIZE(sizeof pi->comm)];
	const char *name = fmt_vis(pi->comm, vis, sizeof vis);
	if (pi->tgid == getpid())
		return ym_err_set(e, 1, "pid %ld is this ymtop itself: ymtop watches the heap of "
			"another process", (long)pi->pid);
	if (pi->kthread)
		return ym_err_set(e, 1, "process %ld (%s) is a kernel thread: it runs no program "
			"in user space and has no heap to watch", (long)pi->pid, name);
	if (pi->tgid != pi->pid) {
		struct proc_info owner;
		char ovis[FMT_VIS_SIZE(sizeof owner.comm)];
		int known = proc_read(pi->tgid, &owner) == 0;
		return ym_err_set(e, 1, "%ld is the id of a thread (%s) of process %ld%s%s%s, whose "
			"threads share one heap: watch it with -p %ld", (long)pi->pid,
			name, (long)pi->tgid, known ? " (" : "",
			known ? fmt_vis(owner.comm, ovis, sizeof ovis) : "",
			known ? ")" : "", (long)pi->tgid);
	}
	return 0;
}

int target_attach(pid_t pid, struct shm_reader *r, struct ym_err *e)
{
	char err[512];
	struct proc_info pi;
	int rc = proc_read(pid, &pi);
	if (rc == -ENOENT) {
		/* Gone, but a segment kept with YM_KEEP_SEGMENT=1 still tells
		 * its final state (ours only, unless we are root). */
		uid_t own = geteuid() == 0 ? (uid_t)-1 : geteuid();
		char name[48], path[128];
		struct proc_info self;
		proc_read(getpid(), &self);
		shm_name(name, sizeof name, pid, self.pidns);
		snprintf(path, sizeof path, "%s%s", YM_SHM_DIR, name);
		if (shm_reader_open_path(r, path, pid, pid, own, err, sizeof err) == 0)
			return 0;
		/* An agent that could not read /proc (a bare root) names its
		 * segment without its namespace. */
		shm_name(name, sizeof name, pid, 0);
		snprintf(path, sizeof path, "%s%s", YM_SHM_DIR, name);
		if (shm_reader_open_path(r, path, pid, pid, own, err, sizeof err) == 0)
			return 0;
		return ym_err_set(e, 1, "no process with pid %ld", (long)pid);
	}
	if (rc != 0)
		return ym_err_set(e, 1, "cannot read /proc/%ld: %s", (long)pid, strerror(-rc));
	if (not_a_target(&pi, e) != 0)
		return -1;
	if (geteuid() != 0 && pi.uid != geteuid())
		return ym_err_set(e, 1, "process %ld belongs to another user (uid %u); run ymtop as "
		       "that user or as root", (long)pid, (unsigned)pi.uid);
	rc = open_live(pid, &pi, r, err, sizeof err);
	if (rc == -ENOENT && proc_gone(&pi))
		return ym_err_set(e, 1, "process %ld has exited (its parent has not reaped it) and "
			"left no segment: nothing to report; YM_KEEP_SEGMENT=1 keeps "
			"a process's segment for a report after its exit", (long)pid);
	if (rc == -ENOENT)
		return inject(pid, &pi, r, e);
	if (rc != 0)
		return ym_err_set(e, 1, "pid %ld: %s", (long)pid, err);
	return 0;
}

int target_open(pid_t pid, struct shm_reader *r, char *err, size_t len)
{
	struct proc_info pi;
	int rc = proc_read(pid, &pi);
	if (rc != 0) {
		snprintf(err, len, "cannot read /proc/%ld: %s", (long)pid, strerror(-rc));
		return rc;
	}
	if (geteuid() != 0 && pi.uid != geteuid()) {
		snprintf(err, len, "process %ld belongs to another user", (long)pid);
		return -EACCES;
	}
	rc = open_live(pid, &pi, r, err, len);
	if (rc == -ENOENT)
		snprintf(err, len, "process %ld runs no agent", (long)pid);
	return rc;
}

const char *target_sym_root(const struct shm_reader *r)
{
	static char root[64];
	char path[64];
	struct stat ours, theirs;
	snprintf(path, sizeof path, "/proc/%ld/ns/mnt", (long)r->pid);
	proc_reads += 2;
	if (stat("/proc/self/ns/mnt", &ours) != 0 || stat(path, &theirs) != 0 ||
	    (ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev))
		return NULL;
	snprintf(root, sizeof root, "/proc/%ld/root", (long)r->pid);
	return root;
}
