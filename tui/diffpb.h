/*
 * diffpb: a pprof profile (profile.proto, gzip-compressed or not, as
 * ymtop writes for -f pprof and /debug/pprof/heap, and as Go's heap
 * profiles are) read into the shape of ymtop's JSON report, for `ymtop
 * diff` (diff.h; man ymtop(1), DIFF).
 *
 * The file is untrusted: the decompressed size, the number of stacks and
 * the frames of a stack and of all stacks are bounded (diff.h); every
 * length, index and id is checked; anything else is refused with one
 * line.
 */
#ifndef YMTOP_DIFFPB_H
#define YMTOP_DIFFPB_H

#include <stddef.h>

#include <jansson.h>

/* Whether buf (len bytes) looks like a profile rather than JSON: the
 * gzip magic, or a protobuf's first field (sample_type, field 1,
 * length-delimited). */
int diffpb_is_profile(const unsigned char *buf, size_t len);

/* The profile in buf as a new JSON object: {"report_version": 1,
 * "name", "time", "stacks": [{"kind", "retained_bytes" (inuse_space),
 * "allocated_bytes" (alloc_space, 0 without), "frames": [{"module",
 * "function", "file", "line"}] innermost first, the inlined ones of a
 * location before its caller, "display_frame"}]}.  0 and *root, or -1
 * with one line in err. */
int diffpb_read(const unsigned char *buf, size_t len, json_t **root,
		char *err, size_t errlen);

#endif
