/*
 * libymagent life cycle and slow paths: configuration, the segment,
 * thread slots, fork/exec/exit, modules, alarms and sampling.
 *
 * Guest code: no stdio, no output on stdout, no exit.  Every failure makes
 * the agent passive (calls pass straight through) after at most one line on
 * stderr.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "backing.h"
#include "got.h"
#include "sample.h"
#include "unwind.h"
#include "shm.h"

struct agent agent;
__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));
size_t agent_giant_limit = SIZE_MAX;

static pthread_key_t thread_key;
static int thread_key_ok;

uint64_t agent_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One line on stderr, written with write(2): no stdio, no allocation. */
static void warn(const char *a, const char *b, const char *c)
{
	char buf[256];
	size_t n = 0;
	const char *parts[] = { "ymagent: ", a, b, c, "\n" };
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		for (const char *s = parts[i]; s && *s && n < sizeof buf - 1; s++)
			buf[n++] = *s;
	ssize_t w = write(STDERR_FILENO, buf, n);
	(void)w;
}

/* An errno's text for warn: never strerror, which translates, and
 * gettext may allocate under a lock its caller holds (a postmaster hung
 * for good in bindtextdomain this way).  strerrordesc_np is English,
 * static, and takes no lock. */
static const char *errno_text(int e)
{
	const char *d = strerrordesc_np(e);
	return d ? d : "unknown error";
}

static void utoa(uint64_t v, char *buf)   /* buf >= 21 bytes */
{
	char tmp[21];
	int n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
}

/* ---- Configuration ---- */

/* Strict unsigned parse with an optional k/m/g binary suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	unsigned shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	}
	if (*p == 'i' && shift)
		p++;
	if ((*p == 'b' || *p == 'B') && shift)
		p++;
	if (*p != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

static uint64_t env_num(const char *name, uint64_t def, uint64_t lo,
			uint64_t hi)
{
	const char *s = getenv(name);
	uint64_t v;
	if (!s || !*s)
		return def;
	if (parse_size(s, &v) == 0 && v >= lo && v <= hi)
		return v;
	char d[21];
	utoa(def, d);
	warn(name, " is not a valid value (see ymagent(7)); using ", d);
	return def;
}

static int env_bool(const char *name, int def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true"))
		return 1;
	if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "false"))
		return 0;
	warn(name, " must be 0 or 1; using ", def ? "1" : "0");
	return def;
}

static void configure(void)
{
	if (agent.configured)
		return;
	agent.configured = 1;
	agent.disabled = env_bool("YM_DISABLE", 0);
	agent.rate = env_num("YM_SAMPLE_RATE", YM_DEFAULT_SAMPLE_RATE, 1,
			     1ULL << 40);
	agent.max_depth = (uint32_t)env_num("YM_MAX_DEPTH", YM_DEFAULT_MAX_DEPTH,
					    1, YM_LIMIT_DEPTH);
	/* The segment holds one more record: the overflow stack. */
	agent.max_stacks = (uint32_t)env_num("YM_MAX_STACKS",
					     YM_DEFAULT_MAX_STACKS, 16,
					     YM_LIMIT_STACKS - 1);
	agent.max_live = (uint32_t)env_num("YM_MAX_LIVE",
					   agent.rate == 1 ? YM_DEFAULT_MAX_LIVE_EXACT
							   : YM_DEFAULT_MAX_LIVE,
					   64, YM_LIMIT_LIVE);
	agent.max_threads = (uint32_t)env_num("YM_MAX_THREADS",
					      YM_DEFAULT_MAX_THREADS, 16,
					      YM_LIMIT_THREADS);
	agent.giant = env_num("YM_GIANT_BYTES", YM_DEFAULT_GIANT_BYTES, 1,
			      UINT64_MAX);
	const char *act = getenv("YM_GIANT_ACTION");
	agent.giant_fail = 0;
	if (act && *act) {
		if (!strcmp(act, "fail"))
			agent.giant_fail = 1;
		else if (strcmp(act, "report") != 0)
			warn("YM_GIANT_ACTION", " must be report or fail; using ",
			     "report");
	}
	agent.follow_fork = env_bool("YM_FOLLOW_FORK", 1);
	agent.seed = env_num("YM_SEED", 0, 0, UINT64_MAX);
	agent.keep_segment = env_bool("YM_KEEP_SEGMENT", 0);
}

/* ---- Resolution of the next definitions ---- */

int agent_resolve(void)
{
	if (__atomic_load_n(&agent.resolved, __ATOMIC_ACQUIRE))
		return 1;
	/* dlsym may allocate: the caller's guard sends that to the
	 * bootstrap buffer. */
	struct agent_real r;
	/* Preloaded: the next definition after us.  Injected: the process's
	 * global definition, what the GOT slots we rewrite were bound to
	 * (RTLD_NEXT from a dlopen'ed object means our own dependencies). */
	void *from = agent.injected ? RTLD_DEFAULT : RTLD_NEXT;
#define NEXT(field, name) (*(void **)&r.field = dlsym(from, name))
	NEXT(malloc, "malloc");
	NEXT(free, "free");
	NEXT(calloc, "calloc");
	NEXT(realloc, "realloc");
	NEXT(posix_memalign, "posix_memalign");
	NEXT(aligned_alloc, "aligned_alloc");
	NEXT(memalign, "memalign");
	NEXT(valloc, "valloc");
	NEXT(pvalloc, "pvalloc");
	NEXT(usable, "malloc_usable_size");
#undef NEXT
	if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.usable)
		return 0;
	agent.real = r;
	/* When the next malloc is glibc's own, its usable size is one header
	 * load away (glibc's musable(): chunk size minus the size field, or
	 * minus the whole header for mmapped chunks); calling through
	 * malloc_usable_size would cost a call on every malloc and free. */
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (libc) {
		agent.glibc_usable = dlsym(libc, "malloc") == (void *)r.malloc &&
			dlsym(libc, "malloc_usable_size") == (void *)r.usable &&
			!getenv("YM_NO_GLIBC_FASTPATH");
		dlclose(libc);
	}
	__atomic_store_n(&agent.resolved, 1, __ATOMIC_RELEASE);
	return 1;
}

/* ---- Modules ---- */

static void read_build_id(const struct dl_phdr_info *info, struct ym_module *m)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			size_t name = (n->n_namesz + 3u) & ~3u;
			size_t desc = (n->n_descsz + 3u) & ~3u;
			const uint8_t *d = p + sizeof *n + name;
			if (d + desc > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(p + sizeof *n, "GNU", 4) &&
			    n->n_descsz <= sizeof m->build_id) {
				memcpy(m->build_id, d, n->n_descsz);
				m->build_id_len = n->n_descsz;
				return;
			}
			p = d + desc;
		}
	}
}

static void module_extent(const struct dl_phdr_info *info, uintptr_t *lo,
			  uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
}

/* Modules seen by the scan in progress (scan lock held). */
static uint8_t module_seen[YM_MAX_MODULES];

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t lo, hi;
	module_extent(info, &lo, &hi);
	if (lo >= hi)
		return 0;
	uintptr_t me = (uintptr_t)&module_cb;
	if (me >= lo && me < hi) {
		agent.self_lo = lo;
		agent.self_hi = hi;
	}
	if (!agent.hdr)
		return 0;
	uint64_t used = agent.hdr->modules_used;
	for (uint64_t i = 0; i < used; i++)
		if (agent.modules[i].state == YM_MODULE_LOADED &&
		    agent.modules[i].lo == lo && agent.modules[i].base == info->dlpi_addr) {
			module_seen[i] = 1;
			return 0;
		}
	if (used >= YM_MAX_MODULES) {
		__atomic_fetch_add(&agent.hdr->drop_modules, 1, __ATOMIC_RELAXED);
		return 0;
	}
	struct ym_module *m = &agent.modules[used];
	if (backing_get(m, sizeof *m) != 0) {
		__atomic_fetch_add(&agent.hdr->drop_modules, 1, __ATOMIC_RELAXED);
		return 0;
	}
	memset(m, 0, sizeof *m);
	m->base = info->dlpi_addr;
	m->lo = lo;
	m->hi = hi;
	const char *path = info->dlpi_name;
	if (!path || !*path)
		path = agent.hdr->exe;   /* the main executable */
	size_t n = strnlen(path, sizeof m->path - 1);
	memcpy(m->path, path, n);
	read_build_id(info, m);
	m->state = YM_MODULE_LOADED;
	module_seen[used] = 1;
	__atomic_store_n(&agent.hdr->modules_used, used + 1, __ATOMIC_RELEASE);
	return 0;
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *v = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
		v[0] = info->dlpi_adds;
		v[1] = info->dlpi_subs;
	}
	return 1;   /* the counters are global: the first object is enough */
}

/* Publish modules loaded since the last scan and mark those gone as
 * unloaded.  One scanner at a time; a thread that finds the scan busy
 * skips it (it never waits, so the loader's lock and ours never nest in
 * opposite orders).  force: scan even if the loader's counters did not
 * move (start-up). */
static void modules_scan(int force)
{
	unsigned long long v[2] = { 0, 0 };
	dl_iterate_phdr(counters_cb, v);
	if (!force && v[0] == agent.mod_adds && v[1] == agent.mod_subs)
		return;
	unwind_sync(v[1]);   /* an object went away: forget its rules */
	if (__atomic_exchange_n(&agent.mod_scanning, 1, __ATOMIC_ACQUIRE))
		return;
	agent.mod_adds = v[0];
	agent.mod_subs = v[1];
	memset(module_seen, 0, sizeof module_seen);
	dl_iterate_phdr(module_cb, NULL);
	uint64_t used = agent.hdr->modules_used;
	for (uint64_t i = 0; i < used; i++)
		if (!module_seen[i] && agent.modules[i].state == YM_MODULE_LOADED)
			__atomic_store_n(&agent.modules[i].state, YM_MODULE_UNLOADED,
					 __ATOMIC_RELEASE);
	__atomic_store_n(&agent.mod_scanning, 0, __ATOMIC_RELEASE);
	/* Injected: objects loaded without our dlopen hook (by the C library
	 * itself: NSS, iconv; or through dlmopen's base namespace) get their
	 * GOT patched here, at most a millisecond of samples late. */
	if (agent.injected && !force)
		got_patch_try();
}

/* On the sampled path: at most once a millisecond, see whether the loader
 * added or removed objects (dlopen, dlclose) since the last scan. */
static void modules_check(uint64_t now)
{
	if (now - __atomic_load_n(&agent.mod_checked_ns, __ATOMIC_RELAXED) < 1000000)
		return;
	__atomic_store_n(&agent.mod_checked_ns, now, __ATOMIC_RELAXED);
	modules_scan(0);
}

/* ---- Segment ---- */

static void read_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* Field 22 of /proc/<pid>/stat (pid 0: self): the start time in clock
 * ticks, which tells a reused pid apart; 0 when unreadable. */
static uint64_t read_start_ticks(pid_t pid)
{
	char buf[1024], path[40] = "/proc/self/stat";
	if (pid > 0) {
		char num[21];
		utoa((uint64_t)pid, num);
		size_t n = 0;
		for (const char *a = "/proc/"; *a; a++)
			path[n++] = *a;
		for (const char *a = num; *a; a++)
			path[n++] = *a;
		for (const char *a = "/stat"; *a; a++)
			path[n++] = *a;
		path[n] = '\0';
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
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

/* The inode of our pid namespace (segment.h, YM_PIDNS_INIT); 0 without
 * /proc, where the plain name is the best we can do. */
static uint32_t read_pidns(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) != 0 || st.st_ino > UINT32_MAX)
		return 0;
	return (uint32_t)st.st_ino;
}

static int segment_create(void)
{
	struct shm_caps caps = {
		.max_depth = agent.max_depth,
		.max_stacks = agent.max_stacks + 1,   /* + the overflow record */
		.max_live = agent.max_live,
		.max_threads = agent.max_threads,
	};
	struct ym_section sec[YM_SEC_COUNT];
	uint64_t size;
	if (shm_layout(&caps, sec, &size) != 0)
		return -EINVAL;
	void *map;
	agent.pidns = read_pidns();
	int rc = shm_create(agent.pid, agent.pidns, size, &map);
	if (rc < 0)
		return rc;

	uint8_t *b = map;
	struct ym_header *h = map;
	/* What is written now: the header (backed by shm_create), the
	 * control block, slot 0 and the tables' first records
	 * (table_init_segment).  The rest is backed when first used. */
	backing_init(b, size, rc);
	backing_mark(b, YM_HEADER_SIZE);   /* shm_create populated it */
	const struct ym_section *cs = &sec[YM_SEC_CONTROL], *ts = &sec[YM_SEC_THREADS];
	if (backing_get(b + cs->offset, cs->stride) != 0 ||
	    backing_get(b + ts->offset, ts->stride) != 0)
		goto full;
	h->abi_version = YM_ABI_VERSION;
	h->compat_version = YM_ABI_COMPAT;
	h->header_size = YM_HEADER_SIZE;
	h->total_size = size;
	h->pid = (uint32_t)agent.pid;
	h->uid = (uint32_t)geteuid();
	h->start_ticks = read_start_ticks(0);
	h->pidns = agent.pidns;
	h->start_real_ns = real_ns();
	h->start_mono_ns = agent_now_ns();
	h->sample_rate = agent.rate;
	h->giant_bytes = agent.giant;
	h->max_depth = agent.max_depth;
	h->giant_fail = (uint32_t)agent.giant_fail;
	h->follow_fork = (uint32_t)agent.follow_fork;
	/* Injected: the data starts now (start_*_ns above are the attach). */
	h->flags = agent.injected ? YM_FLAG_INJECTED : 0;
	read_exe(h->exe, sizeof h->exe);
	memcpy(h->sections, sec, sizeof sec);
	h->threads_used = 1;   /* slot 0: shared */

	agent.base = b;
	agent.size = size;
	agent.hdr = h;
	agent.ctl = (struct ym_control *)(b + sec[YM_SEC_CONTROL].offset);
	agent.threads = (struct ym_thread *)(b + sec[YM_SEC_THREADS].offset);
	table_map_segment(b, sec);
	agent.alarms = b + sec[YM_SEC_ALARMS].offset;
	agent.alarm_stride = sec[YM_SEC_ALARMS].stride;
	agent.modules = (struct ym_module *)(b + sec[YM_SEC_MODULES].offset);
	agent.threads[0].state = YM_THREAD_SHARED;

	if (table_init_segment() != 0)
		goto full;
	modules_scan(1);
	/* The magic last: a reader seeing it sees a complete header. */
	__atomic_store_n(&h->magic, YM_MAGIC, __ATOMIC_RELEASE);
	backing_created();
	return 0;
full:
	munmap(map, size);
	shm_unlink_pid(agent.pid, agent.pidns);
	agent.base = NULL;
	agent.hdr = NULL;
	return -ENOSPC;
}

static void thread_exit(void *arg);

/* Segments of processes that died without exiting (killed, exit_group)
 * stay in /dev/shm.  Remove those of our pid namespace whose writer is
 * provably gone: no process has its pid, or the one that has it started
 * at another time (a reused pid).  Ours only, or any when we are root (a
 * daemon's workers drop privileges); bounded, and never a segment kept on
 * purpose (YM_KEEP_SEGMENT marks it KEPT).  getdents64 into a buffer on
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
	_Alignas(8) char buf[2048];
	ssize_t got;
	while (removed < 64 && (got = getdents64(dfd, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < got && removed < 64;) {
			struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
			off += e->d_reclen;
			pid_t pid;
			uint32_t ns;
			if (shm_parse_name(e->d_name, &pid, &ns) != 0 ||
			    pid == agent.pid ||
			    (ns ? ns : YM_PIDNS_INIT) !=
			    (agent.pidns ? agent.pidns : YM_PIDNS_INIT))
				continue;
			int dead = kill(pid, 0) != 0 && errno == ESRCH;
			uint64_t ticks = dead ? 0 : read_start_ticks(pid);
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
			char name[48];
			shm_name(name, sizeof name, pid, ns);
			if (shm_unlink(name) == 0)
				removed++;
		}
	}
	close(dfd);
}

/* Create the segment once per process (and once per child after fork).
 * Called on a slow path with the guard held. */
static void activate(void)
{
	int expect = SEG_NONE;
	if (!__atomic_compare_exchange_n(&agent.seg_state, &expect, SEG_CREATING,
					 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	int rc = -1;
	configure();
	if (agent.disabled)
		goto passive;
	agent.pid = getpid();
	/* Exact mode: nearly every free is a sample.  Another allocator:
	 * its usable size is a call, made on free's slow path. */
	agent.filter_all = agent.rate <= 1 || !agent.glibc_usable;
	if (table_init_private() != 0) {
		warn("cannot map private tables; ", "profiling off", NULL);
		goto passive;
	}
	if (!thread_key_ok)
		thread_key_ok = pthread_key_create(&thread_key, thread_exit) == 0;
	rc = segment_create();
	if (rc < 0) {
		warn("cannot create the shared segment in /dev/shm (",
		     errno_text(-rc), "); profiling off, the program runs on");
		goto passive;
	}
	agent_giant_limit = agent.giant;
	__atomic_store_n(&agent.seg_state, SEG_ACTIVE, __ATOMIC_RELEASE);
	collect_stale();
	return;
passive:
	__atomic_store_n(&agent.seg_state, SEG_PASSIVE, __ATOMIC_RELEASE);
}

/* ---- Threads ---- */

static void fold_slot(struct ym_thread *s)
{
	struct ym_header *h = agent.hdr;
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	h->retired.alloc_objects += s->t.alloc_objects;
	h->retired.alloc_bytes += s->t.alloc_bytes;
	h->retired.req_bytes += s->t.req_bytes;
	h->retired.free_objects += s->t.free_objects;
	h->retired.free_bytes += s->t.free_bytes;
	memset(&s->t, 0, sizeof s->t);
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELEASE);
}

static struct ym_thread *slot_claim(uint32_t tid)
{
	struct ym_header *h = agent.hdr;
	struct ym_thread *s = NULL;
	if (!table_lock(100000))
		return NULL;
	uint64_t used = h->threads_used;
	if (used < agent.max_threads) {
		if (backing_get(&agent.threads[used], sizeof *s) == 0)
			s = &agent.threads[used];
	} else {
		/* Every slot taken: reuse an exited one, keeping its totals. */
		for (uint32_t n = 1; n < agent.max_threads && !s; n++) {
			uint32_t i = 1 + (agent.thread_cursor + n) % (agent.max_threads - 1);
			if (__atomic_load_n(&agent.threads[i].state, __ATOMIC_ACQUIRE) ==
			    YM_THREAD_EXITED) {
				s = &agent.threads[i];
				agent.thread_cursor = i;
				fold_slot(s);
			}
		}
	}
	if (s) {
		memset(s->name, 0, sizeof s->name);
		s->tid = tid;
		__atomic_store_n(&s->state, YM_THREAD_LIVE, __ATOMIC_RELEASE);
		if (used < agent.max_threads)
			__atomic_store_n(&h->threads_used, used + 1, __ATOMIC_RELEASE);
	}
	table_unlock();
	return s;
}

static void thread_exit(void *arg)
{
	(void)arg;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	if (t->state == TLS_OWN && t->slot && t->epoch == agent.epoch) {
		prctl(PR_GET_NAME, t->slot->name, 0, 0, 0);
		__atomic_store_n(&t->slot->state, YM_THREAD_EXITED, __ATOMIC_RELEASE);
	}
	t->slot = NULL;
	t->fast = NULL;
	t->state = TLS_DEAD;
	agent_guard_leave(t);
}

/* Slow-path entry: make sure the agent is initialized and this thread has
 * a slot (or knows it shares slot 0).  Guard held by the caller. */
static void enter(struct agent_tls *t)
{
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) == SEG_NONE)
		activate();
	if (t->epoch != agent.epoch) {   /* TLS of a pre-fork thread */
		t->slot = NULL;
		t->fast = NULL;
		t->state = TLS_NEW;
		t->plane = 0;
		t->epoch = agent.epoch;
	}
	if (t->state != TLS_NEW ||
	    __atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE)
		return;
	t->tid = (uint32_t)syscall(SYS_gettid);
	/* YM_SEED makes sampling reproducible: the n-th registered thread
	 * gets the same stream in every run. */
	t->rng = agent.seed ?
		sample_seed(agent.seed + __atomic_fetch_add(&agent.seeded, 1,
							    __ATOMIC_RELAXED)) :
		sample_seed((uint64_t)t->tid << 32 ^ agent_now_ns() ^ (uintptr_t)t);
	t->rate = __atomic_load_n(&agent.rate, __ATOMIC_RELAXED);
	t->countdown = sample_next_gap(&t->rng, t->rate);
	struct ym_thread *s = slot_claim(t->tid);
	if (!s) {
		__atomic_fetch_add(&agent.hdr->drop_threads, 1, __ATOMIC_RELAXED);
		t->state = TLS_SHARED;
		return;
	}
	t->state = TLS_OWN;
	t->slot = s;
	/* For the exit destructor; may allocate (guard held). */
	if (thread_key_ok)
		pthread_setspecific(thread_key, (void *)1);
}

/* The host's errno is the host's: a successful malloc leaves it as it was
 * (shm_open, /proc reads and friends would otherwise leak EAGAIN,
 * ENOENT... into it; found by tests/stress, stress_misc edges). */
void agent_enter(struct agent_tls *t)
{
	int saved = errno;
	enter(t);
	errno = saved;
}

/* ---- Sampling ---- */

/* Capture return addresses, innermost first, without our own frames.
 * Inlined: one frame less to step through.  The unwinder takes no lock
 * and allocates nothing (unwind.h), so a fork or a signal may come at any
 * point of it. */
static inline __attribute__((always_inline)) uint32_t
capture(uint64_t *out)
{
	uint64_t buf[YM_LIMIT_DEPTH + 16];
	int want = (int)agent.max_depth + 16;
	int n = unwind_backtrace(buf, want);
	int i = 0;
	while (i < n && buf[i] >= agent.self_lo && buf[i] < agent.self_hi)
		i++;
	uint32_t d = 0;
	for (; i < n && d < agent.max_depth; i++)
		out[d++] = buf[i];
	return d;
}

static void poll_control(void)
{
	/* A new rate (segment.h, Control): taken by the first thread that
	 * sees it, published in the header; every thread draws its next
	 * countdown with it (agent_sample).  Exact mode never changes: its
	 * tables and free path are laid out for it. */
	uint64_t want = __atomic_load_n(&agent.ctl->sample_rate, __ATOMIC_ACQUIRE);
	uint64_t rate = __atomic_load_n(&agent.rate, __ATOMIC_RELAXED);
	if (want && want != rate && rate > 1 && want >= 2 && want <= (1ULL << 40)) {
		__atomic_store_n(&agent.rate, want, __ATOMIC_RELAXED);
		__atomic_store_n(&agent.hdr->sample_rate, want, __ATOMIC_RELEASE);
	}
	uint32_t pause = __atomic_load_n(&agent.ctl->pause, __ATOMIC_ACQUIRE);
	if (pause)
		__atomic_fetch_or(&agent.hdr->flags, YM_FLAG_PAUSED, __ATOMIC_RELAXED);
	else if (__atomic_load_n(&agent.hdr->flags, __ATOMIC_RELAXED) & YM_FLAG_PAUSED)
		__atomic_fetch_and(&agent.hdr->flags, ~YM_FLAG_PAUSED, __ATOMIC_RELAXED);
	uint32_t reset = __atomic_load_n(&agent.ctl->reset_seq, __ATOMIC_ACQUIRE);
	if (reset != agent.seen_reset && table_lock(100000)) {
		if (table_reset_counters())
			agent.seen_reset = reset;
		table_unlock();
	}
}

/* The calling thread's counters for `stack`: its entry in a counter plane
 * of its own, or NULL for the stack record itself (segment.h).  The first
 * thread that samples keeps the records, so a single-threaded program
 * costs ymtop nothing more to read; the next YM_PLANES get a plane each,
 * so that threads sampling the same stacks never write the same lines. */
static struct ym_counts *own_counts(struct agent_tls *t, uint32_t stack)
{
	if (t->plane == PLANE_NONE)
		return NULL;
	struct ym_header *h = agent.hdr;
	if (t->plane == 0) {
		uint32_t n = __atomic_fetch_add(&agent.plane_next, 1, __ATOMIC_RELAXED);
		if (n == 0 || n > YM_PLANES) {
			t->plane = PLANE_NONE;
			return NULL;
		}
		t->plane = n;   /* plane n - 1, zero-filled */
		t->plane_backed = 0;
		t->plane_reset = __atomic_load_n(&h->reset_count, __ATOMIC_ACQUIRE);
		__atomic_store_n(&h->plane_epoch[n - 1], t->plane_reset,
				 __ATOMIC_RELEASE);
		uint64_t u = __atomic_load_n(&h->planes_used, __ATOMIC_RELAXED);
		while (u < n && !__atomic_compare_exchange_n(&h->planes_used, &u, n, 0,
							     __ATOMIC_RELEASE,
							     __ATOMIC_RELAXED))
			;
	}
	uint32_t p = t->plane - 1;
	uint64_t r = __atomic_load_n(&h->reset_count, __ATOMIC_ACQUIRE);
	if (r != t->plane_reset) {
		/* ymtop reset the counters: zero ours, then say whose they are
		 * (readers skip the plane meanwhile). */
		memset(table_plane_entry(p, 0), 0,
		       (size_t)t->plane_backed * sizeof(struct ym_counts));
		t->plane_reset = r;
		__atomic_store_n(&h->plane_epoch[p], r, __ATOMIC_RELEASE);
	}
	if (stack >= t->plane_backed) {
		if (backing_get(table_plane_entry(p, t->plane_backed),
				(size_t)(stack + 1 - t->plane_backed) *
				sizeof(struct ym_counts)) != 0)
			return NULL;
		t->plane_backed = stack + 1;
	}
	return table_plane_entry(p, stack);
}

void agent_sample(struct agent_tls *t, void *p, size_t n, size_t usable)
{
	int saved = errno;
	agent_guard_enter(t);
	/* This sample was drawn at t->rate: its weight says so, whatever the
	 * rate is now (ymtop --rate); the next countdown is drawn at now's. */
	uint64_t now_rate = __atomic_load_n(&agent.rate, __ATOMIC_RELAXED);
	uint64_t drawn = t->rate ? t->rate : now_rate;
	t->rate = now_rate;
	t->countdown = sample_next_gap(&t->rng, t->rate);
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE)
		goto out;
	poll_control();
	if (agent.hdr->flags & YM_FLAG_PAUSED)
		goto out;

	/* Modules first: an unload seen there flushes the unwinder's rules
	 * for its addresses before this unwind. */
	uint64_t now = agent_now_ns();
	modules_check(now);
	uint64_t frames[YM_LIMIT_DEPTH];
	uint32_t depth = capture(frames);
	struct ym_live e = {
		.addr = (uint64_t)(uintptr_t)p,
		.size = n,
		.birth_mono_ns = now,
		.tid = t->tid,
	};
	sample_weight(drawn, n, usable, &e.weight_bytes, &e.weight_fx);
	e.stack = table_intern(frames, depth, t->tid, now);
	if (e.stack == UINT32_MAX)
		goto out;
	int ok = table_live_insert(&e, 100000);
	if (ok > 0) {
		table_count_alloc(&e, own_counts(t, e.stack));
	} else if (ok < 0) {
		__atomic_fetch_add(&agent.hdr->drop_busy, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&agent.hdr->drop_live, 1, __ATOMIC_RELAXED);
		__atomic_fetch_or(&agent.hdr->flags, YM_FLAG_OVERFLOWED,
				  __ATOMIC_RELAXED);
	}
out:
	agent_guard_leave(t);
	errno = saved;
}

/* The filter said this address may be a live sample. */
void agent_free_sampled(struct agent_tls *t, void *p)
{
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE)
		return;
	/* With many live samples a filter false positive is settled without
	 * the lock; with few (and in exact mode, where nearly every free is a
	 * sample) the probe would be wasted. */
	if (agent.rate > 1 && __atomic_load_n(&agent.live_probe, __ATOMIC_RELAXED) &&
	    !table_live_has((uint64_t)(uintptr_t)p))
		return;
	agent_guard_enter(t);
	struct ym_live e;
	int found = 0;
	/* Must not give up easily: a missed removal leaves a stale entry
	 * (repaired when the address is sampled again). */
	found = table_live_remove((uint64_t)(uintptr_t)p, &e, 1000000);
	if (found)
		table_count_free(&e, agent_now_ns(), own_counts(t, e.stack));
	agent_guard_leave(t);
}

int agent_realloc_take(struct agent_tls *t, void *p, struct ym_live *e)
{
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE)
		return 0;
	int found = 0;
	agent_guard_enter(t);
	found = table_live_remove((uint64_t)(uintptr_t)p, e, 1000000);
	agent_guard_leave(t);
	return found;
}

void agent_realloc_put(struct agent_tls *t, struct ym_live *e, void *q, size_t n,
		       size_t old_usable, size_t usable)
{
	agent_guard_enter(t);
	struct ym_counts *own = own_counts(t, e->stack);
	if (q == NULL) {
		table_count_free(e, agent_now_ns(), own);
		goto out;
	}
	/* Stays sampled with the probability that keeps the sampled share of
	 * blocks of usable size u at p(u) (sample.h); then it is re-weighed
	 * at n/p(u), 1/p(u). */
	if (!sample_keep(&t->rng, agent.rate, old_usable, usable)) {
		table_count_drop(e, own);
		goto out;
	}
	uint64_t w, wfx;
	sample_weight(agent.rate, n, usable, &w, &wfx);
	table_count_resize(e, w, wfx, own);
	e->weight_fx = wfx;
	e->addr = (uint64_t)(uintptr_t)q;
	e->size = n;
	e->weight_bytes = w;
	int ok = table_live_insert(e, 1000000);
	if (ok <= 0) {   /* cannot track it any more: count it gone */
		table_count_free(e, agent_now_ns(), own);
		__atomic_fetch_add(&agent.hdr->drop_live, 1, __ATOMIC_RELAXED);
	}
out:
	agent_guard_leave(t);
}

/* ---- Giant allocations ---- */

void agent_giant(struct agent_tls *t, size_t n, int failed)
{
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE)
		return;
	int saved = errno;
	agent_guard_enter(t);
	uint64_t frames[YM_LIMIT_DEPTH];
	uint32_t depth = capture(frames);
	struct ym_header *h = agent.hdr;
	uint32_t cap = h->sections[YM_SEC_ALARMS].capacity;
	if (backing_get(agent.alarms, (size_t)cap * agent.alarm_stride) != 0)
		goto out;
	uint64_t pos = __atomic_fetch_add(&h->alarms_written, 1, __ATOMIC_ACQ_REL);
	struct ym_alarm *a = (struct ym_alarm *)(agent.alarms +
						 (size_t)(pos % cap) * agent.alarm_stride);
	__atomic_store_n(&a->seq, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	a->size = n;
	a->mono_ns = agent_now_ns();
	a->tid = t->tid ? t->tid : (uint32_t)syscall(SYS_gettid);
	a->flags = failed ? YM_ALARM_FAILED : 0;
	a->depth = depth;
	memcpy(a->frames, frames, depth * sizeof *frames);
	__atomic_store_n(&a->seq, pos + 1, __ATOMIC_RELEASE);
	modules_check(a->mono_ns);
out:
	agent_guard_leave(t);
	errno = saved;
}

/* ---- Process life ---- */

static void fork_child(void)
{
	/* Only this thread exists now.  Stop writing into the parent's
	 * segment; start a segment of our own lazily, on the next call. */
	struct agent_tls *t = &agent_tls;
	if (agent.base)
		munmap(agent.base, agent.size);
	agent.base = NULL;
	agent.hdr = NULL;
	agent_giant_limit = SIZE_MAX;
	table_reset_private();
	agent.mod_scanning = 0;
	agent.mod_checked_ns = 0;
	agent.epoch++;
	agent.seen_reset = 0;
	t->slot = NULL;
	t->fast = NULL;
	t->state = TLS_NEW;
	t->plane = 0;
	agent.plane_next = 0;
	t->epoch = agent.epoch;
	__atomic_store_n(&agent.seg_state,
			 agent.follow_fork && !agent.disabled ? SEG_NONE : SEG_PASSIVE,
			 __ATOMIC_RELEASE);
}

/* 1 when we were loaded before libc (preloaded, or a dependency the
 * program was linked with), 0 when after it (dlopen'ed), -1 unknown: the
 * loader keeps its objects in load order. */
static int loaded_before_libc(void)
{
	Dl_info info;
	struct link_map *self = NULL;
	if (!dladdr1((void *)hook_malloc, &info, (void **)&self, RTLD_DL_LINKMAP) ||
	    !self)
		return -1;
	for (const struct link_map *m = self->l_prev; m; m = m->l_prev)
		if (m->l_name && strstr(m->l_name, "/libc.so."))
			return 0;
	for (const struct link_map *m = self->l_next; m; m = m->l_next)
		if (m->l_name && strstr(m->l_name, "/libc.so."))
			return 1;
	return -1;
}

/* Loaded by ymtop -p (dlopen through ptrace) rather than preloaded: our
 * exported malloc is not the process's.  The process's malloc is not ours
 * either when the program defines it, or when it takes malloc's address
 * from non-PIC code (python3: the executable's PLT entry stands for malloc
 * then): the load order tells those apart, whatever the agent's file is
 * called (taking RTLD_DEFAULT's answer for the next malloc there would
 * make malloc call itself for ever). */
static int detect_injected(void)
{
	void *def = dlsym(RTLD_DEFAULT, "malloc");
	if (!def || def == (void *)hook_malloc)
		return 0;
	int before = loaded_before_libc();
	if (before >= 0)
		return !before;
	const char *pre = getenv("LD_PRELOAD");
	return !(pre && strstr(pre, "libymagent"));
}

__attribute__((constructor)) static void agent_init(void)
{
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	configure();
	agent.injected = detect_injected();
	/* Injected: the real functions are taken before the first patch. */
	if ((!agent.injected || got_init() == 0) && agent_resolve()) {
		pthread_atfork(NULL, NULL, fork_child);
		agent_exitstatus_init();
		agent_enter(t);
		if (agent.injected &&
		    __atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) == SEG_ACTIVE)
			got_patch_all();
	}
	agent_guard_leave(t);
}

/* The process is leaving (exit, or _exit which runs no destructors).
 * Only the process that created the segment may retire it: a vfork child
 * shares our memory but not our pid. */
void agent_exiting(void)
{
	if (__atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    agent.pid != getpid())
		return;
	agent.hdr->exit_mono_ns = agent_now_ns();
	__atomic_fetch_or(&agent.hdr->flags, YM_FLAG_EXITED |
			  (agent.keep_segment ? YM_FLAG_KEPT : 0), __ATOMIC_RELEASE);
	/* Keep the mapping: destructors that run after us still allocate. */
	if (!agent.keep_segment)
		shm_unlink_pid(agent.pid, agent.pidns);
}

/* The process is about to take the effective uid `euid` (setuid and its
 * kin): hand it the segment first, while we may still chown, so that the
 * process can unlink it at exit and its new owner's ymtop can read it (a
 * daemon started as root whose workers run as nobody).  Called again with
 * the old uid when the change failed. */
void agent_owner_change(uid_t euid)
{
	if (euid == (uid_t)-1 ||
	    __atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    agent.pid != getpid() || geteuid() == euid)
		return;
	char name[48];
	shm_name(name, sizeof name, agent.pid, agent.pidns);
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct stat st;
	/* Only our own segment: the name could have been replaced. */
	if (fstat(fd, &st) == 0 && st.st_size == (off_t)agent.size &&
	    fchown(fd, euid, (gid_t)-1) == 0)
		__atomic_store_n(&agent.hdr->uid, (uint32_t)euid, __ATOMIC_RELAXED);
	close(fd);
}

__attribute__((destructor)) static void agent_fini(void)
{
	agent_exiting();
}
