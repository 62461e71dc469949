/*
 * seg: the segment's creation, activation, retirement and hand-over
 * (seg.h).
 *
 * State, this file's: the segment's state, mapping and header, the pid
 * and pid namespace it is named after, and what the agent cannot see
 * (seg_note_unseen), kept for every segment of the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "config.h"
#include "giant.h"
#include "heapstats.h"
#include "live.h"
#include "loader.h"
#include "modules.h"
#include "next.h"
#include "os.h"
#include "sampling.h"
#include "python.h"
#include "seg.h"
#include "shm.h"
#include "stale.h"
#include "table.h"
#include "threads.h"
#include "tramp.h"
#include "trend.h"

int agent_seg_state;

static uint8_t          *seg_base;
static uint64_t          seg_size;
static struct ym_header *hdr;
static pid_t    self_pid;
static uint32_t pidns;          /* our pid namespace's inode (0 unknown) */

/* The first seg_note_unseen: state 0 none, 1 being written, 2 set (then
 * why and object never change).  unseen_hdr: the header it goes into,
 * set (seq_cst) once the header is filled in, NULL in a child until its
 * own segment: a note and a creation that race both look at the other's
 * word after writing their own, so one of them writes the header. */
static int      unseen_state;
static uint32_t unseen_why;
static char     unseen_object[sizeof ((struct ym_header *)0)->unseen_object];
static struct ym_header *unseen_hdr;

static void unseen_publish(struct ym_header *h)
{
	if (!h || __atomic_load_n(&unseen_state, __ATOMIC_ACQUIRE) != 2)
		return;
	h->unseen_why = unseen_why;
	memcpy(h->unseen_object, unseen_object, sizeof unseen_object);
	__atomic_fetch_or(&h->flags, YM_FLAG_UNSEEN, __ATOMIC_RELEASE);
}

void seg_note_unseen(uint32_t why, const char *object)
{
	int expect = 0;
	if (!__atomic_compare_exchange_n(&unseen_state, &expect, 1, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;   /* the first one is named */
	unseen_why = why;
	size_t n = strnlen(object, sizeof unseen_object - 1);
	memcpy(unseen_object, object, n);
	unseen_object[n] = '\0';
	__atomic_store_n(&unseen_state, 2, __ATOMIC_SEQ_CST);
	unseen_publish(__atomic_load_n(&unseen_hdr, __ATOMIC_SEQ_CST));
}

static void read_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
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
		.max_depth = agent_cfg.max_depth,
		.max_stacks = agent_cfg.max_stacks + 1,   /* + the overflow record */
		.max_live = agent_cfg.max_live,
		.max_threads = agent_cfg.max_threads,
	};
	struct ym_section sec[YM_SEC_COUNT];
	uint64_t size;
	struct ym_section pysec;
	if (shm_layout(&caps, sec, &size) != 0 ||
	    shm_layout_pycodes(YM_DEFAULT_MAX_PYCODES, &pysec, &size) != 0)
		return -EINVAL;
	struct ym_section trend;
	shm_layout_trend(&size, agent_cfg.trend_slot_ms ? YM_TREND_SLOTS : 0,
			 YM_TREND_STACKS, &trend);
	void *map;
	pidns = read_pidns();
	stale_owner(self_pid, pidns);
	int rc = shm_create(self_pid, pidns, size, &map);
	if (rc < 0)
		return rc;

	uint8_t *b = map;
	struct ym_header *h = map;
	/* What is written now: the header (backed by shm_create), the
	 * control block, slot 0 (threads_map_segment) and the tables' first
	 * records (table_init_segment, live_init_segment).  The rest is
	 * backed when first used. */
	backing_init(b, size, rc);
	backing_mark(b, YM_HEADER_SIZE);   /* shm_create populated it */
	const struct ym_section *cs = &sec[YM_SEC_CONTROL];
	if (backing_get(b + cs->offset, cs->stride) != 0)
		goto full;
	h->abi_version = YM_ABI_VERSION;
	h->compat_version = YM_ABI_COMPAT;
	h->header_size = YM_HEADER_SIZE;
	h->total_size = size;
	h->pid = (uint32_t)self_pid;
	h->uid = (uint32_t)geteuid();
	h->start_ticks = stale_start_ticks(0);
	h->pidns = pidns;
	h->start_real_ns = agent_real_ns();
	h->start_mono_ns = agent_now_ns();
	h->sample_rate = sampling_rate();
	h->giant_bytes = agent_cfg.giant;
	h->max_depth = agent_cfg.max_depth;
	h->giant_fail = (uint32_t)agent_cfg.giant_fail;
	h->follow_fork = (uint32_t)agent_cfg.follow_fork;
	/* Injected: the data starts now (start_*_ns above are the attach). */
	h->flags = agent_injected ? YM_FLAG_INJECTED : 0;
	/* Sampling: frees count objects, not bytes, allocations objects and
	 * requested bytes, not usable bytes (hooks.c, segment.h). */
	if (!agent_exact())
		h->flags |= YM_FLAG_NO_FREED_BYTES | YM_FLAG_NO_ALLOC_BYTES;
	if (loader_blind())
		h->flags |= YM_FLAG_MODULES_AT_FORK;
	read_exe(h->exe, sizeof h->exe);
	memcpy(h->sections, sec, sizeof sec);
	h->py_codes = pysec;
	h->trend = trend;
	h->trend_slot_ns = agent_cfg.trend_slot_ms * 1000000u;
	h->trend_stacks = trend.capacity ? YM_TREND_STACKS : 0;

	seg_base = b;
	seg_size = size;
	hdr = h;
	__atomic_store_n(&unseen_hdr, h, __ATOMIC_SEQ_CST);
	unseen_publish(h);
	/* Each section to its writer (life.c has the map). */
	sampling_map_segment(b, sec);
	heapstats_map_segment(b, sec);
	table_map_segment(b, sec);
	live_map_segment(b, sec);
	giant_map_segment(b, sec);
	modules_map_segment(b, sec);
	python_map_segment(b, h);
	trend_map_segment(b);
	if (threads_map_segment(b, sec, agent_cfg.max_threads) != 0 ||
	    table_init_segment() != 0 || live_init_segment() != 0)
		goto full;
	modules_scan(1);
	/* The magic last: a reader seeing it sees a complete header. */
	__atomic_store_n(&h->magic, YM_MAGIC, __ATOMIC_RELEASE);
	backing_created();
	return 0;
full:
	/* Threads in the creation window may have taken pointers into it
	 * (heapstats_poked, slow paths counting meanwhile): the range stays
	 * mapped, private, empty and never read again, so that a late read
	 * or write there harms nothing (it crashed one run in three of
	 * test_dev_shm_full_agent_passive_with_one_warning).  The file goes. */
	if (os_map(map, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
	    MAP_FAILED)
		os_unmap(map, size);
	shm_unlink_pid(self_pid, pidns);
	seg_base = NULL;
	hdr = NULL;
	__atomic_store_n(&unseen_hdr, NULL, __ATOMIC_SEQ_CST);
	return -ENOSPC;
}

/* The process the agent's state belongs to: set by the constructor and
 * after fork.  A vfork child (or posix_spawn's) shares our memory but runs
 * no atfork handler: its allocations before its exec or _exit must not
 * make the parent's segment in its own name (it would mark it exited and
 * unlink it at its _exit, and the parent would write into a segment
 * nobody can find). */
static pid_t owner_pid;
/* 1 in a fork child (seg_fork_child): its agent was not injected into it. */
static int forked;

static void seg_exit_status_init(void);
/* The trampoline entry the on_exit handler was registered through, when
 * injected (tramp.h: glibc cannot unregister it, and the agent may be
 * unloaded). */
static void *exit_entry;

void seg_note_owner(void)
{
	owner_pid = getpid();
	seg_exit_status_init();
}

/* A vfork child: its calls pass through. */
static int in_vfork_child(void)
{
	return owner_pid && getpid() != owner_pid;
}

int seg_in_vfork_child(void)
{
	return in_vfork_child();
}

int seg_prepare(void)
{
	if (in_vfork_child())
		return -1;
	int expect = SEG_NONE;
	if (!__atomic_compare_exchange_n(&agent_seg_state, &expect, SEG_CREATING,
					 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return -1;
	agent_configure();
	if (agent_cfg.disabled) {
		__atomic_store_n(&agent_seg_state, SEG_PASSIVE, __ATOMIC_RELEASE);
		return -1;
	}
	self_pid = getpid();
	loader_probe();   /* before any fork: for a child's walks (loader.h) */
	/* free's gate before the first fast free: set for every free in
	 * exact mode and under another allocator (the gate invariant,
	 * live.h).  Giant requests leave the fast paths from now on. */
	live_init_gate(agent_exact(), agent_next.glibc_usable);
	giant_arm();
	heapstats_arm(agent_giant_limit);
	__atomic_store_n(&agent_seg_state, SEG_PRE, __ATOMIC_RELEASE);
	/* Made at once: injected into this process (ymtop -p waits for it;
	 * not in its fork children, which are mostly a shell's commands
	 * about to exec: made when first needed, as preloaded), exact mode
	 * (every call is a sample), kept for a report after exit, or asked
	 * for.  (Or a sample of a mapping made before this first call waits:
	 * the caller asks hooks_mmap.h.) */
	return (agent_injected && !forked) || agent_exact() ||
	       agent_cfg.keep_segment || agent_cfg.early_segment;
}

/* A sample waits for the segment (seg_want): atomic. */
static int wanted;

void seg_want(void)
{
	__atomic_store_n(&wanted, 1, __ATOMIC_RELAXED);
	heapstats_pre_wake();
}

int seg_wanted(void)
{
	return __atomic_load_n(&wanted, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_PRE;
}

int seg_start(int calls_out)
{
	int expect = SEG_PRE;
	/* The state first: a thread in the creation window comes here at
	 * each call, and getpid is a system call. */
	if (!calls_out ||
	    __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_PRE ||
	    in_vfork_child() ||
	    !__atomic_compare_exchange_n(&agent_seg_state, &expect, SEG_CREATING,
					 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return agent_active();
	int rc = -1;
	threads_init();
	if (table_init_private(agent_cfg.max_stacks) != 0 ||
	    live_init_private(agent_cfg.max_live, agent_exact(),
			      agent_next.glibc_usable) != 0) {
		agent_warn("cannot map private tables; ", "profiling off", NULL);
		goto passive;
	}
	rc = segment_create();
	if (rc < 0) {
		agent_warn("cannot create the shared segment in /dev/shm (",
			   agent_errno_text(-rc), "); profiling off, the program runs on");
		goto passive;
	}
	threads_publish_pre(&agent_tls);
	heapstats_arm(agent_giant_limit);
	__atomic_store_n(&wanted, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&agent_seg_state, SEG_ACTIVE, __ATOMIC_RELEASE);
	/* Stale segments are collected at the first sample (stale.h):
	 * a short process that never samples (a shell's /bin/true) pays
	 * none of those system calls. */
	/* Attached to a running process: what it allocated before is in the
	 * allocator's statistics only; the first report shows it at once.
	 * The injector borrowed a thread outside the allocator (heapstats.h).
	 * A preloaded process has nothing yet: its readers ask. */
	if (agent_injected && !forked)
		heapstats_poll(1);
	return SEG_STARTED;
passive:
	threads_drop_pre();   /* every call passes through from now on */
	__atomic_store_n(&agent_seg_state, SEG_PASSIVE, __ATOMIC_RELEASE);
	return 0;
}

void seg_fork_child(int follow)
{
	owner_pid = getpid();
	forked = 1;
	__atomic_store_n(&wanted, 0, __ATOMIC_RELAXED);
	stale_fork_child();
	heapstats_fork_child();   /* its threshold is in the parent's segment */
	if (seg_base)
		os_unmap(seg_base, seg_size);
	seg_base = NULL;
	hdr = NULL;
	__atomic_store_n(&unseen_hdr, NULL, __ATOMIC_SEQ_CST);
	/* A detached agent's children stay detached. */
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_DETACHED)
		__atomic_store_n(&agent_seg_state, follow ? SEG_NONE : SEG_PASSIVE,
				 __ATOMIC_RELEASE);
}

/* Detach (detach.c): no slow path samples, counts or makes a segment from
 * now on (SEG_DETACHED); the segment's name goes, its memory stays until
 * seg_unmap (a thread still inside a slow path may write there).  The
 * exit handler's trampoline entry returns at once.  Returns 1 when there
 * was a segment.  Guard held. */
int seg_detach(void)
{
	int was = __atomic_exchange_n(&agent_seg_state, SEG_DETACHED,
				      __ATOMIC_SEQ_CST);
	if (was == SEG_PRE || was == SEG_CREATING)
		threads_drop_pre();
	if (exit_entry)
		tramp_point("on_exit", tramp_ret());
	if (was != SEG_ACTIVE || !seg_base || self_pid != getpid())
		return 0;
	shm_unlink_pid(self_pid, pidns);
	return 1;
}

/* The agent is being unloaded (its destructor, run by dlclose after
 * detach): no thread can reach its code or its segment any more. */
void seg_unmap(void)
{
	if (seg_base && self_pid == getpid())
		os_unmap(seg_base, seg_size);
	seg_base = NULL;
	hdr = NULL;
	__atomic_store_n(&unseen_hdr, NULL, __ATOMIC_SEQ_CST);
}

/* 1 once our on_exit handler is registered (seg_exit_status_init). */
static int exit_handler_armed;

/* The process is leaving (exit, or _exit which runs no destructors).
 * Only the process that created the segment may retire it: a vfork child
 * shares our memory but not our pid.  in_exit: called from our destructor,
 * that is from exit(), whose handlers include ours (record_exit_status):
 * when that one is still to run it publishes YM_FLAG_EXITED itself, after
 * the status, so that a reader that sees the flag sees the status.  (A
 * preloaded agent registers its handler before __libc_start_main
 * registers _dl_fini, so the destructors run first; dlopen'ed, the other
 * way round.) */
static int exit_flag_owed;

static void publish_exited(void)
{
	__atomic_fetch_or(&hdr->flags, YM_FLAG_EXITED |
			  (agent_cfg.keep_segment ? YM_FLAG_KEPT : 0), __ATOMIC_RELEASE);
}

static void exiting(int in_exit)
{
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    self_pid != getpid())
		return;
	if (!hdr->exit_mono_ns)
		hdr->exit_mono_ns = agent_now_ns();
	if (in_exit && exit_handler_armed &&
	    __atomic_load_n(&hdr->exit_how, __ATOMIC_RELAXED) == YM_EXIT_UNKNOWN)
		exit_flag_owed = 1;
	else
		publish_exited();
	/* Keep the mapping: destructors that run after us still allocate. */
	if (!agent_cfg.keep_segment)
		shm_unlink_pid(self_pid, pidns);
}

void agent_exiting(void)
{
	exiting(0);
}

void agent_exiting_in_exit(void)
{
	exiting(1);
}

/* exec (hooks_exec.h): the name goes before the call, so that an image
 * without the agent leaves nothing behind (the kernel unmaps the segment;
 * a reader holding it sees its writer gone: the process no longer maps
 * it).  Only the segment's process (not a vfork child), and not a kept
 * one.  The name's file must be ours: its header our pid and start. */
int seg_exec_begin(void)
{
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    agent_cfg.keep_segment || self_pid != getpid())
		return -1;
	struct agent_tls *t = &agent_tls;
	int saved = errno;
	agent_guard_enter(t);
	char name[48];
	shm_name(name, sizeof name, self_pid, pidns);
	int fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	struct ym_header h;
	if (fd >= 0 &&
	    (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
	     h.magic != YM_MAGIC || h.pid != (uint32_t)self_pid ||
	     h.start_real_ns != hdr->start_real_ns || shm_unlink(name) != 0)) {
		close(fd);
		fd = -1;
	}
	agent_guard_leave(t);
	errno = saved;
	return fd;
}

/* The exec returned: it failed, and the process goes on with its segment,
 * which gets its name back (shm_relink).  If that fails too the agent
 * writes on into a segment nobody can find (ymtop -p says the process has
 * no segment), and says so once. */
void seg_exec_failed(int fd)
{
	if (fd < 0)
		return;
	struct agent_tls *t = &agent_tls;
	int saved = errno;
	agent_guard_enter(t);
	int rc = shm_relink(self_pid, pidns, seg_base, seg_size, fd);
	close(fd);
	if (rc < 0)
		agent_warn("cannot name the segment again after a failed exec (",
			   agent_errno_text(-rc), "); ymtop cannot find it");
	agent_guard_leave(t);
	errno = saved;
}

/* glibc's on_exit() handler (seg_exit_status_init): the status the
 * process gave exit(), into header.exit_how and exit_status (segment.h
 * v6), so that ymtop's final report says how the process ended.  Written
 * before YM_FLAG_EXITED is published with release (here, when our
 * destructor ran first and left the flag to us: exiting()), so a reader
 * that sees the flag sees the status.  _exit, _Exit and signals run no
 * handler: the fields stay YM_EXIT_UNKNOWN (ymtop reads a zombie's status
 * from /proc instead).  A forked child inherits the handler: only the
 * process whose segment this is writes it (agent_exiting's rule). */
static void record_exit_status(int status, void *arg)
{
	(void)arg;
	if (__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    self_pid != getpid())
		return;
	__atomic_store_n(&hdr->exit_status, (uint32_t)status, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->exit_how, YM_EXIT_STATUS, __ATOMIC_RELAXED);
	if (exit_flag_owed) {
		exit_flag_owed = 0;
		publish_exited();
	}
}

/* Record exit()'s status in the header at exit (glibc's on_exit): from
 * the constructor (guard held), never from a call of the program's.
 * on_exit takes glibc's lock on the exit handlers, and atexit holds that
 * lock while it allocates their next block: a segment made by that
 * allocation's sample, registering its handler there, hung the process
 * (gcc's cc1 did; test_lazy).  It fails only out of memory: the status
 * stays unknown.  A fork child inherits the handler. */
static void seg_exit_status_init(void)
{
	int fresh = 0;
	void *e = agent_injected ?
		tramp_entry("on_exit", (void *)record_exit_status, &fresh) : NULL;
	if (e && !fresh) {
		/* An earlier agent of this process registered the entry. */
		exit_entry = e;
		exit_handler_armed = 1;
		return;
	}
	void (*fn)(int, void *) = record_exit_status;
	if (e)
		*(void **)&fn = e;
	else if (agent_injected)
		tramp_refused();   /* the handler would outlive the agent */
	exit_handler_armed = on_exit(fn, NULL) == 0;
	if (e && exit_handler_armed)
		exit_entry = e;
	else if (e)
		tramp_point("on_exit", tramp_ret());
}

/* The process is about to take the effective uid `euid` (setuid and its
 * kin): hand it the segment first, while we may still chown, so that the
 * process can unlink it at exit and its new owner's ymtop can read it (a
 * daemon started as root whose workers run as nobody).  Called again with
 * the old uid when the change failed. */
void agent_owner_change(uid_t euid)
{
	if (euid == (uid_t)-1 ||
	    __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) != SEG_ACTIVE ||
	    self_pid != getpid() || geteuid() == euid)
		return;
	char name[48];
	shm_name(name, sizeof name, self_pid, pidns);
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct stat st;
	/* Only our own segment: the name could have been replaced. */
	if (fstat(fd, &st) == 0 && st.st_size == (off_t)seg_size &&
	    fchown(fd, euid, (gid_t)-1) == 0)
		__atomic_store_n(&hdr->uid, (uint32_t)euid, __ATOMIC_RELAXED);
	close(fd);
}
