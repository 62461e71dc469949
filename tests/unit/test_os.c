/*
 * Unit tests for the agent's one reader of /proc/self/maps
 * (injector/agent/os.c, os_maps_walk): synthetic maps text with and
 * without paths, " (deleted)" files, lines split across reads at every
 * byte, a path longer than the walker's buffer (its rest never read as a
 * line of its own), a last line without its newline, malformed lines,
 * stopping early; and this process's own maps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/os.h"

#define MAX_SEEN 16

struct seen {
	int n;
	struct {
		uint64_t start, end, offset, inode;
		uint32_t maj, min;
		char perms[5];
		char path[128];
		size_t path_len;
		int cut;
	} l[MAX_SEEN];
	int stop_at;   /* return 7 at this line (1-based); 0: never */
};

static int record(const struct os_maps_line *l, void *arg)
{
	struct seen *s = arg;
	if (s->n < MAX_SEEN) {
		s->l[s->n].start = l->start;
		s->l[s->n].end = l->end;
		s->l[s->n].offset = l->offset;
		s->l[s->n].inode = l->inode;
		s->l[s->n].maj = l->dev_major;
		s->l[s->n].min = l->dev_minor;
		snprintf(s->l[s->n].perms, sizeof s->l[s->n].perms, "%s", l->perms);
		snprintf(s->l[s->n].path, sizeof s->l[s->n].path, "%s", l->path);
		s->l[s->n].path_len = strlen(l->path);
		s->l[s->n].cut = l->path_cut;
	}
	s->n++;
	return s->n == s->stop_at ? 7 : 0;
}

static const char TEXT[] =
	"55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1835106                    /usr/bin/cat\n"
	"7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 \n"
	"7f1e30000000-7f1e30001000 rw-s 00000000 00:05 42                         /memfd:ymagent-trampoline (deleted)\n"
	"7f1e31000000-7f1e31002000 r-xp 0001a000 08:12 99  /tmp/a b/lib.so (deleted)\n"
	"7ffd9d5e1000-7ffd9d602000 rw-p 00000000 00:00 0                          [stack]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static void check_text(const struct seen *s)
{
	assert_int_equal(s->n, 6);
	assert_true(s->l[0].start == 0x55d0c0a00000ULL && s->l[0].end == 0x55d0c0a21000ULL);
	assert_string_equal(s->l[0].perms, "r--p");
	assert_int_equal(s->l[0].maj, 0xfd);
	assert_int_equal(s->l[0].min, 1);
	assert_int_equal(s->l[0].inode, 1835106);
	assert_string_equal(s->l[0].path, "/usr/bin/cat");
	/* Anonymous: no path, device and inode 0. */
	assert_string_equal(s->l[1].path, "");
	assert_true(s->l[1].start == 0x7f1e2c000000ULL && s->l[1].inode == 0);
	assert_string_equal(s->l[1].perms, "rw-p");
	assert_string_equal(s->l[2].path, "/memfd:ymagent-trampoline (deleted)");
	assert_string_equal(s->l[2].perms, "rw-s");
	assert_string_equal(s->l[3].path, "/tmp/a b/lib.so (deleted)");
	assert_int_equal(s->l[3].offset, 0x1a000);
	assert_int_equal(s->l[3].maj, 8);
	assert_int_equal(s->l[3].min, 0x12);
	assert_string_equal(s->l[4].path, "[stack]");
	/* The last line, without its newline. */
	assert_true(s->l[5].start == 0xffffffffff600000ULL);
	assert_string_equal(s->l[5].path, "[vsyscall]");
	for (int i = 0; i < 6; i++)
		assert_false(s->l[i].cut);
}

/* The text through a pipe, whole. */
static int walk_text(const char *t, size_t len, struct seen *s)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_true(len < 65536);   /* a pipe's buffer: no writer thread */
	assert_int_equal(write(p[1], t, len), (ssize_t)len);
	close(p[1]);
	int r = os_maps_walk_fd(p[0], record, s);
	close(p[0]);
	return r;
}

static void lines_parse_with_and_without_paths(void **state)
{
	(void)state;
	struct seen s = { 0 };
	assert_int_equal(walk_text(TEXT, strlen(TEXT), &s), 0);
	check_text(&s);
}

/* Each read returns one packet: the text cut at every chunk size from 1
 * byte up, so every line is split across reads at every position. */
static void lines_split_across_reads(void **state)
{
	(void)state;
	size_t len = strlen(TEXT);
	for (size_t chunk = 1; chunk <= 97; chunk++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
		/* A child sends: the socket queues few packets. */
		pid_t child = fork();
		assert_true(child >= 0);
		if (child == 0) {
			close(sv[1]);
			for (size_t at = 0; at < len; at += chunk) {
				size_t n = len - at < chunk ? len - at : chunk;
				if (send(sv[0], TEXT + at, n, 0) != (ssize_t)n)
					_exit(1);
			}
			_exit(0);
		}
		close(sv[0]);
		struct seen s = { 0 };
		assert_int_equal(os_maps_walk_fd(sv[1], record, &s), 0);
		close(sv[1]);
		int st;
		assert_int_equal(waitpid(child, &st, 0), child);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		check_text(&s);
	}
}

/* A path longer than the buffer (a file deep in long directory names,
 * up to PATH_MAX and " (deleted)"): its line comes once, cut, and the rest
 * of the path, even one that looks like a maps line, is never a line. */
static void a_line_longer_than_the_buffer(void **state)
{
	(void)state;
	static char t[20000];
	size_t n = 0;
	n += (size_t)snprintf(t + n, sizeof t - n,
			      "1000-2000 r--p 00000000 08:01 12 /first\n");
	size_t second = n;
	n += (size_t)snprintf(t + n, sizeof t - n,
			      "3000-4000 rw-p 00001000 08:01 77 /");
	while (n < second + 4096)
		t[n++] = 'd';
	/* Right after the buffer's worth of the line (4096 bytes): what a
	 * reader that took the rest of the line for a new one would parse. */
	n += (size_t)snprintf(t + n, sizeof t - n,
			      "5000-6000 rw-p 00000000 00:00 0 /fake");
	while (n < 9000)
		t[n++] = 'e';
	n += (size_t)snprintf(t + n, sizeof t - n, " (deleted)\n"
			      "7000-8000 r-xp 00000000 08:01 13 /last\n");
	struct seen s = { 0 };
	assert_int_equal(walk_text(t, n, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.l[0].path, "/first");
	assert_false(s.l[0].cut);
	assert_true(s.l[1].start == 0x3000 && s.l[1].end == 0x4000);
	assert_int_equal(s.l[1].offset, 0x1000);
	assert_string_equal(s.l[1].perms, "rw-p");
	assert_true(s.l[1].cut);
	assert_true(s.l[1].path_len > 3000 && s.l[1].path_len < 4096);
	assert_int_equal(s.l[1].path[0], '/');
	assert_int_equal(s.l[1].path[1], 'd');
	assert_string_equal(s.l[2].path, "/last");
	assert_false(s.l[2].cut);
	assert_true(s.l[2].start == 0x7000);
}

static void malformed_lines_are_skipped(void **state)
{
	(void)state;
	static const char t[] =
		"\n"
		"zz-2000 r--p 00000000 08:01 12 /a\n"
		"1000 r--p 00000000 08:01 12 /b\n"
		"1000-2000 r--p\n"
		"1000-2000 rw 00000000 08:01 12 /c\n"
		"1000-2000 r--p 00000000 0801 12 /d\n"
		"11111111111111111-2000 r--p 00000000 08:01 12 /e\n"
		"1000-2000 r--p 00000000 08:01 /f\n"
		"a000-b000 r--p 00000000 08:01 12 /good\n";
	struct seen s = { 0 };
	assert_int_equal(walk_text(t, strlen(t), &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.l[0].path, "/good");
}

static void the_callback_stops_the_walk(void **state)
{
	(void)state;
	struct seen s = { .stop_at = 3 };
	assert_int_equal(walk_text(TEXT, strlen(TEXT), &s), 7);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.l[2].path, "/memfd:ymagent-trampoline (deleted)");
}

struct find {
	uintptr_t a;
	int found, writable, lines;
};

static int find_line(const struct os_maps_line *l, void *arg)
{
	struct find *f = arg;
	f->lines++;
	if (f->a >= l->start && f->a < l->end) {
		f->found++;
		f->writable = l->perms[1] == 'w';
	}
	return 0;
}

/* This process: a heap block's and a function's mappings, each found
 * once, with their permissions. */
static void this_process_maps(void **state)
{
	(void)state;
	char *heap = malloc(64);
	assert_non_null(heap);
	struct find f = { (uintptr_t)heap, 0, 0, 0 };
	assert_int_equal(os_maps_walk(find_line, &f), 0);
	assert_int_equal(f.found, 1);
	assert_true(f.writable);
	assert_true(f.lines > 5);
	struct find g = { (uintptr_t)&this_process_maps, 0, 0, 0 };
	assert_int_equal(os_maps_walk(find_line, &g), 0);
	assert_int_equal(g.found, 1);
	assert_false(g.writable);
	free(heap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lines_parse_with_and_without_paths),
		cmocka_unit_test(lines_split_across_reads),
		cmocka_unit_test(a_line_longer_than_the_buffer),
		cmocka_unit_test(malformed_lines_are_skipped),
		cmocka_unit_test(the_callback_stops_the_walk),
		cmocka_unit_test(this_process_maps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
