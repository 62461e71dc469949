/*
 * model: ymtop's data, knowing nothing of curses or output formats.
 *
 * A model holds the latest validated snapshot of a segment and what is
 * derived from it: per-stack estimates, rates against the previous
 * snapshot, growth against a mark, and a sorted, filtered view.  Views and
 * reports read it; only model_* functions change it.
 *
 * The model is pure data: it reads no file, no /proc, no terminal.  What
 * is known about the running process (alive, its name, its threads' names)
 * comes in as struct model_facts from the session (session.h), which
 * reads /proc through proc.h.
 */
#ifndef YMTOP_MODEL_H
#define YMTOP_MODEL_H

#include <stdint.h>

#include "model/cgroup.h"
#include "proc.h"
#include "shm.h"
#include "trend.h"

enum model_sort {
	SORT_RETAINED = 0,   /* estimated live bytes */
	SORT_PERCENT,        /* same order as retained */
	SORT_GROWTH,         /* retained change since the mark */
	SORT_ALLOCATED,      /* estimated total bytes allocated */
	SORT_RATE,           /* allocation rate, bytes/s */
	SORT_LIVE,           /* estimated live objects */
	SORT_AVG,            /* average allocation size */
	SORT_AGE,            /* age of the oldest live sample */
	SORT_PEAK,           /* peak retained (since the mark when marked) */
	SORT_SHORT,          /* bytes/s allocated in short-lived blocks
				(model/shortlived.h) */
	SORT_RESIDENT,       /* retained bytes in RAM (tui/resident.h) */
	SORT_FUNCTION,       /* display frame name (needs a key callback) */
	SORT_TREND,          /* the trend's rate, bytes/s (model/trend.h) */
	SORT_COUNT
};

/* The length of a thread name the facts carry (/proc's comm fits). */
#define MODEL_THREAD_NAME 64

/* What the session learned about the process right after a snapshot. */
struct model_facts {
	/* The process that wrote the segment still runs and still maps it
	 * (not after its pid went to another process, nor after it exec'd a
	 * program without the agent), and the agent has not marked it
	 * exited.  name and age_s count only when alive. */
	int      alive;
	struct proc_info proc;       /* its /proc/PID/stat and status */
	char     name[64];           /* proc_display_name */
	double   age_s;              /* proc_age_s: seconds it has run */
	/* Indexed like the snapshot's thread slots: /proc's name of each
	 * slot's thread when the slot has none of its own ("" otherwise);
	 * NULL or fewer entries than slots: none.  Copied. */
	const char (*thread_names)[MODEL_THREAD_NAME];
	uint32_t nthread_names;
	/* Once not alive: how it ended (PROC_EXIT_*: the zombie's status from
	 * /proc, else what the agent recorded at exit()), with the status or
	 * signal number in exit_value. */
	int      exit_how;
	int      exit_value;
	int      execed;      /* not alive: it exec'd a program without the
				 agent (no exit, nothing held) */
};

struct model_stack {
	uint32_t id;                 /* index in the segment */
	uint32_t depth;
	const uint64_t *frames;      /* into the snapshot; innermost first */
	double   retained_bytes;
	double   retained_objects;
	double   alloc_bytes;
	double   alloc_objects;
	double   alloc_rate;         /* bytes/s since the previous snapshot
				      * (the first: since the agent started);
				      * 0 once the target is gone */
	double   growth;             /* retained_bytes minus its value at mark */
	uint64_t alloc_samples;
	uint64_t free_samples;
	/* The samples behind retained_bytes: alloc_samples - free_samples
	 * (the same counters), at most UINT32_MAX. */
	uint32_t live_samples;
	uint64_t oldest_birth_ns;    /* CLOCK_MONOTONIC; 0 when none live */
	uint64_t first_mono_ns;
	uint32_t tid;
	/* The segment's record in the snapshot (as frames): its lifetime
	 * histogram, model_life. */
	const struct ym_stack *rec;
	uint32_t kind;               /* YM_KIND_* (malloc before ABI v6) */
	/* The agent's peak of retained_bytes since its start or last reset
	 * (0 before ABI v6) and when (CLOCK_MONOTONIC, 0 unknown); never
	 * below retained_bytes (the agent's may lag by a step, segment.h:
	 * then it is retained_bytes, at the agent's time of its peak).
	 * peak_samples: the live samples behind it (-1: a writer before v7
	 * did not say). */
	double   peak_bytes;
	uint64_t peak_mono_ns;
	int64_t  peak_samples;
	/* The relative standard errors of retained_bytes and of the peak the
	 * screen shows (model_peak), model_rel_error's. */
	double   retained_err, peak_err;
	/* Since the mark (when marked): the highest retained_bytes seen in
	 * the snapshots since the mark, or the agent's peak if that moved
	 * after the mark (then it was reached after the mark), whichever is
	 * higher.  A peak reached and left between two snapshots before the
	 * agent's peak moved is not seen: the agent keeps one peak only. */
	double   peak_since_mark;
	int64_t  peak_since_mark_samples;
	/* Of retained_bytes, what is in RAM and in swap, from the live
	 * samples' pages (tui/resident.h: each sample's weight_bytes times
	 * the share of its pages present, or swapped); valid when the
	 * model's resident_known. */
	double   resident_bytes, swapped_bytes;
	struct model_trend trend;    /* over the last hour (model/trend.h) */
};

/* Where the model's trends come from. */
enum model_trend_source {
	MODEL_TREND_AGENT = 0,   /* the agent's trend section (ABI v8) */
	MODEL_TREND_OWN,         /* this ymtop's snapshots since it started */
};
struct trend_own;

struct model {
	struct shm_snapshot snap;    /* owned */
	int      have_snap;
	struct model_stack *stacks;  /* nstacks entries, index == id */
	uint32_t nstacks;
	uint32_t capstacks;          /* room in stacks and order: reused by
				      * the next snapshot when it fits */
	uint32_t *order;             /* sorted, filtered view of stacks */
	uint32_t norder;

	struct ym_totals totals;     /* exact, from thread slots */
	double   retained_bytes;     /* sum of stack estimates, kind malloc */
	double   retained_objects;
	double   mmap_retained_bytes; /* sum of stack estimates, kind mmap */
	/* The process's peaks (ABI v6; 0 before), the agent's: the malloc
	 * family's retained estimate, and tracked mmap's, with their times
	 * (CLOCK_MONOTONIC), since the start or the last reset; never below
	 * retained_bytes and mmap_retained_bytes (as a stack's peak_bytes). */
	double   peak_retained_bytes, mmap_peak_bytes;
	uint64_t peak_mono_ns, mmap_peak_mono_ns;
	uint64_t samples;            /* sum over stacks */
	struct { double objects, bytes; } life[YM_LIFE_BUCKETS]; /* all stacks */
	/* As alloc_rate: per second since the previous snapshot (the first:
	 * since the agent started), 0 once the target is gone. */
	double   alloc_bytes_rate, alloc_calls_rate;
	double   free_bytes_rate, free_calls_rate;
	double   interval_s;         /* between the last two snapshots */

	struct proc_info proc;       /* model_facts.proc */
	int      alive;              /* model_facts.alive */
	char   (*thread_names)[MODEL_THREAD_NAME]; /* model_facts' copy */
	uint32_t nthread_names;
	char     name[64];           /* model_name */
	uint64_t proc_start_mono_ns; /* the process's start on our clock, 0
					unknown: model_uptime */
	int      execed;             /* model_facts.execed */
	int      exit_how;           /* PROC_EXIT_*, kept once known */
	int      exit_value;
	/* What the agent cannot see (tui/unseen.h), set by the session after
	 * each update: one line ("" nothing) and the allocator's name for
	 * labels ("" none). */
	char     unseen[320];
	char     unseen_allocator[16];
	/* Why the allocator's figures are not current (model_heap_current),
	 * set by the session: the process answered no request and no thread
	 * could be borrowed, and why ("" when current or not known). */
	char     heap_why[320];
	/* Resident per stack (tui/resident.h), set by the session after each
	 * update: 1 when the stacks' resident_bytes and swapped_bytes, and
	 * the sums below (per kind: [YM_KIND_MALLOC], [YM_KIND_MMAP]), were
	 * read from /proc/PID/pagemap; 0 with the reason in resident_why. */
	int      resident_known;
	char     resident_why[160];
	double   resident_sum[2], swapped_sum[2];
	/* The process's cgroup (model/cgroup.h), set by the session after
	 * each update while the process runs; kept once it has exited. */
	struct model_cgroup cgroup;


	/* Previous snapshot and mark, indexed by stack id. */
	double  *prev_alloc;  uint32_t nprev;
	struct ym_totals prev_totals;
	uint64_t prev_mono_ns;
	double  *mark_retained; uint32_t nmark;
	double  *mark_peak_seen, *mark_agent_peak;   /* nmark entries each */
	double  *mark_peak_seen_samples;             /* nmark entries */
	int      marked;
	uint64_t mark_mono_ns;
	double   mark_total;
	/* Trends (model/trend.h): the retained bytes of the stacks whose
	 * verdict is growing and how many they are; the source; ymtop's own
	 * history (an agent keeping none) and its slot (0: 10 s). */
	double   growing_bytes;
	uint32_t ngrowing;
	int      trend_source;       /* enum model_trend_source */
	struct trend_own *trend_own;
	uint64_t trend_own_slot_ns;
	/* What a report writer derived per stack and keeps across snapshots
	 * (the exposition's labels, report/prometheus.c), its own to check
	 * against its keys; model_free calls cache_free on it. */
	void    *cache;
	void   (*cache_free)(void *cache);
};

/* Bucket b of the stack's lifetime histogram (segment.h's life[]): the
 * estimated blocks freed with a lifetime in the bucket, and their bytes;
 * 0 for a stack without a record.  Read from the snapshot rather than
 * kept in model_stack: 192 bytes a stack. */
struct model_life {
	double objects, bytes;
};
struct model_life model_life(const struct model_stack *s, int b);

void model_init(struct model *m);
void model_free(struct model *m);

/* Take ownership of snap (left empty) and derive everything, with what
 * the session knows of the process (facts, not kept).  0, or -1 when out of
 * memory: then snap is still the caller's. */
int model_update_facts(struct model *m, struct shm_snapshot *snap,
		       const struct model_facts *facts);
/* The same for a process not seen running (a segment read post mortem,
 * tests, fuzzing): no facts, not alive. */
int model_update(struct model *m, struct shm_snapshot *snap);

/* The target's pid as ymtop sees it (the host's, for a process in a
 * container; the segment's header has the one it sees itself). */
static inline pid_t model_pid(const struct model *m)
{
	return m->snap.pid ? m->snap.pid : (pid_t)m->snap.hdr.pid;
}

/* What the agent's header says, for report/ and screen/, which never read
 * the header: these and the model's fields are the whole of it. */
/* The executable's path the agent read at its start: the target's bytes,
 * escaped by whoever prints it; "" when the agent could not read it. */
#define MODEL_EXE_SIZE sizeof(((struct ym_header *)0)->exe)
static inline const char *model_exe(const struct model *m)
{
	return m->snap.hdr.exe;
}
/* The process's pid inside its own pid namespace (model_pid's when the
 * same). */
static inline uint32_t model_ns_pid(const struct model *m)
{
	return m->snap.hdr.pid;
}
/* The agent's mean sampling interval in bytes; 1: exact mode. */
static inline uint64_t model_sample_rate(const struct model *m)
{
	return m->snap.hdr.sample_rate;
}
/* The agent was loaded into the running process (ymtop -p): its exact
 * counters start at the attach. */
static inline int model_injected(const struct model *m)
{
	return (m->snap.hdr.flags & YM_FLAG_INJECTED) != 0;
}
/* The module list is as at a fork: objects loaded since are not in it
 * (YM_FLAG_MODULES_AT_FORK). */
static inline int model_modules_at_fork(const struct model *m)
{
	return (m->snap.hdr.flags & YM_FLAG_MODULES_AT_FORK) != 0;
}
/* The stack table's records in use and its capacity, the record that
 * counts what a full table turns away left out of both. */
static inline uint64_t model_stacks_used(const struct model *m)
{
	return m->snap.hdr.stacks_used ? m->snap.hdr.stacks_used - 1 : 0;
}
static inline uint32_t model_stacks_capacity(const struct model *m)
{
	return m->snap.hdr.sections[YM_SEC_STACKS].capacity - 1;
}
/* What the agent dropped, by reason (segment.h, header.drop_*). */
struct model_drops {
	uint64_t stacks, live, busy, threads, modules;
};
static inline struct model_drops model_drops(const struct model *m)
{
	const struct ym_header *h = &m->snap.hdr;
	struct model_drops d = { h->drop_stacks, h->drop_live, h->drop_busy,
				 h->drop_threads, h->drop_modules };
	return d;
}
/* Giant allocations the agent recorded (ALARMS), and the size that makes
 * one (YM_GIANT_BYTES). */
static inline uint64_t model_alarms_written(const struct model *m)
{
	return m->snap.hdr.alarms_written;
}
static inline uint64_t model_giant_bytes(const struct model *m)
{
	return m->snap.hdr.giant_bytes;
}
/* The bytes of the live table's entries in use (what a copy costs). */
static inline uint64_t model_live_bytes(const struct model *m)
{
	return shm_live_bytes(&m->snap.hdr);
}
/* A reading of the agent's CLOCK_MONOTONIC as seconds since the epoch,
 * from the clocks it read together at its start. */
static inline double model_real_s(const struct model *m, uint64_t mono_ns)
{
	const struct ym_header *h = &m->snap.hdr;
	double off = ((double)mono_ns - (double)h->start_mono_ns) / 1e9;
	return (double)h->start_real_ns / 1e9 + off;
}
/* The writer knows the process's peaks (peak_retained_bytes and kin;
 * 0 there when not). */
static inline int model_has_peaks(const struct model *m)
{
	return ym_abi_has_peaks(m->snap.hdr.abi_version);
}
/* The writer tracks anonymous mappings (mmap_retained_bytes; unknown,
 * not 0, when not). */
static inline int model_tracks_mmap(const struct model *m)
{
	return m->have_snap && ym_abi_tracks_mmap(m->snap.hdr.abi_version);
}

/* Set the mark: growth and peak_since_mark are measured from now. */
void model_mark(struct model *m);

/* Sort descending by key (ascending when asc), keeping only stacks for which
 * keep(ctx, stack) is non-zero (keep NULL: all with any allocation).  name
 * gives the text key for SORT_FUNCTION (may be NULL). */
typedef int (*model_keep_fn)(void *ctx, const struct model_stack *s);
typedef const char *(*model_name_fn)(void *ctx, const struct model_stack *s);
void model_sort(struct model *m, enum model_sort key, int asc,
		model_keep_fn keep, model_name_fn name, void *ctx);

/* The value a sort key orders by (for columns and tests). */
double model_key(const struct model *m, const struct model_stack *s,
		 enum model_sort key);

/* Estimates and their uncertainty (man ymtop(1), ESTIMATES).  A block of
 * usable size u is sampled with p(u) = 1 - exp(-u/R) and weighs u/p(u)
 * bytes, so an estimate carried by n samples of blocks of one size has
 * the relative standard error sqrt((1 - p) / n); u is solved from the
 * samples' mean weight (bytes / n) and the segment's rate R.  0 in exact
 * mode (R = 1), and for no bytes; 1 for bytes without samples. */
double model_rel_error(const struct model *m, double bytes, int64_t n);
/* A figure carried by fewer than MODEL_FEW_SAMPLES samples whose
 * relative error is MODEL_FEW_ERROR or more: the screen and the text
 * report mark it with MODEL_FEW_MARK.  n < 0 (unknown): never. */
#define MODEL_FEW_SAMPLES 3
#define MODEL_FEW_ERROR   0.25
#define MODEL_FEW_MARK    "?"
int model_few(const struct model *m, double bytes, int64_t n);
/* Whether s's retained bytes, and the peak the screen shows, are marked;
 * the live samples behind that peak (-1 unknown). */
int model_retained_few(const struct model *m, const struct model_stack *s);
int model_peak_few(const struct model *m, const struct model_stack *s);
int64_t model_peak_samples(const struct model *m, const struct model_stack *s);
/* What sorts rank by: model_key, but a marked figure (retained, percent,
 * live objects, peak) ranks at the lower end of its one-standard-error
 * interval, key x (1 - error), so that an estimate carried by one or two
 * samples never ranks above a well-sampled one of about its size; ties
 * go by model_key. */
double model_rank(const struct model *m, const struct model_stack *s,
		  enum model_sort key);

/* Age in ns of the stack's oldest live sample at snapshot time (0: none). */
/* The stack's peak the screen shows: since the mark when marked, else
 * the agent's since its start or last reset. */
double model_peak(const struct model *m, const struct model_stack *s);
uint64_t model_oldest_age(const struct model *m, const struct model_stack *s);

/* Seconds the process has run, at snapshot time (or until it exited):
 * from its own start time once seen alive, else from the agent's. */
double model_uptime(const struct model *m);
/* The thread slots count freed bytes (exact mode, or a writer before v6);
 * 0 when sampling, where frees count objects only and what is in use is
 * the allocator's (model_heap). */
int model_freed_bytes_counted(const struct model *m);
/* 1 when the exact counters' allocated minus freed is a net change since
 * the attach, not what is in use: frees count bytes and ymtop loaded the
 * agent, so the frees of blocks allocated before the attach are counted
 * while their allocations never were (the figure is negative when the
 * program frees more of its older memory than it allocates).  What is in
 * use then is the allocator's (model_heap, model_in_use). */
int model_counted_net(const struct model *m);
/* 0 when the threads' alloc_bytes are not counted (sampling: only
 * allocated objects and requested bytes are, YM_FLAG_NO_ALLOC_BYTES). */
int model_alloc_bytes_counted(const struct model *m);
/* The allocated bytes the agent counts in t (the process's totals or a
 * thread's): usable sizes when counted, else the requested sizes, which
 * are always exact (what JSON's allocated_bytes_kind names). */
uint64_t model_alloc_bytes(const struct model *m, const struct ym_totals *t);
/* The allocator's statistics (segment.h, struct ym_heapstats), NULL when
 * the agent published none; *age_s: 0 when they are current (below),
 * else how old they were at the snapshot. */
const struct ym_heapstats *model_heap(const struct model *m, double *age_s);
/* 1 when the allocator's statistics describe the heap at the snapshot:
 * they answer this reader's own request for it (snap.heap_asked), or no
 * allocator call completed since they were taken (the agent's call count
 * then, YM_HEAP_CALLS, is not below the snapshot's: in use is exact; free
 * and mapped may have moved with the allocator's purging).  0: they are
 * old, shown with their age and never used as current. */
int model_heap_current(const struct model *m);

/* The heap in use, from the best source there is: the allocator's own
 * statistics (any age), else the agent's exact counters when frees count
 * bytes and the agent ran from the process's start (not injected).  1 and
 * *bytes, or 0 when nothing says it. */
int model_in_use(const struct model *m, double *bytes);
/* The allocator's name for a YM_HEAP_* kind ("glibc", "jemalloc"...). */
const char *model_heap_allocator(uint32_t kind);

/* Why the allocator's statistics are missing, as the agent said (v8,
 * header.heap.none_why): a clause ("musl's allocator keeps none") and,
 * with key, its JSON word ("musl"); NULL when they are present or the
 * reason is not known (a v7 agent, or not asked yet). */
const char *model_heap_missing(const struct model *m, const char **key);

/* The process has exited (or its pid went to another; not when it exec'd
 * a program without the agent): this model holds its final state, what
 * was still held at exit. */
int model_exited(const struct model *m);

/* How it ended, for reports: "exit status 3", "killed by signal 9
 * (SIGKILL)", "unknown"; into buf, returned. */
const char *model_exit_text(const struct model *m, char *buf, size_t len);

/* Some allocator calls of the process do not reach the agent
 * (YM_FLAG_UNSEEN): the one line that says which and why, into buf
 * (the object's name as the target wrote it: escape it for the output),
 * returned; NULL when the agent sees every call.  *object and *why, when
 * not NULL, get the object's name (the executable's path for the
 * executable) and a one-word reason for labels. */
const char *model_unseen(const struct model *m, char *buf, size_t len,
			 const char **object, const char **why);
#define MODEL_UNSEEN_LEN 768   /* the line with the longest exe path */

/* Python frames (v8): the one line that says the stacks of a CPython
 * process have native frames only, and why (an interpreter version whose
 * layout the agent does not know, or whose objects did not match it),
 * into buf, returned; NULL when Python frames are recorded, when the
 * process runs no CPython, or when its agent is older than v8. */
const char *model_python_note(const struct model *m, char *buf, size_t len);

/* The CPython the agent found in the process (v8): seen 0 when none was
 * seen or the agent is older; version is Py_Version (0: before 3.11),
 * frames whether Python frames are recorded, codes the code objects
 * copied, dropped the Python frames left out. */
struct model_python {
	int      seen, frames;
	uint32_t version, codes;
	uint64_t dropped;
	/* The pymalloc wrapper (segment.h YM_PYHOOK_*; UNKNOWN from an
	 * agent before v9) and its name: "waiting", "pending", "installed",
	 * "malloc" (not needed), "off", "none"; NULL when not known. */
	uint32_t pymalloc;
	const char *pymalloc_name;
};
struct model_python model_python(const struct model *m);
#define MODEL_PYTHON_LEN 192

/* Sampling and the cost budget (v9, header.budget): known 0 when the
 * agent is older (then only effective is known: the rate in force).
 * requested the rate asked for (YM_SAMPLE_RATE, ymtop --rate), effective
 * the one in force, at or above it when a budget lengthened it, longest
 * the longest in force since the start or the last reset (the error of
 * the estimates is stated at it);
 * budget_percent 0 when no budget is set; adjustments its changes of the
 * rate; spent_ns the agent's time on its sampled paths over cpu_ns of the
 * process's CPU time (the windows judged), window_* those of the last
 * window, window_ms its length. */
struct model_sampling {
	int      known;
	uint64_t requested, effective, longest;
	double   budget_percent;
	uint32_t window_ms;
	uint64_t adjustments;
	uint64_t spent_ns, cpu_ns, window_spent_ns, window_cpu_ns;
};
struct model_sampling model_sampling(const struct model *m);
/* The line that says what the budget did, into buf: "budget 2% of CPU:
 * rate 64 KiB (asked 4 KiB), 0.9% last window, 12 changes"; NULL when
 * there is no budget or the agent is older. */
const char *model_budget_text(const struct model *m, char *buf, size_t len);
#define MODEL_BUDGET_LEN 160

/* Samples the agent took and could not count (drop_live: the live
 * table was full; drop_busy: its lock was taken): the retained figures,
 * the process's and the stacks', are short of their bytes.  The one line
 * that says so, into buf, returned; NULL when every sample counts.
 * *live and *busy, when not NULL, get the two counts. */
const char *model_uncounted(const struct model *m, char *buf, size_t len,
			    uint64_t *live, uint64_t *busy);
#define MODEL_UNCOUNTED_LEN 256

/* Agent state word: "sampling", "paused", "exited". */
const char *model_state(const struct model *m);

/* The name the process was started as, for display and file names: its
 * comm (the basename of the path it was exec'ed by, not of the symlink's
 * target that header.exe holds), completed from argv[0] when the kernel
 * truncated it to 15 characters; read while the target runs and kept
 * after it exits; the basename of header.exe when never seen alive. */
const char *model_name(const struct model *m);

/* A thread slot's state word: "live", "exited", "shared", "free".  A slot
 * still marked live is "exited" once the process is gone. */
const char *model_thread_state(const struct model *m, const struct ym_thread *t);
/* A thread's name into buf: the one kept at its exit, else the facts'
 * (/proc's while the target runs), else "".  t is one of m->snap.threads.
 * Returns buf. */
const char *model_thread_name(const struct model *m, const struct ym_thread *t,
			      char *buf, size_t len);
/* Reports list a slot unless it is free, or the shared slot 0 that
 * counted nothing. */
int model_thread_listed(const struct ym_thread *t);

#endif
