/*
 * Unit tests for the Prometheus label values (tui/report/prometheus.c):
 * escaped as the exposition format says, valid UTF-8, bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgmem.h"
#include "proc.h"
#include "report/prometheus.h"

static void escapes(void **state)
{
	(void)state;
	char b[PROM_LABEL_BUF];
	assert_string_equal(prometheus_label("a\\b\"c\nd", b, sizeof b),
			    "a\\\\b\\\"c\\nd");
	assert_string_equal(prometheus_label("x\ty\x7fz\x01", b, sizeof b), "x?y?z?");
	assert_string_equal(prometheus_label(NULL, b, sizeof b), "");
	assert_string_equal(prometheus_label("std::vector<int>::push_back", b,
					     sizeof b), "std::vector<int>::push_back");
}

static void utf8(void **state)
{
	(void)state;
	char b[PROM_LABEL_BUF];
	/* Valid: kept; overlong, surrogate, stray continuation, cut: '?'. */
	assert_string_equal(prometheus_label("caf\xc3\xa9 \xe2\x82\xac", b, sizeof b),
			    "caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(prometheus_label("\xc0\xaf", b, sizeof b), "??");
	assert_string_equal(prometheus_label("\xed\xa0\x80", b, sizeof b), "???");
	assert_string_equal(prometheus_label("\x80x", b, sizeof b), "?x");
	assert_string_equal(prometheus_label("\xe2\x82", b, sizeof b), "??");
}

static void bounded(void **state)
{
	(void)state;
	char raw[4096], b[PROM_LABEL_BUF];
	memset(raw, '"', sizeof raw - 1);
	raw[sizeof raw - 1] = '\0';
	prometheus_label(raw, b, sizeof b);
	/* PROM_LABEL_MAX source bytes, each escaped to two, then "...". */
	assert_int_equal(strlen(b), 2 * PROM_LABEL_MAX + 3);
	assert_string_equal(b + 2 * PROM_LABEL_MAX, "...");
	/* A multi-byte character is never cut in half. */
	for (size_t i = 0; i + 2 < sizeof raw; i += 3)
		memcpy(raw + i, "\xe2\x82\xac", 3);
	raw[sizeof raw - 1 - (sizeof raw - 1) % 3] = '\0';
	prometheus_label(raw, b, sizeof b);
	size_t n = strlen(b);
	assert_true(n <= PROM_LABEL_MAX + 3);
	assert_string_equal(b + n - 3, "...");
	assert_int_equal((n - 3) % 3, 0);
	/* Too small a buffer: nothing written past it. */
	char tiny[8] = "xxxxxxx";
	assert_string_equal(prometheus_label("abc", tiny, sizeof tiny), "");
}

/* The cgroup label's source: the v1 memory controller's path when there
 * is one (hybrid hosts), else the unified hierarchy's, else "". */
static void cgroup_path(void **state)
{
	(void)state;
	char b[64];
	proc_cgroup_parse("0::/system.slice/postgresql@15-main.service\n", b, sizeof b);
	assert_string_equal(b, "/system.slice/postgresql@15-main.service");
	proc_cgroup_parse("9:name=systemd:/\n4:memory:/kubepods/pod1/c2\n"
			  "2:cpu,cpuacct:/x\n0::/\n", b, sizeof b);
	assert_string_equal(b, "/kubepods/pod1/c2");
	proc_cgroup_parse("3:cpuset,memory,blkio:/docker/abc", b, sizeof b);
	assert_string_equal(b, "/docker/abc");
	/* "memory" only as a whole controller name; the path may hold ':'. */
	proc_cgroup_parse("5:memoryx:/no\n0::/a:b\n", b, sizeof b);
	assert_string_equal(b, "/a:b");
	proc_cgroup_parse("garbage\n:\n::\n", b, sizeof b);
	assert_string_equal(b, "");
	proc_cgroup_parse("", b, sizeof b);
	assert_string_equal(b, "");
	/* Bounded: cut to the buffer. */
	char small[8];
	proc_cgroup_parse("0::/0123456789\n", small, sizeof small);
	assert_string_equal(small, "/012345");
	/* Our own, read from /proc. */
	assert_int_equal(proc_cgroup(getpid(), b, sizeof b), 0);
	assert_true(b[0] == '/' || b[0] == '\0');
}

/* The memory files of a cgroup (tui/cgmem.c): limits ("max", v1's
 * "no limit" number), keyed counters, PSI lines; anything else refused. */
static void cgroup_memory_files(void **state)
{
	(void)state;
	uint64_t v;
	int unl;
	assert_int_equal(cgmem_parse_limit("max\n", &v, &unl), 0);
	assert_true(unl);
	assert_int_equal(cgmem_parse_limit("100663296\n", &v, &unl), 0);
	assert_true(!unl && v == 100663296);
	assert_int_equal(cgmem_parse_limit("9223372036854771712\n", &v, &unl), 0);
	assert_true(unl);
	assert_int_equal(cgmem_parse_limit("-1\n", &v, &unl), -1);
	assert_int_equal(cgmem_parse_limit("maxi", &v, &unl), -1);
	const char *ev = "low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n";
	assert_int_equal(cgmem_parse_key(ev, "high", &v), 0);
	assert_true(v == 12);
	assert_int_equal(cgmem_parse_key(ev, "oom_kill", &v), 0);
	assert_true(v == 1);
	assert_int_equal(cgmem_parse_key(ev, "oom", &v), 0);
	assert_true(v == 1);
	assert_int_equal(cgmem_parse_key(ev, "missing", &v), -1);
	assert_int_equal(cgmem_parse_key("max x\n", "max", &v), -1);
	struct model_cgroup c;
	memset(&c, 0, sizeof c);
	assert_int_equal(cgmem_parse_psi("some avg10=1.50 avg60=0.25 avg300=0.00 total=123\n"
					 "full avg10=0.75 avg60=0.00 avg300=0.00 total=45\n", &c), 0);
	assert_true(c.some10 == 1.5 && c.some60 == 0.25 && c.full10 == 0.75);
	assert_int_equal(cgmem_parse_psi("some avg10=1.50 avg60=0.25 avg300=0.00 total=1\n", &c), -1);
	assert_int_equal(cgmem_parse_psi("some avg10=500 avg60=0 avg300=0 total=1\n"
					 "full avg10=0 avg60=0 avg300=0 total=1\n", &c), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escapes),
		cmocka_unit_test(utf8),
		cmocka_unit_test(bounded),
		cmocka_unit_test(cgroup_path),
		cmocka_unit_test(cgroup_memory_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
