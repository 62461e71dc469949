/*
 * shm: the segment's layout, its creation (agent side) and its validated,
 * copied snapshots (reader side).  The ABI itself is include/ymtop/segment.h.
 *
 * Errors: functions return 0 on success and a negative errno-style code on
 * failure; reader functions also write one human-readable line (no newline)
 * into the caller's err buffer.
 */
#ifndef YMTOP_SHM_H
#define YMTOP_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ymtop/segment.h"

struct shm_caps {
	uint32_t max_depth;
	uint32_t max_stacks;
	uint32_t max_live;      /* rounded up to a power of two by shm_layout */
	uint32_t max_threads;
};

/* Fill sections[] for caps; *total gets the segment size.  Returns 0, or
 * -EINVAL when a capacity is zero or beyond the hard limits. */
int shm_layout(struct shm_caps *caps, struct ym_section sections[YM_SEC_COUNT],
	       uint64_t *total);

/* v8's Python code table (segment.h, header.py_codes) of cap records,
 * placed at *total (a segment size from shm_layout), which grows by it;
 * cap 0 gives an empty section.  -EINVAL beyond YM_LIMIT_PYCODES. */
int shm_layout_pycodes(uint32_t cap, struct ym_section *sec, uint64_t *total);
/* v8: the trend section (segment.h, Trend) of `slots` records of
 * `stacks` points each, appended at *total (a whole number of pages, as
 * shm_layout leaves it), which grows by its size.  slots or stacks 0, or
 * beyond the limits: no section (capacity 0, *total unchanged). */
static inline uint32_t shm_trend_stride(uint32_t stacks)
{
	return (uint32_t)(sizeof(struct ym_trend_slot) +
			  stacks * sizeof(struct ym_trend_point) + 7u) & ~7u;
}
void shm_layout_trend(uint64_t *total, uint32_t slots, uint32_t stacks,
		      struct ym_section *trend);

/* The live table's capacity that shm_layout gives max_live: the power of
 * two at least as large. */
uint32_t shm_live_capacity(uint32_t max_live);

/* The segment's name, "/ymtop-<pid>" or "/ymtop-<pid>.<pidns>" (segment.h,
 * YM_PIDNS_INIT), into buf (at least 32 bytes).  pid as seen in the pid
 * namespace pidns (0: unknown, taken as the initial one). */
void shm_name(char *buf, size_t len, pid_t pid, uint32_t pidns);
/* The inverse: 0 and *pid, *pidns when name (without the slash) is a
 * segment's name, -1 otherwise. */
int shm_parse_name(const char *name, pid_t *pid, uint32_t *pidns);

/* Bytes the live table takes in the segment of a snapshot's header. */
static inline uint64_t shm_live_bytes(const struct ym_header *h)
{
	return (uint64_t)h->sections[YM_SEC_LIVE].capacity *
	       h->sections[YM_SEC_LIVE].stride;
}

/* Size of one stack or alarm record for a depth: the frames, then (a
 * test build's) fields after them (segment.h, Versions and sizes).  A
 * reader takes these as the least stride it accepts. */
#ifdef YM_TEST_RECORD_TAIL
#define SHM_RECORD_TAIL YM_TEST_RECORD_TAIL
#else
#define SHM_RECORD_TAIL 0u
#endif
/* A v5 stack record (the least a reader accepts) and the v6 one, with
 * struct ym_stack_ext after the frames (what a writer lays out). */
static inline uint32_t shm_stack_stride_v5(uint32_t depth)
{
	return (uint32_t)(sizeof(struct ym_stack) + 8u * depth);
}
static inline uint32_t shm_stack_stride(uint32_t depth)
{
	return (uint32_t)(shm_stack_stride_v5(depth) +
			  sizeof(struct ym_stack_ext) + SHM_RECORD_TAIL);
}
static inline uint32_t shm_alarm_stride(uint32_t depth)
{
	return (uint32_t)(sizeof(struct ym_alarm) + 8u * depth + SHM_RECORD_TAIL);
}

/*
 * Agent side.  Create /ymtop-<pid> of `size` bytes (0600, O_EXCL,
 * O_NOFOLLOW), mapped at *map.  The file is sparse and only its header page
 * is backed: the caller backs every other page before it touches it
 * (injector/agent/backing.h), so that a full /dev/shm is an error, never SIGBUS.
 * On a kernel without MADV_POPULATE_WRITE every page is reserved here.  A
 * segment already bearing our pid (a previous image of this process before
 * exec, or a dead process whose pid we reuse) and owned by us is marked
 * exited and replaced.  Allocates no heap memory.  Returns 0 (sparse), 1
 * (every page backed) or -errno (-ENOSPC: /dev/shm is full).
 */
int shm_create(pid_t pid, uint32_t pidns, uint64_t size, void **map);
void shm_unlink_pid(pid_t pid, uint32_t pidns);
/* The segment `map` of `size` bytes, whose file `old` lost its name (an
 * exec that failed: injector/agent/seg.c), under its name again: a new
 * file with old's pages copied from map, mapped over map (MAP_FIXED: the
 * agent's pointers stay valid).  Writes other threads make into map during
 * the copy are lost.  0, or -errno (the name is then free, map unchanged). */
int shm_relink(pid_t pid, uint32_t pidns, void *map, uint64_t size, int old);

/* ---- Reader side ---- */

struct shm_reader {
	int      fd;
	int      writable;      /* control block can be written */
	/* Heap requests can be written (control.heap_request, fast_limit):
	 * the segment is open read-write; kept by a reader made read-only
	 * (the fleet), since asking changes nothing the agent measures. */
	int      may_ask;
	pid_t    pid;           /* the process as this reader sees it */
	pid_t    nspid;         /* ... and as it sees itself (header.pid) */
	uint64_t dev, ino;      /* the segment file: the writer maps it */
	uint64_t size;
	int      skip_live;     /* next snapshots leave the live table out */
	int      skip_trend;    /* ... and the trend section (trend_skipped) */
	/* The front of the segment in one read (shm_snapshot_take): the
	 * header and, where the segment lays them out within SHM_FRONT_MAX
	 * bytes of offset 0 (the agent puts them right after the header),
	 * the control block and the thread slots.  Where
	 * they were at open (every header read is checked against it) and
	 * the slots in use at the last read; zeroes: the header alone. */
	uint64_t front_ctl_end, front_thr_off;
	uint32_t front_thr_stride;
	uint64_t front_threads;
};
#define SHM_FRONT_MAX 65536u

/* A validated copy of the segment at one moment.  Every count below is
 * bounded by the capacities checked against the file size; every record
 * was checked (depths, indexes, strings) before the snapshot is returned. */
struct shm_snapshot {
	struct ym_header  hdr;
	struct ym_control ctl;
	pid_t    pid;               /* the reader's pid of the process */
	uint64_t seg_dev, seg_ino;  /* the segment file (proc_writer) */
	uint64_t taken_mono_ns;     /* reader's CLOCK_MONOTONIC */
	uint64_t taken_real_ns;
	struct ym_thread *threads;  uint32_t nthreads;
	uint8_t  *stacks;           uint32_t nstacks;  uint32_t stack_stride;
	/* Where a stack record's v6 fields are in the copy (its frames end
	 * at the deepest stack's: shorter than the segment's records); 0:
	 * where the segment has them, after max_depth frames. */
	uint32_t stack_ext_off;
	struct ym_live   *live;     uint32_t nlive;    /* compacted: used only */
	int               live_skipped;  /* reader asked not to copy it */
	uint64_t          live_count;    /* entries the stripes count */
	uint8_t  *alarms;           uint32_t nalarms;  uint32_t alarm_stride;
	struct ym_module *modules;  uint32_t nmodules;
	struct ym_pycode *pycodes;  uint32_t npycodes;  /* v8: Python code objects */
	struct ym_totals  totals;   /* exact: retired + every slot */
	/* v8: the trend slots (segment.h, Trend) that were complete and
	 * stable, trend_stride bytes each (struct ym_trend_slot), in ring
	 * order, their points checked (stacks < nstacks, count <=
	 * hdr.trend_stacks).  trend_kept: the writer keeps a trend (v8 and
	 * not turned off); 0: what ymtop knows of the past is its own. */
	uint8_t  *trend;            uint32_t ntrend;   uint32_t trend_stride;
	int       trend_kept;
	int       trend_skipped;    /* kept, not copied: the reader asked */
	/* The heap request (shm_control_heap) this snapshot's reader made
	 * for it, 0 none: header.heap.answered >= it means the figures were
	 * taken after the reader asked.  Set by the reader's owner. */
	uint64_t heap_asked;
	/* v8: the sum of the stripes' counted words (segment.h), read before
	 * the stacks; counted_known 0 for an older writer (then it tells
	 * nothing).  alarms_after: header.alarms_written read after the
	 * alarm ring's copy. */
	uint64_t counted;
	int      counted_known;
	uint64_t alarms_after;
	/* What shm_snapshot_take_since took over from the previous snapshot
	 * rather than copy it again (SHM_REUSED_*): the segment said nothing
	 * in it changed. */
	unsigned reused;
};
#define SHM_REUSED_STACKS 1u
#define SHM_REUSED_ALARMS 2u

static inline const struct ym_stack *shm_stack(const struct shm_snapshot *s,
						uint32_t i)
{
	return (const struct ym_stack *)(s->stacks + (size_t)i * s->stack_stride);
}
/* Stack i's v6 fields (segment.h, struct ym_stack_ext), or NULL when its
 * writer is older (the stride was checked to hold them when abi >= 6). */
static inline const struct ym_stack_ext *shm_stack_ext(const struct shm_snapshot *s,
						      uint32_t i)
{
	if (!ym_abi_has_stack_ext(s->hdr.abi_version))
		return NULL;
	return (const struct ym_stack_ext *)(const void *)((const uint8_t *)shm_stack(s, i) +
		(s->stack_ext_off ? s->stack_ext_off :
		 shm_stack_stride_v5(s->hdr.max_depth)));
}
/* The live samples behind stack i's peak (v7), or -1 when its writer
 * is older and did not say. */
static inline int64_t shm_stack_peak_samples(const struct shm_snapshot *s,
					     uint32_t i)
{
	const struct ym_stack_ext *x = shm_stack_ext(s, i);
	return x && ym_abi_has_peak_samples(s->hdr.abi_version) ? (int64_t)x->peak_samples : -1;
}
/* Whether the writer says anything about Python (v8): an older one's
 * header.py_* fields are unknown, not "no interpreter". */
static inline int shm_snapshot_py_known(const struct shm_snapshot *s)
{
	return ym_abi_has_python(s->hdr.abi_version);
}
/* Whether the writer says what rate was asked for and what a cost budget
 * did (v9, header.budget): an older one's fields are unknown, not "no
 * budget". */
static inline int shm_snapshot_budget_known(const struct shm_snapshot *s)
{
	return ym_abi_has_budget(s->hdr.abi_version) &&
	       s->hdr.budget.requested_rate != 0;
}
/* The rate the estimates' error is stated at: the longest in force since
 * the start or the last reset (v9; a budget may have lengthened it),
 * else the one in force. */
static inline uint64_t shm_snapshot_error_rate(const struct shm_snapshot *s)
{
	uint64_t r = s->hdr.sample_rate;
	if (shm_snapshot_budget_known(s) && s->hdr.budget.max_rate > r &&
	    s->hdr.budget.max_rate <= (1ULL << 40))
		r = s->hdr.budget.max_rate;
	return r;
}
/* Stack i's kind (YM_KIND_MALLOC before v6). */
static inline uint32_t shm_stack_kind(const struct shm_snapshot *s, uint32_t i)
{
	const struct ym_stack_ext *x = shm_stack_ext(s, i);
	return x ? x->kind : YM_KIND_MALLOC;
}
static inline const struct ym_trend_slot *shm_trend_slot(const struct shm_snapshot *s,
							 uint32_t i)
{
	return (const struct ym_trend_slot *)(const void *)(s->trend +
							    (size_t)i * s->trend_stride);
}
static inline const struct ym_alarm *shm_alarm(const struct shm_snapshot *s,
						uint32_t i)
{
	return (const struct ym_alarm *)(s->alarms + (size_t)i * s->alarm_stride);
}

/* Open the segment at path, whose header must name nspid (the process's
 * pid inside its own pid namespace; pid is the reader's for it):
 * O_NOFOLLOW, regular file, owned by `uid` or by root ((uid_t)-1 skips
 * that check), not group/world writable, size within limits.  The header
 * is validated too.  Where the path is comes from proc_segment_path. */
int shm_reader_open_path(struct shm_reader *r, const char *path, pid_t pid,
			 pid_t nspid, uid_t uid, char *err, size_t errlen);
/* The same checks on an already opened descriptor (tests, fuzzing). */
int shm_reader_open_fd(struct shm_reader *r, int fd, pid_t pid, uid_t uid,
		       char *err, size_t errlen);
void shm_reader_close(struct shm_reader *r);

/* Copy and validate.  On failure *out is left empty.  With r->skip_live
 * set, the live table (the largest section in exact mode) is not copied
 * and out->live_skipped is set. */
int shm_snapshot_take(struct shm_reader *r, struct shm_snapshot *out,
		      char *err, size_t errlen);
/* The same, taking over from prev (a snapshot of the same reader, or
 * NULL) the parts the segment says did not change since prev was taken:
 * the stacks (v8 writers: the stripes' counted words, stacks_used,
 * reset_count and the planes' words as they were) and the alarm ring
 * (alarms_written as it was, every alarm of it complete).  Those parts
 * move from prev to out (prev keeps its other fields, and NULL there); out
 * ->reused says which.  On failure prev is untouched. */
int shm_snapshot_take_since(struct shm_reader *r, struct shm_snapshot *out,
			    struct shm_snapshot *prev, char *err, size_t errlen);
/* Move back to prev what s took over from it (s->reused), when prev has
 * nothing in its place: before s is dropped unused (a caller whose prev
 * still points into those parts). */
void shm_snapshot_giveback(struct shm_snapshot *s, struct shm_snapshot *prev);
void shm_snapshot_free(struct shm_snapshot *s);

/* len bytes at off of fd (pread until done): 0, -ENODATA short, or a
 * negative errno. */
int shm_read_at(int fd, void *buf, size_t len, uint64_t off);
/* The reads shm_read_at made since the start (one a call, pread's
 * retries within it not counted): a refresh's cost in system calls. */
extern unsigned long long shm_reads;

/* Validate a header copy against the file size it came from. */
int shm_header_check(const struct ym_header *h, uint64_t file_size,
		     char *err, size_t errlen);

/* Control (shm/control.c): pause (1) or resume (0) sampling; ask for a
 * reset. */
int shm_control_pause(struct shm_reader *r, int pause);
int shm_control_reset(struct shm_reader *r);
/* Copies of the (checked) header and the control block now: 0 or a
 * negative errno. */
int shm_control_read(struct shm_reader *r, struct ym_header *h,
		     struct ym_control *c);
/* Ask the agent for new heap statistics (segment.h, control.heap_request):
 * it answers on its next slow path; 0 and *asked the request written
 * (header.heap.answered >= it answers it), -EOPNOTSUPP (a writer before
 * v6), -EPERM read-only (shm_reader.may_ask), another negative errno
 * (*asked 0). */
int shm_control_heap(struct shm_reader *r, uint64_t *asked);
/* Copy the heap block again into s (the seqcount loop of the snapshot):
 * after the agent answered a request made since s was taken.  0 or a
 * negative errno (s unchanged). */
int shm_heap_read(struct shm_reader *r, struct shm_snapshot *s);
/* header.heap.answered now, one word read (no header copy, no check: a
 * caller that asked knows the writer is v6 or later).  0 or a negative
 * errno. */
int shm_heap_answered(struct shm_reader *r, uint64_t *answered);
/* Ask the agent for a new mean sample rate (segment.h, Control): 0, or
 * -EINVAL out of [SHM_RATE_MIN, SHM_RATE_MAX] or when the agent runs in
 * exact mode, -EPERM read-only, another negative errno on I/O errors. */
#define SHM_RATE_MIN 2ULL
#define SHM_RATE_MAX (1ULL << 40)
int shm_control_rate(struct shm_reader *r, uint64_t rate);
/* Ask the agent for a cost budget of ppm millionths of the process's CPU
 * time (segment.h, Budget): 0, or -EINVAL out of [1, 1000000] or in
 * exact mode, -EOPNOTSUPP when the agent is older than v9, -EPERM
 * read-only, another negative errno on I/O errors. */
int shm_control_budget(struct shm_reader *r, uint32_t ppm);

/* A validated copy of the header now, for the fields that change (flags,
 * sample_rate, exit_mono_ns...) between snapshots: read as
 * shm_snapshot_take does and checked with shm_header_check against the
 * size the reader opened.  0, or a negative code with err filled. */
int shm_header_read(struct shm_reader *r, struct ym_header *h, char *err,
		    size_t errlen);

#endif
