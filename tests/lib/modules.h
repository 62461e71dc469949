/*
 * Test fixture: this process's module list, built the way the agent
 * builds it (dl_iterate_phdr: base, PT_LOAD span, path), so that a unit
 * test can symbolize addresses of its own functions for real.
 */
#ifndef YM_TEST_MODULES_H
#define YM_TEST_MODULES_H

#include <stdint.h>

#include "ymtop/segment.h"

/* Fill mods[0..max) with the loaded modules (the main program named by
 * /proc/self/exe) and return how many.  With build_ids, each module also
 * carries its GNU build id (from PT_NOTE), which the symbolizer then
 * checks against the file; without, none (a test that makes modules up
 * keeps the check out of its way). */
uint32_t modules_of_self(struct ym_module *mods, uint32_t max, int build_ids);

#endif
