/*
 * modules: the loaded objects, published in the segment's MODULES section
 * (so that ymtop symbolizes addresses with the right files even after an
 * unload), and our own text, whose frames captures drop.  modules.c is
 * the only writer of MODULES and of the header's modules_used and
 * drop_modules.
 */
#ifndef YMTOP_AGENT_MODULES_H
#define YMTOP_AGENT_MODULES_H

#include <stdint.h>

#include "base.h"
#include "ymtop/segment.h"

/* The agent's own text [lo, hi): found by the first scan. */
struct agent_text {
	uintptr_t lo, hi;
};
extern struct agent_text agent_self AGENT_HIDDEN;

/* Point at the segment's MODULES section (header at base). */
void modules_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* Publish modules loaded since the last scan and mark those gone as
 * unloaded; force: even if the loader's counters did not move (start-up). */
void modules_scan(int force) AGENT_HIDDEN;
/* On the sampled path: at most once a millisecond, a scan if the loader
 * added or removed objects since the last one. */
void modules_check(uint64_t now) AGENT_HIDDEN;
/* Through slots (agent_slots): fn runs after each scan not forced, for
 * the objects it found (life.c: got_patch_try).  Set once, by the
 * constructor. */
void modules_on_change(void (*fn)(void)) AGENT_HIDDEN;
/* After fork: no scan running, none done in the child. */
void modules_fork_child(void) AGENT_HIDDEN;

#endif
