/*
 * Test fixture: a snapshot made by hand, as shm_snapshot() would return
 * it, for tests of the model and what reads it.
 */
#ifndef YM_TEST_SNAP_H
#define YM_TEST_SNAP_H

#include <stdint.h>

#include "shm.h"

/* Fill *s (zeroed first) with nstacks stacks of room for depth frames,
 * taken at t seconds (+1 s on the monotonic clock), from a process that
 * does not exist (pid 0x7fffffff: the model sees it exited), sample rate
 * 4096.  Stack i has hash 10 + i, one frame 0x1000 + i, retained[i]
 * bytes retained of alloc[i] allocated, and is sampled when alloc[i] > 0.
 * Objects, live entries and totals are left zero for the test to add.
 * s->stacks is calloc'd: the owner is whoever takes the snapshot
 * (model_update) or the test. */
void snap_fake(struct shm_snapshot *s, uint32_t nstacks, uint32_t depth,
	       const double *retained, const double *alloc, double t);

/* Stack i of s. */
struct ym_stack *snap_stack(struct shm_snapshot *s, uint32_t i);

#endif
