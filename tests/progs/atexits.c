/* Registers more exit handlers than glibc's first static block holds
 * (32), so that atexit's calloc of the next block runs with the
 * exit-handler lock held.  Nothing else allocates before: with a mean gap
 * of one byte that calloc is the first sample, and makes the agent's
 * segment there (test_lazy).  Exits 3 when the segment
 * /dev/shm/ymtop-PID<argv[1]> exists then, 4 when it does not. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void handler(void)
{
}

int main(int argc, char **argv)
{
	for (int i = 0; i < 40; i++)
		if (atexit(handler) != 0)
			return 1;
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/ymtop-%d%s", (int)getpid(),
		 argc > 1 ? argv[1] : "");
	return access(path, F_OK) == 0 ? 3 : 4;
}
