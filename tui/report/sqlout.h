/*
 * sqlout: the model as an SQLite database, for questions no screen
 * answers.  Schema (every size an estimate in bytes unless said; times in
 * ns; "stack" columns refer to stacks.id):
 *
 *   meta(pid, exe, time, uptime_s, state, sample_rate, version,
 *        allocated_bytes, allocated_objects, freed_bytes, freed_objects,
 *        in_use_bytes, retained_bytes, retained_objects)      one row; exact
 *        (freed_bytes and in_use_bytes NULL when sampling: ymagent.7;
 *        in_use_bytes NULL when injected: a net change since the attach)
 *                                                            totals
 *   stacks(id, function, file, line, retained_bytes, retained_objects,
 *          allocated_bytes, allocated_objects, samples, live_samples, tid,
 *          oldest_age_ns)           function/file/line: the display frame
 *   frames(stack, position, function, file, line, module, inlined, address,
 *          display)                 position 0 is the innermost frame
 *   allocations(address, size, weight_bytes, weight_objects, age_ns, tid,
 *               stack)              the live sampled allocations
 *   lifetimes(stack, upto_ns, count, bytes)   freed samples by lifetime
 *                                   bucket (upto_ns NULL: over an hour)
 *   threads(tid, name, state, allocated_bytes, allocated_objects,
 *           freed_bytes, freed_objects)       exact (freed_bytes NULL
 *                                             when sampling)
 *   alarms(id, size, time, tid, failed), alarm_frames(alarm, position, ...
 *          as frames)
 *   modules(id, path, base, lo, hi, build_id, state)
 *
 * Indexes: frames(stack, position), frames(function), allocations(stack),
 * lifetimes(stack), alarm_frames(alarm).
 */
#ifndef YMTOP_SQLOUT_H
#define YMTOP_SQLOUT_H

#include <stddef.h>

#include "common.h"

/* Fill the database at path, which must exist and be empty (the caller
 * created it, see report_save).  0, or -1 with one line in err. */
int sqlout_write(const char *path, struct model *m, struct sym *s,
		 const struct report_opts *o, char *err, size_t errlen);

#endif
