/*
 * slowload: an LD_AUDIT library that holds the dynamic loader for
 * 800 milliseconds before it maps the program's
 * libraries: a process caught the moment after its exec, with ld.so
 * mapped and libc not yet (tests/integration/test_inject.py).
 *
 * Built without libc (-nostdlib): the loader would map a libc for the
 * audit namespace first, and the moment would be gone.  Its one system
 * call is made by hand; it reads no environment (auditors get none before
 * libc), the pause is fixed.
 */
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
	long rc;
	__asm__ volatile("syscall"
			 : "=a"(rc)
			 : "a"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
			 : "rcx", "r11", "memory");
	(void)rc;
}

unsigned int la_version(unsigned int version)
{
	(void)version;
	pause_ms(800);
	return LAV_CURRENT;
}
