/*
 * ymcontrol: a reader's control requests (shm/control.c) from the command
 * line, for the tests that ask for what ymtop itself never asks:
 *
 *   ymcontrol reset SEGMENT PID   forget every sample (shm_control_reset)
 *
 * Exits 0 when the request was written, 1 with a line on stderr if not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

int main(int argc, char **argv)
{
	if (argc != 4 || strcmp(argv[1], "reset") != 0) {
		fprintf(stderr, "usage: ymcontrol reset SEGMENT PID\n");
		return 2;
	}
	int fd = open(argv[2], O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "ymcontrol: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	struct shm_reader r;
	char err[256];
	if (shm_reader_open_fd(&r, fd, (pid_t)atoi(argv[3]), (uid_t)-1, err,
			       sizeof err) != 0) {
		fprintf(stderr, "ymcontrol: %s\n", err);
		return 1;
	}
	int rc = shm_control_reset(&r);
	shm_reader_close(&r);
	if (rc != 0) {
		fprintf(stderr, "ymcontrol: reset: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
