/*
 * ymtop segment ABI: the contract between libymagent.so (the writer, inside
 * the target process) and ymtop (any number of readers, outside).
 *
 * The segment is one POSIX shared-memory object, /dev/shm/ymtop-<pid> (see
 * YM_PIDNS_INIT for processes in other pid namespaces), created by the agent with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600.  Its
 * size is fixed at creation; nothing in it is ever a pointer.  Every section
 * is located through the header's section table (offset, capacity, stride),
 * so a reader never assumes a layout it has not checked.
 *
 *   offset 0            struct ym_header          (YM_HEADER_SIZE bytes)
 *   sections[CONTROL]   struct ym_control         (the only part ymtop writes)
 *   sections[THREADS]   struct ym_thread   x cap  (one cache line each)
 *   sections[STACKS]    struct ym_stack    x cap  (+ frames, see stride)
 *   sections[STRIPES]   struct ym_stripe   x cap  (each owns a part of LIVE)
 *   sections[LIVE]      struct ym_live     x cap  (a pool, shared by stripes)
 *   sections[ALARMS]    struct ym_alarm    x cap  (+ frames, ring)
 *   sections[PLANES]    struct ym_counts   x cap  (cap = planes x STACKS.cap)
 *   sections[MODULES]   struct ym_module   x cap
 *
 * Versions and sizes (the rules every change of this file keeps)
 * -----------------------------------------------------------------
 *  - header.abi_version is the version of this file the writer was built
 *    with; header.compat_version the lowest reader version that can read
 *    the segment.  A reader accepts a segment whose magic matches and
 *    whose compat_version <= its own YM_ABI_VERSION (ym_abi_readable);
 *    a newer writer keeps compat_version when its change only adds, and
 *    raises it to its own version when it changes or removes anything an
 *    older reader relies on.  Writers before these rules (v1-v4) wrote
 *    compat_version 0 (the high half of a 32-bit version); of those, v4
 *    has this exact layout and is read (YM_ABI_OLDEST), older ones not.
 *  - Additions only ever go into reserved space or at the end: of the
 *    header (header_size says how far it extends: sections start at or
 *    after it), of a record (its section's stride grows), or after the
 *    frames of a stack or alarm record (at offset sizeof(struct) + 8 *
 *    max_depth, inside the stride).  A reader reads the prefix it knows
 *    of the header and of each record, stepping by the segment's strides,
 *    and ignores the rest.  A field added in version N means something
 *    only when abi_version >= N (older writers left zeroes there).
 *  - Reserved fields and bits (reserved*, unnamed header.flags bits, the
 *    header's bytes past the last field) are zeroed by writers and ignored
 *    by readers.  A retired field becomes reserved and is never reused
 *    within the same compat_version.
 *  - Offsets, capacities, strides and counts are data, never assumed:
 *    readers check each (Readers must treat the segment as hostile, below).
 *
 * Concurrency protocol
 * --------------------
 * All fields that change after creation are read and written with the
 * __atomic builtins on naturally aligned 8- or 4-byte words, so no access
 * ever tears.  The header fields fixed at creation (magic ... sections) are
 * written before the object is made visible under its name and never change,
 * but for sample_rate (see Control below).
 *
 *  - Thread slots: each slot in use has exactly one writer, the thread that
 *    owns it, which updates its counters with relaxed loads and stores (no
 *    read-modify-write).  Slot 0 is shared (threads that could get no slot of
 *    their own) and is updated with atomic adds.  When a thread exits its
 *    slot keeps its totals (state YM_THREAD_EXITED).  A slot is reused only
 *    when every slot has been taken: then, under the agent's lock, the
 *    writer bumps header.retire_seq to odd, folds the slot into
 *    header.retired, zeroes it, and bumps retire_seq to even.  A reader that
 *    wants exact totals runs the seqcount loop (ym_seq_read_begin /
 *    ym_seq_read_retry, below) over header and threads.
 *  - Stacks: records are appended (under the agent's lock) and published by
 *    a release store of header.stacks_used after the record is complete;
 *    a reader that loads stacks_used with acquire may read records below it.
 *    A record's frames never change after publication; its counters are
 *    monotonic atomic adds.  Retained = alloc - freed.  v8: every change
 *    of counters (record or plane) is followed by an add to a stripe's
 *    counted word (struct ym_stripe), and a reset (zeroing) by the
 *    release add to reset_count: a reader that sees neither move, nor
 *    stacks_used, planes_used or plane_epoch[], has the stacks it copied.
 *  - Counter planes: a stack's counters are the sum of its record's and of
 *    its entry in each plane p < header.planes_used (entry p * STACKS.cap +
 *    stack).  A plane has one writer, a thread that owns it for life, which
 *    updates it with relaxed loads and stores, like a thread slot; so
 *    threads that sample the same stacks do not share their lines.  After a
 *    reset (header.reset_count moves) the owner zeroes its plane before it
 *    next counts and then stores header.plane_epoch[p] = reset_count: a
 *    reader adds plane p only while plane_epoch[p] == reset_count.
 *  - Live table: a pool of LIVE.capacity entries shared by STRIPES.capacity
 *    stripes (both powers of two, S stripes of P = LIVE.capacity / S
 *    entries each).  An address belongs to one stripe, chosen by the agent
 *    (readers need not know which), and stripe s owns entries j < P at
 *    ym_live_index(s, j, S): blocks of YM_LIVE_BLOCK entries, interleaved (block b of stripe s is pool block
 *    b * S + s), so that the entries stripes take first share pages, and
 *    the segment's memory grows with the live samples, not with the table.
 *    A stripe hands out its entries in order: stripe.used is how many it
 *    ever handed out, entries j >= used are untouched (holes: never read
 *    them), and an entry j < used is free when its addr is 0.  A stripe's
 *    seq is its lock and its seqcount at once: a writer makes it odd
 *    (compare-and-swap from even), changes entries, and stores the next
 *    even value with release.  A reader copies entries j < used in the
 *    seqcount loop over the stripe's seq.  count is the stripe's live
 *    entries.  The agent finds entries through a hash of its own (chains
 *    through its private words, heads in its private memory); readers
 *    ignore agent_private.
 *  - Alarms: a ring.  The writer claims position n = alarms_written++, writes
 *    record n % cap with seq = 0, fills it, then stores seq = n + 1 with
 *    release.  A reader reads alarms_written, copies the ring, reads
 *    alarms_written again, and keeps the records ym_alarm_complete
 *    accepts: complete, of the last lap, not claimed again meanwhile.
 *  - Modules: appended under the agent's lock and published by a release
 *    store of header.modules_used; a module's state moves LOADED -> UNLOADED.
 *  - Control: written by ymtop, read by the agent on its slow path only.
 *    control.sample_rate (0: no request) asks a sampling agent for a new
 *    mean rate in [2, 2^40]; exact mode (rate 1) is chosen at start and
 *    never changes, and an agent refuses a value out of range.  The agent
 *    stores the rate it applies into header.sample_rate (atomic: this one
 *    header field changes after creation) when a thread first sees the
 *    request on its slow path; each thread keeps drawing its countdown at
 *    the old rate until its next sample, and every sample is weighed with
 *    the rate its countdown was drawn with, so estimates stay unbiased
 *    across the change.  Live samples keep the weight they were drawn
 *    with.  header.sample_rate is the rate in force for new countdowns
 *    (v9: at or above the rate asked for, which a cost budget may
 *    lengthen: header.budget).
 *    control.heap_request (v6): a reader adds one to ask for the
 *    allocator's statistics; the agent takes them on a slow path within
 *    YM_HEAP_MIN_INTERVAL_NS of the last ones and publishes them in
 *    header.heap with answered = the request it saw (struct ym_heapstats).
 *    control.fast_limit (v6) is the one control word both sides write:
 *    the agent's allocation fast paths take requests below it; the agent
 *    stores its giant threshold there when the segment becomes active,
 *    and a reader that asked for statistics stores 0 after heap_request,
 *    so that the next allocation of any thread takes the slow path, which
 *    answers at its entry (before the real call) and stores the threshold
 *    back.  A quiet process answers at its next allocation.  (A reader
 *    can make calls slower this way, or with a larger value skip giant
 *    alarms: no more than it can do with pause and sample_rate.)
 *    control.max_overhead (v9; 0: no request) asks for a cost budget in
 *    millionths of CPU time (Budget below); the agent applies it at a
 *    thread's next look, and sample_rate requests set
 *    header.budget.requested_rate, the floor of header.sample_rate.
 *
 * Readers must treat the segment as hostile: check owner, mode and size,
 * magic and versions (ym_abi_readable), then every offset, capacity,
 * stride, count and index against the file size before use (shm/shm.h
 * does all of this).
 */
#ifndef YMTOP_SEGMENT_H
#define YMTOP_SEGMENT_H

#include <stdint.h>

#define YM_MAGIC        0x31474553504f544dULL /* "MTOPSEG1" little-endian */
/* v5: compat_version, the size rule, reserved fields (see above).
 * v6: header.exit_how and exit_status, YM_FLAG_NO_FREED_BYTES, header.heap
 * (the allocator's statistics), control.heap_request and fast_limit; peaks
 * (header.retained_est, peak_*; struct ym_stack_ext.peak_*), stack kinds
 * (struct ym_stack_ext.kind: mmap), header.mmap_*: additions only, compat
 * stays 5.
 * v7: additions only, compat stays 5 (each names itself "v7" where it is
 * declared).
 * v8: additions only, compat stays 5 (each names itself "v8" where it is
 * declared).
 * v9: additions only, compat stays 5 (each names itself "v9" where it is
 * declared). */
#ifndef YM_TEST_ABI_NEWER
#define YM_ABI_VERSION  9u       /* this file's version */
#define YM_ABI_COMPAT   5u       /* what its writers put in compat_version */
#define YM_HEADER_SIZE  4096u    /* header bytes this writer reserves */
#else
/* A test build only (make, test_abi.py): a writer one version ahead that
 * adds without breaking (same compat_version), with a longer header and
 * longer stack and alarm records, all filled with unknown data. */
#define YM_ABI_VERSION  10u
#define YM_ABI_COMPAT   5u
#define YM_HEADER_SIZE  8192u
#define YM_TEST_RECORD_TAIL 16u  /* bytes after a record's frames */
#endif
#define YM_ABI_OLDEST   4u       /* oldest writer (compat 0) read here */
#define YM_LIMIT_HEADER 65536u   /* header_size a reader accepts at most */
#define YM_NAME_PREFIX  "/ymtop-"           /* + decimal pid [+ "." pidns] */
/* The initial pid namespace's inode (the kernel's PROC_PID_INIT_INO):
 * segments of its processes are named /ymtop-<pid>; those of a process in
 * any other pid namespace /ymtop-<pid>.<pidns>, pid as seen inside it, so
 * that containers sharing one /dev/shm never collide. */
#define YM_PIDNS_INIT   0xeffffffcu
#define YM_SHM_DIR      "/dev/shm"

/* Defaults, overridable by YM_* environment variables (man/ymagent.7). */
#define YM_DEFAULT_SAMPLE_RATE  524288u
#define YM_DEFAULT_MAX_DEPTH    64u
#define YM_DEFAULT_MAX_STACKS   16384u
#define YM_DEFAULT_MAX_LIVE     65536u      /* sampling mode */
#define YM_DEFAULT_MAX_LIVE_EXACT 4194304u  /* YM_SAMPLE_RATE=1: 4 parts */
#define YM_DEFAULT_MAX_THREADS  4096u
#define YM_DEFAULT_GIANT_BYTES  (1ULL << 30)
#define YM_MAX_ALARMS           256u
#define YM_MAX_MODULES          1024u
#define YM_LIVE_STRIPES         64u         /* at most; fewer for small tables */

/* Hard bounds a reader enforces whatever the header says. */
#define YM_LIMIT_DEPTH          256u
#define YM_LIMIT_STACKS         (1u << 22)
#define YM_LIMIT_LIVE           (1u << 26)
#define YM_LIMIT_THREADS        (1u << 20)
#define YM_LIMIT_SEGMENT        (8ULL << 30)
#define YM_LIMIT_STRIPES        512u        /* the agent's stripe choice needs <= 2^9 */

/* Fixed-point unit of estimated object counts: weights are fractions. */
#define YM_FX_SHIFT  16
#define YM_FX_ONE    (1ULL << YM_FX_SHIFT)

/* Lifetime histogram: bucket i counts lifetimes < ym_life_upto_ns[i];
 * the last bucket is "longer" (upto 0 means unbounded). */
#define YM_LIFE_BUCKETS 12
#define YM_LIFE_UPTO_NS_INIT { 1000ULL, 10000ULL, 100000ULL, 1000000ULL,      \
	10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,             \
	100000000000ULL, 1000000000000ULL, 3600000000000ULL, 0ULL }

/* header.flags */
#define YM_FLAG_EXITED      0x1u   /* process exited (or exec'ed away) */
#define YM_FLAG_PAUSED      0x2u   /* sampling paused through control */
#define YM_FLAG_OVERFLOWED  0x4u   /* some table filled: see drop counters */
#define YM_FLAG_INJECTED    0x8u   /* agent loaded by ymtop -p, not preload */
/* 0x10, 0x20: retired in v5 (PASSIVE, never set: an agent that gives up
 * has no segment; EXECED, never read), reserved. */
#define YM_EXIT_UNKNOWN 0u
#define YM_EXIT_STATUS  1u
#define YM_FLAG_KEPT        0x40u  /* exited, left on purpose (YM_KEEP_SEGMENT) */
/* v6: the thread slots count freed objects but not freed bytes (their
 * free_bytes stay 0): set at creation when sampling (rate > 1), where a
 * free never reads the freed block; in use is header.heap's. */
#define YM_FLAG_NO_FREED_BYTES 0x80u
/* The thread slots count allocated objects and requested bytes but not
 * allocated (usable) bytes (their alloc_bytes stay 0, or count some slow
 * paths only): set with NO_FREED_BYTES when sampling, where malloc's fast
 * path never reads the block it returns. */
#define YM_FLAG_NO_ALLOC_BYTES 0x100u
/* A fork child that walks the loader's list without its lock because the
 * agent could not find that lock (injector/agent/loader.h): MODULES holds
 * the objects as at the fork, not those the child loaded since. */
#define YM_FLAG_MODULES_AT_FORK 0x200u
/* v7: some of the process's allocator calls do not reach the agent:
 * header.unseen_why (YM_UNSEEN_*) says why and header.unseen_object in
 * which object (the first one found; "" is the executable).  Figures
 * count the calls the agent sees.  Set once, with release, after both. */
#define YM_FLAG_UNSEEN 0x400u
#define YM_UNSEEN_OWN_CALLS 1u  /* the object defines the process's malloc
				 * and calls it directly, through no slot */
#define YM_UNSEEN_READONLY  2u  /* a slot or data word holding an allocator
				 * function that the agent could not rewrite
				 * (read-only, unaligned, mprotect refused) */

enum ym_section_id {
	YM_SEC_CONTROL = 0,
	YM_SEC_THREADS,
	YM_SEC_STACKS,
	YM_SEC_LIVE,
	YM_SEC_ALARMS,
	YM_SEC_MODULES,
	YM_SEC_STRIPES,
	YM_SEC_PLANES,
	YM_SEC_COUNT
};

/* Counter planes (see above): the first thread that samples counts into
 * the stack records themselves, the next YM_PLANES into a plane each, any
 * further ones into the records again (atomic adds). */
#define YM_PLANES 8u

struct ym_section {
	uint64_t offset;    /* from the start of the segment, 64-byte aligned */
	uint32_t capacity;  /* number of records */
	uint32_t stride;    /* bytes per record, >= the record's struct size */
};

/* Exact totals, in the allocator's usable-size unit for bytes (so that
 * alloc - free is exactly the heap in use); req_bytes is what callers asked. */
struct ym_totals {
	uint64_t alloc_objects;
	uint64_t alloc_bytes;
	uint64_t req_bytes;
	uint64_t free_objects;
	uint64_t free_bytes;
};

struct ym_life_bucket {
	uint64_t objects_fx;   /* estimated objects freed, fixed point */
	uint64_t bytes;        /* estimated bytes freed */
};

/* The allocator's own statistics (v6), taken inside the target by the
 * agent when a reader asks (control.heap_request, below), at most every
 * YM_HEAP_MIN_INTERVAL_NS and every 100 x cost_ns, on a thread's slow
 * path (its next allocation), and once at an injected start.  One writer at a time (the agent serializes
 * them); seq is its seqcount: odd while written, readers copy the block
 * in the seqcount loop and use it only when seq is even and unchanged.
 * Only the fields whose bit is in `present` mean something; bytes are
 * the allocator's own figures. */
#define YM_HEAP_NONE      0u   /* no statistics (yet, or none known) */
#define YM_HEAP_GLIBC     1u   /* mallinfo2 */
#define YM_HEAP_JEMALLOC  2u   /* mallctl stats.* */
#define YM_HEAP_TCMALLOC  3u   /* MallocExtension_GetNumericProperty */
#define YM_HEAP_IN_USE    0x01u  /* in_use_bytes */
#define YM_HEAP_FREE      0x02u  /* free_bytes */
#define YM_HEAP_MAPPED    0x04u  /* mapped_bytes */
#define YM_HEAP_ARENAS    0x08u  /* arenas */
#define YM_HEAP_ACTIVE    0x10u  /* active_bytes */
#define YM_HEAP_RESIDENT  0x20u  /* resident_bytes */
#define YM_HEAP_RETAINED  0x40u  /* retained_bytes */
/* v7: calls holds the process's allocator calls (the sum over THREADS
 * and header.retired of alloc_objects + free_objects) read just before
 * the figures were taken.  A reader whose own sum of the same counters
 * is not above it knows no call completed since: the figures still
 * describe the heap exactly (in use; free and mapped may move with the
 * allocator's background purging).  A call in flight on another thread
 * while they were taken (counted before it runs: microseconds) is the
 * one thing this misses; that thread's next call moves the sum. */
#define YM_HEAP_CALLS     0x80u  /* calls */
#define YM_HEAP_MIN_INTERVAL_NS 100000000ull   /* 100 ms */
/* v8: none_why, why allocator is YM_HEAP_NONE: the agent found no
 * statistics to take, and says why (0 from a v7 writer: not known). */
#define YM_HEAP_WHY_UNKNOWN   0u   /* not known (or statistics present) */
#define YM_HEAP_WHY_OLD_GLIBC 1u   /* glibc without mallinfo2: before 2.33 */
#define YM_HEAP_WHY_MUSL      2u   /* musl's allocator: it keeps none */
#define YM_HEAP_WHY_OTHER     3u   /* an allocator ymtop reads none of
				    * (mimalloc, the program's own) */

struct ym_heapstats {
	uint32_t seq;              /* seqcount: odd while written */
	uint32_t allocator;        /* YM_HEAP_* kind */
	uint32_t present;          /* YM_HEAP_IN_USE... bits */
	uint32_t none_why;         /* v8: YM_HEAP_WHY_* */
	uint64_t answered;         /* the control.heap_request answered */
	uint64_t taken_mono_ns;    /* CLOCK_MONOTONIC when taken */
	uint64_t cost_ns;          /* how long taking them took */
	uint64_t in_use_bytes;     /* live data: glibc uordblks + hblkhd,
				    * jemalloc stats.allocated, tcmalloc
				    * generic.current_allocated_bytes */
	uint64_t free_bytes;       /* free inside the heap (glibc fordblks) */
	uint64_t mapped_bytes;     /* glibc hblkhd (mmapped blocks),
				    * jemalloc stats.mapped, tcmalloc
				    * heap_size - pageheap_unmapped */
	uint64_t arenas;
	uint64_t active_bytes;     /* jemalloc stats.active */
	uint64_t resident_bytes;   /* jemalloc stats.resident */
	uint64_t retained_bytes;   /* jemalloc stats.retained, tcmalloc
				    * pageheap_unmapped_bytes */
	uint64_t calls;            /* v7: YM_HEAP_CALLS above */
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct ym_heapstats) == 128, "heap stats size");

/* v9: Budget.  YM_MAX_OVERHEAD (or control.max_overhead) bounds the CPU
 * time the agent spends in its sampled paths to budget_ppm millionths of
 * the process's CPU time (CLOCK_PROCESS_CPUTIME_ID), judged over windows
 * of window_ms of wall time or more: the agent lengthens the mean
 * sampling interval, header.sample_rate, above requested_rate when a
 * window was over the budget and shortens it back, never below
 * requested_rate, when under.  Each sample is weighed at the rate it was
 * drawn at, so estimates stay unbiased; max_rate, the longest interval
 * in force since the start or the last reset, bounds their error.
 * Written by the agent only, each field atomically, all but
 * requested_rate and max_rate after creation only while budget_ppm is
 * not 0 (0: no budget: the agent measures nothing).  spent_ns and cpu_ns
 * are totals over the windows judged, window_* those of the last one,
 * adjustments the changes of sample_rate the budget made. */
struct ym_budget {
	uint64_t requested_rate;   /* YM_SAMPLE_RATE or control.sample_rate */
	uint64_t max_rate;         /* longest sample_rate since start/reset */
	uint32_t budget_ppm;       /* 0: none */
	uint32_t window_ms;
	uint64_t adjustments;
	uint64_t spent_ns;         /* in the sampled paths, all threads */
	uint64_t cpu_ns;           /* the process's, over the same windows */
	uint64_t window_spent_ns;
	uint64_t window_cpu_ns;
};
_Static_assert(sizeof(struct ym_budget) == 64, "budget size");

struct ym_header {
	/* Fixed at creation. */
	uint64_t magic;
	uint16_t abi_version;      /* the writer's YM_ABI_VERSION */
	uint16_t compat_version;   /* lowest reader version that reads this */
	uint32_t header_size;      /* bytes of header: >= the fields below */
	uint64_t total_size;
	uint32_t pid;
	uint32_t uid;
	uint64_t start_ticks;      /* /proc/<pid>/stat field 22 */
	uint64_t start_real_ns;    /* CLOCK_REALTIME when the agent started */
	uint64_t start_mono_ns;    /* CLOCK_MONOTONIC at the same moment */
	uint64_t sample_rate;      /* mean bytes between samples; 1 = exact.
				    * The one field here that may change
				    * later (control.sample_rate; v9: the
				    * budget, header.budget): atomic */
	uint64_t giant_bytes;
	uint32_t max_depth;
	uint32_t giant_fail;       /* 1: giant requests fail with ENOMEM */
	uint32_t follow_fork;
	uint32_t pidns;            /* inode of the writer's pid namespace, 0
				      unknown: with pid it names the segment */
	char     exe[512];         /* NUL-terminated, possibly truncated */
	struct ym_section sections[YM_SEC_COUNT];

	/* Changing: atomic access only. */
	uint32_t flags;
	uint32_t retire_seq;       /* seqcount over retired + thread folding */
	uint64_t exit_mono_ns;
	uint64_t threads_used;     /* slots ever handed out (<= capacity) */
	uint64_t stacks_used;      /* published stack records */
	uint64_t modules_used;
	uint64_t alarms_written;   /* total alarms ever; ring index = n % cap */

	/* Loss accounting: never a silent loss.  (Sample counts, sampled
	 * bytes and the global lifetime histogram are sums over the stacks:
	 * the reader adds them up, so writers never contend on them.) */
	uint64_t drop_stacks;      /* samples attributed to the overflow stack */
	uint64_t drop_live;        /* samples not tracked: live table full */
	uint64_t drop_busy;        /* samples skipped: agent lock contended */
	uint64_t drop_threads;     /* thread registrations that got slot 0 */
	uint64_t drop_modules;

	struct ym_totals retired;  /* folded from reused thread slots */
	uint64_t reset_count;      /* resets the agent has carried out */
	uint64_t planes_used;      /* counter planes handed out (<= planes) */
	uint64_t plane_epoch[YM_PLANES];   /* reset_count a plane's data is of */
	struct ym_heapstats heap;  /* v6: the allocator's own statistics */
	/* v6: how the process ended, as its exit() said (the agent's on_exit
	 * handler, injector/agent/seg.c): written once, before
	 * YM_FLAG_EXITED is set with release; read after seeing that flag
	 * with acquire.  exit_how YM_EXIT_UNKNOWN (0: _exit, a signal, an
	 * older writer), or YM_EXIT_STATUS with exit_status the status
	 * exit() was given (its low 8 bits are what the parent sees). */
	uint32_t exit_how;
	uint32_t exit_status;
	/* v6.  Peaks: the malloc family's retained estimate (the sum of the
	 * stacks' of kind malloc: atomic adds on sampled allocations, frees
	 * and resizes only, never on a fast path, each thread's in steps of
	 * 64 KiB or more, so it lags by less than a step a thread; signed,
	 * it may dip below zero for a moment), its highest value since the
	 * start or the last reset, and when (CLOCK_MONOTONIC).  The same for tracked mmap
	 * memory (stacks of kind mmap).  A reset zeroes all six. */
	int64_t  retained_est;
	uint64_t peak_retained;
	uint64_t peak_mono_ns;
	int64_t  mmap_retained_est;
	uint64_t mmap_peak_retained;
	uint64_t mmap_peak_mono_ns;
	/* v7: with YM_FLAG_UNSEEN (written before it, never after). */
	uint32_t unseen_why;
	uint32_t reserved_v7;
	char     unseen_object[56];  /* NUL-terminated, possibly truncated */
	/* v8: Python frames (struct ym_pycode, below).  py_codes is a
	 * section like those of sections[] (capacity 0: none), fixed at
	 * creation; py_codes_used is published with release after the record
	 * it counts, like stacks_used.  py_version is the interpreter's
	 * Py_Version (0x030b02f0 is 3.11.2; 0 with YM_PY_UNKNOWN: one before
	 * 3.11, which has no Py_Version), py_state a YM_PY_* value, both
	 * written once, before py_state with release; py_drop counts Python
	 * frames left out (code table full, its lock busy, a frame that did
	 * not look like one). */
	struct ym_section py_codes;
	uint64_t py_codes_used;
	uint32_t py_version;
	uint32_t py_state;
	uint64_t py_drop;
	/* v8: the trend section (struct ym_trend_slot, Trend below): where
	 * it is (trend.capacity slots of trend.stride bytes; capacity 0:
	 * none), the slot length and the points a slot holds at most.
	 * Fixed at creation. */
	struct ym_section trend;
	uint64_t trend_slot_ns;
	uint32_t trend_stacks;
	uint32_t reserved_v8;
	/* v9: the cost budget (struct ym_budget, Budget below). */
	struct ym_budget budget;	/* v9 (pymalloc): the agent's wrapper around the interpreter's object
	 * and PyMem allocators (YM_PYHOOK_*, below), written by the agent
	 * with release at each change; 0 from a v8 writer: not known. */
	uint32_t py_hook;
	uint32_t reserved_v9_py;
	/* New fields go here (the rest of header_size is reserved). */
#ifdef YM_TEST_ABI_NEWER
	uint8_t  test_newer[256];  /* fields an older reader does not know */
#endif
};

_Static_assert(sizeof(struct ym_header) <= YM_HEADER_SIZE, "header fits");
_Static_assert(sizeof(struct ym_section) == 16, "section size");
_Static_assert(__builtin_offsetof(struct ym_header, flags) % 8 == 0,
	       "changing fields aligned");

/* Control block: ymtop -> agent.  The agent polls it on its slow path. */
struct ym_control {
	uint32_t pause;        /* non-zero: take no samples */
	uint32_t reset_seq;    /* bump to ask the agent to forget all samples */
	uint64_t reserved0;    /* v4's reader_mono_ns, never used */
	uint64_t sample_rate;  /* 0, or the mean rate a reader asks for */
	uint64_t heap_request; /* v6: a reader adds 1 to ask for new heap
				* statistics (header.heap.answered = it) */
	uint64_t fast_limit;   /* v6: see Control above */
	uint64_t reserved[2];
	uint64_t max_overhead; /* v9: 0, or the budget a reader asks for, in
				* millionths of CPU time (1..1000000) */
};
_Static_assert(sizeof(struct ym_control) == 64, "control size");

#define YM_THREAD_FREE    0u
#define YM_THREAD_LIVE    1u
#define YM_THREAD_EXITED  2u
#define YM_THREAD_SHARED  3u   /* slot 0 */

struct ym_thread {
	struct ym_totals t;
	uint32_t tid;
	uint32_t state;
	char     name[16];         /* set at exit (PR_GET_NAME); else empty */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct ym_thread) == 64, "one cache line a thread");

/* Stack record.  The first YM_STACK_OVERFLOW record is the overflow stack:
 * samples that found the table full.  frames[] holds return addresses,
 * innermost first, agent frames removed; depth <= header.max_depth. */
#define YM_STACK_OVERFLOW 0u

struct ym_stack {
	uint64_t hash;             /* non-zero once published */
	uint32_t depth;
	uint32_t tid;              /* thread that first allocated here */
	uint64_t first_mono_ns;
	uint64_t alloc_samples;
	uint64_t alloc_bytes;      /* estimated (unbiased) */
	uint64_t alloc_objects_fx;
	uint64_t free_samples;
	uint64_t free_bytes;
	uint64_t free_objects_fx;
	struct ym_life_bucket life[YM_LIFE_BUCKETS];
	uint64_t frames[];         /* depth entries used; stride from header */
};
_Static_assert(sizeof(struct ym_stack) % 8 == 0, "stack aligned");

/* v6: the fields after a stack record's frames (at sizeof(struct
 * ym_stack) + 8 * header.max_depth; present when abi_version >= 6 and the
 * stride holds them).  peak_bytes is the highest retained estimate of the
 * stack (record plus planes) the agent saw since the start or the last
 * reset, raised on its sampled allocations (monotonic between resets,
 * atomic; exact while a single thread has counted the stack, and while
 * each thread's allocations there stay within 64 KiB; otherwise, when
 * samples weigh less than 64 KiB, as in exact mode, in steps of 64 KiB a
 * thread: it may lag by that much), peak_mono_ns when (written after peak_bytes: a
 * reader may see the time of a slightly lower peak).  kind is fixed at publication:
 * stacks of the same frames and different kinds are different records. */
#define YM_KIND_MALLOC 0u   /* the malloc family (and jemalloc's API) */
#define YM_KIND_MMAP   1u   /* anonymous mmap/mremap by the program */

struct ym_stack_ext {
	uint64_t peak_bytes;
	uint64_t peak_mono_ns;
	uint32_t kind;             /* YM_KIND_* */
	/* v7: the live samples (alloc_samples - free_samples, record plus
	 * planes) behind peak_bytes when it was last raised, at most
	 * UINT32_MAX; written after peak_bytes, like peak_mono_ns (a reader
	 * may see the count of a slightly lower peak).  0 from older
	 * writers: a reader knows it only when abi_version >= 7. */
	uint32_t peak_samples;
	uint64_t reserved1;
};
_Static_assert(sizeof(struct ym_stack_ext) == 32, "stack ext size");

/* A stack's counters in a plane: the fields of struct ym_stack from
 * alloc_samples to life[], in the same order, so that either is a run of
 * YM_COUNT_WORDS 8-byte counters. */
struct ym_counts {
	uint64_t alloc_samples;
	uint64_t alloc_bytes;
	uint64_t alloc_objects_fx;
	uint64_t free_samples;
	uint64_t free_bytes;
	uint64_t free_objects_fx;
	struct ym_life_bucket life[YM_LIFE_BUCKETS];
};
#define YM_COUNT_WORDS (sizeof(struct ym_counts) / 8)
_Static_assert(__builtin_offsetof(struct ym_stack, life) -
	       __builtin_offsetof(struct ym_stack, alloc_samples) ==
	       __builtin_offsetof(struct ym_counts, life), "counts mirror the record");
_Static_assert(__builtin_offsetof(struct ym_stack, frames) -
	       __builtin_offsetof(struct ym_stack, alloc_samples) ==
	       sizeof(struct ym_counts), "counts mirror the record");

/* The counters of a stack record, as a struct ym_counts. */
static inline struct ym_counts *ym_stack_counts(struct ym_stack *s)
{
	return (struct ym_counts *)(void *)&s->alloc_samples;
}

/* One live sampled allocation.  addr == 0 marks a free entry.  One cache
 * line: stripes that write neighbouring entries share no line.
 * agent_private0 is the writer's own word (its meaning is private to the
 * agent, injector/agent/segpriv.h): readers ignore it. */
struct ym_live {
	uint64_t addr;
	uint64_t size;             /* requested size */
	uint64_t weight_bytes;
	uint64_t weight_fx;
	uint64_t birth_mono_ns;
	uint32_t stack;
	uint32_t tid;
	uint32_t agent_private0;   /* the writer's; readers ignore it */
	uint32_t reserved0;
	uint64_t reserved1;
};
_Static_assert(sizeof(struct ym_live) == 64, "live size");

/* A stripe of the live table: its lock and seqcount (odd: a writer is
 * inside), its number of live entries and how many of its entries it ever
 * handed out, alone in a cache line.  Readers need only seq, count and
 * used; agent_private[] is the writer's own (injector/agent/segpriv.h):
 * readers ignore it. */
struct ym_stripe {
	uint64_t seq;
	uint64_t count;
	uint64_t used;
	uint32_t agent_private[8]; /* the writer's; readers ignore it */
	/* v8: counts of stack records or planes moved: a thread adds 1 here
	 * (atomic, release) after it changed a stack's counters, life
	 * buckets or peak for a sample of an address of this stripe.  The
	 * sum over all stripes is unchanged between two reads only when no
	 * such change ended between them: a reader that reads the stripes
	 * (acquire) before the stacks may keep its copy of the stacks while
	 * the sum, stacks_used, reset_count, planes_used and plane_epoch[]
	 * stay as they were (Concurrency protocol, Stacks). */
	uint64_t counted;
};
_Static_assert(sizeof(struct ym_stripe) == 64, "one cache line a stripe");

/* Entry j of stripe s in the pool of a table of `stripes` stripes (more
 * than one only when each has at least 64 entries: whole blocks). */
#define YM_LIVE_BLOCK 8u
static inline uint64_t ym_live_index(uint32_t s, uint64_t j, uint32_t stripes)
{
	return ((j / YM_LIVE_BLOCK) * stripes + s) * YM_LIVE_BLOCK + j % YM_LIVE_BLOCK;
}

#define YM_ALARM_FAILED 0x1u   /* the call was made to fail (ENOMEM) */

struct ym_alarm {
	uint64_t seq;              /* n + 1 once complete, 0 while written */
	uint64_t size;
	uint64_t mono_ns;
	uint32_t tid;
	uint32_t depth;
	uint32_t flags;
	uint32_t reserved;
	uint64_t frames[];
};
_Static_assert(sizeof(struct ym_alarm) == 40, "alarm size");

#define YM_MODULE_LOADED   1u
#define YM_MODULE_UNLOADED 2u

struct ym_module {
	uint64_t base;             /* load bias (l_addr) */
	uint64_t lo, hi;           /* lowest and highest mapped address */
	uint32_t state;
	uint32_t build_id_len;     /* <= 20 */
	uint8_t  build_id[32];
	char     path[448];        /* NUL-terminated */
};
_Static_assert(sizeof(struct ym_module) == 512, "module size");

/* v8: Python frames.  In a CPython process whose frame layout the agent
 * knows, each stack's frames[] holds its native return addresses, then
 * the allocating thread's Python frames, innermost first, each a word
 * with YM_PYFRAME set: the index of its code object in the py_codes
 * section and the line.  A return address never has bit 63 set (user
 * space ends below 2^47).  YM_PYFRAME_ENTRY marks the outermost Python
 * frame that one native call of the evaluation loop
 * (_PyEval_EvalFrameDefault) runs: a reader puts the Python frames in
 * place of each such native frame, innermost first, up to and including
 * the next frame so marked.  Stacks are keyed by line, never by
 * instruction. */
#define YM_PYFRAME        (1ULL << 63)
#define YM_PYFRAME_ENTRY  (1ULL << 62)
#define YM_PYFRAME_CODE(w) ((uint32_t)(((w) >> 32) & 0x3fffffffu))
#define YM_PYFRAME_LINE(w) ((uint32_t)(w))   /* 0: no line */
/* Code indices that name no record: an evaluation-loop call that runs no
 * complete frame yet (a reader shows nothing for it), and a frame whose
 * code object the agent could not copy (table full, lock busy). */
#define YM_PYCODE_NONE    0x3fffffffu
#define YM_PYCODE_UNKNOWN 0x3ffffffeu
static inline uint64_t ym_pyframe(uint32_t code, uint32_t line, int entry)
{
	return YM_PYFRAME | (entry ? YM_PYFRAME_ENTRY : 0) |
	       ((uint64_t)(code & 0x3fffffffu) << 32) | line;
}

#define YM_PY_NONE     0u  /* no CPython in the process (or not yet seen) */
#define YM_PY_FRAMES   1u  /* Python frames are recorded */
#define YM_PY_UNKNOWN  2u  /* an interpreter version whose layout this
			    * agent does not know: native frames only */
#define YM_PY_MISMATCH 3u  /* a known version whose objects did not match
			    * the layout (a patched build): native only */

/* v9: header.py_hook.  The wrapper samples objects allocated through
 * PyObject_Malloc and PyMem_Malloc (pymalloc's domains) at their own size
 * and stack; it is installed in the interpreter's main thread with the
 * GIL held, by a pending call (Py_AddPendingCall) queued once the
 * interpreter is initialised.  Python frames never depend on it. */
#define YM_PYHOOK_UNKNOWN 0u  /* a v8 writer: not known */
#define YM_PYHOOK_NONE    1u  /* no interpreter the agent wraps */
#define YM_PYHOOK_WAITING 2u  /* the interpreter is not initialised yet */
#define YM_PYHOOK_PENDING 3u  /* queued; runs at the main thread's next
			       * check of the eval loop's pending calls */
#define YM_PYHOOK_ON      4u  /* installed: pymalloc objects are sampled */
#define YM_PYHOOK_MALLOC  5u  /* not needed: the domains are malloc's
			       * (PYTHONMALLOC=malloc), which the malloc
			       * hooks see */
#define YM_PYHOOK_OFF     6u  /* off: YM_PYMALLOC=0, removed
			       * (pymalloc_unhook), or the interpreter's
			       * debug hooks over pymalloc */

/* One code object, copied once at the first sample through it.  The
 * agent keys it by the object's address and by its name, file and line
 * table objects, so that a code object freed and another made at the
 * same address gets a record of its own.  Strings are UTF-8,
 * NUL-terminated, possibly truncated. */
struct ym_pycode {
	uint64_t code_addr;        /* the code object in the target */
	uint32_t first_line;       /* co_firstlineno */
	uint32_t reserved;
	char     qualname[176];
	char     filename[320];
};
_Static_assert(sizeof(struct ym_pycode) == 512, "pycode size");
#define YM_DEFAULT_MAX_PYCODES 4096u
#define YM_LIMIT_PYCODES       (1u << 20)
/* v8: Trend.  A ring of header.trend.capacity slots (YM_TREND_SLOTS by
 * default): slot n (n = (now - start_mono_ns) / trend_slot_ns, the
 * agent's clock) goes to record n % capacity and holds the retained
 * estimate (record plus planes, as a reader sums them) of at most
 * header.trend_stacks stacks (K, YM_TREND_STACKS): the K - K/4 (K/4 at
 * most 16) with the largest estimates at that moment, in that order
 * (ties to the lower index), then up to K/4 others whose peak
 * (ym_stack_ext.peak_mono_ns) rose since the previous slot was due, the
 * largest first, then the next largest for what is left.  A
 * slot is written by the first thread that takes or frees a sample once
 * the slot is due; a slot in which no sample was taken or freed is not
 * written (a reader takes a stack's estimate as unchanged across it); a
 * stack not among a slot's points is not known at that slot, never 0.
 * Protocol: the writer makes seq odd (compare-and-swap from even: one
 * writer a record), fills the record, and stores seq = 2 * (n + 1) with
 * release.  A reader copies the record in the seqcount loop over seq and
 * keeps it when seq is even, non-zero, stable and (seq / 2 - 1) %
 * capacity is the record's position; count <= trend_stacks, and each
 * point's stack is checked against stacks_used. */
#define YM_TREND_SLOTS        360u    /* an hour of 10-s slots */
#define YM_TREND_STACKS       64u
#define YM_TREND_SLOT_NS      10000000000ull
#define YM_LIMIT_TREND_SLOTS  65536u
#define YM_LIMIT_TREND_STACKS 1024u

struct ym_trend_point {
	uint32_t stack;
	uint32_t samples;          /* live samples behind it, at most 2^32-1 */
	int64_t  retained;         /* estimated retained bytes (may dip < 0) */
};
_Static_assert(sizeof(struct ym_trend_point) == 16, "trend point size");

struct ym_trend_slot {
	uint64_t seq;              /* 2 * (slot + 1) when complete; odd: busy */
	uint64_t mono_ns;          /* CLOCK_MONOTONIC when taken */
	uint32_t count;            /* points used */
	uint32_t reserved;
	struct ym_trend_point points[];   /* trend_stacks; stride from header */
};
_Static_assert(sizeof(struct ym_trend_slot) == 24, "trend slot size");

/* ---- The reader's side of the protocol, as code ---- */

/* Whether a reader of this file's version can read a segment whose header
 * says magic, abi_version and compat_version (Versions and sizes). */
static inline int ym_abi_readable(uint64_t magic, uint32_t abi_version,
				  uint32_t compat_version)
{
	if (magic != YM_MAGIC)
		return 0;
	if (compat_version == 0)   /* a writer before compat_version */
		return abi_version >= YM_ABI_OLDEST && abi_version <= YM_ABI_VERSION;
	return compat_version <= YM_ABI_VERSION && compat_version <= abi_version;
}

/* The writer version that brought each thing a reader asks about (the
 * history above): the one place where a reader compares abi_version.
 * An older writer lacks it; the reader says "not known", never 0. */
#define YM_ABI_V6 6u   /* stack ext (kind, peaks), process peaks, tracked
			  mmap, the allocator's statistics, exit status */
#define YM_ABI_V7 7u   /* unseen calls, peak samples, heap call count */
#define YM_ABI_V8 8u   /* why no heap figures, Python frames, the trend,
			  the stripes' counted word */
#define YM_ABI_V9 9u   /* the cost budget, the pymalloc wrapper's state */


/* Each stack record ends with struct ym_stack_ext (its kind and peak). */
static inline int ym_abi_has_stack_ext(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V6;
}
/* header.retained_est, peak_* and mmap_*: the process's peaks and its
 * tracked anonymous mappings (stacks of kind YM_KIND_MMAP). */
static inline int ym_abi_has_peaks(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V6;
}
static inline int ym_abi_tracks_mmap(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V6;
}
/* header.heap and control.heap_request: the allocator's statistics. */
static inline int ym_abi_has_heapstats(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V6;
}
/* header.exit_how and exit_status, recorded at exit(). */
static inline int ym_abi_has_exit_status(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V6;
}
/* header.unseen_*: the allocator calls the agent cannot see. */
static inline int ym_abi_has_unseen(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V7;
}
/* struct ym_stack_ext.peak_samples: the live samples behind a peak. */
static inline int ym_abi_has_peak_samples(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V7;
}
/* YM_HEAP_CALLS in header.heap: the allocator calls counted. */
static inline int ym_abi_has_heap_calls(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V7;
}
/* header.heap.none_why: why there are no allocator figures. */
static inline int ym_abi_has_heap_reason(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V8;
}
/* header.py_*: the CPython the agent found, its code object section. */
static inline int ym_abi_has_python(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V8;
}
/* v9: header.py_hook: the pymalloc wrapper's state. */
static inline int ym_abi_has_pyhook(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V9;
}
/* header.trend*: the trend section. */
static inline int ym_abi_has_trend(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V8;
}
/* header.budget and control.max_overhead: the cost budget, the rate
 * asked for beside the one in force. */
static inline int ym_abi_has_budget(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V9;
}
/* struct ym_stripe.counted: moves with every change of stack counters. */
static inline int ym_abi_has_counted(uint32_t abi_version)
{
	return abi_version >= YM_ABI_V8;
}

/*
 * Seqcounts (header.retire_seq, stripe.seq): the writer makes the count odd,
 * changes the data, and makes it even again with release.  A reader that
 * maps the segment copies the data it protects so:
 *
 *	do {
 *		seq = ym_seq_read_begin(&stripe->seq);
 *		copy the data;
 *	} while (ym_seq_read_retry(&stripe->seq, seq));
 *
 * (retire_seq is 32 bits: ym_seq_read_begin32 / ym_seq_read_retry32).  A
 * reader that copies with read(2), as ymtop's does (shm/reader.c: a mapping
 * would take SIGBUS from a truncated file), takes the same steps with each
 * load replaced by a read of the word, ym_seq_fence() after the first read
 * and before the last, and ym_seq_stable(first, last) as the loop's test.
 * Acquire belongs on the loads from the segment: a reader's own copies are
 * plain memory.
 */
static inline int ym_seq_stable(uint64_t begin, uint64_t end)
{
	return begin == end && !(begin & 1);
}

/* gcc's ThreadSanitizer warns that it does not model fences (-Wtsan):
 * it cannot tell that this one orders the copy before the second read.
 * The fence is compiled in all the same; only the warning is off, here
 * alone.  No report can hinge on it: the readers that use it copy the
 * segment with read(2) or pread(2) (shm/reader.c, in ymtop and in
 * tests/tsan), accesses TSan does not see, and the writer is another
 * process or, in tests/tsan, threads whose own accesses TSan checks
 * against each other.  clang has no such warning. */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static inline void ym_seq_fence(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

static inline uint64_t ym_seq_read_begin(const uint64_t *seq)
{
	return __atomic_load_n(seq, __ATOMIC_ACQUIRE);
}

static inline int ym_seq_read_retry(const uint64_t *seq, uint64_t begin)
{
	ym_seq_fence();
	return !ym_seq_stable(begin, __atomic_load_n(seq, __ATOMIC_RELAXED));
}

static inline uint32_t ym_seq_read_begin32(const uint32_t *seq)
{
	return __atomic_load_n(seq, __ATOMIC_ACQUIRE);
}

static inline int ym_seq_read_retry32(const uint32_t *seq, uint32_t begin)
{
	ym_seq_fence();
	return !ym_seq_stable(begin, __atomic_load_n(seq, __ATOMIC_RELAXED));
}

/*
 * Alarms: a reader loads w0 = header.alarms_written (acquire), copies the
 * ring (each record's seq first, with acquire, then the rest), loads
 * w1 = alarms_written again after ym_seq_fence(), and keeps record i of cap
 * when this says so: published (seq = n + 1 at position n % cap), of the
 * last lap before w0 (an older seq means a writer that claimed the position
 * again is still filling it), and its position not claimed again by any
 * writer between w0 and w1.
 */
static inline int ym_alarm_complete(uint64_t seq, uint32_t i, uint32_t cap,
				    uint64_t w0, uint64_t w1)
{
	if (cap == 0 || seq == 0 || seq > w0 || (seq - 1) % cap != i ||
	    seq + cap <= w0 || w1 < w0)
		return 0;
	/* The first claim at or after w0 that lands on position i. */
	uint64_t next = w0 + (i + cap - w0 % cap) % cap;
	return next >= w1;
}

#endif
