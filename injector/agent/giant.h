/*
 * giant: requests of YM_GIANT_BYTES or more, reported in the segment's
 * ALARMS ring with their stack (and failed with ENOMEM under
 * YM_GIANT_ACTION=fail).  giant.c is the only writer of ALARMS and of
 * the header's alarms_written.
 */
#ifndef YMTOP_AGENT_GIANT_H
#define YMTOP_AGENT_GIANT_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "threads.h"
#include "ymtop/segment.h"

/* The fast paths' threshold: requests this large go to the slow path.
 * SIZE_MAX while the segment is not active (giant_arm sets it). */
extern size_t agent_giant_limit AGENT_HIDDEN;

/* Point at the segment's ALARMS section (header at base). */
void giant_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* The segment is active: route giant requests to agent_giant. */
void giant_arm(void) AGENT_HIDDEN;
/* After fork: no segment, no threshold. */
void giant_fork_child(void) AGENT_HIDDEN;
/* An alarm for a request of n bytes (failed: it is made to fail), into
 * the segment the caller made first where needed (enter.h,
 * agent_need_segment). */
void agent_giant(struct agent_tls *t, size_t n, int failed) AGENT_HIDDEN;

#endif
