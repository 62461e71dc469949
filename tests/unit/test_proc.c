/*
 * Unit tests for ymtop's one /proc/PID/stat parser (tui/proc.c:
 * proc_stat_parse, proc_stat_read), which proc_read, fleet_ppid and the
 * injector's choice of a thread share: hostile command names, truncated
 * lines, kernels without field 52, and this process read for real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet.h"
#include "proc.h"

/* 52 fields as Linux 6.1 writes them: fields 5.. are 5, 6, 7... but for
 * flags (9), starttime (22), vsize (23), rss (24), startstack (28),
 * env_start (50), env_end (51) and exit_code (52). */
static void line(char *buf, size_t len, const char *comm, int with52)
{
	int n = snprintf(buf, len, "4242 (%s) S 77", comm);
	for (int f = 5; f <= (with52 ? 52 : 51); f++) {
		unsigned long long v = (unsigned long long)f;
		if (f == 9)
			v = 0x00200000 | 0x40;   /* PF_KTHREAD and another */
		else if (f == 22)
			v = 123456789ULL;
		else if (f == 23)
			v = 52428800;
		else if (f == 24)
			v = 2048;
		else if (f == 28)
			v = 140737488347136ULL;
		else if (f == 50)
			v = 140737488349000ULL;
		else if (f == 51)
			v = 140737488351000ULL;
		else if (f == 52)
			v = 256;
		n += snprintf(buf + n, len - (size_t)n, " %llu", v);
	}
	snprintf(buf + n, len - (size_t)n, "\n");
}

static void fields_are_read_by_number(void **state)
{
	(void)state;
	char buf[1024];
	struct proc_stat st;
	line(buf, sizeof buf, "redis-server", 1);
	assert_int_equal(proc_stat_parse(buf, &st), 0);
	assert_string_equal(st.comm, "redis-server");
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.ppid, 77);
	assert_int_equal(st.kthread, 1);
	assert_int_equal(st.start_ticks, 123456789);
	assert_int_equal(st.vsize, 52428800);
	assert_int_equal(st.rss_pages, 2048);
	/* Where the stack and the environment are: what an exec moves
	 * (target.c remembers a process without the agent by them). */
	assert_int_equal(st.start_stack, 140737488347136ULL);
	assert_int_equal(st.env_start, 140737488349000ULL);
	assert_int_equal(st.env_end, 140737488351000ULL);
	assert_int_equal(st.exit_code, 256);
}

static void comm_may_hold_parentheses_and_spaces(void **state)
{
	(void)state;
	char buf[1024];
	struct proc_stat st;
	line(buf, sizeof buf, ") Z 1 (x y", 1);
	assert_int_equal(proc_stat_parse(buf, &st), 0);
	assert_string_equal(st.comm, ") Z 1 (x y");
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.ppid, 77);
	assert_int_equal(st.start_ticks, 123456789);
}

static void missing_fields_read_as_unknown(void **state)
{
	(void)state;
	char buf[1024];
	struct proc_stat st;
	line(buf, sizeof buf, "old", 0);   /* a kernel before 3.5 */
	assert_int_equal(proc_stat_parse(buf, &st), 0);
	assert_int_equal(st.exit_code, -1);
	assert_int_equal(proc_stat_parse("1 (cut)", &st), 0);
	assert_int_equal(st.state, 0);
	assert_int_equal(st.ppid, 0);
	assert_int_equal(st.exit_code, -1);
	assert_int_equal(proc_stat_parse("1 no parentheses S 0", &st), -EPROTO);
	assert_int_equal(proc_stat_parse("1 )backwards( S 0", &st), -EPROTO);
	assert_int_equal(proc_stat_parse("", &st), -EPROTO);
}

static void a_long_comm_is_cut_to_fit(void **state)
{
	(void)state;
	char buf[2048], comm[200];
	struct proc_stat st;
	memset(comm, 'c', sizeof comm - 1);
	comm[sizeof comm - 1] = '\0';
	line(buf, sizeof buf, comm, 1);
	assert_int_equal(proc_stat_parse(buf, &st), 0);
	assert_int_equal(strlen(st.comm), sizeof st.comm - 1);
	assert_int_equal(st.ppid, 77);
}

static void this_process_and_thread_read_for_real(void **state)
{
	(void)state;
	struct proc_stat st;
	assert_int_equal(proc_stat_read(getpid(), 0, &st), 0);
	assert_int_equal(st.state, 'R');
	assert_int_equal(st.ppid, getppid());
	assert_int_equal(st.kthread, 0);
	assert_true(st.start_ticks > 0);
	assert_int_equal(fleet_ppid(getpid()), getppid());
	pid_t tid = (pid_t)syscall(SYS_gettid);
	assert_int_equal(proc_stat_read(getpid(), tid, &st), 0);
	assert_int_equal(st.state, 'R');
	assert_int_equal(proc_stat_read(getpid(), 0x7ffffff0, &st), -ENOENT);
	assert_int_equal(fleet_ppid(0x7ffffff0), 0);
}

/* A process's stat and status kept open (the fleet's refreshes): a read
 * through them is the file made anew (a child's RSS that grew), on the
 * same descriptors; once the child is reaped they read nothing, the
 * path is gone, and the read says so with both closed. */
static void kept_files_read_anew_and_follow_an_exit(void **state)
{
	(void)state;
	int go[2], done[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(go[1]);   /* the parent's close is the child's EOF */
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		/* mmap, not malloc: a malloc'd block that is only written
		 * and read back is dead to the compiler, and clang -O2
		 * (with or without TSan) drops the malloc and the memset, so
		 * the RSS would not grow; an mmap'd one is memory the kernel
		 * sees, which the stores must reach. */
		size_t n = 64u << 20;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(1);
		memset(p, 1, n);
		if (write(done[1], "x", 1) != 1 || read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(p[n - 1] == 1 ? 0 : 1);
	}
	struct proc_files pf;
	proc_files_init(&pf);
	struct proc_info pi;
	memset(&pi, 0, sizeof pi);
	pi.pid = pid;
	assert_int_equal(proc_reread_kept(&pi, &pf), 0);
	int stat_fd = pf.stat_fd, status_fd = pf.status_fd;
	assert_true(stat_fd >= 0 && status_fd >= 0);
	uint64_t rss = pi.rss_bytes, anon = pi.mem.rss_anon;
	char c;
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read(done[0], &c, 1), 1);
	assert_int_equal(proc_reread_kept(&pi, &pf), 0);
	assert_int_equal(pf.stat_fd, stat_fd);
	assert_int_equal(pf.status_fd, status_fd);
	assert_true(pi.rss_bytes >= rss + (60u << 20));
	assert_true(pi.mem.rss_anon >= anon + (60u << 10));   /* kB */
	/* Nothing moved since: status's figures stand (not read again
	 * within PROC_STATUS_S), the same as read. */
	struct proc_info again = pi;
	assert_int_equal(proc_reread_kept(&again, &pf), 0);
	assert_int_equal(again.mem.rss_anon, pi.mem.rss_anon);
	assert_int_equal(again.uid, pi.uid);
	assert_int_equal(again.tgid, pi.tgid);
	assert_int_equal(again.nspid, pi.nspid);
	assert_int_equal(again.nslevels, pi.nslevels);
	close(go[1]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	assert_int_equal(proc_reread_kept(&pi, &pf), -ENOENT);
	assert_int_equal(pf.stat_fd, -1);
	proc_files_close(&pf);
	close(go[0]);
	close(done[0]);
	close(done[1]);
}

/* A maps file as a process in the middle of exit shows it (its mappings
 * torn down, the gate page still listed) names nothing it maps: -ESRCH,
 * "exiting", never 0, "exec'd a program without the agent", which made
 * ymtop call a live segment stale and remove it. */
static void an_exiting_process_maps_nothing_but_the_gate_page(void **state)
{
	(void)state;
	char path[] = "/tmp/test_proc_maps.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0"
	      "                  [vsyscall]\n", f);
	fclose(f);
	assert_int_equal(proc_maps_file_at(path, makedev(0, 1), 42), -ESRCH);

	f = fopen(path, "w");
	assert_non_null(f);
	fputs("7f0000000000-7f0000001000 rw-s 00000000 00:1a 42"
	      "                  /dev/shm/ymtop-1 (deleted)\n"
	      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0"
	      "                  [vsyscall]\n", f);
	fclose(f);
	assert_int_equal(proc_maps_file_at(path, makedev(0, 0x1a), 42), 1);
	assert_int_equal(proc_maps_file_at(path, makedev(0, 0x1a), 43), 0);

	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(proc_maps_file_at(path, makedev(0, 0x1a), 42), -ESRCH);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fields_are_read_by_number),
		cmocka_unit_test(comm_may_hold_parentheses_and_spaces),
		cmocka_unit_test(missing_fields_read_as_unknown),
		cmocka_unit_test(a_long_comm_is_cut_to_fit),
		cmocka_unit_test(this_process_and_thread_read_for_real),
		cmocka_unit_test(kept_files_read_anew_and_follow_an_exit),
		cmocka_unit_test(an_exiting_process_maps_nothing_but_the_gate_page),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
