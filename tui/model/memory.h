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

struct model_memory {
	int have_rss;            /* the process runs and /proc told us */
	const char *rss_source;  /* "smaps_rollup" or "status" */
	double rss, anon, file, shmem, swap;
	double pss;              /* < 0: unknown (no smaps_rollup) */
	int have_heap;           /* the allocator's statistics (issue 18) */
	double heap_in_use, heap_free;
	double heap_age;         /* seconds, at the snapshot; 0: current */
	int heap_old;            /* not current (model_heap_current): not used
				    for unexplained, which takes the next source */
	int have_counted;        /* frees count bytes (exact mode, or an
				    agent before ABI 6) */
	double counted_in_use;   /* the agent's exact counters: allocated -
				    freed (since the attach when injected) */
	double retained;         /* estimated from samples */
	int have_mmap;           /* tracked anonymous mmap */
	double mmap_retained;
	/* Anonymous RSS minus the heap (the allocator's in use + free when
	 * known and not old, else the counted in use, else the retained
	 * estimate) and
	 * tracked mmap: thread stacks,
	 * allocator overhead, untracked mappings, memory from before an
	 * attach; negative when parts of the heap are not resident.  Valid
	 * when have_rss. */
	double unexplained;
};

void model_memory(const struct model *m, struct model_memory *out);

#endif
