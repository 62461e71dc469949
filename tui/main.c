/*
 * ymtop: top for the heap of a running process.  See ymtop(1).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "batch.h"
#include "cli.h"
#include "detach.h"
#include "diff.h"
#include "session.h"
#include "target.h"
#include "screen/ui.h"
#include "serve/serve.h"
#include "util/stop.h"

static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

int main(int argc, char **argv)
{
	/* `ymtop diff OLD NEW` reads two files and nothing else. */
	if (argc >= 2 && !strcmp(argv[1], "diff"))
		return diff_main(argc - 1, argv + 1);
	struct options o;
	static struct ym_err e;
	cli_parse(argc, argv, &o);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o.serve) {
		if (serve_run(&o, &e) != 0)
			cli_die_err(&e);
		cli_free(&o);
		return 0;
	}
	int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	/* Several processes and none chosen, or --children: the host list. */
	if (!o.batch && tty && (o.children || (!o.pid && target_list(NULL, 0) > 1))) {
		int rc = ui_host_run(&o, o.children ? o.pid : 0);
		cli_free(&o);
		return rc;
	}
	char msg[600];
	if (o.detach) {
		/* Nothing else: the agent leaves; one line says how. */
		int rc = detach_target(o.pid, msg, sizeof msg);
		fprintf(stderr, "ymtop: %s\n", msg);
		cli_free(&o);
		return rc == 0 ? 0 : 1;
	}
	if (o.npids > 1) {
		int rc = batch_run_many(&o);
		cli_free(&o);
		return rc;
	}
	pid_t pid = target_choose(o.pid, &e);
	if (pid < 0)
		cli_die_err(&e);
	if (o.duration > 0) {
		/* The time is up as ymtop is stopped: the loops end, then the
		 * agent is detached below. */
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = { { 0, 0 }, { (time_t)o.duration,
			(suseconds_t)((o.duration - (double)(time_t)o.duration) * 1e6) } };
		setitimer(ITIMER_REAL, &it, NULL);
	}
	if (!o.batch && !tty && (o.rate || o.max_overhead)) {
		/* --rate or --max-overhead from a script: ask for the rate (session_open says
		 * so in one line), no screen. */
		struct session ss;
		if (session_open(&ss, &o, pid, &e) != 0)
			cli_die_err(&e);
		session_close(&ss);
		cli_free(&o);
		return 0;
	}
	if (!o.batch && !tty)
		cli_die(2, "the live screen needs a terminal; use -b for reports");
	int rc = o.batch ? batch_run(&o, pid) : ui_run(&o, pid);
	if (o.duration > 0) {
		/* 1: nothing mapped (the screen's X detached it already),
		 * the process exited, or its agent was preloaded. */
		if (detach_at_end(pid, msg, sizeof msg) < 0 && rc == 0)
			rc = 1;
		fprintf(stderr, "ymtop: %s\n", msg);
	}
	cli_free(&o);
	return rc;
}
