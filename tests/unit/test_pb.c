/* The protobuf encoder (tui/report/pb.c) and the XML escaping (tui/fmt.c) that
 * the pprof and svg writers stand on, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "report/pb.h"

static void varints(void **state)
{
	(void)state;
	struct pb b;
	pb_init(&b);
	pb_varint(&b, 0);
	pb_varint(&b, 1);
	pb_varint(&b, 127);
	pb_varint(&b, 128);
	pb_varint(&b, 150);
	pb_varint(&b, UINT64_MAX);
	static const uint8_t want[] = {
		0x00, 0x01, 0x7f, 0x80, 0x01, 0x96, 0x01,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
	};
	assert_int_equal(b.len, sizeof want);
	assert_memory_equal(b.buf, want, sizeof want);
	assert_int_equal(b.err, 0);
	pb_free(&b);
}

static void fields(void **state)
{
	(void)state;
	struct pb b;
	pb_init(&b);
	pb_uint(&b, 1, 150);            /* the protobuf docs' example */
	pb_int(&b, 2, -1);              /* int64: ten bytes */
	pb_string(&b, 6, "");
	pb_string(&b, 6, "testing");
	uint64_t v[] = { 3, 270, 86942 };
	pb_packed(&b, 4, v, 3);
	static const uint8_t want[] = {
		0x08, 0x96, 0x01,
		0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x32, 0x00,
		0x32, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g',
		0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05,
	};
	assert_int_equal(b.len, sizeof want);
	assert_memory_equal(b.buf, want, sizeof want);
	pb_free(&b);
}

static void nested(void **state)
{
	(void)state;
	struct pb b;
	pb_init(&b);
	/* Outer message with an inner one; the outer body is over 127
	 * bytes, so its length takes two bytes and the body moves. */
	size_t outer = pb_open(&b, 4);
	pb_uint(&b, 1, 7);
	size_t inner = pb_open(&b, 4);
	pb_uint(&b, 1, 9);
	pb_close(&b, inner);
	char big[200];
	memset(big, 'x', sizeof big);
	pb_bytes(&b, 5, big, sizeof big);
	pb_close(&b, outer);
	/* tag 4/LEN, length 2 + 4 + 3 + 200 = 209 = 0xd1 0x01 */
	assert_int_equal(b.len, 2 + 209 + 1);
	const uint8_t *p = b.buf;
	assert_int_equal(p[0], 0x22);
	assert_int_equal(p[1], 0xd1);
	assert_int_equal(p[2], 0x01);
	static const uint8_t body[] = { 0x08, 0x07, 0x22, 0x02, 0x08, 0x09, 0x2a, 0xc8, 0x01 };
	assert_memory_equal(p + 3, body, sizeof body);
	assert_int_equal(p[3 + sizeof body], 'x');
	assert_int_equal(p[b.len - 1], 'x');
	pb_raw(&b, "\x01\x02", 2);
	assert_int_equal(b.len, 214);
	pb_free(&b);
}

/* What an escaping function writes for s. */
static char *escaped(void (*put)(FILE *, const char *), const char *s)
{
	static char out[256];
	memset(out, 0, sizeof out);
	FILE *f = fmemopen(out, sizeof out, "w");
	assert_non_null(f);
	put(f, s);
	fclose(f);
	return out;
}

static char *xml(const char *s)
{
	return escaped(fmt_xml_string, s);
}

static char *json(const char *s)
{
	return escaped(fmt_json_string, s);
}

static void xml_escaping(void **state)
{
	(void)state;
	assert_string_equal(xml("std::vector<int, A&B>::\"at\"'s"),
			    "std::vector&lt;int, A&amp;B&gt;::&quot;at&quot;&apos;s");
	assert_string_equal(xml("tab\there\x01\x7f"), "tab?here??");
	/* Valid UTF-8 stays; bad bytes, overlong forms, surrogates and
	 * sequences cut short become '?'. */
	assert_string_equal(xml("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(xml("\xff\xc0\xaf|\xed\xa0\x80|\xe2\x82"), "???|???|??");
	assert_string_equal(xml(""), "");
	assert_string_equal(xml(NULL), "");
}

static void json_escaping(void **state)
{
	(void)state;
	assert_string_equal(json("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
	/* Valid UTF-8 stays; every byte that does not start a valid sequence
	 * becomes U+FFFD, so a JSON parser never sees invalid UTF-8. */
	assert_string_equal(json("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
	assert_string_equal(json("\xff|\xed\xa0\x80|\xe2\x82"),
			    "\"\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\"");
	assert_string_equal(json(NULL), "null");
}

static char *visf(const char *s)
{
	return escaped(fmt_vis_fputs, s);
}

/* fmt_vis: what the target names may hold never reaches a terminal raw,
 * and ordinary names come out unchanged. */
static void vis_escaping(void **state)
{
	(void)state;
	char b[256];
	const char *plain[] = { "main", "std::vector<int>::at(unsigned long) const",
				"(anonymous namespace)::f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
				"/usr/lib/x86_64-linux-gnu/libc.so.6", "" };
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
		assert_string_equal(fmt_vis(plain[i], b, sizeof b), plain[i]);
		assert_string_equal(visf(plain[i]), plain[i]);
	}
	/* ESC, BEL, OSC title, CSI as a C1 control, DEL, tab, newline. */
	assert_string_equal(fmt_vis("\x1b[31mred\x1b]0;title\x07", b, sizeof b),
			    "\\033[31mred\\033]0;title\\a");
	assert_string_equal(fmt_vis("a\xc2\x9b" "2J\x7f\t\n", b, sizeof b),
			    "a\\302\\2332J\\177\\t\\n");
	/* Invalid UTF-8 byte by byte; a backslash is doubled (unambiguous). */
	assert_string_equal(fmt_vis("\xff\xe2\x82|a\\b", b, sizeof b),
			    "\\377\\342\\202|a\\\\b");
	assert_string_equal(visf("\x1b" "c"), "\\033c");
	assert_string_equal(fmt_vis(NULL, b, sizeof b), "");
	/* Cut at a whole escape or character, never inside one. */
	assert_string_equal(fmt_vis("ab\x1b", b, 5), "ab");
	assert_string_equal(fmt_vis("a\xc3\xa9", b, 3), "a");
	assert_string_equal(fmt_vis("abc", b, 1), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(varints),
		cmocka_unit_test(fields),
		cmocka_unit_test(nested),
		cmocka_unit_test(xml_escaping),
		cmocka_unit_test(json_escaping),
		cmocka_unit_test(vis_escaping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
