/*
 * stale: segments whose process is gone (stale.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt.h"
#include "kmsg.h"
#include "proc.h"
#include "report/report.h"
#include "session.h"
#include "shm.h"
#include "stale.h"

const char *stale_dir(void)
{
	static char dir[PATH_MAX];
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	if (xdg && xdg[0] == '/')
		snprintf(dir, sizeof dir, "%s/ymtop", xdg);
	else if (home && home[0] == '/' && strcmp(home, "/") != 0)
		snprintf(dir, sizeof dir, "%s/.local/state/ymtop", home);
	else
		snprintf(dir, sizeof dir, "/var/tmp/ymtop");
	return dir;
}

/* mkdir -p path, the last levels 0700. */
static int make_dir(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* The final report of the segment open in r (its process is gone) into
 * stale_dir(): 0 and its path in out, or -1 with one line in err. */
static int keep_report(struct shm_reader *r, const struct ym_header *h,
		       char *out, size_t outlen, char *err, size_t errlen)
{
	struct session s;
	if (session_adopt(&s, r) != 0) {
		snprintf(err, errlen, "cannot start the symbolizer");
		shm_reader_close(r);
		return -1;
	}
	s.symbol_wait_s = 0;   /* no debuginfod wait for a dead process */
	int rc = session_refresh(&s, 0, err, errlen);
	if (rc == 0 && make_dir(stale_dir()) != 0) {
		snprintf(err, errlen, "cannot make %s: %s", stale_dir(), strerror(errno));
		rc = -1;
	}
	if (rc == 0) {
		char name[64];
		const char *exe = strrchr(h->exe, '/');
		exe = exe ? exe + 1 : h->exe;
		/* Only a file name's characters, whatever the segment says. */
		size_t n = 0;
		for (; exe[n] && n < 40 && n < sizeof h->exe; n++)
			name[n] = (exe[n] == '.' && n == 0) || exe[n] < 0x21 ||
				  exe[n] > 0x7e || exe[n] == '/' ? '_' : exe[n];
		name[n] = '\0';
		snprintf(out, outlen, "%s/%s-%u-%llu.txt", stale_dir(),
			 n ? name : "process", (unsigned)h->pid,
			 (unsigned long long)(h->start_real_ns / 1000000000ULL));
		struct report_opts ro = { .format = REPORT_TEXT };
		rc = report_save(out, &s.model, s.sym, &ro, err, errlen);
	}
	session_close(&s);
	return rc;
}

/* The pid namespaces some process is in now (root: every process's
 * /proc/PID/ns/pid is readable), built at the first question.  A name
 * with a namespace nobody is in any more (a container that is gone, its
 * /dev/shm shared with ours) has no writer.  full: too many to tell. */
struct nsset {
	uint32_t v[4096];
	int n, built, full;
};

static int ns_alive(struct nsset *s, uint32_t ns)
{
	if (!s->built) {
		s->built = 1;
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			if (e->d_name[0] < '1' || e->d_name[0] > '9')
				continue;
			char path[64];
			struct stat st;
			snprintf(path, sizeof path, "/proc/%.20s/ns/pid", e->d_name);
			if (stat(path, &st) != 0 || st.st_ino > UINT32_MAX)
				continue;
			int seen = 0;
			for (int i = 0; i < s->n && !seen; i++)
				seen = s->v[i] == (uint32_t)st.st_ino;
			if (seen)
				continue;
			if (s->n == (int)(sizeof s->v / sizeof *s->v)) {
				s->full = 1;
				break;
			}
			s->v[s->n++] = (uint32_t)st.st_ino;
		}
		if (d)
			closedir(d);
		else
			s->full = 1;
	}
	if (s->full)
		return 1;
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == ns)
			return 1;
	return 0;
}

/* How a process that did not exit ended, as far as the kernel log says
 * (kmsg.h): killed by the OOM killer, not by it, or not known and why. */
static const char *gone_how(pid_t pid, const struct ym_header *h,
			    uint32_t own_ns, char *buf, size_t len)
{
	char why[256];
	long tck = sysconf(_SC_CLK_TCK);
	if ((own_ns ? own_ns : YM_PIDNS_INIT) != YM_PIDNS_INIT) {
		snprintf(why, sizeof why, "the kernel log names the pids of the "
			 "initial pid namespace, not of ours");
	} else if (tck <= 0 || h->start_ticks > UINT64_MAX / 1000000u) {
		snprintf(why, sizeof why, "its start time is not known");
	} else {
		uint64_t at = 0;
		switch (kmsg_oom_killed(pid, h->start_ticks * 1000000u / (uint64_t)tck,
					&at, why, sizeof why)) {
		case KMSG_OOM_YES:
			snprintf(buf, len, "it was killed by the OOM killer (the kernel "
				 "log, %.1f s after boot)", (double)at / 1e6);
			return buf;
		case KMSG_OOM_NO:
			return "it ended without exiting: a signal or _exit, not the OOM "
			       "killer (the kernel log since it started names no OOM "
			       "kill of it)";
		case KMSG_OOM_UNKNOWN:
			break;
		}
	}
	snprintf(buf, len, "it ended without exiting: a signal or _exit; whether "
		 "the OOM killer took it is not known: %s", why);
	return buf;
}

int stale_sweep(void)
{
	uint32_t own_ns = proc_pidns(0);
	uid_t me = geteuid();
	DIR *d = opendir(YM_SHM_DIR);
	if (!d)
		return 0;
	int removed = 0, seen = 0;
	static struct nsset nss;
	memset(&nss, 0, sizeof nss);
	struct dirent *e;
	while ((e = readdir(d)) != NULL && seen < 64) {
		pid_t pid;
		uint32_t ns;
		if (shm_parse_name(e->d_name, &pid, &ns) != 0)
			continue;
		/* Another pid namespace's (a container sharing our /dev/shm):
		 * its writer is gone with the namespace only (root looks). */
		int foreign = (ns ? ns : YM_PIDNS_INIT) !=
			      (own_ns ? own_ns : YM_PIDNS_INIT);
		if (foreign && (me != 0 || !ns || ns_alive(&nss, ns)))
			continue;
		char path[PATH_MAX], err[512];
		snprintf(path, sizeof path, "%s/%s", YM_SHM_DIR, e->d_name);
		struct shm_reader r;
		if (shm_reader_open_path(&r, path, pid, pid, me == 0 ? (uid_t)-1 : me,
					 err, sizeof err) != 0)
			continue;
		struct ym_header h;
		if (shm_header_read(&r, &h, err, sizeof err) != 0 ||
		    (h.flags & YM_FLAG_KEPT)) {
			shm_reader_close(&r);
			continue;
		}
		enum proc_writer w = foreign ? WRITER_GONE :
			proc_writer(pid, h.start_ticks, r.dev, r.ino);
		if (w != WRITER_GONE && w != WRITER_REUSED) {
			shm_reader_close(&r);
			continue;
		}
		struct proc_info pi;
		if (!foreign && w == WRITER_GONE && proc_read(pid, &pi) == 0) {
			/* A zombie: its parent may still want to look. */
			shm_reader_close(&r);
			continue;
		}
		seen++;
		char report[PATH_MAX + 128];
		int kept = keep_report(&r, &h, report, sizeof report, err, sizeof err);
		char vis[FMT_VIS_SIZE(sizeof h.exe)];
		h.exe[sizeof h.exe - 1] = '\0';
		char howbuf[400];
		const char *how = foreign ? "its pid namespace (a container) is gone" :
			h.flags & YM_FLAG_EXITED ? "it exited" :
			gone_how(pid, &h, own_ns, howbuf, sizeof howbuf);
		if (kept != 0) {
			fprintf(stderr, "ymtop: process %ld (%s) is gone (%s); its segment %s "
				"is kept: cannot write its final report: %s\n", (long)pid,
				fmt_vis(h.exe, vis, sizeof vis), how, path, err);
			continue;
		}
		if (unlink(path) != 0) {
			fprintf(stderr, "ymtop: process %ld (%s) is gone (%s); final report "
				"in %s; cannot remove its segment %s: %s\n", (long)pid,
				fmt_vis(h.exe, vis, sizeof vis), how, report, path,
				strerror(errno));
			continue;
		}
		removed++;
		fprintf(stderr, "ymtop: process %ld (%s) is gone (%s); removed its "
			"segment %s; final report in %s\n", (long)pid,
			fmt_vis(h.exe, vis, sizeof vis), how, path, report);
	}
	closedir(d);
	return removed;
}
