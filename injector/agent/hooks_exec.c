/*
 * The exec family, interposed (hooks_exec.h).
 *
 * State, this file's: none but each function's cached next definition.
 */
#include <alloca.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "hooks_exec.h"
#include "seg.h"
#include "symbols.h"
#include "threads.h"


typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

/* The definition the agent forwards `name` to (dlsym may allocate: under
 * the guard). */
static void *next(void **cache, const char *name)
{
	void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!fn) {
		struct agent_tls *t = &agent_tls;
		agent_guard_enter(t);
		fn = sym_forward(name);
		agent_guard_leave(t);
		__atomic_store_n(cache, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

/* The segment's name goes, the call is made, and the name comes back when
 * the call returns (it failed: seg.h). */
#define EXEC_CALL(name, type, args)                                           \
	do {                                                                  \
		static void *cache;                                           \
		type fn = (type)next(&cache, #name);                          \
		if (!fn) {                                                    \
			errno = ENOSYS;                                       \
			return -1;                                            \
		}                                                             \
		int seg = seg_exec_begin();                                   \
		int rc = fn args;                                             \
		int saved = errno;                                            \
		seg_exec_failed(seg);                                         \
		errno = saved;                                                \
		return rc;                                                    \
	} while (0)

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	EXEC_CALL(execve, execve_fn, (path, argv, envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
	EXEC_CALL(execv, execv_fn, (path, argv));
}

EXPORT int execvp(const char *file, char *const argv[])
{
	EXEC_CALL(execvp, execv_fn, (file, argv));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	EXEC_CALL(execvpe, execve_fn, (file, argv, envp));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	EXEC_CALL(fexecve, fexecve_fn, (fd, argv, envp));
}

/* execl's arguments as an array on the stack (as glibc's execl does; no
 * heap in the agent), NULL-terminated: arg, then the variadic ones up to
 * the NULL.  n: how many pointers precede the NULL. */
static size_t count_args(const char *arg, va_list ap)
{
	size_t n = 0;
	if (arg)
		for (n = 1; va_arg(ap, char *); n++)
			;
	return n;
}

#define EXECL_ARGV(arg, argv, envp)                                           \
	va_list ap;                                                           \
	va_start(ap, arg);                                                    \
	size_t n = count_args(arg, ap);                                       \
	va_end(ap);                                                           \
	char **argv = alloca((n + 1) * sizeof *argv);                         \
	argv[0] = (char *)arg;                                                \
	va_start(ap, arg);                                                    \
	for (size_t i = 1; i <= n; i++)                                       \
		argv[i] = va_arg(ap, char *);                                 \
	if (n == 0)                                                           \
		argv[0] = NULL;                                               \
	char *const *envp = envp_wanted ? va_arg(ap, char *const *) : NULL;   \
	va_end(ap)

EXPORT int execl(const char *path, const char *arg, ...)
{
	const int envp_wanted = 0;
	EXECL_ARGV(arg, argv, envp);
	(void)envp;
	return hook_execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	const int envp_wanted = 0;
	EXECL_ARGV(arg, argv, envp);
	(void)envp;
	return hook_execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	const int envp_wanted = 1;
	EXECL_ARGV(arg, argv, envp);
	return hook_execve(path, argv, envp);
}

HIDDEN_ALIAS(execve);
HIDDEN_ALIAS(execv);
HIDDEN_ALIAS(execvp);
HIDDEN_ALIAS(execvpe);
HIDDEN_ALIAS(fexecve);
HIDDEN_ALIAS(execl);
HIDDEN_ALIAS(execlp);
HIDDEN_ALIAS(execle);
