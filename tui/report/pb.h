/*
 * pb: the little of Protocol Buffers' wire format that pprof needs, into a
 * growing memory buffer.  Varints (wire type 0) and length-delimited
 * fields (wire type 2: strings, bytes, packed repeated varints, nested
 * messages).  A nested message is opened with pb_open, filled, and closed
 * with pb_close, which writes its length in front of it.
 *
 * Errors are sticky: after a failed allocation every call is a no-op and
 * pb.err is set; check it once at the end.
 */
#ifndef YMTOP_PB_H
#define YMTOP_PB_H

#include <stddef.h>
#include <stdint.h>

struct pb {
	uint8_t *buf;
	size_t   len, cap;
	int      err;          /* non-zero once memory ran out */
};

void pb_init(struct pb *b);
void pb_free(struct pb *b);

void pb_varint(struct pb *b, uint64_t v);                 /* raw varint */
void pb_uint(struct pb *b, uint32_t field, uint64_t v);   /* uint64, int64 >= 0 */
void pb_int(struct pb *b, uint32_t field, int64_t v);     /* int64 (two's complement) */
void pb_bytes(struct pb *b, uint32_t field, const void *p, size_t n);
void pb_string(struct pb *b, uint32_t field, const char *s);
/* Packed repeated uint64 / int64 (int64 values are cast). */
void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n);

/* Bytes already encoded (fields of the same message). */
void pb_raw(struct pb *b, const void *p, size_t n);

/* Nested message: pb_open returns a mark for pb_close. */
size_t pb_open(struct pb *b, uint32_t field);
void pb_close(struct pb *b, size_t mark);

#endif
