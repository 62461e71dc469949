/*
 * config: the agent's configuration, from YM_* environment variables
 * (man/ymagent.7), read once (the constructor, or the first activation)
 * and never changed after: every other file only reads agent_cfg; and the
 * mode the agent runs in (injected, through slots).
 */
#ifndef YMTOP_AGENT_CONFIG_H
#define YMTOP_AGENT_CONFIG_H

#include <stdint.h>

#include "base.h"

struct agent_config {
	int      configured;
	int      disabled;          /* YM_DISABLE */
	uint64_t rate;              /* YM_SAMPLE_RATE at start; 1: exact mode.
				     * The rate in force is sampling.c's. */
	uint64_t giant;             /* YM_GIANT_BYTES */
	int      giant_fail;        /* YM_GIANT_ACTION=fail */
	int      follow_fork;
	int      keep_segment;
	int      early_segment;     /* YM_EARLY_SEGMENT: at the first call */
	uint64_t seed;              /* YM_SEED; 0: from time and tid */
	uint32_t max_depth, max_stacks, max_live, max_threads;
	uint64_t trend_slot_ms;     /* YM_TREND_SLOT_MS; 0: no trend */
	uint32_t budget_ppm;        /* YM_MAX_OVERHEAD in millionths; 0 none */	int      pymalloc;          /* YM_PYMALLOC (1): wrap pymalloc (hooks_py.h) */
};

extern struct agent_config agent_cfg AGENT_HIDDEN;

/* How the agent came into the process, set by the constructor (life.c)
 * before anything else runs, read everywhere below it:
 *
 * agent_injected: loaded by ymtop -p (dlopen through ptrace): hooks
 * through GOT slots (got.c), the real functions from RTLD_DEFAULT.
 *
 * agent_slots: the hooks reach the process through rewritten slots
 * (got.c), and forward to what those held (symbols.h, sym_global):
 * injected, or preloaded behind an object that defines malloc first (an
 * allocator earlier in LD_PRELOAD, or the executable's own). */
extern int agent_injected AGENT_HIDDEN;
extern int agent_slots AGENT_HIDDEN;

/* Read the environment, once (later calls return at once). */
void agent_configure(void) AGENT_HIDDEN;

/* Exact mode (YM_SAMPLE_RATE=1): every allocation is a sample.  Chosen at
 * start and never changed (a new rate is refused in exact mode). */
static inline int agent_exact(void)
{
	return agent_cfg.rate <= 1;
}

#endif
