/*
 * pb: the little of Protocol Buffers' wire format that pprof needs, into a
 * growing buffer with sticky errors (see pb.h).
 */
#include <stdlib.h>
#include <string.h>

#include "pb.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void pb_init(struct pb *b)
{
	memset(b, 0, sizeof *b);
}

void pb_free(struct pb *b)
{
	free(b->buf);
	memset(b, 0, sizeof *b);
}

static int reserve(struct pb *b, size_t n)
{
	if (b->err)
		return -1;
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->buf, cap);
	if (!p) {
		b->err = 1;
		return -1;
	}
	b->buf = p;
	b->cap = cap;
	return 0;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p = (uint8_t)v;
}

void pb_varint(struct pb *b, uint64_t v)
{
	size_t n = varint_len(v);
	if (reserve(b, n) != 0)
		return;
	put_varint(b->buf + b->len, v);
	b->len += n;
}

static void tag(struct pb *b, uint32_t field, unsigned wire)
{
	pb_varint(b, ((uint64_t)field << 3) | wire);
}

void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	tag(b, field, WIRE_VARINT);
	pb_varint(b, v);
}

void pb_int(struct pb *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

void pb_bytes(struct pb *b, uint32_t field, const void *p, size_t n)
{
	tag(b, field, WIRE_LEN);
	pb_varint(b, n);
	pb_raw(b, p, n);
}

void pb_raw(struct pb *b, const void *p, size_t n)
{
	if (n == 0 || reserve(b, n) != 0)
		return;
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

void pb_string(struct pb *b, uint32_t field, const char *s)
{
	pb_bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += varint_len(v[i]);
	tag(b, field, WIRE_LEN);
	pb_varint(b, total);
	for (size_t i = 0; i < n; i++)
		pb_varint(b, v[i]);
}

size_t pb_open(struct pb *b, uint32_t field)
{
	tag(b, field, WIRE_LEN);
	return b->len;
}

/* The body was written right after the tag; make room for its length
 * (a minimal varint) and move the body behind it. */
void pb_close(struct pb *b, size_t mark)
{
	if (b->err || mark > b->len)
		return;
	size_t body = b->len - mark, n = varint_len(body);
	if (reserve(b, n) != 0)
		return;
	memmove(b->buf + mark + n, b->buf + mark, body);
	put_varint(b->buf + mark, body);
	b->len += n;
}
