/*
 * proc: what ymtop reads about a process from /proc (stat, status,
 * cmdline, environ, maps, task names, namespaces), and nothing else: the
 * discovery of targets and of their segments is target.c's.  Everything
 * read here is untrusted and bounded.
 */
#ifndef YMTOP_PROC_H
#define YMTOP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


/* Where RSS goes, in bytes (proc_read: /proc/PID/status; proc_rollup:
 * /proc/PID/smaps_rollup, which has no file/shmem split: those stay
 * status's RssFile and RssShmem). */
struct proc_mem {
	int      have_status;   /* the Rss* and VmSwap lines were there */
	uint64_t rss_anon, rss_file, rss_shmem, vm_swap;
	int      have_rollup;   /* smaps_rollup was read */
	uint64_t rss, pss, anonymous, swap;
};

struct proc_info {
	pid_t    pid;
	pid_t    tgid;          /* its process, when pid is a thread's id */
	pid_t    nspid;         /* pid inside its own pid namespace */
	uint32_t pidns;         /* that namespace's inode; 0 unknown */
	uid_t    uid;           /* real uid of the process */
	uid_t    euid;
	uint64_t start_ticks;   /* field 22 of /proc/pid/stat */
	uint64_t rss_bytes;
	uint64_t vsize;         /* field 23: bytes mapped (moves with mmap,
				   brk, exec) */
	int      kthread;       /* a kernel thread (PF_KTHREAD): no user space */
	int      nslevels;      /* pid namespaces from ours inwards (NSpid's
				   count): > 1 in a namespace below ours */
	char     state;         /* field 3: R, S, D, Z (zombie), X... */
	int      exit_code;     /* field 52: a zombie's wait status; -1 when
				   absent (the kernel shows 0 to a reader
				   without ptrace access: see proc_exit) */
	char     comm[64];
	struct proc_mem mem;
};

/* 0 on success; -ENOENT when there is no such process. */
int proc_read(pid_t pid, struct proc_info *out);

/* proc_read again for io, read before of the same pid: its stat and
 * status (what changes while a process runs), its pid namespace kept
 * while its start time stays (a process does not change namespace).  0
 * or -errno. */
int proc_reread(struct proc_info *io);

/* A process's stat and status kept open between proc_reread_kept calls
 * (the fleet's refreshes: an open, a read and a close each less a file):
 * two descriptors, -1 when closed, of process pid; none at all while
 * pid is 0 (zeroed memory holds no descriptor). */
struct proc_files {
	pid_t pid;
	int   stat_fd, status_fd;
	double status_at;   /* when status was last read (clock_mono_s); 0 never */
};
/* Through kept files, status (the RSS split, swap, ids) is read again
 * when stat moved (RSS, mapped size, state, name, start time) or
 * PROC_STATUS_S after its last read; else its figures stand: a process
 * whose RSS and mappings did not move has the same split. */
#define PROC_STATUS_S 5.0
void proc_files_init(struct proc_files *pf);
void proc_files_close(struct proc_files *pf);
/* proc_reread through pf (opened on first use, or for another pid); pf
 * NULL: as proc_reread. */
int proc_reread_kept(struct proc_info *io, struct proc_files *pf);

/* Files ymtop has opened or looked at under /proc (stat, status, maps,
 * cmdline, ns/pid...),
 * for the cost of a refresh (the server's ymtop_proc_reads_total). */
extern unsigned long long proc_reads;

/* The fields ymtop uses of a process's or a thread's stat file
 * (proc(5)); the one parser of them (proc_read, fleet_ppid, the
 * injector's choice of a thread). */
struct proc_stat {
	char     comm[64];      /* field 2, without its parentheses */
	char     state;         /* field 3; 0 when absent */
	pid_t    ppid;          /* field 4; 0 when absent */
	int      kthread;       /* field 9 has PF_KTHREAD */
	uint64_t start_ticks;   /* field 22 */
	uint64_t vsize;         /* field 23, bytes */
	uint64_t rss_pages;     /* field 24 */
	/* Fields 28, 50 and 51 (Linux 3.5): where the stack and the
	 * environment are; each exec places them anew (and the environment's
	 * length moves them).  0 to a reader without ptrace access. */
	uint64_t start_stack, env_start, env_end;
	int      exit_code;     /* field 52 (Linux 3.5); -1 when absent */
};

/* Parse the text of a stat file.  comm may hold anything, ')' and spaces
 * included: it runs from the first '(' to the last ')', and the numbered
 * fields follow.  0, or -EPROTO when there are no parentheses. */
int proc_stat_parse(const char *text, struct proc_stat *st);

/* /proc/PID/stat (tid 0) or /proc/PID/task/TID/stat, parsed: 0, -errno
 * of the read (-ENOENT: no such process), or -EPROTO. */
int proc_stat_read(pid_t pid, pid_t tid, struct proc_stat *st);

/* How long the process has run, in seconds (its start time against the
 * boot clock); 0 when unknown. */
double proc_age_s(const struct proc_info *pi);

/* 1 when the process has exited (a zombie not yet reaped). */
int proc_gone(const struct proc_info *pi);

/* Read /proc/PID/smaps_rollup into mem (have_rollup).  It walks every
 * mapping of the process: call it once a refresh, not per row.  0 or
 * -errno. */
int proc_rollup(pid_t pid, struct proc_mem *mem);

/* How process pi ended, when it is a zombie whose status we may read
 * (ptrace access: root, or its own uid): PROC_EXIT_STATUS with *value the
 * exit status, PROC_EXIT_SIGNAL with *value the signal; else
 * PROC_EXIT_UNKNOWN (running, reaped, another user's). */
#define PROC_EXIT_UNKNOWN 0
#define PROC_EXIT_STATUS  1
#define PROC_EXIT_SIGNAL  2
int proc_exit(const struct proc_info *pi, int *value);

/* The cgroup of pid into buf (NUL-terminated, at most len - 1 bytes of
 * the path, cut when longer): the cgroup v1 memory controller's path
 * when it has one (a v1 or hybrid host), else the unified hierarchy's
 * ("0::/x"), else "".  Relative to the reader's cgroup namespace.  0, or -1 when
 * /proc/PID/cgroup cannot be read (buf then ""). */
#define PROC_CGROUP_READ 8192   /* bytes of /proc/PID/cgroup read at most */
/* -1 also for a process that has exited (a zombie's file names the root
 * cgroup, not the one it ran in). */
int proc_cgroup(pid_t pid, char *buf, size_t len);
/* The same from the text of a /proc/PID/cgroup (NUL-terminated). */
void proc_cgroup_parse(const char *data, char *buf, size_t len);
/* proc_cgroup and proc_cgroup_parse, and *v1 (when not NULL): 1 when the
 * path is the cgroup v1 memory controller's, 0 the unified hierarchy's. */
int proc_cgroup_memory(pid_t pid, char *buf, size_t len, int *v1);
void proc_cgroup_parse_memory(const char *data, char *buf, size_t len, int *v1);

/* 1 when pid is alive and started at start_ticks (not a reused pid). */
int proc_same(pid_t pid, uint64_t start_ticks);

/* Whether the process that wrote a segment is still there and writing it. */
enum proc_writer {
	WRITER_LIVE = 0,    /* same process, and it maps the segment */
	WRITER_GONE,        /* no such process, or a zombie */
	WRITER_REUSED,      /* another process has its pid (start time) */
	WRITER_EXECED,      /* same process, but its image no longer maps
			       the segment: it exec'd a program without the
			       agent, or left it */
};
/* seg_dev/seg_ino: the segment file (shm_reader.dev/ino).  When the maps
 * cannot be read (another user's process) the answer rests on the start
 * time alone. */
enum proc_writer proc_writer(pid_t pid, uint64_t start_ticks, uint64_t seg_dev,
			     uint64_t seg_ino);
/* The same from pid's proc_info just read (proc_read). */
enum proc_writer proc_writer_of(pid_t pid, const struct proc_info *pi,
				uint64_t start_ticks, uint64_t seg_dev,
				uint64_t seg_ino);
/* The same without reading the maps (the stat fields alone): WRITER_LIVE
 * then means not gone and not reused, exec unknown. */
enum proc_writer proc_writer_stat(const struct proc_info *pi,
				  uint64_t start_ticks);
/* One line's worth of why, for messages. */
const char *proc_writer_why(enum proc_writer w);

/* 1 when process pid maps the file (dev, ino), 0 when not, -ESRCH when
 * it maps nothing (exiting: at most the gate page), -errno when its maps
 * cannot be read. */
int proc_maps_file(pid_t pid, uint64_t dev, uint64_t ino);
/* The same, from a maps file by its path (a copy, for tests). */
int proc_maps_file_at(const char *maps, uint64_t dev, uint64_t ino);

/* What process pid has loaded: PROC_HAS_AGENT (a mapping of
 * libymagent.so, also one brought in through a memfd), PROC_HAS_LIBC (the
 * loader has mapped the C library: a fresh image has its dependencies);
 * -errno when its maps cannot be read. */
#define PROC_HAS_AGENT 1
#define PROC_HAS_LIBC  2
int proc_maps_agent(pid_t pid);

/* The mapping of pid that starts at lo: 0 and its end in *hi, or -1 when
 * it has none there (or its maps cannot be read). */
int proc_mapping_at(pid_t pid, uint64_t lo, uint64_t *hi);

/* 1 when process pid's environment preloads the agent (LD_PRELOAD names
 * libymagent): a fresh image that will load it, 0 when not, -errno.
 * PROC_ENV_GONE when the area does not start with a variable: the
 * process wrote its title over it (nginx, PostgreSQL, redis do) or
 * emptied it, and only its maps can tell. */
#define PROC_ENV_GONE 2
int proc_preloads_agent(pid_t pid);

/* The name process pi was started as, for display and file names, into
 * out: its comm, or argv[0]'s basename when comm is its first 15
 * characters (the kernel's limit).  argv[0] may have been rewritten as a
 * title ("nginx: master process ..."): then it does not start with comm's
 * full 15 characters, and comm stays. */
void proc_display_name(const struct proc_info *pi, char *out, size_t len);

/* Thread name from /proc/pid/task/tid/comm into buf ("" if gone). */
void proc_thread_name(pid_t pid, uint32_t tid, char *buf, size_t len);

/* A process in a pid namespace below ours (a container: nslevels > 1)
 * numbers its threads there, and the agent records those numbers; /proc
 * here names them by ours.  The map from the one to the other, read from
 * the NSpid line of each /proc/PID/task entry, sorted by ns_tid. */
struct proc_task_id {
	uint32_t ns_tid;        /* as the process sees it */
	uint32_t tid;           /* as /proc here names it */
};
struct proc_task_map {
	struct proc_task_id *ids;
	uint32_t n;
};
/* 0, or -errno (the map is then empty). */
int proc_task_map_read(pid_t pid, struct proc_task_map *m);
/* Our tid of the thread the process calls ns_tid; 0 when not there. */
uint32_t proc_task_map_find(const struct proc_task_map *m, uint32_t ns_tid);
void proc_task_map_free(struct proc_task_map *m);

/* The inode of pid's pid namespace (pid 0: ours); 0 when /proc/PID/ns
 * is closed to us: then the caller assumes its own. */
uint32_t proc_pidns(pid_t pid);

#endif
