/*
 * memory: RSS explained (memory.h).
 */
#include <string.h>

#include "memory.h"

void model_memory(const struct model *m, struct model_memory *o)
{
	memset(o, 0, sizeof *o);
	o->pss = -1;
	const struct proc_mem *pm = &m->proc.mem;
	if (m->alive && (pm->have_rollup || pm->have_status)) {
		o->have_rss = 1;
		if (pm->have_rollup) {
			o->rss_source = "smaps_rollup";
			o->rss = (double)pm->rss;
			o->anon = (double)pm->anonymous;
			o->swap = (double)pm->swap;
			o->pss = (double)pm->pss;
		} else {
			o->rss_source = "status";
			o->rss = (double)m->proc.rss_bytes;
			o->anon = (double)pm->rss_anon;
			o->swap = (double)pm->vm_swap;
		}
		o->file = (double)pm->rss_file;
		o->shmem = (double)pm->rss_shmem;
	}
	double age = 0;
	const struct ym_heapstats *hs = model_heap(m, &age);
	o->have_heap = hs && (hs->present & YM_HEAP_IN_USE);
	o->heap_age = o->have_heap ? age : 0;
	o->heap_old = o->have_heap && !model_heap_current(m);
	o->heap_in_use = o->have_heap ? (double)hs->in_use_bytes : 0;
	o->heap_free = o->have_heap && (hs->present & YM_HEAP_FREE) ?
		       (double)hs->free_bytes : 0;
	/* Sampling agents (ABI 6) count freed objects, not freed bytes. */
	o->have_counted = model_freed_bytes_counted(m);
	o->counted_in_use = o->have_counted ?
		(double)m->totals.alloc_bytes - (double)m->totals.free_bytes : 0;
	o->counted_net = model_counted_net(m);
	o->retained = m->retained_bytes;
	/* Agents of ABI 6 and later track anonymous mmap (stack kinds). */
	o->have_mmap = m->have_snap && ym_abi_tracks_mmap(m->snap.hdr.abi_version);
	o->mmap_retained = m->mmap_retained_bytes;
	/* An old figure of a heap that has moved since would make the rest
	 * say anything (a quiet process filled 113 MiB after its last
	 * answer: "+113 MiB unexplained"). */
	double heap = o->have_heap && !o->heap_old ? o->heap_in_use + o->heap_free :
		      o->have_counted && !o->counted_net ? o->counted_in_use : o->retained;
	o->have_resident = m->resident_known;
	o->resident_why = m->resident_known ? NULL : m->resident_why;
	double away = 0;   /* heap and mmap bytes that are no anonymous RSS */
	if (o->have_resident) {
		o->retained_resident = m->resident_sum[YM_KIND_MALLOC];
		o->retained_swapped = m->swapped_sum[YM_KIND_MALLOC];
		o->retained_untouched = o->retained - o->retained_resident -
					o->retained_swapped;
		if (o->retained_untouched < 0)
			o->retained_untouched = 0;
		o->mmap_resident = m->resident_sum[YM_KIND_MMAP];
		o->mmap_swapped = m->swapped_sum[YM_KIND_MMAP];
		o->mmap_untouched = o->mmap_retained - o->mmap_resident - o->mmap_swapped;
		if (o->mmap_untouched < 0)
			o->mmap_untouched = 0;
		away = o->retained_swapped + o->retained_untouched +
		       (o->have_mmap ? o->mmap_swapped + o->mmap_untouched : 0);
	}
	o->unexplained = o->anon - heap - (o->have_mmap ? o->mmap_retained : 0) + away;
	o->unexplained_why = o->unexplained >= 0 && o->have_resident ?
		"anonymous RSS minus the resident heap and tracked mmap (the retained "
		"bytes never touched or swapped taken out): thread stacks, allocator "
		"overhead, other mappings" :
		o->unexplained >= 0 ?
		"anonymous RSS minus heap and tracked mmap: thread stacks, allocator "
		"overhead, other mappings" :
		o->have_resident ?
		"negative: the allocator's free space or size-class slack is not "
		"resident (the retained bytes never touched or swapped are taken out)" :
		"negative: the heap counts memory that is not resident: allocated but "
		"never touched (no page yet), size-class slack never written, or "
		"swapped out";
	/* Usable minus requested where both are shown. */
	o->have_gap = o->have_heap && !o->heap_old;
	o->gap = o->have_gap ? o->heap_in_use - o->retained : 0;
	int injected = m->have_snap && (m->snap.hdr.flags & YM_FLAG_INJECTED);
	o->gap_why = o->gap < 0 ?
		"negative: the retained estimate's sampling error is larger than "
		"the slack" :
		injected ?
		"usable minus requested bytes: size-class slack, allocator headers, "
		"memory allocated before the attach (not sampled), the estimate's error" :
		"usable minus requested bytes: size-class slack, allocator headers, "
		"the estimate's error";
}
