/* Injection target under a seccomp filter that makes open and openat fail
 * with EPERM (as a sandboxed service's filter might): ymtop -p must fail
 * with a clear message and leave the process running as before.
 *   prints "ready"; reads a line; prints "got <line>"; exits 5. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int forbid_open(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	};
	struct sock_fprog prog = { sizeof f / sizeof f[0], f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

int main(void)
{
	if (forbid_open() != 0) {
		perror("seccomp");
		return 9;
	}
	printf("ready\n");
	fflush(stdout);
	char line[256];
	if (!fgets(line, sizeof line, stdin))
		return 8;
	printf("got %s", line);
	return 5;
}
