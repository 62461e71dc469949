/*
 * memory: "where did my RSS go" on one page.  RSS as the kernel splits it
 * (anonymous, file, shared memory, swap: /proc/PID/smaps_rollup and
 * status, read by the session into the model's proc facts) beside what
 * ymtop knows of the heap: the allocator's in use and free space (when the
 * model has them), the agent's exact in-use counters, the retained
 * estimate, and tracked mmap (when the agent tracks it); and what of the
 * anonymous RSS none of them explains.  Pure data: the text and JSON
 * writers and the screen's Memory view print the same numbers.
 */
#ifndef YMTOP_MODEL_MEMORY_H
#define YMTOP_MODEL_MEMORY_H

#include "model.h"

/* Units (man/ymtop.1, "Units").  Estimates from samples (retained, tracked
 * mmap, every stack figure) count requested bytes: what the program asked
 * for (a mapping's length).  In use, the allocator's and the agent's
 * exact counted one, counts usable bytes: each block as the allocator
 * rounded it up to its size class, so it is the larger of the two by the
 * size-class slack (and, for the allocator's, its headers). */
#define MODEL_UNIT_REQUESTED "requested bytes"
#define MODEL_UNIT_USABLE    "usable bytes"

struct model_memory {
	int have_rss;            /* the process runs and /proc told us */
	const char *rss_source;  /* "smaps_rollup" or "status" */
	double rss, anon, file, shmem, swap;
	double pss;              /* < 0: unknown (no smaps_rollup) */
	int have_heap;           /* heap_*: the allocator's statistics came */
	double heap_in_use, heap_free;
	double heap_age;         /* seconds, at the snapshot; 0: current */
	int heap_old;            /* not current (model_heap_current): not used
				    for unexplained, which takes the next source */
	int have_counted;        /* frees count bytes (exact mode, or an
				    agent before ABI 6) */
	double counted_in_use;   /* the agent's exact counters: allocated -
				    freed */
	int counted_net;         /* counted_in_use is a net change since the
				    attach, not an in use (model_counted_net):
				    can be negative, never taken for the heap */
	double retained;         /* estimated from samples */
	int have_mmap;           /* tracked anonymous mmap */
	double mmap_retained;
	/* Usable minus requested: the allocator's in use (when known and not
	 * old) minus the retained estimate, both shown side by side. */
	int have_gap;
	double gap;
	const char *gap_why;     /* what makes up gap, in words */
	/* Of the retained estimate and of tracked mmap, what the live
	 * samples' pages say is in RAM, in swap, and neither (allocated but
	 * never written: no page yet); valid when have_resident (the
	 * model's resident_known), else resident_why says why not. */
	int have_resident;
	double retained_resident, retained_swapped, retained_untouched;
	double mmap_resident, mmap_swapped, mmap_untouched;
	const char *resident_why;
	/* Anonymous RSS minus the heap (the allocator's in use + free when
	 * known and not old, else the counted in use when the agent ran from
	 * the start, else the retained estimate) and
	 * tracked mmap: thread stacks,
	 * allocator overhead, untracked mappings, memory from before an
	 * attach; negative when parts of the heap are not resident.  With
	 * have_resident the retained and mmap bytes that are untouched or
	 * swapped are taken out of the heap and tracked mmap first: they
	 * are no anonymous RSS.  Valid when have_rss. */
	double unexplained;
	/* What unexplained is, in words; when it is negative, why the heap
	 * can be more than what is resident (never a share of RSS). */
	const char *unexplained_why;
};

void model_memory(const struct model *m, struct model_memory *out);

#endif
