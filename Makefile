# ymtop — non-recursive build.
#
#   make            ymtop and libymagent.so
#   make deps       install missing Debian packages (root) or print the line
#   make check      deps, build, then every test; ends "N passed, N failed"
#   make demo       deps, build, run the demo program under the agent
#   make bench      benchmarks (not part of check)
#   make analyze    clang static analyzer (scan-build), fails on findings
#   make tsan       ymtop and the unit tests with SANITIZER=thread (in
#                   build-thread/), each unit test run; not part of check
#   make soak       the segment fuzzer for FUZZ_SECONDS (default 600)
#   make install    PREFIX=/usr/local DESTDIR=
#
#   SANITIZER=address|undefined|thread   builds ymtop and the tests with it
#   (the agent itself is never sanitized: a sanitizer runtime interposes
#   malloc too)

CC       ?= cc
OPT      ?= -O2 -g
WARN     ?= -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wformat=2
STD      := -std=c11 -D_GNU_SOURCE
PREFIX   ?= /usr/local
DESTDIR  ?=
# A sanitized build lives apart, so that flags never mix in one tree.
B        := build$(if $(SANITIZER),-$(SANITIZER))
VERSION  := 0.1.0

PKG_CONFIG ?= pkg-config
TUI_PKGS := ncursesw libdw zlib sqlite3 libbsd libmicrohttpd yaml-0.1 gnutls libcrypt jansson

ifneq ($(SANITIZER),)
SAN := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
# gcc warns that TSan does not model atomic_thread_fence (-Wtsan; the
# agent's seqcounts); clang has no such warning (nor the option).
TSAN_WNO := $(shell $(CC) -Werror -Wno-tsan -fsyntax-only -x c /dev/null 2>/dev/null && echo -Wno-tsan)

CPPFLAGS += -Iinclude -Ishm -Iinjector -MMD -MP -DYM_VERSION='"$(VERSION)"' -DYM_LIBDIR='"$(PREFIX)/lib/ymtop"'
BASE_CFLAGS := $(STD) $(OPT) $(WARN)

# ---- Debian packages ----
# Building and the demo need DEB_PKGS; make check also the readers and
# drivers the tests use (CHECK_PKGS): cmocka, tmux, sqlite3, go tool pprof,
# clang with libFuzzer, chromium for the flame graph screenshot, the
# real programs run under the agent (git, redis-server and redis-tools'
# redis-benchmark, postgresql with initdb and pgbench, nginx-light; unshare
# and setpriv from util-linux), and libunwind, the reference test_unwind
# compares the agent's unwinder with (the agent itself links nothing but
# libc).
DEB_PKGS   := gcc make pkg-config libncurses-dev libdw-dev \
              libelf-dev libbsd-dev libiberty-dev zlib1g-dev libsqlite3-dev \
              procps libmicrohttpd-dev libyaml-dev libgnutls28-dev libcrypt-dev \
              libjansson-dev
CHECK_PKGS := libcmocka-dev tmux sqlite3 python3 golang-go clang \
              libclang-rt-14-dev chromium git redis-server redis-tools \
              postgresql util-linux nginx-light libunwind-dev

# The allocators the estimator is checked under
# (tests/integration/test_allocators.py).
CHECK_PKGS += libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
# jemalloc's own API, from a program linked against it (test_jemalloc_api.py).
CHECK_PKGS += libjemalloc-dev

# Debian's stripped memcached, whose callbacks libevent runs
# (tests/integration/test_wrappers.py).
CHECK_PKGS += memcached
# The agent built for musl and a program that musl-gcc links (test_musl.py).
CHECK_PKGS += musl-tools musl-dev

# A debug-info server for the stripped-binary symbol tests
# (tests/integration/test_picture.py), and objcopy to strip.
CHECK_PKGS += debuginfod binutils
# The consumers of --serve and -f prometheus (tests/integration/test_fleet.py).
CHECK_PKGS += prometheus prometheus-node-exporter
# --serve --web-config over TLS: certificates made at test time, and a
# client (tests/integration/test_webconfig.py).
CHECK_PKGS += openssl curl
# A library that keeps malloc in its own data (xmlMalloc), used from
# python3 after ymtop -p (tests/integration/test_takeover.py).
CHECK_PKGS += libxml2
# The stacks of a torture program that did not finish in time
# (tests/stress/test_stress.py prints them).
CHECK_PKGS += gdb
# Debian's CPython whose Python frames the agent reads
# (tests/integration/test_python.py; pyenv's 3.11-3.13 when present).
CHECK_PKGS += python3.11

.PHONY: all deps check-deps install-pkgs check demo bench bench-deps install clean unit progs \
        stress fuzz-smoke soak analyze tsan tsan-run

all: $(B)/ymtop $(B)/libymagent.so

deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS)"

check-deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS) $(CHECK_PKGS)"

install-pkgs:
	@missing=""; for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' \
	    || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "ymtop: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	    || { echo "ymtop: apt-get install$$missing failed"; exit 1; }; \
	else \
	  echo "ymtop: missing packages; run: sudo apt-get install -y$$missing"; \
	  exit 1; \
	fi

# ---- The agent ----
# Folders say where code runs: injector/agent/ is the guest (linked into
# libymagent.so only), injector/ptrace/ is linked into ymtop only, and
# injector/resume.[ch] is the contract between them (the agent half of it
# is linked into the agent).  shm/ is used by both sides.
AGENT_SRC := $(wildcard injector/agent/*.c) injector/resume.c shm/layout.c \
             shm/create.c
AGENT_OBJ := $(AGENT_SRC:%.c=$(B)/agent/%.o)
AGENT_CFLAGS := $(BASE_CFLAGS) -fPIC -fvisibility=hidden \
                -ftls-model=initial-exec -fno-plt -fno-strict-aliasing
# Every file of the agent sees compat.h first: its references pinned to
# the oldest glibc versions, what 2.17 lacks renamed (compat.h).
AGENT_COMPAT := -include injector/agent/compat.h
# Check builds: the agent's YM_ASSERTs (injector/agent/base.h) are
# compiled into the agent of a sanitizer build (the agent itself is not
# sanitized) and into the unit and TSan tests; release builds have none.
ifneq ($(SANITIZER),)
AGENT_CFLAGS += -DYM_ASSERTS=1
endif

$(B)/agent/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(AGENT_COMPAT) $(AGENT_CFLAGS) -c $< -o $@

# Nothing but libc (and libdl and libpthread, where glibc before 2.34
# keeps dlsym and pthread_key_create; empty stubs since): the agent must
# load into a minimal root and add no shared object to the processes it is
# preloaded into (it unwinds with its own injector/agent/unwind.c).  It
# loads into any glibc from 2.17 on: tests/check_glibc_versions.sh fails
# the build when a newer version or another object creeps in.
# On x86_64 it is linked against stand-ins for libdl.so.2 and
# libpthread.so.0 as they were before 2.34 (injector/agent/glibc-stubs/),
# so that its references to dlsym and pthread_key_create name the objects
# that define them there: glibc before 2.30 looks nowhere else.
STUB_DIR := injector/agent/glibc-stubs
ifeq ($(firstword $(subst -, ,$(shell $(CC) -dumpmachine))),x86_64)
AGENT_STUBS := $(B)/stubs/libdl.so.2 $(B)/stubs/libpthread.so.0
AGENT_LDLIBS := -Wl,--no-as-needed $(AGENT_STUBS) -Wl,--as-needed
else
AGENT_STUBS :=
AGENT_LDLIBS := -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--as-needed
endif
AGENT_LINK = $(CC) -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@.tmp $(filter %.o,$^) \
	  $(AGENT_LDLIBS) && tests/check_glibc_versions.sh $@.tmp && mv $@.tmp $@
STUB_LINK = $(CC) -shared -fPIC -nostdlib -fno-builtin -w -Wl,-soname,$(notdir $@) \
	  -Wl,--version-script=$(filter %.map,$^) -o $@ $(filter %.c,$^)

$(B)/stubs/libdl.so.2: $(STUB_DIR)/libdl.c $(STUB_DIR)/libdl.map
	@mkdir -p $(dir $@)
	$(STUB_LINK)

$(B)/stubs/libpthread.so.0: $(STUB_DIR)/libpthread.c $(STUB_DIR)/libpthread.map
	@mkdir -p $(dir $@)
	$(STUB_LINK)

# compat.h is in no #include line: each object depends on it here.
$(AGENT_OBJ): injector/agent/compat.h

$(B)/libymagent.so: $(AGENT_OBJ) $(AGENT_STUBS) tests/check_glibc_versions.sh
	$(AGENT_LINK)

# A second agent, built as if from a newer version of the ABI that only
# adds (include/ymtop/segment.h, YM_TEST_ABI_NEWER): the current ymtop must
# read its segments (tests/integration/test_abi.py).  Test-only.
ABI_NEWER := $(B)/abi-newer/libymagent.so
ABI_NEWER_OBJ := $(AGENT_SRC:%.c=$(B)/abi-newer/%.o)

$(B)/abi-newer/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DYM_TEST_ABI_NEWER $(AGENT_COMPAT) $(AGENT_CFLAGS) -c $< -o $@

$(ABI_NEWER_OBJ): injector/agent/compat.h
$(ABI_NEWER): $(ABI_NEWER_OBJ) $(AGENT_STUBS) tests/check_glibc_versions.sh
	$(AGENT_LINK)

# A third, test-only: the agent as on a glibc without _dl_find_object
# and strerrordesc_np (-DYM_TEST_OLD_GLIBC: compat.c finds neither and
# takes its fallbacks; tests/integration/test_compat.py).
OLD_GLIBC := $(B)/old-glibc/libymagent.so
OLD_GLIBC_OBJ := $(AGENT_SRC:%.c=$(B)/old-glibc/%.o)

$(B)/old-glibc/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DYM_TEST_OLD_GLIBC $(AGENT_COMPAT) $(AGENT_CFLAGS) -c $< -o $@

$(OLD_GLIBC_OBJ): injector/agent/compat.h
$(OLD_GLIBC): $(OLD_GLIBC_OBJ) $(AGENT_STUBS) tests/check_glibc_versions.sh
	$(AGENT_LINK)

# The agent for programs linked with musl (Alpine images): the same
# sources, built by musl-gcc, loading nothing but musl's libc.so.  Its
# TLS is global-dynamic with TLS descriptors (AGENT_TLS_MODEL, base.h):
# musl refuses initial-exec TLS in an object it loads after start-up
# (ymtop -p).  musl-gcc's link drops --eh-frame-hdr, which the
# unwinder needs in every object it walks (musl's own libc has it):
# given back here.  Built by make check (musl-tools), not by make all.
MUSL_CC ?= musl-gcc
MUSL_AGENT := $(B)/libymagent-musl.so
MUSL_AGENT_OBJ := $(AGENT_SRC:%.c=$(B)/musl/%.o)
MUSL_CFLAGS := $(filter-out -ftls-model=initial-exec,$(AGENT_CFLAGS)) \
	-ftls-model=global-dynamic -mtls-dialect=gnu2
MUSL_PROGS := $(B)/musl/count $(B)/musl/attach

$(MUSL_AGENT_OBJ): injector/agent/compat.h
$(B)/musl/%.o: %.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(CPPFLAGS) $(AGENT_COMPAT) $(MUSL_CFLAGS) -c $< -o $@

$(MUSL_AGENT): $(MUSL_AGENT_OBJ)
	$(MUSL_CC) -shared -Wl,--eh-frame-hdr -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@ $^

$(B)/musl/%: tests/progs/musl/%.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(STD) -O2 -g $(WARN) -Wl,--eh-frame-hdr -o $@ $<

# ---- ymtop ----
# ymtop: tui/ (driver, command line, /proc) and its folders screen/ (the
# only curses code and its view state), model/, sym/ (symbolizer, display
# frames), report/ (the writers), with the ptrace injector; the agent's own
# sources (injector/agent/) are never linked into ymtop.
TUI_DIRS := tui tui/screen tui/model tui/sym tui/report tui/util tui/serve
TUI_SRC := $(foreach d,$(TUI_DIRS),$(wildcard $(d)/*.c)) $(wildcard injector/ptrace/*.c) \
           shm/layout.c shm/reader.c shm/control.c
TUI_OBJ := $(TUI_SRC:%.c=$(B)/tui/%.o)
TUI_CFLAGS := $(BASE_CFLAGS) $(SAN) -Itui $(shell $(PKG_CONFIG) --cflags $(TUI_PKGS) 2>/dev/null)
TUI_LIBS := $(shell $(PKG_CONFIG) --libs $(TUI_PKGS) 2>/dev/null) -lelf -liberty -lm -lpthread

$(B)/tui/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TUI_CFLAGS) -c $< -o $@

$(B)/ymtop: $(TUI_OBJ)
	$(CC) $(SAN) -o $@ $^ $(TUI_LIBS)

# ---- Tests ----
# Programs run under the agent (never sanitized: they host the agent).
PROG_C   := $(wildcard tests/progs/*.c)
PROG_CXX := $(wildcard tests/progs/*.cc)
PROGS    := $(PROG_C:tests/progs/%.c=$(B)/progs/%) \
            $(PROG_CXX:tests/progs/%.cc=$(B)/progs/%)

$(B)/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer -fno-inline $(WARN) -o $@ $< -lpthread -ldl

# Linked against libjemalloc (its API: mallocx, rallocx, sdallocx...).
PROGS += $(B)/progs/jeapi
$(B)/progs/jeapi: tests/progs/je/jeapi.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer -fno-inline $(WARN) -o $@ $< -ljemalloc -lpthread

# Built without PIE, taking malloc's and free's addresses: the
# executable's canonical PLT entries stand for them (Debian's python3.11).
PROGS += $(B)/progs/inject_nopie
$(B)/progs/inject_nopie: tests/progs/nopie/inject_nopie.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer -fno-inline -fno-pie -no-pie $(WARN) -o $@ $<

# Plugins tests/progs/dlhost loads RTLD_LOCAL: libstdc++ and libjemalloc
# in their local scope only.
PROGS += $(B)/progs/libcxxplug.so $(B)/progs/libjeplug.so
$(B)/progs/libcxxplug.so: tests/progs/cxx/cxxplug.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -fPIC -shared -Wall -Wextra -Werror -o $@ $<
# Preloaded after tcmalloc: operator new[] before tcmalloc's constructor.
PROGS += $(B)/progs/libcxxearly.so
$(B)/progs/libcxxearly.so: tests/progs/cxx/cxxearly.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -fPIC -shared -Wall -Wextra -Werror -o $@ $<
$(B)/progs/libjeplug.so: tests/progs/je/jeplug.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fPIC -shared $(WARN) -o $@ $< -ljemalloc

# An LD_AUDIT library that holds the loader before libc is mapped (no
# libc of its own: test_inject.py's process caught right after its exec).
PROGS += $(B)/progs/libslowload.so
$(B)/progs/libslowload.so: tests/progs/audit/slowload.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fPIC -shared -nostdlib $(WARN) -o $@ $<

# Three compilation units, the middle one by clang (no .debug_aranges):
# test_symbols.py's symbols of a unit libdw's lookup does not know
# (without clang, all three by $(CC): the test then checks less).
PROGS += $(B)/progs/mixedcu
MIXEDCU := $(addprefix tests/progs/mixedcu/,first.c clang.c last.c)
MIXEDCU_CC := $(if $(shell command -v clang 2>/dev/null),clang,$(CC))
$(B)/progs/mixedcu: $(MIXEDCU)
	@mkdir -p $@.o
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer $(WARN) -c -o $@.o/first.o tests/progs/mixedcu/first.c
	$(MIXEDCU_CC) $(STD) -O1 -g -fno-omit-frame-pointer $(WARN) -c -o $@.o/clang.o tests/progs/mixedcu/clang.c
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer $(WARN) -c -o $@.o/last.o tests/progs/mixedcu/last.c
	$(CC) -o $@ $@.o/first.o $@.o/clang.o $@.o/last.o

# A reader's control requests that ymtop never makes (a reset), through
# shm/control.c itself (test_peaks.py).
PROGS += $(B)/progs/ymcontrol
$(B)/progs/ymcontrol: tests/progs/ctl/ymcontrol.c shm/control.c shm/reader.c shm/layout.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g $(WARN) -Iinclude -Ishm -o $@ $^

# Libraries the test programs load with dlopen.
PROG_LIBS := $(patsubst tests/progs/lib/%.c,$(B)/progs/lib%.so,$(wildcard tests/progs/lib/*.c))
PROGS     += $(PROG_LIBS)

$(B)/progs/lib%.so: tests/progs/lib/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fPIC -shared $(WARN) -o $@ $<

# Allocator pointers in a read-only section, written by the loader
# through a text relocation (test_takeover.py): on purpose, so no warning.
$(B)/progs/libdataptrro.so: tests/progs/lib/dataptrro.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fPIC -shared $(WARN) -Wl,-z,notext -o $@ $<

$(B)/progs/%: tests/progs/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ $< -lpthread

# ---- Rust test programs (tests/progs/rust/*.rs), skipped without rustc ----
# Each is built twice: with v0 symbol mangling, and with legacy mangling
# (stable rustc's default; its -C symbol-mangling-version=legacy needs
# -Z unstable-options).  Optimized with debug info, System allocator (but
# ownalloc.rs, whose own allocator is what it tests).
RUSTC ?= rustc
ifneq ($(shell command -v $(RUSTC) 2>/dev/null),)
RUST_SRC   := $(wildcard tests/progs/rust/*.rs)
RUST_FLAGS := --edition 2021 -O -g
PROGS      += $(RUST_SRC:tests/progs/rust/%.rs=$(B)/progs/rust-v0-%) \
              $(RUST_SRC:tests/progs/rust/%.rs=$(B)/progs/rust-legacy-%)

$(B)/progs/rust-v0-%: tests/progs/rust/%.rs
	@mkdir -p $(dir $@)
	MAKEFLAGS= $(RUSTC) $(RUST_FLAGS) -C symbol-mangling-version=v0 -o $@ $<

$(B)/progs/rust-legacy-%: tests/progs/rust/%.rs
	@mkdir -p $(dir $@)
	MAKEFLAGS= $(RUSTC) $(RUST_FLAGS) -o $@ $<
endif

# Unit tests: cmocka, white-box, built with the sanitizer when one is set.
# Each links its test .c with three static libraries, in this order, and
# the linker takes from them only the objects the test needs (no list of
# sources per test):
#   $(B)/libymtest.a        tests/lib/: fixtures shared between tests
#   $(B)/libymagent-test.a  the agent's modules that run outside a
#                           process's malloc (tables, backing, unwinder,
#                           resume, shm/create.c), compiled like ymtop's
#                           objects, with TUI_CFLAGS (so with $(SAN)), not
#                           with AGENT_CFLAGS (-fvisibility=hidden is moot in
#                           a static link; the tests never used those flags)
#   $(B)/libymtop.a         ymtop's objects but main.o
# The linker takes an archive member for ANY symbol still undefined, libc's
# too: so the agent's interposers are never in libymagent-test.a (hooks.c
# defines malloc and free, hooks_life.c _exit and setuid, hooks_mmap.c
# mmap, hooks_exec.c execve, hooks_jemalloc.c mallocx, hooks_cxx.c
# operator new,
# got.c patches GOTs: a test calling malloc would get the agent in itself),
# nor life.c, which holds the agent's constructor.
# UNIT_LIBS_<test> adds a test's own libraries.
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/unit/%)
TUI_LIB_OBJ := $(filter-out %/tui/main.o,$(TUI_OBJ))
TEST_LIB_SRC := $(wildcard tests/lib/*.c)
TEST_LIB_OBJ := $(TEST_LIB_SRC:%.c=$(B)/tui/%.o)
AGENT_TEST_SRC := $(filter-out injector/agent/hooks.c injector/agent/hooks_life.c injector/agent/got.c \
                    injector/agent/hooks_mmap.c injector/agent/hooks_jemalloc.c \
                    injector/agent/hooks_cxx.c \
                    injector/agent/hooks_exec.c \
                    injector/agent/life.c injector/agent/detach.c $(TUI_SRC),$(AGENT_SRC))
AGENT_TEST_OBJ := $(AGENT_TEST_SRC:%.c=$(B)/tui/%.o)
UNIT_ARCHIVES := $(B)/libymtest.a $(B)/libymagent-test.a $(B)/libymtop.a
# The agent's modules in the unit tests' archive keep counts of their
# work that only the tests read (YM_AGENT_TEST), never in libymagent.so.
$(AGENT_TEST_OBJ): TUI_CFLAGS += -DYM_AGENT_TEST=1
# SANITIZER=thread: the agent's modules keep their fences, which TSan
# does not model (gcc says so of each: an error with -Werror).  The fences
# publish one thread's seqcount writes to readers in other threads; the
# unit tests call those modules from one thread, and tests/tsan, which
# runs them from several, is built with the same flag.  ymtop's own
# objects have one fence, in segment.h, which says why it is let be.
ifneq ($(findstring thread,$(SANITIZER)),)
$(AGENT_TEST_OBJ): TUI_CFLAGS += $(TSAN_WNO)
endif
UNIT_LIBS_test_unwind := -lunwind -ldl -lpthread -lstdc++

$(B)/libymtop.a: $(TUI_LIB_OBJ)
$(B)/libymagent-test.a: $(AGENT_TEST_OBJ)
$(B)/libymtest.a: $(TEST_LIB_OBJ)
$(UNIT_ARCHIVES):
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/unit/%: tests/unit/%.c $(UNIT_ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TUI_CFLAGS) -DYM_ASSERTS=1 -Itests/lib -o $@ $< $(UNIT_ARCHIVES) \
	  $(UNIT_LIBS_$*) $(shell $(PKG_CONFIG) --libs cmocka) $(TUI_LIBS)

# test_unwind's libraries, loaded with dlopen from its directory: the same
# code with and without frame pointers, C++, and two libraries of one
# layout with frames of different sizes (tests/unit/unwind/).
UW_LIBS := $(addprefix $(B)/unit/,libuw_fp.so libuw_nofp.so libuw_cxx.so \
             libuw_swap_a.so libuw_swap_b.so)
$(B)/unit/test_unwind: $(UW_LIBS)

$(B)/unit/libuw_fp.so $(B)/unit/libuw_nofp.so: $(B)/unit/libuw_%.so: tests/unit/unwind/lib.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 -g $(WARN) -fPIC -shared \
	  $(if $(filter fp,$*),-fno-omit-frame-pointer,-fomit-frame-pointer) \
	  -DPREFIX=uw_$*_ -o $@ $<

$(B)/unit/libuw_cxx.so: tests/unit/unwind/lib.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $<

$(B)/unit/libuw_swap_a.so $(B)/unit/libuw_swap_b.so: $(B)/unit/libuw_swap_%.so: tests/unit/unwind/swap.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 $(WARN) -fPIC -shared \
	  $(if $(filter a,$*),-DFRAME='"24"' -DFILL='"16"',-DFRAME='"56"' -DFILL='"24"') \
	  -o $@ $<

unit: $(UNIT_BIN)

progs: $(PROGS)

# ThreadSanitizer: the agent's tables with concurrent writer threads and a
# concurrent segment reader (tests/tsan; the agent itself cannot run under
# TSan, whose runtime owns malloc).  Always built with -fsanitize=thread,
# whatever SANITIZER says; tests/run.sh runs it with the unit tests.
TSAN_SRC := tests/tsan/test_tsan_tables.c injector/agent/table.c injector/agent/live.c \
            injector/agent/os.c injector/agent/trend.c \
            injector/agent/backing.c injector/agent/base.c injector/agent/clock.c \
            shm/layout.c shm/reader.c
TSAN_BIN := $(B)/unit/test_tsan_tables
$(TSAN_BIN): $(TSAN_SRC) $(wildcard shm/*.h injector/agent/*.h include/ymtop/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CPPFLAGS)) $(BASE_CFLAGS) -DYM_ASSERTS=1 -Iinjector \
	  -fsanitize=thread $(TSAN_WNO) -o $@ $(TSAN_SRC) \
	  $(shell $(PKG_CONFIG) --libs cmocka) -lpthread

# The Python tests import their helpers (tests/lib/ymlib.py) as a module of
# PYTHONPATH, as tests/run.sh sets it; the benchmarks that time a test's
# own functions also import from tests/integration.
TEST_PYTHONPATH := $(CURDIR)/tests/lib

# ---- Torture suite (tests/stress): programs run with and without the agent
# by tests/stress/test_stress.py (never sanitized: they host the agent).
STRESS_C    := $(wildcard tests/stress/*.c)
STRESS_CXX  := $(wildcard tests/stress/*.cc)
STRESS_BIN  := $(STRESS_C:tests/stress/%.c=$(B)/stress/%) \
               $(STRESS_CXX:tests/stress/%.cc=$(B)/stress/%)

$(B)/stress/%: tests/stress/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer $(WARN) -o $@ $< -lpthread -ldl

$(B)/stress/%: tests/stress/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -o $@ $< -lpthread

# ThreadSanitizer over ymtop's code and the unit tests (the agent itself
# is never sanitized): the build in build-thread/, then every unit test,
# a line for each that fails.  TSan reports make a test fail
# (-fno-sanitize-recover=all, halt_on_error).
tsan:
	@$(MAKE) --no-print-directory SANITIZER=thread tsan-run

tsan-run: all $(UNIT_BIN) $(TSAN_BIN)
	@fail=0; for t in $(UNIT_BIN) $(TSAN_BIN); do \
	  TSAN_OPTIONS=halt_on_error=1 timeout 300 $$t >$$t.out 2>&1 || \
	    { echo "FAIL $$t (its output: $$t.out)"; fail=1; }; \
	done; [ $$fail = 0 ] && echo "tsan: every unit test passed"; exit $$fail

stress: all $(STRESS_BIN) $(B)/progs/libplugin.so
	@YM_BUILD=$(B) PYTHONPATH=$(TEST_PYTHONPATH) python3 tests/stress/test_stress.py

# ---- Fuzzing the segment reader (tests/fuzz), needs clang's libFuzzer ----
#   make fuzz-smoke   a short bounded run (part of check; skipped without clang)
#   make soak         the fuzzer for FUZZ_SECONDS (default 600)
# The seed corpus is real segments from the workload under the agent
# (tests/fuzz/make_seeds.sh); new inputs the fuzzer finds go to
# $(B)/fuzz/corpus, crashes to $(B)/fuzz/crash-*.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_SRC     := tests/fuzz/fuzz_segment.c tui/model/model.c tui/model/shortlived.c \
                tui/model/trend.c tui/fmt.c shm/layout.c shm/reader.c
FUZZ_BIN     := $(B)/fuzz/fuzz_segment
FUZZ_SEEDS   := $(B)/fuzz/seeds
FUZZ_RUN      = mkdir -p $(B)/fuzz/corpus && $(FUZZ_BIN) -max_len=131072 \
                -timeout=10 -rss_limit_mb=2048 -artifact_prefix=$(B)/fuzz/ \
                $(B)/fuzz/corpus $(FUZZ_SEEDS)
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)

$(FUZZ_BIN): $(FUZZ_SRC) $(wildcard shm/*.h tui/model/model.h tui/model/trend.h tui/proc.h include/ymtop/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -Iinclude -Ishm -Itui $(STD) -O1 -g $(WARN) \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $@ $(FUZZ_SRC) -lbsd -lm

$(FUZZ_SEEDS)/.done: tests/fuzz/make_seeds.sh $(B)/libymagent.so $(ABI_NEWER) $(B)/progs/workload $(B)/progs/libplugin.so
	rm -rf $(FUZZ_SEEDS)
	tests/fuzz/make_seeds.sh $(B) $(FUZZ_SEEDS)
	@touch $@

fuzz-smoke:
ifeq ($(HAVE_FUZZ_CC),)
	@echo "fuzz-smoke: skipped ($(FUZZ_CC) not found)"
else
	@$(MAKE) --no-print-directory $(FUZZ_BIN) $(FUZZ_SEEDS)/.done
	@$(FUZZ_BIN) tests/fuzz/regress/* 2>$(B)/fuzz/regress.log \
	  || { tail -n 40 $(B)/fuzz/regress.log; echo "fuzz-smoke: a regression input FAILED"; exit 1; }
	@$(FUZZ_RUN) -runs=20000 -max_total_time=20 2>$(B)/fuzz/smoke.log \
	  && echo "fuzz-smoke: ok ($$(grep -o 'Done [0-9]* runs' $(B)/fuzz/smoke.log))" \
	  || { tail -n 40 $(B)/fuzz/smoke.log; echo "fuzz-smoke: FAILED (see $(B)/fuzz/)"; exit 1; }
endif

soak:
ifeq ($(HAVE_FUZZ_CC),)
	@echo "soak: $(FUZZ_CC) not found"; exit 1
else
	@$(MAKE) --no-print-directory $(FUZZ_BIN) $(FUZZ_SEEDS)/.done
	$(FUZZ_RUN) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1
endif

# clang's static analyzer over ymtop, the agent and the torture programs,
# in a tree of its own; fails on any finding (report in $(B)-analyze/report).
# vfork is what stress_fork tests, on purpose.
analyze:
	rm -rf $(B)-analyze
	scan-build --status-bugs -o $(B)-analyze/report \
	  -disable-checker security.insecureAPI.vfork \
	  $(MAKE) --no-print-directory B=$(B)-analyze all $(STRESS_BIN:$(B)/%=$(B)-analyze/%)

# The build before the tests runs a job a CPU (JOBS=1 for a serial one);
# the tests themselves run one file at a time (tests/run.sh).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)

check: check-deps
	@$(MAKE) --no-print-directory -j$(JOBS) all $(PROGS) $(UNIT_BIN) $(TSAN_BIN) $(STRESS_BIN) $(ABI_NEWER) $(OLD_GLIBC) \
	  $(MUSL_AGENT) $(MUSL_PROGS) fuzz-smoke
	@YM_BUILD=$(B) tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory all $(B)/progs/demo
	@tests/demo.sh $(B)

# The peers and programs make bench compares with (not needed by check),
# tmux for ymtop's own cost on screen, libunwind for unwind_bench.
BENCH_DEB_PKGS := libjemalloc2 heaptrack valgrind sqlite3 g++ time tmux python3 \
                  libunwind-dev curl util-linux
# The field trial (tests/bench/pg_fleet.py): PostgreSQL and pgbench, a
# self-signed certificate, Debian's prometheus scraping over https.
BENCH_DEB_PKGS += postgresql postgresql-contrib prometheus openssl

bench-deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS) $(BENCH_DEB_PKGS)"

# The allocators whose statistics heapstats_bench times.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
JEMALLOC_LIB := /usr/lib/$(MULTIARCH)/libjemalloc.so.2
TCMALLOC_LIB := /usr/lib/$(MULTIARCH)/libtcmalloc_minimal.so.4

bench: bench-deps all
	@$(MAKE) --no-print-directory $(B)/bench/allocbench $(B)/bench/manystacks \
	  $(SHIM_LIBS) $(B)/progs/inject_read $(B)/progs/inject_threads $(B)/progs/manysites \
	  $(B)/bench/unwind_bench $(B)/bench/samplecost $(B)/bench/heapstats_bench \
	  $(B)/bench/spawnloop $(B)/bench/libempty.so $(B)/progs/allocs \
	  $(B)/bench/resident_bench $(B)/bench/trendwrite $(B)/progs/trendprog
	@tests/bench/run.sh $(B)
	@YM_BUILD=$(B) python3 tests/bench/detach.py 7 5
	@tests/bench/fastpath.sh $(B)
	@tests/bench/exactcost.sh $(B)
	@$(B)/bench/resident_bench
	@tests/bench/spawncost.sh $(B)
	@$(B)/bench/unwind_bench
	@tests/bench/samplecost.sh $(B)
	@tests/bench/budget.sh $(B)
	@tests/bench/trendcost.sh $(B)
	@tests/bench/trend_quality.sh $(B)
	@python3 tests/bench/pycost.py $(B) 7
	@for l in "" $(JEMALLOC_LIB) $(TCMALLOC_LIB); do \
	  [ -z "$$l" ] || [ -e "$$l" ] || continue; \
	  LD_PRELOAD=$$l $(B)/bench/heapstats_bench 4 1024; done
	@tests/bench/tui_cost.sh $(B) 30
	@tests/bench/scrape.sh $(B) 10 14 9
	@tests/bench/scrape.sh $(B) 10 11 9
	@YM_BUILD=$(B) python3 tests/bench/fleet_scale.py 10 100 300
	@YM_BUILD=$(B) python3 tests/bench/pg_fleet.py -R 1000 10 50 100 200
	@if command -v $(MUSL_CC) >/dev/null; then \
	  $(MAKE) --no-print-directory $(MUSL_AGENT) $(MUSL_BENCH) && \
	  tests/bench/musl.sh $(B); fi
	@YM_BUILD=$(B) PYTHONPATH=$(TEST_PYTHONPATH):$(CURDIR)/tests/integration \
	  python3 tests/bench/inject_timing.py
	@YM_BUILD=$(B) PYTHONPATH=$(TEST_PYTHONPATH):$(CURDIR)/tests/integration \
	  python3 tests/bench/sym_speed.py

# The agent's unwinder against libunwind's unw_backtrace, per call.
UNWIND_BENCH_SRC := injector/agent/unwind.c injector/agent/compat.c injector/agent/loader.c
$(B)/bench/unwind_bench: tests/bench/unwind_bench.c $(UNWIND_BENCH_SRC) injector/agent/unwind.h \
                         injector/agent/compat.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 -g $(WARN) -Iinjector -o $@ tests/bench/unwind_bench.c \
	  $(UNWIND_BENCH_SRC) -lunwind

# The resident figures' cost per refresh, on ymtop's own code.
$(B)/bench/resident_bench: tests/bench/resident_bench.c $(B)/libymtop.a
	@mkdir -p $(dir $@)
	$(CC) $(TUI_CFLAGS) $(CPPFLAGS) -o $@ $< $(B)/libymtop.a $(TUI_LIBS)

$(B)/bench/%: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 -g $(WARN) -o $@ $< -lpthread -lm

# The floor under the agent's cost (tests/bench/shim.c): libshim.so only
# forwards malloc/free/calloc/realloc to glibc, libshimcount.so also keeps
# exact per-thread totals (-DSHIM_COUNT).  Built like the agent: initial-exec
# TLS, no PLT, bound at load.
SHIM_LIBS := $(B)/bench/libshim.so $(B)/bench/libshimcount.so $(B)/bench/libshimtail.so

# A library that defines nothing: the cost of preloading any library
# (tests/bench/spawncost.sh).
$(B)/bench/libempty.so: tests/bench/empty.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 $(WARN) -shared -fPIC -Wl,-z,now -o $@ $<

$(SHIM_LIBS): $(B)/bench/lib%.so: tests/bench/shim.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 -g $(WARN) -shared -fPIC -ftls-model=initial-exec -fno-plt \
	  $(if $(filter shimcount,$*),-DSHIM_COUNT) \
	  $(if $(filter shimtail,$*),-DSHIM_COUNT -DSHIM_TAIL) -Wl,-z,now -o $@ $<

# The musl agent's fast path (make bench, tests/bench/musl.sh): against
# a forwarding shim built by musl-gcc (libshim-musl.so, -DSHIM_NEXT) and
# against the same agent with initial-exec TLS (preloadable only), on
# allocbench built by musl-gcc.
MUSL_BENCH := $(B)/bench/musl/allocbench $(B)/bench/musl/libshim-musl.so \
	$(B)/bench/musl-ie/libymagent-musl.so
MUSL_IE_OBJ := $(AGENT_SRC:%.c=$(B)/musl-ie/%.o)

$(B)/bench/musl/allocbench: tests/bench/allocbench.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(STD) -O2 -g $(WARN) -o $@ $<

$(B)/bench/musl/libshim-musl.so: tests/bench/shim.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(STD) -O2 -g $(WARN) -shared -fPIC -ftls-model=initial-exec \
	  -fno-plt -DSHIM_NEXT -Wl,-z,now -o $@ $<

$(MUSL_IE_OBJ): injector/agent/compat.h
$(B)/musl-ie/%.o: %.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(CPPFLAGS) -DYM_BENCH_MUSL_IE $(AGENT_COMPAT) $(AGENT_CFLAGS) -c $< -o $@

$(B)/bench/musl-ie/libymagent-musl.so: $(MUSL_IE_OBJ)
	@mkdir -p $(dir $@)
	$(MUSL_CC) -shared -Wl,--eh-frame-hdr -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@ $^

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/ymtop \
	  $(DESTDIR)$(PREFIX)/include/ymtop $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(B)/ymtop $(DESTDIR)$(PREFIX)/bin/ymtop
	install -m 644 $(B)/libymagent.so $(DESTDIR)$(PREFIX)/lib/ymtop/libymagent.so
	@# The musl agent (make check, or make $(MUSL_AGENT)) goes beside it.
	if [ -f $(MUSL_AGENT) ]; then install -m 644 $(MUSL_AGENT) \
	  $(DESTDIR)$(PREFIX)/lib/ymtop/libymagent-musl.so; fi
	install -m 644 include/ymtop/*.h $(DESTDIR)$(PREFIX)/include/ymtop/
	install -m 644 man/ymtop.1 $(DESTDIR)$(PREFIX)/share/man/man1/ymtop.1
	install -m 644 man/ymagent.7 $(DESTDIR)$(PREFIX)/share/man/man7/ymagent.7

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
