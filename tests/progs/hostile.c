/*
 * hostile: a target whose names hold terminal escape sequences, for the
 * escaping tests (tests/integration/test_escape.py).  The test runs it
 * under a file name with escapes too.
 *
 *   - four threads named with escapes (pthread_setname_np): CSI color,
 *     OSC window title ended by BEL, C1 CSI (U+009B) erase, RIS reset;
 *     each holds 4 MiB and waits.  /proc shows a live thread's name with
 *     '?' for what is not printable (proc.c); the agent keeps the raw name
 *     of an exited thread (PR_GET_NAME): so a fifth thread, named with an
 *     OSC title, holds 4 MiB and exits before "ready"
 *   - a function named with an asm label holding an OSC title sequence
 *     (hostile_symbol): 16 MiB
 *   - a function whose source file name (#line) holds a CSI sequence:
 *     16 MiB
 * prints "ready", then exits on a line (or EOF) on stdin.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#define NOINLINE __attribute__((noinline))

static void **held;
static size_t nheld;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void keep(void *p)
{
	pthread_mutex_lock(&lock);
	void **h = realloc(held, (nheld + 1) * sizeof *h);
	if (!h)
		abort();
	held = h;
	held[nheld++] = p;
	pthread_mutex_unlock(&lock);
}

/* A function whose symbol is "hostile_\e]0;pwned\a_symbol" (an OSC
 * window title): written in assembly, since GCC hands an asm label to the
 * assembler unquoted, which rejects it.  It holds one 16 MiB block (always
 * sampled) and is its display frame.  C calls it through hostile_fn. */
void keep_block(void *p);
void keep_block(void *p)
{
	keep(p);
}

#define HOSTILE "\"hostile_\x1b]0;pwned\x07_symbol\""
#if defined(__x86_64__)
extern void (*const hostile_fn)(void);
__asm__(".text\n"
	".p2align 4\n"
	".type " HOSTILE ", @function\n"
	HOSTILE ":\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"mov %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"mov $16777216, %edi\n"
	"call malloc@PLT\n"
	"mov %rax, %rdi\n"
	"call keep_block\n"
	"pop %rbp\n"
	".cfi_def_cfa %rsp, 8\n"
	"ret\n"
	".cfi_endproc\n"
	".size " HOSTILE ", .-" HOSTILE "\n"
	".section .data.rel.ro,\"aw\"\n"
	".p2align 3\n"
	".globl hostile_fn\n"
	"hostile_fn: .quad " HOSTILE "\n"
	".text\n");
#else
NOINLINE static void hostile_plain(void)
{
	keep_block(malloc(16 << 20));
}
static void (*const hostile_fn)(void) = hostile_plain;
#endif

#line 1 "hostile\033[31m_file.c"
NOINLINE static void file_site(void)
{
	for (int i = 0; i < 256; i++)
		keep(malloc(65536));   /* 16 MiB */
}

#line 60 "hostile.c"
static pthread_barrier_t named;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;

NOINLINE static void thread_site(void)
{
	for (int i = 0; i < 64; i++)
		keep(malloc(65536));   /* 4 MiB */
}

static void *worker(void *arg)
{
	(void)arg;
	thread_site();
	pthread_barrier_wait(&named);
	pthread_mutex_lock(&done_lock);
	while (!done)
		pthread_cond_wait(&done_cond, &done_lock);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

static void *quitter(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "\x1b]2;gone\x07", 0, 0, 0);
	thread_site();
	return NULL;
}

int main(void)
{
	/* At most 15 bytes each (the kernel's TASK_COMM_LEN). */
	static const char *const names[] = {
		"\x1b[31mred\x1b[0m", "\x1b]0;pwned\x07", "\xc2\x9b" "2Jgone", "\x1b" "c\x1b[2J",
	};
	enum { N = sizeof names / sizeof *names };
	pthread_t t[N];
	pthread_barrier_init(&named, NULL, N + 1);
	for (int i = 0; i < N; i++) {
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			return 1;
		pthread_setname_np(t[i], names[i]);
	}
	pthread_t q;
	if (pthread_create(&q, NULL, quitter, NULL) != 0 || pthread_join(q, NULL) != 0)
		return 1;
	hostile_fn();
	file_site();
	pthread_barrier_wait(&named);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	(void)fgets(line, sizeof line, stdin);
	pthread_mutex_lock(&done_lock);
	done = 1;
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&done_lock);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}
