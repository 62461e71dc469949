/*
 * workload: allocations with known truth, for the integration tests.
 *
 *   workload [STEP...]     runs the steps in order, prints "ready" on
 *                          stdout, then waits for a line (or EOF) on stdin
 *                          and exits 0.  Every site is its own noinline
 *                          function so that stacks are distinct.
 *
 * Steps:
 *   big          hold 64 MiB in 64 KiB blocks        (hold_big)
 *   small        hold 16 MiB in 1000-byte blocks     (hold_small)
 *   churn        100k malloc/free pairs, hold nothing (churn_site)
 *   count:N:S    N malloc(S) then free each          (count_site)
 *   realloc      64 chains grown by realloc to 1 MiB, held (realloc_site)
 *   threads:N    N threads, each holds 1 MiB in 4 KiB blocks (thread_site)
 *   giant:S      one malloc(S); prints "giant ok" or "giant failed errno=N"
 *   calloc       hold 8 MiB from calloc in 8 KiB blocks (calloc_site)
 *   aligned      hold 8 MiB from posix_memalign/aligned_alloc/memalign
 *   fork         fork; the child allocates 4 MiB (child_site) and exits
 *   exec         fork+exec "/bin/true"; waits for it
 *   plugin:PATH  dlopen PATH, call its plugin_alloc(): 8 MiB held inside
 *                the plugin (plugin_site); then dlclose it
 *   heap         prints "heap N": bytes of the malloc heap so far (first
 *                step: then N is what came before main)
 *   budget:N     N rounds, each holds 1 MiB in 64 KiB blocks (hold_budget)
 *                and makes 200000 malloc(256)/free pairs (budget_churn):
 *                long enough at YM_SAMPLE_RATE=4096 for a cost budget to
 *                change the rate while the held bytes accumulate
 *   pause        print "paused", wait for a line on stdin, go on
 *   nowait       do not wait for stdin after "ready"
 *   title        write a process title over argv and the environment, as
 *                nginx's and PostgreSQL's setproctitle do (the last step:
 *                the strings of the steps are gone after it)
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;
static int nowait;

static void **keep(size_t n)
{
	void **v = calloc(n, sizeof *v);
	if (!v)
		abort();
	return v;
}

NOINLINE static void hold_big(void)
{
	void **v = keep(1024);
	for (int i = 0; i < 1024; i++) {
		v[i] = malloc(65536);
		memset(v[i], 1, 64);
	}
	sink = v;
}

NOINLINE static void hold_small(void)
{
	size_t n = 16u * 1024 * 1024 / 1000;
	void **v = keep(n);
	for (size_t i = 0; i < n; i++)
		v[i] = malloc(1000);
	sink = v;
}

NOINLINE static void churn_site(void)
{
	for (int i = 0; i < 100000; i++) {
		void *p = malloc(16 + (size_t)(i % 64) * 16);
		sink = p;
		free(p);
	}
}

NOINLINE static void *hold_budget(void)
{
	void *p = malloc(65536);
	if (p)
		memset(p, 1, 64);
	return p;
}

NOINLINE static void budget_churn(void)
{
	for (int i = 0; i < 200000; i++) {
		void *p = malloc(256);
		sink = p;
		free(p);
	}
}

static void budget_rounds(long n)
{
	void **v = keep((size_t)n * 16);
	for (long i = 0; i < n; i++) {
		for (int j = 0; j < 16; j++)
			v[i * 16 + j] = hold_budget();
		budget_churn();
	}
	sink = v;
}

NOINLINE static void count_site(long n, long size)
{
	for (long i = 0; i < n; i++) {
		void *p = malloc((size_t)size);
		sink = p;
		free(p);
	}
}

NOINLINE static void realloc_site(void)
{
	void **v = keep(64);
	for (int i = 0; i < 64; i++) {
		void *p = NULL;
		for (size_t s = 1024; s <= 1024 * 1024; s *= 2) {
			p = realloc(p, s);
			if (!p)
				abort();
		}
		v[i] = p;
	}
	sink = v;
}

NOINLINE static void *thread_site(void *arg)
{
	(void)arg;
	void **v = keep(256);
	for (int i = 0; i < 256; i++)
		v[i] = malloc(4096);
	return v;
}

static void threads(int n)
{
	pthread_t t[256];
	void *res;
	if (n > 256)
		n = 256;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, thread_site, NULL);
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], &res);
		sink = res;
	}
}

NOINLINE static void giant_site(size_t s)
{
	errno = 0;
	void *p = malloc(s);
	if (p)
		printf("giant ok\n");
	else
		printf("giant failed errno=%d\n", errno);
	free(p);
}

NOINLINE static void calloc_site(void)
{
	void **v = keep(1024);
	for (int i = 0; i < 1024; i++)
		v[i] = calloc(1, 8192);
	sink = v;
}

NOINLINE static void aligned_site(void)
{
	void **v = keep(3 * 342);
	for (int i = 0; i < 342; i++) {
		if (posix_memalign(&v[3 * i], 64, 8192) != 0)
			abort();
		v[3 * i + 1] = aligned_alloc(4096, 8192);
		v[3 * i + 2] = memalign(256, 8192);
	}
	sink = v;
}

NOINLINE static void child_site(void)
{
	void **v = keep(1024);
	for (int i = 0; i < 1024; i++)
		v[i] = malloc(4096);
	sink = v;
}

static void do_fork(void)
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		child_site();
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
}

static void do_exec(void)
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
}

static void plugin(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "workload: %s\n", dlerror());
		exit(3);
	}
	void *(*fn)(void) = (void *(*)(void))dlsym(h, "plugin_alloc");
	if (!fn)
		exit(3);
	sink = fn();
	dlclose(h);
}

/* The title over argv's strings and the environment's that follow them:
 * /proc/PID/environ then holds NULs and the title's tail. */
static void set_title(int argc, char **argv)
{
	extern char **environ;
	char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
	for (char **e = environ; *e && *e == end; e++)
		end = *e + strlen(*e) + 1;
	size_t room = (size_t)(end - argv[0]);
	memset(argv[0], 0, room);
	snprintf(argv[0], room, "workload: a title over argv and environ");
}

int main(int argc, char **argv)
{
	char path[4096];
	/* stdin's buffer is static: the fgets after "ready" must not malloc,
	 * or a report taken while it runs counts one block more or less (the
	 * exact-totals tests compare two runs to the object). */
	static char inbuf[4096];
	setvbuf(stdin, inbuf, _IOLBF, sizeof inbuf);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		long n, s;
		if (!strcmp(a, "big"))
			hold_big();
		else if (!strcmp(a, "small"))
			hold_small();
		else if (!strcmp(a, "churn"))
			churn_site();
		else if (sscanf(a, "count:%ld:%ld", &n, &s) == 2)
			count_site(n, s);
		else if (sscanf(a, "budget:%ld", &n) == 1 && n > 0)
			budget_rounds(n);
		else if (!strcmp(a, "realloc"))
			realloc_site();
		else if (sscanf(a, "threads:%ld", &n) == 1)
			threads((int)n);
		else if (sscanf(a, "giant:%ld", &s) == 1)
			giant_site((size_t)s);
		else if (!strcmp(a, "calloc"))
			calloc_site();
		else if (!strcmp(a, "aligned"))
			aligned_site();
		else if (!strcmp(a, "fork"))
			do_fork();
		else if (!strcmp(a, "exec"))
			do_exec();
		else if (sscanf(a, "plugin:%4095s", path) == 1)
			plugin(path);
		else if (!strcmp(a, "heap")) {
			size_t arena = mallinfo2().arena;   /* before printf's buffer */
			printf("heap %zu\n", arena);
		} else if (!strcmp(a, "pause")) {
			char line[64];
			printf("paused\n");
			fflush(stdout);
			if (!fgets(line, sizeof line, stdin))
				line[0] = '\0';
		} else if (!strcmp(a, "nowait"))
			nowait = 1;
		else if (!strcmp(a, "title")) {
			set_title(argc, argv);
			break;
		}
		else {
			fprintf(stderr, "workload: unknown step %s\n", a);
			return 2;
		}
	}
	printf("ready\n");
	fflush(stdout);
	if (!nowait) {
		char line[64];
		if (!fgets(line, sizeof line, stdin))
			line[0] = '\0';
	}
	return 0;
}
