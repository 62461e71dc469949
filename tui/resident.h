/*
 * resident: how much of each stack's retained memory is in RAM, from the
 * pages of its live samples (/proc/PID/pagemap).
 *
 * Each live sample (struct ym_live: addr, size) stands for weight_bytes of
 * its stack's retained memory; the share of its pages that pagemap says
 * are present (bit 63) or swapped (bit 62) is scaled by that weight and
 * summed per stack.  A page counts whole: a block smaller than a page is
 * resident when its page is.  Pages never touched since the allocation
 * are neither: the difference between retained and resident plus swapped
 * is memory allocated but never written.
 *
 * Bounded: blocks near one another are read in one pread (at most
 * RESIDENT_CHUNK pages a read, into a buffer the session keeps), and a
 * refresh reads at most RESIDENT_MAX_PAGES pages; beyond that the figures
 * are not known and the reason says so.  Samples whose address range is
 * not a user-space one (a segment is untrusted) are left out.
 *
 * Without CAP_SYS_ADMIN pagemap gives the present and swap bits but no
 * frame numbers, which this needs no more than that: a page shared
 * copy-on-write with a fork's other side counts as resident in both.
 */
#ifndef YMTOP_RESIDENT_H
#define YMTOP_RESIDENT_H

#include <sys/types.h>

#include "model/model.h"

#define RESIDENT_CHUNK     65536u          /* pages a read: 512 KiB */
#define RESIDENT_MAX_PAGES (16u << 20)     /* 64 GiB of 4 KiB pages */
#define RESIDENT_GAP       512u            /* pages between blocks read
						  through rather than seeking */

struct resident {
	int      fd;          /* /proc/PID/pagemap when have_fd */
	int      have_fd;     /* (all zero: nothing open, nothing kept) */
	pid_t    pid;         /* whose */
	uint64_t *buf;        /* RESIDENT_CHUNK entries */
	void     *spans;      /* scratch: the samples sorted by address */
	uint32_t nspans;
	/* The last figures per stack id, kept for refreshes whose snapshot
	 * left the live table out. */
	double  *res, *swp;
	uint32_t nres;
	int      known;
	char     why[160];
};

void resident_init(struct resident *r);
void resident_free(struct resident *r);

/* Set m's resident figures (model.h: resident_known, the stacks'
 * resident_bytes and swapped_bytes, the sums) from the pages of its
 * snapshot's live samples; a snapshot without the live table keeps the
 * last figures.  Never fails: what cannot be read is "not known" with its
 * reason in m->resident_why. */
void resident_update(struct resident *r, struct model *m);

#endif
